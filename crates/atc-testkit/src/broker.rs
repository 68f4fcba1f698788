//! Shared setup of the broker tests (issue 9): an impd simulator whose token may bind given
//! secrets, the config of a broker-backed agent `brokered` on the imp target `box`, and the
//! small reads and calls those tests make of the simulator and the daemon.

use std::path::Path;
use std::time::Duration;

use atc::config::Config;
use atc::providers::imp::broker::AgentAuth;
use impd_client::{ImpdClient, TokenSource};
use serde_json::{json, Value};

use crate::config::test_config;
use crate::impd_sim::{
    Flag, FlagState, GrantFault, Identity, ImpdSim, OpenKind, Scope, SecretKind, SimOptions,
};
use crate::test_daemon::TestDaemon;
use crate::wait::{poll_ok, WITHIN};

/// The broker-backed agent every broker test configures.
pub const AGENT: &str = "brokered";

/// A simulator holding each `(name, host)` of `secrets` as a custom secret for that host,
/// with grantable tokens and secret rebind on; the token keeps its root identity. Returns
/// the secrets' values in the order given.
pub fn sim_with_secrets(secrets: &[(&str, &str)]) -> (ImpdSim, Vec<String>) {
    let sim = ImpdSim::start(SimOptions::default());
    let values = secrets
        .iter()
        .map(|(name, host)| sim.faults().add_secret(name, SecretKind::Custom, &[host]))
        .collect();
    sim.faults()
        .set_feature(Flag::GrantableTokens, FlagState::True);
    sim.faults()
        .set_feature(Flag::SecretRebind, FlagState::True);
    (sim, values)
}

/// [`sim_with_secrets`] whose token may bind every one of `secrets` to atc's imps.
pub fn bindable_sim(secrets: &[(&str, &str)]) -> (ImpdSim, Vec<String>) {
    let (sim, values) = sim_with_secrets(secrets);
    let names: Vec<&str> = secrets.iter().map(|(name, _)| *name).collect();
    grantable_only(&sim, &names);
    (sim, values)
}

/// A token identity of scope `manage` over atc's imps (`atc-*`) that may grant `grantable`.
pub fn identity(grantable: &[&str]) -> Identity {
    Identity {
        scope: Scope::Manage,
        imps: Some(vec!["atc-*".into()]),
        grantable: Some(grantable.iter().map(|s| s.to_string()).collect()),
        ..Identity::default()
    }
}

/// The simulator's token may grant `grantable` and nothing else.
pub fn grantable_only(sim: &ImpdSim, grantable: &[&str]) {
    assert!(sim.faults().set_identity(sim.token(), identity(grantable)));
}

/// An `auth` block binding `secrets`, the agent seeing `placeholders`.
pub fn auth(secrets: &[&str], placeholders: &[&str]) -> Value {
    json!({"secrets": secrets, "placeholders": placeholders})
}

/// The agent `brokered` as config JSON: `kind` running `sh -c script`, with `auth` when given.
pub fn sh_agent(kind: &str, script: &str, auth: Option<Value>) -> Value {
    let mut agent = json!({"kind": kind, "bin": "sh", "args": ["-c", script]});
    if let Some(auth) = auth {
        agent["auth"] = auth;
    }
    agent
}

/// Config JSON with `agent` as `brokered` and the imp target `box` (the default) on the impd
/// at `url` with its token in `token_file`, guests under `guest`.
pub fn config_json(url: &str, token_file: &Path, guest: &Path, agent: Value) -> Value {
    json!({
        "agents": {AGENT: agent},
        "targets": {"box": {"provider": "imp", "url": url, "tokenFile": token_file,
                            "guestDir": guest}},
        "defaultTarget": "box"
    })
}

/// The test config with [`config_json`]'s agent and targets for `sim`.
pub fn config(sim: &ImpdSim, guest: &Path, agent: Value) -> Config {
    let text = config_json(&sim.url(), sim.token_file(), guest, agent);
    let parsed = Config::from_json(text.to_string().as_bytes());
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    let mut c = test_config();
    c.agents.extend(parsed.agents);
    c.targets = parsed.targets;
    c
}

/// `c` reconnecting to impd after 20, 50 and 100 ms, so a dropped harness is back quickly.
pub fn fast_reconnects(mut c: Config) -> Config {
    c.timings.imp_reconnect_delays = [20, 50, 100]
        .into_iter()
        .map(Duration::from_millis)
        .collect();
    c
}

/// `auth` as the broker reads it: `secrets`, Claude's placeholder, no sign-in check.
pub fn claude_auth(secrets: &[&str]) -> AgentAuth {
    AgentAuth {
        secrets: secrets.iter().map(|s| s.to_string()).collect(),
        placeholders: vec!["CLAUDE_CODE_OAUTH_TOKEN".into()],
        check: None,
    }
}

/// A client of the simulator with its token.
pub fn impd_client(sim: &ImpdSim) -> ImpdClient {
    ImpdClient::new(
        &sim.url(),
        TokenSource::File(sim.token_file().to_path_buf()),
    )
}

/// impd failing a grant step with no effect.
pub fn boom() -> GrantFault {
    GrantFault::Fail {
        code: "INTERNAL_SERVER_ERROR",
        message: "boom".into(),
        data: None,
    }
}

/// `POST /v1/sessions` of `brokered` in /tmp, its answer unchecked.
pub async fn spawn(d: &TestDaemon) -> (u16, Value) {
    d.call(
        "POST",
        "/v1/sessions",
        Some(json!({"agent": AGENT, "cwd": "/tmp"})),
    )
    .await
}

/// A refused spawn left nothing: the daemon lists no session, and impd took the attempt
/// back (its imp goes; no imp holds a grant).
pub async fn assert_spawn_taken_back(d: &TestDaemon, sim: &ImpdSim) {
    let (_, sessions) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(sessions["sessions"], json!([]), "{sessions}");
    sim.wait_until("took back the imp", |s| s.imps().is_empty())
        .await;
    assert!(
        sim.grants().values().all(|g| g.is_empty()),
        "{:?}",
        sim.grants()
    );
}

/// Kills session `id`, asserting the kill was taken, and waits until it is not alive.
pub async fn kill_and_wait(d: &TestDaemon, id: &str) {
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/kill"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    d.wait_session(id, "exited", |s| s["alive"] == false).await;
}

/// `GET /v1/sessions/{id}/auth` once its state is `state`.
pub async fn wait_auth(d: &TestDaemon, id: &str, state: &str) -> Value {
    poll_ok(WITHIN, async || {
        let (status, body) = d
            .call("GET", &format!("/v1/sessions/{id}/auth"), None)
            .await;
        if status == 200 && body["auth"]["state"] == state {
            Ok(body["auth"].clone())
        } else {
            Err((status, body))
        }
    })
    .await
    .unwrap_or_else(|(status, body)| panic!("the binding never became {state}: {status} {body}"))
}

/// The `require` of every harness opening of `kind` (the readying's plain execs, which name
/// no session, left out).
pub fn requires(sim: &ImpdSim, kind: OpenKind) -> Vec<Vec<String>> {
    sim.exec_opens()
        .into_iter()
        .filter(|o| o.kind == kind && o.session.is_some())
        .map(|o| o.require)
        .collect()
}

/// How many harness starts impd was sent.
pub fn harness_starts(sim: &ImpdSim) -> usize {
    requires(sim, OpenKind::Start).len()
}

/// How many calls of `method` impd answered.
pub fn rpc_calls(sim: &ImpdSim, method: &str) -> u64 {
    sim.stats().rpc_calls.get(method).copied().unwrap_or(0)
}

/// The secrets impd holds granted to `imp` (none for an imp it does not know).
pub fn grants_of(sim: &ImpdSim, imp: &str) -> Vec<String> {
    sim.grants().get(imp).cloned().unwrap_or_default()
}
