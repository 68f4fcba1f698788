//! Execution targets: the refusal chain as a client sees it, and a session's binding to its
//! target's identity across restarts (spec §4).

mod support;

use atc::config::Config;
use serde_json::json;
use support::{id_of, test_config, TestDaemon};

/// The test config with `targets`/`defaultTarget` taken from config text (text, not json!,
/// because the order of targets in the file is kept).
fn config_with(text: &str) -> Config {
    let parsed = Config::from_json(text.as_bytes());
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    Config {
        targets: parsed.targets,
        ..test_config()
    }
}

fn malformed_config() -> Config {
    let broken = Config::from_json(b"{ not json");
    Config {
        targets: broken.targets,
        ..test_config()
    }
}

#[actix_rt::test]
async fn spawn_refusals_follow_the_chain() {
    let config = config_with(
        r#"{"targets": {
            "local": {"provider": "local-pty"},
            "box": {"provider": "imp", "image": "impd.invalid/agent-image"},
            "broken": {"url": "x"}
        }, "defaultTarget": "local"}"#,
    );
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config).await;
    for (target, status, code) in [
        ("broken", 503, "target_config_invalid"),
        ("nope", 404, "unknown_target"),
        ("box", 503, "target_unavailable"),
    ] {
        let (s, err) = d
            .call(
                "POST",
                "/v1/sessions",
                Some(json!({"agent": "cat", "cwd": "/tmp", "target": target})),
            )
            .await;
        assert_eq!(s, status, "{target}: {err}");
        assert_eq!(err["error"]["code"], code, "{target}: {err}");
        assert_eq!(err["error"]["data"]["target"], target, "{err}");
    }
    let (_, err) = d
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"agent": "cat", "cwd": "/tmp", "target": "box"})),
        )
        .await;
    assert_eq!(err["error"]["data"]["provider"], "imp");
    let s = d.spawn("cat").await;
    assert_eq!(s["locator"]["targetID"], "local");
    let (_, listing) = d.call("GET", "/v1/agents", None).await;
    let targets = listing["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 2, "{listing}");
    assert_eq!(targets[0]["id"], "local");
    assert_eq!(targets[0]["identity"], "local-pty:44136fa355b3678a");
    assert_eq!(
        (
            targets[0]["available"].as_bool(),
            targets[0]["default"].as_bool()
        ),
        (Some(true), Some(true))
    );
    assert_eq!(
        (targets[1]["id"].as_str(), targets[1]["available"].as_bool()),
        (Some("box"), Some(false))
    );
    assert!(
        !listing.to_string().contains("impd.invalid"),
        "options are never listed"
    );
    assert_eq!(listing["targetErrors"][0]["target"], "broken");
    assert_eq!(listing["configRevision"].as_str().map(str::len), Some(16));
    let (_, list) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(
        list["sessions"].as_array().map(Vec::len),
        Some(1),
        "refusals started nothing"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn a_malformed_config_refuses_every_target_before_anything_else() {
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), test_config()).await;
    let id = id_of(&d.spawn("cat").await);
    d.stop().await;
    let d = TestDaemon::start_on(tmp.path(), malformed_config()).await;
    let (s, err) = d
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"agent": "cat", "cwd": "/tmp"})),
        )
        .await;
    assert_eq!(
        (s, err["error"]["code"].as_str()),
        (503, Some("target_config_invalid")),
        "{err}"
    );
    assert_eq!(err["error"]["data"]["problem"], "config_malformed");
    // The session is listed, and the refusal comes before session_dead on every path.
    assert_eq!(d.session(&id).await["alive"], false);
    let (s, err) = d
        .call(
            "POST",
            &format!("/v1/sessions/{id}/input"),
            Some(json!({"data": "x"})),
        )
        .await;
    assert_eq!(
        (s, err["error"]["code"].as_str()),
        (503, Some("target_config_invalid")),
        "{err}"
    );
    let (s, _) = d
        .try_ws(&format!("/v1/sessions/{id}/attach"), None)
        .await
        .err()
        .unwrap();
    assert_eq!(s, 503);
    d.stop().await;
}

#[actix_rt::test]
async fn a_session_stays_bound_to_its_targets_identity_across_restarts() {
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), test_config()).await;
    let id = id_of(&d.spawn("sh").await);
    d.stop().await;

    // The same target id with other options is another identity.
    let changed = config_with(
        r#"{"targets": {"local": {"provider": "local-pty", "note": "moved"}}, "defaultTarget": "local"}"#,
    );
    let d = TestDaemon::start_on(tmp.path(), changed).await;
    for (method, path, body) in [
        ("POST", format!("/v1/sessions/{id}/revive"), None),
        (
            "POST",
            format!("/v1/sessions/{id}/input"),
            Some(json!({"data": "x"})),
        ),
        ("POST", format!("/v1/sessions/{id}/kill"), None),
    ] {
        let (s, err) = d.call(method, &path, body).await;
        assert_eq!(s, 409, "{path}: {err}");
        assert_eq!(err["error"]["code"], "target_changed", "{path}");
        assert_eq!(
            err["error"]["data"]["boundIdentity"],
            "local-pty:44136fa355b3678a"
        );
        assert_ne!(
            err["error"]["data"]["currentIdentity"],
            "local-pty:44136fa355b3678a"
        );
    }
    let (s, _) = d
        .try_ws(&format!("/v1/sessions/{id}/attach"), None)
        .await
        .err()
        .unwrap();
    assert_eq!(s, 409);
    let (_, restored) = d.call("POST", "/v1/fleet/restore", None).await;
    assert_eq!(
        restored["restored"], 0,
        "a changed target is not restored onto"
    );
    // New sessions bind to the new identity and work.
    let fresh = id_of(&d.spawn("cat").await);
    assert_eq!(d.session(&fresh).await["alive"], true);
    d.stop().await;

    // A target id that is gone is unknown; the old session stays listed.
    let renamed = config_with(
        r#"{"targets": {"elsewhere": {"provider": "local-pty"}}, "defaultTarget": "elsewhere"}"#,
    );
    let d = TestDaemon::start_on(tmp.path(), renamed).await;
    let (s, err) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(
        (s, err["error"]["code"].as_str()),
        (404, Some("unknown_target")),
        "{err}"
    );
    d.stop().await;

    // With the original config back, the session revives under its id.
    let d = TestDaemon::start_on(tmp.path(), test_config()).await;
    let (s, body) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["session"]["alive"], true);
    d.stop().await;
}
