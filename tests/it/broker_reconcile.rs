//! Issue 9 item 3, start-up reconciliation: a daemon child process is SIGKILLed with a
//! binding mid-change (a call held at the impd simulator, or a record seeded while no daemon
//! runs), and the next daemon settles it before it serves. Checked at the simulator (imps,
//! grants) and in the binding rows, and in the children's logs, which never hold a secret.

use atc::providers::imp::broker::binding_store::BindingStore;
use std::path::PathBuf;
use std::time::Duration;

use atc::providers::imp::broker::binding::{BoundRule, BoundSecret, Grant};
use atc::store::StateStore;
use atc_protocol::responses::{AuthBindingState, AuthGrantState};
use atc_testkit::broker::{self, bindable_sim, boom, sh_agent, wait_auth};
use atc_testkit::child_daemon::ChildDaemon;
use atc_testkit::impd_sim::{GrantStep, HoldPoint, ImpdSim};
use atc_testkit::{id_of, TestDaemon, WITHIN};
use serde_json::{json, Value};

/// One test's simulator, state dir and the logs of every daemon it started.
struct World {
    /// `None` once stopped: impd is unreachable at its old address.
    sim: Option<ImpdSim>,
    url: String,
    /// A copy of impd's token file, which outlives the simulator.
    token_file: PathBuf,
    tmp: tempfile::TempDir,
    /// What must appear in no log: the secrets' values and impd's token.
    never_logged: Vec<String>,
    logs: Vec<PathBuf>,
}

/// A simulator whose token may bind `alpha` and `beta` to atc's imps.
fn world() -> World {
    let (sim, _) = bindable_sim(&[("alpha", "a.example"), ("beta", "b.example")]);
    let mut never_logged = sim.secret_values();
    never_logged.push(sim.token().to_string());
    let tmp = tempfile::tempdir().unwrap();
    let token_file = tmp.path().join("impd-token");
    std::fs::copy(sim.token_file(), &token_file).unwrap();
    World {
        url: sim.url(),
        sim: Some(sim),
        token_file,
        tmp,
        never_logged,
        logs: Vec::new(),
    }
}

impl World {
    fn sim(&self) -> &ImpdSim {
        self.sim.as_ref().expect("the simulator runs")
    }

    /// Stops the simulator: nothing listens at its address any more.
    fn stop_sim(&mut self) {
        if let Some(sim) = self.sim.take() {
            sim.stop();
        }
    }

    fn state_dir(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    /// The daemon's config: the `brokered` agent binding `secrets` on the imp target `box`.
    fn config(&self, secrets: &[&str]) -> Value {
        let auth = broker::auth(secrets, &["OPENAI_API_KEY"]);
        let agent = sh_agent("codex", "exec sleep 60", Some(auth));
        broker::config_json(
            &self.url,
            &self.token_file,
            &self.tmp.path().join("guest"),
            agent,
        )
    }

    /// A daemon child on the state dir, its log kept for the final grep.
    async fn daemon(&mut self, secrets: &[&str]) -> ChildDaemon {
        let log = self
            .tmp
            .path()
            .join(format!("daemon-{}.log", self.logs.len()));
        self.logs.push(log.clone());
        ChildDaemon::start(&self.state_dir(), &self.config(secrets), &log).await
    }

    fn assert_no_secret_logged(&self) {
        let logs: String = self
            .logs
            .iter()
            .map(|l| std::fs::read_to_string(l).unwrap_or_default())
            .collect();
        for v in &self.never_logged {
            assert!(!logs.contains(v.as_str()), "a secret or token was logged");
        }
    }

    /// The daemon's store, opened while no daemon runs.
    async fn store(&self) -> StateStore {
        StateStore::open(&self.state_dir().join("atc.db"))
            .await
            .expect("open the state database")
    }

    fn imps(&self) -> Vec<String> {
        self.sim().imps().into_iter().map(|i| i.name).collect()
    }

    fn grants_of(&self, imp: &str) -> Vec<String> {
        broker::grants_of(self.sim(), imp)
    }
}

/// Starts a broker-backed spawn on `d` without waiting for it: the test kills the daemon
/// while it is under way, so its answer never comes.
fn spawn_in_background(d: &TestDaemon) {
    let (url, token) = (format!("{}/v1/sessions", d.url), d.token.clone());
    actix_rt::spawn(async move {
        // The daemon is killed mid-request: the request fails in transport, as it should.
        let _ = awc::Client::builder()
            .timeout(Duration::from_secs(60))
            .finish()
            .post(url)
            .bearer_auth(token)
            .send_json(&json!({"agent": "brokered", "cwd": "/tmp"}))
            .await;
    });
}

/// Posts to `path` on `d` without waiting for the answer, as [`spawn_in_background`] does.
fn post_in_background(d: &TestDaemon, path: &str) {
    let (url, token) = (format!("{}{path}", d.url), d.token.clone());
    actix_rt::spawn(async move {
        // The daemon is killed mid-request: the request fails in transport, as it should.
        let _ = awc::Client::builder()
            .timeout(Duration::from_secs(60))
            .finish()
            .post(url)
            .bearer_auth(token)
            .send_json(&json!({}))
            .await;
    });
}

/// A spawn that completes: its session id once the harness is attached and the binding
/// `ready`.
async fn spawn_ready(d: &TestDaemon) -> String {
    let id = id_of(
        &d.spawn_with(json!({"agent": "brokered", "cwd": "/tmp"}))
            .await,
    );
    d.wait_session(&id, "attached", |s| {
        s["lifecycle"]["attachment"] == "attached"
    })
    .await;
    wait_auth(d, &id, "ready").await;
    id
}

/// The one imp the simulator has.
fn only_imp(w: &World) -> String {
    match w.imps().as_slice() {
        [one] => one.clone(),
        other => panic!("expected one imp, found {other:?}"),
    }
}

/// After a restart: no imp, no grant, no binding row.
async fn assert_taken_back(w: &World) {
    assert_eq!(w.imps(), Vec::<String>::new(), "the imp was left behind");
    assert!(
        w.sim().grants().values().all(|g| g.is_empty()),
        "{:?}",
        w.sim().grants()
    );
    let store = w.store().await;
    assert_eq!(store.bindings_all().await.unwrap(), vec![]);
}

#[actix_rt::test]
async fn a_daemon_killed_with_the_imp_created_but_unanswered_is_taken_back_at_restart() {
    let mut w = world();
    let d = w.daemon(&["alpha"]).await;
    let held = w
        .sim()
        .faults()
        .hold_call("imps.create", 0, HoldPoint::AfterEffect);
    spawn_in_background(d.api());
    held.wait_held(WITHIN).await;
    let imp = only_imp(&w);
    d.kill();
    held.release();
    // The record says provisioning, with no imp id (the answer never came).
    {
        let store = w.store().await;
        let b = store.bindings_all().await.unwrap();
        assert_eq!(
            b.iter()
                .map(|b| (b.state, b.imp_id.clone(), b.imp_name.clone()))
                .collect::<Vec<_>>(),
            [(AuthBindingState::Provisioning, None, imp.clone())]
        );
        store.close().await.unwrap();
    }

    let d = w.daemon(&["alpha"]).await;
    assert_taken_back_while(&w, d).await;
    w.assert_no_secret_logged();
}

/// Checks the take-back with the restarted daemon stopped first (so the store can be read),
/// and that its log names the take-back.
async fn assert_taken_back_while(w: &World, d: ChildDaemon) {
    let log = d.log();
    assert!(
        log.contains("an unfinished create was taken back"),
        "log:\n{log}"
    );
    d.stop().await;
    assert_taken_back(w).await;
}

#[actix_rt::test]
async fn a_daemon_killed_during_the_second_grant_has_the_first_grant_and_the_imp_taken_back() {
    let mut w = world();
    let d = w.daemon(&["alpha", "beta"]).await;
    let held = w
        .sim()
        .faults()
        .hold_call("grants.add", 1, HoldPoint::AfterEffect);
    spawn_in_background(d.api());
    held.wait_held(WITHIN).await;
    let imp = only_imp(&w);
    assert_eq!(w.grants_of(&imp), ["alpha", "beta"]);
    d.kill();
    held.release();

    let d = w.daemon(&["alpha", "beta"]).await;
    assert_taken_back_while(&w, d).await;
    w.assert_no_secret_logged();
}

#[actix_rt::test]
async fn an_unfinished_create_whose_imp_was_replaced_leaves_the_new_imp_alone() {
    let mut w = world();
    let d = w.daemon(&["alpha", "beta"]).await;
    let held = w
        .sim()
        .faults()
        .hold_call("grants.add", 1, HoldPoint::AfterEffect);
    spawn_in_background(d.api());
    held.wait_held(WITHIN).await;
    let imp = only_imp(&w);
    d.kill();
    held.release();
    // Someone else destroys the attempt's imp and makes another under the name.
    let client =
        impd_client::ImpdClient::new(&w.url, impd_client::TokenSource::File(w.token_file.clone()));
    client.imps_destroy(&imp).await.unwrap();
    let theirs = client
        .imps_create(impd_client::CreateImp {
            name: imp.clone(),
            image: None,
            memory_mib: None,
        })
        .await
        .unwrap()
        .id;
    assert!(w.sim().faults().grant(&imp, "alpha"));

    let d = w.daemon(&["alpha", "beta"]).await;
    d.stop().await;
    let now: Vec<(String, String)> = w.sim().imps().into_iter().map(|i| (i.name, i.id)).collect();
    assert_eq!(now, [(imp.clone(), theirs)], "the other imp was taken");
    assert_eq!(w.grants_of(&imp), ["alpha"], "its grant was taken");
    let store = w.store().await;
    assert_eq!(
        store.bindings_all().await.unwrap(),
        vec![],
        "the record stays"
    );
    w.assert_no_secret_logged();
}

#[actix_rt::test]
async fn a_rollback_left_pending_is_taken_back_by_the_next_daemon() {
    let mut w = world();
    // The grant fails, and so does taking it back: the imp cannot go either.
    w.sim()
        .faults()
        .fail_next_grant(GrantStep::Add, Some("alpha"), boom());
    w.sim()
        .faults()
        .fail_next_grant(GrantStep::Delete, Some("alpha"), boom());
    let d = w.daemon(&["alpha"]).await;
    let mut resp = awc::Client::builder()
        .timeout(Duration::from_secs(30))
        .finish()
        .post(format!("{}/v1/sessions", d.api().url))
        .bearer_auth(&d.api().token)
        .insert_header(("Idempotency-Key", "reconcile-once"))
        .send_json(&json!({"agent": "brokered", "cwd": "/tmp"}))
        .await
        .expect("request");
    let body: Value = serde_json::from_slice(&resp.body().await.unwrap()).unwrap();
    assert_eq!(
        (resp.status().as_u16(), body["error"]["code"].as_str()),
        (409, Some("outcome_unknown")),
        "{body}"
    );
    let imp = only_imp(&w);
    d.kill();
    {
        let store = w.store().await;
        let b = store.bindings_all().await.unwrap();
        assert_eq!(
            b.iter().map(|b| b.state).collect::<Vec<_>>(),
            [AuthBindingState::RollbackPending]
        );
        store.close().await.unwrap();
    }
    assert_eq!(w.imps(), [imp]);

    // The faults were one-shot: this time impd takes the grant and the imp back.
    let d = w.daemon(&["alpha"]).await;
    assert_taken_back_while(&w, d).await;
    w.assert_no_secret_logged();
}

/// Sets the binding of `host`'s state straight in the store of a daemon that is not running.
async fn set_state(w: &World, host: &str, state: AuthBindingState) {
    let store = w.store().await;
    store.binding_set_state(host, state, 1).await.unwrap();
    store.close().await.unwrap();
}

#[actix_rt::test]
async fn an_unfinished_create_whose_host_a_listed_session_uses_is_left_alone() {
    let mut w = world();
    let d = w.daemon(&["alpha"]).await;
    let id = spawn_ready(d.api()).await;
    let imp = only_imp(&w);
    d.kill();
    {
        let store = w.store().await;
        let rows = store.load_fleet().await.unwrap();
        assert_eq!(
            rows.iter()
                .filter_map(|r| r.host_in_use())
                .collect::<Vec<_>>(),
            std::slice::from_ref(&id),
            "the session's process is recorded as running on its host"
        );
        store.close().await.unwrap();
    }
    for state in [
        AuthBindingState::Provisioning,
        AuthBindingState::RollbackPending,
    ] {
        set_state(&w, &id, state).await;
        let d = w.daemon(&["alpha"]).await;
        let auth = wait_auth(d.api(), &id, state.as_str()).await;
        assert_eq!(auth["imp"]["name"], imp.as_str(), "{auth}");
        assert_eq!(
            w.imps(),
            std::slice::from_ref(&imp),
            "{state:?}: the imp was taken"
        );
        assert_eq!(w.grants_of(&imp), ["alpha"], "{state:?}");
        d.kill();
    }
    w.assert_no_secret_logged();
}

#[actix_rt::test]
async fn a_rebind_left_in_flight_fails_at_the_old_revision_with_only_its_grant_removed() {
    let mut w = world();
    let d = w.daemon(&["alpha"]).await;
    let id = spawn_ready(d.api()).await;
    let imp = only_imp(&w);
    d.kill();
    // A rebind to alpha + beta that had granted beta when its daemon died.
    {
        let store = w.store().await;
        let mut b = store.binding_get(&id).await.unwrap().expect("the binding");
        let beta = BoundSecret {
            name: "beta".into(),
            kind: "custom".into(),
            rules: vec![BoundRule {
                host: "b.example".into(),
                header: "authorization".into(),
                scheme: "bearer".into(),
                user: None,
            }],
        };
        let mut next = b.secrets.clone();
        next.push(beta);
        let attempt = b
            .begin_rebind(next, 2)
            .expect("ready allows a rebind")
            .attempt_id;
        store.binding_put(&b).await.unwrap();
        store
            .grant_put(&Grant {
                host_key: id.clone(),
                secret: "beta".into(),
                state: AuthGrantState::Granted,
                preexisted: false,
                attempt_id: attempt,
            })
            .await
            .unwrap();
        store.close().await.unwrap();
    }
    assert!(w.sim().faults().grant(&imp, "beta"));

    let d = w.daemon(&["alpha"]).await;
    let auth = wait_auth(d.api(), &id, "rebind_failed").await;
    assert_eq!(auth["revision"], 1, "{auth}");
    assert_eq!(
        auth["grants"],
        json!([{"secret": "alpha", "state": "granted", "preexisted": false}]),
        "{auth}"
    );
    assert_eq!(w.grants_of(&imp), ["alpha"]);
    assert_eq!(w.imps(), [imp]);
    let log = d.log();
    assert!(
        log.contains("a rebind left in flight failed"),
        "log:\n{log}"
    );
    d.kill();
    let store = w.store().await;
    let b = store.binding_get(&id).await.unwrap().unwrap();
    assert_eq!((b.pending_rebind, b.revision), (None, 1));
    w.assert_no_secret_logged();
}

#[actix_rt::test]
async fn an_unreachable_impd_at_start_leaves_the_binding_and_the_daemon_serves() {
    let mut w = world();
    let d = w.daemon(&["alpha"]).await;
    let held = w
        .sim()
        .faults()
        .hold_call("imps.create", 0, HoldPoint::AfterEffect);
    spawn_in_background(d.api());
    held.wait_held(WITHIN).await;
    let imp = only_imp(&w);
    d.kill();
    drop(held);
    w.stop_sim();

    let d = w.daemon(&["alpha"]).await;
    // It serves: the spawn it was killed in is listed, dead, as a killed spawn is.
    let (status, body) = d.api().call("GET", "/v1/sessions", None).await;
    assert_eq!(status, 200, "{body}");
    let log = d.log();
    assert!(
        log.contains("impd could not be reached to reconcile the binding")
            && log.contains(&imp)
            && log.contains("target=box"),
        "log:\n{log}"
    );
    d.stop().await;
    let store = w.store().await;
    let b = store.bindings_all().await.unwrap();
    assert_eq!(
        b.iter().map(|b| b.state).collect::<Vec<_>>(),
        [AuthBindingState::Provisioning],
        "the binding changed"
    );
    w.assert_no_secret_logged();
}

/// A real rebind cut off by SIGKILL after impd applied the grant it adds: the next daemon
/// fails the rebind at the old revision, removes that grant at impd, and keeps the old one.
/// A rebind after that succeeds.
#[actix_rt::test]
async fn a_daemon_killed_during_a_rebinds_grant_has_it_failed_and_taken_back_at_restart() {
    let mut w = world();
    let d = w.daemon(&["alpha"]).await;
    let id = spawn_ready(d.api()).await;
    let imp = only_imp(&w);
    d.kill();
    // The agent now binds beta too; its rebind is cut off once impd granted beta.
    let d = w.daemon(&["alpha", "beta"]).await;
    let held = w
        .sim()
        .faults()
        .hold_call("grants.add", 0, HoldPoint::AfterEffect);
    post_in_background(d.api(), &format!("/v1/sessions/{id}/auth/rebind"));
    held.wait_held(WITHIN).await;
    assert_eq!(w.grants_of(&imp), ["alpha", "beta"]);
    d.kill();
    held.release();
    {
        let store = w.store().await;
        let b = store.binding_get(&id).await.unwrap().expect("the binding");
        assert_eq!(
            b.pending_rebind.as_ref().map(|p| p.revision),
            Some(2),
            "the rebind was recorded before impd was touched"
        );
        store.close().await.unwrap();
    }

    let d = w.daemon(&["alpha", "beta"]).await;
    let auth = wait_auth(d.api(), &id, "rebind_failed").await;
    assert_eq!(auth["revision"], 1, "{auth}");
    assert_eq!(w.grants_of(&imp), ["alpha"], "the rebind's grant stayed");
    // From rebind_failed, a rebind runs again to its end.
    let (status, body) = d
        .api()
        .call("POST", &format!("/v1/sessions/{id}/auth/rebind"), None)
        .await;
    assert_eq!((status, &body["revision"]), (200, &json!(2)), "{body}");
    assert_eq!(w.grants_of(&imp), ["alpha", "beta"]);
    d.stop().await;
    w.assert_no_secret_logged();
}

/// A revoke cut off by SIGKILL with a grant's delete applied but unanswered: the binding
/// stays `revocation_pending` across the restart (start-up does not guess), admits nothing,
/// and the revoke retried finishes it.
#[actix_rt::test]
async fn a_daemon_killed_during_a_revoke_leaves_it_pending_and_a_retry_finishes_it() {
    let mut w = world();
    let d = w.daemon(&["alpha", "beta"]).await;
    let id = spawn_ready(d.api()).await;
    let imp = only_imp(&w);
    let held = w
        .sim()
        .faults()
        .hold_call("grants.delete", 0, HoldPoint::AfterEffect);
    post_in_background(d.api(), &format!("/v1/sessions/{id}/auth/revoke"));
    held.wait_held(WITHIN).await;
    d.kill();
    held.release();

    let d = w.daemon(&["alpha", "beta"]).await;
    let auth = wait_auth(d.api(), &id, "revocation_pending").await;
    assert_eq!(auth["revision"], 1, "{auth}");
    let (status, err) = d
        .api()
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("auth_blocked")),
        "{err}"
    );
    let (status, body) = d
        .api()
        .call("POST", &format!("/v1/sessions/{id}/auth/revoke"), None)
        .await;
    assert_eq!(
        (status, body["auth"]["state"].as_str()),
        (200, Some("revoked")),
        "{body}"
    );
    assert_eq!(w.grants_of(&imp), Vec::<String>::new());
    d.stop().await;
    w.assert_no_secret_logged();
}
