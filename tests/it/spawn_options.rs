//! Spawn overrides (spec §9.2): checked before anything starts, turned into argv without a
//! shell, stored and reused by every revive; the agents listing advertises them.

use atc::agents::AgentKind;
use std::collections::BTreeMap;

use atc::config::AgentConfig;
use atc_testkit::{id_of, test_config, TestDaemon};
use serde_json::json;

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
        kind: Some(AgentKind::Claude),
        ..Default::default()
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

/// A claude-kind stand-in that behaves as Claude does with the settings file atc passes: it
/// finds `--settings <file>`, runs the file's hook command with a `Notification` and its
/// statusline command, prints its argv, and waits.
fn settings_runner() -> AgentConfig {
    let script = r#"
printf 'argv:'; printf ' [%s]' "$@"; echo
while [ $# -gt 0 ]; do case "$1" in --settings) f="$2"; shift;; esac; shift; done
hook=$(grep -o '"command": "[^"]*hook-report"' "$f" | head -n 1 | sed 's/^"command": "//; s/"$//')
status=$(grep -o '"command": "[^"]*status-file [^"]*"' "$f" | sed 's/^"command": "//; s/"$//')
echo '{"hook_event_name":"Notification","message":"asked via settings","session_id":"a9e7c0de-0000-4000-8000-000000000077"}' | eval "$hook"
# status.json follows fleet changes after a debounce: poll the statusline until it does.
i=0; while [ $i -lt 100 ]; do
  line=$(echo '{}' | eval "$status")
  case "$line" in *needs*) echo "$line"; break;; esac
  i=$((i + 1)); sleep 0.1
done
exec sleep 1000
"#;
    AgentConfig {
        bin: "/bin/sh".into(),
        args: vec!["-c".into(), script.into(), "claude".into()],
        kind: Some(AgentKind::Claude),
        ..Default::default()
    }
}

#[actix_rt::test]
async fn claude_gets_a_settings_file_whose_hooks_report_and_a_revive_resumes() {
    let mut config = test_config();
    config.agents.insert("cl".into(), settings_runner());
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let s = d.spawn_with(json!({"agent": "cl", "cwd": "/tmp"})).await;
    let id = id_of(&s);
    // The hook in the file reached the daemon through the real `atc hook-report`.
    d.wait_session(&id, "needs_you from the settings hook", |s| {
        s["state"] == "needs_you" && s["lastMsg"] == "asked via settings"
    })
    .await;
    d.wait_screen(&id, "atc: 1 needs you").await;
    let settings: serde_json::Value = serde_json::from_slice(
        &std::fs::read(tmp.path().join("claude").join(format!("{id}.json"))).unwrap(),
    )
    .unwrap();
    for event in [
        "SessionStart",
        "Notification",
        "Stop",
        "UserPromptSubmit",
        "SessionEnd",
    ] {
        let cmd = settings["hooks"][event][0]["hooks"][0]["command"]
            .as_str()
            .unwrap_or_default();
        assert!(cmd.ends_with("hook-report"), "{event}: {cmd}");
    }
    // The agent named its own session; a revive resumes it.
    d.call("POST", &format!("/v1/sessions/{id}/kill"), None)
        .await;
    d.wait_session(&id, "exited", |s| s["alive"] == false).await;
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    d.wait_screen(&id, "[--resume=a9e7c0de-0000-4000-8000-000000000077]")
        .await;
    d.stop().await;
}

#[actix_rt::test]
async fn grok_runs_without_the_leader_role() {
    let mut config = test_config();
    let mut grok = argv_printer(&["--leader", "--verbose"]);
    grok.kind = Some(AgentKind::Grok);
    config.agents.insert("gk".into(), grok);
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let s = d.spawn_with(json!({"agent": "gk", "cwd": "/tmp"})).await;
    let screen = d.wait_screen(&id_of(&s), "[--no-leader]").await;
    assert_eq!(screen["text"], "argv: [--verbose] [--no-leader]");
    d.stop().await;
}

#[actix_rt::test]
async fn gateways_and_model_maps_are_listed() {
    let mut config = test_config();
    let mut gateway = AgentConfig {
        bin: "/bin/sh".into(),
        args: vec![
            "-c".into(),
            "printf 'base:%s argv:' \"$ANTHROPIC_BASE_URL\"; printf ' [%s]' \"$@\"; echo; exec sleep 1000"
                .into(),
            "sh".into(),
        ],
        kind: Some(AgentKind::Claude),
        ..Default::default()
    };
    gateway.base_url = Some("https://gateway.example".into());
    for (k, v) in [
        ("ANTHROPIC_MODEL", "gw-default"),
        ("ANTHROPIC_DEFAULT_OPUS_MODEL", "gw-opus-4"),
        ("ANTHROPIC_DEFAULT_HAIKU_MODEL", "gw-haiku"),
        ("ANTHROPIC_AUTH_TOKEN", "secret-token-value"),
    ] {
        gateway.env.insert(k.into(), v.into());
    }
    config.agents.insert("gw".into(), gateway);
    let mut mapped = argv_printer(&["--model", "sonnet"]);
    mapped.models.insert("default".into(), "sonnet".into());
    config.agents.insert("mapped".into(), mapped);
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let (_, agents) = d.call("GET", "/v1/agents", None).await;
    let text = agents.to_string();
    assert!(!text.contains("secret-token-value"), "{text}");
    assert!(!text.contains("gateway.example"), "{text}");
    let find = |id: &str| {
        agents["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == id)
            .cloned()
            .unwrap()
    };
    let gw = find("gw");
    assert_eq!(
        gw["models"],
        json!({"default": "gw-default", "opus": "gw-opus-4", "haiku": "gw-haiku"})
    );
    let model = &gw["spawnOptions"]["model"];
    assert_eq!(model["default"], "gw-default");
    assert_eq!(
        model["examples"],
        json!([{"value": "haiku", "resolvesTo": "gw-haiku"}, {"value": "opus", "resolvesTo": "gw-opus-4"}])
    );
    assert_eq!(gw["spawnOptions"]["effort"]["backendEffect"], "unverified");
    let mapped = find("mapped");
    assert_eq!(mapped["models"], json!({"default": "sonnet"}));
    assert_eq!(mapped["spawnOptions"]["model"]["default"], "sonnet");
    assert_eq!(mapped["spawnOptions"]["effort"]["backendEffect"], "applied");
    assert_eq!(find("shell")["models"], serde_json::Value::Null);
    // The gateway's base URL reaches the agent's environment.
    let s = d
        .spawn_with(json!({"agent": "gw", "cwd": "/tmp", "model": "opus"}))
        .await;
    let id = id_of(&s);
    d.wait_screen(&id, "base:https://gateway.example argv: [--model] [opus]")
        .await;
    d.stop().await;
}
