//! The screen model alone on each output shape of the load tool: how fast `atc-screen` parses
//! each shape's bytes at the bench's 120×40, beside vt100 0.18 (the daemon's model until
//! issue 37), with no PTY, socket or daemon in the way. It tells which shapes the model makes
//! dear before the load tool's end-to-end figures do.
//!
//! Run: `cargo run --release -p atc-bench --example screen_shapes [MiB per shape] [chunk KiB]`
//! (defaults 64 and 32, the size the daemon's session gathers before it feeds its model).

use std::hint::black_box;
use std::num::NonZeroU16;
use std::time::Instant;

use atc_bench::Shape;

/// MiB/s of `parse` over `bytes`, the median of three runs.
fn rate(bytes: &[u8], parse: impl Fn(&[u8])) -> f64 {
    let mut rates: Vec<f64> = (0..3)
        .map(|_| {
            let start = Instant::now();
            parse(bytes);
            bytes.len() as f64 / (1 << 20) as f64 / start.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates[1]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mib: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let chunk: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(32) << 10;
    let (cols, rows) = (120u16, 40u16);
    let n = |v: u16| NonZeroU16::new(v).expect("a size");
    println!(
        "{mib} MiB per shape in {} KiB chunks at {cols}×{rows}; MiB/s, median of 3",
        chunk >> 10
    );
    println!();
    println!("| shape | atc-screen | vt100 0.18 | atc-screen / vt100 |");
    println!("| --- | --- | --- | --- |");
    // `SHAPES=sgr,cjk` measures only those; `ATC_ONLY=1` leaves vt100 out (for a profile).
    let only: Option<String> = std::env::var("SHAPES").ok();
    let atc_only = std::env::var_os("ATC_ONLY").is_some();
    for shape in Shape::ALL {
        if only
            .as_ref()
            .is_some_and(|o| !o.split(',').any(|n| n == shape.name()))
        {
            continue;
        }
        let bytes = shape.sample(mib << 20);
        let ours = rate(&bytes, |b| {
            let mut t = atc_screen::Terminal::new(cols, rows);
            b.chunks(chunk).for_each(|c| t.process(c));
            black_box(t.text());
        });
        if atc_only {
            println!("| {} | {ours:.1} | | |", shape.name());
            continue;
        }
        let theirs = rate(&bytes, |b| {
            let mut p = vt100::Parser::new(n(rows), n(cols), 0);
            b.chunks(chunk).for_each(|c| p.process(c));
            black_box(p.screen().cursor_position());
        });
        println!(
            "| {} | {ours:.1} | {theirs:.1} | {:.2} |",
            shape.name(),
            ours / theirs
        );
    }
}
