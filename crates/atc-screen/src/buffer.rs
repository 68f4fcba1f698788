//! [`Buffer`]: one screen buffer with what a terminal keeps per buffer: the grid, the cursor,
//! the scroll region, the tab stops and the saved cursor. The main screen and the alternate
//! screen each have one, as in xterm.js, so a program's scroll region or tab stops on the
//! alternate screen are gone when it leaves.
//!
//! A resize follows xterm.js's `Buffer.resize` with `scrollback: 0`: rows go from below the
//! cursor first and then from the top, the main screen's text is rewrapped (`reflow.rs`),
//! and the region, the cursor and the tab stops follow.

use crate::cell::Cell;
use crate::charset::Charset;
use crate::grid::{Grid, Row};
use crate::reflow::{self, Lines};
use crate::style::Style;

/// Every eighth column is a tab stop in a fresh buffer.
const TAB_WIDTH: usize = 8;

/// What DECSC saves and DECRC restores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SavedCursor {
    /// Column.
    pub x: u16,
    /// Row. It can be below the screen after a resize made it shorter (xterm.js keeps it,
    /// and DECRC clamps it), so a taller screen gets it back.
    pub y: u16,
    /// The pen.
    pub style: Style,
    /// The character set in effect (GL), not the designations.
    pub charset: Charset,
}

/// A screen buffer.
#[derive(Clone, Debug)]
pub struct Buffer {
    /// The cells.
    pub grid: Grid,
    /// Cursor column, 0..=cols: `cols` is a pending wrap, the cursor after the last column.
    pub x: u16,
    /// Cursor row.
    pub y: u16,
    /// Scroll region's first row.
    pub top: u16,
    /// Scroll region's last row.
    pub bottom: u16,
    /// Tab stops, one flag a column. It can run past the right margin: a narrower resize keeps
    /// the stops beyond it, as xterm.js does, for a wider one to find again.
    pub tabs: Vec<bool>,
    /// DECSC's.
    pub saved: SavedCursor,
}

impl Buffer {
    /// A blank buffer filled with `fill`.
    pub fn new(cols: u16, rows: u16, fill: Cell) -> Buffer {
        Buffer {
            grid: Grid::new(cols, rows, fill),
            x: 0,
            y: 0,
            top: 0,
            bottom: rows.saturating_sub(1),
            tabs: default_tabs(usize::from(cols)),
            saved: SavedCursor::default(),
        }
    }

    /// The tab stops within the screen.
    pub fn stops(&self) -> &[bool] {
        let cols = usize::from(self.grid.cols()).min(self.tabs.len());
        &self.tabs[..cols]
    }

    /// The next tab stop right of the cursor, or the last column.
    pub fn next_stop(&self) -> u16 {
        let cols = usize::from(self.grid.cols());
        let mut x = usize::from(self.x) + 1;
        while x < cols && !self.tabs.get(x).copied().unwrap_or(false) {
            x += 1;
        }
        x.min(cols.saturating_sub(1)) as u16
    }

    /// The previous tab stop left of the cursor, or the first column.
    pub fn prev_stop(&self) -> u16 {
        let cols = usize::from(self.grid.cols());
        let mut x = usize::from(self.x);
        while x > 0 {
            x -= 1;
            if x == 0 || self.tabs.get(x).copied().unwrap_or(false) {
                break;
            }
        }
        x.min(cols.saturating_sub(1)) as u16
    }

    /// Whether the tab stops are a fresh buffer's.
    pub fn default_tabs(&self) -> bool {
        let stops = self.stops();
        stops == default_tabs(stops.len())
    }

    /// Follows a size change to `cols`×`rows` (already known to differ from the current one).
    /// `reflow` rewraps the text, which xterm.js does for the main screen only. Blanks that
    /// come in take `fill` (xterm.js's default-style null cell).
    pub fn resize(&mut self, cols: u16, rows: u16, reflow: bool, fill: Cell) {
        let (old_cols, new_cols) = (usize::from(self.grid.cols()), usize::from(cols));
        let old_rows = self.grid.rows().len();
        let new_rows = usize::from(rows).max(1);
        let mut lines = Lines {
            rows: self.grid.take_rows(),
            ybase: 0,
            y: usize::from(self.y),
            saved_y: usize::from(self.saved.y),
        };
        // Rows widen first, so rows added below and the reflow work at the new width; they
        // narrow only after the reflow, which needs what the new edge would cut.
        if new_cols > old_cols {
            for row in &mut lines.rows {
                row.cells.resize(new_cols, fill);
            }
        }
        if new_rows > old_rows {
            lines.rows.resize_with(new_rows, || Row::blank(cols, fill));
        } else {
            // Blank rows below the cursor go first; then the viewport slides down over the
            // cursor's row, and what is above it is trimmed (there is no scrollback).
            for _ in new_rows..old_rows {
                if lines.rows.len() > new_rows + lines.ybase {
                    if lines.rows.len() > lines.ybase + lines.y + 1 {
                        lines.rows.pop();
                    } else {
                        lines.ybase += 1;
                    }
                }
            }
            let excess = lines.rows.len().saturating_sub(new_rows);
            lines.rows.drain(..excess);
            lines.ybase = lines.ybase.saturating_sub(excess);
            lines.saved_y = lines.saved_y.saturating_sub(excess);
        }
        // A pending wrap is lost: the cursor lands on the last column.
        self.x = self.x.min(cols.saturating_sub(1));
        lines.y = lines.y.min(new_rows - 1);
        self.saved.x = self.saved.x.min(cols.saturating_sub(1));
        if reflow {
            reflow::reflow(&mut lines, old_cols, new_cols, new_rows);
        }
        let screen = viewport(lines.rows, lines.ybase, new_rows, || Row::blank(cols, fill));
        self.grid.set_rows(screen, cols, fill);
        self.y = lines.y.min(new_rows - 1) as u16;
        // DECRC takes xterm.js's `ybase` off the row it saved.
        let saved_y = lines.saved_y.saturating_sub(lines.ybase);
        self.saved.y = u16::try_from(saved_y).unwrap_or(u16::MAX);
        self.top = 0;
        self.bottom = rows.saturating_sub(1);
        self.extend_tabs(new_cols);
    }

    /// xterm.js's `setupTabStops(cols)` after a resize: stops every eighth column again from
    /// the last stop within the screen (or from the new edge if a stop is there), keeping the
    /// others, even the ones past the edge and ones set off the eight-column grid.
    fn extend_tabs(&mut self, cols: usize) {
        if self.tabs.len() < cols {
            self.tabs.resize(cols, false);
        }
        let from = match self.tabs.get(cols).copied().unwrap_or(false) {
            true => cols,
            false => (0..cols).rev().find(|&x| self.tabs[x]).unwrap_or(0),
        };
        for x in (from..cols).step_by(TAB_WIDTH) {
            self.tabs[x] = true;
        }
    }
}

/// The `height` rows the screen shows of `rows` from `ybase` down. Past the end it shows what
/// xterm.js's circular list reads there: with the list full, its top rows again (only a
/// narrower reflow that slid the viewport, see `reflow.rs`, gets there).
fn viewport(rows: Vec<Row>, ybase: usize, height: usize, blank: impl Fn() -> Row) -> Vec<Row> {
    let full = rows.len() >= height;
    (ybase..ybase + height)
        .map(|i| match rows.get(i) {
            Some(row) => row.clone(),
            None if full => rows.get(i - rows.len()).cloned().unwrap_or_else(&blank),
            None => blank(),
        })
        .collect()
}

/// A fresh buffer's tab stops: every eighth column from the first.
fn default_tabs(cols: usize) -> Vec<bool> {
    (0..cols).map(|x| x % TAB_WIDTH == 0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tabs_stop_every_eighth_column_and_at_the_margins() {
        let mut buf = Buffer::new(20, 2, Cell::blank(0));
        assert_eq!(buf.next_stop(), 8);
        buf.x = 8;
        assert_eq!(buf.next_stop(), 16);
        buf.x = 16;
        assert_eq!(buf.next_stop(), 19);
        assert_eq!(buf.prev_stop(), 8);
        buf.x = 3;
        assert_eq!(buf.prev_stop(), 0);
        buf.tabs[5] = true;
        assert_eq!(buf.next_stop(), 5);
        assert!(!buf.default_tabs());
    }
}
