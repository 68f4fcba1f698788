//! Attention from agent hooks: `atc hook-report` inside a session, the reporter socket, and
//! the state each agent kind's hooks drive (spec §3.4, §9.5).

use std::io::Write;
use std::time::Duration;

use atc::config::AgentConfig;
use atc_testkit::{agent_shells_daemon as daemon, hook, id_of, test_config, TestDaemon};
use serde_json::{json, Value};

/// A Claude session id (Claude Code names its sessions with UUIDs; atc takes nothing else from
/// a claude-kind agent).
const CLAUDE_SESSION: &str = "3f2b8c1e-5d4a-4e6f-9a7b-1c2d3e4f5a6b";

/// The args of a stand-in agent: a script that execs a plain shell, ignoring its own args.
fn stand_in_args() -> Vec<String> {
    vec!["-c".into(), "exec /bin/sh".into(), "agent".into()]
}

async fn becomes(d: &TestDaemon, id: &str, state: &str, unread: bool, last_msg: &str) -> Value {
    d.wait_session(id, &format!("{state}/{unread}/{last_msg}"), |s| {
        s["state"] == state && s["unread"] == unread && s["lastMsg"] == last_msg
    })
    .await
}

#[actix_rt::test]
async fn claude_hooks_drive_needs_you_running_and_done() {
    let (d, _tmp) = daemon().await;
    let id = id_of(&d.spawn("claude").await);
    hook(
        &d,
        &id,
        json!({"hook_event_name": "SessionStart", "session_id": CLAUDE_SESSION}),
    )
    .await;
    d.wait_session(&id, "the agent session id", |s| {
        s["agentSessionID"] == CLAUDE_SESSION
    })
    .await;
    hook(
        &d,
        &id,
        json!({"hook_event_name": "Notification", "message": "Allow Bash?"}),
    )
    .await;
    becomes(&d, &id, "needs_you", true, "Allow Bash?").await;
    hook(
        &d,
        &id,
        json!({"hook_event_name": "UserPromptSubmit", "prompt": "go on"}),
    )
    .await;
    becomes(&d, &id, "running", false, "go on").await;
    hook(
        &d,
        &id,
        json!({"hook_event_name": "Stop", "last_assistant_message": "all done"}),
    )
    .await;
    becomes(&d, &id, "done", true, "turn done").await;
    hook(&d, &id, json!({"hook_event_name": "SessionEnd"})).await;
    // A live terminal that reports its end is not exited.
    let s = becomes(&d, &id, "done", false, "session ended").await;
    assert_eq!(s["alive"], true);
    let (_, resume) = d
        .call("GET", &format!("/v1/sessions/{id}/resume-command"), None)
        .await;
    let settings = d.state_dir.join("claude").join(format!("{id}.json"));
    assert_eq!(
        resume["command"],
        format!(
            "cd /tmp && /bin/sh --settings {} --resume {CLAUDE_SESSION}",
            settings.display()
        ),
        "{resume}"
    );
    // The agent session id is on the row: it survives a restart.
    let (_, fleet) = d.call("GET", "/v1/fleet", None).await;
    assert_eq!(fleet["fleet"][0]["sessionId"], id.as_str());
    // The turn's result is on the row.
    assert_eq!(fleet["fleet"][0]["result"], "all done");
    assert_eq!(fleet["fleet"][0]["agentSessionId"], CLAUDE_SESSION);
    d.stop().await;
}

#[actix_rt::test]
async fn codex_permission_requests_need_you_until_someone_attaches() {
    let (d, _tmp) = daemon().await;
    let id = id_of(&d.spawn("codex").await);
    hook(
        &d,
        &id,
        json!({"hook_event_name": "PermissionRequest", "tool_name": "shell"}),
    )
    .await;
    becomes(&d, &id, "needs_you", true, "waiting for approval: shell").await;
    let (_ws, _, _) = d.attach(&id, "cols=80&rows=24").await;
    becomes(&d, &id, "running", false, "attached").await;
    hook(&d, &id, json!({"hook_event_name": "Stop"})).await;
    becomes(&d, &id, "done", true, "turn done").await;
    d.stop().await;
}

#[actix_rt::test]
async fn grok_idle_prompts_after_a_permission_prompt_change_nothing() {
    let (d, _tmp) = daemon().await;
    let id = id_of(&d.spawn("grok").await);
    hook(
        &d,
        &id,
        json!({"hookEventName": "notification", "type": "permission_prompt", "message": "ok?"}),
    )
    .await;
    becomes(&d, &id, "needs_you", true, "ok?").await;
    hook(
        &d,
        &id,
        json!({"hookEventName": "notification", "type": "idle_prompt"}),
    )
    .await;
    hook(
        &d,
        &id,
        json!({"hookEventName": "user_prompt_submit", "prompt": "next"}),
    )
    .await;
    becomes(&d, &id, "running", false, "next").await;
    hook(
        &d,
        &id,
        json!({"hookEventName": "stop", "reason": "end_turn"}),
    )
    .await;
    becomes(&d, &id, "done", true, "turn done").await;
    d.stop().await;
}

#[actix_rt::test]
async fn malformed_lines_and_unknown_sessions_are_dropped_and_counted() {
    let (d, tmp) = daemon().await;
    let id = id_of(&d.spawn("claude").await);
    let socket = tmp.path().join("atc.sock");
    let other = uuid::Uuid::new_v4();
    let lines = [
        "not json\n".to_string(),
        "{\"atcId\": 5, \"event\": \"Stop\", \"payload\": {}}\n".to_string(),
        format!("{{\"atcId\": \"{other}\", \"key\": \"00\", \"event\": \"Stop\", \"payload\": {{}}}}\n"),
        // Well formed, naming the session, but without its key (what any process of the
        // user's could write).
        format!("{{\"atcId\": \"{id}\", \"event\": \"Notification\", \"payload\": {{\"message\": \"direct\"}}}}\n"),
        format!("{{\"atcId\": \"{id}\", \"key\": \"0123456789abcdef0123456789abcdef\", \"event\": \"Notification\", \"payload\": {{\"message\": \"direct\"}}}}\n"),
    ];
    for line in &lines {
        let mut conn = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        conn.write_all(line.as_bytes()).unwrap();
    }
    // The session's own process, with its key, is heard.
    hook(
        &d,
        &id,
        json!({"hook_event_name": "Notification", "message": "from inside"}),
    )
    .await;
    becomes(&d, &id, "needs_you", true, "from inside").await;
    d.wait_reporter(1, 5).await;
    assert_eq!(
        d.session(&id).await["alive"],
        true,
        "bad reports hurt nothing"
    );
    d.stop().await;
}

#[test]
fn hook_report_always_exits_0() {
    let run = |envs: &[(&str, &str)], input: &str| {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_atc"))
            .arg("hook-report")
            .env_remove("ATC_SOCKET")
            .env_remove("ATC_SESSION_ID")
            .envs(envs.iter().copied())
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
        child.wait().unwrap()
    };
    assert!(run(&[], "{\"hook_event_name\":\"Stop\"}").success());
    assert!(run(
        &[
            ("ATC_SOCKET", "/nonexistent/atc.sock"),
            ("ATC_SESSION_ID", "x")
        ],
        "{\"hook_event_name\":\"Stop\"}"
    )
    .success());
    assert!(run(
        &[("ATC_SOCKET", "/nonexistent"), ("ATC_SESSION_ID", "x")],
        "garbage"
    )
    .success());
}

#[actix_rt::test]
async fn needs_you_opens_a_permission_request_that_leaving_dismisses() {
    let (d, _tmp) = daemon().await;
    let mut events = d.ws("/v1/events").await;
    let id = id_of(&d.spawn("claude").await);
    hook(
        &d,
        &id,
        json!({"hook_event_name": "Notification", "message": "Allow rm?"}),
    )
    .await;
    let requested = events.next_text("permission.requested").await;
    assert_eq!(requested["s"], id.as_str());
    assert_eq!(requested["message"], "Allow rm?");
    assert_eq!(requested["respondable"], false);
    let request = requested["request"].as_str().unwrap().to_string();
    let (_, list) = d.call("GET", "/v1/permissions", None).await;
    assert_eq!(
        list["permissions"][0]["request"],
        request.as_str(),
        "{list}"
    );
    // A PTY prompt is answered by typing, not through the API.
    let path = format!("/v1/permissions/{request}");
    let (status, err) = d
        .call("POST", &path, Some(json!({"decision": "allow"})))
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (422, Some("unsupported")),
        "{err}"
    );
    let (status, err) = d.call("POST", &path, Some(json!({}))).await;
    assert_eq!(
        (status, err["error"]["data"]["field"].as_str()),
        (400, Some("decision"))
    );
    // Leaving needs_you dismisses it, once.
    hook(
        &d,
        &id,
        json!({"hook_event_name": "UserPromptSubmit", "prompt": "ok"}),
    )
    .await;
    let resolved = events.next_text("permission.resolved").await;
    assert_eq!(
        (resolved["request"].as_str(), resolved["decision"].as_str()),
        (Some(request.as_str()), Some("dismissed"))
    );
    let (_, list) = d.call("GET", "/v1/permissions", None).await;
    assert_eq!(list["permissions"].as_array().map(Vec::len), Some(0));
    let (status, err) = d
        .call("POST", &path, Some(json!({"decision": "allow"})))
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("already_answered")),
        "{err}"
    );
    let (status, err) = d
        .call(
            "POST",
            "/v1/permissions/p999999",
            Some(json!({"decision": "allow"})),
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (404, Some("no_such_request")),
        "{err}"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn an_unanswered_request_times_out_as_deny() {
    let mut config = test_config();
    config.timings.permission_timeout = Duration::from_millis(100);
    let mut env = std::collections::BTreeMap::new();
    env.insert("PS1".to_string(), String::new());
    config.agents.insert(
        "claude".into(),
        AgentConfig {
            bin: "/bin/sh".into(),
            args: stand_in_args(),
            env,
            label: None,
            kind: None,
            ..Default::default()
        },
    );
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let mut events = d.ws("/v1/events").await;
    let id = id_of(&d.spawn("claude").await);
    hook(
        &d,
        &id,
        json!({"hook_event_name": "Notification", "message": "?"}),
    )
    .await;
    let request = events.next_text("permission.requested").await["request"].clone();
    let resolved = events.next_text("permission.resolved").await;
    assert_eq!(resolved["request"], request);
    assert_eq!(resolved["decision"], "deny");
    d.stop().await;
}

#[actix_rt::test]
async fn the_trail_keeps_reports_and_long_polls_for_the_next() {
    let (d, _tmp) = daemon().await;
    let id = id_of(&d.spawn("claude").await);
    let (status, first) = d.call("GET", "/v1/events/trail", None).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["events"].as_array().map(Vec::len), Some(0));
    assert_eq!(first["more"], false);
    let start = first["cursor"].as_str().unwrap().to_string();
    // A reader waiting on the cursor is answered by the next report, not by its timeout.
    let waited = std::time::Instant::now();
    let poll_path = format!("/v1/events/trail?cursor={start}&waitMs=20000");
    let report = json!({"hook_event_name": "Notification", "message": "Allow?", "session_id": CLAUDE_SESSION});
    let (polled, ()) = tokio::join!(d.call("GET", &poll_path, None), hook(&d, &id, report));
    assert!(
        waited.elapsed() < Duration::from_secs(15),
        "the long poll waited out its time"
    );
    let e = &polled.1["events"][0];
    assert_eq!(
        (e["atcId"].as_str(), e["event"].as_str()),
        (Some(id.as_str()), Some("Notification")),
        "{polled:?}"
    );
    assert_eq!(
        (e["kind"].as_str(), e["message"].as_str()),
        (Some("needs-input"), Some("Allow?"))
    );
    assert_eq!(e["sessionId"], CLAUDE_SESSION);
    let ts = e["ts"].as_str().unwrap();
    assert!(
        ts.len() == 24 && ts.ends_with('Z') && &ts[10..11] == "T",
        "{ts}"
    );
    for payload in [
        json!({"hook_event_name": "UserPromptSubmit", "prompt": "go"}),
        json!({"hook_event_name": "PreToolUse"}),
        json!({"hook_event_name": "Stop", "last_assistant_message": "done!"}),
    ] {
        hook(&d, &id, payload).await;
    }
    becomes(&d, &id, "done", true, "turn done").await;
    // Paging from the start: two, then the other two.
    let (_, page) = d
        .call(
            "GET",
            &format!("/v1/events/trail?cursor={start}&limit=2"),
            None,
        )
        .await;
    assert_eq!(page["events"].as_array().map(Vec::len), Some(2), "{page}");
    assert_eq!(page["more"], true);
    let next = page["cursor"].as_str().unwrap();
    let (_, rest) = d
        .call(
            "GET",
            &format!("/v1/events/trail?cursor={next}&limit=2"),
            None,
        )
        .await;
    let kinds: Vec<_> = rest["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].clone())
        .collect();
    assert_eq!(
        kinds,
        vec![json!("heartbeat"), json!("turn-done")],
        "{rest}"
    );
    assert_eq!(rest["more"], false);
    assert_eq!(rest["events"][1]["detail"], "done!");
    // Nothing new: an empty page after the wait, at the same cursor.
    let end = rest["cursor"].as_str().unwrap();
    let (_, empty) = d
        .call(
            "GET",
            &format!("/v1/events/trail?cursor={end}&waitMs=50"),
            None,
        )
        .await;
    assert_eq!(
        (
            empty["events"].as_array().map(Vec::len),
            empty["cursor"].as_str()
        ),
        (Some(0), Some(end))
    );
    for bad in ["cursor=nope", "limit=0", "waitMs=30001"] {
        let (status, err) = d
            .call("GET", &format!("/v1/events/trail?{bad}"), None)
            .await;
        assert_eq!(
            (status, err["error"]["code"].as_str()),
            (400, Some("bad_args")),
            "{bad}: {err}"
        );
    }
    d.stop().await;
}
