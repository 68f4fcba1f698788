//! The scale, spawn and reach phases against the real daemon: the `atc` binary in a child process
//! (the test kit's) on a fresh state dir and port 0.
//! Tiny steps, real PTYs, real shells and `cat`s, real WebSockets; no timing is asserted.
//!
//! The daemon binary is `target/<profile>/atc` beside this test's own binary (`cargo test
//! --workspace` builds it), or `$ATC_BIN` (the test kit's `atc_bin`).

use std::path::Path;
use std::time::Duration;

use atc_testkit::{atc_bin, ChildDaemon, DaemonSpec};

/// Every wait in this test; generous, since the machine may be busy.
const LIMIT: Duration = Duration::from_secs(60);

use crate::common;

/// `atc daemon` in a child process on `dir/state` with a `cat` agent, killed when dropped so a
/// failed test leaves nothing behind.
async fn daemon(dir: &Path) -> ChildDaemon {
    daemon_with(dir, serde_json::json!({"agents": {"cat": {"bin": "cat"}}})).await
}

/// [`daemon`] with `config`.
async fn daemon_with(dir: &Path, config: serde_json::Value) -> ChildDaemon {
    let spec = DaemonSpec {
        start_limit: LIMIT,
        ..DaemonSpec::new(atc_bin(), config)
    };
    ChildDaemon::launch(&spec, &dir.join("state"), &dir.join("daemon.log"))
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

#[actix_rt::test]
async fn a_scale_run_reports_every_step_refuses_one_past_the_ptys_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let daemon = daemon(dir.path()).await;
    let (url, token) = (daemon.url().to_string(), daemon.token().to_string());

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
    let daemon = daemon(dir.path()).await;
    let (url, token) = (daemon.url().to_string(), daemon.token().to_string());

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

#[actix_rt::test]
async fn a_reach_run_times_each_path_as_the_owner_and_as_the_principal_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let daemon = daemon(dir.path()).await;
    let (url, token) = (daemon.url().to_string(), daemon.token().to_string());

    let args = common::args(&[
        "--phases",
        "reach",
        "--reach-sessions",
        "12",
        "--reach-requests",
        "30",
        "--reach-clients",
        "3",
        "--agent",
        "cat",
        "--concurrency",
        "4",
        "--phase-timeout-secs",
        "60",
    ]);
    let (report, json) = common::run(args, url.clone(), token.clone()).await;
    let log = daemon.log();

    let reach = &json["reach"];
    assert_eq!(reach["outcome"], "ok", "{reach:#}\nlog:\n{log}");
    let f = &reach["figures"];
    assert_eq!(f["principal"], "bench", "{f:#}");
    // Without a `principals` key, the principal reaches `local`, where every session runs.
    assert_eq!(f["listedByOwner"], 12, "{f:#}");
    assert_eq!(f["listedByPrincipal"], 12, "{f:#}");
    let paths = f["paths"].as_array().expect("paths");
    let names: Vec<&str> = paths.iter().filter_map(|p| p["path"].as_str()).collect();
    assert_eq!(names, ["get", "list", "resize"], "{f:#}");
    for p in paths {
        for who in ["owner", "principal"] {
            let c = &p[who];
            assert_eq!(c["answered"], 30, "{who} {p:#}");
            assert_eq!(c["failed"], 0, "{who} {p:#}");
            assert_eq!(c["latency"]["count"], 30, "{who} {p:#}");
            assert!(c["perSec"].as_f64().is_some_and(|r| r > 0.0), "{p:#}");
        }
        assert!(
            p["vsOwner"]["p50"].as_f64().is_some_and(|r| r > 0.0),
            "{p:#}"
        );
        assert!(
            p["vsOwner"]["perSec"].as_f64().is_some_and(|r| r > 0.0),
            "{p:#}"
        );
    }
    let cleanup = &reach["cleanup"];
    assert_eq!(cleanup["forgotten"], 12, "{cleanup:#}");
    let client = atc_client::DaemonClient::new(url, token);
    let left = client.list_sessions().await.expect("the daemon lists");
    assert!(left.is_empty(), "sessions left behind: {left:?}");
    let table = report.to_table();
    assert!(table.contains("owner (ceiling)"), "{table}");
    assert!(table.contains("POST /v1/sessions/{id}/resize"), "{table}");
}

#[actix_rt::test]
async fn a_reach_run_refuses_to_time_a_principal_that_does_not_reach_its_sessions() {
    let dir = tempfile::tempdir().expect("temp dir");
    // The sessions go on `side`, a second local target; the principal reaches `local` alone,
    // so it is shown none of them (which it only is if the bench sends X-Atc-As).
    let config = serde_json::json!({
        "agents": {"cat": {"bin": "cat"}},
        "targets": {"local": {"provider": "local-pty"},
                    "side": {"provider": "local-pty", "note": "not granted"}},
        "defaultTarget": "side",
    });
    let daemon = daemon_with(dir.path(), config).await;
    let (url, token) = (daemon.url().to_string(), daemon.token().to_string());
    let args = common::args(&[
        "--phases",
        "reach",
        "--reach-sessions",
        "3",
        "--reach-requests",
        "5",
        "--agent",
        "cat",
        "--phase-timeout-secs",
        "60",
    ]);
    let (_, json) = common::run(args, url.clone(), token.clone()).await;
    let log = daemon.log();
    let reach = &json["reach"];
    assert_eq!(reach["outcome"], "failed", "{reach:#}\nlog:\n{log}");
    let why = reach["error"].as_str().expect("a reason");
    assert!(
        why.starts_with("principal \"bench\" does not reach 3 of the phase's 3 sessions"),
        "{why}"
    );
    assert_eq!(reach["cleanup"]["forgotten"], 3, "{reach:#}");
}
