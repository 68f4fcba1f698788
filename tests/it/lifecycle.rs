//! A session's life and the daemon's: kill with its grace, revive, forget, a restart on the
//! same state dir (graceful, SIGTERM, or SIGKILL of the real binary), fleet restore, and the
//! lock that keeps two daemons off one state dir.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use atc::daemon::state_dir::{read_info, StateDirError};
use atc::daemon::StartError;
use atc_testkit::child_daemon::ChildDaemon;
use atc_testkit::{id_of, poll, test_config, Frame, TestDaemon, Ws, WITHIN};
use serde_json::{json, Value};

/// The kill grace of `test_config()`.
const GRACE: Duration = Duration::from_millis(300);

/// Types `echo` of the shell's pid into a `sh` session and reads it back from the screen. The
/// needle (`pid-TAG-2=`) appears only in the output, never in the typed command.
async fn shell_pid(d: &TestDaemon, id: &str, tag: &str) -> u32 {
    let (status, body) = d
        .call(
            "POST",
            &format!("/v1/sessions/{id}/submit"),
            Some(json!({ "text": format!("echo pid-{tag}-$((1+1))=$$") })),
        )
        .await;
    assert_eq!(status, 200, "submit: {body}");
    let needle = format!("pid-{tag}-2=");
    let screen = d.wait_screen(id, &needle).await;
    let text = screen["text"].as_str().unwrap();
    let at = text.find(&needle).unwrap() + needle.len();
    let digits: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no pid after {needle:?} on screen: {text}"))
}

fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Waits until `/proc/<pid>` is gone.
async fn wait_process_gone(pid: u32) {
    let gone = poll(WITHIN, async || (!process_exists(pid)).then_some(())).await;
    if gone.is_none() {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        panic!("process {pid} still exists after {WITHIN:?}: {status}");
    }
}

/// Reads an attached socket until the `exit` frame; returns the live bytes seen before it and
/// the frame.
async fn bytes_until_exit(ws: &mut Ws) -> (u64, Value) {
    let mut n = 0u64;
    loop {
        match ws.next().await {
            Frame::Binary(b) => n += b.len() as u64,
            Frame::Text(v) if v["type"] == "exit" => return (n, v),
            Frame::Text(_) => {}
            Frame::Close => panic!("closed before the exit frame; seen {:?}", ws.seen),
        }
    }
}

/// Ends a session by typing `exit CODE` and waits until it is listed as exited.
async fn exit_session(d: &TestDaemon, id: &str, code: i32) -> Value {
    d.call(
        "POST",
        &format!("/v1/sessions/{id}/submit"),
        Some(json!({ "text": format!("exit {code}") })),
    )
    .await;
    d.wait_session(id, "exited", |s| s["alive"] == false).await
}

/// Finds a session in a listing by id.
fn listed<'a>(list: &'a Value, id: &str) -> &'a Value {
    list["sessions"]
        .as_array()
        .expect("sessions array")
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("session {id} not listed: {list}"))
}

fn fleet_ids(fleet: &Value) -> Vec<String> {
    let mut ids: Vec<String> = fleet["fleet"]
        .as_array()
        .expect("fleet array")
        .iter()
        .map(|r| r["sessionId"].as_str().expect("sessionId").to_string())
        .collect();
    ids.sort();
    ids
}

/// The real `atc` binary as a daemon in a child process on `state_dir` with the `sh` agent
/// and the test grace, its config and log under `root`.
async fn child_daemon(root: &Path, state_dir: &Path) -> ChildDaemon {
    let config = json!({
        "agents": {"sh": {"bin": "/bin/sh"}},
        "limits": {"killGraceMs": GRACE.as_millis() as u64},
    });
    ChildDaemon::start(state_dir, &config, &root.join("daemon.log")).await
}

/// The binary sizes its descriptor table at start for every descriptor it may open (up to
/// `fd_table::MAX_SLOTS`), so opening one never grows the table with a thread-wide stall, and
/// starts its launcher and blocking threads before any spawn, which would wait for them.
#[actix_rt::test]
async fn the_binary_starts_with_its_descriptor_table_sized_and_its_spawn_threads_running() {
    let root = tempfile::tempdir().unwrap();
    let d = child_daemon(root.path(), &root.path().join("state")).await;
    let status = std::fs::read_to_string(format!("/proc/{}/status", d.pid())).unwrap();
    let slots = atc::daemon::fd_table::slots_in(&status).expect("FDSize");
    // The child inherits this process's limit.
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    let wanted = atc::daemon::fd_table::slots_for(soft);
    assert!(
        slots >= wanted,
        "the daemon's table has {slots} slots; its limit allows {wanted}"
    );
    let threads: Vec<String> = std::fs::read_dir(format!("/proc/{}/task", d.pid()))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|comm| comm.trim().to_string())
        .collect();
    for prefix in ["atc-launch-", "atc-blocking-"] {
        assert!(
            threads.iter().any(|t| t.starts_with(prefix)),
            "no {prefix} thread before the first spawn: {threads:?}"
        );
    }
    d.stop().await;
}

#[actix_rt::test]
async fn kill_waits_out_the_grace_then_sigkills_a_process_that_ignores_sighup() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("stubborn").await);
    // `ready` is printed after the trap is set.
    d.wait_screen(&id, "ready").await;
    let (mut ws, _, _) = d.attach(&id, "cols=80&rows=24").await;
    let started = Instant::now();
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/kill"), None)
        .await;
    let took = started.elapsed();
    assert_eq!(status, 200, "{body}");
    let s = &body["session"];
    assert_eq!(s["id"], id.as_str());
    assert_eq!(s["alive"], false, "{s}");
    assert_eq!(s["state"], "exited", "{s}");
    assert_eq!(s["exitReason"], "killed", "{s}");
    assert_eq!(s["exitSignal"], 9, "{s}");
    assert_eq!(s["exitCode"], Value::Null, "{s}");
    assert!(
        took >= GRACE,
        "kill answered after {took:?}, before the {GRACE:?} grace ran out"
    );
    let exit = ws.next_text("exit").await;
    assert_eq!(exit["reason"], "killed", "{exit}");
    assert_eq!(exit["signal"], 9, "{exit}");
    d.stop().await;
}

#[actix_rt::test]
async fn kill_ends_a_process_that_honours_sighup_by_sighup_without_waiting_out_the_grace() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = test_config();
    // A long grace, so an answer that waited it out cannot pass for a quick one.
    let grace = Duration::from_secs(5);
    config.timings.kill_grace = grace;
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let id = id_of(&d.spawn("sh").await);
    shell_pid(&d, &id, "up").await;
    let started = Instant::now();
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/kill"), None)
        .await;
    let took = started.elapsed();
    assert_eq!(status, 200, "{body}");
    let s = &body["session"];
    assert_eq!(s["alive"], false, "{s}");
    assert_eq!(s["exitReason"], "killed", "{s}");
    assert_eq!(s["exitSignal"], 1, "{s}");
    assert!(
        took < grace,
        "kill of a shell took {took:?}: it waited out the {grace:?} grace"
    );
    d.stop().await;
}

/// Spec §3.7: a kill of a dead session on a target that cannot destroy hosts forgets it; the
/// answer still carries its last descriptor, so the caller learns how it had ended.
#[actix_rt::test]
async fn kill_of_an_exited_session_forgets_it() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let other = id_of(&d.spawn("sh").await);
    exit_session(&d, &id, 4).await;
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/kill"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["forgotten"], true, "{body}");
    let s = &body["session"];
    assert_eq!(s["id"], id.as_str());
    // The last descriptor still tells how it ended.
    assert_eq!(s["exitReason"], "exited", "{s}");
    assert_eq!(s["exitCode"], 4, "{s}");
    // Gone: not gettable, not listed, not in the fleet; the other session is untouched.
    let (status, err) = d.call("GET", &format!("/v1/sessions/{id}"), None).await;
    assert_eq!(status, 404, "{err}");
    assert_eq!(err["error"]["code"], "no_such_session");
    let (_, fleet) = d.call("GET", "/v1/fleet", None).await;
    assert_eq!(fleet_ids(&fleet), vec![other.clone()]);
    assert_eq!(d.session(&other).await["alive"], true);
    d.stop().await;
}

#[actix_rt::test]
async fn revive_runs_a_new_process_under_the_same_id_and_stream_with_offsets_continuing() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let (mut ws, attached, _) = d.attach(&id, "cols=80&rows=24").await;
    let stream = attached["stream"].as_str().unwrap().to_string();
    let first_offset = attached["offset"].as_u64().unwrap();
    let old_pid = shell_pid(&d, &id, "old").await;
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/kill"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    let (seen, exit) = bytes_until_exit(&mut ws).await;
    assert_eq!(exit["reason"], "killed");
    let last_offset = first_offset + seen;
    assert!(seen > 0, "the echo went through the socket");

    let (status, body) = d
        .call(
            "POST",
            &format!("/v1/sessions/{id}/revive"),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let s = &body["session"];
    assert_eq!(s["id"], id.as_str());
    assert_eq!(s["alive"], true, "{s}");
    assert_eq!(s["state"], "running", "{s}");
    assert_eq!(s["exitReason"], Value::Null, "{s}");
    assert_eq!(s["stream"], stream.as_str(), "{s}");

    // The stream goes on where it stopped: a resume from the last offset seen is exact.
    let (_, resumed, _) = d
        .attach(
            &id,
            &format!("cols=80&rows=24&stream={stream}&from={last_offset}"),
        )
        .await;
    assert_eq!(resumed["replay"], "resume", "{resumed}");
    assert_eq!(resumed["offset"].as_u64(), Some(last_offset));
    let (_, fresh, _) = d.attach(&id, "cols=80&rows=24").await;
    assert_eq!(fresh["stream"], stream.as_str());
    assert!(
        fresh["offset"].as_u64().unwrap() >= last_offset,
        "offset went back: {fresh} after {last_offset}"
    );

    let new_pid = shell_pid(&d, &id, "new").await;
    assert_ne!(new_pid, old_pid, "revive reused the old process");
    assert!(
        !process_exists(old_pid),
        "the killed shell {old_pid} is still there"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn revive_of_a_running_session_is_no_such_session() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let pid = shell_pid(&d, &id, "a").await;
    let (status, err) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(status, 404, "{err}");
    assert_eq!(err["error"]["code"], "no_such_session");
    // The running process was left alone.
    assert_eq!(shell_pid(&d, &id, "b").await, pid);
    d.stop().await;
}

#[actix_rt::test]
async fn revive_with_a_bad_size_is_bad_args_naming_the_field_and_starts_nothing() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    exit_session(&d, &id, 0).await;
    let (status, err) = d
        .call(
            "POST",
            &format!("/v1/sessions/{id}/revive"),
            Some(json!({"cols": 0, "rows": 24})),
        )
        .await;
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["error"]["code"], "bad_args");
    assert_eq!(err["error"]["data"]["field"], "cols", "{err}");
    let s = d.session(&id).await;
    assert_eq!(s["alive"], false, "{s}");
    assert_eq!(s["exitReason"], "exited", "{s}");
    d.stop().await;
}

#[actix_rt::test]
async fn a_restarted_daemon_lists_the_previous_sessions_as_daemon_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let d1 = TestDaemon::start_on(tmp.path(), test_config()).await;
    let (_, health1) = d1.call("GET", "/v1/health", None).await;
    let a = id_of(&d1.spawn("sh").await);
    let b = id_of(&d1.spawn("sh").await);
    let (status, body) = d1
        .call(
            "PATCH",
            &format!("/v1/sessions/{a}"),
            Some(json!({"name": "renamed-a"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = d1
        .call(
            "PATCH",
            &format!("/v1/sessions/{b}"),
            Some(json!({"pinned": true})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    d1.stop().await;

    let d2 = TestDaemon::start_on(tmp.path(), test_config()).await;
    let (_, health2) = d2.call("GET", "/v1/health", None).await;
    assert!(health1["daemonId"].is_string());
    assert_eq!(health2["daemonId"], health1["daemonId"]);
    let (status, list) = d2.call("GET", "/v1/sessions", None).await;
    assert_eq!(status, 200);
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(2), "{list}");
    for id in [&a, &b] {
        let s = listed(&list, id);
        assert_eq!(s["state"], "exited", "{s}");
        assert_eq!(s["alive"], false, "{s}");
        assert_eq!(s["exitReason"], "daemon_stopped", "{s}");
    }
    let sa = listed(&list, &a);
    assert_eq!(sa["name"], "renamed-a");
    assert_eq!(sa["namedBy"], "user");
    assert_eq!(sa["pinned"], false);
    let sb = listed(&list, &b);
    assert_eq!(sb["name"], "tmp");
    assert_eq!(sb["namedBy"], "auto");
    assert_eq!(sb["pinned"], true);
    let (status, fleet) = d2.call("GET", "/v1/fleet", None).await;
    assert_eq!(status, 200);
    let mut expected = vec![a.clone(), b.clone()];
    expected.sort();
    assert_eq!(fleet_ids(&fleet), expected, "{fleet}");
    for row in fleet["fleet"].as_array().unwrap() {
        assert_eq!(row["exited"], true, "{row}");
        assert_eq!(row["exitReason"], "daemon_stopped", "{row}");
    }
    d2.stop().await;
}

#[actix_rt::test]
async fn a_session_from_before_a_restart_revives_under_the_same_id() {
    let tmp = tempfile::tempdir().unwrap();
    let d1 = TestDaemon::start_on(tmp.path(), test_config()).await;
    let a = id_of(&d1.spawn("sh").await);
    let b = id_of(&d1.spawn("sh").await);
    d1.stop().await;

    let d2 = TestDaemon::start_on(tmp.path(), test_config()).await;
    let (status, body) = d2
        .call("POST", &format!("/v1/sessions/{a}/revive"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["session"]["id"], a.as_str());
    assert_eq!(body["session"]["alive"], true);
    d2.call(
        "POST",
        &format!("/v1/sessions/{a}/submit"),
        Some(json!({"text": "echo back-$((2+3))"})),
    )
    .await;
    d2.wait_screen(&a, "back-5").await;
    // Only that one came back, and nothing new was listed.
    let (_, list) = d2.call("GET", "/v1/sessions", None).await;
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(2), "{list}");
    assert_eq!(listed(&list, &b)["alive"], false);
    d2.stop().await;
}

#[actix_rt::test]
async fn fleet_restore_revives_daemon_stopped_sessions_but_not_killed_or_exited_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let d1 = TestDaemon::start_on(tmp.path(), test_config()).await;
    let a = id_of(&d1.spawn("sh").await);
    let b = id_of(&d1.spawn("sh").await);
    let killed = id_of(&d1.spawn("sh").await);
    let exited = id_of(&d1.spawn("sh").await);
    let (status, body) = d1
        .call("POST", &format!("/v1/sessions/{killed}/kill"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["session"]["exitReason"], "killed");
    exit_session(&d1, &exited, 0).await;
    d1.stop().await;

    let d2 = TestDaemon::start_on(tmp.path(), test_config()).await;
    let (status, body) = d2.call("POST", "/v1/fleet/restore", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"restored": 2}));
    for id in [&a, &b] {
        let s = d2.wait_session(id, "alive", |s| s["alive"] == true).await;
        assert_eq!(s["state"], "running", "{s}");
    }
    let k = d2.session(&killed).await;
    assert_eq!(k["alive"], false, "{k}");
    assert_eq!(k["exitReason"], "killed", "{k}");
    let e = d2.session(&exited).await;
    assert_eq!(e["alive"], false, "{e}");
    assert_eq!(e["exitReason"], "exited", "{e}");
    // Restored sessions run: they answer input.
    d2.call(
        "POST",
        &format!("/v1/sessions/{b}/submit"),
        Some(json!({"text": "echo restored-$((3*3))"})),
    )
    .await;
    d2.wait_screen(&b, "restored-9").await;
    // Nothing is left to restore.
    let (_, again) = d2.call("POST", "/v1/fleet/restore", None).await;
    assert_eq!(again, json!({"restored": 0}));
    d2.stop().await;
}

#[actix_rt::test]
async fn sessions_of_a_sigkilled_daemon_come_back_as_daemon_stopped_and_revive() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let child = child_daemon(tmp.path(), &dir).await;
    let id = id_of(&child.api().spawn("sh").await);
    shell_pid(child.api(), &id, "child").await;
    child.kill();
    // No graceful stop: daemon.json was left behind.
    assert!(dir.join("daemon.json").exists());

    let d = TestDaemon::start_on(&dir, test_config()).await;
    assert_eq!(read_info(&dir).map(|i| i.pid), Some(std::process::id()));
    let s = d.session(&id).await;
    assert_eq!(s["alive"], false, "{s}");
    assert_eq!(s["state"], "exited", "{s}");
    assert_eq!(s["exitReason"], "daemon_stopped", "{s}");
    // The dead daemon never saw an exit, so none is recorded.
    assert_eq!(s["exitCode"], Value::Null, "{s}");
    assert_eq!(s["exitSignal"], Value::Null, "{s}");
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["session"]["alive"], true);
    shell_pid(&d, &id, "revived").await;
    d.stop().await;
}

#[actix_rt::test]
async fn sigterm_stops_the_binary_with_status_0_recording_sessions_as_daemon_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let mut child = child_daemon(tmp.path(), &dir).await;
    let id = id_of(&child.api().spawn("sh").await);
    let pid = shell_pid(child.api(), &id, "child").await;
    let status = child.terminate().await;
    assert_eq!(status.code(), Some(0), "log:\n{}", child.log());
    assert!(
        !dir.join("daemon.json").exists(),
        "daemon.json left behind; log:\n{}",
        child.log()
    );
    wait_process_gone(pid).await;

    let d = TestDaemon::start_on(&dir, test_config()).await;
    let s = d.session(&id).await;
    assert_eq!(s["alive"], false, "{s}");
    assert_eq!(s["exitReason"], "daemon_stopped", "{s}");
    // A graceful stop hung the shell up and recorded how it ended.
    assert_eq!(s["exitSignal"], 1, "{s}");
    d.stop().await;
}

#[actix_rt::test]
async fn a_second_daemon_on_the_same_state_dir_is_refused_naming_the_first_pid() {
    let d = TestDaemon::start().await;
    match TestDaemon::try_start_on(&d.state_dir, test_config()).await {
        Err(StartError::StateDir(StateDirError::Locked { pid, dir })) => {
            assert_eq!(pid, std::process::id());
            assert_eq!(Path::new(&dir), d.state_dir.as_path());
        }
        Err(other) => panic!("expected Locked, got {other}"),
        Ok(second) => {
            second.stop().await;
            panic!("a second daemon started on a locked state dir");
        }
    }
    // The first one is unharmed.
    let (status, _) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(status, 200);
    assert_eq!(
        read_info(&d.state_dir).map(|i| i.pid),
        Some(std::process::id())
    );
    d.stop().await;
}

#[actix_rt::test]
async fn the_binary_exits_1_naming_the_pid_when_the_state_dir_is_taken() {
    let d = TestDaemon::start().await;
    let out = tokio::task::spawn_blocking({
        let dir = d.state_dir.clone();
        move || {
            Command::new(env!("CARGO_BIN_EXE_atc"))
                .arg("daemon")
                .arg("--state-dir")
                .arg(&dir)
                .args(["--listen", "127.0.0.1:0"])
                .env("ATC_CONFIG", dir.join("no-config.json"))
                .stdin(Stdio::null())
                .output()
                .expect("run the atc binary")
        }
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains(&format!("pid {}", std::process::id())),
        "stderr does not name pid {}: {stderr}",
        std::process::id()
    );
    // It did not take over daemon.json.
    assert_eq!(
        read_info(&d.state_dir).map(|i| i.pid),
        Some(std::process::id())
    );
    d.stop().await;
}

#[actix_rt::test]
async fn a_graceful_stop_removes_daemon_json() {
    let d = TestDaemon::start().await;
    let dir = d.state_dir.clone();
    let info = read_info(&dir).expect("daemon.json while running");
    assert_eq!(info.pid, std::process::id());
    assert_eq!(info.url, d.url);
    let _keep = d.stop_keep_dir().await;
    assert!(!dir.join("daemon.json").exists());
    // The token stays for the next start.
    assert!(dir.join("token").exists());
}

#[actix_rt::test]
async fn forget_of_a_live_session_ends_its_process_and_drops_it_everywhere() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let keep = id_of(&d.spawn("sh").await);
    let pid = shell_pid(&d, &id, "gone").await;
    assert!(process_exists(pid));
    let (status, body) = d.call("DELETE", &format!("/v1/sessions/{id}"), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"forgotten": true, "destroyed": false}));
    let (status, err) = d.call("GET", &format!("/v1/sessions/{id}"), None).await;
    assert_eq!(status, 404, "{err}");
    assert_eq!(err["error"]["code"], "no_such_session");
    let (_, list) = d.call("GET", "/v1/sessions", None).await;
    let ids: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![keep.as_str()]);
    let (_, fleet) = d.call("GET", "/v1/fleet", None).await;
    assert_eq!(fleet_ids(&fleet), vec![keep.clone()], "{fleet}");
    wait_process_gone(pid).await;
    // The other session was not touched.
    assert_eq!(d.session(&keep).await["alive"], true);
    d.stop().await;
}

#[actix_rt::test]
async fn last_used_agent_comes_from_prefs_and_defaults_to_claude() {
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), test_config()).await;
    let (_, info) = d.call("GET", "/v1/daemon", None).await;
    assert_eq!(info["lastUsedAgent"], "claude", "{info}");
    d.stop().await;
    // What a `started` report writes (tests/it/names.rs); written here straight into the store.
    let store = atc::store::StateStore::open(&tmp.path().join("atc.db"))
        .await
        .unwrap();
    store
        .set_pref("last_used_agent", "codex")
        .await
        .unwrap()
        .unwrap();
    store.close().await.unwrap();
    let d = TestDaemon::start_on(tmp.path(), test_config()).await;
    let (_, info) = d.call("GET", "/v1/daemon", None).await;
    assert_eq!(info["lastUsedAgent"], "codex", "{info}");
    d.stop().await;
}

/// The running processes (zombies left out) whose command line holds `marker`, but for one
/// whose parent holds it too: that is the agent's shell forked to run `sleep` and not yet
/// exec'd, a copy of the agent for a moment, not another agent.
fn running_with(marker: &str) -> Vec<u32> {
    let marked: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // After the command's closing parenthesis: the state, then the parent's pid.
            let mut rest = stat.rsplit_once(')')?.1.split_whitespace();
            let zombie = rest.next() == Some("Z");
            let parent = rest.next()?.parse().ok()?;
            let holds = cmdline
                .split(|b| *b == 0)
                .any(|arg| arg == marker.as_bytes());
            (!zombie && holds).then_some((pid, parent))
        })
        .collect();
    marked
        .iter()
        .filter(|(_, parent)| !marked.iter().any(|(pid, _)| pid == parent))
        .map(|(pid, _)| *pid)
        .collect()
}

/// Issue 31: after a `kill -9` of a daemon run by hand, a harness that ignores SIGHUP
/// survived with its parent gone, and `atc restore` then started a second agent beside it.
/// The next daemon ends the survivor's group before it serves (so before any restore), logs
/// it, and the restore runs the one agent.
#[actix_rt::test]
async fn a_harness_that_survived_a_sigkilled_daemon_is_ended_before_the_restore() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let marker = format!("atc-survivor-{}", uuid::Uuid::new_v4());
    let config = json!({
        "agents": {"stubborn": {
            "bin": "/bin/sh",
            // The marker is the script's $0, so it names the agent's shell in /proc.
            "args": ["-c", "trap '' HUP; echo ready; while :; do sleep 1; done", marker],
        }},
        "limits": {"killGraceMs": GRACE.as_millis() as u64},
    });
    let first = ChildDaemon::start(&dir, &config, &tmp.path().join("first.log")).await;
    let id = id_of(&first.api().spawn("stubborn").await);
    first.api().wait_screen(&id, "ready").await;
    let agent = running_with(&marker);
    assert_eq!(agent.len(), 1, "{agent:?}");
    first.kill();
    // The hangup of the closed PTY did not end it: it runs on, its parent gone.
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent[0])).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("PPid:") && !l.contains(&std::process::id().to_string())),
        "{status}"
    );
    assert_eq!(
        running_with(&marker),
        agent,
        "the harness did not survive the kill -9"
    );

    // The next daemon's start, once daemon.json names it, has ended the survivor.
    let second = ChildDaemon::start(&dir, &config, &tmp.path().join("second.log")).await;
    assert_eq!(
        running_with(&marker),
        Vec::<u32>::new(),
        "the survivor still runs"
    );
    let log = second.log();
    assert!(
        log.contains("ended the processes the last daemon left running") && log.contains(&id),
        "log:\n{log}"
    );
    let (status, restored) = second.api().call("POST", "/v1/fleet/restore", None).await;
    assert_eq!(
        (status, restored["restored"].as_u64()),
        (200, Some(1)),
        "{restored}"
    );
    second.api().wait_screen(&id, "ready").await;
    let now = running_with(&marker);
    assert_eq!(now.len(), 1, "one agent runs after the restore: {now:?}");
    assert_ne!(now, agent);
    second.stop().await;
    wait_process_gone(now[0]).await;
}

/// A recorded leader whose pid now names another process is left alone: the next daemon
/// signals only a process whose start time and boot still match.
#[actix_rt::test]
async fn a_recorded_leader_whose_pid_was_reused_is_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let d = TestDaemon::start_on(&dir, test_config()).await;
    let id = id_of(&d.spawn("cat").await);
    d.stop().await;
    // A process of this test takes the role of the pid's new owner: the row claims it, with a
    // start time it does not have.
    let mut stranger = Command::new("/bin/sleep").arg("600").spawn().unwrap();
    let db = dir.join("atc.db");
    let store = atc::store::StateStore::open(&db).await.unwrap();
    let mut rows = store.load_fleet().await.unwrap();
    let row = rows
        .iter_mut()
        .find(|r| r.session_id.to_string() == id)
        .unwrap();
    let real = atc::providers::local::group_leader::GroupLeader::of(
        rustix::process::Pid::from_child(&stranger),
    )
    .unwrap();
    row.leader_pid = Some(real.pid);
    row.leader_start_ticks = Some(real.start_ticks as i64 + 1);
    row.leader_boot_id = Some(real.boot_id);
    store.upsert_session(row.clone()).await.unwrap().unwrap();
    store.close().await.unwrap();

    let d = TestDaemon::start_on(&dir, test_config()).await;
    assert!(
        stranger.try_wait().unwrap().is_none(),
        "a stranger was signalled"
    );
    d.stop().await;
    stranger.kill().unwrap();
    stranger.wait().unwrap();
}
