//! Issue 9 through the API on an imp target over the simulator, for what happens around a
//! broker-backed start: the agent's sign-in check (`auth.check`, run inside the imp before
//! the start), the descriptor's `auth: {state, revision}` (after a spawn, a revoke and a
//! daemon restart), a refused revive putting its host back to sleep, a revive of a session
//! that never reported a position verifying rather than creating, and the launch tickets
//! counted through real harness paths (`admissions` in `GET /v1/sessions/{id}/auth`).

use std::time::Duration;

use atc_testkit::broker::{
    self, assert_spawn_taken_back, auth, bindable_sim, fast_reconnects, harness_starts,
    kill_and_wait, rpc_calls, sh_agent, spawn,
};
use atc_testkit::impd_sim::{Flag, FlagState, HoldPoint, ImpState, ImpdSim, OpenKind};
use atc_testkit::{id_of, poll_ok, wait_until, TestDaemon, WITHIN};
use serde_json::{json, Value};

/// A simulator whose token may bind `codex-key` to atc's imps.
fn sim() -> ImpdSim {
    bindable_sim(&[("codex-key", "api.openai.com")]).0
}

/// A daemon with one broker-backed agent whose sign-in check is `check` (none: `null`).
async fn daemon(sim: &ImpdSim, dir: &std::path::Path, check: Value) -> TestDaemon {
    let mut auth = auth(&["codex-key"], &["OPENAI_API_KEY"]);
    if !check.is_null() {
        auth["check"] = check;
    }
    let agent = sh_agent("codex", "echo brokered-up; exec sleep 600", Some(auth));
    let config = fast_reconnects(broker::config(sim, &dir.join("guest"), agent));
    TestDaemon::start_on(dir, config).await
}

/// Spawns and waits until the agent printed; answers the session id and its imp.
async fn spawn_up(d: &TestDaemon, sim: &ImpdSim) -> (String, String) {
    let (status, body) = spawn(d).await;
    assert_eq!(status, 201, "{body}");
    let id = id_of(&body["session"]);
    d.wait_screen(&id, "brokered-up").await;
    (id, sim.imps()[0].name.clone())
}

/// `admissions` of the session's binding: (issued, released).
async fn admissions(d: &TestDaemon, id: &str) -> (u64, u64) {
    let (status, auth) = d
        .call("GET", &format!("/v1/sessions/{id}/auth"), None)
        .await;
    assert_eq!(status, 200, "{auth}");
    let a = &auth["auth"]["admissions"];
    (
        a["issued"].as_u64().unwrap(),
        a["released"].as_u64().unwrap(),
    )
}

/// Waits until the binding's counts are `want`, or panics with the last seen.
async fn wait_admissions(d: &TestDaemon, id: &str, what: &str, want: (u64, u64)) {
    let reached = poll_ok(WITHIN, async || {
        let seen = admissions(d, id).await;
        if seen == want {
            Ok(())
        } else {
            Err(seen)
        }
    })
    .await;
    if let Err(seen) = reached {
        panic!("{what}: admissions {seen:?}, wanted {want:?}");
    }
}

/// Ends the session's process, then puts its imp to sleep at impd (as an idle imp would
/// be), so a revive has to wake the host and start anew.
async fn kill_and_sleep(d: &TestDaemon, sim: &ImpdSim, id: &str, imp: &str) {
    kill_and_wait(d, id).await;
    assert!(sim.faults().sleep_imp(imp));
    assert_eq!(sim.imp(imp).map(|i| i.state), Some(ImpState::Sleeping));
}

#[actix_rt::test]
async fn a_passing_sign_in_check_runs_in_the_imp_with_the_harness_env_and_cwd() {
    let sim = sim();
    let tmp = tempfile::tempdir().unwrap();
    // It passes only with the placeholder set, the config folder named and the session's cwd.
    let check = json!(["sh", "-c",
        "test \"$OPENAI_API_KEY\" = imp-broker-placeholder && test -n \"$CODEX_HOME\" && test \"$(pwd)\" = /tmp"]);
    let d = daemon(&sim, tmp.path(), check).await;
    let (status, body) = spawn(&d).await;
    assert_eq!(status, 201, "{body}");
    let check_run = sim
        .exec_starts()
        .into_iter()
        .find(|o| o.session.is_none() && o.env_keys.iter().any(|k| k == "OPENAI_API_KEY"));
    assert!(check_run.is_some(), "no check ran: {:?}", sim.exec_opens());
    d.stop().await;
    sim.stop();
}

#[actix_rt::test]
async fn a_failing_sign_in_check_is_auth_not_configured_and_takes_back_the_new_host() {
    for (check, names) in [
        (
            json!(["sh", "-c", "echo account=someone@example.com; exit 3"]),
            "status 3",
        ),
        (json!(["atc-no-such-sign-in-check"]), "could not be run"),
    ] {
        let sim = sim();
        let tmp = tempfile::tempdir().unwrap();
        let d = daemon(&sim, tmp.path(), check.clone()).await;
        let (status, err) = spawn(&d).await;
        assert_eq!(
            (status, err["error"]["code"].as_str()),
            (412, Some("auth_not_configured")),
            "{check}: {err}"
        );
        assert_eq!(
            err["error"]["data"],
            json!({"agent": "brokered", "target": "box"}),
            "{err}"
        );
        let message = err["error"]["message"].as_str().unwrap();
        assert!(message.contains(names), "{message}");
        assert!(!err.to_string().contains("someone@example.com"), "{err}");
        assert_eq!(harness_starts(&sim), 0, "a harness start was sent");
        // No session, and the attempt is taken back at impd: the imp and its grants.
        assert_spawn_taken_back(&d, &sim).await;
        d.stop().await;
        sim.stop();
    }
}

#[actix_rt::test]
async fn the_descriptor_carries_the_binding_after_a_spawn_a_revoke_and_a_restart() {
    let sim = sim();
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&sim, tmp.path(), Value::Null).await;
    // The spawn answers once the harness started, with the binding it made `ready`.
    let (status, body) = spawn(&d).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body["session"]["auth"],
        json!({"state": "ready", "revision": 1}),
        "{body}"
    );
    let id = id_of(&body["session"]);
    let auth = |s: &Value| s["auth"].clone();
    assert_eq!(auth(&d.session(&id).await), body["session"]["auth"]);
    let (_, list) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(
        list["sessions"][0]["auth"],
        json!({"state": "ready", "revision": 1}),
        "{list}"
    );
    // A session of an agent without auth has no `auth`.
    let plain = d.spawn("sh").await;
    assert!(plain.get("auth").is_none(), "{plain}");

    // A daemon restart reads the binding afresh.
    d.stop().await;
    let d = daemon(&sim, tmp.path(), Value::Null).await;
    d.wait_session(&id, "ready after a restart", |s| {
        auth(s) == json!({"state": "ready", "revision": 1})
    })
    .await;

    // A revoke shows at once, and stays shown across a restart.
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/auth/revoke"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(d.session(&id).await["auth"]["state"], "revoked");
    d.stop().await;
    let d = daemon(&sim, tmp.path(), Value::Null).await;
    d.wait_session(&id, "revoked after a restart", |s| {
        auth(s) == json!({"state": "revoked", "revision": 1})
    })
    .await;
    d.stop().await;
    sim.stop();
}

#[actix_rt::test]
async fn a_revive_refused_behind_the_broker_puts_its_host_back_to_sleep() {
    let sim = sim();
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&sim, tmp.path(), Value::Null).await;
    let (id, imp) = spawn_up(&d, &sim).await;
    kill_and_sleep(&d, &sim, &id, &imp).await;

    // A refused verify comes before the readying: the host is never woken.
    assert!(sim.faults().ungrant(&imp, "codex-key"));
    let acquires = rpc_calls(&sim, "leases.acquire");
    let (status, err) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("auth_grant_missing")),
        "{err}"
    );
    assert_eq!(
        rpc_calls(&sim, "leases.acquire"),
        acquires,
        "the host was woken"
    );
    assert_eq!(sim.imp(&imp).map(|i| i.state), Some(ImpState::Sleeping));
    assert!(sim.faults().grant(&imp, "codex-key"));

    // impd refuses the start: the revive woke the host (the start went out to a running
    // imp), answers the refusal, and the host sleeps again.
    sim.faults()
        .fail_broker_ca(&imp, Some("the CA bundle step failed"));
    let (starts, sleeps) = (harness_starts(&sim), rpc_calls(&sim, "imps.sleep"));
    let (status, err) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (412, Some("broker_not_ready")),
        "{err}"
    );
    assert_eq!(
        harness_starts(&sim),
        starts + 1,
        "the woken host got the start"
    );
    sim.wait_until("back asleep", |s| {
        s.imp(&imp).map(|i| i.state) == Some(ImpState::Sleeping)
    })
    .await;
    assert_eq!(rpc_calls(&sim, "imps.sleep"), sleeps + 1);
    assert!(sim.live_leases(&imp).is_empty(), "the lease went back");
    assert_eq!(sim.imps().len(), 1, "a revive never takes the host back");

    // Ready again: the revive wakes it and runs.
    sim.faults().fail_broker_ca(&imp, None);
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(sim.imp(&imp).map(|i| i.state), Some(ImpState::Running));
    d.stop().await;
    sim.stop();
}

#[actix_rt::test]
async fn a_failing_sign_in_check_on_a_revive_puts_its_host_back_to_sleep() {
    let sim = sim();
    let tmp = tempfile::tempdir().unwrap();
    // The check passes until the test drops a marker file.
    let marker = tmp.path().join("signed-out");
    let check = json!(["sh", "-c", format!("test ! -e {}", marker.display())]);
    let d = daemon(&sim, tmp.path(), check).await;
    let (id, imp) = spawn_up(&d, &sim).await;
    kill_and_sleep(&d, &sim, &id, &imp).await;
    std::fs::write(&marker, b"").unwrap();
    let starts = harness_starts(&sim);
    let (status, err) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (412, Some("auth_not_configured")),
        "{err}"
    );
    assert_eq!(harness_starts(&sim), starts, "a start went out");
    sim.wait_until("back asleep", |s| {
        s.imp(&imp).map(|i| i.state) == Some(ImpState::Sleeping)
    })
    .await;
    let s = d.session(&id).await;
    assert!(
        s["lastMsg"].as_str().unwrap().contains("sign-in check"),
        "{s}"
    );
    d.stop().await;
    sim.stop();
}

#[actix_rt::test]
async fn revoke_then_kill_then_revive_is_auth_blocked() {
    let sim = sim();
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&sim, tmp.path(), Value::Null).await;
    let (id, _) = spawn_up(&d, &sim).await;
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/auth/revoke"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    // The running harness keeps running.
    assert_eq!(d.session(&id).await["alive"], true);
    kill_and_wait(&d, &id).await;
    let starts = harness_starts(&sim);
    let (status, err) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("auth_blocked")),
        "{err}"
    );
    assert_eq!(err["error"]["data"]["state"], "revoked", "{err}");
    assert_eq!(harness_starts(&sim), starts, "a start went out");
    d.stop().await;
    sim.stop();
}

#[actix_rt::test]
async fn a_revive_of_a_session_that_never_reported_a_position_verifies_its_host() {
    let sim = sim();
    // Without session offsets impd's `started` names no position, so the row keeps none.
    sim.faults()
        .set_feature(Flag::SessionOffsets, FlagState::False);
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&sim, tmp.path(), Value::Null).await;
    let (id, imp) = spawn_up(&d, &sim).await;
    let grants = rpc_calls(&sim, "grants.add");
    kill_and_wait(&d, &id).await;
    // A create would find the imp and answer auth_runtime_exists.
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(rpc_calls(&sim, "grants.add"), grants, "granted again");
    assert_eq!(sim.imps().len(), 1);
    assert_eq!(sim.imps()[0].name, imp);
    d.stop().await;
    sim.stop();
}

#[actix_rt::test]
async fn each_launch_ticket_is_released_exactly_once_through_the_harness() {
    let sim = sim();
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&sim, tmp.path(), Value::Null).await;
    let (id, imp) = spawn_up(&d, &sim).await;
    // The start went out: its connection holds the one ticket while it is up.
    wait_admissions(&d, &id, "started", (1, 0)).await;

    // A dropped connection gives its ticket back; the re-attach takes a new one.
    let session = impd_client::exec_session_name(&id);
    detach_slow_once_viewed(&sim, &imp, &session).await;
    wait_admissions(&d, &id, "re-attached", (2, 1)).await;
    d.wait_session(&id, "attached", |s| {
        s["lifecycle"]["attachment"] == "attached"
    })
    .await;

    // Re-attaches that impd drops before anything ran: each attempt's ticket comes back.
    sim.faults()
        .drop_next_connections(2, atc_testkit::impd_sim::When::BeforeStarted, 1011);
    detach_slow_once_viewed(&sim, &imp, &session).await;
    wait_admissions(&d, &id, "re-attached past two drops", (5, 4)).await;

    // A revoke while a re-attach reads impd's features (held for a moment): the ticket was
    // handed over, its last-moment check refuses, the socket closes with nothing sent.
    let infos = rpc_calls(&sim, "system.info");
    sim.faults().delay_next_rpcs(1, Duration::from_millis(1500));
    detach_slow_once_viewed(&sim, &imp, &session).await;
    sim.wait_until("the re-attach reads the features", |s| {
        rpc_calls(s, "system.info") > infos
    })
    .await;
    let attaches = sim
        .exec_opens()
        .into_iter()
        .filter(|o| o.kind == OpenKind::Attach)
        .count();
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/auth/revoke"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    let s = d
        .wait_session(&id, "ended by the refusal", |s| s["alive"] == false)
        .await;
    assert!(
        s["lastMsg"].as_str().unwrap().contains("launch refused"),
        "{s}"
    );
    assert_eq!(
        sim.exec_opens()
            .into_iter()
            .filter(|o| o.kind == OpenKind::Attach)
            .count(),
        attaches,
        "an attach was sent past the refusal"
    );
    wait_admissions(&d, &id, "refused at the last moment", (6, 6)).await;
    d.stop().await;
    sim.stop();
}

#[actix_rt::test]
async fn a_killed_session_gives_its_ticket_back() {
    let sim = sim();
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&sim, tmp.path(), Value::Null).await;
    let (id, _) = spawn_up(&d, &sim).await;
    wait_admissions(&d, &id, "started", (1, 0)).await;
    kill_and_wait(&d, &id).await;
    wait_admissions(&d, &id, "killed", (1, 1)).await;
    // A revive re-admits.
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    wait_admissions(&d, &id, "revived", (2, 1)).await;
    d.stop().await;
    sim.stop();
}

/// A revoke queued before a revive's admission wins, through the API: the revive has passed
/// its verify and is readying the host (its lease acquisition held at impd) when the revoke
/// runs; the admission that follows refuses with `auth_blocked`, and impd never sees the
/// start. The host goes back to sleep, and the refused ticket was never issued.
#[actix_rt::test]
async fn a_revoke_that_runs_before_a_revives_admission_means_no_start_is_sent() {
    let sim = sim();
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&sim, tmp.path(), Value::Null).await;
    let (id, imp) = spawn_up(&d, &sim).await;
    kill_and_sleep(&d, &sim, &id, &imp).await;
    let issued_before = admissions(&d, &id).await.0;
    let starts = harness_starts(&sim);

    let held = sim
        .faults()
        .hold_call("leases.acquire", 0, HoldPoint::BeforeEffect);
    let revive_path = format!("/v1/sessions/{id}/revive");
    let revive = d.call("POST", &revive_path, None);
    let revoke_meanwhile = async {
        held.wait_held(WITHIN).await;
        let (status, body) = d
            .call("POST", &format!("/v1/sessions/{id}/auth/revoke"), None)
            .await;
        assert_eq!(
            (status, body["auth"]["state"].as_str()),
            (200, Some("revoked")),
            "{body}"
        );
        held.release();
    };
    let ((status, err), ()) = tokio::join!(revive, revoke_meanwhile);
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("auth_blocked")),
        "{err}"
    );
    assert_eq!(err["error"]["data"]["state"], "revoked", "{err}");
    assert_eq!(harness_starts(&sim), starts, "a start was sent");
    assert_eq!(
        admissions(&d, &id).await.0,
        issued_before,
        "a ticket was issued"
    );
    wait_until(WITHIN, "the host goes back to sleep", async || {
        sim.imp(&imp).map(|i| i.state) == Some(ImpState::Sleeping)
    })
    .await;
    d.stop().await;
    sim.stop();
}

/// Detaches the session's viewer `slow`, once impd has one: the daemon can see its link as
/// attached a moment before the simulator has registered the viewer.
async fn detach_slow_once_viewed(sim: &ImpdSim, imp: &str, session: &str) {
    sim.wait_until("a viewer to detach", |s| {
        s.faults().detach_slow(imp, session)
    })
    .await;
}
