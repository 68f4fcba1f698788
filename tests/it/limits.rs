//! Limits per session (issue 35): each local session in a cgroup of its own below the daemon's,
//! with the limits it was spawned under enforced by the kernel. Real cgroup v1 hierarchies of
//! this machine (`/sys/fs/cgroup`), real processes, the daemon in-process.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use atc::config::{AgentConfig, Config};
use atc::providers::local::cgroup::hierarchy::Controller;
use atc::providers::local::cgroup::{tag_for, SessionCgroups};
use atc_testkit::wait::poll_ok;
use atc_testkit::{id_of, test_config, TestDaemon};
use serde_json::{json, Value};

fn sh(script: &str) -> AgentConfig {
    AgentConfig {
        bin: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        ..Default::default()
    }
}

fn config() -> Config {
    let mut c = test_config();
    // Allocates and touches 512 MiB, then waits: past any limit the tests set.
    c.agents.insert(
        "hog".into(),
        sh("echo hog-start; exec python3 -c \"b = bytearray(512 << 20); input()\""),
    );
    // Starts a process that leaves the session's group and session (as Codex's app-server
    // does), prints its pid, then waits.
    c.agents.insert(
        "escaper".into(),
        sh("setsid sleep 1000 & echo \"escaped:$!\"; exec cat"),
    );
    // Burns a core for as long as it runs.
    c.agents.insert("spinner".into(), sh("while :; do :; done"));
    // Touches 64 MiB and prints what it has by its own count (resident memory, CPU time).
    c.agents.insert(
        "counter".into(),
        sh(concat!(
            "exec python3 -c \"",
            "import os, time\n",
            "b = bytearray(64 << 20)\n",
            "end = time.process_time() + 0.3\n",
            "while time.process_time() < end: pass\n",
            "rss = [l for l in open('/proc/self/status') if l.startswith('VmRSS')][0].split()[1]\n",
            "print('own', int(rss) * 1024, time.process_time(), flush=True)\n",
            "input()\"",
        )),
    );
    c.agents.insert(
        "forker".into(),
        // The bomb goes off in a subshell: a shell that cannot fork gives up, and the
        // session's own process must outlive it to be killed.
        sh("echo forking; (bomb() { bomb | bomb & }; bomb); exec cat"),
    );
    c
}

/// The cgroups of the daemon on `state_dir` (made by it already; finding them again only
/// re-reads where they are).
fn cgroups_of(state_dir: &Path) -> SessionCgroups {
    SessionCgroups::detect(Path::new("/sys/fs/cgroup"), &tag_for(state_dir))
        .expect("this machine has writable cgroup v1 hierarchies")
}

fn session_dir(state_dir: &Path, id: &str, c: Controller) -> PathBuf {
    cgroups_of(state_dir)
        .group(id.parse().unwrap())
        .dir(c)
        .unwrap()
        .to_path_buf()
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_string()
}

async fn daemon_with(config: Config) -> (TestDaemon, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config).await;
    (d, tmp)
}

async fn spawn_limited(d: &TestDaemon, agent: &str, limits: Value) -> Value {
    d.spawn_with(json!({"agent": agent, "cwd": "/tmp", "limits": limits}))
        .await
}

fn pid_alive(pid: i32) -> bool {
    // A zombie is gone for this purpose: it runs nothing and holds nothing but its pid.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

#[actix_rt::test]
async fn a_session_past_its_memory_limit_is_killed_with_its_reason_and_its_neighbour_goes_on() {
    let (d, _tmp) = daemon_with(config()).await;
    let neighbour = id_of(&d.spawn("cat").await);
    let hog = spawn_limited(&d, "hog", json!({"memoryMiB": 64})).await;
    assert_eq!(hog["limits"], json!({"memoryMiB": 64}), "{hog}");
    let id = id_of(&hog);
    assert_eq!(
        read(session_dir(&d.state_dir, &id, Controller::Memory).join("memory.limit_in_bytes")),
        (64u64 << 20).to_string()
    );
    let ended = d
        .wait_session(&id, "ended at its memory limit", |s| s["alive"] == false)
        .await;
    assert_eq!(ended["exitReason"], "memory_limit", "{ended}");
    assert_eq!(ended["exitSignal"], 9, "{ended}");
    assert_eq!(ended["lastMsg"], "killed at its memory limit", "{ended}");
    // The trail keeps it.
    let rows = d
        .wait_trail(&id, "the limit's kill", |rows| {
            rows.iter().any(|r| r["event"] == "LimitKilled")
        })
        .await;
    let row = rows.iter().find(|r| r["event"] == "LimitKilled").unwrap();
    assert_eq!(
        row["message"], "killed at its memory limit of 64 MiB",
        "{row}"
    );
    assert_eq!(row["kind"], "memory_limit", "{row}");
    // The neighbour and the daemon carry on.
    d.submit(&neighbour, "still-here").await;
    d.wait_screen(&neighbour, "still-here").await;
    let (status, _) = d.call("GET", "/v1/health", None).await;
    assert_eq!(status, 200);
    // Counted, without a per-session label.
    let metrics = metrics_text(&d).await;
    assert!(
        metrics.contains("atc_session_limit_kills_total{limit=\"memory\"} 1"),
        "{metrics}"
    );
    // The neighbour still runs, so the fleet's figures are there.
    for family in [
        "atc_sessions_memory_bytes ",
        "atc_sessions_pids ",
        "atc_sessions_cpu_seconds_total ",
    ] {
        assert!(metrics.contains(family), "no {family}in {metrics}");
    }
    d.stop().await;
}

async fn metrics_text(d: &TestDaemon) -> String {
    let mut resp = atc_testkit::http_client()
        .get(format!("{}/metrics", d.url))
        .bearer_auth(&d.token)
        .send()
        .await
        .expect("metrics");
    String::from_utf8_lossy(&resp.body().await.expect("metrics body")).into_owned()
}

#[actix_rt::test]
async fn a_fork_bomb_stops_at_its_pids_limit_and_the_kill_ends_every_process() {
    let (d, _tmp) = daemon_with(config()).await;
    let bomb = spawn_limited(&d, "forker", json!({"pids": 256})).await;
    let id = id_of(&bomb);
    let pids_dir = session_dir(&d.state_dir, &id, Controller::Pids);
    // It reaches its limit: the kernel refuses forks past it.
    poll_ok(Duration::from_secs(30), async || {
        let events = read(pids_dir.join("pids.events"));
        let refused: u64 = events
            .strip_prefix("max ")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if refused > 0 {
            Ok(())
        } else {
            Err(events)
        }
    })
    .await
    .unwrap_or_else(|e| panic!("the bomb never hit its limit: {e}"));
    let peak: u32 = read(pids_dir.join("pids.current")).parse().unwrap();
    assert!(peak <= 256, "{peak} processes");
    // The daemon answers meanwhile, and the usage says the same.
    let (status, _) = d.call("GET", "/v1/health", None).await;
    assert_eq!(status, 200);
    let s = d.session(&id).await;
    assert_eq!(s["alive"], true, "{s}");
    assert!(s["usage"]["pids"].as_u64().unwrap() <= 256, "{s}");
    let listed = d.descriptor(&id).await;
    assert!(listed.usage.is_some());
    let members = cgroups_of(&d.state_dir)
        .group(id.parse().unwrap())
        .processes();
    assert!(members.len() > 1);
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/kill"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    d.wait_session(&id, "killed", |s| s["alive"] == false).await;
    for pid in members {
        assert!(
            !pid_alive(pid),
            "process {pid} of the bomb outlived its kill"
        );
    }
    assert!(!pids_dir.exists(), "the session's cgroup outlived it");
    d.stop().await;
}

#[actix_rt::test]
async fn a_process_that_left_the_sessions_group_ends_with_the_session() {
    let (d, _tmp) = daemon_with(config()).await;
    let id = id_of(&d.spawn("escaper").await);
    let pid = escaped_pid(&d, &id).await;
    // Really out of the session's group and session: it leads a session of its own (once
    // `setsid` has run, a moment after the echo).
    poll_ok(Duration::from_secs(5), async || {
        let stat = read(PathBuf::from(format!("/proc/{pid}/stat")));
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        if fields[3] == pid.to_string() {
            Ok(())
        } else {
            Err(stat)
        }
    })
    .await
    .unwrap_or_else(|stat| panic!("it never left the session: {stat}"));
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/kill"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    d.wait_session(&id, "killed", |s| s["alive"] == false).await;
    poll_ok(Duration::from_secs(5), async || {
        if pid_alive(pid) {
            Err(())
        } else {
            Ok(())
        }
    })
    .await
    .unwrap_or_else(|()| panic!("process {pid} outlived its session's kill"));
    d.stop().await;
}

/// The pid an `escaper` session printed.
async fn escaped_pid(d: &TestDaemon, id: &str) -> i32 {
    let screen = d.wait_screen(id, "escaped:").await.to_string();
    screen
        .split("escaped:")
        .nth(1)
        .and_then(|rest| {
            rest.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .ok()
        })
        .expect("the escaped pid on screen")
}

#[actix_rt::test]
async fn a_daemons_stop_ends_what_left_its_sessions_groups() {
    let (d, _tmp) = daemon_with(config()).await;
    let id = id_of(&d.spawn("escaper").await);
    let pid = escaped_pid(&d, &id).await;
    assert!(pid_alive(pid));
    let state_dir = d.state_dir.clone();
    d.stop().await;
    assert!(!pid_alive(pid), "process {pid} outlived the daemon's stop");
    let parent = cgroups_parent(&state_dir);
    assert!(!parent.exists(), "the daemon's cgroup outlived its stop");
}

/// Where the daemon on `state_dir` keeps its sessions' cgroups in the pids hierarchy, without
/// making it (as finding the cgroups again would).
fn cgroups_parent(state_dir: &Path) -> PathBuf {
    Path::new("/sys/fs/cgroup/pids").join(format!("atc-{}", tag_for(state_dir)))
}

#[actix_rt::test]
async fn a_cpu_cap_holds_by_the_cgroups_own_accounting() {
    let (d, _tmp) = daemon_with(config()).await;
    let id = id_of(&spawn_limited(&d, "spinner", json!({"cpuPercent": 20})).await);
    let cpuacct = session_dir(&d.state_dir, &id, Controller::Cpuacct).join("cpuacct.usage");
    let ns = |p: &PathBuf| -> u64 { read(p.clone()).parse().unwrap() };
    let (t0, c0) = (Instant::now(), ns(&cpuacct));
    // Wait for half a second of its CPU time, however long that takes at its cap.
    poll_ok(Duration::from_secs(20), async || {
        if ns(&cpuacct) >= c0 + 500_000_000 {
            Ok(())
        } else {
            Err(())
        }
    })
    .await
    .unwrap_or_else(|()| panic!("the spinner got no CPU"));
    let (t1, c1) = (Instant::now(), ns(&cpuacct));
    let share = (c1 - c0) as f64 / 1e9 / (t1 - t0).as_secs_f64();
    assert!(
        share < 0.3,
        "a 20 % cap let it use {:.0} % of a core",
        share * 100.0
    );
    let usage = d.session(&id).await["usage"]["cpuSeconds"]
        .as_f64()
        .unwrap();
    assert!(usage >= (c1 as f64) / 1e9 - 0.01, "{usage}");
    d.stop().await;
}

#[actix_rt::test]
async fn usage_agrees_with_the_processs_own_count() {
    let (d, _tmp) = daemon_with(config()).await;
    let id = id_of(&d.spawn("counter").await);
    let screen = d.wait_screen(&id, "own ").await.to_string();
    let own: Vec<f64> = screen
        .split("own ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .take(2)
        .map(|v| v.trim_matches(|c: char| !c.is_ascii_digit() && c != '.'))
        .map(|v| v.parse().unwrap())
        .collect();
    let (rss, cpu) = (own[0], own[1]);
    let usage = d
        .descriptor(&id)
        .await
        .usage
        .expect("usage of a live session");
    let listed: atc_protocol::responses::SessionList = d.get("/v1/sessions").await;
    let in_list = listed
        .sessions
        .iter()
        .find(|s| s.id.to_string() == id)
        .and_then(|s| s.usage)
        .expect("usage in the listing");
    assert!(in_list.memory_bytes > 0);
    // The cgroup counts the process's resident pages and a little of the kernel's for it.
    let memory = usage.memory_bytes as f64;
    assert!(
        memory >= rss * 0.9 && memory <= rss + 48.0 * 1024.0 * 1024.0,
        "cgroup {memory} against the process's own {rss}"
    );
    assert!(usage.memory_peak_bytes >= usage.memory_bytes);
    assert!(
        usage.cpu_seconds >= cpu * 0.9 && usage.cpu_seconds <= cpu + 0.5,
        "cgroup {} s against the process's own {cpu} s",
        usage.cpu_seconds
    );
    assert_eq!(usage.pids, 1, "one process: the shell exec'd python");
    d.stop().await;
}

#[actix_rt::test]
async fn a_spawn_may_lower_configs_ceiling_but_not_raise_it() {
    let mut c = config();
    c.limits.session.memory_mib = Some(256);
    c.limits.session.pids = Some(512);
    if let Some(cat) = c.agents.get_mut("cat") {
        cat.limits = Some(atc_protocol::SessionLimits {
            pids: Some(1024),
            ..Default::default()
        });
    }
    let (d, _tmp) = daemon_with(c).await;
    let (status, body) = d
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"agent": "cat", "cwd": "/tmp", "limits": {"memoryMiB": 512}})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "bad_args");
    assert_eq!(body["error"]["data"]["field"], "limits.memoryMiB");
    assert_eq!(body["error"]["data"]["ceiling"], 256);
    let (status, body) = d
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"agent": "cat", "cwd": "/tmp", "limits": {"pids": 2}})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["data"]["field"], "limits.pids");
    // Lowered where asked, config's ceiling (the agent's over the default) elsewhere.
    let s = spawn_limited(&d, "cat", json!({"memoryMiB": 128})).await;
    assert_eq!(s["limits"], json!({"memoryMiB": 128, "pids": 1024}), "{s}");
    let plain = d.spawn("cat").await;
    assert_eq!(plain["limits"], json!({"memoryMiB": 256, "pids": 1024}));
    // An unknown field is refused, not dropped.
    let (status, body) = d
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"agent": "cat", "cwd": "/tmp", "limits": {"memoryMB": 5}})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    d.stop().await;
}

#[actix_rt::test]
async fn without_writable_cgroups_a_spawn_asking_for_limits_is_refused_and_others_run() {
    let mut c = config();
    // A cgroup root with no hierarchy in it: what a machine without cgroups looks like.
    let empty = tempfile::tempdir().unwrap();
    c.cgroup_root = Some(empty.path().to_path_buf());
    let (d, _tmp) = daemon_with(c).await;
    let (status, body) = d
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"agent": "cat", "cwd": "/tmp", "limits": {"pids": 64}})),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "unsupported_operation");
    assert_eq!(body["error"]["data"]["problem"], "no_cgroups");
    let plain = d.spawn("cat").await;
    let id = id_of(&plain);
    assert_eq!(plain.get("limits"), None);
    assert_eq!(d.session(&id).await.get("usage"), None);
    assert_eq!(
        std::fs::read_dir(empty.path()).unwrap().count(),
        0,
        "nothing made in a root that is not one"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn no_cgroup_is_left_after_forget_or_a_restart_and_a_restore_keeps_the_limits() {
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config()).await;
    let gone = id_of(&spawn_limited(&d, "cat", json!({"memoryMiB": 96})).await);
    let gone_dir = session_dir(tmp.path(), &gone, Controller::Memory);
    assert!(gone_dir.is_dir());
    let (status, _) = d
        .call("DELETE", &format!("/v1/sessions/{gone}"), None)
        .await;
    assert_eq!(status, 200);
    poll_ok(Duration::from_secs(5), async || {
        if gone_dir.exists() {
            Err(())
        } else {
            Ok(())
        }
    })
    .await
    .unwrap_or_else(|()| panic!("a forgotten session's cgroup stays"));
    let kept = id_of(&spawn_limited(&d, "cat", json!({"memoryMiB": 96, "pids": 64})).await);
    d.stop_keep_dir().await;

    // What a daemon killed with SIGKILL leaves: a session cgroup with a process inside.
    let cgroups = cgroups_of(tmp.path());
    let stray = atc_protocol::SessionId::new();
    let group = cgroups.group(stray);
    group.create(&Default::default()).unwrap();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("1000")
        .spawn()
        .unwrap();
    let pid = sleeper.id() as i32;
    for c in [Controller::Pids, Controller::Memory] {
        std::fs::write(group.dir(c).unwrap().join("cgroup.procs"), pid.to_string()).unwrap();
    }

    let d = TestDaemon::start_on(tmp.path(), config()).await;
    // Reaped here: the daemon killed it, but it is this test's child.
    let status = sleeper.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    assert!(!group.dir(Controller::Pids).unwrap().exists());
    // A restore puts the kept session back under its limits.
    let (status, body) = d.call("POST", "/v1/fleet/restore", None).await;
    assert_eq!(status, 200, "{body}");
    let back = d
        .wait_session(&kept, "revived", |s| s["alive"] == true)
        .await;
    assert_eq!(back["limits"], json!({"memoryMiB": 96, "pids": 64}));
    assert_eq!(
        read(session_dir(tmp.path(), &kept, Controller::Memory).join("memory.limit_in_bytes")),
        (96u64 << 20).to_string()
    );
    assert_eq!(
        read(session_dir(tmp.path(), &kept, Controller::Pids).join("pids.max")),
        "64"
    );
    d.stop().await;
}
