//! The screen model: a headless terminal emulator fed a session's output, which answers what
//! the screen shows and paints it again for a client that attaches.
//!
//! Built for agents' output at the floor's cost: cells are eight bytes (a 120×40 screen's grid
//! is 38 KiB; the alternate screen's exists only while it is active), styles and combining
//! clusters are interned per screen, and text is written a run at a time. It follows
//! xterm.js, the terminal of atc's page, down to its quirks, so that the repaint lands in
//! xterm.js exactly as every byte did; the fidelity tests (`tests/fidelity/`) hold it to that
//! against xterm.js itself.
//!
//! Layers, bottom up: [`style`] and [`cell`] (what a cell holds), [`table`] (interning),
//! [`grid`] and [`buffer`] (rows and per-buffer state; `reflow` rewraps the main screen's
//! rows on a resize), [`parser`] (bytes to actions),
//! [`emulator`] and `perform` (what the actions do), [`repaint`] (state to bytes).

pub mod buffer;
pub mod cell;
pub mod charset;
pub mod emulator;
pub mod grid;
mod keyed_hash;
pub mod modes;
pub mod parser;
mod pen;
mod pen_cache;
mod perform;
mod reflow;
pub mod repaint;
mod sgr;
pub mod style;
pub mod table;

use emulator::Emulator;
use parser::Parser;

pub use modes::{Modes, MouseEncoding, MouseTracking};

/// A headless terminal.
#[derive(Debug)]
pub struct Terminal {
    parser: Parser,
    emulator: Emulator,
}

/// The visible screen as text and the cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenText {
    /// Each row's text, trailing blanks trimmed.
    pub rows: Vec<String>,
    /// Cursor column, zero-based (at most the last column).
    pub cursor_col: u16,
    /// Cursor row, zero-based.
    pub cursor_row: u16,
}

impl Terminal {
    /// A blank terminal of `cols`×`rows` (each at least 1).
    pub fn new(cols: u16, rows: u16) -> Terminal {
        Terminal {
            parser: Parser::default(),
            emulator: Emulator::new(cols, rows),
        }
    }

    /// Feeds output bytes.
    pub fn process(&mut self, bytes: &[u8]) {
        self.parser.advance(&mut self.emulator, bytes);
    }

    /// Follows a size change.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.emulator.resize(cols, rows);
    }

    /// Columns and rows.
    pub fn size(&self) -> (u16, u16) {
        (self.emulator.cols, self.emulator.rows)
    }

    /// Bytes that, written to a terminal of the same size in any state, reproduce this one.
    pub fn repaint(&self) -> Vec<u8> {
        repaint::repaint(&self.emulator)
    }

    /// The modes the program set.
    pub fn modes(&self) -> &Modes {
        &self.emulator.modes
    }

    /// Whether the alternate screen is active.
    pub fn alternate_screen(&self) -> bool {
        self.emulator.alt.is_some()
    }

    /// The window title the program set.
    pub fn title(&self) -> &str {
        &self.emulator.title
    }

    /// The visible text and the cursor.
    pub fn text(&self) -> ScreenText {
        let buf = self.emulator.buf();
        let rows = buf
            .grid
            .rows()
            .iter()
            .map(|row| {
                let text: String = row
                    .cells()
                    .iter()
                    .filter(|c| !c.is_spacer())
                    .map(|c| match c.has_content() {
                        true => repaint::cell_text(&self.emulator.table, c),
                        false => " ".to_string(),
                    })
                    .collect();
                text.trim_end().to_string()
            })
            .collect();
        ScreenText {
            rows,
            cursor_col: buf.x.min(self.emulator.cols - 1),
            cursor_row: buf.y,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_keeps_a_bounded_number_of_combining_marks() {
        let mut t = Terminal::new(10, 2);
        let mut zalgo = String::from("e");
        zalgo.extend(std::iter::repeat_n('\u{301}', 10_000));
        t.process(zalgo.as_bytes());
        let row = &t.text().rows[0];
        assert!(
            row.len() <= emulator::MAX_CLUSTER_BYTES,
            "{} bytes",
            row.len()
        );
        assert!(row.starts_with("e\u{301}"));
        assert_eq!(t.text().cursor_col, 1);
    }
}
