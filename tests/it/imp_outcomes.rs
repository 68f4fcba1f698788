//! What a remote session does when its connection to impd ends (spec §5.6 outcome table and
//! reconnect rules, impd protocol §9 and §13), and how its host's lease lives (spec §5.4):
//! each test drives the simulator into one situation and watches the result through atc's
//! real HTTP and WebSocket API.
//!
//! Most tests keep the harness away from impd for exactly as long as they need: they queue
//! more connection drops than the harness has reconnect delays to spend, drop its viewer,
//! change the world, then cancel the drops so the next attempt gets through.

use std::fmt::Debug;
use std::path::Path;
use std::time::Duration;

use atc::config::Config;
use atc_testkit::impd_sim::{BootEnd, Clock, ImpdSim, Scope, SimOptions, When, RING_BYTES};
use atc_testkit::{spawn_remote, test_config, with_imp_target, ws_at, Remote, TestDaemon};
use serde_json::{json, Value};

/// What a fresh attach writes before impd's replay (spec §5.6).
const SCREEN_RESET: &[u8] = b"\x1b[0m\x1b[H\x1b[2J";

/// Reconnect delays long enough in total (5 s) to keep a harness away while a test changes
/// the world, short enough that it comes back quickly once the drops are cancelled.
fn patient_delays() -> Vec<Duration> {
    vec![Duration::from_millis(50); 100]
}

/// The test config plus an imp target `box` (the default) on `sim`, authenticated by
/// `token_file`, with [`patient_delays`]; `tune` adjusts it further.
fn imp_config(sim: &ImpdSim, token_file: &Path, tune: impl FnOnce(&mut Config)) -> Config {
    let mut c = with_imp_target(test_config(), &sim.url(), token_file, json!({}));
    c.timings.imp_reconnect_delays = patient_delays();
    tune(&mut c);
    c
}

/// A daemon on `sim` with the root token.
async fn daemon_with(
    sim: &ImpdSim,
    tune: impl FnOnce(&mut Config),
) -> (TestDaemon, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let config = imp_config(sim, sim.token_file(), tune);
    (TestDaemon::start_on(tmp.path(), config).await, tmp)
}

/// `start`/`attach` messages the simulator has read so far.
fn opens(sim: &ImpdSim) -> u64 {
    sim.stats().exec_opens.values().sum()
}

fn rpc_calls(sim: &ImpdSim, procedure: &str) -> u64 {
    sim.stats().rpc_calls.get(procedure).copied().unwrap_or(0)
}

/// Queues enough drops that every reconnect fails, then drops the harness's viewer, and waits
/// until the session shows it reattaching. [`come_back`] lets it through again.
async fn keep_away(d: &TestDaemon, sim: &ImpdSim, r: &Remote) {
    sim.faults()
        .drop_next_connections(10_000, When::BeforeStarted, 1011);
    assert!(
        sim.faults().drop_output(&r.imp, &r.session),
        "no viewer to drop; session {}",
        d.session(&r.id).await
    );
    d.wait_session(&r.id, "reattaching", |s| {
        s["lifecycle"]["attachment"] == "reattaching"
    })
    .await;
}

/// Cancels the queued drops: the harness's next attempt reaches impd.
fn come_back(sim: &ImpdSim) {
    let left = sim.faults().cancel_connection_drops();
    assert!(left > 0, "the harness used up every queued drop");
}

/// The session once it has no process any more.
async fn wait_gone(d: &TestDaemon, id: &str) -> Value {
    d.wait_session(id, "gone", |s| s["alive"] == false).await
}

/// Proves absence: `probe` answers the same for the whole of `window` (polled). Only for
/// things that must not happen; everything that must happen is awaited with a deadline.
async fn assert_steady<T: PartialEq + Debug>(what: &str, window: Duration, probe: impl Fn() -> T) {
    let first = probe();
    let until = tokio::time::Instant::now() + window;
    while tokio::time::Instant::now() < until {
        // Absence over a window: these sleeps are the window itself, looked into as it passes.
        tokio::time::sleep(Duration::from_millis(25)).await;
        let now = probe();
        assert_eq!(now, first, "{what} changed within {window:?}");
    }
}

fn count(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[actix_rt::test]
async fn a_gap_while_away_resets_the_screen_before_impds_replay() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, tmp) = daemon_with(&sim, |_| {}).await;
    let r = spawn_remote(&d, &sim).await;
    let (mut ws, _, _) = d.attach(&r.id, "cols=80&rows=24").await;
    // The output waits for a file, so all of it is made while the harness is away.
    let go = tmp.path().join("go");
    d.submit(
        &r.id,
        &format!(
            "while [ ! -e {} ]; do sleep 0.02; done; seq 1 60000; echo END-$((40+2))",
            go.display()
        ),
    )
    .await;
    ws.read_until(b"seq 1 60000").await;
    keep_away(&d, &sim, &r).await;
    let had = sim.session(&r.imp, &r.session).unwrap().end;
    std::fs::write(&go, b"").unwrap();
    // impd keeps 256 KiB: once the ring starts past everything the harness had, its resume
    // is a gap.
    let mut written: Vec<u8> = (1..=60000)
        .flat_map(|i| format!("{i}\r\n").into_bytes())
        .collect();
    written.extend_from_slice(b"END-42\r\n");
    // All of it written (the prompt is empty), so the replay is the ring's tail alone.
    sim.wait_until(
        "the output was written and the harness's bytes left the ring",
        |sim| {
            sim.session(&r.imp, &r.session)
                .is_some_and(|s| s.buffer_start > had && s.end >= had + written.len() as u64)
        },
    )
    .await;
    come_back(&sim);
    let got = ws.read_until(b"END-42\r\n").await;
    assert_eq!(count(&got, SCREEN_RESET), 1, "one screen reset");
    let at = find(&got, SCREEN_RESET).unwrap();
    let before = String::from_utf8_lossy(&got[..at]);
    assert!(
        !before.contains("\r\n1\r\n"),
        "output reached the client while the harness was away: {before:?}"
    );
    // After the reset: impd's replay (a prelude, then a tail starting at a ground state, here
    // possibly mid-line), then live output. From the first full line on it must be exactly
    // the end of what the process wrote.
    let after = &got[at + SCREEN_RESET.len()..];
    let first_line = find(after, b"\r\n").expect("a line after the reset") + 2;
    let end = find(after, b"END-42\r\n").unwrap() + b"END-42\r\n".len();
    let tail = &after[first_line..end];
    if !written.ends_with(tail) {
        let same = tail
            .iter()
            .rev()
            .zip(written.iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let at = tail.len() - same;
        panic!(
            "the replay ({} bytes) is not the end of the output: it differs {same} bytes from \
             its end, around {:?}; text frames seen: {:?}",
            tail.len(),
            String::from_utf8_lossy(&tail[at.saturating_sub(80)..(at + 40).min(tail.len())]),
            ws.seen
                .iter()
                .filter(|f| !f.starts_with('<'))
                .collect::<Vec<_>>()
        );
    }
    assert!(
        tail.len() <= RING_BYTES && tail.len() < written.len() - 4096,
        "the replay ({} bytes) is not a tail of the ring",
        tail.len()
    );
    let s = d.session(&r.id).await;
    assert_eq!(s["alive"], true, "{s}");
    assert_eq!(s["lifecycle"]["attachment"], "attached", "{s}");
    d.stop().await;
}

#[actix_rt::test]
async fn a_process_that_exited_and_was_collected_while_away_exits_with_its_code() {
    let sim = ImpdSim::start(SimOptions::default());
    // A first delay long enough for another client to take the session over, end it and
    // collect its exit before the harness tries again.
    let (d, _tmp) = daemon_with(&sim, |c| {
        c.timings
            .imp_reconnect_delays
            .insert(0, Duration::from_millis(800));
    })
    .await;
    let r = spawn_remote(&d, &sim).await;
    let mut other = ws_at(&sim.ws_url("/exec"), Some(sim.token()), None)
        .await
        .unwrap_or_else(|e| panic!("exec socket refused: {e:?}"));
    other
        .send_json(json!({"type": "attach", "name": r.imp, "session": r.session}))
        .await;
    other.next_text("started").await;
    // Taken over: keep the harness's reconnects failing until the exit is collected.
    sim.faults()
        .drop_next_connections(10_000, When::BeforeStarted, 1011);
    d.wait_session(&r.id, "reattaching", |s| {
        s["lifecycle"]["attachment"] == "reattaching"
    })
    .await;
    other.send_binary(b"\x00exit 7\n").await;
    let exit = other.next_text("exit").await;
    assert_eq!(exit["code"], 7, "{exit}");
    sim.wait_until("the exit was collected", |sim| {
        sim.session(&r.imp, &r.session).is_none()
            && sim.imp(&r.imp).is_some_and(|i| {
                i.previous
                    .iter()
                    .any(|(name, p)| *name == r.session && p.exit_code == Some(7))
            })
    })
    .await;
    come_back(&sim);
    // The next attach answers NO_SESSION with `previous` naming our generation.
    let s = wait_gone(&d, &r.id).await;
    assert_eq!(s["exitReason"], "exited", "{s}");
    assert_eq!(s["exitCode"], 7, "{s}");
    d.stop().await;
}

#[actix_rt::test]
async fn a_cold_boot_after_ours_ends_the_session_naming_its_cause() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, _tmp) = daemon_with(&sim, |_| {}).await;
    let r = spawn_remote(&d, &sim).await;
    assert!(sim.faults().cold_boot(&r.imp, "watchdog", BootEnd::Running));
    let s = wait_gone(&d, &r.id).await;
    assert_eq!(s["exitReason"], "ended", "{s}");
    assert_eq!(s["lastMsg"], "imp rebooted (watchdog)", "{s}");
    assert_eq!(s["exitCode"], Value::Null, "{s}");
    d.stop().await;
}

#[actix_rt::test]
async fn a_process_replaced_by_someone_else_while_away_ends_as_replaced() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, _tmp) = daemon_with(&sim, |_| {}).await;
    let r = spawn_remote(&d, &sim).await;
    keep_away(&d, &sim, &r).await;
    // Replaced twice: the name's `previous` is then a generation that was never ours.
    for _ in 0..2 {
        let current = sim.session(&r.imp, &r.session).unwrap().generation;
        assert!(sim.faults().replace_generation(&r.imp, &r.session));
        sim.wait_until("the replaced generation left the name", |sim| {
            sim.session(&r.imp, &r.session)
                .is_some_and(|s| s.previous.as_ref().is_some_and(|p| p.generation == current))
        })
        .await;
    }
    come_back(&sim);
    let s = wait_gone(&d, &r.id).await;
    assert_eq!(s["exitReason"], "ended", "{s}");
    assert_eq!(s["lastMsg"], "imp replaced the process", "{s}");
    d.stop().await;
}

#[actix_rt::test]
async fn our_generation_replaced_while_away_counts_as_its_exit() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, _tmp) = daemon_with(&sim, |_| {}).await;
    let r = spawn_remote(&d, &sim).await;
    keep_away(&d, &sim, &r).await;
    let ours = sim.session(&r.imp, &r.session).unwrap().generation;
    assert!(sim.faults().replace_generation(&r.imp, &r.session));
    sim.wait_until("our generation left the name", |sim| {
        sim.session(&r.imp, &r.session)
            .is_some_and(|s| s.previous.as_ref().is_some_and(|p| p.generation == ours))
    })
    .await;
    come_back(&sim);
    // `generation_changed` with `previous` = ours: its exit code, and impd's null (it was
    // killed) reads as 1.
    let s = wait_gone(&d, &r.id).await;
    assert_eq!(s["exitReason"], "exited", "{s}");
    assert_eq!(s["exitCode"], 1, "{s}");
    d.stop().await;
}

#[actix_rt::test]
async fn an_imp_put_to_sleep_while_the_harness_reconnects_suspends_the_session() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, _tmp) = daemon_with(&sim, |_| {}).await;
    let r = spawn_remote(&d, &sim).await;
    keep_away(&d, &sim, &r).await;
    assert!(sim.faults().sleep_imp(&r.imp));
    come_back(&sim);
    let s = wait_gone(&d, &r.id).await;
    assert_eq!(s["exitReason"], "suspended", "{s}");
    // Reconnects never wake a sleeping imp.
    assert_eq!(
        sim.imp(&r.imp).unwrap().state,
        atc_testkit::impd_sim::ImpState::Sleeping
    );
    d.stop().await;
}

#[actix_rt::test]
async fn a_revoked_token_ends_the_session() {
    let sim = ImpdSim::start(SimOptions::default());
    let token = sim.faults().add_token(Scope::Manage, None);
    let tmp = tempfile::tempdir().unwrap();
    let token_file = tmp.path().join("daemon-token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim, &token_file, |_| {})).await;
    let r = spawn_remote(&d, &sim).await;
    let before = opens(&sim);
    assert!(sim.faults().revoke_token(&token));
    let s = wait_gone(&d, &r.id).await;
    assert_eq!(s["exitReason"], "ended", "{s}");
    assert!(
        s["lastMsg"].as_str().is_some_and(|m| m.contains("1008")),
        "{s}"
    );
    // Ended at once: no reconnect was tried.
    assert_eq!(opens(&sim), before);
    d.stop().await;
}

#[actix_rt::test]
async fn when_the_reconnect_delays_run_out_the_session_ends_with_the_last_outcome() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, _tmp) = daemon_with(&sim, |c| {
        c.timings.imp_reconnect_delays = vec![Duration::from_millis(20); 3];
    })
    .await;
    let r = spawn_remote(&d, &sim).await;
    let before = opens(&sim);
    sim.faults()
        .drop_next_connections(100, When::BeforeStarted, 1011);
    assert!(sim.faults().drop_output(&r.imp, &r.session));
    let s = wait_gone(&d, &r.id).await;
    assert_eq!(s["exitReason"], "ended", "{s}");
    assert_eq!(s["lastMsg"], "connection to impd closed (1011)", "{s}");
    // One reconnect at once (a dropped started connection), then one after each delay.
    assert_eq!(opens(&sim) - before, 4, "{:?}", sim.stats().exec_opens);
    sim.faults().cancel_connection_drops();
    d.stop().await;
}

#[actix_rt::test]
async fn an_attached_client_is_told_when_the_link_drops_and_when_it_is_back() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, _tmp) = daemon_with(&sim, |_| {}).await;
    let r = spawn_remote(&d, &sim).await;
    let (mut ws, _, _) = d.attach(&r.id, "cols=80&rows=24").await;
    keep_away(&d, &sim, &r).await;
    let frame = ws.next_text("attachment").await;
    assert_eq!(frame["state"], "reattaching", "{frame}");
    come_back(&sim);
    let frame = ws.next_text("attachment").await;
    assert_eq!(frame["state"], "attached", "{frame}");
    d.stop().await;
}

#[actix_rt::test]
async fn input_and_a_resize_made_while_reconnecting_arrive_once_in_order_after_reattaching() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, _tmp) = daemon_with(&sim, |_| {}).await;
    let r = spawn_remote(&d, &sim).await;
    let (mut ws, _, _) = d.attach(&r.id, "cols=80&rows=24").await;
    keep_away(&d, &sim, &r).await;
    let input = |data: &'static str| {
        let path = format!("/v1/sessions/{}/input", r.id);
        let d = &d;
        async move {
            let (status, body) = d.call("POST", &path, Some(json!({ "data": data }))).await;
            assert_eq!(status, 200, "{body}");
        }
    };
    input("echo A-$((40+1))\n").await;
    let (status, body) = d
        .call(
            "POST",
            &format!("/v1/sessions/{}/resize", r.id),
            Some(json!({"cols": 100, "rows": 30})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    input("echo size-$(stty size)\n").await;
    input("echo B-$((40+2))\n").await;
    // A few more failed attempts, so the resize (debounced by the session) reached the
    // harness while it was still away.
    let tried = opens(&sim);
    sim.wait_until("two more failed reconnects", |sim| opens(sim) >= tried + 2)
        .await;
    assert!(
        sim.session(&r.imp, &r.session).is_some_and(|s| !s.attached),
        "the harness got through early"
    );
    come_back(&sim);
    let got = ws.read_until(b"B-42\r\n").await;
    let text = String::from_utf8_lossy(&got);
    let outputs: Vec<&str> = text
        .split("\r\n")
        .filter(|l| ["A-41", "size-30 100", "B-42"].contains(l))
        .collect();
    assert_eq!(
        outputs,
        ["A-41", "size-30 100", "B-42"],
        "each once, in order: {text:?}"
    );
    d.wait_session(&r.id, "attached", |s| {
        s["lifecycle"]["attachment"] == "attached"
    })
    .await;
    d.stop().await;
}

#[actix_rt::test]
async fn a_kill_while_away_sends_sighup_when_the_next_connection_starts() {
    let sim = ImpdSim::start(SimOptions::default());
    // No SIGKILL escalation within the test: only the SIGHUP can end the process.
    let (d, _tmp) = daemon_with(&sim, |c| {
        c.timings.kill_grace = Duration::from_secs(60);
    })
    .await;
    let r = spawn_remote(&d, &sim).await;
    keep_away(&d, &sim, &r).await;
    let kill_path = format!("/v1/sessions/{}/kill", r.id);
    let kill = d.call("POST", &kill_path, None);
    let release = async {
        // The kill is in flight (the descriptor only changes once the process is gone). The
        // daemon runs on this test's executor: three more failed attempts of the harness take
        // far more turns than the kill's few messages, so the SIGHUP waits in the harness.
        let tried = opens(&sim);
        sim.wait_until("three more failed reconnects", |sim| {
            opens(sim) >= tried + 3
        })
        .await;
        let s = sim.session(&r.imp, &r.session).unwrap();
        assert!(
            s.exit.is_none(),
            "the process ended while away: {:?}",
            s.exit
        );
        come_back(&sim);
    };
    let ((status, body), ()) = tokio::join!(kill, release);
    assert_eq!(status, 200, "{body}");
    let s = &body["session"];
    assert_eq!(s["alive"], false, "{s}");
    assert_eq!(s["exitReason"], "killed", "{s}");
    assert_eq!(s["exitSignal"], 1, "ended by SIGHUP: {s}");
    d.stop().await;
}

/// A simulator on a manual clock, and a daemon renewing every 100 ms a lease of 10 s (the
/// shortest impd takes).
async fn lease_setup() -> (ImpdSim, TestDaemon, tempfile::TempDir) {
    let sim = ImpdSim::start(SimOptions {
        clock: Clock::manual(),
        ..SimOptions::default()
    });
    let (d, tmp) = daemon_with(&sim, |c| {
        c.timings.imp_lease_renew = Duration::from_millis(100);
        c.timings.imp_lease_ttl = Duration::from_secs(10);
    })
    .await;
    (sim, d, tmp)
}

#[actix_rt::test]
async fn a_lease_is_renewed_while_a_harness_runs_and_returned_when_the_last_one_ends() {
    let (sim, d, _tmp) = lease_setup().await;
    let r = spawn_remote(&d, &sim).await;
    let first = sim.live_leases(&r.imp);
    assert_eq!(first.len(), 1, "{first:?}");
    let renewed = rpc_calls(&sim, "leases.renew");
    sim.wait_until("renewed three times", |sim| {
        rpc_calls(sim, "leases.renew") >= renewed + 3
    })
    .await;
    // Renewing on a clock that advances moves the lease's end along with it, so it outlives
    // its first end.
    sim.clock().advance(Duration::from_secs(8));
    sim.wait_until("a renewal moved the lease's end", |sim| {
        sim.live_leases(&r.imp)
            .first()
            .is_some_and(|l| l.until > first[0].until)
    })
    .await;
    sim.clock().advance(Duration::from_secs(8));
    let live = sim.live_leases(&r.imp);
    assert_eq!(live.len(), 1, "renewal kept the lease alive: {live:?}");

    d.submit(&r.id, "exit 0").await;
    wait_gone(&d, &r.id).await;
    sim.wait_until("lease returned", |sim| {
        sim.live_leases(&r.imp).is_empty() && rpc_calls(sim, "leases.release") >= 1
    })
    .await;
    assert_steady(
        "lease calls after the return",
        Duration::from_millis(500),
        || {
            (
                rpc_calls(&sim, "leases.renew"),
                rpc_calls(&sim, "leases.acquire"),
            )
        },
    )
    .await;
    d.stop().await;
}

#[actix_rt::test]
async fn a_lease_impd_ended_is_never_taken_back_by_renewal() {
    let (sim, d, _tmp) = lease_setup().await;
    let r = spawn_remote(&d, &sim).await;
    let renewed = rpc_calls(&sim, "leases.renew");
    sim.wait_until("renewed", |sim| rpc_calls(sim, "leases.renew") > renewed)
        .await;
    // The lease runs out between two renewals: the next renewal hears LEASE_NOT_HELD. The
    // count is read before the clock moves, so that renewal cannot slip in unseen between
    // the two; renewals (every 100 ms while leased) then stop, which a quiet 300 ms shows.
    let before_expiry = rpc_calls(&sim, "leases.renew");
    sim.clock().advance(Duration::from_secs(11));
    assert!(sim.live_leases(&r.imp).is_empty());
    sim.wait_until("a renewal after the expiry", |sim| {
        rpc_calls(sim, "leases.renew") > before_expiry
    })
    .await;
    let (mut last, mut since) = (rpc_calls(&sim, "leases.renew"), std::time::Instant::now());
    atc_testkit::wait_until(atc_testkit::WITHIN, "renewals stop", async || {
        let now = rpc_calls(&sim, "leases.renew");
        if now != last {
            (last, since) = (now, std::time::Instant::now());
        }
        since.elapsed() >= Duration::from_millis(300)
    })
    .await;
    let acquired = rpc_calls(&sim, "leases.acquire");
    assert_steady(
        "lease calls after LEASE_NOT_HELD",
        Duration::from_millis(600),
        || {
            (
                rpc_calls(&sim, "leases.renew"),
                rpc_calls(&sim, "leases.acquire"),
                sim.live_leases(&r.imp).len(),
            )
        },
    )
    .await;
    assert_eq!(rpc_calls(&sim, "leases.acquire"), acquired);
    // The session itself is unaffected.
    d.submit(&r.id, "echo still-$((1+1))").await;
    d.wait_screen(&r.id, "still-2").await;
    assert!(sim.live_leases(&r.imp).is_empty());
    d.stop().await;
}

/// Puts the remote shell in raw mode (bytes reach the process unchanged, nothing echoes) and
/// has it copy its input into `got` once `go` exists (at once when `go` is `None`), so a test
/// can see exactly what the process read.
async fn copy_input_to_a_file(d: &TestDaemon, r: &Remote, got: &Path, go: Option<&Path>) {
    let wait = go
        .map(|go| format!("while [ ! -e {} ]; do sleep 0.02; done; ", go.display()))
        .unwrap_or_default();
    d.submit(
        &r.id,
        &format!(
            "stty raw -echo; echo RAW-$((40+2)); {wait}exec cat > {}",
            got.display()
        ),
    )
    .await;
    d.wait_screen(&r.id, "RAW-42").await;
}

/// Sends `bytes` as raw input; the status and body.
async fn raw_input(d: &TestDaemon, r: &Remote, bytes: Vec<u8>) -> (u16, Value) {
    d.post_raw(
        &format!("/v1/sessions/{}/input", r.id),
        "application/octet-stream",
        bytes,
    )
    .await
}

/// Waits until `path` holds `len` bytes, then proves it gets no more, and returns it.
async fn file_once_complete(path: &Path, len: usize) -> Vec<u8> {
    let size = || {
        std::fs::metadata(path)
            .map(|m| m.len() as usize)
            .unwrap_or(0)
    };
    let whole = atc_testkit::poll(Duration::from_secs(30), async || {
        (size() >= len).then_some(())
    })
    .await;
    assert!(
        whole.is_some(),
        "{} holds {} of {len} bytes",
        path.display(),
        size()
    );
    assert_steady("the copied input", Duration::from_millis(300), size).await;
    std::fs::read(path).unwrap()
}

/// One input of `len` bytes of `letter`.
fn block(letter: u8, len: usize) -> Vec<u8> {
    vec![letter; len]
}

const MIB: usize = 1024 * 1024;

#[actix_rt::test]
async fn input_past_four_mib_while_reconnecting_is_too_slow_and_none_of_it_arrives() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, tmp) = daemon_with(&sim, |_| {}).await;
    let r = spawn_remote(&d, &sim).await;
    let got = tmp.path().join("got");
    copy_input_to_a_file(&d, &r, &got, None).await;
    keep_away(&d, &sim, &r).await;
    // Four inputs just under 1 MiB each wait; a fifth would pass 4 MiB and is refused whole,
    // a small one still fits, and one more does not.
    let mut want = Vec::new();
    for letter in b"ABCD" {
        let (status, body) = raw_input(&d, &r, block(*letter, MIB - 1000)).await;
        assert_eq!(status, 200, "{body}");
        want.extend(block(*letter, MIB - 1000));
    }
    let (status, body) = raw_input(&d, &r, block(b'E', MIB - 1000)).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (429, &json!("too_slow")),
        "{body}"
    );
    let (status, body) = raw_input(&d, &r, block(b'F', 3000)).await;
    assert_eq!(status, 200, "{body}");
    want.extend(block(b'F', 3000));
    let (status, body) = raw_input(&d, &r, block(b'G', 2000)).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (429, &json!("too_slow")),
        "{body}"
    );
    assert!(
        sim.session(&r.imp, &r.session).is_some_and(|s| !s.attached),
        "the harness got through early"
    );
    come_back(&sim);
    let copied = file_once_complete(&got, want.len()).await;
    assert!(copied == want, "not exactly the accepted input, in order");
    d.stop().await;
}

#[actix_rt::test]
async fn input_past_four_mib_a_connected_peer_has_not_read_is_too_slow_and_none_of_it_arrives() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, tmp) = daemon_with(&sim, |_| {}).await;
    let r = spawn_remote(&d, &sim).await;
    let (got, go) = (tmp.path().join("got"), tmp.path().join("go"));
    copy_input_to_a_file(&d, &r, &got, Some(&go)).await;
    // The process reads nothing until `go`. Fill its pty, then impd's queue of up to 1024
    // stdin messages for it (with small ones) so impd stops reading the socket, then send
    // big ones until the harness has 4 MiB its socket could not send.
    let mut want = Vec::new();
    for letter in [b'a', b'b'] {
        let (status, body) = raw_input(&d, &r, block(letter, 256 * 1024)).await;
        assert_eq!(status, 200, "{body}");
        want.extend(block(letter, 256 * 1024));
    }
    for _ in 0..1100 {
        let (status, body) = raw_input(&d, &r, b"s".to_vec()).await;
        assert_eq!(status, 200, "{body}");
        want.push(b's');
    }
    let mut refused = None;
    for letter in b'A'..=b'Z' {
        let (status, body) = raw_input(&d, &r, block(letter, MIB - 1000)).await;
        if status == 429 {
            assert_eq!(body["error"]["code"], "too_slow", "{body}");
            refused = Some(letter);
            break;
        }
        assert_eq!(status, 200, "{body}");
        want.extend(block(letter, MIB - 1000));
    }
    let refused = refused.expect("26 MB of input taken without a too_slow");
    assert_eq!(
        d.session(&r.id).await["lifecycle"]["attachment"],
        "attached",
        "the connection stayed up"
    );
    std::fs::write(&go, b"").unwrap();
    let copied = file_once_complete(&got, want.len()).await;
    assert!(
        copied == want,
        "not exactly the accepted input, in order (refused: {})",
        refused as char
    );
    d.stop().await;
}

#[actix_rt::test]
async fn input_waiting_for_a_connection_whose_writer_fails_arrives_on_the_next_once_in_order() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, tmp) = daemon_with(&sim, |_| {}).await;
    let r = spawn_remote(&d, &sim).await;
    let got = tmp.path().join("got");
    copy_input_to_a_file(&d, &r, &got, None).await;
    // Ten failed reconnects while the input is written, then one that starts and is closed
    // at once: its writer is gone by the time the harness hands it the input.
    let before = opens(&sim);
    sim.faults()
        .drop_next_connections(10, When::BeforeStarted, 1011);
    sim.faults()
        .drop_next_connections(1, When::AfterStarted, 1011);
    assert!(sim.faults().drop_output(&r.imp, &r.session));
    d.wait_session(&r.id, "reattaching", |s| {
        s["lifecycle"]["attachment"] == "reattaching"
    })
    .await;
    let (status, body) = raw_input(&d, &r, b"one-".to_vec()).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = raw_input(&d, &r, b"two-".to_vec()).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        opens(&sim) - before < 11,
        "the input was written after the connection that failed"
    );
    sim.wait_until("the failing connection and the one after it", |sim| {
        opens(sim) - before >= 12
    })
    .await;
    d.wait_session(&r.id, "attached", |s| {
        s["lifecycle"]["attachment"] == "attached"
    })
    .await;
    let (status, body) = raw_input(&d, &r, b"three".to_vec()).await;
    assert_eq!(status, 200, "{body}");
    let copied = file_once_complete(&got, b"one-two-three".len()).await;
    assert_eq!(String::from_utf8_lossy(&copied), "one-two-three");
    d.stop().await;
}
