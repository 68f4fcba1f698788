//! Reflow: what xterm.js does to the main screen's rows when the width changes. Rows that
//! continue the row above (their `wrapped` flag) form one logical line with it; on a wider
//! screen such a line is rejoined and the rows it no longer needs go, on a narrower one it is
//! rewrapped and gains rows, which push the screen up (with `scrollback: 0`, rows leave from
//! the top). The line holding the cursor is left alone (xterm.js's `reflowCursorLine` is off),
//! so a program redrawing it is not fought.
//!
//! The steps, and the order they happen in, are xterm.js 6.0.0's (`Buffer._reflowLarger`,
//! `Buffer._reflowSmaller` and `BufferReflow.ts`), quirks included: the cursor moves up once
//! for every row a wider screen frees, wherever that row was; a narrower screen moves the
//! cursor down once for every row it adds while it can, then starts to slide the viewport
//! (`ybase`), which a screen without scrollback cannot really show. Cells are moved as
//! xterm.js moves them, so a wide character that would straddle the new edge goes to the next
//! row and leaves a blank behind.
//!
//! [`Lines`] is the buffer as that code sees it; `buffer.rs` does the rest of a resize (rows
//! added or taken away, the cursor kept on screen) around it.

use crate::cell::Cell;
use crate::grid::Row;

/// A screen buffer's rows during a resize, as xterm.js's `Buffer` holds them.
#[derive(Debug)]
pub(crate) struct Lines {
    /// Every row of the buffer, top first: the viewport is `rows[ybase..ybase + screen rows]`.
    pub rows: Vec<Row>,
    /// Rows above the viewport. Always 0 between resizes (there is no scrollback); only a
    /// narrower resize that adds more rows than fit below the cursor leaves it above 0.
    pub ybase: usize,
    /// The cursor's row in the viewport.
    pub y: usize,
    /// DECSC's row, counted from the top of `rows` as xterm.js counts it.
    pub saved_y: usize,
}

/// Rewraps every logical line but the cursor's at `new_cols`; the rows are `old_cols` wide
/// (a narrower screen) or already padded to `new_cols` (a wider one). `new_rows` is the
/// screen's new height, which with no scrollback is also the most rows the buffer keeps.
pub(crate) fn reflow(lines: &mut Lines, old_cols: usize, new_cols: usize, new_rows: usize) {
    match new_cols.cmp(&old_cols) {
        std::cmp::Ordering::Greater => wider(lines, old_cols, new_cols, new_rows),
        std::cmp::Ordering::Less => narrower(lines, old_cols, new_cols, new_rows),
        std::cmp::Ordering::Equal => {}
    }
}

/// What xterm.js puts where reflow leaves nothing: a blank in the default style.
fn null_cell() -> Cell {
    Cell::blank(crate::table::DEFAULT_STYLE)
}

fn blank_row(cols: usize, wrapped: bool) -> Row {
    Row {
        cells: vec![null_cell(); cols],
        wrapped,
    }
}

/// Where the row's text ends: just after its last printed cell (both columns of a wide one).
/// Blanks carrying only a background do not count, as in xterm.js.
fn trimmed_len(row: &Row) -> usize {
    row.cells
        .iter()
        .rposition(Cell::has_content)
        .map_or(0, |i| i + usize::from(row.cells[i].width))
}

/// The width of cell `x`; 0 past the row's end (xterm.js reads an absent cell as empty).
fn width_at(row: Option<&Row>, x: usize) -> u8 {
    row.and_then(|row| row.cells.get(x))
        .map_or(0, |cell| cell.width)
}

/// How many of row `i`'s cells belong to the logical line: all of them, except the blank
/// xterm.js left in the last column when a wide character did not fit there and went to the
/// next row; the last row of the line counts up to its text.
fn wrapped_len(group: &[Row], i: usize, cols: usize) -> usize {
    let Some(row) = group.get(i) else {
        return 0;
    };
    if i + 1 == group.len() {
        return trimmed_len(row);
    }
    let last = cols.checked_sub(1).and_then(|x| row.cells.get(x));
    let ends_in_null = last.is_some_and(|cell| !cell.has_content() && cell.width == 1);
    let next_starts_wide = width_at(group.get(i + 1), 0) == 2;
    match ends_in_null && next_starts_wide {
        true => cols - 1,
        false => cols,
    }
}

/// Copies `n` cells from `(row, col)` `src` to `dest` within `group`, as a move within one row
/// when they share it. Clamped to both rows, so a row shorter than expected loses cells
/// rather than panicking.
fn copy_cells(group: &mut [Row], src: (usize, usize), dest: (usize, usize), n: usize) {
    let len = |r: usize| group.get(r).map_or(0, |row| row.cells.len());
    let n = n
        .min(len(src.0).saturating_sub(src.1))
        .min(len(dest.0).saturating_sub(dest.1));
    if n == 0 {
        return;
    }
    let (from, to) = (src.1..src.1 + n, dest.1..dest.1 + n);
    if src.0 == dest.0 {
        group[src.0].cells.copy_within(from, dest.1);
    } else if src.0 < dest.0 {
        let (above, below) = group.split_at_mut(dest.0);
        below[0].cells[to].copy_from_slice(&above[src.0].cells[from]);
    } else {
        let (above, below) = group.split_at_mut(src.0);
        above[dest.0].cells[to].copy_from_slice(&below[0].cells[from]);
    }
}

fn set_cell(row: Option<&mut Row>, x: usize, cell: Cell) {
    if let Some(slot) = row.and_then(|row| row.cells.get_mut(x)) {
        *slot = cell;
    }
}

// --- Wider. ---

/// Rejoins each wrapped line but the cursor's into fewer rows and drops the rows it frees.
fn wider(lines: &mut Lines, old_cols: usize, new_cols: usize, new_rows: usize) {
    let cursor = lines.ybase + lines.y;
    let total = lines.rows.len();
    let mut keep = vec![true; total];
    let mut removed = 0;
    let mut start = 0;
    while start + 1 < total {
        let mut end = start + 1;
        while end < total && lines.rows[end].wrapped {
            end += 1;
        }
        if end > start + 1 && !(start..end).contains(&cursor) {
            let kept = join(&mut lines.rows[start..end], old_cols, new_cols);
            for flag in &mut keep[start + kept..end] {
                *flag = false;
                removed += 1;
            }
        }
        start = end;
    }
    if removed == 0 {
        return;
    }
    let mut flags = keep.into_iter();
    lines.rows.retain(|_| flags.next().unwrap_or(true));
    // xterm.js moves the cursor up for each freed row, even one below it, and pads the
    // bottom back to the screen's height.
    for _ in 0..removed {
        if lines.ybase == 0 {
            lines.y = lines.y.saturating_sub(1);
            if lines.rows.len() < new_rows {
                lines.rows.push(blank_row(new_cols, false));
            }
        } else {
            lines.ybase -= 1;
        }
    }
    lines.saved_y = lines.saved_y.saturating_sub(removed);
}

/// Moves one wrapped line's cells up into as few `new_cols` rows as hold them; returns how
/// many of the group's rows are still needed (the rest are blank at the end).
fn join(group: &mut [Row], old_cols: usize, new_cols: usize) -> usize {
    let (mut dest_row, mut dest_col) = (0, wrapped_len(group, 0, old_cols));
    let (mut src_row, mut src_col) = (1, 0);
    while src_row < group.len() {
        let src_len = wrapped_len(group, src_row, old_cols);
        let n = src_len
            .saturating_sub(src_col)
            .min(new_cols.saturating_sub(dest_col));
        copy_cells(group, (src_row, src_col), (dest_row, dest_col), n);
        dest_col += n;
        if dest_col == new_cols {
            dest_row += 1;
            dest_col = 0;
        }
        src_col += n;
        if src_col >= src_len {
            src_row += 1;
            src_col = 0;
        }
        // A wide character in the last column would be cut by the edge: it moves down.
        if dest_col == 0 && dest_row != 0 && width_at(group.get(dest_row - 1), new_cols - 1) == 2 {
            copy_cells(group, (dest_row - 1, new_cols - 1), (dest_row, 0), 1);
            dest_col = 1;
            set_cell(group.get_mut(dest_row - 1), new_cols - 1, null_cell());
        }
    }
    if let Some(row) = group.get_mut(dest_row) {
        row.erase(dest_col, new_cols, null_cell());
    }
    let mut kept = group.len();
    while kept > 1 && (kept - 1 > dest_row || trimmed_len(&group[kept - 1]) == 0) {
        kept -= 1;
    }
    kept
}

// --- Narrower. ---

/// Rows a narrower reflow adds below one wrapped line, to go in when every line is done.
struct Insert {
    /// Where they go in xterm.js's reckoning: the line's end, plus the rows already added
    /// below it.
    at: usize,
    rows: Vec<Row>,
}

/// Rewraps each line too long for `new_cols` (but the cursor's) into more rows, then puts the
/// added rows in and keeps the bottom `new_rows`.
fn narrower(lines: &mut Lines, old_cols: usize, new_cols: usize, new_rows: usize) {
    let max_len = new_rows;
    // Rows popped while the cursor moves down stay readable past `len`: xterm.js's circular
    // list keeps them, and its loop, still walking up from the old bottom, reads them.
    let mut len = lines.rows.len();
    let mut inserts: Vec<Insert> = Vec::new();
    let mut added_total = 0;
    let mut y = lines.rows.len();
    while y > 0 {
        y -= 1;
        let line = &lines.rows[y];
        if !line.wrapped && trimmed_len(line) <= new_cols {
            continue;
        }
        let end = y + 1;
        while y > 0 && lines.rows[y].wrapped {
            y -= 1;
        }
        let start = y;
        if (start..end).contains(&(lines.ybase + lines.y)) {
            continue;
        }
        let n = end - start;
        let last_len = trimmed_len(&lines.rows[end - 1]);
        let lengths = new_lengths(&lines.rows[start..end], old_cols, new_cols);
        let to_add = lengths.len() as isize - n as isize;
        let over = match lines.ybase == 0 && lines.y + 1 != len {
            true => lines.y as isize - max_len as isize + to_add,
            false => len as isize - max_len as isize + to_add,
        };
        let trimmed = over.max(0);

        let mut work: Vec<Row> = lines.rows[start..end].to_vec();
        let added = to_add.max(0) as usize;
        work.extend((0..added).map(|_| blank_row(new_cols, true)));
        spread(&mut work, n, last_len, &lengths, old_cols, new_cols);
        let new_rows_of_line = work.split_off(n);
        for (slot, row) in lines.rows[start..end].iter_mut().zip(work) {
            *slot = row;
        }
        if added > 0 {
            inserts.push(Insert {
                at: end + added_total,
                rows: new_rows_of_line,
            });
            added_total += added;
        }

        for _ in 0..(to_add - trimmed).max(0) {
            if lines.ybase == 0 {
                if lines.y + 1 < new_rows {
                    lines.y += 1;
                    len = len.saturating_sub(1);
                } else {
                    lines.ybase += 1;
                }
            } else if lines.ybase + new_rows < max_len.min(len + added_total) {
                lines.ybase += 1;
            }
        }
        let saved = (lines.saved_y as isize + to_add).max(0) as usize;
        lines.saved_y = saved.min(lines.ybase + new_rows - 1);
    }
    lines.rows.truncate(len);
    if !inserts.is_empty() {
        lines.rows = merge(std::mem::take(&mut lines.rows), inserts, max_len, new_cols);
    }
}

/// The rows each of the new rows of one wrapped line takes: `new_cols`, or one less where a
/// wide character would straddle the edge, and the rest on the last.
fn new_lengths(group: &[Row], old_cols: usize, new_cols: usize) -> Vec<usize> {
    let lens: Vec<usize> = (0..group.len())
        .map(|i| wrapped_len(group, i, old_cols))
        .collect();
    let needed: usize = lens.iter().sum();
    let mut out = Vec::new();
    let (mut src_row, mut src_col, mut placed) = (0, 0, 0);
    while placed < needed {
        if needed - placed < new_cols {
            out.push(needed - placed);
            break;
        }
        src_col += new_cols;
        let src_len = lens.get(src_row).copied().unwrap_or(0);
        if src_col > src_len {
            src_col -= src_len;
            src_row += 1;
        }
        let ends_wide = src_col > 0 && width_at(group.get(src_row), src_col - 1) == 2;
        if ends_wide {
            src_col -= 1;
        }
        let len = if ends_wide { new_cols - 1 } else { new_cols };
        // One column cannot hold a wide character (xterm.js hangs there; it never resizes
        // below two).
        if len == 0 {
            break;
        }
        out.push(len);
        placed += len;
    }
    out
}

/// Moves a line's cells down and right into rows of `lengths`, from the end backwards so the
/// rows can be rewritten in place. `work` is the line's `n` rows and then its new ones;
/// `last_len` is the text's length on its last old row.
fn spread(
    work: &mut [Row],
    n: usize,
    last_len: usize,
    lengths: &[usize],
    old_cols: usize,
    new_cols: usize,
) {
    let length = |i: isize| {
        usize::try_from(i)
            .ok()
            .and_then(|i| lengths.get(i).copied())
    };
    let mut dest_row = lengths.len() as isize - 1;
    let mut dest_col = length(dest_row).unwrap_or(0);
    if dest_col == 0 {
        dest_row -= 1;
        dest_col = length(dest_row).unwrap_or(0);
    }
    let mut src_row = n as isize - 1;
    let mut src_col = last_len;
    while src_row >= 0 && dest_row >= 0 {
        let k = src_col.min(dest_col);
        copy_cells(
            work,
            (src_row as usize, src_col - k),
            (dest_row as usize, dest_col - k),
            k,
        );
        dest_col -= k;
        if dest_col == 0 {
            dest_row -= 1;
            dest_col = length(dest_row).unwrap_or(0);
        }
        src_col -= k;
        if src_col == 0 {
            src_row -= 1;
            src_col = wrapped_len(work, src_row.max(0) as usize, old_cols);
        }
    }
    // A row cut short by a wide character that went down ends in a blank.
    for (i, row) in work.iter_mut().enumerate() {
        if let Some(&len) = lengths.get(i) {
            if len < new_cols {
                set_cell(Some(row), len, null_cell());
            }
        }
    }
}

/// Puts each line's added rows after it, filling from the bottom up: what does not fit in
/// `max_len` rows falls off the top. Placed as xterm.js places them, which is after the
/// line when it is still there and at the bottom when the cursor's descent popped it.
fn merge(original: Vec<Row>, inserts: Vec<Insert>, max_len: usize, cols: usize) -> Vec<Row> {
    let added: usize = inserts.iter().map(|insert| insert.rows.len()).sum();
    let total = max_len.min(original.len() + added);
    let mut out: Vec<Row> = Vec::with_capacity(total);
    let mut original = original.into_iter().rev();
    let mut inserts = inserts.into_iter().peekable();
    // Counted as xterm.js counts: original rows left, and added rows already placed.
    let mut left = original.len();
    let mut placed = 0;
    while out.len() < total {
        let due = inserts
            .peek()
            .is_some_and(|insert| insert.at + 1 > left + placed);
        if due {
            if let Some(insert) = inserts.next() {
                placed += insert.rows.len();
                out.extend(insert.rows.into_iter().rev());
            }
        } else if let Some(row) = original.next() {
            left -= 1;
            out.push(row);
        } else {
            out.push(blank_row(cols, false));
        }
    }
    out.truncate(total);
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row of `cols` cells from `s`: `W` is a wide character, `.` a blank, `+` starts a
    /// row that continues the one above.
    fn row(s: &str, cols: usize) -> Row {
        let wrapped = s.starts_with('+');
        let mut cells = Vec::new();
        for ch in s.trim_start_matches('+').chars() {
            match ch {
                'W' => cells.extend([Cell::char('W', 2, 0), Cell::spacer(0)]),
                '.' => cells.push(null_cell()),
                c => cells.push(Cell::char(c, 1, 0)),
            }
        }
        cells.resize(cols, null_cell());
        Row { cells, wrapped }
    }

    fn text(lines: &Lines) -> Vec<String> {
        lines
            .rows
            .iter()
            .map(|row| {
                let cells: String = row
                    .cells
                    .iter()
                    .map(|c| match c.width {
                        0 => '_',
                        _ => char::from_u32(c.content)
                            .filter(|&ch| ch != '\0')
                            .unwrap_or('.'),
                    })
                    .collect();
                format!("{}{cells}", if row.wrapped { "+" } else { "" })
            })
            .collect()
    }

    fn lines(rows: &[&str], cols: usize, y: usize) -> Lines {
        Lines {
            rows: rows.iter().map(|s| row(s, cols)).collect(),
            ybase: 0,
            y,
            saved_y: 0,
        }
    }

    /// The rows as the screen shows them once the buffer cuts them to `cols`.
    fn shown(lines: &Lines, cols: usize) -> Vec<String> {
        text(lines)
            .into_iter()
            .map(|s| {
                let plus = usize::from(s.starts_with('+'));
                s.chars().take(cols + plus).collect()
            })
            .collect()
    }

    #[test]
    fn a_narrower_screen_rewraps_a_line_and_the_cursor_moves_down_with_the_rows_it_gains() {
        let mut l = lines(&["abcdef", "+ghij", "$", "", ""], 6, 2);
        reflow(&mut l, 6, 4, 5);
        assert_eq!(shown(&l, 4), ["abcd", "+efgh", "+ij..", "$...", "...."]);
        assert_eq!(l.y, 3);
    }

    #[test]
    fn a_wider_screen_rejoins_a_line_and_moves_the_cursor_up_even_from_above_it() {
        // The cursor is above the wrapped line; xterm.js moves it up all the same.
        let mut l = lines(&["$", "", "abcd", "+ef", ""], 6, 1);
        reflow(&mut l, 4, 6, 5);
        assert_eq!(text(&l), ["$.....", "......", "abcdef", "......", "......"]);
        assert_eq!(l.y, 0);
    }

    #[test]
    fn a_wide_character_the_new_edge_would_cut_moves_down_and_leaves_a_blank() {
        let mut l = lines(&["abW", "", "", ""], 4, 1);
        reflow(&mut l, 4, 3, 4);
        assert_eq!(shown(&l, 3), ["ab.", "+W_.", "...", "..."]);
        assert_eq!(l.y, 2);
    }

    #[test]
    fn the_cursors_own_line_is_not_rewrapped() {
        let mut l = lines(&["abcdef", "+gh", ""], 6, 1);
        reflow(&mut l, 6, 4, 3);
        assert_eq!(text(&l), ["abcdef", "+gh....", "......"]);
        assert_eq!(l.y, 1);
    }

    #[test]
    fn rows_the_screen_cannot_hold_leave_from_the_top_when_the_cursor_is_at_the_bottom() {
        let mut l = lines(&["abcdef", "x", "$"], 6, 2);
        reflow(&mut l, 6, 3, 3);
        assert_eq!(shown(&l, 3), ["+def", "x..", "$.."]);
        assert_eq!(l.y, 2);
    }

    #[test]
    fn a_line_that_needs_more_rows_than_are_below_the_cursor_slides_the_viewport() {
        let mut l = lines(&["abcdefghij", "$", "", ""], 10, 1);
        reflow(&mut l, 10, 3, 4);
        // Three rows added and two below the cursor: it walks to the bottom, then xterm.js's
        // ybase goes up instead.
        assert_eq!((l.y, l.ybase), (3, 1));
    }
}
