//! The real Claude Code under atc, against Anthropic's Messages API faked on loopback
//! (`atc_testkit::fake_anthropic`): spawn, submit and the turn's result, a second turn, the model
//! and effort overrides, kill and revive, a daemon restart, a permission prompt, and what a
//! fresh client's repaint carries of the terminal modes Claude turns on.
//!
//! The binary comes from `npm ci --prefix tests/agents` at the version its lock file pins;
//! without it each test says it skipped and how to get it (`atc_testkit::real_agents`).

use atc_testkit::claude_world::world;
use atc_testkit::fake_model::{Reply, AGENT_WITHIN};
use atc_testkit::TestDaemon;
use serde_json::json;

#[actix_rt::test]
async fn a_submit_runs_a_turn_whose_reply_becomes_the_result_and_a_second_submit_another() {
    let Some(w) = world(vec![
        Reply::Text("Hello from the fake model.".into()),
        Reply::Text("Second answer.".into()),
    ])
    .await
    else {
        return;
    };
    let id = w.spawn(json!({})).await;
    let texts = w.submit_turn(&id, "say hello").await;
    assert_eq!(texts, vec!["say hello"]);
    w.d.wait_trail(&id, "prompt-submitted", |rows| {
        rows.iter().any(|r| r["kind"] == "prompt-submitted")
    })
    .await;
    w.done_with(&id, "Hello from the fake model.").await;
    w.d.wait_screen(&id, "Hello from the fake model.").await;

    let texts = w.submit_turn(&id, "and once more").await;
    assert_eq!(
        texts,
        vec!["say hello", "and once more"],
        "the conversation goes on"
    );
    w.done_with(&id, "Second answer.").await;
    w.d.stop().await;
}

#[actix_rt::test]
async fn model_and_effort_overrides_are_accepted_by_claude_and_reach_the_model() {
    let Some(w) = world(vec![Reply::Text("as you like".into())]).await else {
        return;
    };
    let id = w
        .spawn(json!({"model": "claude-opus-4-5", "effort": "high"}))
        .await;
    w.submit_turn(&id, "which model").await;
    let turn = w.model.turns().pop().expect("a turn");
    assert_eq!(turn.model, "claude-opus-4-5");
    assert_eq!(turn.effort.as_deref(), Some("high"));
    w.done_with(&id, "as you like").await;
    w.d.stop().await;
}

#[actix_rt::test]
async fn kill_and_revive_resume_the_same_conversation() {
    let Some(w) = world(vec![
        Reply::Text("first answer".into()),
        Reply::Text("after the revive".into()),
    ])
    .await
    else {
        return;
    };
    let id = w.spawn(json!({})).await;
    w.submit_turn(&id, "remember this").await;
    let before = w.done_with(&id, "first answer").await;
    let since = w.d.stream_end(&id).await;
    let (status, body) =
        w.d.call("POST", &format!("/v1/sessions/{id}/kill"), None)
            .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) =
        w.d.call("POST", &format!("/v1/sessions/{id}/revive"), None)
            .await;
    assert_eq!(status, 200, "{body}");
    w.ready(&id).await;
    // The screen model still shows the killed Claude's modes: wait for the new one's.
    w.d.wait_output_since(&id, &since, b"\x1b[?2004h").await;
    let texts = w.submit_turn(&id, "what did I say").await;
    assert_eq!(texts, vec!["remember this", "what did I say"]);
    let after = w.done_with(&id, "after the revive").await;
    assert_eq!(after["agentSessionID"], before["agentSessionID"]);
    w.d.stop().await;
}

#[actix_rt::test]
async fn a_daemon_restart_restores_the_session_and_its_conversation() {
    let Some(mut w) = world(vec![
        Reply::Text("before the restart".into()),
        Reply::Text("after the restart".into()),
    ])
    .await
    else {
        return;
    };
    let id = w.spawn(json!({})).await;
    w.submit_turn(&id, "keep this").await;
    w.done_with(&id, "before the restart").await;
    // Claude writes its transcript a moment after its Stop hook; a stop before that (a busy
    // machine) leaves a conversation to resume that was never written.
    let row = w.d.fleet_row(&id).await;
    let transcript = row["transcriptPath"]
        .as_str()
        .unwrap_or_else(|| panic!("no transcript path reported: {row}"))
        .to_string();
    atc_testkit::poll_ok(AGENT_WITHIN, async || {
        let text = std::fs::read_to_string(&transcript).unwrap_or_default();
        if text.contains("before the restart") {
            Ok(())
        } else {
            Err(text.len())
        }
    })
    .await
    .unwrap_or_else(|len| panic!("{transcript} never held the reply ({len} bytes)"));
    w.d.stop().await;

    w.d = TestDaemon::start_on(&w.state, w.config.clone()).await;
    let (status, body) = w.d.call("POST", "/v1/fleet/restore", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"restored": 1}));
    w.ready(&id).await;
    let texts = w.submit_turn(&id, "still there?").await;
    assert_eq!(texts, vec!["keep this", "still there?"]);
    w.done_with(&id, "after the restart").await;
    w.d.stop().await;
}

#[actix_rt::test]
async fn a_tool_call_that_asks_permission_needs_you_and_answering_by_input_runs_it() {
    let Some(w) = world(vec![
        // Claude Code runs read-only commands such as a bare `echo` without asking.
        Reply::Bash("touch made-by-claude && echo atc-permission-$((6*7))".into()),
        Reply::Text("the command ran".into()),
    ])
    .await
    else {
        return;
    };
    let id = w.spawn(json!({})).await;
    w.submit_turn(&id, "run the command").await;
    w.d.wait_session_within(&id, "needs_you", AGENT_WITHIN, |s| {
        s["state"] == "needs_you"
    })
    .await;
    w.d.wait_screen(&id, "touch made-by-claude").await;
    assert!(
        !w.work.join("made-by-claude").exists(),
        "ran before it was allowed"
    );
    // Enter picks the prompt's first choice, "Yes".
    let (status, body) =
        w.d.call(
            "POST",
            &format!("/v1/sessions/{id}/input"),
            Some(json!({"data": "\r"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    w.d.wait_session_within(&id, "running again", AGENT_WITHIN, |s| {
        s["state"] != "needs_you"
    })
    .await;
    // The command ran: its output went back to the model as the tool's result.
    w.model
        .wait_asked("the tool's result", |asked| {
            asked
                .iter()
                .any(|a| a.turn && a.body.to_string().contains("atc-permission-42"))
        })
        .await;
    w.done_with(&id, "the command ran").await;
    assert!(w.work.join("made-by-claude").exists());
    w.d.stop().await;
}

#[actix_rt::test]
async fn a_fresh_client_gets_the_terminal_modes_claude_turned_on() {
    let Some(w) = world(vec![]).await else {
        return;
    };
    let id = w.spawn(json!({})).await;
    let (ws, _, prelude) = w.d.attach(&id, "cols=120&rows=40").await;
    let term = atc_testkit::terminal_after(&prelude, 120, 40);
    let screen = term.screen();
    assert!(screen.alternate_screen(), "Claude's full-screen UI");
    assert!(screen.bracketed_paste());
    assert_eq!(
        screen.mouse_protocol_mode(),
        vt100::MouseProtocolMode::AnyMotion
    );
    assert_eq!(
        screen.mouse_protocol_encoding(),
        vt100::MouseProtocolEncoding::Sgr
    );
    assert!(screen.contents().contains('❯'), "{}", screen.contents());
    ws.close().await;
    w.d.stop().await;
}

/// The bytes of one real Claude session as atc streamed them: its start, one prompt, the
/// reply. They are a payload of the load tool and part of the screen model's fidelity corpus
/// (`tests/agents/recordings/`); `ATC_RECORD=1` writes them there again.
#[actix_rt::test]
async fn a_real_session_is_recorded_whole_through_a_resume_from_offset_zero() {
    const REPLY: &str = "That is all: the recording ends here.";
    // What agents print: markdown with a heading, a list, a highlighted code block, a line
    // long enough to wrap, and wide characters.
    let long = format!(
        "## What the daemon does\n\n\
         - hosts agents in **pseudo-terminals**\n\
         - serves them over `HTTP` and *WebSocket*\n\n\
         ```rust\nfn main() {{\n    let answer = 6 * 7;\n    println!(\"{{answer}}\");\n}}\n```\n\n\
         {}\n\n端末の中のエージェント、幅の広い文字。\n\n{REPLY}",
        "A line long enough to wrap at the terminal's right margin. ".repeat(6)
    );
    let Some(w) = world(vec![
        Reply::Text("A first, short answer.".into()),
        Reply::Text(long),
    ])
    .await
    else {
        return;
    };
    let id = w.spawn(json!({})).await;
    w.submit_turn(&id, "say something to record").await;
    w.done_with(&id, "A first, short answer.").await;
    w.submit_turn(&id, "now something longer, with code").await;
    w.d.wait_screen_within(&id, REPLY, AGENT_WITHIN).await;
    let (ws, attached, _) = w.d.attach(&id, "cols=120&rows=40&mode=watch").await;
    ws.close().await;
    let end = attached["offset"].as_u64().expect("the live offset") as usize;
    let query = format!(
        "cols=120&rows=40&mode=watch&stream={}&from=0",
        attached["stream"].as_str().expect("the stream id")
    );
    let (mut ws, resumed, _) = w.d.attach(&id, &query).await;
    assert_eq!(resumed["replay"], "resume", "{resumed}");
    // Claude may draw again (its status line) after the first attach read the offset, and the
    // replay runs on to the live end: the recording is the first `end` bytes.
    let mut bytes = ws.read_at_least(end).await;
    bytes.truncate(end);
    ws.close().await;
    let (rows, _) = atc_testkit::rendered_rows(&bytes, 120, 40);
    assert!(
        rows.iter().any(|r| r.contains(REPLY)),
        "the recording replays to the reply: {rows:#?}"
    );
    if std::env::var("ATC_RECORD").as_deref() == Ok("1") {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/agents/recordings/claude-2.1.332.bin");
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("recordings folder");
        std::fs::write(&path, &bytes).expect("write the recording");
        println!("recorded {} bytes to {}", bytes.len(), path.display());
    }
    w.d.stop().await;
}
