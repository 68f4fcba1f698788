//! The screen model against a plain vt100 parser fed the same bytes in the same pieces, on
//! agent output, floods, wraps, resizes and resets: whatever the fast path skipped, every check
//! says the two screens cannot be told apart.

use super::*;

/// A plain vt100 parser and a [`ScreenModel`] fed the same bytes and sizes; every check
/// says they cannot be told apart.
pub(super) struct Differential {
    plain: vt100::Parser<TerminalModes>,
    pub(super) model: ScreenModel,
    chunks: usize,
    last_byte: Option<u8>,
}

impl Differential {
    pub(super) fn new(rows: u16, cols: u16) -> Differential {
        Differential {
            plain: new_parser(rows, cols),
            // A small credit, so that floods go past it and the bound is what is
            // checked: no test grows its screen by more than 256 rows between floods.
            model: ScreenModel::with_fast_path(
                TermSize { cols, rows },
                crate::sessions::screen_fast_path::FastPath::with_credit(256),
            ),
            chunks: 0,
            last_byte: None,
        }
    }

    /// Feeds `data` in pieces of the given sizes (cycled), checking after each.
    fn feed(&mut self, data: &[u8], sizes: &[usize]) {
        let mut at = 0;
        for &size in sizes.iter().cycle() {
            if at >= data.len() {
                break;
            }
            let end = (at + size.max(1)).min(data.len());
            self.chunk(&data[at..end]);
            at = end;
        }
    }

    pub(super) fn chunk(&mut self, bytes: &[u8]) {
        // The plain parser's modes reset at each RIS, found a byte at a time.
        let mut from = 0;
        for (i, &b) in bytes.iter().enumerate() {
            if self.last_byte == Some(0x1b) && b == b'c' {
                self.plain.process(&bytes[from..=i]);
                self.plain.callbacks_mut().reset();
                from = i + 1;
            }
            self.last_byte = Some(b);
        }
        self.plain.process(&bytes[from..]);
        self.model.process(bytes);
        self.chunks += 1;
        self.check("a chunk");
    }

    fn resize(&mut self, rows: u16, cols: u16) {
        self.plain.set_size(cells(rows), cells(cols));
        self.model.resize(TermSize { cols, rows });
        self.check("a resize");
    }

    #[track_caller]
    fn check(&self, after: &str) {
        let (plain, model) = (self.plain.screen(), self.model.parser.screen());
        let at = format!("after {after}, chunk {}", self.chunks);
        assert_eq!(
            plain.contents_formatted(),
            model.contents_formatted(),
            "{at}"
        );
        assert_eq!(plain.state_formatted(), model.state_formatted(), "{at}");
        assert_eq!(plain.cursor_position(), model.cursor_position(), "{at}");
        assert_eq!(plain.alternate_screen(), model.alternate_screen(), "{at}");
        assert_eq!(
            self.plain.callbacks(),
            self.model.parser.callbacks(),
            "{at}"
        );
        assert_eq!(
            repaint_of(plain, self.plain.callbacks()),
            self.model.repaint(),
            "{at}"
        );
    }

    /// What the screens cannot show yet: vt100's count of rows scrolled off (rows come
    /// back as blanks at the top of a taller screen, and the cursor moves down by as
    /// many) and the last printed character (REP repeats it). Returns the bytes the fast
    /// path skipped.
    pub(super) fn finish(mut self) -> u64 {
        let (rows, cols) = self.plain.screen().size();
        self.resize(rows.get() * 3, cols.get());
        self.chunk(b"\x1b[3b");
        self.model.fast_path_skipped()
    }
}

use crate::sessions::screen_fast_path::tests::Rng;

/// Output shaped like a coding agent's TUI: colored lines, a status line redrawn in
/// place with the cursor saved and restored, line clears and UTF-8.
fn agent_payload(bytes: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0u64;
    while out.len() < bytes {
        i += 1;
        out.extend_from_slice(
            format!(
                "\x1b[32m✓\x1b[0m step {i}: \x1b[1mcompiled\x1b[0m src/m_{}.rs — ok\r\n",
                i % 97
            )
            .as_bytes(),
        );
        if i.is_multiple_of(8) {
            out.extend_from_slice(
                format!("\x1b[s\x1b[24;1H\x1b[2K\x1b[7m working… {i} \x1b[0m\x1b[u").as_bytes(),
            );
        }
    }
    out
}

/// Log lines of printable ASCII, 20 to 220 columns (some wrap, some exactly fill a row
/// of 80), ending in `\r\n`.
pub(super) fn flood_payload(bytes: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0usize;
    while out.len() < bytes {
        i += 1;
        let line = format!("INFO worker: batch {i} done ");
        let pad = if i.is_multiple_of(9) {
            80 - line.len()
        } else {
            i * 7919 % 200
        };
        out.extend_from_slice(line.as_bytes());
        out.extend(std::iter::repeat_n(b'x', pad));
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[test]
fn agent_output_keeps_the_same_screen() {
    let agent = agent_payload(128 * 1024);
    for (rows, cols) in [(24, 80), (40, 120)] {
        let mut d = Differential::new(rows, cols);
        d.feed(&agent, &[4096, 777, 65536]);
        d.finish();
    }
}

#[test]
fn a_flood_is_skipped_and_keeps_the_same_screen() {
    let flood = flood_payload(256 * 1024);
    for (rows, cols) in [(24, 80), (40, 120), (1, 80), (3, 5)] {
        let mut d = Differential::new(rows, cols);
        d.feed(&flood, &[4096, 65536]);
        let skipped = d.finish();
        assert!(
            skipped > flood.len() as u64 / 2,
            "the fast path engaged at {rows}x{cols}: {skipped} bytes skipped"
        );
    }
}

/// Lines ended by a bare line feed, as a PTY with output processing off sends them: the
/// column carries from line to line. Lengths vary, some exactly a row (a pending wrap
/// before the line feed), and a prompt-like prefix puts the first run mid-row.
fn line_feed_payload(bytes: usize, cols: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = b"\x1b[1m$\x1b[0m run ".to_vec();
    while out.len() < bytes {
        let len = match rng.below(5) {
            0 => cols,
            1 => 2 * cols,
            _ => 1 + rng.below(3 * cols),
        };
        let shift = out.len();
        out.extend((0..len).map(|i| b'!' + ((i + shift) % 90) as u8));
        out.push(b'\n');
    }
    out
}

#[test]
fn line_feeds_without_crs_are_skipped_and_keep_the_same_screen() {
    for (rows, cols, seed) in [(24, 80, 1), (40, 120, 2), (3, 10, 3), (1, 80, 4)] {
        let data = line_feed_payload(192 * 1024, usize::from(cols), seed);
        let mut d = Differential::new(rows, cols);
        d.feed(&data, &[4096, 65536, 777]);
        let skipped = d.finish();
        assert!(
            skipped > data.len() as u64 / 2,
            "the fast path engaged at {rows}x{cols}: {skipped} bytes skipped"
        );
    }
    // The load tool's payload line: 98 printable bytes and a line feed.
    let line = [[b'x'; 98].as_slice(), b"\n"].concat();
    let mut d = Differential::new(40, 120);
    d.feed(&line.repeat(4000), &[65536]);
    assert!(d.finish() > 300_000);
}

#[test]
fn random_chunk_boundaries_and_resizes_keep_the_same_screen() {
    let flood = flood_payload(128 * 1024);
    let mut skipped = 0;
    for seed in 1..=6 {
        let mut rng = Rng::new(seed);
        let mut d = Differential::new(24, 80);
        let mut at = 0;
        while at < flood.len() {
            let end = (at + 1 + rng.below(9000)).min(flood.len());
            d.chunk(&flood[at..end]);
            at = end;
            if rng.below(4) == 0 {
                let sizes = [(24, 80), (40, 120), (10, 80), (50, 33), (2, 200), (24, 79)];
                let (rows, cols) = sizes[rng.below(sizes.len())];
                d.resize(rows, cols);
            }
        }
        skipped += d.finish();
    }
    assert!(skipped > 0, "the fast path engaged");
}

#[test]
fn alternate_screen_switches_keep_the_same_screen() {
    let flood = flood_payload(32 * 1024);
    let mut data = b"on the main screen\r\n".to_vec();
    for _ in 0..4 {
        data.extend_from_slice(b"\x1b[?1049h");
        data.extend_from_slice(&flood);
        data.extend_from_slice(b"\x1b[?1049l");
        data.extend_from_slice(&flood[..8192]);
    }
    let mut d = Differential::new(24, 80);
    d.feed(&data, &[65536, 3000]);
    assert!(d.finish() > 0, "the fast path engaged");
}

#[test]
fn a_scroll_region_mid_stream_turns_the_fast_path_off() {
    let flood = flood_payload(64 * 1024);
    let mut d = Differential::new(24, 80);
    d.feed(&flood, &[4096]);
    let before = d.model.fast_path_skipped();
    assert!(before > 0, "the fast path engaged");
    // Cursor below the region: line feeds do not scroll and every line overprints the
    // bottom row; in the region, rows above it stay.
    d.chunk(b"\x1b[5;20r\x1b[24;1H");
    d.feed(&flood, &[4096]);
    d.chunk(b"\x1b[10;1H");
    d.feed(&flood, &[4096]);
    // A resize resets vt100's region; the fast path stays off anyway.
    d.resize(30, 80);
    d.feed(&flood, &[4096]);
    assert_eq!(d.finish(), before);
}

#[test]
fn wide_and_utf8_text_keeps_the_same_screen() {
    let mut data = Vec::new();
    for i in 0..3000usize {
        // Wide characters at the right edge wrap early; combining marks and other
        // multi-byte text end a run of ASCII, which resumes at an unknown column.
        let line = match i % 40 {
            0 => format!("{}漢字 line {i}", "y".repeat(79)),
            1 => format!("e\u{301}té ✓ {i}"),
            2 => format!("{}字", "w".repeat(i % 170)),
            _ => format!("plain ascii {i} {}", "q".repeat(i % 130)),
        };
        data.extend_from_slice(line.as_bytes());
        data.extend_from_slice(if i % 5 == 0 { b"\n" } else { b"\r\n" });
    }
    for (rows, cols) in [(24, 80), (7, 13)] {
        let mut d = Differential::new(rows, cols);
        // Odd sizes cut UTF-8 characters across chunks.
        d.feed(&data, &[4096, 1001, 333]);
        assert!(d.finish() > 0, "the fast path engaged at {rows}x{cols}");
    }
}

#[test]
fn text_inside_a_string_or_sequence_is_not_taken_for_output() {
    let lines: String = (0..200).map(|i| format!("line {i}\r\n")).collect();
    let mut data = Vec::new();
    // An OSC title, a DCS, an APC and a CSI each holding printable text and line ends;
    // all of it is parsed as part of the sequence, not printed. (vt100 ignores line
    // feeds inside strings, so only the CSI below could show a wrong skip.)
    for (open, close) in [
        (b"\x1b]0;".as_slice(), b"\x07".as_slice()),
        (b"\x1b]2;", b"\x1b\\"),
        (b"\x1bPq", b"\x1b\\"),
        (b"\x1b_", b"\x1b\\"),
        (b"\x1b[3", b"1m"),
    ] {
        data.extend_from_slice(open);
        data.extend_from_slice(lines.as_bytes());
        data.extend_from_slice(close);
        data.extend_from_slice(b"after\r\n");
        data.extend_from_slice(lines.as_bytes());
    }
    for sizes in [&[65536][..], &[100, 4096, 1, 2, 3][..]] {
        let mut d = Differential::new(24, 80);
        d.feed(&data, sizes);
        assert!(d.finish() > 0, "the fast path engaged");
    }
    // A CR inside a CSI runs without ending it: taken for text, the line feeds after it
    // would scroll the main screen before the `h` after the cut switches to the
    // alternate screen, and leaving it would show that.
    let mut data = b"kept on the main screen\r\n\x1b[?1049\r".to_vec();
    let hellos: String = (0..200).map(|i| format!("hello {i}\r\n")).collect();
    data.extend_from_slice(hellos.as_bytes());
    data.extend_from_slice(b"\x1b[?1049l");
    let mut d = Differential::new(24, 80);
    d.feed(&data, &[65536]);
    d.finish();
}

#[test]
fn the_count_of_rows_scrolled_off_survives_a_taller_resize() {
    // vt100 brings back as many blank rows at the top of a taller screen as rows
    // scrolled off, up to the growth: a few lines more or fewer than the screen shows.
    for lines in 4..40 {
        for line in [b"ab".as_slice(), &[b'w'; 100]] {
            let data = [line, b"\r\n"].concat().repeat(lines);
            let mut d = Differential::new(3, 40);
            d.chunk(&data);
            d.resize(80, 40);
            d.chunk(b"after");
            let skipped = d.finish();
            assert!(
                lines < 7 || skipped > 0,
                "the fast path engaged at {lines} lines"
            );
        }
    }
}

#[test]
fn an_erase_of_scrollback_or_a_reset_zeroes_the_count_the_fast_path_keeps() {
    // A flood past the credit, then what zeroes vt100's count, then a flood that scrolls
    // fewer rows than the credit but more than a screen: a fast path that still counted
    // the first flood would feed only a screenful of the second's scrolls, and a screen
    // 200 rows taller would bring back fewer rows.
    let lines = |n: usize| b"some output\r\n".repeat(n);
    for zeroing in [b"\x1b[3J".as_slice(), b"\x1b[?3J", b"\x1bc"] {
        let mut d = Differential::new(24, 80);
        d.chunk(&lines(2000));
        d.chunk(zeroing);
        d.chunk(&lines(200));
        d.resize(224, 80);
        assert!(d.finish() > 0, "the fast path engaged");
    }
}

#[test]
fn the_last_printed_character_survives_for_rep() {
    // REP repeats the last character printed: the text after the cut must print one.
    let mut data = b"first\r\n".to_vec();
    data.extend_from_slice(&b"abc\r\n".repeat(100));
    data.extend_from_slice(&b"\r\n".repeat(30));
    data.extend_from_slice(b"\x1b[5b");
    let mut d = Differential::new(24, 80);
    d.chunk(&data);
    assert!(d.finish() > 0, "the fast path engaged");
}

#[test]
fn random_mixed_streams_keep_the_same_screen() {
    let pieces: [&[u8]; 24] = [
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
        b"\x1bM",
        b"\x1b7\x1b[20;1H\x1b8",
        // Both zero vt100's count of rows scrolled off.
        b"\x1b[3J",
        b"\x1bc",
        // Modes, which the fast path must not skip and a RIS resets.
        b"\x1b[?1004h",
        b"\x1b[?2031;1004l",
        b"\x1b[?1049;1000;1006;2031h",
        b"\x1b[?1000l",
    ];
    let mut skipped = 0;
    for seed in 1..=8 {
        let mut rng = Rng::new(seed);
        let mut data = Vec::new();
        while data.len() < 64 * 1024 {
            if rng.below(3) == 0 {
                data.extend_from_slice(pieces[rng.below(pieces.len())]);
            } else {
                for _ in 0..rng.below(120) {
                    let len = rng.below(200);
                    data.extend(std::iter::repeat_n(b'a' + (len % 26) as u8, len));
                    data.extend_from_slice(if rng.below(5) == 0 { b"\n" } else { b"\r\n" });
                }
            }
        }
        let sizes: Vec<usize> = (0..7).map(|_| 1 + rng.below(5000)).collect();
        for (rows, cols) in [(24, 80), (5, 13)] {
            let mut d = Differential::new(rows, cols);
            d.feed(&data, &sizes);
            skipped += d.finish();
        }
    }
    assert!(skipped > 0, "the fast path engaged");
}

#[test]
fn resize_changes_reported_size() {
    let mut s = ScreenModel::new(TermSize { cols: 20, rows: 5 });
    s.resize(TermSize { cols: 33, rows: 7 });
    let t = s.text();
    assert_eq!((t.cols, t.rows), (33, 7));
}
