//! The screen model: a headless terminal emulator (vt100) fed every byte of a session's
//! output, attached or not. It answers `GET .../screen` and produces the repaint a client gets
//! on a fresh attach or after a desync, instead of a history dump.
//!
//! vt100 was picked over avt by measurement (see README, "Screen model"). Scrollback is off:
//! a repaint needs only the visible screen, and every row kept costs memory in each of
//! thousands of sessions.

use atc_protocol::TermSize;

/// One session's emulated terminal.
pub struct ScreenModel {
    parser: vt100::Parser,
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
            parser: vt100::Parser::new(cells(size.rows), cells(size.cols), 0),
        }
    }

    /// Feeds output bytes.
    pub fn process(&mut self, bytes: &[u8]) {
        self.parser.process(bytes);
    }

    /// Follows a terminal size change.
    pub fn resize(&mut self, size: TermSize) {
        self.parser.set_size(cells(size.rows), cells(size.cols));
    }

    /// Bytes that, written to a terminal of the same size, reproduce this screen: reset and
    /// clear, the contents with attributes, the cursor and the input modes.
    pub fn repaint(&self) -> Vec<u8> {
        let screen = self.parser.screen();
        // vt100's state does not carry which screen buffer is active; say it first, so a
        // client that reattaches while a full-screen program runs returns to the main screen
        // when that program exits.
        let mut out = if screen.alternate_screen() {
            b"\x1b[?1049h".to_vec()
        } else {
            b"\x1b[?1049l".to_vec()
        };
        out.extend_from_slice(b"\x1b[0m\x1b[2J\x1b[H");
        out.extend_from_slice(screen.state_formatted().as_bytes());
        out
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

    #[test]
    fn resize_changes_reported_size() {
        let mut s = ScreenModel::new(TermSize { cols: 20, rows: 5 });
        s.resize(TermSize { cols: 33, rows: 7 });
        let t = s.text();
        assert_eq!((t.cols, t.rows), (33, 7));
    }
}
