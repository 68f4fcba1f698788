//! [`Buffer`]: one screen buffer with what a terminal keeps per buffer: the grid, the cursor,
//! the scroll region, the tab stops and the saved cursor. The main screen and the alternate
//! screen each have one, as in xterm.js, so a program's scroll region or tab stops on the
//! alternate screen are gone when it leaves.

use crate::cell::Cell;
use crate::charset::Charset;
use crate::grid::Grid;
use crate::style::Style;

/// Every eighth column is a tab stop in a fresh buffer.
const TAB_WIDTH: usize = 8;

/// What DECSC saves and DECRC restores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SavedCursor {
    /// Column.
    pub x: u16,
    /// Row.
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
    /// Tab stops, one flag a column.
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

    /// The next tab stop right of the cursor, or the last column.
    pub fn next_stop(&self) -> u16 {
        let cols = self.tabs.len();
        let mut x = usize::from(self.x) + 1;
        while x < cols && !self.tabs[x] {
            x += 1;
        }
        x.min(cols.saturating_sub(1)) as u16
    }

    /// The previous tab stop left of the cursor, or the first column.
    pub fn prev_stop(&self) -> u16 {
        let cols = self.tabs.len();
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
        self.tabs == default_tabs(self.tabs.len())
    }

    /// Follows a size change.
    pub fn resize(&mut self, cols: u16, rows: u16, fill: Cell) {
        let old_rows = self.grid.rows().len();
        let rows_n = usize::from(rows);
        // Rows leave from the top when the cursor would fall off the bottom.
        let drop_top = match usize::from(self.y) + 1 > rows_n {
            true => usize::from(self.y) + 1 - rows_n,
            false => 0,
        };
        self.grid.resize(cols, rows, drop_top, fill);
        self.y = (usize::from(self.y) - drop_top.min(old_rows)) as u16;
        self.y = self.y.min(rows.saturating_sub(1));
        self.x = self.x.min(cols);
        self.top = 0;
        self.bottom = rows.saturating_sub(1);
        let old_cols = self.tabs.len();
        self.tabs.resize(usize::from(cols), false);
        for x in (0..usize::from(cols)).filter(|x| x % TAB_WIDTH == 0 && *x >= old_cols) {
            self.tabs[x] = true;
        }
        self.saved.x = self.saved.x.min(cols.saturating_sub(1));
        self.saved.y = self.saved.y.min(rows.saturating_sub(1));
    }
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
