//! Issue 9 item 5: a broker-backed agent's harness requires impd's broker on its start and
//! on every re-attach (`require: ["broker"]`, impd spec §11), reads impd's features first and
//! sends nothing to an impd that cannot check the requirement, and answers impd's refusals
//! with their own codes. The imp target here is the real imp provider behind a test double
//! that claims `brokerAuth` (the real one does not until bindings exist).

mod support;

use std::sync::Arc;
use std::time::Duration;

use atc::config::Config;
use serde_json::{json, Value};
use support::caps_provider::CapsProvider;
use support::impd_sim::{ImpdSim, OpenKind, SecretKind, SimOptions};
use support::{id_of, test_config, TestDaemon};

fn config(sim: &ImpdSim, guest: &std::path::Path) -> Config {
    let text = json!({
        "agents": {
            "brokered": {"kind": "codex", "bin": "sh",
                         "args": ["-c", "echo proxy=$HTTPS_PROXY key=$OPENAI_API_KEY home=$CODEX_HOME; test -d \"$CODEX_HOME\" && echo config-dir-made; exec sleep 60"],
                         "auth": {"secrets": ["codex-key"], "placeholders": ["OPENAI_API_KEY"]}}
        },
        "targets": {"box": {"provider": "broker-imp", "url": sim.url(), "tokenFile": sim.token_file(),
                            "guestDir": guest}},
        "defaultTarget": "box"
    });
    let parsed = Config::from_json(text.to_string().as_bytes());
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    let mut c = test_config();
    c.agents.extend(parsed.agents);
    c.targets = parsed.targets;
    c.timings.imp_reconnect_delays = [20, 50, 100]
        .into_iter()
        .map(Duration::from_millis)
        .collect();
    c
}

async fn daemon(sim: &ImpdSim, dir: &std::path::Path) -> TestDaemon {
    let guest = dir.join("guest");
    let config = config(sim, &guest);
    let options = json!({"url": sim.url(), "tokenFile": sim.token_file(), "guestDir": guest});
    let settings = atc::providers::imp::settings::ImpSettings::from_options(
        "box",
        options.as_object().unwrap(),
        "test-daemon",
        &config.timings,
    )
    .unwrap();
    let imp = atc::providers::imp::provider::ImpProvider::new(settings, Default::default());
    let broker = CapsProvider {
        kind: "broker-imp",
        inner: Arc::new(imp),
        adjust: |c| atc::providers::Capabilities {
            broker_auth: true,
            ..c
        },
    };
    TestDaemon::start_with_providers(
        dir,
        config,
        atc::daemon::ExtraProviders::default().with(Arc::new(broker)),
    )
    .await
}

async fn spawn(d: &TestDaemon) -> (u16, Value) {
    d.call(
        "POST",
        "/v1/sessions",
        Some(json!({"agent": "brokered", "cwd": "/tmp"})),
    )
    .await
}

/// The `require` of every harness opening of `kind` (the readying's plain execs, which name
/// no session, left out).
fn requires(sim: &ImpdSim, kind: OpenKind) -> Vec<Vec<String>> {
    sim.exec_opens()
        .into_iter()
        .filter(|o| o.kind == kind && o.session.is_some())
        .map(|o| o.require)
        .collect()
}

#[actix_rt::test]
async fn a_start_without_a_ready_broker_is_refused_with_impds_detail() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&sim, tmp.path()).await;

    let (status, err) = spawn(&d).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (412, Some("broker_not_ready")),
        "{err}"
    );
    assert!(
        err["error"]["data"]["detail"]
            .as_str()
            .unwrap()
            .contains("no grant"),
        "{err}"
    );
    assert!(
        err["error"]["data"]["imp"]
            .as_str()
            .unwrap()
            .starts_with("atc-"),
        "{err}"
    );
    assert_eq!(
        requires(&sim, OpenKind::Start),
        [vec!["broker".to_string()]]
    );
    // The refused spawn leaves no session behind.
    let (_, sessions) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(sessions["sessions"], json!([]), "{sessions}");
    d.stop().await;
    sim.stop();
}

#[actix_rt::test]
async fn an_impd_that_cannot_check_require_is_sent_nothing() {
    let sim = ImpdSim::start(SimOptions::default());
    sim.faults().play_pre_030();
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&sim, tmp.path()).await;

    let (status, err) = spawn(&d).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (412, Some("auth_impd_too_old")),
        "{err}"
    );
    assert_eq!(err["error"]["data"]["execRequire"], false, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("0.30.0 or later"),
        "{err}"
    );
    assert!(
        requires(&sim, OpenKind::Start).is_empty(),
        "a harness start was sent: {:?}",
        sim.exec_opens()
    );
    d.stop().await;
    sim.stop();
}

#[actix_rt::test]
async fn every_reattach_carries_the_requirement_and_a_revive_is_refused_once_the_grant_is_gone() {
    let sim = ImpdSim::start(SimOptions::default());
    let value = sim
        .faults()
        .add_secret("codex-key", SecretKind::Custom, &["api.openai.com"]);
    sim.faults().grant_on_create("codex-key");
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&sim, tmp.path()).await;

    let (status, body) = spawn(&d).await;
    assert_eq!(status, 201, "{body}");
    let id = id_of(&body["session"]);
    // impd set the broker's proxy for the process; the agent holds a placeholder and a config
    // folder of its own, made by the readying; the secret's value is nowhere.
    let screen = d.wait_screen(&id, "config-dir-made").await;
    // The screen wraps at 80 columns; the lines are read as one.
    let text = screen["text"].as_str().unwrap().replace('\n', "");
    assert!(text.contains("proxy=http"), "{screen}");
    assert!(text.contains("key=imp-broker-placeholder"), "{screen}");
    let home = tmp.path().join(format!("guest/sessions/{id}/auth-r1"));
    assert!(
        text.contains(&format!("home={}", home.display())),
        "{screen}"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&home).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert!(!screen.to_string().contains(&value), "{screen}");
    let start = sim
        .exec_starts()
        .into_iter()
        .find(|o| o.session.is_some())
        .unwrap();
    for key in ["OPENAI_API_KEY", "CODEX_HOME"] {
        assert!(
            start.env_keys.iter().any(|k| k == key),
            "{:?}",
            start.env_keys
        );
    }
    // The daemon's own credentials never go with it: only the guest's, atc's and the plan's.
    for k in &start.env_keys {
        assert!(
            ["TERM", "LANG", "PATH", "OPENAI_API_KEY", "CODEX_HOME"].contains(&k.as_str())
                || k.starts_with("ATC_"),
            "{k} reached the guest"
        );
    }

    // A dropped connection: the re-attach carries the start's requirement.
    let imp = sim.imps()[0].name.clone();
    let session = sim
        .exec_starts()
        .into_iter()
        .find_map(|o| o.session)
        .unwrap();
    assert!(sim.faults().detach_slow(&imp, &session));
    d.wait_session(&id, "reattached", |s| {
        s["lifecycle"]["attachment"] == "attached" && !requires(&sim, OpenKind::Attach).is_empty()
    })
    .await;
    for r in requires(&sim, OpenKind::Attach) {
        assert_eq!(r, ["broker"], "an attach without the requirement");
    }

    // Kill, take the grant away, revive: impd refuses the start behind the broker.
    let (status, _) = d
        .call("POST", &format!("/v1/sessions/{id}/kill"), None)
        .await;
    assert_eq!(status, 200);
    d.wait_session(&id, "exited", |s| s["alive"] == false).await;
    assert!(sim.faults().ungrant(&imp, "codex-key"));
    let (status, err) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (412, Some("broker_not_ready")),
        "{err}"
    );
    for r in requires(&sim, OpenKind::Start) {
        assert_eq!(r, ["broker"]);
    }
    d.stop().await;
    sim.stop();
}
