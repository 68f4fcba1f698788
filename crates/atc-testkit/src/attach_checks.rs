//! Promises about attaching that several test modules check against their own sessions: the
//! `attached` frame comes first whatever races it, and a client that attaches during heavy
//! output continues exactly from its repaint.

use serde_json::Value;

use crate::screen::rendered_rows;
use crate::test_daemon::TestDaemon;
use crate::ws::{Frame, Ws};

/// api.md: `attached` is the first frame on an attach socket, whatever happens meanwhile.
/// Opens `n` sockets on `id` one after another with `query(i)`, each after `before_each(i)`
/// and a resize from `other` (attached already), so state and size changes race each attach;
/// fails naming the frame that came first. Returns each socket's `attached` frame.
pub async fn assert_attached_comes_first(
    d: &TestDaemon,
    id: &str,
    other: &mut Ws,
    n: usize,
    query: impl Fn(usize) -> String,
    mut before_each: impl FnMut(usize),
) -> Vec<Value> {
    let mut frames = Vec::with_capacity(n);
    for i in 0..n {
        before_each(i);
        let cols = if i % 2 == 0 { 60 } else { 90 };
        other
            .send_json(serde_json::json!({"type": "resize", "cols": cols, "rows": 24}))
            .await;
        let q = query(i);
        let mut ws = d.ws(&format!("/v1/sessions/{id}/attach?{q}")).await;
        match ws.next().await {
            Frame::Text(v) if v["type"] == "attached" => frames.push(v),
            first => panic!(
                "attach {i} ({q}): the first frame is {first:?}, not attached; seen {:?}",
                ws.seen
            ),
        }
        ws.close().await;
    }
    frames
}

/// Three clients attach to `id`, a shell, while `numbers` (a command line printing 1, 2, 3, …
/// one a line, far more than the test reads) pours out, and each reads on live from its
/// repaint: no line may show twice or be skipped between the repaint and the bytes after it.
/// The daemon's queues must be large enough that no reader falls behind.
pub async fn attaches_during_heavy_output_continue_exactly(
    d: &TestDaemon,
    id: &str,
    numbers: &str,
) {
    let (mut driver, _, _) = d.attach(id, "cols=80&rows=24").await;
    driver.send_binary(format!("{numbers}\r").as_bytes()).await;
    let mut observers = Vec::new();
    for mark in [20_000, 120_000, 300_000] {
        driver.read_until(format!("\n{mark}\r\n").as_bytes()).await;
        let (mut ws, attached, prelude) = d.attach(id, "cols=80&rows=24").await;
        assert_eq!(attached["replay"], "screen");
        let screen = repainted_text_to_cursor(&prelude, 80, 24);
        // The screen model may run behind what the driver has read (by up to its mailbox), so
        // the repaint can show earlier lines than `mark`, even none of the numbers yet.
        let first: u64 = screen
            .lines()
            .find_map(|l| l.trim().parse().ok())
            .unwrap_or(1);
        // Read on live until 50,000 lines past the repaint's first.
        let until = first + 50_000;
        observers.push(actix_rt::spawn(async move {
            let live = ws.read_until(format!("\n{until}\r\n").as_bytes()).await;
            (screen, live, until, ws.seen)
        }));
    }
    for observer in observers {
        let (screen, live, until, seen) = observer.await.unwrap();
        assert!(
            !seen.iter().any(|f| f.contains("desync")),
            "the test's reader fell behind: {seen:?}"
        );
        let text = screen + &String::from_utf8_lossy(&live).replace('\r', "");
        let numbers: Vec<u64> = text
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .take_while(|n| *n <= until)
            .collect();
        for pair in numbers.windows(2) {
            assert_eq!(
                pair[1],
                pair[0] + 1,
                "a line shown twice or skipped between the repaint and the live bytes"
            );
        }
        assert_eq!(numbers.last(), Some(&until));
    }
}

/// What a client that attached mid-stream has on its screen, as text: the repaint's rows down
/// to the cursor's. The cursor's row is kept whole: the snapshot may fall between a line's CR
/// and its LF, with the cursor back at column 0 of a row that still shows the line.
fn repainted_text_to_cursor(prelude: &[u8], cols: u16, rows: u16) -> String {
    let (lines, cursor_row) = rendered_rows(prelude, cols, rows);
    lines[..=cursor_row].join("\n")
}
