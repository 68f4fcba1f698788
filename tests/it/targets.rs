//! Execution targets: the refusal chain as a client sees it, and a session's binding to its
//! target's identity across restarts (spec §4).

use std::time::Duration;

use atc::config::Config;
use atc_testkit::{id_of, test_config, TestDaemon};
use serde_json::json;

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

/// Issue 8 item 3: input goes through the one refusal point on every path. The PTY echoes
/// anything written to it, so no echo means nothing reached the process.
#[actix_rt::test]
async fn input_on_a_provider_without_input_is_refused_over_the_socket_and_http_and_never_written() {
    use atc_testkit::Frame;
    use std::sync::Arc;
    let config =
        config_with(r#"{"targets": {"mute": {"provider": "mute-pty"}}, "defaultTarget": "mute"}"#);
    // The local PTY provider without the `input` capability, behind the provider trait.
    let mute = atc_testkit::caps_provider::CapsProvider {
        kind: "mute-pty",
        inner: Arc::new(atc::providers::local::LocalPty {
            exit_drain: config.timings.exit_drain,
            withheld: Vec::new(),
            cgroups: None,
        }),
        adjust: |c| atc::providers::Capabilities { input: false, ..c },
    };
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_with_providers(
        tmp.path(),
        config,
        atc::daemon::ExtraProviders::default().with(Arc::new(mute)),
    )
    .await;
    let id = id_of(&d.spawn("cat").await);
    let (mut ws, _, _) = d.attach(&id, "cols=80&rows=24").await;

    ws.send_binary(b"typed-over-the-socket\r").await;
    let refused = ws.next_text("error").await;
    assert_eq!(refused["code"], "unsupported_operation", "{refused}");

    let (status, err) = d
        .call(
            "POST",
            &format!("/v1/sessions/{id}/input"),
            Some(json!({"data": "typed-over-http\r"})),
        )
        .await;
    assert_eq!(status, 422, "{err}");
    assert_eq!(err["error"]["code"], "unsupported_operation", "{err}");
    assert_eq!(err["error"]["data"]["capability"], "input", "{err}");
    let (status, err) = d
        .call(
            "POST",
            &format!("/v1/sessions/{id}/submit"),
            Some(json!({"text": "typed-by-submit"})),
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (422, Some("unsupported_operation")),
        "{err}"
    );

    // A resize is never refused (spec §4.4), so it still reaches the session.
    ws.send_json(json!({"type": "resize", "cols": 70, "rows": 20}))
        .await;
    let resized = ws.next_text("resized").await;
    assert_eq!(
        (resized["cols"].as_u64(), resized["rows"].as_u64()),
        (Some(70), Some(20))
    );

    // Nothing was written: no echo arrives within a short window.
    let mut echoed = Vec::new();
    while let Some(frame) = ws.next_within(Duration::from_millis(400)).await {
        match frame {
            Frame::Binary(b) => echoed.extend_from_slice(&b),
            Frame::Close => break,
            Frame::Text(_) => {}
        }
    }
    assert!(
        !String::from_utf8_lossy(&echoed).contains("typed"),
        "input reached the process: {:?}",
        String::from_utf8_lossy(&echoed)
    );
    let (_, screen) = d
        .call("GET", &format!("/v1/sessions/{id}/screen"), None)
        .await;
    assert!(!screen.to_string().contains("typed"), "{screen}");
    ws.close().await;
    d.stop().await;
}
