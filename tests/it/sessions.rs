//! Spawning, listing, typing into and reading sessions over HTTP, and the refusals a client
//! sees on bad input.

use atc_testkit::{id_of, TestDaemon};
use serde_json::json;

#[actix_rt::test]
async fn spawn_lists_and_echoes_through_the_screen() {
    let d = TestDaemon::start().await;
    let s = d.spawn("sh").await;
    let id = id_of(&s);
    assert_eq!(s["state"], "running");
    assert_eq!(s["alive"], true);
    assert_eq!(s["name"], "tmp");
    assert_eq!(s["agent"], "sh");
    assert!(uuid::Uuid::parse_str(&id).is_ok_and(|u| u.get_version_num() == 4));
    assert_eq!(
        s["lifecycle"],
        json!({"desired": "run", "vm": "none", "harness": "running", "attachment": "local"})
    );

    let (status, list) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(status, 200);
    assert_eq!(list["sessions"][0]["id"], id.as_str());

    let (status, _) = d
        .call(
            "POST",
            &format!("/v1/sessions/{id}/submit"),
            Some(json!({"text": "echo $((6*7))-ok"})),
        )
        .await;
    assert_eq!(status, 200);
    let screen = d.wait_screen(&id, "42-ok").await;
    assert_eq!(screen["cols"], 80);
    assert_eq!(screen["rows"], 24);
    d.stop().await;
}

#[actix_rt::test]
async fn raw_input_is_written_as_bytes() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let (status, _) = d
        .post_raw(
            &format!("/v1/sessions/{id}/input"),
            "application/octet-stream",
            b"printf 'r%sw\\n' a\r".to_vec(),
        )
        .await;
    assert_eq!(status, 200);
    d.wait_screen(&id, "raw").await;
    d.stop().await;
}

#[actix_rt::test]
async fn rename_pin_get_by_name_and_dirs() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("cat").await);
    let (status, body) = d
        .call(
            "PATCH",
            &format!("/v1/sessions/{id}"),
            Some(json!({"name": "worker-1", "pinned": true})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["session"]["name"], "worker-1");
    assert_eq!(body["session"]["namedBy"], "user");
    assert_eq!(body["session"]["pinned"], true);
    let by_name = d.session("worker-1").await;
    assert_eq!(by_name["id"], id.as_str());
    let (_, dirs) = d.call("GET", "/v1/dirs", None).await;
    assert_eq!(dirs["dirs"][0], "/tmp");
    d.stop().await;
}

#[actix_rt::test]
async fn bad_input_gets_bad_args_naming_the_field() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("cat").await);
    let cases = [
        (
            "POST",
            "/v1/sessions".to_string(),
            json!({"agent": "cat"}),
            "cwd",
        ),
        (
            "POST",
            "/v1/sessions".to_string(),
            json!({"agent": 7, "cwd": "/tmp"}),
            "agent",
        ),
        (
            "POST",
            "/v1/sessions".to_string(),
            json!({"agent": "cat", "cwd": "relative"}),
            "cwd",
        ),
        (
            "POST",
            "/v1/sessions".to_string(),
            json!({"agent": "cat", "cwd": "/tmp", "cols": 0}),
            "cols",
        ),
        (
            "POST",
            "/v1/sessions".to_string(),
            json!({"agent": "cat", "cwd": "/tmp", "rows": 4097}),
            "rows",
        ),
        (
            "POST",
            "/v1/sessions".to_string(),
            json!({"agent": "cat", "cwd": "/tmp", "cols": "wide"}),
            "cols",
        ),
        (
            "POST",
            format!("/v1/sessions/{id}/resize"),
            json!({"cols": 80, "rows": 0}),
            "rows",
        ),
        (
            "POST",
            format!("/v1/sessions/{id}/resize"),
            json!({"cols": 80}),
            "rows",
        ),
        (
            "POST",
            format!("/v1/sessions/{id}/input"),
            json!({"data": 5}),
            "data",
        ),
        (
            "POST",
            format!("/v1/sessions/{id}/submit"),
            json!({}),
            "text",
        ),
        (
            "PATCH",
            format!("/v1/sessions/{id}"),
            json!({"pinned": "yes"}),
            "pinned",
        ),
        (
            "PATCH",
            format!("/v1/sessions/{id}"),
            json!({"name": ""}),
            "name",
        ),
    ];
    for (method, path, body, field) in cases {
        let (status, err) = d.call(method, &path, Some(body.clone())).await;
        assert_eq!(status, 400, "{method} {path} {body}: {err}");
        assert_eq!(err["error"]["code"], "bad_args", "{body}");
        assert_eq!(err["error"]["data"]["field"], field, "{body}: {err}");
    }
    // Malformed JSON and a non-object body name the body.
    let (status, err) = d
        .post_raw("/v1/sessions", "application/json", b"{\"agent\":".to_vec())
        .await;
    assert_eq!(status, 400);
    assert_eq!(err["error"]["data"]["field"], "body");
    let (status, err) = d
        .post_raw("/v1/sessions", "application/json", b"[1,2]".to_vec())
        .await;
    assert_eq!(status, 400);
    assert_eq!(err["error"]["data"]["field"], "body");
    // Over the body cap: refused from the declared length, 413.
    let (status, err) = d
        .post_raw(
            &format!("/v1/sessions/{id}/input"),
            "application/octet-stream",
            vec![b'a'; 2 * 1024 * 1024],
        )
        .await;
    assert_eq!(status, 413);
    assert_eq!(err["error"]["data"]["field"], "body");
    // The session survived all of it.
    assert_eq!(d.session(&id).await["alive"], true);
    d.stop().await;
}

#[actix_rt::test]
async fn unknown_sessions_are_404_and_unknown_agents_422() {
    let d = TestDaemon::start().await;
    let missing = uuid::Uuid::new_v4().to_string();
    for (method, path) in [
        ("GET", format!("/v1/sessions/{missing}")),
        ("GET", format!("/v1/sessions/{missing}/screen")),
        ("POST", format!("/v1/sessions/{missing}/kill")),
        ("POST", "/v1/sessions/no-such-name/revive".to_string()),
        ("DELETE", format!("/v1/sessions/{missing}")),
    ] {
        let (status, err) = d.call(method, &path, None).await;
        assert_eq!(status, 404, "{method} {path}: {err}");
        assert_eq!(err["error"]["code"], "no_such_session");
    }
    for agent in ["nope", "ghost"] {
        let (status, err) = d
            .call(
                "POST",
                "/v1/sessions",
                Some(json!({"agent": agent, "cwd": "/tmp"})),
            )
            .await;
        assert_eq!(status, 422, "{agent}: {err}");
        assert_eq!(err["error"]["code"], "unsupported");
        assert_eq!(err["error"]["data"]["agent"], agent);
    }
    let (_, list) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(
        list["sessions"].as_array().map(Vec::len),
        Some(0),
        "nothing was started"
    );
    let (status, err) = d.call("GET", "/v1/nowhere", None).await;
    assert_eq!(status, 404);
    assert_eq!(err["error"]["code"], "unknown_method");
    d.stop().await;
}

#[actix_rt::test]
async fn input_to_an_exited_session_is_session_dead() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    d.call(
        "POST",
        &format!("/v1/sessions/{id}/submit"),
        Some(json!({"text": "exit 3"})),
    )
    .await;
    let s = d.wait_session(&id, "exited", |s| s["alive"] == false).await;
    assert_eq!(s["state"], "exited");
    assert_eq!(s["exitCode"], 3);
    assert_eq!(s["exitReason"], "exited");
    assert_eq!(
        s["lifecycle"],
        json!({"desired": "run", "vm": "none", "harness": "exited", "attachment": "detached"})
    );
    // Each route's own field: a body naming the other's is refused as bad_args (issue 33).
    for (path, body) in [
        ("input", json!({"data": "x"})),
        ("submit", json!({"text": "x"})),
    ] {
        let (status, err) = d
            .call("POST", &format!("/v1/sessions/{id}/{path}"), Some(body))
            .await;
        assert_eq!(status, 409, "{path}: {err}");
        assert_eq!(err["error"]["code"], "session_dead");
    }
    let (status, err) = d
        .try_ws(&format!("/v1/sessions/{id}/attach"), None)
        .await
        .err()
        .unwrap_or((0, String::new()));
    assert_eq!(status, 409, "{err}");
    d.stop().await;
}

#[actix_rt::test]
async fn submit_types_the_line_the_way_each_agent_expects() {
    use atc::config::AgentConfig;
    // Stand-ins under the built-in ids: a raw terminal that shows every byte it gets (cat -A),
    // one of them with bracketed paste switched on the way Codex does it.
    let raw_cat = |paste: bool| AgentConfig {
        bin: "/bin/sh".into(),
        args: vec![
            "-c".into(),
            format!(
                "{}stty raw -echo; echo ready; exec cat -A",
                if paste { "printf '\\033[?2004h'; " } else { "" }
            ),
        ],
        env: Default::default(),
        label: None,
        kind: None,
        ..Default::default()
    };
    let mut config = atc_testkit::test_config();
    config.agents.insert("codex".into(), raw_cat(true));
    config.agents.insert("grok".into(), raw_cat(false));
    config.agents.insert("claude".into(), raw_cat(true));
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config).await;
    for (agent, typed) in [
        ("codex", "^[[200~say hi^[[201~^M"),
        ("grok", "say hi^M"),
        // Claude Code 2.1 keeps a `\n` in its input box: Claude gets Codex's plan.
        ("claude", "^[[200~say hi^[[201~^M"),
    ] {
        let id = id_of(&d.spawn(agent).await);
        d.wait_screen(&id, "ready").await;
        let (status, body) = d
            .call(
                "POST",
                &format!("/v1/sessions/{id}/submit"),
                Some(json!({"text": "say hi"})),
            )
            .await;
        assert_eq!(status, 200, "{agent}: {body}");
        let screen = d.wait_screen(&id, typed).await;
        assert!(
            !screen["text"].as_str().unwrap().contains("say hi^M^"),
            "{agent} got more than one Enter: {screen}"
        );
    }
    d.stop().await;
}

#[actix_rt::test]
async fn each_session_gets_a_read_only_record_file_removed_on_forget() {
    use std::os::unix::fs::PermissionsExt;
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let path = d.state_dir.join("records").join(format!("{id}.json"));
    d.call(
        "POST",
        &format!("/v1/sessions/{id}/submit"),
        Some(json!({"text": "echo \"rec=$ATC_SESSION_RECORD\""})),
    )
    .await;
    d.wait_screen(&id, &format!("rec={}", path.display())).await;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o444);
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(record["format"], "atc.session-record");
    assert_eq!(record["session"]["id"], id.as_str());
    let (_, health) = d.call("GET", "/v1/health", None).await;
    assert_eq!(record["daemonID"], health["daemonId"]);
    let (status, _) = d.call("DELETE", &format!("/v1/sessions/{id}"), None).await;
    assert_eq!(status, 200);
    assert!(!path.exists(), "forget leaves the record behind");
    d.stop().await;
}

#[actix_rt::test]
async fn status_json_counts_the_fleet() {
    let d = TestDaemon::start().await;
    let a = id_of(&d.spawn("cat").await);
    id_of(&d.spawn("cat").await);
    d.call("POST", &format!("/v1/sessions/{a}/kill"), None)
        .await;
    let path = d.state_dir.join("status.json");
    let counted = atc_testkit::poll_ok(atc_testkit::WITHIN, async || {
        let status: Option<serde_json::Value> = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        match status {
            Some(s) if s["running"] == 1 && s["exited"] == 1 => Ok(s),
            other => Err(other),
        }
    })
    .await;
    let s = counted.unwrap_or_else(|status| {
        panic!("status.json never counted 1 running and 1 exited: {status:?}")
    });
    assert_eq!(s["needs_you"], 0);
    assert_eq!(s["needsYouName"], serde_json::Value::Null);
    d.stop().await;
}

#[actix_rt::test]
async fn a_bad_agent_entry_in_the_config_file_refuses_only_that_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("config.json");
    std::fs::write(
        &file,
        r#"{"agents": {
            "good": {"bin": "cat"},
            "typo": {"bin": "cat", "colour": "secret-value"},
            "claude": {"args": "secret-value"}
        }}"#,
    )
    .unwrap();
    let config = atc::config::Config::load(Some(&file), true);
    let d = TestDaemon::start_on(&tmp.path().join("state"), config).await;

    let (status, listing) = d.call("GET", "/v1/agents", None).await;
    assert_eq!(status, 200, "{listing}");
    let agent = |id: &str| {
        listing["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} is not listed: {listing}"))
    };
    for (id, key) in [("typo", "colour"), ("claude", "args")] {
        let a = agent(id);
        assert_eq!(a["problem"]["problem"], "agent_invalid", "{a}");
        assert!(
            a["problem"]["detail"].as_str().unwrap().contains(key),
            "{a}"
        );
        assert_eq!(a["installed"], false, "{a}");
    }
    assert!(agent("good").get("problem").is_none(), "{listing}");
    assert!(!listing.to_string().contains("secret-value"), "{listing}");
    let errors = listing["agentErrors"].as_array().unwrap();
    assert_eq!(errors.len(), 2, "{listing}");

    for id in ["typo", "claude"] {
        let (status, err) = d
            .call(
                "POST",
                "/v1/sessions",
                Some(json!({"agent": id, "cwd": "/tmp"})),
            )
            .await;
        assert_eq!(err["error"]["code"], "unsupported", "{id}: {status} {err}");
        assert_eq!(err["error"]["data"]["agent"], id, "{err}");
        assert_eq!(err["error"]["data"]["problem"], "agent_invalid", "{err}");
    }
    // Every other agent and the default target keep working.
    let s = d.spawn("good").await;
    assert_eq!(s["alive"], true, "{s}");
    assert_eq!(d.spawn("shell").await["alive"], true);
    d.stop().await;
}

/// The listing's entry for `id`, from a fresh `GET /v1/sessions`.
async fn listed(d: &TestDaemon, id: &str) -> Option<serde_json::Value> {
    let (status, list) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(status, 200, "{list}");
    list["sessions"]
        .as_array()
        .expect("sessions is an array")
        .iter()
        .find(|s| s["id"] == id)
        .cloned()
}

/// The manager keeps the listing serialized and rebuilds only what changed, so every kind of
/// change must show in the very next listing, with no wait: attention, ack, rename and pin,
/// resize, exit and forget.
#[actix_rt::test]
async fn every_change_shows_in_the_very_next_listing() {
    let (d, _tmp) = atc_testkit::agent_shells_daemon().await;
    let a = id_of(&d.spawn("claude").await);
    let b = id_of(&d.spawn("sh").await);
    // A first listing, so a listing that failed to notice a change would repeat this one.
    let (_, list) = d.call("GET", "/v1/sessions", None).await;
    let order: Vec<&str> = list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(order, [a.as_str(), b.as_str()], "oldest first");
    let before = listed(&d, &a).await.expect("a is listed");
    assert_eq!(before["state"], "running");
    assert_eq!(before["unread"], false);

    atc_testkit::hook(
        &d,
        &a,
        json!({"hook_event_name": "Notification", "message": "Allow Bash?"}),
    )
    .await;
    d.wait_session(&a, "needs_you", |s| s["state"] == "needs_you")
        .await;
    let s = listed(&d, &a).await.expect("a is listed");
    assert_eq!(
        (&s["state"], &s["unread"], &s["lastMsg"]),
        (&json!("needs_you"), &json!(true), &json!("Allow Bash?")),
        "{s}"
    );

    let (status, _) = d.call("POST", &format!("/v1/sessions/{a}/ack"), None).await;
    assert_eq!(status, 200);
    let s = listed(&d, &a).await.expect("a is listed");
    assert_eq!(s["unread"], false, "{s}");

    let (status, _) = d
        .call(
            "PATCH",
            &format!("/v1/sessions/{a}"),
            Some(json!({"name": "renamed", "pinned": true})),
        )
        .await;
    assert_eq!(status, 200);
    let s = listed(&d, &a).await.expect("a is listed");
    assert_eq!(
        (&s["name"], &s["pinned"]),
        (&json!("renamed"), &json!(true))
    );

    let (status, _) = d
        .call(
            "POST",
            &format!("/v1/sessions/{b}/resize"),
            Some(json!({"cols": 100, "rows": 30})),
        )
        .await;
    assert_eq!(status, 200);
    d.wait_session(&b, "resized", |s| s["cols"] == 100).await;
    let s = listed(&d, &b).await.expect("b is listed");
    assert_eq!((&s["cols"], &s["rows"]), (&json!(100), &json!(30)), "{s}");

    d.call(
        "POST",
        &format!("/v1/sessions/{b}/submit"),
        Some(json!({"text": "exit 3"})),
    )
    .await;
    d.wait_session(&b, "exited", |s| s["alive"] == false).await;
    let s = listed(&d, &b).await.expect("b is listed");
    assert_eq!(
        (&s["alive"], &s["state"], &s["exitCode"]),
        (&json!(false), &json!("exited"), &json!(3)),
        "{s}"
    );

    let (status, body) = d.call("DELETE", &format!("/v1/sessions/{b}"), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        listed(&d, &b).await,
        None,
        "a forgotten session is not listed"
    );
    // The one left is listed as it is now, field for field; `usage` is a reading taken at each
    // request (its memory moves between two), so both must carry one, and the rest must agree.
    let without_usage = |mut s: serde_json::Value| {
        let usage = s.as_object_mut().and_then(|o| o.remove("usage"));
        (s, usage.is_some())
    };
    let listed_now = listed(&d, &a).await.map(without_usage);
    assert_eq!(listed_now, Some(without_usage(d.session(&a).await)));
    d.stop().await;
}

/// Asserts `(status, body)` is the refusal of a start past the session cap of `cap`.
fn assert_session_cap(status: u16, body: &serde_json::Value, cap: u64) {
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "host_unavailable", "{body}");
    assert_eq!(body["error"]["data"]["problem"], "session_cap", "{body}");
    assert_eq!(body["error"]["data"]["limit"], cap, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("limits.maxSessions"), "{body}");
}

/// Issue 31: nothing capped sessions, so one script could take every PTY of the machine. A
/// configured cap on sessions with a running process refuses the spawn and the revive past
/// it with `host_unavailable`, `problem: session_cap`; a kill frees a slot; a restore stops
/// at the cap; `GET /v1/daemon` shows the cap.
#[actix_rt::test]
async fn spawns_and_revives_past_the_session_cap_are_host_unavailable_and_a_kill_frees_a_slot() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = atc_testkit::test_config();
    config.limits.max_sessions = Some(2);
    let d = TestDaemon::start_on(tmp.path(), config.clone()).await;
    let (_, info) = d.call("GET", "/v1/daemon", None).await;
    assert_eq!(info["limits"]["maxSessions"], 2, "{info}");

    let first = id_of(&d.spawn("cat").await);
    d.spawn("cat").await;
    let body = json!({"agent": "cat", "cwd": "/tmp"});
    let (status, refused) = d.call("POST", "/v1/sessions", Some(body.clone())).await;
    assert_session_cap(status, &refused, 2);
    let (_, list) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(2), "{list}");

    let (status, killed) = d
        .call("POST", &format!("/v1/sessions/{first}/kill"), None)
        .await;
    assert_eq!(status, 200, "{killed}");
    d.spawn("cat").await;
    // The killed session's revive is a start too: past the cap while two run.
    let (status, refused) = d
        .call("POST", &format!("/v1/sessions/{first}/revive"), None)
        .await;
    assert_session_cap(status, &refused, 2);
    assert_eq!(d.session(&first).await["alive"], false);

    d.stop().await;

    // Three sessions die with a daemon; under a cap of two a restore revives two (newest
    // first) and leaves the third without a process.
    let tmp = tempfile::tempdir().unwrap();
    config.limits.max_sessions = Some(3);
    let d = TestDaemon::start_on(tmp.path(), config.clone()).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(id_of(&d.spawn("cat").await));
    }
    d.stop().await;
    config.limits.max_sessions = Some(2);
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let (status, restored) = d.call("POST", "/v1/fleet/restore", None).await;
    assert_eq!(status, 200, "{restored}");
    assert_eq!(restored["restored"], 2, "{restored}");
    let mut alive = Vec::new();
    for id in &ids {
        alive.push(d.session(id).await["alive"] == true);
    }
    assert_eq!(alive, vec![false, true, true], "the two newest run");
    d.stop().await;
}

/// Issue 31's probe at 512 descriptors: spawns ran until the descriptor table was full, and
/// then a fresh connection to the daemon timed out. With the cap worked out from the host
/// (null `maxSessions`: a quarter of the open-file limit here), spawns stop at the cap with
/// `session_cap`, and a fresh connection is still served.
#[actix_rt::test]
async fn with_a_small_open_file_limit_spawns_stop_at_the_cap_and_the_owner_still_connects() {
    use std::os::unix::process::CommandExt;
    const OPEN_FILES: u64 = 256;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let log = tmp.path().join("daemon.log");
    let config = json!({"agents": {"cat": {"bin": "cat"}}, "limits": {"maxSessions": null}});
    let mut cmd = atc_testkit::child_daemon::ChildDaemon::command(&dir, &config, &log);
    // SAFETY: setrlimit is async-signal-safe; the hook touches nothing else.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: OPEN_FILES,
                rlim_max: OPEN_FILES,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = atc_testkit::child_daemon::ChildDaemon::spawn(cmd, &dir, &log).await;
    let cap = OPEN_FILES / 4;
    let (_, info) = child.api().call("GET", "/v1/daemon", None).await;
    assert_eq!(info["limits"]["maxSessions"], cap, "{info}");
    let body = json!({"agent": "cat", "cwd": "/tmp"});
    let mut spawned = 0;
    let refusal = loop {
        let (status, answer) = child
            .api()
            .call("POST", "/v1/sessions", Some(body.clone()))
            .await;
        if status != 201 {
            break (status, answer);
        }
        spawned += 1;
        assert!(spawned <= cap, "more than {cap} sessions spawned");
    };
    assert_eq!(spawned, cap, "{refusal:?}");
    assert_session_cap(refusal.0, &refusal.1, cap);
    // A new connection, not one from the pool, is answered.
    let fresh = TestDaemon::connect(&child.api().url, &child.api().token, &dir);
    let (status, list) = fresh.call("GET", "/v1/sessions", None).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(
        list["sessions"].as_array().map(Vec::len),
        Some(cap as usize)
    );
    assert!(
        child.log().contains("session cap worked out from the host"),
        "{}",
        child.log()
    );
    child.stop().await;
}

/// Asserts `(status, body)` refuses a name with `reason`.
fn assert_bad_name(status: u16, body: &serde_json::Value, reason: &str) {
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "bad_args", "{body}");
    assert_eq!(body["error"]["data"]["field"], "name", "{body}");
    assert_eq!(body["error"]["data"]["reason"], reason, "{body}");
}

/// Issue 31: a session could be named like another session's id, so `atc kill NAME` (which
/// looks a key up by id and by name) could end the wrong one; and a name could hold
/// bidirectional overrides that show a listing in another order. Both are refused, at spawn
/// and at a rename, and nothing changes.
#[actix_rt::test]
async fn a_name_that_is_another_sessions_id_or_holds_bidi_overrides_is_refused() {
    let d = TestDaemon::start().await;
    let victim = id_of(&d.spawn("cat").await);
    let short = &victim[..8];
    let me = id_of(
        &d.spawn_with(json!({"agent": "cat", "cwd": "/tmp", "name": "mine"}))
            .await,
    );
    let shadows = [
        victim.clone(),
        victim.to_uppercase(),
        victim.replace('-', ""),
        format!("urn:uuid:{victim}"),
        short.to_string(),
        short.to_uppercase(),
    ];
    for name in &shadows {
        let (status, body) = d
            .call(
                "POST",
                "/v1/sessions",
                Some(json!({"agent": "cat", "cwd": "/tmp", "name": name})),
            )
            .await;
        assert_bad_name(status, &body, "shadows_id");
        let (status, body) = d
            .call(
                "PATCH",
                &format!("/v1/sessions/{me}"),
                Some(json!({"name": name, "pinned": true})),
            )
            .await;
        assert_bad_name(status, &body, "shadows_id");
    }
    for name in ["invoice\u{202E}fdp.exe", "a\u{2066}b\u{2069}", "\u{202A}x"] {
        let (status, body) = d
            .call(
                "POST",
                "/v1/sessions",
                Some(json!({"agent": "cat", "cwd": "/tmp", "name": name})),
            )
            .await;
        assert_bad_name(status, &body, "bidi_override");
        let (status, body) = d
            .call(
                "PATCH",
                &format!("/v1/sessions/{me}"),
                Some(json!({"name": name})),
            )
            .await;
        assert_bad_name(status, &body, "bidi_override");
    }
    // Nothing was spawned, renamed or pinned by the refusals.
    let (_, list) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(2), "{list}");
    let mine = d.session(&me).await;
    assert_eq!(
        (mine["name"].as_str(), mine["pinned"].as_bool()),
        (Some("mine"), Some(false))
    );
    // No session answers to the victim's short id by name, so the CLI finds the victim by it.
    let (status, found) = d.call("GET", &format!("/v1/sessions/{short}"), None).await;
    assert_eq!(
        (status, found["session"]["id"].as_str()),
        (404, None),
        "{found}"
    );
    // A spawn without a name in a directory named like another session's short id, or with
    // a bidi override in its name, is not named after it.
    let dirs = tempfile::tempdir().unwrap();
    for (base, want_own_short) in [(short.to_string(), true), ("a\u{202E}b".to_string(), false)] {
        let cwd = dirs.path().join(&base);
        std::fs::create_dir(&cwd).unwrap();
        let s = d
            .spawn_with(json!({"agent": "cat", "cwd": cwd.to_str().unwrap()}))
            .await;
        let name = s["name"].as_str().unwrap().to_string();
        if want_own_short {
            assert_eq!(name, id_of(&s)[..8], "{s}");
        } else {
            assert_eq!(name, "ab", "{s}");
        }
    }
    // A session may carry its own id as its name: that shadows nothing.
    let own_short = &me[..8];
    let (status, body) = d
        .call(
            "PATCH",
            &format!("/v1/sessions/{me}"),
            Some(json!({"name": own_short})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["session"]["name"], own_short);
    d.stop().await;
}
