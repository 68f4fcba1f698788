//! Sessions on an `imp` target, against the impd simulator, through atc's real HTTP and
//! WebSocket API: spawn, echo, resize, exit codes, reconnects after dropped connections, and
//! the exit reasons of processes that ended while the harness was away.

use std::time::Duration;

use atc::config::Config;
use atc_testkit::impd_sim::{ImpdSim, SimOptions, When};
use atc_testkit::{
    assert_attached_comes_first, attaches_during_heavy_output_continue_exactly, id_of,
    spawn_remote, test_config, with_imp_target, TestDaemon,
};
use serde_json::json;

/// The test config plus an imp target `box` (the default) on `sim`, with short reconnect
/// delays.
fn imp_config(sim: &ImpdSim) -> Config {
    let mut c = with_imp_target(test_config(), &sim.url(), sim.token_file(), json!({}));
    c.timings.imp_reconnect_delays = [20, 50, 100, 200, 400]
        .into_iter()
        .map(Duration::from_millis)
        .collect();
    c
}

async fn daemon_on(sim: &ImpdSim) -> (TestDaemon, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    (TestDaemon::start_on(tmp.path(), imp_config(sim)).await, tmp)
}

#[actix_rt::test]
async fn a_remote_session_spawns_echoes_resizes_and_exits_with_its_code() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, _tmp) = daemon_on(&sim).await;
    let (_, agents) = d.call("GET", "/v1/agents", None).await;
    let box_target = agents["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "box")
        .cloned()
        .unwrap();
    assert_eq!(box_target["available"], true, "{box_target}");
    assert_eq!(box_target["capabilities"]["suspend"], true);
    assert_eq!(box_target["capabilities"]["headless"], false);

    let s = d.spawn("sh").await;
    let id = id_of(&s);
    assert_eq!(s["locator"]["targetID"], "box");
    // The spawn answers once impd started the process.
    assert_eq!(s["lifecycle"]["attachment"], "attached", "{s}");
    assert_eq!(s["lifecycle"]["vm"], "awake", "{s}");
    // The imp was created for the session and leased by this daemon.
    let imps = sim.imps();
    assert_eq!(imps.len(), 1, "{imps:?}");
    assert!(imps[0].name.starts_with("atc-"), "{:?}", imps[0].name);
    assert_eq!(sim.live_leases(&imps[0].name).len(), 1);
    d.wait_session(&id, "attached", |s| {
        s["lifecycle"]["attachment"] == "attached"
    })
    .await;

    d.submit(&id, "echo $((6*7))-ok").await;
    d.wait_screen(&id, "42-ok").await;
    let (status, _) = d
        .call(
            "POST",
            &format!("/v1/sessions/{id}/resize"),
            Some(json!({"cols": 100, "rows": 30})),
        )
        .await;
    assert_eq!(status, 200);
    d.submit(&id, "echo size-$(stty size)").await;
    d.wait_screen(&id, "size-30 100").await;
    d.submit(&id, "exit 3").await;
    let s = d.wait_session(&id, "exited", |s| s["alive"] == false).await;
    assert_eq!(s["exitCode"], 3, "{s}");
    assert_eq!(s["exitReason"], "exited");
    // The last harness is gone: the lease goes back.
    sim.wait_until("lease returned", |sim| {
        sim.imps()
            .iter()
            .all(|i| sim.live_leases(&i.name).is_empty())
    })
    .await;
    d.stop().await;
}

/// The imp and impd session name of the one session on `sim`.
fn remote_names(sim: &ImpdSim, id: &str) -> (String, String) {
    let imp = sim.imps()[0].name.clone();
    (imp, impd_client::exec_session_name(id))
}

/// Attaches (start or attach messages) the simulator has answered so far.
fn opens(sim: &ImpdSim) -> u64 {
    sim.stats().exec_opens.values().sum()
}

#[actix_rt::test]
async fn output_survives_twenty_dropped_connections_without_loss_or_repeats() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, _tmp) = daemon_on(&sim).await;
    let id = id_of(&d.spawn("sh").await);
    d.wait_session(&id, "attached", |s| {
        s["lifecycle"]["attachment"] == "attached"
    })
    .await;
    let (imp, session) = remote_names(&sim, &id);
    let (mut ws, _, _) = d.attach(&id, "cols=80&rows=24").await;
    // A deterministic stream, long enough for every drop to land in its middle.
    d.submit(
        &id,
        "i=0; while [ $i -lt 600 ]; do echo line-$i; i=$((i+1)); sleep 0.01; done; echo DONE-$((40+2))",
    )
    .await;
    ws.read_until(b"line-0\r\n").await;
    let faults = sim.faults();
    // Every resume repeats the last 64 bytes it had sent (impd's delivery is at-least-once):
    // the cursor must drop them.
    faults.set_resume_overlap(64);
    // A fixed pseudo-random mix: output dropped (1011), a slow detach, and drops of the
    // reconnection itself before or after its `started`.
    let mut seed: u32 = 0x2545_f491;
    for _ in 0..20 {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let before = opens(&sim);
        // Each drop costs one reconnection; a dropped reconnection costs one more.
        let expected = match (seed >> 16) % 4 {
            0 => before + 1,
            1 => {
                faults.drop_next_connections(1, When::BeforeStarted, 1006);
                before + 2
            }
            2 => {
                faults.drop_next_connections(1, When::AfterStarted, 1011);
                before + 2
            }
            _ => {
                faults.drop_next_connections(1, When::AfterStarted, 1012);
                before + 2
            }
        };
        let dropped = if (seed >> 20).is_multiple_of(2) {
            faults.drop_output(&imp, &session)
        } else {
            faults.detach_slow(&imp, &session)
        };
        if !dropped {
            panic!("no viewer to drop; session {}", d.session(&id).await);
        }
        sim.wait_until("reattached", |sim| {
            opens(sim) >= expected && sim.session(&imp, &session).is_some_and(|s| s.attached)
        })
        .await;
    }
    let got = ws.read_until(b"DONE-42\r\n").await;
    let text = String::from_utf8_lossy(&got);
    let lines: Vec<&str> = text
        .split("\r\n")
        .filter(|l| l.starts_with("line-"))
        .collect();
    let want: Vec<String> = (1..600).map(|i| format!("line-{i}")).collect();
    assert_eq!(lines, want, "every line exactly once, in order");
    assert!(opens(&sim) >= 21, "{:?}", sim.stats().exec_opens);
    let s = d.session(&id).await;
    assert_eq!(s["alive"], true, "{s}");
    d.stop().await;
}

#[actix_rt::test]
async fn a_daemon_restart_reattaches_a_running_remote_session_with_its_screen() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim)).await;
    let id = id_of(&d.spawn("sh").await);
    d.wait_session(&id, "attached", |s| {
        s["lifecycle"]["attachment"] == "attached"
    })
    .await;
    let (imp, session) = remote_names(&sim, &id);
    d.submit(&id, "echo before-$((1+1))").await;
    d.wait_screen(&id, "before-2").await;
    d.stop().await;
    // The process runs on in its imp; the lease went back with the daemon.
    let s = sim
        .session(&imp, &session)
        .expect("the remote session is still there");
    assert!(s.exit.is_none(), "{s:?}");
    let pid = s.pid;
    assert!(sim.live_leases(&imp).is_empty(), "lease returned at stop");

    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim)).await;
    let s = d
        .wait_session(&id, "re-attached", |s| {
            s["alive"] == true && s["lifecycle"]["attachment"] == "attached"
        })
        .await;
    assert_eq!(s["state"], "running", "{s}");
    // impd's replay rebuilt the screen of the new daemon.
    d.wait_screen(&id, "before-2").await;
    d.submit(&id, "echo after-$((2+2))").await;
    d.wait_screen(&id, "after-4").await;
    let s = sim.session(&imp, &session).expect("the remote session");
    assert_eq!(s.pid, pid, "re-attached, not restarted");
    assert_eq!(sim.live_leases(&imp).len(), 1, "the lease is held again");
    d.stop().await;
}

#[actix_rt::test]
async fn a_host_asleep_at_restart_leaves_the_session_suspended_until_a_revive() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim)).await;
    let id = id_of(&d.spawn("sh").await);
    d.wait_session(&id, "attached", |s| {
        s["lifecycle"]["attachment"] == "attached"
    })
    .await;
    let (imp, session) = remote_names(&sim, &id);
    d.submit(&id, "echo before-$((1+1))").await;
    d.wait_screen(&id, "before-2").await;
    let pid = sim.session(&imp, &session).map(|s| s.pid);
    d.stop().await;
    assert!(sim.faults().sleep_imp(&imp));

    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim)).await;
    let s = d
        .wait_session(&id, "suspended", |s| s["exitReason"] == "suspended")
        .await;
    assert_eq!(s["lastMsg"], "asleep", "{s}");
    assert_eq!(s["lifecycle"]["harness"], "suspended", "{s}");
    assert_eq!(s["lifecycle"]["vm"], "asleep", "{s}");
    // A revive wakes the host through the lease and resumes the same process.
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    d.wait_session(&id, "attached", |s| {
        s["lifecycle"]["attachment"] == "attached"
    })
    .await;
    d.submit(&id, "echo after-$((2+2))").await;
    d.wait_screen(&id, "after-4").await;
    assert_eq!(
        sim.session(&imp, &session).map(|s| s.pid),
        pid,
        "woken and resumed, not restarted"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn ctrl_c_interrupts_the_foreground_job_of_a_remote_session() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, _tmp) = daemon_on(&sim).await;
    let id = id_of(&d.spawn("sh").await);
    d.submit(&id, "sleep 30; echo not-interrupted").await;
    let (imp, session) = remote_names(&sim, &id);
    // The sleep runs before the interrupt is typed.
    sim.wait_until("sleep runs", |sim| {
        sim.session(&imp, &session).is_some()
            && std::fs::read_dir("/proc").is_ok_and(|mut entries| {
                entries.any(|e| {
                    e.ok()
                        .and_then(|e| std::fs::read_to_string(e.path().join("cmdline")).ok())
                        .is_some_and(|c| c == "sleep\u{0}30\u{0}")
                })
            })
    })
    .await;
    let (status, _) = d
        .call(
            "POST",
            &format!("/v1/sessions/{id}/input"),
            Some(json!({"data": "\u{3}"})),
        )
        .await;
    assert_eq!(status, 200);
    d.submit(&id, "echo int-$((1+1))").await;
    let screen = d.wait_screen(&id, "int-2").await;
    let text = screen["text"].as_str().unwrap_or_default();
    assert!(
        !text.lines().any(|l| l == "not-interrupted"),
        "the sleep was interrupted: {screen}"
    );
    d.stop().await;
}

/// A remote `sh` session that prints until it is killed, and a client attached to it that
/// has seen the printing start.
async fn printing_remote(d: &TestDaemon, sim: &ImpdSim) -> (atc_testkit::Remote, atc_testkit::Ws) {
    let remote = spawn_remote(d, sim).await;
    let (mut other, _, _) = d.attach(&remote.id, "cols=80&rows=24").await;
    d.submit(&remote.id, "while :; do echo tick-tock; sleep 0.01; done")
        .await;
    other.read_until(b"tick-tock").await;
    (remote, other)
}

/// An attach to a remote session while it prints continues exactly from its repaint, as one to
/// a local session does (`attach.rs`), with the simulator's frames of up to 64 KiB cut into the
/// pieces the session sizes its screen backlog in.
#[actix_rt::test]
async fn an_attach_during_heavy_remote_output_continues_from_its_repaint_exactly() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let mut config = imp_config(&sim);
    // Room enough that a reader in this test never falls behind into a desync.
    config.limits.queue_bytes = 64 * 1024 * 1024;
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let remote = spawn_remote(&d, &sim).await;
    // Paced, about 100,000 lines a second: the agent never waits for a viewer (protocol §14),
    // so a flood faster than the harness takes it gets the harness dropped as `slow`, and it
    // resumes past a gap that skips lines by design.
    let paced = "i=1; while :; do seq $i $((i+999)); i=$((i+1000)); sleep 0.01; done";
    attaches_during_heavy_output_continue_exactly(&d, &remote.id, paced).await;
    d.stop().await;
}

#[actix_rt::test]
async fn attached_comes_first_on_a_remote_session_while_it_prints_and_resizes() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, _tmp) = daemon_on(&sim).await;
    let (remote, mut other) = printing_remote(&d, &sim).await;
    let query = |i: usize| format!("cols={}&rows=24", 70 + i % 3);
    assert_attached_comes_first(&d, &remote.id, &mut other, 20, query, |_| {}).await;
    d.stop().await;
}

#[actix_rt::test]
async fn attached_comes_first_while_a_remote_session_reattaches() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, _tmp) = daemon_on(&sim).await;
    let (remote, mut other) = printing_remote(&d, &sim).await;
    let faults = sim.faults();
    let query = |i: usize| format!("cols={}&rows=24", 70 + i % 3);
    // Each drop sends the harness through reattaching and back (two state changes), racing
    // the attach that follows it.
    assert_attached_comes_first(&d, &remote.id, &mut other, 20, query, |_| {
        // While a reconnection is still under way there is no viewer to drop; the next
        // round drops one again.
        let _ = faults.drop_output(&remote.imp, &remote.session);
    })
    .await;
    let s = d
        .wait_session(&remote.id, "attached again", |s| {
            s["lifecycle"]["attachment"] == "attached"
        })
        .await;
    assert_eq!(s["alive"], true, "{s}");
    d.stop().await;
}

/// Found by `atc-proof crashes`. A remote spawn writes its row before its process starts,
/// and the process's position reaches the row only through a later background write. A
/// daemon killed between the two leaves the row below: alive, on the imp target, with no
/// position. The next daemon must still find the process, which runs on in its imp under a
/// name derived from the session id alone; it used to list the session as exited, so its key
/// replayed a dead session while the process ran on with no daemon attached.
#[actix_rt::test]
async fn a_remote_row_left_without_its_position_is_reattached_at_restart() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim)).await;
    let id = id_of(&d.spawn("sh").await);
    d.wait_session(&id, "attached", |s| {
        s["lifecycle"]["attachment"] == "attached"
    })
    .await;
    let (imp, session) = remote_names(&sim, &id);
    d.stop().await;
    let pid = sim.session(&imp, &session).expect("still running").pid;
    // What the crash window leaves: the row as first written, before the position.
    let pool =
        sqlx::SqlitePool::connect(&format!("sqlite://{}", tmp.path().join("atc.db").display()))
            .await
            .unwrap();
    sqlx::query(
        "UPDATE fleet SET exited = 0, exit_reason = NULL, remote_boot_id = NULL, remote_generation = NULL, \
         remote_offset = NULL WHERE session_id = ?",
    )
    .bind(&id)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim)).await;
    let s = d
        .wait_session(&id, "re-attached", |s| {
            s["alive"] == true && s["lifecycle"]["attachment"] == "attached"
        })
        .await;
    assert_eq!(s["state"], "running", "{s}");
    let s = sim.session(&imp, &session).expect("the remote session");
    assert_eq!(s.pid, pid, "re-attached, not restarted");
    d.stop().await;
}
