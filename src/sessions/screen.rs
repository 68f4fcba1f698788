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

    use super::differential_tests::{flood_payload, Differential};
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
}

// The fast path's proof: a plain vt100 and a screen model, fed alike, cannot be told apart.
#[cfg(test)]
#[path = "screen_differential_tests.rs"]
mod differential_tests;
