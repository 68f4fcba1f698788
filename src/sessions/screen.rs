//! The screen model: a headless terminal emulator (vt100) fed every byte of a session's
//! output, attached or not. It answers `GET .../screen` and produces the repaint a client gets
//! on a fresh attach or after a desync, instead of a history dump.
//!
//! vt100 was picked over avt by measurement (see README, "Screen model"). Scrollback is off:
//! a repaint needs only the visible screen, and every row kept costs memory in each of
//! thousands of sessions. With scrollback off, text that scrolls off within a chunk need not
//! be printed at all: the [`FastPath`] in front of the parser hands vt100 line feeds in its
//! place, which leaves vt100's screen exactly as the text would have.
//!
//! The repaint carries the modes a program set that change what the terminal sends it, so a
//! client attaching to a full-screen agent with mouse tracking on gets its clicks and wheel
//! turns to the agent: vt100 keeps the alternate screen, keypad and cursor-key modes,
//! bracketed paste, mouse tracking and its encoding, cursor visibility and style; the modes
//! vt100 does not keep (focus events, colour-scheme reports) are kept beside it in
//! [`TerminalModes`], fed by vt100's own parser. The repaint states every one of them, set or
//! reset: the terminal it lands on may have one set from before (a client that reattaches, or
//! one repainted after falling behind while the program turned a mode off), and a mode left
//! on would have the terminal send the program reports it no longer reads.

use atc_protocol::TermSize;

use super::screen_fast_path::FastPath;
use super::terminal_modes::TerminalModes;

/// One session's emulated terminal.
pub struct ScreenModel {
    /// The modes vt100 does not keep ride along as its callbacks.
    parser: vt100::Parser<TerminalModes>,
    /// Sees every byte before the parser does, in the same order.
    fast_path: FastPath,
    /// The last chunk ended in ESC: a `c` first in the next is a full reset.
    ends_in_escape: bool,
}

/// The visible screen as text, for `GET .../screen`.
#[derive(Debug, serde::Serialize)]
pub struct ScreenText {
    /// Rows joined by `\n`, trailing blanks trimmed.
    pub text: String,
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
    /// Cursor position, zero-based.
    pub cursor: Cursor,
}

/// A cursor position.
#[derive(Debug, serde::Serialize)]
pub struct Cursor {
    /// Zero-based row.
    pub row: u16,
    /// Zero-based column.
    pub col: u16,
}

impl ScreenModel {
    /// A blank screen of `size`.
    pub fn new(size: TermSize) -> ScreenModel {
        ScreenModel::with_fast_path(size, FastPath::new())
    }

    fn with_fast_path(size: TermSize, fast_path: FastPath) -> ScreenModel {
        ScreenModel {
            parser: new_parser(size.rows, size.cols),
            fast_path,
            ends_in_escape: false,
        }
    }

    /// Feeds output bytes.
    pub fn process(&mut self, bytes: &[u8]) {
        // vt100 runs a full reset (RIS) without telling its callbacks: the modes it does not
        // keep are reset here, right after the parser has run it. `ESC c` is a RIS in every
        // state of vte's parser (ESC leaves any sequence or string), so the pair of bytes is
        // enough to find one.
        let mut rest = bytes;
        if self.ends_in_escape && rest.first() == Some(&b'c') {
            self.feed(&rest[..1]);
            self.parser.callbacks_mut().reset();
            rest = &rest[1..];
        }
        while let Some(at) = memchr::memmem::find(rest, b"\x1bc") {
            let (before, after) = rest.split_at(at + 2);
            self.feed(before);
            self.parser.callbacks_mut().reset();
            rest = after;
        }
        self.feed(rest);
        if let Some(&last) = bytes.last() {
            self.ends_in_escape = last == 0x1b;
        }
    }

    /// Feeds bytes through the fast path.
    fn feed(&mut self, bytes: &[u8]) {
        let (rows, cols) = self.parser.screen().size();
        self.fast_path
            .process(bytes, rows.get(), cols.get(), &mut self.parser);
    }

    /// Bytes of output text the fast path kept from the parser, for measurement.
    pub fn fast_path_skipped(&self) -> u64 {
        self.fast_path.skipped()
    }

    /// Follows a terminal size change.
    pub fn resize(&mut self, size: TermSize) {
        let (old_rows, _) = self.parser.screen().size();
        self.parser.set_size(cells(size.rows), cells(size.cols));
        self.fast_path
            .resized(old_rows.get(), cells(size.rows).get());
    }

    /// Bytes that, written to a terminal of the same size, reproduce this screen: reset and
    /// clear, the contents with attributes, the cursor and the input modes, each stated set
    /// or reset.
    pub fn repaint(&self) -> Vec<u8> {
        repaint_of(self.parser.screen(), self.parser.callbacks())
    }

    /// Whether the program asked for bracketed paste (DEC mode 2004).
    pub fn bracketed_paste(&self) -> bool {
        self.parser.screen().bracketed_paste()
    }

    /// The visible text and cursor.
    pub fn text(&self) -> ScreenText {
        let screen = self.parser.screen();
        let (rows, cols) = screen.size();
        let (row, col) = screen.cursor_position();
        let lines: Vec<String> = screen
            .rows(0, cols.get())
            .map(|r| r.trim_end().to_string())
            .collect();
        ScreenText {
            text: lines.join("\n").trim_end_matches('\n').to_string(),
            cols: cols.get(),
            rows: rows.get(),
            cursor: Cursor { row, col },
        }
    }
}

/// What [`ScreenModel::repaint`] sends for `screen` and the `modes` vt100 does not keep.
fn repaint_of(screen: &vt100::Screen, modes: &TerminalModes) -> Vec<u8> {
    // vt100's state does not carry which screen buffer is active; say it first, so a
    // client that reattaches while a full-screen program runs returns to the main screen
    // when that program exits.
    let mut out = if screen.alternate_screen() {
        b"\x1b[?1049h".to_vec()
    } else {
        b"\x1b[?1049l".to_vec()
    };
    out.extend_from_slice(b"\x1b[0m\x1b[2J\x1b[H");
    // Cursor visibility, the cells, the cursor and the current attributes.
    out.extend_from_slice(screen.contents_formatted().as_bytes());
    write_input_modes(screen, &mut out);
    modes.write_formatted(&mut out);
    out
}

/// Appends the input modes vt100 keeps, each set or reset. vt100's own
/// `input_mode_formatted` writes mouse tracking, its encoding and the cursor style only when
/// they differ from the default, which leaves a terminal's leftover ones on.
fn write_input_modes(screen: &vt100::Screen, out: &mut Vec<u8>) {
    out.extend_from_slice(match screen.application_keypad() {
        true => b"\x1b=",
        false => b"\x1b>",
    });
    out.extend_from_slice(match screen.application_cursor() {
        true => b"\x1b[?1h",
        false => b"\x1b[?1l",
    });
    out.extend_from_slice(match screen.bracketed_paste() {
        true => b"\x1b[?2004h",
        false => b"\x1b[?2004l",
    });
    // Mouse tracking is one setting in xterm, xterm.js and vt100 (the last mode set wins,
    // and in xterm and xterm.js resetting any of them turns tracking off): all off, then
    // the one in effect.
    out.extend_from_slice(b"\x1b[?9l\x1b[?1000l\x1b[?1002l\x1b[?1003l");
    out.extend_from_slice(match screen.mouse_protocol_mode() {
        vt100::MouseProtocolMode::None => b"".as_slice(),
        vt100::MouseProtocolMode::Press => b"\x1b[?9h",
        vt100::MouseProtocolMode::PressRelease => b"\x1b[?1000h",
        vt100::MouseProtocolMode::ButtonMotion => b"\x1b[?1002h",
        vt100::MouseProtocolMode::AnyMotion => b"\x1b[?1003h",
    });
    // The encoding likewise.
    out.extend_from_slice(b"\x1b[?1005l\x1b[?1006l");
    out.extend_from_slice(match screen.mouse_protocol_encoding() {
        vt100::MouseProtocolEncoding::Default => b"".as_slice(),
        vt100::MouseProtocolEncoding::Utf8 => b"\x1b[?1005h",
        vt100::MouseProtocolEncoding::Sgr => b"\x1b[?1006h",
    });
    let style = match screen.cursor_style() {
        vt100::CursorStyle::Default => 0,
        vt100::CursorStyle::BlinkBlock => 1,
        vt100::CursorStyle::SteadyBlock => 2,
        vt100::CursorStyle::BlinkUnderline => 3,
        vt100::CursorStyle::SteadyUnderline => 4,
        vt100::CursorStyle::BlinkVerticalBar => 5,
        vt100::CursorStyle::SteadyVerticalBar => 6,
    };
    out.extend_from_slice(format!("\x1b[{style} q").as_bytes());
}

/// A parser of a `rows`×`cols` screen, with no scrollback, following [`TerminalModes`].
fn new_parser(rows: u16, cols: u16) -> vt100::Parser<TerminalModes> {
    vt100::Parser::new_with_callbacks(cells(rows), cells(cols), 0, TerminalModes::default())
}

/// A dimension as vt100 wants it; sizes are validated to 1..=4096 before they get here.
fn cells(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_cursor_follow_output() {
        let mut s = ScreenModel::new(TermSize { cols: 20, rows: 5 });
        s.process(b"hello\r\nworld");
        let t = s.text();
        assert_eq!(t.text, "hello\nworld");
        assert_eq!((t.cursor.row, t.cursor.col), (1, 5));
    }

    #[test]
    fn repaint_reproduces_the_screen() {
        let mut s = ScreenModel::new(TermSize { cols: 20, rows: 5 });
        s.process(b"\x1b[31mred\x1b[0m plain\r\nnext");
        let mut copy = ScreenModel::new(TermSize { cols: 20, rows: 5 });
        copy.process(b"garbage that the repaint must clear");
        copy.process(&s.repaint());
        assert_eq!(copy.text().text, s.text().text);
        assert_eq!(copy.text().cursor.col, s.text().cursor.col);
    }

    #[test]
    fn repaint_says_which_screen_buffer_is_active() {
        let mut s = ScreenModel::new(TermSize { cols: 20, rows: 5 });
        assert!(s.repaint().starts_with(b"\x1b[?1049l"));
        s.process(b"\x1b[?1049hfull screen");
        assert!(s.repaint().starts_with(b"\x1b[?1049h"));
        let mut copy = ScreenModel::new(TermSize { cols: 20, rows: 5 });
        copy.process(&s.repaint());
        assert!(copy.parser.screen().alternate_screen());
        assert_eq!(copy.text().text, "full screen");
    }

    use crate::sessions::terminal_modes::{PrivateMode, Setting};

    /// Every mode a repaint carries, as the model holds them.
    fn modes_of(s: &ScreenModel) -> String {
        let screen = s.parser.screen();
        format!(
            "alternate {} keypad {} cursor keys {} hidden {} paste {} mouse {:?} {:?} \
             style {:?} {:?}",
            screen.alternate_screen(),
            screen.application_keypad(),
            screen.application_cursor(),
            screen.hide_cursor(),
            screen.bracketed_paste(),
            screen.mouse_protocol_mode(),
            screen.mouse_protocol_encoding(),
            screen.cursor_style(),
            s.parser.callbacks(),
        )
    }

    const SIZE: TermSize = TermSize { cols: 20, rows: 5 };

    /// What a fresh client's terminal holds once it has taken `repaint`.
    fn fresh_client_after(repaint: &[u8]) -> ScreenModel {
        let mut client = ScreenModel::new(SIZE);
        client.process(repaint);
        client
    }

    /// Each mode with what sets it and what resets it: the repaint says the same.
    const MODES: &[(&str, &[u8], &[u8])] = &[
        ("alternate screen", b"\x1b[?1049h", b"\x1b[?1049l"),
        ("application keypad", b"\x1b=", b"\x1b>"),
        ("application cursor keys", b"\x1b[?1h", b"\x1b[?1l"),
        ("hidden cursor", b"\x1b[?25l", b"\x1b[?25h"),
        ("bracketed paste", b"\x1b[?2004h", b"\x1b[?2004l"),
        ("mouse press", b"\x1b[?9h", b"\x1b[?9l"),
        ("mouse press and release", b"\x1b[?1000h", b"\x1b[?1000l"),
        ("mouse button motion", b"\x1b[?1002h", b"\x1b[?1002l"),
        ("mouse any motion", b"\x1b[?1003h", b"\x1b[?1003l"),
        ("mouse UTF-8 encoding", b"\x1b[?1005h", b"\x1b[?1005l"),
        ("mouse SGR encoding", b"\x1b[?1006h", b"\x1b[?1006l"),
        ("cursor style", b"\x1b[5 q", b"\x1b[0 q"),
        ("focus events", b"\x1b[?1004h", b"\x1b[?1004l"),
        ("colour-scheme reports", b"\x1b[?2031h", b"\x1b[?2031l"),
    ];

    /// Everything in [`MODES`] set: a client's terminal left that way by an earlier attach.
    fn every_mode_set() -> ScreenModel {
        let mut dirty = ScreenModel::new(SIZE);
        for (_, set, ..) in MODES {
            dirty.process(set);
        }
        dirty
    }

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        memchr::memmem::find(haystack, needle).is_some()
    }

    #[test]
    fn each_mode_set_then_reset_is_what_the_repaint_gives_a_client() {
        let blank = modes_of(&ScreenModel::new(SIZE));
        for &(name, set, reset) in MODES {
            let mut s = ScreenModel::new(SIZE);
            s.process(b"some text");
            s.process(set);
            assert_ne!(modes_of(&s), blank, "{name} set changes the model");
            let repaint = s.repaint();
            assert!(contains(&repaint, set), "{name} set in the repaint");
            assert_eq!(
                modes_of(&fresh_client_after(&repaint)),
                modes_of(&s),
                "{name}"
            );

            s.process(reset);
            assert_eq!(modes_of(&s), blank, "{name} reset");
            let repaint = s.repaint();
            assert!(contains(&repaint, reset), "{name} reset in the repaint");
            assert!(!contains(&repaint, set), "{name} not set in the repaint");
            // A terminal that still has every mode set from before loses this one.
            let mut dirty = every_mode_set();
            dirty.process(&repaint);
            assert_eq!(modes_of(&dirty), blank, "{name} on a dirty terminal");
            assert_eq!(dirty.text().text, "some text", "{name}");
        }
    }

    /// What Claude Code 2.1 sets when it starts.
    const CLAUDE_MODES: &[u8] =
        b"\x1b[?1049h\x1b[?1000h\x1b[?1002h\x1b[?1003h\x1b[?1006h\x1b[?1004h\x1b[?2004h\x1b[?2031h";

    #[test]
    fn the_modes_claude_code_sets_all_reach_a_fresh_client() {
        let mut s = ScreenModel::new(SIZE);
        s.process(CLAUDE_MODES);
        s.process(b"> prompt");
        let screen = s.parser.screen();
        assert!(screen.alternate_screen() && screen.bracketed_paste());
        // The last of the three tracking modes set is the one in effect.
        assert_eq!(
            screen.mouse_protocol_mode(),
            vt100::MouseProtocolMode::AnyMotion
        );
        assert_eq!(
            screen.mouse_protocol_encoding(),
            vt100::MouseProtocolEncoding::Sgr
        );
        for mode in PrivateMode::ALL {
            assert_eq!(s.parser.callbacks().get(mode), Setting::Set, "{mode:?}");
        }
        let repaint = s.repaint();
        for says in [
            b"\x1b[?1049h".as_slice(),
            b"\x1b[?1003h",
            b"\x1b[?1006h",
            b"\x1b[?1004h",
            b"\x1b[?2004h",
            b"\x1b[?2031h",
        ] {
            assert!(contains(&repaint, says), "{}", says.escape_ascii());
        }
        let client = fresh_client_after(&repaint);
        assert_eq!(modes_of(&client), modes_of(&s));
        assert_eq!(client.text().text, "> prompt");
    }

    #[test]
    fn a_mode_split_across_reads_counts() {
        let mut whole = ScreenModel::new(SIZE);
        whole.process(CLAUDE_MODES);
        for cut in 1..CLAUDE_MODES.len() {
            let mut s = ScreenModel::new(SIZE);
            s.process(&CLAUDE_MODES[..cut]);
            s.process(&CLAUDE_MODES[cut..]);
            assert_eq!(modes_of(&s), modes_of(&whole), "cut at {cut}");
        }
        let mut bytewise = ScreenModel::new(SIZE);
        for b in CLAUDE_MODES {
            bytewise.process(std::slice::from_ref(b));
        }
        assert_eq!(modes_of(&bytewise), modes_of(&whole));
    }

    #[test]
    fn a_mode_set_amid_a_flood_is_not_skipped() {
        // One chunk: text the fast path cuts, the modes, more text it cuts.
        let flood = flood_payload(64 * 1024);
        let mut data = flood.clone();
        data.extend_from_slice(CLAUDE_MODES);
        data.extend_from_slice(&flood);
        data.extend_from_slice(b"\x1b[?1004l");
        data.extend_from_slice(&flood);
        let mut d = Differential::new(24, 80);
        d.chunk(&data);
        assert_eq!(
            d.model
                .parser
                .callbacks()
                .get(PrivateMode::ColourSchemeReports),
            Setting::Set
        );
        assert_eq!(
            d.model.parser.callbacks().get(PrivateMode::FocusEvents),
            Setting::Reset
        );
        assert!(d.finish() > 0, "the fast path engaged");
    }

    #[test]
    fn a_full_reset_resets_every_mode() {
        let blank = modes_of(&ScreenModel::new(SIZE));
        for (before, after) in [
            (b"\x1bc".as_slice(), b"".as_slice()),
            (b"\x1b", b"c"),
            (b"text \x1b\x1b", b"c"),
        ] {
            let mut s = every_mode_set();
            s.process(before);
            s.process(after);
            assert_eq!(modes_of(&s), blank, "{}", before.escape_ascii());
        }
        // A mode set after the reset, in the same read, stays set.
        let mut s = every_mode_set();
        s.process(b"\x1bc\x1b[?1004h");
        assert_eq!(
            s.parser.callbacks().get(PrivateMode::FocusEvents),
            Setting::Set
        );
        // An ESC that ended an earlier read does not make a later `c` a reset.
        let mut s = every_mode_set();
        s.process(b"\x1b");
        s.process(b"[?25l");
        s.process(b"c");
        assert_eq!(
            s.parser.callbacks().get(PrivateMode::FocusEvents),
            Setting::Set
        );
    }

    /// A plain vt100 parser and a [`ScreenModel`] fed the same bytes and sizes; every check
    /// says they cannot be told apart.
    struct Differential {
        plain: vt100::Parser<TerminalModes>,
        model: ScreenModel,
        chunks: usize,
        last_byte: Option<u8>,
    }

    impl Differential {
        fn new(rows: u16, cols: u16) -> Differential {
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

        fn chunk(&mut self, bytes: &[u8]) {
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
        fn finish(mut self) -> u64 {
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
    fn flood_payload(bytes: usize) -> Vec<u8> {
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
}
