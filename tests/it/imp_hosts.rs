//! Imp hosts through atc's API against the impd simulator: suspend (busy, leased by another
//! owner, idle → asleep), revive waking the host and resuming the same process, and forget
//! destroying the host after a two-step confirmation.

use std::time::Duration;

use atc::config::Config;
use atc_testkit::impd_sim::{ImpState, ImpdSim, SimOptions};
use atc_testkit::{
    spawn_remote, suspend_when_idle, test_config, with_imp_target, Remote, TestDaemon,
};
use serde_json::{json, Value};

fn imp_config(sim: &ImpdSim) -> Config {
    with_imp_target(test_config(), &sim.url(), sim.token_file(), json!({}))
}

#[actix_rt::test]
async fn a_busy_session_keeps_its_host_awake_and_an_idle_one_sleeps_and_revives() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim)).await;
    let Remote { id, imp, .. } = spawn_remote(&d, &sim).await;
    // Steady output for a few seconds, then quiet (a bounded loop rather than a Ctrl-C, which
    // a loaded machine can deliver between the loop's commands).
    d.submit(
        &id,
        "i=0; while [ $i -lt 60 ]; do echo tick; sleep 0.05; i=$((i+1)); done; echo quiet-$((3*3))",
    )
    .await;
    d.wait_screen(&id, "tick").await;
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/suspend"), None)
        .await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "host_unavailable");
    assert_eq!(body["error"]["data"]["problem"], "busy");
    assert_eq!(sim.imp(&imp).map(|i| i.state), Some(ImpState::Running));
    assert_eq!(sim.live_leases(&imp).len(), 1, "our lease is kept");
    // Quiet: it sleeps.
    d.wait_screen(&id, "quiet-9").await;
    let pid = sim
        .imp(&imp)
        .and_then(|i| i.sessions.first().map(|s| s.pid));
    let (status, body) = suspend_when_idle(&d, &id).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["session"]["exitReason"], "suspended", "{body}");
    assert_eq!(body["session"]["lastMsg"], "asleep");
    assert_eq!(body["session"]["lifecycle"]["vm"], "asleep");
    assert_eq!(sim.imp(&imp).map(|i| i.state), Some(ImpState::Sleeping));
    assert!(
        sim.live_leases(&imp).is_empty(),
        "the lease went back before the sleep"
    );
    // A revive wakes it through the lease and resumes the same process.
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(sim.imp(&imp).map(|i| i.state), Some(ImpState::Running));
    assert_eq!(
        body["session"]["lifecycle"],
        json!({"desired": "run", "vm": "awake", "harness": "running", "attachment": "attached"}),
        "{body}"
    );
    d.submit(&id, "echo awake-$((4*4))").await;
    d.wait_screen(&id, "awake-16").await;
    assert_eq!(
        sim.imp(&imp)
            .and_then(|i| i.sessions.first().map(|s| s.pid)),
        pid,
        "the same process, woken"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn another_owners_lease_refuses_the_sleep_and_ours_is_taken_back() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim)).await;
    let Remote { id, imp, .. } = spawn_remote(&d, &sim).await;
    assert!(sim
        .faults()
        .add_lease(&imp, "token:someone-else", "their-job", None));
    let (status, body) = d
        .call(
            "POST",
            &format!("/v1/sessions/{id}/suspend"),
            Some(json!({"force": true})),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "host_leased");
    assert!(body["error"]["data"].get("leases").is_some(), "{body}");
    assert_eq!(sim.imp(&imp).map(|i| i.state), Some(ImpState::Running));
    let ours = sim
        .live_leases(&imp)
        .into_iter()
        .filter(|l| l.label.starts_with("atc-"))
        .count();
    assert_eq!(ours, 1, "our lease was taken back");
    // The session runs on.
    let s = d.session(&id).await;
    assert_eq!(s["alive"], true, "{s}");
    d.submit(&id, "echo still-$((5*5))").await;
    d.wait_screen(&id, "still-25").await;
    d.stop().await;
}

#[actix_rt::test]
async fn forgetting_a_remote_session_destroys_its_host_after_confirmation() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim)).await;
    let Remote { id, imp, .. } = spawn_remote(&d, &sim).await;
    // Step one: a token, nothing destroyed.
    let (status, body) = d.call("DELETE", &format!("/v1/sessions/{id}"), None).await;
    assert_eq!(status, 200, "{body}");
    let token = body["confirmToken"].as_str().unwrap().to_string();
    assert!(body["expiresAt"].as_i64().is_some(), "{body}");
    assert!(sim.imp(&imp).is_some());
    let (status, body) = d
        .call("DELETE", &format!("/v1/sessions/{id}?confirm=nope"), None)
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["data"]["reason"], "unknown");
    assert!(sim.imp(&imp).is_some(), "a wrong token destroys nothing");
    // Step two: the host and the session are gone.
    let (status, body) = d
        .call(
            "DELETE",
            &format!("/v1/sessions/{id}?confirm={token}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["destroyed"], true);
    assert!(sim.imp(&imp).is_none(), "the imp was destroyed");
    let (status, _) = d.call("GET", &format!("/v1/sessions/{id}"), None).await;
    assert_eq!(status, 404);
    let (_, fleet) = d.call("GET", "/v1/fleet", None).await;
    assert_eq!(fleet["fleet"].as_array().map(Vec::len), Some(0));
    d.stop().await;
}

#[actix_rt::test]
async fn a_failed_readying_undoes_what_it_did_and_a_keyed_retry_runs_fresh() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    // A guest dir nobody can create: the readying fails at its last step.
    let config = with_imp_target(
        test_config(),
        &sim.url(),
        sim.token_file(),
        json!({"guestDir": "/proc/atc-cannot-be-here"}),
    );
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let spawn = || async {
        let mut resp = awc::Client::builder()
            .timeout(Duration::from_secs(30))
            .finish()
            .post(format!("{}/v1/sessions", d.url))
            .bearer_auth(&d.token)
            .insert_header(("Idempotency-Key", "ready-fails"))
            .send_json(&json!({"agent": "sh", "cwd": "/tmp"}))
            .await
            .expect("request");
        let body = resp.body().await.expect("body");
        (
            resp.status().as_u16(),
            serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null),
        )
    };
    let (status, body) = spawn().await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "host_unavailable");
    assert_eq!(body["error"]["data"]["problem"], "guest_setup", "{body}");
    // The imp it created is destroyed again, the lease it took returned.
    assert!(sim.imps().is_empty(), "{:?}", sim.imps());
    assert!(sim.stats().rpc_calls.contains_key("imps.destroy"));
    // Nothing is listed, and the key was released: a retry runs (and fails) afresh.
    let (_, list) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(0), "{list}");
    let creates = sim.stats().rpc_calls.get("imps.create").copied();
    let (status, body) = spawn().await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(
        sim.stats().rpc_calls.get("imps.create").copied(),
        creates.map(|n| n + 1),
        "the retry ran again"
    );
    d.stop().await;
}

/// The imp provider of a target on `sim`, outside any daemon.
fn provider_on(sim: &ImpdSim) -> atc::providers::imp::provider::ImpProvider {
    let options = json!({"url": sim.url(), "tokenFile": sim.token_file()});
    let settings = atc::providers::imp::settings::ImpSettings::from_options(
        "box",
        options.as_object().unwrap(),
        "test-daemon",
        &atc::config::Timings::default(),
    )
    .unwrap();
    atc::providers::imp::provider::ImpProvider::new(settings, Default::default())
}

#[actix_rt::test]
async fn commands_and_archives_run_on_the_host_they_name() {
    use atc::providers::{ExecutionProvider, RunRequest};
    let host_key = "3f2504e0-4f89-41d3-9a0c-0305e82c3301";
    use atc::providers::imp::naming::{imp_name, DEFAULT_IMP_PREFIX};
    let imp = imp_name(DEFAULT_IMP_PREFIX, host_key);
    let sim = ImpdSim::start(SimOptions {
        imps: vec![imp.clone()],
        ..SimOptions::default()
    });
    let p = provider_on(&sim);
    let req = |argv: &[&str], host: Option<&str>| RunRequest {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: "/".into(),
        stdin: bytes::Bytes::from_static(b"from stdin"),
        host_key: host.map(str::to_string),
    };
    let out = p
        .run_command(req(&["sh", "-c", "cat; exit 4"], Some(host_key)))
        .await
        .unwrap();
    assert_eq!((out.code, &out.stdout[..]), (Some(4), &b"from stdin"[..]));
    // Without a host there is nowhere to run it.
    let err = match p.run_command(req(&["true"], None)).await {
        Err(e) => atc::server::error::Error::from(e).wire(),
        Ok(out) => panic!("ran without a host: {out:?}"),
    };
    assert_eq!(err.code.as_str(), "bad_args");
    assert_eq!(err.data["field"], "host");
    // A real tar, unpacked in the imp (whose guest is this machine).
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("a.txt"), "alpha").unwrap();
    let tar = std::process::Command::new("tar")
        .args(["-c", "-f", "-", "a.txt"])
        .current_dir(src.path())
        .output()
        .unwrap();
    let dest = tempfile::tempdir().unwrap();
    let into = dest.path().join("unpacked");
    p.transfer_archive(
        bytes::Bytes::from(tar.stdout),
        into.clone(),
        Some(host_key.to_string()),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(into.join("a.txt")).unwrap(),
        "alpha"
    );
}
