//! The impd client against the simulator's credential broker, through real loopback HTTP and
//! WebSockets: `tokens.whoami` set per test, `secrets.list`, grants with their refusals and
//! injected faults, the broker feature flags, `require:["broker"]` on `/exec` starts (every
//! refusal rule, the environment of an accepted start, an impd from before 0.30), and the
//! record of what the simulator received.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;
use impd_client::error::ImpdCode;
use impd_client::{
    ExecEvent, ExecEvents, ForbiddenReason, ImpPortError, ImpdClient, ImpdTimeouts, NotFoundKind,
    Opening, PreconditionReason, PrincipalKind, Requirement, StartMsg, TokenScope, TokenSource,
};
use impd_sim::{
    AuthScheme, Flag, FlagState, GrantFault, GrantStep, Identity, ImpdSim, OpenKind, Scope, Secret,
    SecretKind, SecretRule, SimOptions, TokenKind, PLACEHOLDER,
};
use serde_json::Value;

/// Generous bound for things that should happen quickly; it only bounds failure.
const WITHIN: Duration = Duration::from_secs(10);

/// A simulator with one running imp named `box`.
fn sim_with_box() -> ImpdSim {
    ImpdSim::start(SimOptions {
        imps: vec!["box".into()],
        ..SimOptions::default()
    })
}

/// A client with the root token.
fn client(sim: &ImpdSim) -> ImpdClient {
    ImpdClient::new(
        &sim.url(),
        TokenSource::File(sim.token_file().to_path_buf()),
    )
}

/// A client with another token; keep the directory alive as long as the client.
fn client_with(sim: &ImpdSim, token: &str) -> (ImpdClient, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    std::fs::write(&path, token).unwrap();
    (ImpdClient::new(&sim.url(), TokenSource::File(path)), dir)
}

/// A tty session start on `box` running `script`, with the broker requirement.
fn requiring_session(session: &str, script: &str) -> StartMsg {
    StartMsg {
        name: "box".into(),
        argv: vec!["sh".into(), "-c".into(), script.into()],
        tty: true,
        cols: 80,
        rows: 24,
        session: Some(session.into()),
        require: vec![Requirement::Broker],
        ..StartMsg::default()
    }
}

/// A plain (no tty) run of `env` on `box`.
fn env_run(require: bool, env: &[(&str, &str)]) -> StartMsg {
    StartMsg {
        name: "box".into(),
        argv: vec!["env".into()],
        tty: false,
        cols: 80,
        rows: 24,
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        require: if require {
            vec![Requirement::Broker]
        } else {
            Vec::new()
        },
        ..StartMsg::default()
    }
}

async fn next_event(events: &mut ExecEvents) -> ExecEvent {
    match tokio::time::timeout(WITHIN, events.next()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("the event stream ended without Closed"),
        Err(_) => panic!("no event within {WITHIN:?}"),
    }
}

/// Opens a start that impd must refuse before anything runs; returns the refusal.
async fn refused(c: &ImpdClient, start: StartMsg) -> ImpPortError {
    let socket = c.open_exec(Opening::Start(start)).await.unwrap();
    let _writer = socket.writer;
    let mut events = socket.events;
    let e = match next_event(&mut events).await {
        ExecEvent::Error(e) => e,
        other => panic!("expected a refusal, got {other:?}"),
    };
    match next_event(&mut events).await {
        ExecEvent::Closed { code, .. } => assert_eq!(code, Some(1011)),
        other => panic!("expected the close after the refusal, got {other:?}"),
    }
    e
}

/// The `broker_not_ready` detail of a refused start; anything else fails the test.
async fn not_ready_detail(c: &ImpdClient, start: StartMsg) -> String {
    let e = refused(c, start).await;
    assert!(e.is(ImpdCode::PreconditionFailed), "{e:?}");
    let p = e.precondition().expect("a precondition refusal");
    assert_eq!(p.reason, Some(PreconditionReason::BrokerNotReady));
    p.detail
}

/// Runs a plain start to its exit and returns its stdout as `KEY=value` lines.
async fn run_env(c: &ImpdClient, start: StartMsg) -> BTreeMap<String, String> {
    // The writer stays alive until the exit: dropping it would end the run (SIGHUP).
    let socket = c.open_exec(Opening::Start(start)).await.unwrap();
    let _writer = socket.writer;
    let mut events = socket.events;
    let mut out = Vec::new();
    loop {
        match next_event(&mut events).await {
            ExecEvent::Started(_) => {}
            ExecEvent::Data { channel: 1, bytes } => out.extend_from_slice(&bytes),
            ExecEvent::Data { .. } => {}
            ExecEvent::Exit { code, .. } => {
                assert_eq!(code, Some(0));
                break;
            }
            other => panic!("running env: {other:?}"),
        }
    }
    String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Opens a requiring session start and expects it to start; returns the events.
async fn started(c: &ImpdClient, start: StartMsg) -> ExecEvents {
    let socket = c.open_exec(Opening::Start(start)).await.unwrap();
    let mut events = socket.events;
    match next_event(&mut events).await {
        ExecEvent::Started(s) => assert!(s.created.is_some()),
        other => panic!("expected started, got {other:?}"),
    }
    // Closing detaches the session; it runs on.
    socket.writer.close().unwrap();
    events
}

// ---------------------------------------------------------------------------------------
// Identity and features.

#[actix_rt::test]
async fn whoami_answers_the_identity_a_test_sets() {
    let sim = sim_with_box();
    let c = client(&sim);
    let root = c.tokens_whoami().await.unwrap();
    assert_eq!(root.kind, PrincipalKind::Token);
    assert_eq!(root.name, "root");
    assert_eq!(root.scope, TokenScope::Manage);
    assert_eq!((root.imps, root.grantable), (None, None), "the default");

    let narrow = Identity {
        kind: TokenKind::Tailnet,
        scope: Scope::Exec,
        imps: Some(vec!["atc-*".into()]),
        grantable: Some(vec!["gh".into()]),
    };
    assert!(sim.faults().set_identity(sim.token(), narrow.clone()));
    let me = c.tokens_whoami().await.unwrap();
    assert_eq!(me.kind, PrincipalKind::Tailnet);
    assert_eq!(me.scope, TokenScope::Exec);
    assert_eq!(me.imps, Some(vec!["atc-*".to_string()]));
    assert_eq!(me.grantable, Some(vec!["gh".to_string()]));

    // An impd without grantable tokens has no `grantable` to tell.
    sim.faults()
        .set_feature(Flag::GrantableTokens, FlagState::False);
    assert_eq!(c.tokens_whoami().await.unwrap().grantable, None);

    let other = sim.faults().add_token_as(Identity {
        scope: Scope::Read,
        ..Identity::default()
    });
    let (oc, _dir) = client_with(&sim, &other);
    let them = oc.tokens_whoami().await.unwrap();
    assert_eq!((them.scope, them.imps), (TokenScope::Read, None));
    assert!(them.name.starts_with("token-"));
}

#[actix_rt::test]
async fn each_broker_feature_switches_between_true_false_and_absent() {
    let sim = sim_with_box();
    let c = client(&sim);
    let info = c.system_info().await.unwrap();
    assert!(info.features.grantable_tokens && info.features.secret_rebind);
    assert!(info.features.exec_require && info.features.oauth_secrets);
    type Pick = fn(&impd_client::Features) -> bool;
    let cases: [(Flag, &str, Pick); 3] = [
        (Flag::GrantableTokens, "grantableTokens", |f| {
            f.grantable_tokens
        }),
        (Flag::SecretRebind, "secretRebind", |f| f.secret_rebind),
        (Flag::ExecRequire, "execRequire", |f| f.exec_require),
    ];
    for (flag, wire, pick) in cases {
        for (state, sent) in [
            (FlagState::False, Some(Value::Bool(false))),
            (FlagState::Absent, None),
            (FlagState::True, Some(Value::Bool(true))),
        ] {
            sim.faults().set_feature(flag, state);
            let raw = c.call("system.info", Value::Null).await.unwrap();
            assert_eq!(raw["features"].get(wire), sent.as_ref(), "{wire} {state:?}");
            let features = c.system_info().await.unwrap().features;
            assert_eq!(
                pick(&features),
                state == FlagState::True,
                "{wire} {state:?}"
            );
            // The other flags stay as they were.
            assert!(features.leases && features.session_offsets);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Secrets and grants.

#[actix_rt::test]
async fn secrets_list_describes_rules_and_grantees_but_never_a_value() {
    let sim = sim_with_box();
    let c = client(&sim);
    let gh = sim
        .faults()
        .add_secret("gh", SecretKind::Github, &["github.com", "api.github.com"]);
    sim.faults().define_secret(Secret {
        name: "npm".into(),
        kind: SecretKind::Npm,
        rules: vec![SecretRule {
            host: "registry.npmjs.org".into(),
            header: "authorization".into(),
            scheme: AuthScheme::Basic,
            user: Some("ci".into()),
        }],
        value: "npm-value-that-must-stay-inside".into(),
    });
    assert_eq!(sim.secret_value("gh").as_deref(), Some(gh.as_str()));
    c.grants_add("box", "gh").await.unwrap();

    let secrets = c.secrets_list().await.unwrap();
    assert_eq!(secrets.len(), 2);
    let s = &secrets[0];
    assert_eq!(
        (s.name.as_str(), s.kind),
        ("gh", impd_client::SecretKind::Github)
    );
    assert_eq!(s.imps, vec!["box".to_string()]);
    assert_eq!(s.rules.len(), 2);
    assert_eq!(s.rules[1].host, "api.github.com");
    assert_eq!(s.rules[1].scheme, impd_client::AuthScheme::Bearer);
    assert!(s.created_at.is_some());
    let n = &secrets[1];
    assert_eq!(n.kind, impd_client::SecretKind::Npm);
    assert!(n.imps.is_empty());
    assert_eq!(n.rules[0].user.as_deref(), Some("ci"));
    assert_eq!(n.rules[0].scheme, impd_client::AuthScheme::Basic);

    let raw = c
        .call("secrets.list", Value::Null)
        .await
        .unwrap()
        .to_string();
    for value in sim.secret_values() {
        assert!(!raw.contains(&value), "a value in secrets.list: {raw}");
    }
    assert!(raw.contains("createdAt"));
}

#[actix_rt::test]
async fn grants_add_list_and_delete_with_conflict_and_not_found() {
    let sim = sim_with_box();
    let c = client(&sim);
    sim.faults()
        .add_secret("gh", SecretKind::Github, &["github.com"]);
    sim.faults().add_secret(
        "gh-bot",
        SecretKind::Github,
        &["uploads.github.com", "github.com"],
    );
    sim.faults()
        .add_secret("npm", SecretKind::Npm, &["registry.npmjs.org"]);

    assert!(c.grants_list("box").await.unwrap().is_empty());
    c.grants_add("box", "gh").await.unwrap();
    c.grants_add("box", "gh").await.unwrap();
    c.grants_add("box", "npm").await.unwrap();
    assert_eq!(c.grants_list("box").await.unwrap(), ["gh", "npm"]);

    let e = c.grants_add("box", "gh-bot").await.unwrap_err();
    assert!(e.is(ImpdCode::Conflict), "{e:?}");
    assert_eq!(e.status, Some(409));
    assert_eq!(e.data["name"], "gh");
    assert_eq!(
        sim.grants()["box"],
        ["gh", "npm"],
        "a conflict adds nothing"
    );

    let e = c.grants_add("box", "nope").await.unwrap_err();
    assert_eq!(e.not_found_kind(), Some(NotFoundKind::Secret));
    let e = c.grants_add("ghost", "gh").await.unwrap_err();
    assert_eq!(e.not_found_kind(), Some(NotFoundKind::Imp));
    let e = c.grants_list("ghost").await.unwrap_err();
    assert_eq!(e.not_found_kind(), Some(NotFoundKind::Imp));

    c.grants_delete("box", "gh").await.unwrap();
    let e = c.grants_delete("box", "gh").await.unwrap_err();
    assert!(e.is(ImpdCode::NotFound));
    assert_eq!(e.status, Some(404));
    assert_eq!(e.not_found_kind(), Some(NotFoundKind::Grant));
    assert_eq!(e.data["name"], "gh");
    // With gh gone, gh-bot no longer collides.
    c.grants_add("box", "gh-bot").await.unwrap();
    assert_eq!(sim.grants()["box"], ["gh-bot", "npm"]);
}

#[actix_rt::test]
async fn grants_are_forbidden_with_a_reason_for_scope_patterns_and_the_grantable_list() {
    let sim = ImpdSim::start(SimOptions {
        imps: vec!["atc-a".into(), "other".into()],
        ..SimOptions::default()
    });
    sim.faults()
        .add_secret("gh", SecretKind::Github, &["github.com"]);
    sim.faults()
        .add_secret("npm", SecretKind::Npm, &["registry.npmjs.org"]);
    let token = |scope, grantable: &[&str]| {
        sim.faults().add_token_as(Identity {
            scope,
            imps: Some(vec!["atc-*".into()]),
            grantable: Some(grantable.iter().map(|s| s.to_string()).collect()),
            ..Identity::default()
        })
    };
    let (exec, _d1) = client_with(&sim, &token(Scope::Exec, &["gh"]));
    let (manage, _d2) = client_with(&sim, &token(Scope::Manage, &["gh"]));

    let e = exec.grants_add("atc-a", "gh").await.unwrap_err();
    assert_eq!(e.forbidden_reason(), Some(ForbiddenReason::Scope));
    assert_eq!(e.status, Some(403));
    let e = manage.grants_add("other", "gh").await.unwrap_err();
    assert_eq!(e.forbidden_reason(), Some(ForbiddenReason::ImpOutOfScope));
    let e = manage.grants_add("atc-a", "npm").await.unwrap_err();
    assert_eq!(e.forbidden_reason(), Some(ForbiddenReason::NotGrantable));
    // A refusal tells nothing of what exists: an unknown secret is just not grantable.
    let e = manage.grants_add("atc-a", "nope").await.unwrap_err();
    assert_eq!(e.forbidden_reason(), Some(ForbiddenReason::NotGrantable));
    assert!(sim.grants()["atc-a"].is_empty());

    manage.grants_add("atc-a", "gh").await.unwrap();
    assert_eq!(manage.grants_list("atc-a").await.unwrap(), ["gh"]);
    let e = exec.grants_delete("atc-a", "gh").await.unwrap_err();
    assert_eq!(e.forbidden_reason(), Some(ForbiddenReason::Scope));
    let e = manage.grants_delete("atc-a", "npm").await.unwrap_err();
    assert_eq!(e.forbidden_reason(), Some(ForbiddenReason::NotGrantable));
    // Reading grants needs only read on the imp, and the patterns still apply.
    assert_eq!(exec.grants_list("atc-a").await.unwrap(), ["gh"]);
    let e = exec.grants_list("other").await.unwrap_err();
    assert_eq!(e.forbidden_reason(), Some(ForbiddenReason::ImpOutOfScope));

    // Without grantable tokens, no patterned token may grant at all.
    sim.faults()
        .set_feature(Flag::GrantableTokens, FlagState::Absent);
    let e = manage.grants_delete("atc-a", "gh").await.unwrap_err();
    assert_eq!(e.forbidden_reason(), Some(ForbiddenReason::NotGrantable));
    // A host-wide manage token needs no list.
    client(&sim).grants_delete("atc-a", "gh").await.unwrap();
    assert!(sim.grants()["atc-a"].is_empty());
}

#[actix_rt::test]
async fn a_failing_grant_step_has_no_effect_and_a_lost_or_late_answer_keeps_it() {
    let sim = sim_with_box();
    let c = ImpdClient::with_timeouts(
        &sim.url(),
        TokenSource::File(sim.token_file().to_path_buf()),
        ImpdTimeouts {
            open: Duration::from_secs(5),
            call: Duration::from_millis(500),
        },
    );
    sim.faults()
        .add_secret("gh", SecretKind::Github, &["github.com"]);
    sim.faults()
        .add_secret("npm", SecretKind::Npm, &["registry.npmjs.org"]);

    // A refusal with a chosen error: nothing granted.
    sim.faults().fail_next_grant(
        GrantStep::Add,
        None,
        GrantFault::Fail {
            code: "SERVICE_UNAVAILABLE",
            message: "impd is shutting down".into(),
            data: None,
        },
    );
    let e = c.grants_add("box", "gh").await.unwrap_err();
    assert!(e.is(ImpdCode::ServiceUnavailable), "{e:?}");
    assert_eq!(e.status, Some(503));
    assert!(sim.grants()["box"].is_empty());

    // A fault aimed at one secret leaves the others alone.
    sim.faults()
        .fail_next_grant(GrantStep::Add, Some("npm"), GrantFault::LoseAnswer);
    c.grants_add("box", "gh").await.unwrap();
    let e = c.grants_add("box", "npm").await.unwrap_err();
    assert!(e.is(ImpdCode::Unreachable), "a lost answer: {e:?}");
    assert_eq!(sim.grants()["box"], ["gh", "npm"], "the effect stayed");

    // A delete whose answer comes after the client gave up.
    sim.faults().fail_next_grant(
        GrantStep::Delete,
        None,
        GrantFault::AnswerAfter(Duration::from_secs(5)),
    );
    let e = c.grants_delete("box", "gh").await.unwrap_err();
    assert!(e.is(ImpdCode::Unreachable), "a late answer: {e:?}");
    assert_eq!(sim.grants()["box"], ["npm"], "the effect stayed");

    // A failing delete keeps the grant.
    sim.faults().fail_next_grant(
        GrantStep::Delete,
        Some("npm"),
        GrantFault::Fail {
            code: "FORBIDDEN",
            message: "no".into(),
            data: Some(serde_json::json!({"reason": "scope"})),
        },
    );
    let e = c.grants_delete("box", "npm").await.unwrap_err();
    assert_eq!(e.forbidden_reason(), Some(ForbiddenReason::Scope));
    assert_eq!(sim.grants()["box"], ["npm"]);
    c.grants_delete("box", "npm").await.unwrap();
    assert!(sim.grants()["box"].is_empty());
}

// ---------------------------------------------------------------------------------------
// `require:["broker"]`.

#[actix_rt::test]
async fn a_requiring_start_is_refused_by_each_rule_before_anything_runs() {
    let sim = sim_with_box();
    let c = client(&sim);
    let before = sim.stats().processes_started;

    // Rule 1: no grant.
    assert_eq!(
        not_ready_detail(&c, requiring_session("s1", "sleep 60")).await,
        "no grant"
    );
    assert_eq!(sim.broker_readiness("box"), Some(Err("no grant".into())));

    // Rule 2: the CA-bundle step failed, with the detail the test chose.
    sim.faults()
        .add_secret("gh", SecretKind::Github, &["github.com"]);
    c.grants_add("box", "gh").await.unwrap();
    assert_eq!(sim.broker_readiness("box"), Some(Ok(())));
    sim.faults()
        .fail_broker_ca("box", Some("update-ca-certificates exited 1"));
    assert_eq!(
        not_ready_detail(&c, requiring_session("s1", "sleep 60")).await,
        "update-ca-certificates exited 1"
    );
    sim.faults().fail_broker_ca("box", None);

    // Rule 3: the start's env sets a broker variable, or a granted kind's placeholder.
    let mut proxied = requiring_session("s1", "sleep 60");
    proxied
        .env
        .insert("HTTPS_PROXY".into(), "http://elsewhere".into());
    assert!(not_ready_detail(&c, proxied).await.contains("HTTPS_PROXY"));
    let mut gh_token = requiring_session("s1", "sleep 60");
    gh_token.env.insert("GH_TOKEN".into(), "mine".into());
    assert!(not_ready_detail(&c, gh_token).await.contains("GH_TOKEN"));
    // A placeholder of a kind not granted is the caller's own business.
    let mut npm_token = requiring_session("s1", "exec sleep 60");
    npm_token.env.insert("NPM_TOKEN".into(), "mine".into());
    assert_eq!(sim.stats().processes_started, before, "nothing ran");
    drop(started(&c, npm_token).await);
    assert!(sim.session("box", "s1").is_some_and(|s| s.with_broker));

    // A requiring start may not join a generation started without the requirement.
    let mut plain = requiring_session("s2", "exec sleep 60");
    plain.require.clear();
    drop(started(&c, plain).await);
    assert!(sim.session("box", "s2").is_some_and(|s| !s.with_broker));
    let detail = not_ready_detail(&c, requiring_session("s2", "exec sleep 60")).await;
    assert_eq!(
        detail,
        "session s2 was started without the broker requirement"
    );
    // ... but may join one started with it.
    drop(started(&c, requiring_session("s1", "ignored")).await);
    assert_eq!(sim.stats().processes_started, before + 2);
}

#[actix_rt::test]
async fn an_accepted_start_gets_the_broker_variables_and_placeholders_but_never_the_value() {
    let sim = sim_with_box();
    let c = client(&sim);
    let gh = sim
        .faults()
        .add_secret("gh", SecretKind::Github, &["github.com"]);
    let claude = sim
        .faults()
        .add_secret("claude", SecretKind::Anthropic, &["api.anthropic.com"]);
    c.grants_add("box", "gh").await.unwrap();
    c.grants_add("box", "claude").await.unwrap();

    let env = run_env(&c, env_run(true, &[("MINE", "1")])).await;
    assert_eq!(env["HTTPS_PROXY"], env["https_proxy"]);
    assert!(env["HTTPS_PROXY"].starts_with("http://"));
    assert_eq!(env["NODE_USE_ENV_PROXY"], "1");
    for ca in [
        "SSL_CERT_FILE",
        "NODE_EXTRA_CA_CERTS",
        "GIT_SSL_CAINFO",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
    ] {
        assert_eq!(env[ca], "/etc/imp/broker-ca.pem", "{ca}");
    }
    for var in ["GH_TOKEN", "GITHUB_TOKEN", "ANTHROPIC_API_KEY"] {
        assert_eq!(env[var], PLACEHOLDER, "{var}");
    }
    assert!(!env.contains_key("NPM_TOKEN"), "npm was not granted");
    assert_eq!(env["MINE"], "1");
    for (k, v) in &env {
        assert!(!v.contains(&gh) && !v.contains(&claude), "the value in {k}");
    }

    // Without the requirement the caller's env wins over the broker's.
    let env = run_env(
        &c,
        env_run(
            false,
            &[("HTTPS_PROXY", "http://mine:1"), ("GH_TOKEN", "own")],
        ),
    )
    .await;
    assert_eq!(env["HTTPS_PROXY"], "http://mine:1");
    assert_eq!(env["GH_TOKEN"], "own");
    assert_eq!(env["GITHUB_TOKEN"], PLACEHOLDER);

    // An imp whose broker is not ready gets none of it (only what the image has).
    sim.faults().fail_broker_ca("box", Some("broken"));
    let env = run_env(&c, env_run(false, &[])).await;
    assert_eq!(
        env.get("HTTPS_PROXY").cloned(),
        std::env::var("HTTPS_PROXY").ok()
    );
    assert_ne!(env.get("GH_TOKEN").map(String::as_str), Some(PLACEHOLDER));
}

#[actix_rt::test]
async fn an_impd_before_0_30_announces_no_exec_require_and_ignores_require() {
    let sim = sim_with_box();
    let c = client(&sim);
    sim.faults().play_pre_030();
    let info = c.system_info().await.unwrap();
    assert_eq!(info.version, "0.29.4");
    assert!(!info.features.exec_require);
    let raw = c.call("system.info", Value::Null).await.unwrap();
    assert!(raw["features"].get("execRequire").is_none(), "{raw}");
    assert_eq!(raw["features"]["grantableTokens"], true);

    // No grant at all, and still it runs: the requirement is dropped.
    drop(started(&c, requiring_session("s1", "exec sleep 60")).await);
    let s = sim.session("box", "s1").expect("the session runs");
    assert!(!s.with_broker, "an ignored requirement covers nothing");
    let starts = sim.exec_starts();
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0].require, ["broker"], "it was sent all the same");
}

#[actix_rt::test]
async fn the_simulator_records_every_opening_with_env_keys_but_no_values() {
    let sim = sim_with_box();
    let c = client(&sim);
    assert!(sim.exec_opens().is_empty());
    let mut start = requiring_session("s1", "exec sleep 60");
    start
        .env
        .insert("TERM".into(), "a-value-never-recorded".into());
    start.env.insert("LANG".into(), "C".into());
    // Refused (no grant), and recorded all the same.
    refused(&c, start).await;
    let mut plain = requiring_session("s1", "exec sleep 60");
    plain.require.clear();
    drop(started(&c, plain).await);
    let attach = impd_client::AttachMsg {
        name: "box".into(),
        session: "s1".into(),
        cols: 80,
        rows: 24,
        wake: false,
        ..impd_client::AttachMsg::default()
    };
    let socket = c.open_exec(Opening::Attach(attach)).await.unwrap();
    let mut events = socket.events;
    assert!(matches!(
        next_event(&mut events).await,
        ExecEvent::Started(_)
    ));

    let opens = sim.exec_opens();
    assert_eq!(opens.len(), 3, "{opens:?}");
    assert_eq!(opens[0].kind, OpenKind::Start);
    assert_eq!(opens[0].imp, "box");
    assert_eq!(opens[0].session.as_deref(), Some("s1"));
    assert_eq!(opens[0].require, ["broker"]);
    assert_eq!(opens[0].env_keys, ["LANG", "TERM"]);
    assert!(!format!("{opens:?}").contains("a-value-never-recorded"));
    assert!(opens[1].require.is_empty() && opens[1].env_keys.is_empty());
    assert_eq!(opens[2].kind, OpenKind::Attach);
    assert_eq!(sim.exec_starts().len(), 2);
}

#[actix_rt::test]
async fn a_requiring_start_never_joins_a_session_of_an_agent_without_offsets() {
    let sim = sim_with_box();
    let c = client(&sim);
    sim.faults()
        .add_secret("gh", SecretKind::Github, &["github.com"]);
    c.grants_add("box", "gh").await.unwrap();
    sim.faults().set_agent_offsets(false);
    // Creating the session passes: the broker is ready.
    drop(started(&c, requiring_session("s1", "exec sleep 60")).await);
    // Joining it cannot: there is no generation impd could have recorded.
    let detail = not_ready_detail(&c, requiring_session("s1", "exec sleep 60")).await;
    assert_eq!(detail, "session s1 has no execution generation");
    sim.faults().set_agent_offsets(true);
    drop(started(&c, requiring_session("s1", "ignored")).await);
}
