//! [`Grid`]: the rows of one screen buffer (the main screen or the alternate one) and the
//! edits a terminal makes to them: scrolls within a region, erases, inserted and deleted
//! characters, resizes.
//!
//! Edits that cut a wide character in half blank both of its columns, as xterm.js does, so a
//! row never holds half of one. Every blank an edit leaves is in the style it is given: the
//! caller passes the pen's erase style (its background only).

use crate::cell::Cell;

/// One row of cells.
#[derive(Clone, Debug)]
pub struct Row {
    pub(crate) cells: Vec<Cell>,
    /// The row continues the one above it: the text autowrapped into it.
    pub(crate) wrapped: bool,
}

impl Row {
    pub(crate) fn blank(cols: u16, fill: Cell) -> Row {
        Row {
            cells: vec![fill; usize::from(cols)],
            wrapped: false,
        }
    }

    fn reset(&mut self, fill: Cell) {
        self.cells.fill(fill);
        self.wrapped = false;
    }

    /// The cells.
    pub fn cells(&self) -> &[Cell] {
        &self.cells
    }

    /// Whether the row's text autowrapped into it from the row above.
    pub fn wrapped(&self) -> bool {
        self.wrapped
    }

    /// Blanks the wide character just before `col`, whose spacer `col` is.
    fn split_wide_before(&mut self, col: usize, fill: Cell) {
        if col > 0 && col <= self.cells.len() && self.cells[col - 1].is_wide() {
            self.cells[col - 1] = fill;
        }
    }

    /// Blanks cells `from..to` (clamped), and the other half of a wide character cut at
    /// either end.
    pub fn erase(&mut self, from: usize, to: usize, fill: Cell) {
        let to = to.min(self.cells.len());
        if from >= to {
            return;
        }
        self.split_wide_before(from, fill);
        if to < self.cells.len() && self.cells[to - 1].is_wide() {
            self.cells[to] = fill;
        }
        self.cells[from..to].fill(fill);
    }

    /// Inserts `n` blanks at `col`, shifting the rest right; cells pushed past the end are lost.
    /// As in xterm.js, a wide character whose spacer is at `col` loses its first column only.
    pub fn insert(&mut self, col: usize, n: usize, fill: Cell) {
        let len = self.cells.len();
        if col >= len {
            return;
        }
        if col > 0 && self.cells[col - 1].is_wide() {
            self.cells[col - 1] = fill;
        }
        let n = n.min(len - col);
        self.cells.copy_within(col..len - n, col + n);
        self.cells[col..col + n].fill(fill);
        // A wide character whose spacer fell off the end.
        if self.cells[len - 1].is_wide() {
            self.cells[len - 1] = fill;
        }
    }

    /// Deletes `n` cells at `col`, shifting the rest left and filling the end with blanks.
    pub fn delete(&mut self, col: usize, n: usize, fill: Cell) {
        let len = self.cells.len();
        if col >= len {
            return;
        }
        let n = n.min(len - col);
        self.cells.copy_within(col + n..len, col);
        self.cells[len - n..].fill(fill);
        if col > 0 && self.cells[col - 1].is_wide() {
            self.cells[col - 1] = fill;
        }
        // A spacer shifted to where its wide character was deleted.
        if self.cells[col].is_spacer() {
            self.cells[col] = fill;
        }
    }
}

/// The rows of one screen buffer.
#[derive(Clone, Debug)]
pub struct Grid {
    rows: Vec<Row>,
    cols: u16,
}

impl Grid {
    /// A grid of `cols`×`rows` filled with `fill`.
    pub fn new(cols: u16, rows: u16, fill: Cell) -> Grid {
        Grid {
            rows: (0..rows).map(|_| Row::blank(cols, fill)).collect(),
            cols,
        }
    }

    /// Columns.
    pub fn cols(&self) -> u16 {
        self.cols
    }

    /// The rows, top first.
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// Row `y`, to edit.
    pub fn row_mut(&mut self, y: usize) -> &mut Row {
        &mut self.rows[y]
    }

    /// Every cell, to renumber styles.
    pub fn cells_mut(&mut self) -> impl Iterator<Item = &mut Cell> {
        self.rows.iter_mut().flat_map(|row| row.cells.iter_mut())
    }

    /// Scrolls rows `top..=bottom` up by `n`: the top `n` leave, blank rows enter at the bottom.
    pub fn scroll_up(&mut self, top: usize, bottom: usize, n: usize, fill: Cell) {
        let region = &mut self.rows[top..=bottom];
        let n = n.min(region.len());
        region.rotate_left(n);
        let len = region.len();
        for row in &mut region[len - n..] {
            row.reset(fill);
        }
    }

    /// Scrolls rows `top..=bottom` down by `n`: blank rows enter at the top.
    pub fn scroll_down(&mut self, top: usize, bottom: usize, n: usize, fill: Cell) {
        let region = &mut self.rows[top..=bottom];
        let n = n.min(region.len());
        region.rotate_right(n);
        for row in &mut region[..n] {
            row.reset(fill);
        }
    }

    /// Blanks rows `from..to`.
    pub fn erase_rows(&mut self, from: usize, to: usize, fill: Cell) {
        let to = to.min(self.rows.len());
        for row in &mut self.rows[from.min(to)..to] {
            row.reset(fill);
        }
    }

    /// Takes the rows out, for a resize to rebuild them.
    pub(crate) fn take_rows(&mut self) -> Vec<Row> {
        std::mem::take(&mut self.rows)
    }

    /// Puts rebuilt rows back, each cut or padded to `cols` (a wide character the edge would
    /// cut is blanked: half of one cannot be shown, nor printed back by a repaint).
    pub(crate) fn set_rows(&mut self, mut rows: Vec<Row>, cols: u16, fill: Cell) {
        for row in &mut rows {
            row.cells.resize(usize::from(cols), fill);
            if let Some(last) = row.cells.last_mut().filter(|cell| cell.is_wide()) {
                *last = fill;
            }
        }
        self.rows = rows;
        self.cols = cols;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(row: &Row) -> String {
        row.cells
            .iter()
            .map(|c| match (c.width, char::from_u32(c.content)) {
                (0, _) => '_',
                (_, Some('\0')) | (_, None) => '.',
                (_, Some(ch)) => ch,
            })
            .collect()
    }

    fn row_of(s: &str) -> Row {
        let mut cells = Vec::new();
        for ch in s.chars() {
            match ch {
                'W' => {
                    cells.push(Cell::char('W', 2, 0));
                    cells.push(Cell::spacer(0));
                }
                '.' => cells.push(Cell::blank(0)),
                c => cells.push(Cell::char(c, 1, 0)),
            }
        }
        Row {
            cells,
            wrapped: false,
        }
    }

    #[test]
    fn inserting_shifts_right_and_drops_a_wide_character_cut_at_the_end() {
        let mut row = row_of("abcdW");
        row.insert(1, 1, Cell::blank(0));
        assert_eq!(text(&row), "a.bcd.");
        // xterm.js blanks the first column and shifts the spacer.
        let mut row = row_of("aWbc");
        row.insert(2, 1, Cell::blank(0));
        assert_eq!(text(&row), "a.._b");
    }

    #[test]
    fn deleting_shifts_left_and_blanks_a_split_wide_character() {
        let mut row = row_of("abWcd");
        row.delete(0, 1, Cell::blank(0));
        assert_eq!(text(&row), "bW_cd.");
        let mut row = row_of("aWcd");
        row.delete(1, 1, Cell::blank(0));
        assert_eq!(text(&row), "a.cd.");
    }

    #[test]
    fn erasing_half_a_wide_character_erases_both_halves() {
        let mut row = row_of("aWb");
        row.erase(2, 3, Cell::blank(0));
        assert_eq!(text(&row), "a..b");
        let mut row = row_of("aWb");
        row.erase(0, 2, Cell::blank(0));
        assert_eq!(text(&row), "...b");
    }

    #[test]
    fn scrolling_a_region_leaves_the_rows_outside_it() {
        let mut grid = Grid::new(2, 4, Cell::blank(0));
        for (y, s) in ["aa", "bb", "cc", "dd"].iter().enumerate() {
            *grid.row_mut(y) = row_of(s);
        }
        grid.scroll_up(1, 2, 1, Cell::blank(0));
        let texts: Vec<String> = grid.rows().iter().map(text).collect();
        assert_eq!(texts, ["aa", "cc", "..", "dd"]);
        grid.scroll_down(0, 3, 2, Cell::blank(0));
        let texts: Vec<String> = grid.rows().iter().map(text).collect();
        assert_eq!(texts, ["..", "..", "aa", "cc"]);
    }
}
