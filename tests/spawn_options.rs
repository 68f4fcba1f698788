//! Spawn overrides (spec §9.2): checked before anything starts, turned into argv without a
//! shell, stored and reused by every revive; the agents listing advertises them.

mod support;

use std::collections::BTreeMap;

use atc::config::AgentConfig;
use serde_json::json;
use support::{id_of, test_config, TestDaemon};

/// A claude-kind stand-in that prints its argv (after the script) and waits.
fn argv_printer(args_after: &[&str]) -> AgentConfig {
    let mut args = vec![
        "-c".to_string(),
        "printf 'argv:'; printf ' [%s]' \"$@\"; echo; exec sleep 1000".to_string(),
        "sh".to_string(),
    ];
    args.extend(args_after.iter().map(|s| s.to_string()));
    AgentConfig {
        bin: "/bin/sh".into(),
        args,
        env: BTreeMap::new(),
        label: None,
        kind: Some("claude".into()),
    }
}

#[actix_rt::test]
async fn overrides_replace_configured_flags_and_survive_a_revive() {
    let mut config = test_config();
    config
        .agents
        .insert("cl".into(), argv_printer(&["--model", "old", "--verbose"]));
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let s = d
        .spawn_with(json!({"agent": "cl", "cwd": "/tmp", "model": "opus[1m]", "effort": "high"}))
        .await;
    let id = id_of(&s);
    let expected = "argv: [--verbose] [--model] [opus[1m]] [--effort] [high]";
    d.wait_screen(&id, expected).await;
    d.call("POST", &format!("/v1/sessions/{id}/kill"), None)
        .await;
    d.wait_session(&id, "exited", |s| s["alive"] == false).await;
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    d.wait_screen(&id, expected).await;
    let (_, fleet) = d.call("GET", "/v1/fleet", None).await;
    assert_eq!(
        (
            fleet["fleet"][0]["model"].as_str(),
            fleet["fleet"][0]["effort"].as_str()
        ),
        (Some("opus[1m]"), Some("high"))
    );
    // A value with a space stays one argv element: no shell in between.
    let s = d
        .spawn_with(json!({"agent": "cl", "cwd": "/tmp", "model": "my model"}))
        .await;
    d.wait_screen(&id_of(&s), "[--model] [my model]").await;
    d.stop().await;
}

#[actix_rt::test]
async fn bad_overrides_are_refused_before_anything_starts() {
    let mut config = test_config();
    config.agents.insert("cl".into(), argv_printer(&[]));
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let cases = [
        (
            json!({"agent": "sh", "model": "x"}),
            422,
            "unsupported",
            None,
        ),
        (
            json!({"agent": "cl", "model": ""}),
            400,
            "bad_args",
            Some("model"),
        ),
        (
            json!({"agent": "cl", "model": "-x"}),
            400,
            "bad_args",
            Some("model"),
        ),
        (
            json!({"agent": "cl", "model": "a\u{1b}b"}),
            400,
            "bad_args",
            Some("model"),
        ),
        (
            json!({"agent": "cl", "effort": "extreme"}),
            400,
            "bad_args",
            Some("effort"),
        ),
        (
            json!({"agent": "cl", "effort": 3}),
            400,
            "bad_args",
            Some("effort"),
        ),
    ];
    for (mut body, status, code, field) in cases {
        body["cwd"] = json!("/tmp");
        let (s, err) = d.call("POST", "/v1/sessions", Some(body.clone())).await;
        assert_eq!(
            (s, err["error"]["code"].as_str()),
            (status, Some(code)),
            "{body}: {err}"
        );
        if let Some(f) = field {
            assert_eq!(err["error"]["data"]["field"], f, "{body}");
        }
    }
    let (_, list) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(0));
    // The listing says what each agent takes.
    let (_, agents) = d.call("GET", "/v1/agents", None).await;
    let cl = agents["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "cl")
        .unwrap();
    assert_eq!(cl["kind"], "claude");
    assert_eq!(cl["spawnOptions"]["model"]["supported"], true);
    assert_eq!(
        cl["spawnOptions"]["effort"]["values"],
        json!(["low", "medium", "high", "xhigh", "max"])
    );
    let sh = agents["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "sh")
        .unwrap();
    assert_eq!(sh["spawnOptions"]["model"]["supported"], false);
    assert_eq!(agents["spawnDefaults"]["agent"], "claude");
    d.stop().await;
}
