//! Measures the two screen-model candidates, vt100 and avt, on what a session's screen model
//! does: parse agent-like terminal output fast, and cost little memory per idle session.
//!
//! Run: `cargo run --release --example screen_models`. The README records the figures and
//! the choice they led to.

use std::time::Instant;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Output shaped like a coding agent's TUI: colored text lines, cursor moves, line clears,
/// a status line redrawn in place, and some UTF-8.
fn payload(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 256);
    let mut i = 0u64;
    while out.len() < bytes {
        i += 1;
        out.extend_from_slice(
            format!(
                "\x1b[32m✓\x1b[0m step {i}: \x1b[1mcompiled\x1b[0m src/module_{}.rs in {}ms — ok\r\n",
                i % 97,
                i % 1000
            )
            .as_bytes(),
        );
        if i.is_multiple_of(8) {
            out.extend_from_slice(
                format!("\x1b[s\x1b[24;1H\x1b[2K\x1b[7m working… {i} tokens \x1b[0m\x1b[u")
                    .as_bytes(),
            );
        }
    }
    out
}

fn main() {
    let data = payload(64 * 1024 * 1024);
    let mib = data.len() as f64 / (1024.0 * 1024.0);
    let text = String::from_utf8(data.clone()).expect("payload is UTF-8");

    let t = Instant::now();
    let mut vt = vt100::Parser::new(
        std::num::NonZeroU16::new(24).expect("nonzero"),
        std::num::NonZeroU16::new(80).expect("nonzero"),
        0,
    );
    for chunk in data.chunks(4096) {
        vt.process(chunk);
    }
    let vt100_rate = mib / t.elapsed().as_secs_f64();

    // avt takes &str: a real session would also need a streaming UTF-8 decoder in front.
    let t = Instant::now();
    let mut av = avt::Vt::builder().size(80, 24).scrollback_limit(0).build();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + 4096).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        av.feed_str(&text[start..end]);
        start = end;
    }
    let avt_rate = mib / t.elapsed().as_secs_f64();

    const N: usize = 2000;
    let before = rss_kib();
    let many_vt: Vec<vt100::Parser> = (0..N)
        .map(|_| {
            let mut p = vt100::Parser::new(
                std::num::NonZeroU16::new(24).expect("nonzero"),
                std::num::NonZeroU16::new(80).expect("nonzero"),
                0,
            );
            p.process(b"$ \x1b[32mready\x1b[0m\r\n");
            p
        })
        .collect();
    let vt_kib = (rss_kib() - before) as f64 / N as f64;
    let before = rss_kib();
    let many_avt: Vec<avt::Vt> = (0..N)
        .map(|_| {
            let mut v = avt::Vt::builder().size(80, 24).scrollback_limit(0).build();
            v.feed_str("$ \x1b[32mready\x1b[0m\r\n");
            v
        })
        .collect();
    let avt_kib = (rss_kib() - before) as f64 / N as f64;
    println!("payload: {mib:.0} MiB of agent-like output, fed in 4 KiB chunks, 80x24");
    println!("vt100: {vt100_rate:>7.1} MiB/s   {vt_kib:>6.1} KiB per idle 80x24 screen");
    println!("avt:   {avt_rate:>7.1} MiB/s   {avt_kib:>6.1} KiB per idle 80x24 screen");
    println!(
        "(screens kept: {} + {}; cursor check {:?} / {:?})",
        many_vt.len(),
        many_avt.len(),
        vt.screen().cursor_position(),
        av.cursor()
    );
}
