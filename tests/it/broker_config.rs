//! Issue 9 item 1: agents configured with `auth` (broker authentication, spec §6.1). They
//! are listed with `brokerAuth`, spawn only on a target with a broker and never fall back to
//! a local launch; a bad `auth` is a problem of that agent alone.

use std::sync::Arc;

use atc::config::Config;
use atc_testkit::caps_provider::CapsProvider;
use atc_testkit::{test_config, TestDaemon};
use serde_json::{json, Value};

/// A config value nobody may ever see again in an answer.
const SECRET_LOOKING: &str = "sk-ant-oat01-never-shown";

fn config(targets: Value) -> Config {
    let text = json!({
        "agents": {
            "brokered": {"kind": "claude", "bin": "claude",
                         "auth": {"secrets": ["anthropic-oauth"],
                                  "placeholders": ["CLAUDE_CODE_OAUTH_TOKEN"],
                                  "check": ["claude", "auth", "status"]}},
            "unknown-key": {"kind": "claude",
                            "auth": {"secrets": ["s"], "token": SECRET_LOOKING}},
            "wrong-kind": {"kind": "grok", "auth": {"secrets": ["s"]}},
            "value-in-env": {"kind": "codex", "env": {"OPENAI_API_KEY": SECRET_LOOKING},
                             "auth": {"secrets": ["s"], "placeholders": ["OPENAI_API_KEY"]}},
            "proxied": {"kind": "claude", "env": {"HTTPS_PROXY": "http://127.0.0.1:9"},
                        "auth": {"secrets": ["s"]}},
            "plain": {"bin": "cat"}
        },
        "targets": targets
    });
    let parsed = Config::from_json(text.to_string().as_bytes());
    let mut c = test_config();
    c.agents.extend(parsed.agents);
    c.problems = parsed.problems;
    c.targets = parsed.targets;
    c
}

fn find<'a>(list: &'a Value, key: &str, id: &str) -> &'a Value {
    list[key]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["id"] == id))
        .unwrap_or_else(|| panic!("{id} is not in {key}: {list}"))
}

async fn spawn(d: &TestDaemon, agent: &str, target: Option<&str>) -> (u16, Value) {
    let mut body = json!({"agent": agent, "cwd": "/tmp"});
    if let Some(t) = target {
        body["target"] = json!(t);
    }
    d.call("POST", "/v1/sessions", Some(body)).await
}

#[actix_rt::test]
async fn broker_agents_are_listed_and_refused_where_there_is_no_broker() {
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(
        tmp.path(),
        config(json!({"local": {"provider": "local-pty"}})),
    )
    .await;

    let (status, listing) = d.call("GET", "/v1/agents", None).await;
    assert_eq!(status, 200, "{listing}");
    assert!(!listing.to_string().contains(SECRET_LOOKING), "{listing}");
    let brokered = find(&listing, "agents", "brokered");
    assert_eq!(brokered["brokerAuth"], true, "{brokered}");
    assert_eq!(
        brokered["capabilities"]["spawn"], false,
        "no target has a broker: {brokered}"
    );
    assert!(brokered.get("problem").is_none(), "{brokered}");
    assert_eq!(find(&listing, "agents", "plain")["brokerAuth"], false);
    assert_eq!(
        find(&listing, "agents", "plain")["capabilities"]["spawn"],
        true
    );
    assert_eq!(
        find(&listing, "targets", "local")["brokerAuth"],
        false,
        "{listing}"
    );

    // A bad `auth` is that agent's problem, naming the key and never a value.
    for (id, names) in [
        ("unknown-key", "token"),
        ("wrong-kind", "claude and codex"),
        ("value-in-env", "OPENAI_API_KEY"),
    ] {
        let a = find(&listing, "agents", id);
        assert_eq!(a["problem"]["problem"], "auth_binding_invalid", "{a}");
        assert!(
            a["problem"]["detail"].as_str().unwrap().contains(names),
            "{a}"
        );
        let (status, err) = spawn(&d, id, None).await;
        assert_eq!(
            (status, err["error"]["code"].as_str()),
            (422, Some("auth_binding_invalid")),
            "{err}"
        );
        assert_eq!(err["error"]["data"]["agent"], id, "{err}");
        assert!(!err.to_string().contains(SECRET_LOOKING), "{err}");
    }

    // Never a local launch, whatever the target.
    let (status, err) = spawn(&d, "brokered", Some("local")).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (422, Some("auth_target_unsupported")),
        "{err}"
    );
    assert_eq!(err["error"]["data"]["target"], "local", "{err}");
    let (_, sessions) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(
        sessions["sessions"],
        json!([]),
        "nothing started: {sessions}"
    );

    // Every other agent works.
    assert_eq!(d.spawn("plain").await["alive"], true);
    d.stop().await;
}

#[actix_rt::test]
async fn a_broker_target_is_listed_and_a_start_env_setting_a_broker_variable_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let config = config(json!({
        "local": {"provider": "local-pty"},
        "brokered": {"provider": "broker-pty"}
    }));
    // A target whose provider claims a broker: a test double, real processes behind it.
    let broker = CapsProvider {
        kind: "broker-pty",
        inner: Arc::new(atc::providers::local::LocalPty {
            exit_drain: config.timings.exit_drain,
            withheld: Vec::new(),
            cgroups: None,
        }),
        adjust: |c| atc::providers::Capabilities {
            broker_auth: true,
            ..c
        },
    };
    let d = TestDaemon::start_with_providers(
        tmp.path(),
        config,
        atc::daemon::ExtraProviders::default().with(Arc::new(broker)),
    )
    .await;

    let (_, listing) = d.call("GET", "/v1/agents", None).await;
    assert_eq!(
        find(&listing, "targets", "brokered")["brokerAuth"],
        true,
        "{listing}"
    );
    assert_eq!(
        find(&listing, "targets", "local")["brokerAuth"],
        false,
        "{listing}"
    );
    assert_eq!(
        find(&listing, "agents", "brokered")["capabilities"]["spawn"],
        true,
        "some target has a broker: {listing}"
    );

    let (status, err) = spawn(&d, "proxied", Some("brokered")).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (422, Some("auth_target_unsupported")),
        "{err}"
    );
    assert_eq!(
        err["error"]["data"]["problem"], "guest_env_conflict",
        "{err}"
    );
    assert_eq!(err["error"]["data"]["variable"], "HTTPS_PROXY", "{err}");
    let (status, err) = spawn(&d, "brokered", Some("local")).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (422, Some("auth_target_unsupported")),
        "{err}"
    );
    d.stop().await;
}
