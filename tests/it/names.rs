//! What agents' reports do beyond attention: names read from the agents' own files (spec §3.4
//! "name source", §9.5 Names), the transcript path on the row, Grok's stale stops, and
//! `last_used_agent`. Reports go through the real path: `atc hook-report` typed into a shell
//! that stands in for the agent, the reporter socket, the session.

use std::path::Path;

use atc_testkit::{
    agent_shells_config, agent_shells_daemon, hook, id_of, poll_ok, TestDaemon, Ws, WITHIN,
};
use serde_json::{json, Value};

/// Writes a JSONL file.
fn jsonl(path: &Path, lines: &[Value]) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).unwrap();
}

/// The next `session.renamed` event of session `id`.
async fn next_rename(events: &mut Ws, id: &str) -> Value {
    loop {
        let e = events.next_text("session.renamed").await;
        if e["s"] == id {
            return e;
        }
    }
}

/// Polls until `pred` holds on the daemon's `/v1/fleet` row of `id`; answers the row.
async fn fleet_row(d: &TestDaemon, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    poll_ok(WITHIN, async || {
        let row = d.fleet_row(id).await;
        if pred(&row) {
            Ok(row)
        } else {
            Err(row)
        }
    })
    .await
    .unwrap_or_else(|row| panic!("fleet row of {id} never had {what}: {row}"))
}

/// Polls the trail until it holds `count` `event` reports of session `id`; answers those rows,
/// oldest first. Reading the trail flushes every store write queued before those rows.
async fn trail_rows(d: &TestDaemon, id: &str, event: &str, count: usize) -> Vec<Value> {
    let of_event = |rows: &[Value]| -> Vec<Value> {
        rows.iter()
            .filter(|r| r["event"] == event)
            .cloned()
            .collect()
    };
    let what = format!("{count} {event}");
    of_event(
        &d.wait_trail(id, &what, |rows| of_event(rows).len() >= count)
            .await,
    )
}

/// Polls `/v1/daemon` until `lastUsedAgent` is `agent`.
async fn last_used_agent_becomes(d: &TestDaemon, agent: &str) {
    let became = poll_ok(WITHIN, async || {
        let (_, info) = d.call("GET", "/v1/daemon", None).await;
        if info["lastUsedAgent"] == agent {
            Ok(())
        } else {
            Err(info)
        }
    })
    .await;
    if let Err(info) = became {
        panic!("lastUsedAgent never became {agent}: {info}");
    }
}

#[actix_rt::test]
async fn a_claude_summary_names_an_auto_named_session_and_the_row_keeps_the_transcript() {
    let (d, tmp) = agent_shells_daemon().await;
    let mut events = d.ws("/v1/events").await;
    let id = id_of(&d.spawn("claude").await);
    let transcript = tmp.path().join("claude/one.jsonl");
    jsonl(
        &transcript,
        &[
            json!({"type": "summary", "summary": "Fix the login bug", "leafUuid": "u1"}),
            json!({"type": "user", "message": {"content": "fix it"}}),
        ],
    );
    hook(
        &d,
        &id,
        json!({"hook_event_name": "UserPromptSubmit", "prompt": "fix it",
               "session_id": "c1a1c1a1-0000-4000-8000-000000000001", "transcript_path": transcript}),
    )
    .await;
    let renamed = next_rename(&mut events, &id).await;
    assert_eq!(
        (renamed["name"].as_str(), renamed["namedBy"].as_str()),
        (Some("Fix the login bug"), Some("auto")),
        "{renamed}"
    );
    let s = d.session(&id).await;
    assert_eq!(
        (s["name"].as_str(), s["namedBy"].as_str()),
        (Some("Fix the login bug"), Some("auto"))
    );
    let row = fleet_row(&d, &id, "the transcript path", |r| {
        r["transcriptPath"] == transcript.to_str().unwrap()
    })
    .await;
    assert_eq!(row["name"], "Fix the login bug", "{row}");
    d.stop().await;
}

#[actix_rt::test]
async fn a_claude_summary_never_replaces_a_user_name_but_a_custom_title_does() {
    let (d, tmp) = agent_shells_daemon().await;
    let mut events = d.ws("/v1/events").await;
    let id = id_of(
        &d.spawn_with(json!({"agent": "claude", "cwd": "/tmp", "name": "mine"}))
            .await,
    );
    let summarized = tmp.path().join("claude/summary.jsonl");
    jsonl(
        &summarized,
        &[json!({"type": "summary", "summary": "Agent summary"})],
    );
    let titled = tmp.path().join("claude/titled.jsonl");
    jsonl(
        &titled,
        &[
            json!({"type": "summary", "summary": "Agent summary"}),
            json!({"type": "custom-title", "customTitle": "Chosen in claude"}),
        ],
    );
    // Reads run one at a time in report order, so a summary taken from the first would be
    // renamed before the second's title.
    for transcript in [&summarized, &titled] {
        hook(
            &d,
            &id,
            json!({"hook_event_name": "Notification", "message": "?", "transcript_path": transcript}),
        )
        .await;
    }
    let renamed = next_rename(&mut events, &id).await;
    assert_eq!(
        (renamed["name"].as_str(), renamed["namedBy"].as_str()),
        (Some("Chosen in claude"), Some("agent")),
        "{renamed}"
    );
    let s = d.session(&id).await;
    assert_eq!(s["namedBy"], "agent", "{s}");
    d.stop().await;
}

#[actix_rt::test]
async fn an_agent_name_and_the_transcript_path_survive_a_restart() {
    let (d, tmp) = agent_shells_daemon().await;
    let mut events = d.ws("/v1/events").await;
    let id = id_of(&d.spawn("claude").await);
    let transcript = tmp.path().join("claude/kept.jsonl");
    jsonl(
        &transcript,
        &[json!({"type": "custom-title", "customTitle": "Kept title"})],
    );
    hook(
        &d,
        &id,
        json!({"hook_event_name": "SessionStart", "session_id": "c1a1c1a1-0000-4000-8000-000000000002", "transcript_path": transcript}),
    )
    .await;
    next_rename(&mut events, &id).await;
    fleet_row(&d, &id, "the title and the path", |r| {
        r["namedBy"] == "agent" && r["transcriptPath"] == transcript.to_str().unwrap()
    })
    .await;
    drop(events);
    d.stop().await;

    let d = TestDaemon::start_on(tmp.path(), agent_shells_config()).await;
    let s = d.session(&id).await;
    assert_eq!(
        (s["name"].as_str(), s["namedBy"].as_str()),
        (Some("Kept title"), Some("agent")),
        "{s}"
    );
    let (_, fleet) = d.call("GET", "/v1/fleet", None).await;
    assert_eq!(
        fleet["fleet"][0]["transcriptPath"],
        transcript.to_str().unwrap(),
        "{fleet}"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn a_codex_thread_name_from_the_session_index_names_the_session() {
    let (d, _tmp) = agent_shells_daemon().await;
    let mut events = d.ws("/v1/events").await;
    // The test daemon's codex home (the test kit): never the developer's own.
    let index = d.state_dir.join("codex-home/session_index.jsonl");
    jsonl(
        &index,
        &[
            json!({"id": "c0dec0de-0000-4000-8000-000000000001", "thread_name": "First name", "updated_at": "2026-01-01T00:00:00Z"}),
            json!({"id": "c0dec0de-0000-4000-8000-0000000000ff", "thread_name": "Not this one"}),
            json!({"id": "c0dec0de-0000-4000-8000-000000000001", "thread_name": "Refactor the parser", "updated_at": "2026-01-02T00:00:00Z"}),
        ],
    );
    let user_named = id_of(
        &d.spawn_with(json!({"agent": "codex", "cwd": "/tmp", "name": "mine"}))
            .await,
    );
    let id = id_of(&d.spawn("codex").await);
    // The user-named one is read first, with the same thread: were it renamed, that event
    // would come first.
    hook(
        &d,
        &user_named,
        json!({"hook_event_name": "SessionStart", "session_id": "c0dec0de-0000-4000-8000-000000000001"}),
    )
    .await;
    d.wait_session(&user_named, "the agent session id", |s| {
        s["agentSessionID"] == "c0dec0de-0000-4000-8000-000000000001"
    })
    .await;
    hook(
        &d,
        &id,
        json!({"hook_event_name": "SessionStart", "session_id": "c0dec0de-0000-4000-8000-000000000001"}),
    )
    .await;
    let renamed = events.next_text("session.renamed").await;
    assert_eq!(renamed["s"], id.as_str(), "{renamed}");
    assert_eq!(
        (renamed["name"].as_str(), renamed["namedBy"].as_str()),
        (Some("Refactor the parser"), Some("auto")),
        "{renamed}"
    );
    assert_eq!(d.session(&user_named).await["name"], "mine");
    d.stop().await;
}

#[actix_rt::test]
async fn a_grok_title_names_the_session_and_only_a_manual_one_beats_a_user_name() {
    let (d, tmp) = agent_shells_daemon().await;
    let mut events = d.ws("/v1/events").await;
    let grok = tmp.path().join("grok");
    let summary = |dir: &str, title: &str, manual: bool| {
        let dir = grok.join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("summary.json"),
            json!({"title": title, "title_is_manual": manual}).to_string(),
        )
        .unwrap();
        dir.join("transcript.jsonl")
    };
    let auto_id = id_of(&d.spawn("grok").await);
    let made_up = summary("s1", "Grok made this up", false);
    hook(
        &d,
        &auto_id,
        json!({"hookEventName": "user_prompt_submit", "prompt": "hi", "transcriptPath": made_up}),
    )
    .await;
    let renamed = next_rename(&mut events, &auto_id).await;
    assert_eq!(
        (renamed["name"].as_str(), renamed["namedBy"].as_str()),
        (Some("Grok made this up"), Some("auto")),
        "{renamed}"
    );

    let user_id = id_of(
        &d.spawn_with(json!({"agent": "grok", "cwd": "/tmp", "name": "mine"}))
            .await,
    );
    let not_manual = summary("s2", "Not over mine", false);
    let manual = summary("s3", "Renamed in grok", true);
    // In report order: a rename from the first would come before the second's.
    for transcript in [&not_manual, &manual] {
        hook(
            &d,
            &user_id,
            json!({"hookEventName": "notification", "type": "auth_success", "transcriptPath": transcript}),
        )
        .await;
    }
    let renamed = next_rename(&mut events, &user_id).await;
    assert_eq!(
        (renamed["name"].as_str(), renamed["namedBy"].as_str()),
        (Some("Renamed in grok"), Some("agent")),
        "{renamed}"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn a_grok_stop_for_a_superseded_prompt_is_only_a_heartbeat() {
    let (d, _tmp) = agent_shells_daemon().await;
    let id = id_of(&d.spawn("grok").await);
    for (prompt, text) in [("p1", "first"), ("p2", "second")] {
        hook(
            &d,
            &id,
            json!({"hookEventName": "user_prompt_submit", "sessionId": "g-1", "promptId": prompt, "prompt": text}),
        )
        .await;
    }
    d.wait_session(&id, "running the second prompt", |s| {
        s["state"] == "running" && s["lastMsg"] == "second"
    })
    .await;
    hook(
        &d,
        &id,
        json!({"hookEventName": "stop", "reason": "end_turn", "sessionId": "g-1", "promptId": "p1"}),
    )
    .await;
    let stops = trail_rows(&d, &id, "Stop", 1).await;
    assert_eq!(stops[0]["kind"], "heartbeat", "{stops:?}");
    let s = d.session(&id).await;
    assert_eq!(
        (s["state"].as_str(), s["unread"].as_bool()),
        (Some("running"), Some(false)),
        "{s}"
    );
    hook(
        &d,
        &id,
        json!({"hookEventName": "stop", "reason": "end_turn", "sessionId": "g-1", "promptId": "p2"}),
    )
    .await;
    d.wait_session(&id, "done", |s| s["state"] == "done" && s["unread"] == true)
        .await;
    let stops = trail_rows(&d, &id, "Stop", 2).await;
    assert_eq!(stops[1]["kind"], "turn-done", "{stops:?}");
    d.stop().await;
}

#[actix_rt::test]
async fn started_writes_last_used_agent_for_spawns_and_revives_but_not_for_a_restore() {
    let (d, tmp) = agent_shells_daemon().await;
    let codex = id_of(&d.spawn("codex").await);
    hook(
        &d,
        &codex,
        json!({"hook_event_name": "SessionStart", "session_id": "c0dec0de-0000-4000-8000-000000000009"}),
    )
    .await;
    last_used_agent_becomes(&d, "codex").await;
    let grok = id_of(&d.spawn("grok").await);
    d.stop().await;

    let d = TestDaemon::start_on(tmp.path(), agent_shells_config()).await;
    let (status, body) = d.call("POST", "/v1/fleet/restore", None).await;
    assert_eq!(
        (status, body["restored"].as_u64()),
        (200, Some(2)),
        "{body}"
    );
    d.wait_session(&grok, "alive", |s| s["alive"] == true).await;
    hook(
        &d,
        &grok,
        json!({"hookEventName": "session_start", "sessionId": "g-9"}),
    )
    .await;
    // Once the trail holds the report, every write queued before it has landed.
    let started = trail_rows(&d, &grok, "SessionStart", 1).await;
    assert_eq!(started[0]["kind"], "started");
    let (_, info) = d.call("GET", "/v1/daemon", None).await;
    assert_eq!(
        info["lastUsedAgent"], "codex",
        "a restore is not a choice: {info}"
    );

    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{grok}/kill"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{grok}/revive"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    hook(
        &d,
        &grok,
        json!({"hookEventName": "session_start", "sessionId": "g-9"}),
    )
    .await;
    last_used_agent_becomes(&d, "grok").await;
    d.stop().await;
}

/// Issue 31: a name an agent sets is held to the rule a client's is: one that is another
/// session's id (full or short) or that holds bidirectional overrides is not applied (and is
/// logged), while the agent's next good name is. Reads run in report order, so a bad name
/// taken from the first report would be renamed before the good one of the second.
#[actix_rt::test]
async fn an_agent_set_name_that_shadows_an_id_or_holds_bidi_overrides_is_not_applied() {
    let (d, tmp) = agent_shells_daemon().await;
    let mut events = d.ws("/v1/events").await;
    let victim = id_of(&d.spawn("cat").await);
    let bad_titles = [
        victim[..8].to_string(),
        victim.clone(),
        "report\u{202E}txt.exe".to_string(),
        "a\u{2067}b".to_string(),
    ];
    for (i, bad) in bad_titles.iter().enumerate() {
        let id = id_of(&d.spawn("claude").await);
        let bad_file = tmp.path().join(format!("claude/bad-{i}.jsonl"));
        jsonl(
            &bad_file,
            &[json!({"type": "custom-title", "customTitle": bad})],
        );
        let good_file = tmp.path().join(format!("claude/good-{i}.jsonl"));
        let good = format!("good title {i}");
        jsonl(
            &good_file,
            &[json!({"type": "custom-title", "customTitle": good})],
        );
        for transcript in [&bad_file, &good_file] {
            hook(
                &d,
                &id,
                json!({"hook_event_name": "Notification", "message": "?", "transcript_path": transcript}),
            )
            .await;
        }
        let renamed = next_rename(&mut events, &id).await;
        assert_eq!(
            (renamed["name"].as_str(), renamed["namedBy"].as_str()),
            (Some(good.as_str()), Some("agent")),
            "after {bad:?}: {renamed}"
        );
    }
    // The victim's short id still reaches only the victim.
    let (status, _) = d
        .call("GET", &format!("/v1/sessions/{}", &victim[..8]), None)
        .await;
    assert_eq!(status, 404);
    d.stop().await;
}
