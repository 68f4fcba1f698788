//! The screen model: a headless terminal emulator (`atc-screen`) fed every byte of a
//! session's output, attached or not. It answers `GET .../screen` and produces the repaint a
//! client gets on a fresh attach or after a desync, instead of a history dump.
//!
//! The emulator is the workspace's own (crates/atc-screen): it follows xterm.js, the page's
//! terminal, exactly, so a repaint lands as every byte would have (README, "Screen model", and
//! the fidelity tests in crates/atc-screen/tests/fidelity). It keeps no scrollback: a repaint
//! needs only the visible screen, and every row kept costs memory in each of thousands of
//! sessions. The repaint states every mode a client needs, set or reset (the terminal it
//! lands on may have one set from before), the main screen under an alternate one, scroll
//! regions, tab stops, character sets and the pen.

use atc_protocol::TermSize;

/// One session's emulated terminal.
pub struct ScreenModel {
    terminal: atc_screen::Terminal,
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
        ScreenModel {
            terminal: atc_screen::Terminal::new(size.cols, size.rows),
        }
    }

    /// Feeds output bytes.
    pub fn process(&mut self, bytes: &[u8]) {
        self.terminal.process(bytes);
    }

    /// Follows a terminal size change.
    pub fn resize(&mut self, size: TermSize) {
        self.terminal.resize(size.cols, size.rows);
    }

    /// Bytes that, written to a terminal of the same size, reproduce this screen.
    pub fn repaint(&self) -> Vec<u8> {
        self.terminal.repaint()
    }

    /// Whether the program asked for bracketed paste (DEC mode 2004).
    pub fn bracketed_paste(&self) -> bool {
        self.terminal.modes().bracketed_paste
    }

    /// The visible text and cursor.
    pub fn text(&self) -> ScreenText {
        let (cols, rows) = self.terminal.size();
        let seen = self.terminal.text();
        ScreenText {
            text: seen.rows.join("\n").trim_end_matches('\n').to_string(),
            cols,
            rows,
            cursor: Cursor {
                row: seen.cursor_row,
                col: seen.cursor_col,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: TermSize = TermSize { cols: 20, rows: 5 };

    /// What a fresh client's terminal holds once it has taken `repaint`.
    fn fresh_client_after(repaint: &[u8]) -> ScreenModel {
        let mut client = ScreenModel::new(SIZE);
        client.process(b"garbage the repaint must clear\x1b[?1049h\x1b[?1000h\x1b[4h");
        client.process(repaint);
        client
    }

    #[test]
    fn text_and_cursor_follow_output() {
        let mut s = ScreenModel::new(SIZE);
        s.process(b"hello\r\nworld");
        let t = s.text();
        assert_eq!(t.text, "hello\nworld");
        assert_eq!((t.cursor.row, t.cursor.col), (1, 5));
    }

    #[test]
    fn repaint_reproduces_the_screen_and_the_screen_under_the_alternate_one() {
        let mut s = ScreenModel::new(SIZE);
        s.process(b"\x1b[31mred\x1b[0m plain\r\nnext\x1b[?1049h\x1b[Hfull screen");
        let mut client = fresh_client_after(&s.repaint());
        assert_eq!(client.text().text, "full screen");
        assert_eq!(client.repaint(), s.repaint());
        s.process(b"\x1b[?1049l");
        client.process(b"\x1b[?1049l");
        assert_eq!(client.text().text, "red plain\nnext");
        assert_eq!(client.repaint(), s.repaint());
    }

    /// Each mode with what sets it and what resets it: a client repainted has the model's.
    const MODES: &[(&str, &[u8], &[u8])] = &[
        ("application keypad", b"\x1b=", b"\x1b>"),
        ("application cursor keys", b"\x1b[?1h", b"\x1b[?1l"),
        ("hidden cursor", b"\x1b[?25l", b"\x1b[?25h"),
        ("bracketed paste", b"\x1b[?2004h", b"\x1b[?2004l"),
        ("mouse press", b"\x1b[?9h", b"\x1b[?9l"),
        ("mouse press and release", b"\x1b[?1000h", b"\x1b[?1000l"),
        ("mouse button motion", b"\x1b[?1002h", b"\x1b[?1002l"),
        ("mouse any motion", b"\x1b[?1003h", b"\x1b[?1003l"),
        ("mouse SGR encoding", b"\x1b[?1006h", b"\x1b[?1006l"),
        ("cursor style", b"\x1b[5 q", b"\x1b[0 q"),
        ("focus events", b"\x1b[?1004h", b"\x1b[?1004l"),
        ("colour-scheme reports", b"\x1b[?2031h", b"\x1b[?2031l"),
        ("insert mode", b"\x1b[4h", b"\x1b[4l"),
        ("autowrap off", b"\x1b[?7l", b"\x1b[?7h"),
        ("origin mode", b"\x1b[?6h", b"\x1b[?6l"),
    ];

    #[test]
    fn each_mode_set_then_reset_is_what_the_repaint_gives_a_client() {
        for (name, set, reset) in MODES {
            let mut s = ScreenModel::new(SIZE);
            s.process(set);
            let client = fresh_client_after(&s.repaint());
            assert_eq!(client.terminal.modes(), s.terminal.modes(), "{name} set");
            s.process(reset);
            let client = fresh_client_after(&s.repaint());
            assert_eq!(client.terminal.modes(), s.terminal.modes(), "{name} reset");
            assert_eq!(s.terminal.modes(), &atc_screen::Modes::default(), "{name}");
        }
    }

    #[test]
    fn the_modes_claude_code_sets_all_reach_a_fresh_client() {
        let mut s = ScreenModel::new(SIZE);
        s.process(b"\x1b[?1049h\x1b[?1003h\x1b[?1006h\x1b[?2004h\x1b[?10");
        s.process(b"04h\x1b[?2031h> ");
        assert!(s.bracketed_paste());
        let client = fresh_client_after(&s.repaint());
        assert_eq!(client.terminal.modes(), s.terminal.modes());
        assert!(client.terminal.alternate_screen());
        let modes = client.terminal.modes();
        assert_eq!(modes.mouse, atc_screen::MouseTracking::AnyMotion);
        assert_eq!(modes.mouse_encoding, atc_screen::MouseEncoding::Sgr);
        assert!(modes.focus_events && modes.colour_scheme_reports && modes.bracketed_paste);
    }

    #[test]
    fn a_full_reset_resets_every_mode() {
        let mut s = ScreenModel::new(SIZE);
        for (_, set, _) in MODES {
            s.process(set);
        }
        s.process(b"\x1b");
        s.process(b"c");
        assert_eq!(s.terminal.modes(), &atc_screen::Modes::default());
        assert_eq!(s.text().text, "");
    }
}
