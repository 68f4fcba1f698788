//! The attach WebSocket: replay, resume, sizes, input, backpressure and exit.

use std::time::Duration;

use atc_testkit::{
    assert_attached_comes_first, attaches_during_heavy_output_continue_exactly, id_of,
    rendered_rows, test_config, Frame, TestDaemon,
};
use serde_json::json;

/// Renders bytes on a fresh vt100 screen of the given size and returns its text.
fn render(bytes: &[u8], cols: u16, rows: u16) -> String {
    rendered_rows(bytes, cols, rows)
        .0
        .join("\n")
        .trim_end()
        .to_string()
}

#[actix_rt::test]
async fn typed_bytes_come_back_through_the_socket() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("cat").await);
    let (mut ws, attached, _) = d.attach(&id, "cols=80&rows=24").await;
    assert_eq!(attached["replay"], "screen");
    assert_eq!(attached["session"], id.as_str());
    assert!(attached["stream"].as_str().is_some_and(|s| !s.is_empty()));
    ws.send_binary(b"ping-\xce\xbb-pong\r").await;
    // The tty echoes the line, then cat writes it back: raw bytes, UTF-8 intact.
    let got = ws.read_until("ping-λ-pong\r\n".as_bytes()).await;
    assert!(got.windows(2).any(|w| w == b"\r\n"));
    d.stop().await;
}

#[actix_rt::test]
async fn resize_is_seen_inside_the_session() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let (mut ws, attached, _) = d.attach(&id, "cols=100&rows=30").await;
    assert_eq!(
        (attached["cols"].as_u64(), attached["rows"].as_u64()),
        (Some(100), Some(30))
    );
    ws.send_binary(b"stty size\r").await;
    ws.read_until(b"30 100").await;
    ws.send_json(json!({"type": "resize", "cols": 132, "rows": 43}))
        .await;
    let resized = ws.next_text("resized").await;
    assert_eq!(
        (resized["cols"].as_u64(), resized["rows"].as_u64()),
        (Some(132), Some(43))
    );
    ws.send_binary(b"stty size\r").await;
    ws.read_until(b"43 132").await;
    let screen = d.wait_screen(&id, "43 132").await;
    assert_eq!(
        (screen["cols"].as_u64(), screen["rows"].as_u64()),
        (Some(132), Some(43))
    );
    // HTTP resize for clients that are not attached.
    let (status, size) = d
        .call(
            "POST",
            &format!("/v1/sessions/{id}/resize"),
            Some(json!({"cols": 70, "rows": 20})),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(size, json!({"cols": 70, "rows": 20}));
    ws.send_binary(b"stty size\r").await;
    ws.read_until(b"20 70").await;
    d.stop().await;
}

#[actix_rt::test]
async fn session_size_is_the_minimum_over_clients() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let (mut a, _, _) = d.attach(&id, "cols=120&rows=40").await;
    let (mut b, attached_b, _) = d.attach(&id, "cols=90&rows=50").await;
    assert_eq!(
        (attached_b["cols"].as_u64(), attached_b["rows"].as_u64()),
        (Some(90), Some(40))
    );
    let r = a.next_text("resized").await;
    assert_eq!(
        (r["cols"].as_u64(), r["rows"].as_u64()),
        (Some(90), Some(40))
    );
    b.send_binary(b"stty size\r").await;
    b.read_until(b"40 90").await;
    // B shrinks further; both clients hear the new size once it settles.
    b.send_json(json!({"type": "resize", "cols": 60, "rows": 45}))
        .await;
    let r = a.next_text("resized").await;
    assert_eq!(
        (r["cols"].as_u64(), r["rows"].as_u64()),
        (Some(60), Some(40))
    );
    // When B leaves, A's size is the minimum again.
    b.close().await;
    let r = a.next_text("resized").await;
    assert_eq!(
        (r["cols"].as_u64(), r["rows"].as_u64()),
        (Some(120), Some(40))
    );
    a.send_binary(b"stty size\r").await;
    a.read_until(b"40 120").await;
    d.stop().await;
}

#[actix_rt::test]
async fn resume_by_offset_returns_exactly_the_missed_bytes() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    // A stays attached and sees everything from its start offset.
    let (mut a, att_a, _) = d.attach(&id, "cols=80&rows=24").await;
    let stream = att_a["stream"].as_str().unwrap().to_string();
    let a_start = att_a["offset"].as_u64().unwrap();
    // B reads a while, then disconnects at a known offset.
    let (mut b, att_b, _) = d.attach(&id, "cols=80&rows=24").await;
    let b_start = att_b["offset"].as_u64().unwrap();
    b.send_binary(b"echo first-$((1+1))\r").await;
    let b_seen = b.read_until(b"first-2\r\n").await;
    let b_offset = b_start + b_seen.len() as u64;
    b.close().await;
    // More output while B is away.
    d.call(
        "POST",
        &format!("/v1/sessions/{id}/submit"),
        Some(json!({"text": "seq 1 200; echo done-$((3*3))"})),
    )
    .await;
    let a_all = a.read_until(b"done-9\r\n").await;
    // B resumes at its offset and must receive exactly A's bytes from that offset.
    let (mut b2, att_b2, prelude) = d
        .attach(
            &id,
            &format!("cols=80&rows=24&stream={stream}&from={b_offset}"),
        )
        .await;
    assert_eq!(att_b2["replay"], "resume");
    assert_eq!(att_b2["prelude"], 0);
    assert!(prelude.is_empty());
    assert_eq!(att_b2["offset"].as_u64(), Some(b_offset));
    // B2 gets everything from its offset to the present, which may already include output A
    // has not read yet (the next prompt); bring A up to the same point, then compare exactly.
    let skip = (b_offset - a_start) as usize;
    let mut a_all = a_all;
    let got = b2.read_at_least(a_all.len() - skip).await;
    if a_all.len() - skip < got.len() {
        let more = a.read_at_least(got.len() - (a_all.len() - skip)).await;
        a_all.extend_from_slice(&more);
    }
    let expected = &a_all[skip..];
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected)
    );
    d.stop().await;
}

/// A resume owes the client every byte from its offset while the ring holds them, even when
/// they are more than the client's queue takes: the opening is bounded by the ring, and only
/// live output after it counts against the queue.
#[actix_rt::test]
async fn a_resume_larger_than_the_queue_gets_every_missed_byte_and_no_desync() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = test_config();
    config.limits.queue_bytes = 64 * 1024;
    config.limits.ring_bytes = 512 * 1024;
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let id = id_of(&d.spawn("sh").await);
    let (first, attached, _) = d.attach(&id, "cols=80&rows=24").await;
    let stream = attached["stream"].as_str().unwrap().to_string();
    let from = attached["offset"].as_u64().unwrap();
    first.close().await;
    // About 270 KB of lines while nobody is attached: over the queue, inside the ring.
    d.submit(&id, "seq 1 40000; echo end-$((2+3))").await;
    d.wait_screen(&id, "end-5").await;
    let (mut back, attached, prelude) = d
        .attach(&id, &format!("cols=80&rows=24&stream={stream}&from={from}"))
        .await;
    assert_eq!(attached["replay"], "resume", "{attached}");
    assert!(prelude.is_empty());
    let got = back.read_until(b"end-5\r\n").await;
    assert!(
        !back.seen.iter().any(|t| t.contains("desync")),
        "seen: {:?}",
        back.seen
    );
    let numbers: Vec<u32> = String::from_utf8_lossy(&got)
        .split("\r\n")
        .filter_map(|line| line.parse().ok())
        .collect();
    assert!(
        numbers.iter().copied().eq(1..=40000),
        "{} numbers, first {:?}, last {:?}",
        numbers.len(),
        numbers.first(),
        numbers.last()
    );
    d.stop().await;
}

#[actix_rt::test]
async fn fresh_attach_repaints_the_screen_instead_of_dumping_history() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    d.call(
        "POST",
        &format!("/v1/sessions/{id}/submit"),
        Some(json!({"text": "seq 1 300; echo painted-$((2*5))"})),
    )
    .await;
    let screen = d.wait_screen(&id, "painted-10").await;
    let (_ws, attached, prelude) = d.attach(&id, "cols=80&rows=24").await;
    assert_eq!(attached["replay"], "screen");
    assert!(attached["prelude"].as_u64().unwrap() > 0);
    // The repaint is the screen, not the 300 lines of history.
    assert!(
        prelude.len() < 8 * 1024,
        "prelude is {} bytes",
        prelude.len()
    );
    assert_eq!(
        render(&prelude, 80, 24),
        screen["text"].as_str().unwrap().trim_end()
    );
    // An unknown stream id or an offset outside the ring also gets a screen replay.
    for q in [
        "stream=nope&from=0",
        &format!(
            "stream={}&from=999999999",
            attached["stream"].as_str().unwrap()
        ),
    ] {
        let (_ws, att, prelude) = d.attach(&id, &format!("cols=80&rows=24&{q}")).await;
        assert_eq!(att["replay"], "screen", "{q}");
        assert_eq!(att["prelude"].as_u64(), Some(prelude.len() as u64));
    }
    d.stop().await;
}

#[actix_rt::test]
async fn a_slow_client_is_desynced_and_repainted_while_a_fast_one_gets_every_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = test_config();
    config.limits.queue_bytes = 256 * 1024;
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let id = id_of(&d.spawn("sh").await);
    let (mut fast, _, _) = d.attach(&id, "cols=80&rows=24").await;
    let (mut slow, _, _) = d.attach(&id, "cols=80&rows=24").await;
    const N: usize = 16_000_000;
    // 'Z' (octal 132) appears nowhere in the command, so counting it counts the payload.
    fast.send_binary(
        format!("head -c {N} /dev/zero | tr '\\0' '\\132'; printf 'fin%s\\n' ished\r").as_bytes(),
    )
    .await;
    let got = fast.read_until(b"finished").await;
    let zs = got.iter().filter(|b| **b == b'Z').count();
    assert_eq!(zs, N, "the fast client lost bytes");
    // Only now does the slow client read: it must see a desync, then a repaint.
    let desync = slow.next_text("desync").await;
    assert!(desync["dropped"].as_u64().unwrap() > 0, "{desync}");
    // Nothing comes between the desync and its resync and repaint.
    let resynced = match slow.next().await {
        Frame::Text(v) if v["type"] == "resynced" => v,
        other => panic!("after desync came {other:?}; seen {:?}", slow.seen),
    };
    let prelude = slow
        .read_exact(resynced["prelude"].as_u64().unwrap() as usize)
        .await;
    let screen = d.wait_screen(&id, "finished").await;
    assert_eq!(
        render(&prelude, 80, 24),
        screen["text"].as_str().unwrap().trim_end()
    );
    // And it is live again afterwards.
    slow.send_binary(b"echo back-$((4+4))\r").await;
    slow.read_until(b"back-8").await;
    d.stop().await;
}

#[actix_rt::test]
async fn exit_frame_then_normal_close_and_detach_never_kills() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let (ws, _, _) = d.attach(&id, "cols=80&rows=24").await;
    ws.close().await;
    // Closing the socket only detached: the session still answers.
    d.call(
        "POST",
        &format!("/v1/sessions/{id}/submit"),
        Some(json!({"text": "echo still-$((1+2))"})),
    )
    .await;
    d.wait_screen(&id, "still-3").await;
    assert_eq!(d.session(&id).await["alive"], true);
    let (mut ws, _, _) = d.attach(&id, "cols=80&rows=24").await;
    ws.send_binary(b"exit 5\r").await;
    let exit = ws.next_text("exit").await;
    assert_eq!(exit["code"], 5);
    assert_eq!(exit["reason"], "exited");
    loop {
        match ws.next_within(Duration::from_secs(10)).await {
            Some(Frame::Close) => break,
            Some(_) => continue,
            None => panic!("no close after exit; seen {:?}", ws.seen),
        }
    }
    d.stop().await;
}

#[actix_rt::test]
async fn typing_into_a_child_that_does_not_read_is_too_slow_and_the_socket_stays() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let (mut ws, _, _) = d.attach(&id, "cols=80&rows=24").await;
    // The echoed command line says 'RE''ADY', so only the printf's output matches; the shell
    // has read the whole line by then and reads nothing more before `sleep` replaces it.
    ws.send_binary(b"printf 'RE''ADY\\n'; exec sleep 600\r")
        .await;
    ws.read_until(b"READY").await;
    // Far past the 4 MiB the PTY's input queue holds for a child that is not reading.
    let frame = vec![b'x'; 64 * 1024];
    for _ in 0..96 {
        ws.send_binary(&frame).await;
    }
    let refused = ws.next_text("error").await;
    assert_eq!(refused["code"], "too_slow", "{refused}");
    // The socket and the session stay: a control frame is still answered.
    ws.send_json(json!({"type": "resize", "cols": 90, "rows": 24}))
        .await;
    assert_eq!(ws.next_text("resized").await["cols"], 90);
    assert_eq!(d.session(&id).await["alive"], true);
    d.stop().await;
}

#[actix_rt::test]
async fn a_paste_larger_than_the_pty_takes_arrives_whole_as_the_child_reads_it() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let (mut ws, _, _) = d.attach(&id, "cols=80&rows=24").await;
    // Raw, so no line limit or echo; the markers are split so the command line never matches.
    ws.send_binary(
        b"stty raw -echo; printf 'RE''ADY\\n'; printf 'GO''T %s\\n' \"$(head -c 300000 | wc -c)\"\r",
    )
    .await;
    ws.read_until(b"READY").await;
    // Far more than the PTY takes at once: most of it waits in the input queue, and goes
    // in as the PTY signals room.
    let frame = vec![b'x'; 50_000];
    for _ in 0..6 {
        ws.send_binary(&frame).await;
    }
    ws.read_until(b"GOT 300000").await;
    d.stop().await;
}

#[actix_rt::test]
async fn bad_control_frames_get_an_error_frame_and_the_socket_stays() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("cat").await);
    let (mut ws, _, _) = d.attach(&id, "cols=80&rows=24").await;
    ws.send_json(json!({"type": "resize", "cols": 0, "rows": 10}))
        .await;
    let e = ws.next_text("error").await;
    assert_eq!(e["code"], "bad_args");
    ws.send_json(json!({"type": "dance"})).await;
    assert_eq!(ws.next_text("error").await["code"], "bad_args");
    ws.send_binary(b"alive\r").await;
    ws.read_until(b"alive").await;
    // Bad query values are refused before the upgrade.
    let (status, _) = d
        .try_ws(&format!("/v1/sessions/{id}/attach?cols=0&rows=5"), None)
        .await
        .err()
        .unwrap();
    assert_eq!(status, 400);
    d.stop().await;
}

/// Keeps `id` (an `sh` session) printing until it is killed.
async fn print_forever(d: &TestDaemon, id: &str) {
    d.submit(id, "while :; do echo tick-tock; sleep 0.01; done")
        .await;
}

/// A size other than the session's, so each attach changes it.
fn fresh_size(i: usize) -> String {
    format!("cols={}&rows=24", 70 + i % 3)
}

#[actix_rt::test]
async fn attached_comes_first_on_fresh_attaches_while_the_session_prints_and_resizes() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let (mut other, _, _) = d.attach(&id, "cols=80&rows=24").await;
    print_forever(&d, &id).await;
    other.read_until(b"tick-tock").await;
    let frames = assert_attached_comes_first(&d, &id, &mut other, 20, fresh_size, |_| {}).await;
    assert!(frames.iter().all(|f| f["replay"] == "screen"), "{frames:?}");
    d.stop().await;
}

#[actix_rt::test]
async fn attached_comes_first_on_resumes_while_the_session_prints_and_resizes() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let (mut other, att, _) = d.attach(&id, "cols=80&rows=24").await;
    let (stream, from) = (att["stream"].as_str().unwrap().to_string(), &att["offset"]);
    print_forever(&d, &id).await;
    other.read_until(b"tick-tock").await;
    let frames = assert_attached_comes_first(
        &d,
        &id,
        &mut other,
        20,
        |i| format!("{}&stream={stream}&from={from}", fresh_size(i)),
        |_| {},
    )
    .await;
    assert!(frames.iter().all(|f| f["replay"] == "resume"), "{frames:?}");
    d.stop().await;
}

#[actix_rt::test]
async fn attached_comes_first_after_a_revive() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    d.call("POST", &format!("/v1/sessions/{id}/kill"), None)
        .await;
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    let (mut other, _, _) = d.attach(&id, "cols=80&rows=24").await;
    print_forever(&d, &id).await;
    other.read_until(b"tick-tock").await;
    assert_attached_comes_first(&d, &id, &mut other, 20, fresh_size, |_| {}).await;
    d.stop().await;
}

#[actix_rt::test]
async fn an_attach_during_heavy_output_continues_from_its_repaint_with_no_line_twice_or_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = test_config();
    // Room enough that a reader in this test never falls behind into a desync.
    config.limits.queue_bytes = 64 * 1024 * 1024;
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let id = id_of(&d.spawn("sh").await);
    attaches_during_heavy_output_continue_exactly(&d, &id, "seq 1 50000000").await;
    d.stop().await;
}
