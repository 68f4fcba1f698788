//! Who may talk to the daemon (token, Origin), what every response carries, the events socket,
//! and the daemon and agent listings.

use std::time::{Duration, Instant};

use atc_testkit::{id_of, test_config, ws_at, Frame, TestDaemon, Ws, WITHIN};
use serde_json::{json, Value};

/// Sends a WebSocket upgrade as a plain HTTP request, so a refusal's status and JSON body can be
/// read (the WebSocket client only reports the status).
async fn refused_upgrade(
    d: &TestDaemon,
    path_and_query: &str,
    token: Option<&str>,
    origin: Option<&str>,
) -> (u16, Value) {
    let mut req = awc::Client::builder()
        .timeout(Duration::from_secs(30))
        .finish()
        .get(format!("{}{}", d.url, path_and_query))
        .insert_header(("Upgrade", "websocket"))
        .insert_header(("Connection", "Upgrade"))
        .insert_header(("Sec-WebSocket-Version", "13"))
        .insert_header(("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(o) = origin {
        req = req.insert_header(("Origin", o));
    }
    let mut resp = req
        .send()
        .await
        .unwrap_or_else(|e| panic!("upgrade {path_and_query}: {e}"));
    let status = resp.status().as_u16();
    assert_ne!(status, 101, "{path_and_query} was accepted");
    let body = resp.body().await.expect("body");
    (
        status,
        serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into())),
    )
}

fn ws_url(d: &TestDaemon, path_and_query: &str) -> String {
    format!("{}{}", d.url.replace("http://", "ws://"), path_and_query)
}

/// The next events frame of `kind` that satisfies `pred`, skipping all others.
async fn next_event(ws: &mut Ws, kind: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WITHIN;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match ws.next_within(remaining).await {
            Some(Frame::Text(v)) if v["type"] == kind && pred(&v) => return v,
            Some(Frame::Close) => panic!(
                "events socket closed waiting for {kind}; seen {:?}",
                ws.seen
            ),
            Some(_) => {}
            None => panic!("no matching {kind} within {WITHIN:?}; seen {:?}", ws.seen),
        }
    }
}

#[actix_rt::test]
async fn requests_without_the_right_token_are_unauthorized() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("cat").await);
    let spawn_body = json!({"agent": "cat", "cwd": "/tmp"});
    let routes = [
        ("GET", "/v1/sessions".to_string(), None),
        ("POST", "/v1/sessions".to_string(), Some(spawn_body)),
        ("GET", "/v1/daemon".to_string(), None),
        ("GET", format!("/v1/sessions/{id}"), None),
        ("POST", format!("/v1/sessions/{id}/kill"), None),
        ("DELETE", format!("/v1/sessions/{id}"), None),
    ];
    for (method, path, body) in routes {
        for token in [None, Some("wrong"), Some(&d.token[1..])] {
            let (status, err) = d.call_with(method, &path, body.clone(), token).await;
            assert_eq!(status, 401, "{method} {path} with {token:?}: {err}");
            assert_eq!(err["error"]["code"], "unauthorized", "{err}");
        }
    }
    // Nothing got through: still one live session.
    let (_, list) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(list["sessions"][0]["alive"], true);
    // The token in the query counts only on WebSocket upgrades.
    let (status, _) = d
        .call_with(
            "GET",
            &format!("/v1/sessions?access_token={}", d.token),
            None,
            None,
        )
        .await;
    assert_eq!(status, 401);
    d.stop().await;
}

#[actix_rt::test]
async fn websocket_upgrades_without_the_right_token_are_unauthorized() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("cat").await);
    for path in [
        format!("/v1/sessions/{id}/attach?cols=80&rows=24"),
        "/v1/events".to_string(),
    ] {
        for token in [None, Some("wrong")] {
            let (status, err) = refused_upgrade(&d, &path, token, None).await;
            assert_eq!(status, 401, "{path} with {token:?}: {err}");
            assert_eq!(err["error"]["code"], "unauthorized", "{err}");
            let refused = ws_at(&ws_url(&d, &path), token, None).await.err();
            assert_eq!(refused.map(|r| r.0), Some(401), "{path} with {token:?}");
        }
        let sep = if path.contains('?') { '&' } else { '?' };
        let (status, err) =
            refused_upgrade(&d, &format!("{path}{sep}access_token=wrong"), None, None).await;
        assert_eq!(status, 401, "{path} with a wrong access_token: {err}");
    }
    d.stop().await;
}

#[actix_rt::test]
async fn health_needs_no_token() {
    let d = TestDaemon::start().await;
    let (status, health) = d.call_with("GET", "/v1/health", None, None).await;
    assert_eq!(status, 200, "{health}");
    assert_eq!(health["status"], "ok");
    assert_eq!(health["version"], env!("CARGO_PKG_VERSION"));
    assert!(health["daemonId"]
        .as_str()
        .is_some_and(|s| uuid::Uuid::parse_str(s).is_ok()));
    d.stop().await;
}

#[actix_rt::test]
async fn websocket_upgrades_accept_the_token_as_access_token_query() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("cat").await);
    let url = ws_url(
        &d,
        &format!(
            "/v1/sessions/{id}/attach?cols=80&rows=24&access_token={}",
            d.token
        ),
    );
    let mut ws = ws_at(&url, None, None)
        .await
        .unwrap_or_else(|e| panic!("attach with access_token refused: {e:?}"));
    let attached = ws.next_text("attached").await;
    assert_eq!(attached["session"], id.as_str());
    ws.read_exact(attached["prelude"].as_u64().unwrap() as usize)
        .await;
    ws.send_binary(b"through-query\r").await;
    ws.read_until(b"through-query").await;
    let mut events = ws_at(
        &ws_url(&d, &format!("/v1/events?access_token={}", d.token)),
        None,
        None,
    )
    .await
    .unwrap_or_else(|e| panic!("events with access_token refused: {e:?}"));
    let added = events.next_text("session.added").await;
    assert_eq!(added["session"]["id"], id.as_str());
    d.stop().await;
}

#[actix_rt::test]
async fn every_response_has_a_request_id() {
    let d = TestDaemon::start().await;
    let http = atc_testkit::http_client();
    let requests = [
        (http.get(format!("{}/v1/health", d.url)), 200),
        (
            http.get(format!("{}/v1/sessions", d.url))
                .bearer_auth(&d.token),
            200,
        ),
        (http.get(format!("{}/v1/sessions", d.url)), 401),
        (
            http.get(format!("{}/v1/nowhere", d.url))
                .bearer_auth(&d.token),
            404,
        ),
        (
            http.get(format!("{}/v1/sessions/nobody", d.url))
                .bearer_auth(&d.token),
            404,
        ),
    ];
    let mut ids = Vec::new();
    for (req, expected) in requests {
        let resp = req.send().await.expect("request");
        assert_eq!(resp.status().as_u16(), expected);
        let id = resp
            .headers()
            .get("x-request-id")
            .unwrap_or_else(|| panic!("no X-Request-Id on a {expected}"))
            .to_str()
            .unwrap()
            .to_string();
        assert!(!id.is_empty());
        ids.push(id);
    }
    let resp = http
        .post(format!("{}/v1/sessions", d.url))
        .bearer_auth(&d.token)
        .send_json(&json!({"agent": "cat"}))
        .await
        .expect("request");
    assert_eq!(resp.status().as_u16(), 400);
    ids.push(
        resp.headers()
            .get("x-request-id")
            .expect("no X-Request-Id on a 400")
            .to_str()
            .unwrap()
            .to_string(),
    );
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "request ids repeat: {ids:?}");
    d.stop().await;
}

#[actix_rt::test]
async fn websocket_upgrades_from_a_foreign_origin_are_forbidden() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("cat").await);
    for path in [
        format!("/v1/sessions/{id}/attach?cols=80&rows=24"),
        "/v1/events".to_string(),
    ] {
        for origin in ["http://evil.example", "http://127.0.0.1:1", "null"] {
            let (status, err) = refused_upgrade(&d, &path, Some(&d.token), Some(origin)).await;
            assert_eq!(status, 403, "{path} from {origin}: {err}");
            assert_eq!(err["error"]["code"], "forbidden_origin", "{err}");
            let refused = d.try_ws(&path, Some(origin)).await.err();
            assert_eq!(refused.map(|r| r.0), Some(403), "{path} from {origin}");
        }
    }
    // The session was not touched.
    assert_eq!(d.session(&id).await["alive"], true);
    d.stop().await;
}

#[actix_rt::test]
async fn websocket_upgrades_from_the_daemons_own_origin_are_accepted() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("cat").await);
    // awc sends Host as 127.0.0.1:PORT, which is what the daemon's URL names.
    let own = d.url.clone();
    let mut ws = d
        .try_ws(
            &format!("/v1/sessions/{id}/attach?cols=80&rows=24"),
            Some(&own),
        )
        .await
        .unwrap_or_else(|e| panic!("attach from {own} refused: {e:?}"));
    assert_eq!(ws.next_text("attached").await["session"], id.as_str());
    let mut events = d
        .try_ws("/v1/events", Some(&own))
        .await
        .unwrap_or_else(|e| panic!("events from {own} refused: {e:?}"));
    assert_eq!(
        events.next_text("session.added").await["session"]["id"],
        id.as_str()
    );
    d.stop().await;
}

#[actix_rt::test]
async fn websocket_upgrades_from_a_configured_allowed_origin_are_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = test_config();
    config.allowed_origins = vec!["https://ui.example".to_string()];
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let id = id_of(&d.spawn("cat").await);
    let attach = format!("/v1/sessions/{id}/attach?cols=80&rows=24");
    let mut ws = d
        .try_ws(&attach, Some("https://ui.example"))
        .await
        .unwrap_or_else(|e| panic!("attach from the allowed origin refused: {e:?}"));
    assert_eq!(ws.next_text("attached").await["session"], id.as_str());
    let mut events = d
        .try_ws("/v1/events", Some("https://ui.example"))
        .await
        .unwrap_or_else(|e| panic!("events from the allowed origin refused: {e:?}"));
    assert_eq!(
        events.next_text("session.added").await["session"]["id"],
        id.as_str()
    );
    // Only that exact origin: others stay forbidden.
    for origin in ["http://ui.example", "https://evil.example"] {
        let (status, err) = refused_upgrade(&d, &attach, Some(&d.token), Some(origin)).await;
        assert_eq!(status, 403, "{origin}: {err}");
        assert_eq!(err["error"]["code"], "forbidden_origin");
    }
    d.stop().await;
}

#[actix_rt::test]
async fn the_events_socket_starts_with_one_added_per_existing_session() {
    let d = TestDaemon::start().await;
    let a = id_of(&d.spawn("cat").await);
    let b = id_of(&d.spawn("sh").await);
    let mut ev = d.ws("/v1/events").await;
    for id in [&a, &b] {
        match ev.next().await {
            Frame::Text(v) => {
                assert_eq!(v["type"], "session.added", "{v}");
                assert_eq!(v["session"]["id"], id.as_str(), "{v}");
                assert_eq!(v["session"]["alive"], true, "{v}");
            }
            other => panic!("expected session.added for {id}, got {other:?}"),
        }
    }
    // The next added is the new session: the snapshot held no duplicates.
    let c = id_of(&d.spawn("cat").await);
    let added = ev.next_text("session.added").await;
    assert_eq!(added["session"]["id"], c.as_str(), "{added}");
    d.stop().await;
}

#[actix_rt::test]
async fn the_events_socket_reports_spawn_rename_resize_exit_and_forget() {
    let d = TestDaemon::start().await;
    let mut ev = d.ws("/v1/events").await;
    let id = id_of(&d.spawn("sh").await);
    let added = ev.next_text("session.added").await;
    assert_eq!(added["session"]["id"], id.as_str(), "{added}");
    assert_eq!(added["session"]["agent"], "sh");

    let (status, body) = d
        .call(
            "PATCH",
            &format!("/v1/sessions/{id}"),
            Some(json!({"name": "watched"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let renamed = next_event(&mut ev, "session.renamed", |v| v["s"] == id.as_str()).await;
    assert_eq!(renamed["name"], "watched", "{renamed}");
    assert_eq!(renamed["namedBy"], "user", "{renamed}");

    let (status, body) = d
        .call(
            "POST",
            &format!("/v1/sessions/{id}/resize"),
            Some(json!({"cols": 101, "rows": 31})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let resized = next_event(&mut ev, "session.resized", |v| v["s"] == id.as_str()).await;
    assert_eq!(
        (resized["cols"].as_u64(), resized["rows"].as_u64()),
        (Some(101), Some(31))
    );

    d.call(
        "POST",
        &format!("/v1/sessions/{id}/submit"),
        Some(json!({"text": "exit 6"})),
    )
    .await;
    let state = next_event(&mut ev, "session.state", |v| {
        v["session"]["id"] == id.as_str() && v["session"]["alive"] == false
    })
    .await;
    assert_eq!(state["session"]["state"], "exited", "{state}");
    assert_eq!(state["session"]["exitCode"], 6, "{state}");
    assert_eq!(state["session"]["exitReason"], "exited", "{state}");

    let (status, body) = d.call("DELETE", &format!("/v1/sessions/{id}"), None).await;
    assert_eq!(status, 200, "{body}");
    let removed = next_event(&mut ev, "session.removed", |_| true).await;
    assert_eq!(removed["s"], id.as_str(), "{removed}");
    d.stop().await;
}

#[actix_rt::test]
async fn a_dropped_client_connection_never_kills_the_session() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let (mut watcher, _, _) = d.attach(&id, "cols=120&rows=40").await;
    let (dropped, attached, _) = d.attach(&id, "cols=60&rows=20").await;
    assert_eq!(
        (attached["cols"].as_u64(), attached["rows"].as_u64()),
        (Some(60), Some(20))
    );
    let r = watcher.next_text("resized").await;
    assert_eq!(
        (r["cols"].as_u64(), r["rows"].as_u64()),
        (Some(60), Some(20))
    );
    // Gone without a close frame: the TCP connection just ends.
    drop(dropped);
    // The daemon noticed (the size is the watcher's alone again) ...
    let r = watcher.next_text("resized").await;
    assert_eq!(
        (r["cols"].as_u64(), r["rows"].as_u64()),
        (Some(120), Some(40))
    );
    // ... and the session lives on and answers.
    assert_eq!(d.session(&id).await["alive"], true);
    d.call(
        "POST",
        &format!("/v1/sessions/{id}/submit"),
        Some(json!({"text": "echo survived-$((5+5))"})),
    )
    .await;
    d.wait_screen(&id, "survived-10").await;
    watcher.read_until(b"survived-10").await;
    d.stop().await;
}

#[actix_rt::test]
async fn daemon_info_names_the_pid_id_and_limits() {
    let d = TestDaemon::start().await;
    let (status, info) = d.call("GET", "/v1/daemon", None).await;
    assert_eq!(status, 200, "{info}");
    assert_eq!(info["pid"].as_u64(), Some(std::process::id() as u64));
    let (_, health) = d.call("GET", "/v1/health", None).await;
    assert!(info["daemonId"].is_string());
    assert_eq!(info["daemonId"], health["daemonId"]);
    assert_eq!(
        info["listen"].as_str(),
        Some(d.url.trim_start_matches("http://"))
    );
    let limits = test_config().limits;
    assert_eq!(
        info["limits"]["queueBytes"].as_u64(),
        Some(limits.queue_bytes as u64)
    );
    assert_eq!(
        info["limits"]["ringBytes"].as_u64(),
        Some(limits.ring_bytes as u64)
    );
    assert_eq!(
        info["limits"]["bodyCapBytes"].as_u64(),
        Some(limits.body_cap_bytes as u64)
    );
    d.stop().await;
}

#[actix_rt::test]
async fn agents_lists_which_programs_are_installed() {
    let d = TestDaemon::start().await;
    let (status, body) = d.call("GET", "/v1/agents", None).await;
    assert_eq!(status, 200, "{body}");
    let agents = body["agents"].as_array().expect("agents array");
    let find = |id: &str| {
        agents
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("agent {id} not listed: {body}"))
    };
    assert_eq!(find("shell")["installed"], true);
    assert_eq!(find("sh")["installed"], true);
    assert_eq!(find("sh")["bin"], "/bin/sh");
    let ghost = find("ghost");
    assert_eq!(ghost["installed"], false, "{ghost}");
    assert_eq!(ghost["bin"], "definitely-not-installed-atc-test");
    d.stop().await;
}

#[actix_rt::test]
async fn a_non_loopback_listen_address_needs_allow_remote_and_tls_or_plaintext() {
    use atc::daemon::{Daemon, DaemonOptions, StartError};
    let tmp = tempfile::tempdir().unwrap();
    let options = |allow_remote, insecure_plaintext| DaemonOptions {
        state_dir: tmp.path().to_path_buf(),
        config: test_config(),
        listen: Some("0.0.0.0:0".parse().unwrap()),
        listener: None,
        allow_remote,
        insecure_plaintext,
        tls: None,
        workers: 1,
        runtime_dir: Some(tmp.path().to_path_buf()),
        atc_program: None,
        codex_home: None,
        metrics_listen: None,
    };
    for plaintext in [false, true] {
        match Daemon::start(options(false, plaintext)).await {
            Err(StartError::RemoteRefused(addr)) => assert!(addr.ip().is_unspecified()),
            Err(e) => panic!("expected RemoteRefused, got {e}"),
            Ok(_) => panic!("a non-loopback address started without --allow-remote"),
        }
    }
    // --allow-remote alone no longer serves the token in clear text.
    match Daemon::start(options(true, false)).await {
        Err(e @ StartError::PlaintextRefused(_)) => {
            let text = e.to_string();
            assert!(text.contains("--tls-cert"), "{text}");
            assert!(text.contains("--insecure-plaintext"), "{text}");
        }
        Err(e) => panic!("expected PlaintextRefused, got {e}"),
        Ok(_) => panic!("a non-loopback address started in plain HTTP without the flag"),
    }
    assert!(
        !tmp.path().join("daemon.json").exists(),
        "a refused start must not advertise itself"
    );
    let handle = Daemon::start(options(true, true))
        .await
        .expect("with --allow-remote and --insecure-plaintext it starts");
    assert!(handle.addr.ip().is_unspecified());
    handle.stop().await;
}

/// `POST /v1/tickets` with the token: the ticket and its expiry (epoch ms).
async fn ticket(d: &TestDaemon) -> (String, i64) {
    let (status, body) = d.call("POST", "/v1/tickets", None).await;
    assert_eq!(status, 200, "{body}");
    let ticket = body["ticket"].as_str().expect("a ticket").to_string();
    (ticket, body["expiresAt"].as_i64().expect("an expiresAt"))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis() as i64
}

#[actix_rt::test]
async fn a_ticket_opens_one_socket_once_instead_of_the_token() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("cat").await);
    let before = now_ms();
    let (t, expires_at) = ticket(&d).await;
    assert_eq!(t.len(), 64, "{t}");
    assert!(
        (before + 29_000..=now_ms() + 30_000).contains(&expires_at),
        "a ticket lives 30 s: expires {expires_at}, asked at {before}"
    );
    let attach = |t: &str| ws_url(&d, &format!("/v1/sessions/{id}/attach?ticket={t}"));
    let mut ws = ws_at(&attach(&t), None, None)
        .await
        .unwrap_or_else(|e| panic!("attach with a ticket refused: {e:?}"));
    let attached = ws.next_text("attached").await;
    ws.read_exact(attached["prelude"].as_u64().unwrap() as usize)
        .await;
    ws.send_binary(b"through-ticket\r").await;
    ws.read_until(b"through-ticket").await;

    // Spent: the same ticket opens nothing more, on either socket.
    assert_eq!(
        ws_at(&attach(&t), None, None).await.err().map(|e| e.0),
        Some(401)
    );
    let (status, body) = refused_upgrade(&d, &format!("/v1/events?ticket={t}"), None, None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("unauthorized"))
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("ticket"),
        "{body}"
    );
    // A fresh one opens the events socket; an unknown one nothing.
    let (t2, _) = ticket(&d).await;
    let mut events = ws_at(&ws_url(&d, &format!("/v1/events?ticket={t2}")), None, None)
        .await
        .unwrap_or_else(|e| panic!("events with a ticket refused: {e:?}"));
    let added = events.next_text("session.added").await;
    assert_eq!(added["session"]["id"], id.as_str());
    let unknown = "0".repeat(64);
    let (status, _) =
        refused_upgrade(&d, &format!("/v1/events?ticket={unknown}"), None, None).await;
    assert_eq!(status, 401);
    d.stop().await;
}

#[actix_rt::test]
async fn a_ticket_needs_the_token_and_an_expired_one_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = test_config();
    // Expired the moment it is issued: no waiting on a clock.
    config.timings.ticket_ttl = Duration::ZERO;
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let (status, body) = d.call_with("POST", "/v1/tickets", None, None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("unauthorized"))
    );
    let (status, _) = d
        .call_with("POST", "/v1/tickets", None, Some("not-the-token"))
        .await;
    assert_eq!(status, 401);
    let (t, _) = ticket(&d).await;
    let (status, body) = refused_upgrade(&d, &format!("/v1/events?ticket={t}"), None, None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("unauthorized")),
        "{body}"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn a_ticket_never_works_on_a_route_that_is_not_a_socket() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("cat").await);
    let (t, _) = ticket(&d).await;
    for path in [
        format!("/v1/sessions?ticket={t}"),
        format!("/v1/sessions/{id}?ticket={t}"),
        format!("/v1/daemon?ticket={t}"),
    ] {
        let (status, body) = d.call_with("GET", &path, None, None).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (401, Some("unauthorized")),
            "{path}"
        );
        // An Upgrade header does not make a plain route a socket.
        let (status, _) = refused_upgrade(&d, &path, None, None).await;
        assert_eq!(status, 401, "{path} as an upgrade");
    }
    let (status, _) = d
        .call_with("POST", &format!("/v1/tickets?ticket={t}"), None, None)
        .await;
    assert_eq!(status, 401, "a ticket cannot buy another");
    let (status, _) = d
        .call_with(
            "POST",
            &format!("/v1/sessions/{id}/kill?ticket={t}"),
            None,
            None,
        )
        .await;
    assert_eq!(status, 401);
    assert_eq!(d.session(&id).await["alive"], true);
    d.stop().await;
}
