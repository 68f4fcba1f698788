//! Measures the screen-model candidates on what a session's screen model does: parse terminal
//! output fast, and cost little memory per idle session. The candidates are vt100 (what the
//! daemon uses), avt, alacritty_terminal's `Term` (its grid, fed through its vte `ansi`
//! processor), and a prototype fast path in front of vt100 ([`FastVt`], in this file only) that
//! replaces runs of printable text whose rows scroll off within a chunk by the line feeds alone.
//!
//! Two payloads: agent-like TUI output (colors, cursor moves, a status line redrawn in place,
//! UTF-8) and a plain-text flood (log lines of printable ASCII ending in `\r\n`, as `cat` of a
//! log sends, and as the load tool's throughput phase sends).
//!
//! Run: `cargo run --release --example screen_models`. The README records the figures.
//! `cargo test --example screen_models` checks that the fast path leaves vt100's screen
//! byte-identical to plain vt100's.

use std::hint::black_box;
use std::num::NonZeroU16;
use std::time::Instant;

use alacritty_terminal::event::VoidListener;
use alacritty_terminal::term::test::TermSize;
use alacritty_terminal::vte;

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

/// Line feeds fed to vt100 in place of skipped text, a slice at a time.
const LINE_FEEDS: [u8; 4096] = [b'\n'; 4096];

/// vt100 behind a fast path for runs of printable ASCII.
///
/// Within one chunk, a run of printable ASCII, CR and LF that moves the cursor down at least
/// `rows` times after some line ends can only leave the rows of its last lines on the screen:
/// everything printed before them scrolls off, and with scrollback off nothing keeps it. So
/// the text of those earlier lines is not printed; vt100 gets one `\n` per row advance it
/// would have made (line feeds and autowraps), which keeps the cursor, every scroll and vt100's
/// count of rows scrolled off (it decides where rows come back on a taller resize) exactly as
/// they were. The text after the cut is fed as is.
///
/// This holds only while vt100's parser is in its ground state at the run (a printable byte
/// inside an OSC string or a CSI is not text), so a second vte parser, with a performer that
/// does nothing, sees every byte and tells: a run counts only if its first printable byte
/// comes back as exactly that one `print`. It also needs the scroll region to be the whole
/// screen (rows outside it never scroll, and text below it overprints one row); once any
/// DECSTBM has been seen the fast path stays off for that screen. vt100 has no autowrap,
/// insert or newline modes to change the rest.
pub struct FastVt {
    parser: vt100::Parser,
    tracker: vte::Parser,
    probe: Probe,
    rows: u16,
    cols: u16,
    /// Bytes of text not printed, for the measurement and the tests.
    skipped: u64,
}

/// The tracker's performer: counts events, remembers the last printed character and whether a
/// scroll region was ever set.
#[derive(Default)]
struct Probe {
    events: u32,
    last_print: Option<char>,
    region_set: bool,
}

impl vte::Perform for Probe {
    fn print(&mut self, c: char) {
        self.events += 1;
        self.last_print = Some(c);
    }

    fn execute(&mut self, _byte: u8) {
        self.events += 1;
    }

    fn hook(&mut self, _params: &vte::Params, _intermediates: &[u8], _ignore: bool, _c: char) {
        self.events += 1;
    }

    fn put(&mut self, _byte: u8) {
        self.events += 1;
    }

    fn unhook(&mut self) {
        self.events += 1;
    }

    fn osc_dispatch(&mut self, _params: &[&[u8]], _bell_terminated: bool) {
        self.events += 1;
    }

    fn csi_dispatch(
        &mut self,
        _params: &vte::Params,
        intermediates: &[u8],
        _ignore: bool,
        c: char,
    ) {
        self.events += 1;
        // vt100 runs DECSTBM for `CSI ... r` with no intermediates, whatever `ignore` says.
        if c == 'r' && intermediates.is_empty() {
            self.region_set = true;
        }
    }

    fn esc_dispatch(&mut self, _intermediates: &[u8], _ignore: bool, _byte: u8) {
        self.events += 1;
    }
}

/// What to skip in a run: bytes `start..end` of the run, replaced by `advances` line feeds.
#[derive(Debug, PartialEq)]
struct Skip {
    start: usize,
    end: usize,
    advances: usize,
}

fn is_printable(b: u8) -> bool {
    (0x20..=0x7e).contains(&b)
}

fn is_text(b: u8) -> bool {
    is_printable(b) || b == b'\r' || b == b'\n'
}

/// vt100's cursor over one byte of such a run: a character at column `cols` (the pending
/// wrap) first moves to the next row; a line feed keeps the column.
#[inline(always)]
fn step(cols: usize, col: &mut usize, advances: &mut usize, b: u8) {
    match b {
        b'\r' => *col = 0,
        b'\n' => *advances += 1,
        _ => {
            if *col >= cols {
                *advances += 1;
                *col = 0;
            }
            *col += 1;
        }
    }
}

/// Where a run of printable ASCII, CR and LF, fed to vt100 in its ground state with a
/// full-screen scroll region, can be cut. The skipped part starts after the run's first CR
/// (before it the column is unknown) and ends after a line feed that leaves the column at 0;
/// what follows must move the cursor down `rows` times or more (so every row the skipped text
/// wrote scrolls off) and print something (vt100 remembers the last printed character for REP).
fn plan_skip(run: &[u8], rows: u16, cols: u16) -> Option<Skip> {
    let first_cr = run.iter().position(|&b| b == b'\r')?;
    let last_printable = run.iter().rposition(|&b| is_printable(b))?;
    let start = first_cr + 1;
    let cols = usize::from(cols);
    let (mut col, mut total) = (0, 0);
    for &b in &run[start..] {
        step(cols, &mut col, &mut total, b);
    }
    let limit = total.checked_sub(usize::from(rows))?;
    let (mut col, mut adv) = (0, 0);
    let mut best = None;
    for (at, &b) in run.iter().enumerate().skip(start) {
        step(cols, &mut col, &mut adv, b);
        if adv > limit {
            break;
        }
        if b == b'\n' && col == 0 && at < last_printable {
            best = Some((at + 1, adv));
        }
    }
    let (end, advances) = best?;
    (end > start).then_some(Skip {
        start,
        end,
        advances,
    })
}

impl FastVt {
    pub fn new(rows: u16, cols: u16) -> FastVt {
        FastVt {
            parser: vt100_parser(rows, cols),
            tracker: vte::Parser::new(),
            probe: Probe::default(),
            rows,
            cols,
            skipped: 0,
        }
    }

    pub fn screen(&self) -> &vt100::Screen {
        self.parser.screen()
    }

    pub fn set_size(&mut self, rows: u16, cols: u16) {
        self.rows = rows;
        self.cols = cols;
        self.parser.set_size(cells(rows), cells(cols));
    }

    pub fn process(&mut self, bytes: &[u8]) {
        // A run shorter than this cannot hold `rows` line ends plus a cut.
        let min_run = 2 * usize::from(self.rows);
        let mut tracked = 0;
        let mut fed = 0;
        let mut i = 0;
        while i < bytes.len() {
            let Some(first) = bytes[i..].iter().position(|&b| is_printable(b)) else {
                break;
            };
            let first = i + first;
            let end = bytes[first..]
                .iter()
                .position(|&b| !is_text(b))
                .map_or(bytes.len(), |n| first + n);
            i = end;
            if end - first < min_run {
                continue;
            }
            self.tracker
                .advance(&mut self.probe, &bytes[tracked..first]);
            self.probe.events = 0;
            self.probe.last_print = None;
            self.tracker
                .advance(&mut self.probe, &bytes[first..first + 1]);
            let ground =
                self.probe.events == 1 && self.probe.last_print == Some(char::from(bytes[first]));
            self.tracker
                .advance(&mut self.probe, &bytes[first + 1..end]);
            tracked = end;
            if !ground || self.probe.region_set {
                continue;
            }
            let Some(skip) = plan_skip(&bytes[first..end], self.rows, self.cols) else {
                continue;
            };
            self.parser.process(&bytes[fed..first + skip.start]);
            let mut left = skip.advances;
            while left > 0 {
                let n = left.min(LINE_FEEDS.len());
                self.parser.process(&LINE_FEEDS[..n]);
                left -= n;
            }
            fed = first + skip.end;
            self.skipped += (skip.end - skip.start) as u64;
        }
        self.tracker.advance(&mut self.probe, &bytes[tracked..]);
        self.parser.process(&bytes[fed..]);
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
        let mut f = FastVt::new(rows, cols);
        d.chunks(chunk).for_each(|c| f.process(c));
        black_box(f.screen().cursor_position());
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
    "vt100 + fast path (prototype)",
];

fn main() {
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
            let mut f = FastVt::new(rows, cols);
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

    let mut f = FastVt::new(40, 120);
    flood.chunks(CHUNK).for_each(|c| f.process(c));
    println!();
    println!(
        "fast path: {:.1}% of the flood's bytes not printed at 120×40 in {} KiB chunks",
        100.0 * f.skipped as f64 / flood.len() as f64,
        CHUNK >> 10
    );
    for chunk in [16 * 1024, 64 * 1024] {
        let vt = median_rate(&flood, |d| {
            let mut p = vt100_parser(40, 120);
            d.chunks(chunk).for_each(|c| p.process(c));
            black_box(p.screen().cursor_position());
        });
        let fast = median_rate(&flood, |d| {
            let mut f = FastVt::new(40, 120);
            d.chunks(chunk).for_each(|c| f.process(c));
            black_box(f.screen().cursor_position());
        });
        println!(
            "flood at 120×40 in {} KiB chunks: vt100 {vt:.1} MiB/s, vt100 + fast path {fast:.1} MiB/s",
            chunk >> 10
        );
    }
    println!("(screen sets kept for the memory figures: {})", kept.len());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `data` in the given chunk sizes (cycled) to plain vt100 and to the fast path, and
    /// checks after every chunk, and after a taller resize at the end, that both screens
    /// format the same. Returns the bytes the fast path did not print.
    fn same_screens(data: &[u8], rows: u16, cols: u16, chunks: &[usize]) -> u64 {
        let mut plain = vt100_parser(rows, cols);
        let mut fast = FastVt::new(rows, cols);
        let mut at = 0;
        for (n, &size) in chunks.iter().cycle().enumerate() {
            if at >= data.len() {
                break;
            }
            let end = (at + size).min(data.len());
            plain.process(&data[at..end]);
            fast.process(&data[at..end]);
            assert_eq!(
                plain.screen().state_formatted(),
                fast.screen().state_formatted(),
                "state after chunk {n} (bytes {at}..{end}) at {rows}x{cols}"
            );
            at = end;
        }
        assert_eq!(
            plain.screen().contents_formatted(),
            fast.screen().contents_formatted()
        );
        // Rows that scrolled off come back as blanks at the top of a taller screen; the fast
        // path must have kept vt100's count of them.
        plain.set_size(cells(rows * 3), cells(cols));
        fast.set_size(rows * 3, cols);
        assert_eq!(
            plain.screen().state_formatted(),
            fast.screen().state_formatted(),
            "after a taller resize at {rows}x{cols}"
        );
        fast.skipped
    }

    #[test]
    fn the_flood_is_skipped_and_the_screen_stays_the_same() {
        let flood = flood_payload(256 * 1024);
        for (rows, cols) in [(24, 80), (40, 120), (1, 80), (3, 5)] {
            let skipped = same_screens(&flood, rows, cols, &[4096, 1000, 65536, 333]);
            assert!(
                skipped > flood.len() as u64 / 2,
                "the fast path engaged at {rows}x{cols}: {skipped} bytes skipped"
            );
        }
    }

    #[test]
    fn agent_output_keeps_the_same_screen() {
        let agent = agent_payload(256 * 1024);
        for (rows, cols) in [(24, 80), (40, 120)] {
            same_screens(&agent, rows, cols, &[4096, 777, 65536]);
        }
    }

    #[test]
    fn bare_line_feeds_and_pending_wraps_keep_the_same_screen() {
        // Lines of exactly the width leave a pending wrap that a bare LF keeps; CR-less lines
        // carry the column over.
        let mut data = Vec::new();
        for i in 0..3000 {
            let line = "y".repeat(if i % 3 == 0 { 80 } else { i % 170 });
            data.extend_from_slice(line.as_bytes());
            data.extend_from_slice(match i % 4 {
                0 => b"\n".as_slice(),
                1 => b"\r\n",
                2 => b"\r\r\n\n",
                _ => b"\n\r",
            });
        }
        let skipped = same_screens(&data, 24, 80, &[4096, 513]);
        assert!(skipped > 0, "the fast path engaged");
    }

    #[test]
    fn text_inside_a_sequence_is_not_taken_for_output() {
        // An OSC title and a CSI cut across chunks, each holding printable bytes and line ends
        // the tracker must not take for text.
        let mut data = Vec::new();
        let lines: String = (0..200).map(|i| format!("line {i}\r\n")).collect();
        data.extend_from_slice(b"\x1b]0;");
        data.extend_from_slice(lines.as_bytes());
        data.extend_from_slice(b"\x07");
        data.extend_from_slice(b"\x1b[3");
        data.extend_from_slice(lines.as_bytes());
        data.extend_from_slice(b"1mafter\r\n");
        data.extend_from_slice(lines.as_bytes());
        data.extend_from_slice("é".as_bytes());
        data.extend_from_slice(lines.as_bytes());
        same_screens(&data, 24, 80, &[100, 4096, 1, 2, 3]);
        // A CR inside a CSI runs without ending it: taken for text, the line feeds after it
        // would scroll the main screen before the `h` of the first line after the cut, not the
        // first line's, switches to the alternate screen, and leaving it would show that.
        let mut data = b"kept on the main screen\r\n\x1b[?1049\r".to_vec();
        let hellos: String = (0..200).map(|i| format!("hello {i}\r\n")).collect();
        data.extend_from_slice(hellos.as_bytes());
        data.extend_from_slice(b"\x1b[?1049l");
        same_screens(&data, 24, 80, &[65536]);
    }

    #[test]
    fn the_last_printed_character_survives_for_rep() {
        // REP repeats the last character printed: the text after the cut must print one.
        let mut data = b"first\r\n".to_vec();
        data.extend_from_slice(&b"abc\r\n".repeat(100));
        data.extend_from_slice(&b"\r\n".repeat(30));
        data.extend_from_slice(b"\x1b[5b");
        same_screens(&data, 24, 80, &[65536]);
    }

    #[test]
    fn a_scroll_region_turns_the_fast_path_off() {
        // Cursor below a scroll region: line feeds do not scroll, every line overprints the
        // bottom row, and skipping any of them would change what is left there.
        let mut data = b"\x1b[1;10r\x1b[24;1H".to_vec();
        for i in 0..2000 {
            let line = "z".repeat(150 - i % 150);
            data.extend_from_slice(line.as_bytes());
            data.extend_from_slice(b"\r\n");
        }
        let skipped = same_screens(&data, 24, 80, &[4096]);
        assert_eq!(skipped, 0);
    }

    /// A small xorshift generator: the random streams are the same on every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> usize {
            (self.next() % n) as usize
        }
    }

    #[test]
    fn random_streams_keep_the_same_screen() {
        let pieces: [&[u8]; 16] = [
            b"\r\n",
            b"\n",
            b"\r",
            b"\x1b[31m",
            b"\x1b[0m",
            b"\x1b[2J",
            b"\x1b[H",
            b"\x1b[5;7H",
            b"\x1b[K",
            b"\x1b[?1049h",
            b"\x1b[?1049l",
            b"\x1b]2;title\r\n\x07",
            "wide 漢字 ✓ ".as_bytes(),
            b"\x1b[2b",
            b"\x1b[3S",
            b"\x1b",
        ];
        let mut skipped = 0;
        for seed in 1..=12u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut data = Vec::new();
            while data.len() < 96 * 1024 {
                if rng.below(3) == 0 {
                    data.extend_from_slice(pieces[rng.below(pieces.len() as u64)]);
                } else {
                    // A burst of short and long lines.
                    for _ in 0..rng.below(120) {
                        let len = rng.below(200);
                        data.extend(std::iter::repeat_n(b'a' + (len % 26) as u8, len));
                        data.extend_from_slice(if rng.below(5) == 0 { b"\n" } else { b"\r\n" });
                    }
                }
            }
            let chunks: Vec<usize> = (0..7).map(|_| 1 + rng.below(5000)).collect();
            for (rows, cols) in [(24, 80), (5, 13)] {
                skipped += same_screens(&data, rows, cols, &chunks);
            }
        }
        assert!(skipped > 0, "the fast path engaged");
    }

    #[test]
    fn the_plan_cuts_after_a_line_end_and_leaves_a_screenful() {
        // 10 lines of "ab" at 3 rows: the skipped part starts after the first CR and ends
        // after the line that leaves 3 row advances and some text after it.
        let run = b"ab\r\n".repeat(10);
        let skip = plan_skip(&run, 3, 80).expect("a cut");
        assert_eq!(skip.start, 3);
        // The first line's LF and lines 2 to 7 are skipped (7 advances); lines 8 to 10 stay.
        assert_eq!(skip.end, 4 * 7);
        assert_eq!(skip.advances, 7);
        assert_eq!(plan_skip(b"ab\r\nab\r\n", 3, 80), None);
        assert_eq!(plan_skip(&b"ab\n".repeat(10), 3, 80), None, "no CR, no cut");
    }
}
