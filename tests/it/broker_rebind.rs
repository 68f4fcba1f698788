//! Issue 9 item 3, rebind, through the API on a real imp target over the simulator: the
//! agent's `auth` changes between a spawn and the rebind (the daemon restarts on the same
//! state dir with the new config), and the rebind adds the new grants and removes the
//! dropped ones (checked at the simulator), answers the next revision, and a revive then
//! verifies against it and gets that revision's config folder. A rebind failing midway
//! removes only what it added; one from `revoked` grants again; the gate's refusals and an
//! agent without `auth` answer their codes.

use atc_testkit::broker::{
    self, boom, fast_reconnects, grantable_only, grants_of, kill_and_wait, rpc_calls, sh_agent,
    sim_with_secrets, spawn,
};
use atc_testkit::impd_sim::{GrantStep, ImpdSim};
use atc_testkit::{id_of, TestDaemon};
use serde_json::{json, Value};

const SECRETS: [&str; 3] = ["key-a", "key-b", "key-c"];

/// A simulator whose token may bind `grantable` to atc's imps, and every secret's value.
fn sim(grantable: &[&str]) -> (ImpdSim, Vec<String>) {
    let (sim, values) = sim_with_secrets(&[
        ("key-a", "key-a.example"),
        ("key-b", "key-b.example"),
        ("key-c", "key-c.example"),
    ]);
    grantable_only(&sim, grantable);
    (sim, values)
}

/// A daemon whose agent `brokered` is bound to `secrets`; `None`: the same agent without
/// `auth`.
async fn daemon(sim: &ImpdSim, dir: &std::path::Path, secrets: Option<&[&str]>) -> TestDaemon {
    let auth = secrets.map(|secrets| broker::auth(secrets, &["OPENAI_API_KEY"]));
    let agent = sh_agent("codex", "echo home=$CODEX_HOME; exec sleep 60", auth);
    let config = fast_reconnects(broker::config(sim, &dir.join("guest"), agent));
    TestDaemon::start_on(dir, config).await
}

/// Spawns `brokered`, waits for it to run, kills it and stops the daemon, so the next daemon
/// on `dir` (with another config) finds the session exited and its host bound at revision 1.
async fn bound_then_stopped(sim: &ImpdSim, dir: &std::path::Path, secrets: &[&str]) -> String {
    let d = daemon(sim, dir, Some(secrets)).await;
    let (status, body) = spawn(&d).await;
    assert_eq!(status, 201, "{body}");
    let id = id_of(&body["session"]);
    d.wait_screen(&id, "auth-r1").await;
    kill_and_wait(&d, &id).await;
    d.stop().await;
    id
}

async fn rebind(d: &TestDaemon, id: &str) -> (u16, Value) {
    d.call("POST", &format!("/v1/sessions/{id}/auth/rebind"), None)
        .await
}

async fn auth(d: &TestDaemon, id: &str) -> Value {
    let (status, body) = d
        .call("GET", &format!("/v1/sessions/{id}/auth"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    body["auth"].clone()
}

/// The grants impd holds for the session's imp, sorted.
fn held(sim: &ImpdSim) -> Vec<String> {
    let imps = sim.imps();
    assert_eq!(imps.len(), 1, "{imps:?}");
    let mut g = grants_of(sim, &imps[0].name);
    g.sort();
    g
}

/// The grants the binding lists, as `secret:state`.
fn listed(auth: &Value) -> Vec<String> {
    auth["grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            format!(
                "{}:{}",
                g["secret"].as_str().unwrap(),
                g["state"].as_str().unwrap()
            )
        })
        .collect()
}

fn assert_no_value(values: &[String], v: &Value) {
    let text = v.to_string();
    for value in values {
        assert!(!text.contains(value.as_str()), "a secret value in {text}");
    }
}

#[actix_rt::test]
async fn a_rebind_adds_and_removes_grants_and_a_revive_uses_the_new_revision() {
    let (sim, values) = sim(&SECRETS);
    let tmp = tempfile::tempdir().unwrap();
    let id = bound_then_stopped(&sim, tmp.path(), &["key-a", "key-b"]).await;
    assert_eq!(held(&sim), ["key-a", "key-b"]);

    // The agent now binds key-a and key-c.
    let d = daemon(&sim, tmp.path(), Some(&["key-a", "key-c"])).await;
    let before = auth(&d, &id).await;
    assert_eq!(
        (before["state"].as_str(), &before["revision"]),
        (Some("ready"), &json!(1))
    );
    // The revive is refused until the binding follows the config.
    let (status, err) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("auth_rebind_required")),
        "{err}"
    );
    let (adds, deletes) = (
        rpc_calls(&sim, "grants.add"),
        rpc_calls(&sim, "grants.delete"),
    );
    let (status, body) = rebind(&d, &id).await;
    assert_eq!((status, &body), (200, &json!({"revision": 2})), "{body}");
    assert_eq!(held(&sim), ["key-a", "key-c"], "key-c added, key-b removed");
    // The descriptor learns the new revision from the rebind itself.
    d.wait_session(&id, "auth at revision 2", |s| {
        s["auth"] == json!({"state": "ready", "revision": 2})
    })
    .await;
    assert_eq!(
        (
            rpc_calls(&sim, "grants.add"),
            rpc_calls(&sim, "grants.delete")
        ),
        (adds + 1, deletes + 1),
        "the kept key-a was not granted again"
    );
    let after = auth(&d, &id).await;
    assert_eq!(
        (after["state"].as_str(), &after["revision"]),
        (Some("ready"), &json!(2))
    );
    assert_ne!(after["hash"], before["hash"], "{after}");
    assert_eq!(listed(&after), ["key-a:granted", "key-c:granted"]);
    assert_no_value(&values, &after);

    // A revive verifies against revision 2 (no grant again) and gets its own folder.
    let adds = rpc_calls(&sim, "grants.add");
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    let home = tmp.path().join(format!("guest/sessions/{id}/auth-r2"));
    let screen = d.wait_screen(&id, "auth-r2").await;
    let text = screen["text"].as_str().unwrap().replace('\n', "");
    assert!(
        text.contains(&format!("home={}", home.display())),
        "{screen}"
    );
    assert!(home.is_dir(), "the readying made {}", home.display());
    assert_eq!(
        rpc_calls(&sim, "grants.add"),
        adds,
        "a revive granted again"
    );
    d.stop().await;
    // The rebind recorded names and rules (the pending revision too): no file the daemons
    // wrote holds a secret's value.
    let mut files = vec![tmp.path().to_path_buf()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(bytes) = std::fs::read(&path) {
            for value in &values {
                assert!(
                    !bytes.windows(value.len()).any(|w| w == value.as_bytes()),
                    "{} holds a secret's value",
                    path.display()
                );
            }
        }
    }
    sim.stop();
}

#[actix_rt::test]
async fn a_rebind_failing_midway_removes_only_its_own_grants_and_can_be_retried() {
    let (sim, _) = sim(&SECRETS);
    let tmp = tempfile::tempdir().unwrap();
    let id = bound_then_stopped(&sim, tmp.path(), &["key-a"]).await;
    let d = daemon(&sim, tmp.path(), Some(&["key-a", "key-b", "key-c"])).await;
    let before = auth(&d, &id).await;

    // The second grant the rebind adds fails: the first goes again, key-a stays.
    sim.faults()
        .fail_next_grant(GrantStep::Add, Some("key-c"), boom());
    let (status, err) = rebind(&d, &id).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (503, Some("host_unavailable")),
        "{err}"
    );
    assert_eq!(
        held(&sim),
        ["key-a"],
        "only the rebind's own grants were removed"
    );
    let failed = auth(&d, &id).await;
    assert_eq!(
        (
            failed["state"].as_str(),
            &failed["revision"],
            &failed["hash"]
        ),
        (Some("rebind_failed"), &json!(1), &before["hash"]),
        "{failed}"
    );
    assert_eq!(listed(&failed), ["key-a:granted"]);

    // From rebind_failed, a rebind succeeds.
    let (status, body) = rebind(&d, &id).await;
    assert_eq!((status, &body), (200, &json!({"revision": 2})), "{body}");
    assert_eq!(held(&sim), ["key-a", "key-b", "key-c"]);
    assert_eq!(auth(&d, &id).await["state"], "ready");
    d.stop().await;
    sim.stop();
}

#[actix_rt::test]
async fn a_rebind_from_revoked_grants_again_and_one_from_revocation_pending_is_blocked() {
    let (sim, _) = sim(&SECRETS);
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&sim, tmp.path(), Some(&["key-a", "key-b"])).await;
    let (status, body) = spawn(&d).await;
    assert_eq!(status, 201, "{body}");
    let id = id_of(&body["session"]);
    d.wait_screen(&id, "auth-r1").await;

    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/auth/revoke"), None)
        .await;
    assert_eq!(
        (status, body["auth"]["state"].as_str()),
        (200, Some("revoked")),
        "{body}"
    );
    assert!(held(&sim).is_empty());
    let (status, body) = rebind(&d, &id).await;
    assert_eq!((status, &body), (200, &json!({"revision": 2})), "{body}");
    assert_eq!(
        held(&sim),
        ["key-a", "key-b"],
        "the revoked grants are back"
    );
    let a = auth(&d, &id).await;
    assert_eq!(a["state"], "ready", "{a}");
    assert_eq!(listed(&a), ["key-a:granted", "key-b:granted"]);

    // A revoke left pending blocks a rebind until the revoke is confirmed.
    sim.faults()
        .fail_next_grant(GrantStep::Delete, Some("key-b"), boom());
    let (status, err) = d
        .call("POST", &format!("/v1/sessions/{id}/auth/revoke"), None)
        .await;
    assert_eq!(
        err["error"]["code"], "auth_revocation_pending",
        "{status} {err}"
    );
    let (status, err) = rebind(&d, &id).await;
    assert_eq!(
        (
            status,
            err["error"]["code"].as_str(),
            err["error"]["data"]["state"].as_str()
        ),
        (409, Some("auth_blocked"), Some("revocation_pending")),
        "{err}"
    );
    assert_eq!(held(&sim), ["key-b"], "the refused rebind touched nothing");
    d.stop().await;
    sim.stop();
}

#[actix_rt::test]
async fn a_rebind_the_gate_refuses_or_of_an_agent_without_auth_changes_nothing() {
    let (sim, _) = sim(&SECRETS);
    let tmp = tempfile::tempdir().unwrap();
    let id = bound_then_stopped(&sim, tmp.path(), &["key-a"]).await;

    // key-b is not grantable by the daemon's token.
    grantable_only(&sim, &["key-a"]);
    let d = daemon(&sim, tmp.path(), Some(&["key-a", "key-b"])).await;
    let adds = rpc_calls(&sim, "grants.add");
    let (status, err) = rebind(&d, &id).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (403, Some("auth_secret_not_grantable")),
        "{err}"
    );
    assert_eq!(rpc_calls(&sim, "grants.add"), adds);
    let a = auth(&d, &id).await;
    assert_eq!(
        (a["state"].as_str(), &a["revision"]),
        (Some("ready"), &json!(1)),
        "{a}"
    );
    assert_eq!(held(&sim), ["key-a"]);
    d.stop().await;

    // The agent lost its auth: nothing to rebind to.
    let d = daemon(&sim, tmp.path(), None).await;
    let (status, err) = rebind(&d, &id).await;
    assert_eq!(
        (
            status,
            err["error"]["code"].as_str(),
            err["error"]["data"]["problem"].as_str()
        ),
        (422, Some("auth_binding_invalid"), Some("no_auth")),
        "{err}"
    );
    assert_eq!(auth(&d, &id).await["revision"], 1);
    d.stop().await;
    sim.stop();
}
