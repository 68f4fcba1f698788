//! Watch-only attach (`?mode=watch`): a watcher sees everything an interactive client sees,
//! but its input never reaches the process and its size never counts toward the session's.

use std::time::Duration;

use atc_testkit::{id_of, Frame, TestDaemon};
use serde_json::json;

/// Long enough for a debounced resize (50 ms) to have landed had it counted.
const QUIET: Duration = Duration::from_millis(400);

#[actix_rt::test]
async fn input_from_a_watcher_never_reaches_the_process() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("cat").await);
    let (mut typist, _, _) = d.attach(&id, "cols=80&rows=24").await;
    let (mut watcher, attached, _) = d.attach(&id, "cols=80&rows=24&mode=watch").await;
    assert_eq!(attached["type"], "attached");

    watcher.send_binary(b"from-the-watcher\r").await;
    let refused = watcher.next_text("error").await;
    assert_eq!(refused["code"], "unsupported", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("watch-only attach")),
        "{refused}"
    );

    // Input is written in order, so once the typist's marker echoes, the watcher's would
    // have echoed before it.
    typist.send_binary(b"from-the-typist\r").await;
    let seen = typist.read_until(b"from-the-typist\r\n").await;
    let watched = watcher.read_until(b"from-the-typist\r\n").await;
    for (who, bytes) in [("typist", &seen), ("watcher", &watched)] {
        assert!(
            !String::from_utf8_lossy(bytes).contains("from-the-watcher"),
            "the watcher's input reached the process ({who} saw {:?})",
            String::from_utf8_lossy(bytes)
        );
    }
    let screen = d.wait_screen(&id, "from-the-typist").await;
    assert!(!screen["text"].as_str().unwrap_or("").contains("watcher"));
    d.stop().await;
}

#[actix_rt::test]
async fn a_watchers_resize_never_changes_the_size_and_a_typists_does() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let (mut typist, _, _) = d.attach(&id, "cols=100&rows=30").await;
    // Tiny, as a phone might be: it must not shrink the session.
    let (mut watcher, attached, _) = d.attach(&id, "cols=20&rows=5&mode=watch").await;
    assert_eq!(
        (attached["cols"].as_u64(), attached["rows"].as_u64()),
        (Some(100), Some(30)),
        "the watcher is told the session's size, not its own"
    );
    watcher
        .send_json(json!({"type": "resize", "cols": 10, "rows": 3}))
        .await;
    assert_no_resize(&mut typist).await;
    typist.send_binary(b"stty size\r").await;
    typist.read_until(b"30 100").await;

    // An interactive resize still applies, and the watcher hears of it.
    typist
        .send_json(json!({"type": "resize", "cols": 90, "rows": 25}))
        .await;
    let resized = watcher.next_text("resized").await;
    assert_eq!(
        (resized["cols"].as_u64(), resized["rows"].as_u64()),
        (Some(90), Some(25))
    );
    typist.send_binary(b"stty size\r").await;
    typist.read_until(b"25 90").await;

    // With only the watcher left, the size stays where the typist left it.
    typist.close().await;
    watcher
        .send_json(json!({"type": "resize", "cols": 12, "rows": 4}))
        .await;
    assert_no_resize(&mut watcher).await;
    let session = d.session(&id).await;
    assert_eq!(
        (session["cols"].as_u64(), session["rows"].as_u64()),
        (Some(90), Some(25)),
        "{session}"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn a_lone_watcher_does_not_size_the_session() {
    let d = TestDaemon::start().await;
    let spawned = d.spawn("sh").await;
    let id = id_of(&spawned);
    let before = (spawned["cols"].as_u64(), spawned["rows"].as_u64());
    let (_watcher, attached, _) = d.attach(&id, "cols=7&rows=3&mode=watch").await;
    assert_eq!(
        (attached["cols"].as_u64(), attached["rows"].as_u64()),
        before
    );
    let (mut typist, _, _) = d.attach(&id, "").await;
    typist.send_binary(b"stty size\r").await;
    let (cols, rows) = (before.0.unwrap_or(0), before.1.unwrap_or(0));
    typist.read_until(format!("{rows} {cols}").as_bytes()).await;
    d.stop().await;
}

#[actix_rt::test]
async fn a_watcher_gets_live_output_and_the_exit_and_does_not_answer_attention() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let (mut watcher, _, _) = d.attach(&id, "mode=watch").await;
    d.submit(&id, "echo live-$((6*7))").await;
    watcher.read_until(b"live-42").await;
    assert!(
        d.session(&id).await["lastAttachedAt"].is_null(),
        "a watcher is not an attach that answers the session"
    );
    d.submit(&id, "exit 3").await;
    let exit = watcher.next_text("exit").await;
    assert_eq!(exit["code"], 3, "{exit}");
    loop {
        match watcher.next().await {
            Frame::Close => break,
            Frame::Text(_) | Frame::Binary(_) => {}
        }
    }
    d.stop().await;
}

#[actix_rt::test]
async fn a_mode_other_than_watch_is_bad_args() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("cat").await);
    for mode in ["interactive", "WATCH", ""] {
        let (status, body) = d
            .call(
                "GET",
                &format!("/v1/sessions/{id}/attach?mode={mode}"),
                None,
            )
            .await;
        assert_eq!(status, 400, "mode={mode}: {body}");
        assert_eq!(body["error"]["code"], "bad_args", "{body}");
        assert_eq!(body["error"]["data"]["field"], "mode", "{body}");
        let refused = d
            .try_ws(&format!("/v1/sessions/{id}/attach?mode={mode}"), None)
            .await;
        assert!(
            matches!(refused, Err((400, _))),
            "mode={mode}: the upgrade was not refused with 400"
        );
    }
    d.stop().await;
}

/// No `resized` frame arrives within [`QUIET`] (other frames are fine).
async fn assert_no_resize(ws: &mut atc_testkit::Ws) {
    let deadline = tokio::time::Instant::now() + QUIET;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return;
        }
        match ws.next_within(left).await {
            None => return,
            Some(Frame::Text(v)) if v["type"] == "resized" => {
                panic!("a watcher's size counted: {v}; seen {:?}", ws.seen)
            }
            Some(Frame::Close) => panic!("closed; seen {:?}", ws.seen),
            Some(_) => {}
        }
    }
}
