//! Measures the screen-model candidates on what a session's screen model does: parse terminal
//! output fast, and cost little memory per idle session. The candidates are vt100 (what the
//! daemon's screen model was built on until issue 37), avt, alacritty_terminal's `Term` (its
//! grid, fed through its vte `ansi` processor), and the daemon's own [`ScreenModel`], which is
//! the workspace's emulator (crates/atc-screen).
//!
//! Two payloads: agent-like TUI output (colors, cursor moves, a status line redrawn in place,
//! UTF-8) and a plain-text flood (log lines of printable ASCII ending in `\r\n`, as `cat` of a
//! log sends, and as the load tool's throughput phase sends).
//!
//! Run: `cargo run --release --example screen_models` (`-- overhead` for the daemon's model's
//! CPU time on agent output against vt100's, paired). docs/performance-log.md records the
//! figures.

use std::hint::black_box;
use std::num::NonZeroU16;
use std::time::Instant;

use alacritty_terminal::event::VoidListener;
use alacritty_terminal::term::test::TermSize;
use alacritty_terminal::vte;
use atc::sessions::screen::ScreenModel;

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
fn agent_payload(bytes: usize) -> Vec<u8> {
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

/// A plain-text flood: log lines of printable ASCII, 30 to 130 columns (some wrap at 80 and
/// at 120), each ending in `\r\n` as the PTY's output processing turns `\n` into.
fn flood_payload(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 256);
    let mut i = 0u64;
    while out.len() < bytes {
        i += 1;
        let pad = (i * 7919 % 101) as usize;
        out.extend_from_slice(
            format!(
                "2026-12-01T16:30:{:02}.{:03}Z INFO worker{{id={}}}: batch {i} done {}\r\n",
                i % 60,
                i % 1000,
                i % 16,
                "x".repeat(pad)
            )
            .as_bytes(),
        );
    }
    out
}

fn vt100_parser(rows: u16, cols: u16) -> vt100::Parser {
    vt100::Parser::new(cells(rows), cells(cols), 0)
}

fn cells(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN)
}

fn screen_model(rows: u16, cols: u16) -> ScreenModel {
    ScreenModel::new(atc_protocol::TermSize { cols, rows })
}

fn avt_vt(rows: u16, cols: u16) -> avt::Vt {
    avt::Vt::builder()
        .size(cols.into(), rows.into())
        .scrollback_limit(0)
        .build()
}

/// alacritty's terminal with a grid of the session's size and no scrollback, as a session would
/// keep it, and the processor that feeds it bytes.
struct Alacritty {
    term: alacritty_terminal::Term<VoidListener>,
    processor: vte::ansi::Processor,
}

impl Alacritty {
    fn new(rows: u16, cols: u16) -> Alacritty {
        let config = alacritty_terminal::term::Config {
            scrolling_history: 0,
            ..Default::default()
        };
        Alacritty {
            term: alacritty_terminal::Term::new(
                config,
                &TermSize::new(cols.into(), rows.into()),
                VoidListener,
            ),
            processor: vte::ansi::Processor::new(),
        }
    }

    fn process(&mut self, bytes: &[u8]) {
        self.processor.advance(&mut self.term, bytes);
    }
}

/// Median parse rate of three runs, each on a fresh screen fed `data` in `chunk`-byte pieces.
fn median_rate(data: &[u8], mut run: impl FnMut(&[u8])) -> f64 {
    let mib = data.len() as f64 / (1024.0 * 1024.0);
    let mut rates: Vec<f64> = (0..3)
        .map(|_| {
            let t = Instant::now();
            run(data);
            mib / t.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates[1]
}

/// Chunks of at most `chunk` bytes that end on a UTF-8 boundary (avt takes `&str`; a session
/// would need a streaming decoder in front of it).
fn str_chunks(text: &str, chunk: usize) -> impl Iterator<Item = &str> {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= text.len() {
            return None;
        }
        let mut end = (start + chunk).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let piece = &text[start..end];
        start = end;
        Some(piece)
    })
}

/// The four parse rates of one payload at one size, in MiB/s.
fn rates(data: &[u8], rows: u16, cols: u16, chunk: usize) -> [f64; 4] {
    let text = std::str::from_utf8(data).expect("payloads are UTF-8");
    let vt = median_rate(data, |d| {
        let mut p = vt100_parser(rows, cols);
        d.chunks(chunk).for_each(|c| p.process(c));
        black_box(p.screen().cursor_position());
    });
    let av = median_rate(data, |_| {
        let mut v = avt_vt(rows, cols);
        str_chunks(text, chunk).for_each(|c| {
            v.feed_str(c);
        });
        black_box(v.cursor());
    });
    let al = median_rate(data, |d| {
        let mut a = Alacritty::new(rows, cols);
        d.chunks(chunk).for_each(|c| a.process(c));
        black_box(a.term.grid().cursor.point);
    });
    let fast = median_rate(data, |d| {
        let mut f = screen_model(rows, cols);
        d.chunks(chunk).for_each(|c| f.process(c));
        black_box(f.text().cursor.row);
    });
    [vt, av, al, fast]
}

/// RSS per idle screen, in KiB: `n` screens of one candidate, each shown a prompt, all kept.
fn idle_kib<T>(n: usize, make: impl Fn() -> T) -> (f64, Vec<T>) {
    let before = rss_kib();
    let kept: Vec<T> = (0..n).map(|_| make()).collect();
    let kib = rss_kib().saturating_sub(before) as f64 / n as f64;
    (kib, kept)
}

const PROMPT: &str = "$ \x1b[32mready\x1b[0m\r\n";
const NAMES: [&str; 4] = [
    "vt100 0.18",
    "avt 0.17",
    "alacritty_terminal 0.26",
    "atc ScreenModel (atc-screen)",
];

/// CPU time this thread has used, in seconds: on a shared machine it leaves out the time
/// other processes held the core.
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill in.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// CPU seconds `run` takes.
fn cpu_time(run: impl FnOnce()) -> f64 {
    let t = thread_cpu_secs();
    run();
    thread_cpu_secs() - t
}

/// The screen model's cost on agent output against vt100's: the two timed in CPU time
/// in alternation, 7 rounds at each size; the medians of the rounds' ratios to vt100.
fn agent_overhead() {
    let agent = agent_payload(16 * 1024 * 1024);
    for (rows, cols) in [(24, 80), (40, 120)] {
        let mut model = Vec::new();
        for _ in 0..7 {
            let vt = cpu_time(|| {
                let mut p = vt100_parser(rows, cols);
                agent.chunks(4096).for_each(|c| p.process(c));
                black_box(p.screen().cursor_position());
            });
            let fast = cpu_time(|| {
                let mut f = screen_model(rows, cols);
                agent.chunks(4096).for_each(|c| f.process(c));
                black_box(f.text().cursor.row);
            });
            model.push(fast / vt);
        }
        model.sort_by(f64::total_cmp);
        println!(
            "agent output at {cols}×{rows} in 4 KiB chunks, CPU time against vt100's: the screen \
             model {:+.1}% (rounds {:+.1}% to {:+.1}%)",
            100.0 * (model[3] - 1.0),
            100.0 * (model[0] - 1.0),
            100.0 * (model[6] - 1.0),
        );
    }
}

fn main() {
    // `-- overhead` measures only the fast path's cost on agent output.
    if std::env::args().nth(1).as_deref() == Some("overhead") {
        agent_overhead();
        return;
    }
    const N: usize = 2000;
    const SIZES: [(u16, u16); 2] = [(24, 80), (40, 120)];
    // Memory first, before the payloads and the parse runs leave freed heap behind that the
    // screens would reuse and hide from RSS.
    let mut memory = [[0.0f64; 2]; 4];
    // Every screen stays alive until the rates are taken, so none reuses another's memory.
    let mut kept: Vec<Box<dyn std::any::Any>> = Vec::new();
    for (s, &(rows, cols)) in SIZES.iter().enumerate() {
        let (kib, v) = idle_kib(N, || {
            let mut p = vt100_parser(rows, cols);
            p.process(PROMPT.as_bytes());
            p
        });
        memory[0][s] = kib;
        kept.push(Box::new(v));
        let (kib, v) = idle_kib(N, || {
            let mut v = avt_vt(rows, cols);
            v.feed_str(PROMPT);
            v
        });
        memory[1][s] = kib;
        kept.push(Box::new(v));
        let (kib, v) = idle_kib(N, || {
            let mut a = Alacritty::new(rows, cols);
            a.process(PROMPT.as_bytes());
            a
        });
        memory[2][s] = kib;
        kept.push(Box::new(v));
        let (kib, v) = idle_kib(N, || {
            let mut f = screen_model(rows, cols);
            f.process(PROMPT.as_bytes());
            f
        });
        memory[3][s] = kib;
        kept.push(Box::new(v));
    }

    const BYTES: usize = 64 * 1024 * 1024;
    const CHUNK: usize = 4096;
    let agent = agent_payload(BYTES);
    let flood = flood_payload(BYTES);
    let mut table = [[0.0f64; 4]; 4];
    for (s, &(rows, cols)) in SIZES.iter().enumerate() {
        for (p, data) in [&agent, &flood].into_iter().enumerate() {
            for (c, rate) in rates(data, rows, cols, CHUNK).into_iter().enumerate() {
                table[c][2 * s + p] = rate;
            }
        }
    }

    println!(
        "{} MiB per payload, fed in {} KiB chunks; parse rate in MiB/s, median of 3 runs; \
         memory is RSS growth over {N} idle screens, per screen",
        BYTES >> 20,
        CHUNK >> 10
    );
    println!();
    println!(
        "| crate | agent 80×24 | flood 80×24 | agent 120×40 | flood 120×40 | \
         idle 80×24 | idle 120×40 |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (c, name) in NAMES.iter().enumerate() {
        let r = table[c];
        let m = memory[c];
        println!(
            "| {name} | {:.1} MiB/s | {:.1} MiB/s | {:.1} MiB/s | {:.1} MiB/s | {:.1} KiB | {:.1} KiB |",
            r[0], r[1], r[2], r[3], m[0], m[1]
        );
    }

    println!();
    for chunk in [16 * 1024, 64 * 1024] {
        let vt = median_rate(&flood, |d| {
            let mut p = vt100_parser(40, 120);
            d.chunks(chunk).for_each(|c| p.process(c));
            black_box(p.screen().cursor_position());
        });
        let fast = median_rate(&flood, |d| {
            let mut f = screen_model(40, 120);
            d.chunks(chunk).for_each(|c| f.process(c));
            black_box(f.text().cursor.row);
        });
        println!(
            "flood at 120×40 in {} KiB chunks: vt100 {vt:.1} MiB/s, the screen model {fast:.1} MiB/s",
            chunk >> 10
        );
    }
    agent_overhead();
    println!("(screen sets kept for the memory figures: {})", kept.len());
}
