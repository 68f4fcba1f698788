//! The scale and spawn phases against the real daemon: the `atc` binary in a child process on
//! a fresh state dir and port 0, found as the bench finds any daemon (its `daemon.json` and
//! token).
//! Tiny steps, real PTYs, real shells and `cat`s, real WebSockets; no timing is asserted.
//!
//! The daemon binary is `target/<profile>/atc` beside this test's own binary (`cargo test
//! --workspace` builds it), or `$ATC_BIN`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Every wait in this test; generous, since the machine may be busy.
const LIMIT: Duration = Duration::from_secs(60);

mod common;

/// The `atc` binary built beside this test (`target/<profile>/deps/scale-*` → `target/<profile>/atc`).
fn atc_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("ATC_BIN") {
        return PathBuf::from(bin);
    }
    let me = std::env::current_exe().expect("the test's own path");
    let bin = me
        .parent()
        .and_then(Path::parent)
        .expect("the test runs from target/<profile>/deps")
        .join("atc");
    assert!(
        bin.exists(),
        "no daemon binary at {}: build it first (`cargo build --bin atc`) or set ATC_BIN",
        bin.display()
    );
    bin
}

/// `atc daemon` in a child process, killed when dropped so a failed test leaves nothing behind.
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn start(dir: &Path) -> Daemon {
        let config = dir.join("config.json");
        std::fs::write(&config, r#"{"agents": {"cat": {"bin": "cat"}}}"#).expect("write config");
        let log = dir.join("daemon.log");
        let child = Command::new(atc_bin())
            .arg("daemon")
            .arg("--state-dir")
            .arg(dir.join("state"))
            .args(["--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("create the daemon's log"))
            .spawn()
            .expect("start the atc binary");
        Daemon { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the state dir names a daemon that answers, and returns its URL and token.
    async fn found(&mut self, state_dir: &Path) -> (String, String) {
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Ok(found) = atc_client::discovery::read_state_dir(state_dir) {
                let client =
                    atc_client::DaemonClient::new(found.base_url.clone(), found.token.clone());
                if client.list_sessions().await.is_ok() {
                    return (found.base_url, found.token);
                }
            }
            if let Some(status) = self.child.try_wait().expect("poll the daemon") {
                panic!("the daemon exited with {status}; log:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "no daemon within {LIMIT:?}; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // Best effort: a daemon that already exited has nothing to kill or reap.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[actix_rt::test]
async fn a_scale_run_reports_every_step_refuses_one_past_the_ptys_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut daemon = Daemon::start(dir.path());
    let (url, token) = daemon.found(&dir.path().join("state")).await;

    let args = common::args(&[
        "--phases",
        "scale",
        "--scale-steps",
        // The last step needs more PTYs than any machine here has free: it must be refused
        // before a session of it is spawned, with the first two rows kept.
        "5,20,100000",
        "--agent",
        "cat",
        "--concurrency",
        "4",
        "--phase-timeout-secs",
        "60",
    ]);
    let (report, json) = common::run(args, url.clone(), token.clone()).await;
    let log = daemon.log();

    let scale = &json["scale"];
    assert_eq!(scale["outcome"], "failed", "{scale:#}\nlog:\n{log}");
    let stopped = &scale["figures"]["stopped"];
    assert_eq!(stopped["step"], 100000, "{scale:#}\nlog:\n{log}");
    let why = stopped["reason"].as_str().expect("a reason");
    assert!(
        why.starts_with("refused: 100000 sessions need 99980 more PTYs"),
        "{why}"
    );
    for phase in [
        "spawn",
        "echo",
        "throughput",
        "fanout",
        "slowClient",
        "bareSpawn",
    ] {
        assert!(json.get(phase).is_none(), "{phase} ran: {json:#}");
    }
    let f = &scale["figures"];
    assert!(f["pty"]["max"].as_u64().is_some_and(|m| m > 0), "{f:#}");
    assert!(f["openFileLimit"]["soft"].is_number() || f["openFileLimit"]["soft"] == "unlimited");
    let steps = f["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 2, "{f:#}");
    // A tenth busy, rounded up: 1 of 5, 2 of 20; every busy client still attached.
    for (step, (n, busy)) in steps.iter().zip([(5, 1), (20, 2)]) {
        assert_eq!(step["sessions"], n, "{step:#}");
        assert_eq!(step["busy"], busy, "{step:#}");
        assert_eq!(step["attached"], busy, "{step:#}");
        assert!(step["listed"].as_u64().is_some_and(|l| l >= n), "{step:#}");
        assert_eq!(step["list"]["count"], 20, "{step:#}");
        assert_eq!(step["echo"]["count"], 300, "{step:#}");
        assert!(step["rssKib"].as_u64().is_some_and(|r| r > 0), "{step:#}");
        assert!(step["fds"].as_u64().is_some_and(|fds| fds >= n), "{step:#}");
        assert!(step["idleCpuPct"].is_number(), "{step:#}");
    }
    assert!(f["linearity"]["slopeKibPerSession"].is_number(), "{f:#}");

    let cleanup = &scale["cleanup"];
    assert_eq!(cleanup["sessions"], 20, "{cleanup:#}");
    assert_eq!(cleanup["forgotten"], 20, "{cleanup:#}");
    assert_eq!(cleanup["failed"], 0, "{cleanup:#}");
    let client = atc_client::DaemonClient::new(url, token);
    let left = client.list_sessions().await.expect("the daemon lists");
    assert!(left.is_empty(), "sessions left behind: {left:?}");

    let table = report.to_table();
    let row = |n: &str| table.lines().any(|l| l.trim_start().starts_with(n));
    assert!(row("5 ") && row("20 "), "{table}");
    assert!(table.contains("kernel.pty.max"), "{table}");
}

#[actix_rt::test]
async fn a_spawn_run_reports_rate_memory_and_cpu_per_spawn_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut daemon = Daemon::start(dir.path());
    let (url, token) = daemon.found(&dir.path().join("state")).await;

    let timeline = dir.path().join("timeline.csv");
    let args = common::args(&[
        "--phases",
        "spawn",
        "--sessions",
        "30",
        "--concurrency",
        "4",
        "--agent",
        "cat",
        "--phase-timeout-secs",
        "60",
        "--spawn-timeline",
        timeline.to_str().expect("a UTF-8 temp path"),
    ]);
    let (report, json) = common::run(args, url.clone(), token.clone()).await;
    let log = daemon.log();

    let spawn = &json["spawn"];
    assert_eq!(spawn["outcome"], "ok", "{spawn:#}\nlog:\n{log}");
    let f = &spawn["figures"];
    assert_eq!(f["spawned"], 30, "{f:#}");
    assert_eq!(f["failed"], 0, "{f:#}");
    assert!(f["spawnsPerSec"].as_f64().is_some_and(|r| r > 0.0), "{f:#}");
    assert!(f["rssPerSessionKib"].is_number(), "{f:#}");
    // The daemon is on this machine, so its CPU is read; thirty spawns may fit in one tick.
    assert!(
        f["cpuPerSpawnUs"].as_f64().is_some_and(|us| us >= 0.0),
        "{f:#}"
    );
    // The daemon's own split: one launch a spawn, each waiting for a launcher and taking time.
    let launch = &f["launch"];
    assert_eq!(launch["launches"], 30, "{f:#}");
    assert!(
        launch["waitMeanMs"].as_f64().is_some_and(|ms| ms >= 0.0),
        "{f:#}"
    );
    assert!(
        launch["launchMeanMs"].as_f64().is_some_and(|ms| ms > 0.0),
        "{f:#}"
    );
    // One line a spawn after the header, each sent no earlier than the one before and
    // answered after some time.
    let csv = std::fs::read_to_string(&timeline).expect("the timeline was written");
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("sentMs,latencyMs"));
    let rows: Vec<(f64, f64)> = lines
        .map(|l| {
            let (sent, latency) = l.split_once(',').expect("two columns");
            (
                sent.parse().expect("sentMs"),
                latency.parse().expect("latencyMs"),
            )
        })
        .collect();
    assert_eq!(rows.len(), 30, "{csv}");
    assert!(rows.windows(2).all(|w| w[0].0 <= w[1].0), "{csv}");
    assert!(rows.iter().all(|(_, latency)| *latency > 0.0), "{csv}");
    let cleanup = &spawn["cleanup"];
    assert_eq!(cleanup["forgotten"], 30, "{cleanup:#}");
    let client = atc_client::DaemonClient::new(url, token);
    let left = client.list_sessions().await.expect("the daemon lists");
    assert!(left.is_empty(), "sessions left behind: {left:?}");
    assert!(report.to_table().contains("server CPU per spawn"));
    assert!(report.to_table().contains("launcher wait / launch, mean"));
}
