//! [`Emulator`]: the terminal's state and the operations sequences ask for, written to land
//! exactly where xterm.js lands (the terminal of atc's page, and the reference the fidelity
//! tests hold the repaint to), quirks included: the cursor's pending wrap is column `cols`,
//! relative moves under origin mode count from the scroll region's top twice, a combining mark
//! joins the character before it only when nothing but text came between.
//!
//! The parser's [`Perform`](crate::parser::Perform) calls land in `perform.rs`, which maps
//! each sequence to one of the operations here.

use unicode_width::UnicodeWidthChar;

use crate::buffer::{Buffer, SavedCursor};
use crate::cell::{Cell, CLUSTER, EMPTY};
use crate::charset::Charset;
use crate::modes::Modes;
use crate::pen_cache::PenCache;
use crate::style::Style;
use crate::table::{Link, StyleTable, DEFAULT_STYLE};

/// The most bytes of UTF-8 one cell's character and its combining marks take.
pub const MAX_CLUSTER_BYTES: usize = 32;

/// The terminal's state.
#[derive(Debug)]
pub struct Emulator {
    pub(crate) cols: u16,
    pub(crate) rows: u16,
    pub(crate) main: Buffer,
    /// The alternate screen while it is active.
    pub(crate) alt: Option<Box<Buffer>>,
    pub(crate) table: StyleTable,
    pub(crate) pen: Style,
    /// The table's index of `pen`, and of what erasing with it leaves.
    /// Found when first needed (a print, an erase): SGR often comes several sequences at a
    /// time, and most pens never erase.
    pen_id: Option<u16>,
    erase_id: Option<u16>,
    /// The indexes of the pens set lately.
    pens: PenCache,
    pub(crate) modes: Modes,
    /// G0–G3.
    pub(crate) g: [Charset; 4],
    /// Which of G0–G3 is in GL.
    pub(crate) gl: u8,
    /// The set printing uses: `g[gl]`, except after a DECRC, which restores it alone.
    pub(crate) charset: Charset,
    pub(crate) title: String,
    /// The width of the character printed last, while nothing but text came after it: a
    /// combining mark joins it then (xterm.js's "preceding join state").
    pub(crate) join: u8,
}

impl Emulator {
    /// A blank terminal of `cols`×`rows` (each at least 1).
    pub fn new(cols: u16, rows: u16) -> Emulator {
        let (cols, rows) = (cols.max(1), rows.max(1));
        Emulator {
            cols,
            rows,
            main: Buffer::new(cols, rows, Cell::blank(DEFAULT_STYLE)),
            alt: None,
            table: StyleTable::default(),
            pen: Style::default(),
            pen_id: Some(DEFAULT_STYLE),
            erase_id: Some(DEFAULT_STYLE),
            pens: PenCache::default(),
            modes: Modes::default(),
            g: [Charset::Ascii; 4],
            gl: 0,
            charset: Charset::Ascii,
            title: String::new(),
            join: 0,
        }
    }

    /// The active buffer.
    pub(crate) fn buf(&self) -> &Buffer {
        match &self.alt {
            Some(alt) => alt,
            None => &self.main,
        }
    }

    pub(crate) fn buf_mut(&mut self) -> &mut Buffer {
        match &mut self.alt {
            Some(alt) => alt,
            None => &mut self.main,
        }
    }

    fn erase_cell(&mut self) -> Cell {
        Cell::blank(self.erase_id())
    }

    fn pen_blank(&mut self) -> Cell {
        Cell::blank(self.pen_id())
    }

    // --- The pen and the style table. ---

    /// Sets the pen; its indexes in the table are found when first needed.
    pub(crate) fn set_pen(&mut self, pen: Style) {
        self.pen = pen;
        (self.pen_id, self.erase_id) = self.pens.get(&pen).unwrap_or((None, None));
    }

    /// The table's index of what the pen prints.
    pub(crate) fn pen_id(&mut self) -> u16 {
        if let Some(id) = self.pen_id {
            return id;
        }
        let id = self.intern(self.pen.stored());
        self.pen_id = Some(id);
        self.pens.put(self.pen, self.pen_id, self.erase_id);
        id
    }

    /// The table's index of what erasing with the pen leaves.
    pub(crate) fn erase_id(&mut self) -> u16 {
        if let Some(id) = self.erase_id {
            return id;
        }
        let id = self.intern(self.pen.erased());
        self.erase_id = Some(id);
        self.pens.put(self.pen, self.pen_id, self.erase_id);
        id
    }

    fn intern(&mut self, style: Style) -> u16 {
        if let Some(id) = self.table.style_id(style) {
            return id;
        }
        self.compact();
        // Only a grid with more distinct styles than the table holds gets here.
        self.table.style_id(style).unwrap_or(DEFAULT_STYLE)
    }

    /// Drops the table's entries no cell uses, renumbering the cells, the pen and its erase.
    fn compact(&mut self) {
        self.pens.clear();
        let (styles, clusters) = self.table.len();
        let mut live_styles = vec![false; styles];
        let mut live_clusters = vec![false; clusters];
        let mut mark = |cell: &mut Cell| {
            live_styles[usize::from(cell.style)] = true;
            if cell.content & CLUSTER != 0 {
                live_clusters[(cell.content & !CLUSTER) as usize] = true;
            }
        };
        self.main.grid.cells_mut().for_each(&mut mark);
        if let Some(alt) = &mut self.alt {
            alt.grid.cells_mut().for_each(&mut mark);
        }
        let (style_map, cluster_map, link_map) =
            self.table
                .compact(&live_styles, &live_clusters, self.pen.link);
        self.pen.link = link_map
            .get(usize::from(self.pen.link))
            .copied()
            .unwrap_or(0);
        let remap = |cell: &mut Cell| {
            cell.style = style_map[usize::from(cell.style)];
            if cell.content & CLUSTER != 0 {
                cell.content = CLUSTER | cluster_map[(cell.content & !CLUSTER) as usize];
            }
        };
        self.main.grid.cells_mut().for_each(remap);
        if let Some(alt) = &mut self.alt {
            alt.grid.cells_mut().for_each(remap);
        }
        // The pen's entries were not marked: found again when next needed.
        (self.pen_id, self.erase_id) = (None, None);
    }

    // --- Printing. ---

    /// xterm.js blanks a wide character whose second column a print starts on.
    fn print_start(&mut self) {
        let blank = self.pen_blank();
        let buf = self.buf_mut();
        let (x, y) = (usize::from(buf.x), usize::from(buf.y));
        if x > 0 {
            let row = buf.grid.row_mut(y);
            if row.cells[x - 1].is_wide() {
                row.cells[x - 1] = blank;
            }
        }
    }

    /// ... and a spacer left where a print ended.
    fn print_end(&mut self) {
        let blank = self.pen_blank();
        let cols = usize::from(self.cols);
        let buf = self.buf_mut();
        let (x, y) = (usize::from(buf.x), usize::from(buf.y));
        if x < cols {
            let cell = &mut buf.grid.row_mut(y).cells[x];
            if cell.is_spacer() && !cell.has_content() {
                *cell = blank;
            }
        }
    }

    /// Prints a run of printable ASCII.
    pub(crate) fn print_ascii(&mut self, text: &[u8]) {
        self.print_start();
        if self.charset != Charset::Ascii || self.modes.insert {
            let mut style = self.pen_id();
            for &b in text {
                if self.print_one(self.charset.map(b), 1, style) {
                    style = self.pen_id();
                }
            }
        } else {
            self.print_ascii_fast(text);
        }
        self.print_end();
    }

    /// The common case: ASCII in the ASCII set, not inserting. Whole stretches of a row are
    /// written at once.
    fn print_ascii_fast(&mut self, mut text: &[u8]) {
        let cols = usize::from(self.cols);
        let style = self.pen_id();
        let autowrap = self.modes.autowrap;
        while !text.is_empty() {
            if usize::from(self.buf().x) >= cols {
                match autowrap {
                    true => {
                        self.wrap(0);
                    }
                    false => self.buf_mut().x = self.cols - 1,
                }
            }
            let buf = self.buf_mut();
            let x = usize::from(buf.x);
            let room = cols - x;
            // Without autowrap, what does not fit overprints the last column: only the last
            // byte of it is left there.
            let (now, last) = match (autowrap, text.len() > room) {
                (false, true) => (&text[..room - 1], Some(text[text.len() - 1])),
                _ => (&text[..text.len().min(room)], None),
            };
            let row = &mut buf.grid.row_mut(usize::from(buf.y)).cells;
            for (cell, &b) in row[x..x + now.len()].iter_mut().zip(now) {
                *cell = Cell {
                    content: u32::from(b),
                    style,
                    width: 1,
                };
            }
            let mut end = x + now.len();
            if let Some(b) = last {
                row[cols - 1] = Cell {
                    content: u32::from(b),
                    style,
                    width: 1,
                };
                end = cols;
            }
            buf.x = end as u16;
            text = match last {
                Some(_) => &[],
                None => &text[now.len()..],
            };
        }
        self.join = 1;
    }

    /// Prints one character outside ASCII.
    pub(crate) fn print_char(&mut self, c: char) {
        self.print_start();
        let width = c.width().unwrap_or(0).min(2) as u8;
        let style = self.pen_id();
        self.print_one(c, width, style);
        self.print_end();
    }

    /// Prints a run of characters outside ASCII, as one print (xterm.js's fix-ups of wide
    /// characters cut at either end happen once a print).
    pub(crate) fn print_chars(&mut self, chars: &[char]) {
        self.print_start();
        let mut style = self.pen_id();
        for &c in chars {
            let width = c.width().unwrap_or(0).min(2) as u8;
            if self.print_one(c, width, style) {
                style = self.pen_id();
            }
        }
        self.print_end();
    }

    /// One character of `width` columns, after xterm.js's `print`.
    /// `style` is the pen's index; returns whether the table may have been renumbered (a
    /// combining mark joined a cell), after which the caller must ask for the index again.
    fn print_one(&mut self, c: char, width: u8, style: u16) -> bool {
        let cols = self.cols;
        let joins = width == 0 && self.join != 0;
        let width = if joins { self.join.max(width) } else { width };
        self.join = width;
        if !joins && self.buf().x + u16::from(width) > cols {
            if self.modes.autowrap {
                let from = usize::from(self.buf().x);
                let old_y = usize::from(self.buf().y);
                let blank = Cell::blank(style);
                let scrolled = self.wrap(0);
                // What the character did not fit in is blanked in the pen, in the row it left
                // (which a scroll moved up, or dropped when the region is one row).
                let buf = self.buf_mut();
                let old_y = match scrolled {
                    true if buf.top == buf.bottom => None,
                    true => Some(old_y - 1),
                    false => Some(old_y),
                };
                if let Some(old_y) = old_y.filter(|_| from < usize::from(cols)) {
                    buf.grid.row_mut(old_y).cells[from..].fill(blank);
                }
            } else {
                self.buf_mut().x = cols - 1;
                if width == 2 {
                    return false;
                }
            }
        }
        let x = usize::from(self.buf().x);
        if joins {
            if x > 0 {
                let y = usize::from(self.buf().y);
                let offset = if self.buf().grid.rows()[y].cells[x - 1].width != 0 {
                    1
                } else {
                    2
                };
                if x >= offset {
                    self.join_mark(x - offset, c);
                }
            }
            return true;
        }
        let insert = self.modes.insert;
        let pen_blank = Cell::blank(style);
        let buf = self.buf_mut();
        let row = buf.grid.row_mut(usize::from(buf.y));
        let cols = usize::from(cols);
        if insert && width > 0 {
            row.insert(x, usize::from(width), pen_blank);
        }
        if x < cols {
            row.cells[x] = Cell::char(c, width, style);
        }
        let mut x = x + 1;
        if width == 2 && x < cols {
            row.cells[x] = Cell::spacer(style);
            x += 1;
        }
        buf.x = x.min(cols) as u16;
        false
    }

    /// Adds a combining mark to the character at `x` of the cursor's row.
    fn join_mark(&mut self, x: usize, mark: char) {
        let y = usize::from(self.buf().y);
        let cell = self.buf().grid.rows()[y].cells[x];
        let mut cluster = match cell.content {
            EMPTY => String::new(),
            c if c & CLUSTER != 0 => self.table.cluster(c & !CLUSTER).to_string(),
            c => char::from_u32(c).map(String::from).unwrap_or_default(),
        };
        // Marks past the bound are dropped: a cell of Zalgo text stays a few bytes, where
        // xterm.js would keep every mark (and each join here would copy the cluster again).
        if cluster.len() + mark.len_utf8() > MAX_CLUSTER_BYTES {
            return;
        }
        cluster.push(mark);
        let id = match self.table.cluster_id(&cluster) {
            Some(id) => id,
            None => {
                self.compact();
                match self.table.cluster_id(&cluster) {
                    Some(id) => id,
                    // Only a grid with more distinct clusters than the table holds.
                    None => return,
                }
            }
        };
        let y = usize::from(self.buf().y);
        self.buf_mut().grid.row_mut(y).cells[x].content = CLUSTER | id;
    }

    /// Autowraps: the cursor to the next row's first column (`to_x`), scrolling at the
    /// region's bottom, and the row marked as continuing the one above. Returns whether it
    /// scrolled.
    fn wrap(&mut self, to_x: u16) -> bool {
        self.buf_mut().x = to_x;
        let step = self.down_one();
        let buf = self.buf_mut();
        let y = usize::from(buf.y);
        buf.grid.row_mut(y).wrapped = true;
        step == RowStep::Scrolled
    }

    /// The cursor one row down, as LF, IND and an autowrap move it: at the region's bottom
    /// the region scrolls up instead, and below the region the cursor stops at the last row.
    fn down_one(&mut self) -> RowStep {
        let rows = self.rows;
        let erase = self.erase_cell();
        let buf = self.buf_mut();
        buf.y += 1;
        if buf.y == buf.bottom + 1 {
            buf.y -= 1;
            let (top, bottom) = (usize::from(buf.top), usize::from(buf.bottom));
            buf.grid.scroll_up(top, bottom, 1, erase);
            RowStep::Scrolled
        } else if buf.y >= rows {
            buf.y = rows - 1;
            RowStep::Stopped
        } else {
            RowStep::Moved
        }
    }

    // --- Cursor motion. ---

    /// Clamps the cursor into the screen (into the region under origin mode), its column to
    /// `max_col`.
    pub(crate) fn restrict(&mut self, max_col: u16) {
        let (rows, origin) = (self.rows, self.modes.origin);
        let buf = self.buf_mut();
        buf.x = buf.x.min(max_col);
        buf.y = match origin {
            true => buf.y.clamp(buf.top, buf.bottom),
            false => buf.y.min(rows - 1),
        };
    }

    /// Moves the cursor to (`x`, `y`), `y` counted from the region's top under origin mode.
    pub(crate) fn set_cursor(&mut self, x: i64, y: i64) {
        let origin = self.modes.origin;
        let buf = self.buf_mut();
        let y = if origin { y + i64::from(buf.top) } else { y };
        buf.x = x.clamp(0, i64::from(u16::MAX)) as u16;
        buf.y = y.clamp(0, i64::from(u16::MAX)) as u16;
        self.restrict(self.cols - 1);
    }

    /// Moves the cursor by (`dx`, `dy`), as xterm.js does: from the restricted position,
    /// then through [`Emulator::set_cursor`].
    pub(crate) fn move_cursor(&mut self, dx: i64, dy: i64) {
        self.restrict(self.cols - 1);
        let (x, y) = (i64::from(self.buf().x), i64::from(self.buf().y));
        self.set_cursor(x + dx, y + dy);
    }

    /// LF, VT, FF.
    pub(crate) fn line_feed(&mut self) {
        if self.modes.newline {
            self.buf_mut().x = 0;
        }
        let cols = self.cols;
        let moved = self.down_one() == RowStep::Moved;
        let buf = self.buf_mut();
        if moved {
            let y = usize::from(buf.y);
            buf.grid.row_mut(y).wrapped = false;
        }
        if buf.x >= cols {
            buf.x -= 1;
        }
    }

    /// IND.
    pub(crate) fn index(&mut self) {
        self.restrict(self.cols - 1);
        self.down_one();
        self.restrict(self.cols - 1);
    }

    /// RI.
    pub(crate) fn reverse_index(&mut self) {
        self.restrict(self.cols - 1);
        let erase = self.erase_cell();
        let buf = self.buf_mut();
        if buf.y == buf.top {
            let (top, bottom) = (usize::from(buf.top), usize::from(buf.bottom));
            buf.grid.scroll_down(top, bottom, 1, erase);
        } else {
            buf.y = buf.y.saturating_sub(1);
            self.restrict(self.cols - 1);
        }
    }

    /// BS.
    pub(crate) fn backspace(&mut self) {
        if !self.modes.reverse_wrap {
            self.restrict(self.cols - 1);
            let buf = self.buf_mut();
            buf.x = buf.x.saturating_sub(1);
            return;
        }
        self.restrict(self.cols);
        let cols = self.cols;
        let buf = self.buf_mut();
        if buf.x > 0 {
            buf.x -= 1;
        } else if buf.y > buf.top
            && buf.y <= buf.bottom
            && buf.grid.rows()[usize::from(buf.y)].wrapped
        {
            let y = usize::from(buf.y);
            buf.grid.row_mut(y).wrapped = false;
            buf.y -= 1;
            buf.x = cols - 1;
            let cell = buf.grid.rows()[usize::from(buf.y)].cells[usize::from(buf.x)];
            if cell.width != 0 && !cell.has_content() {
                buf.x -= 1;
            }
        }
        self.restrict(self.cols - 1);
    }

    // --- Erasing and editing. ---

    /// Blanks cells `from..to` of row `y` in the erase style; `clear_wrap` forgets that the
    /// row continues the one above.
    pub(crate) fn erase_in_row(&mut self, y: usize, from: usize, to: usize, clear_wrap: bool) {
        let erase = self.erase_cell();
        let row = self.buf_mut().grid.row_mut(y);
        row.erase(from, to, erase);
        if clear_wrap {
            row.wrapped = false;
        }
    }

    /// Blanks rows `from..to` whole.
    pub(crate) fn erase_rows(&mut self, from: usize, to: usize) {
        let erase = self.erase_cell();
        self.buf_mut().grid.erase_rows(from, to, erase);
    }

    /// Scrolls the region up `n` rows (SU, and DL from the cursor's row with `from`).
    pub(crate) fn scroll_up(&mut self, from: Option<u16>, n: usize) {
        let erase = self.erase_cell();
        let buf = self.buf_mut();
        let top = usize::from(from.unwrap_or(buf.top));
        let bottom = usize::from(buf.bottom);
        if top <= bottom {
            buf.grid.scroll_up(top, bottom, n, erase);
        }
    }

    /// Scrolls the region down `n` rows (SD with the default style, IL from the cursor's row
    /// with the erase style).
    pub(crate) fn scroll_down(&mut self, from: Option<u16>, n: usize, erase_style: bool) {
        let fill = match erase_style {
            true => self.erase_cell(),
            false => Cell::blank(DEFAULT_STYLE),
        };
        let buf = self.buf_mut();
        let top = usize::from(from.unwrap_or(buf.top));
        let bottom = usize::from(buf.bottom);
        if top <= bottom {
            buf.grid.scroll_down(top, bottom, n, fill);
        }
    }

    /// ICH, DCH or ECH at the cursor.
    pub(crate) fn edit_chars(&mut self, edit: CharEdit, n: usize) {
        self.restrict(self.cols - 1);
        let erase = self.erase_cell();
        let buf = self.buf_mut();
        let x = usize::from(buf.x);
        let row = buf.grid.row_mut(usize::from(buf.y));
        match edit {
            CharEdit::Insert => row.insert(x, n, erase),
            CharEdit::Delete => row.delete(x, n, erase),
            CharEdit::Erase => row.erase(x, x.saturating_add(n), erase),
        }
    }

    /// SL, SR, DECIC and DECDC: every row of the region, when the cursor is in it.
    pub(crate) fn edit_columns(&mut self, edit: CharEdit, at_cursor: bool, n: usize) {
        let erase = self.erase_cell();
        let buf = self.buf_mut();
        if buf.y < buf.top || buf.y > buf.bottom {
            return;
        }
        let x = if at_cursor { usize::from(buf.x) } else { 0 };
        for y in usize::from(buf.top)..=usize::from(buf.bottom) {
            let row = buf.grid.row_mut(y);
            match edit {
                CharEdit::Insert => row.insert(x, n, erase),
                _ => row.delete(x, n, erase),
            }
            row.wrapped = false;
        }
    }

    /// DECALN: the screen filled with `E` in the pen, the cursor home.
    pub(crate) fn alignment_test(&mut self) {
        self.set_cursor(0, 0);
        let e = Cell::char('E', 1, self.pen_id());
        let buf = self.buf_mut();
        let from = usize::from(buf.y);
        for y in from..buf.grid.rows().len() {
            let row = buf.grid.row_mut(y);
            row.cells.fill(e);
            row.wrapped = false;
        }
        self.set_cursor(0, 0);
    }

    // --- Buffers, saving and resetting. ---

    /// DECSC. xterm.js saves the pen's flags and colours, not its extended part.
    pub(crate) fn save_cursor(&mut self) {
        let (pen, charset) = (self.pen.words(), self.charset);
        let buf = self.buf_mut();
        buf.saved = SavedCursor {
            x: buf.x,
            y: buf.y,
            style: pen,
            charset,
        };
    }

    /// DECRC. xterm.js restores the pen's flags and colours (its "has extended" flag among
    /// them) but keeps the current underline style, colour and link.
    pub(crate) fn restore_cursor(&mut self) {
        let saved = self.buf().saved;
        let buf = self.buf_mut();
        buf.x = saved.x;
        buf.y = saved.y;
        let pen = Style {
            underline: self.pen.underline,
            underline_color: self.pen.underline_color,
            link: self.pen.link,
            ..saved.style
        };
        self.set_pen(pen);
        self.charset = saved.charset;
        self.restrict(self.cols - 1);
    }

    /// Switches to the alternate screen, filled with the erase style, the cursor where it was.
    pub(crate) fn enter_alt(&mut self) {
        if self.alt.is_some() {
            return;
        }
        let mut alt = Buffer::new(self.cols, self.rows, self.erase_cell());
        alt.x = self.main.x;
        alt.y = self.main.y;
        self.alt = Some(Box::new(alt));
    }

    /// Back to the main screen, the cursor where it was on the alternate one.
    pub(crate) fn leave_alt(&mut self) {
        if let Some(alt) = self.alt.take() {
            self.main.x = alt.x;
            self.main.y = alt.y;
        }
    }

    /// OSC 8: opens `link` (`None` closes it). A link the table has no room for is not kept.
    pub(crate) fn set_link(&mut self, link: Option<Link>) {
        let id = match link {
            Some(link) => match self.table.link_id(&link) {
                Some(id) => id,
                None => {
                    self.compact();
                    self.table.link_id(&link).unwrap_or(0)
                }
            },
            None => 0,
        };
        let mut pen = self.pen;
        pen.link = id;
        pen.update_extended();
        self.set_pen(pen);
    }

    /// G`n` into GL.
    pub(crate) fn set_gl(&mut self, n: u8) {
        self.gl = n.min(3);
        self.charset = self.g[usize::from(self.gl)];
    }

    /// Designates `set` into G`n`.
    pub(crate) fn designate(&mut self, n: usize, set: Charset) {
        self.g[n] = set;
        if usize::from(self.gl) == n {
            self.charset = set;
        }
    }

    /// DECSTR.
    pub(crate) fn soft_reset(&mut self) {
        self.modes.cursor_hidden = false;
        let rows = self.rows;
        let buf = self.buf_mut();
        buf.top = 0;
        buf.bottom = rows - 1;
        self.set_pen(Style::default());
        let keep = (
            self.modes.mouse,
            self.modes.mouse_encoding,
            self.modes.newline,
        );
        let (cursor_style, colour, hidden) = (
            self.modes.cursor_style,
            self.modes.colour_scheme_reports,
            self.modes.cursor_hidden,
        );
        self.modes = Modes::default();
        (
            self.modes.mouse,
            self.modes.mouse_encoding,
            self.modes.newline,
        ) = keep;
        self.modes.cursor_style = cursor_style;
        self.modes.colour_scheme_reports = colour;
        self.modes.cursor_hidden = hidden;
        self.g = [Charset::Ascii; 4];
        self.set_gl(0);
        let pen = self.pen;
        self.buf_mut().saved = SavedCursor {
            x: 0,
            y: 0,
            style: pen,
            charset: Charset::Ascii,
        };
    }

    /// RIS: a fresh terminal of the same size and title.
    pub(crate) fn full_reset(&mut self) {
        let title = std::mem::take(&mut self.title);
        *self = Emulator::new(self.cols, self.rows);
        self.title = title;
    }

    /// Follows a size change as xterm.js does: the main screen's text is rewrapped, the
    /// alternate screen's is cut. Like xterm.js it stays at least two columns wide (a wide
    /// character needs them) and ignores a resize to the size it has.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        let (cols, rows) = (cols.max(2), rows.max(1));
        if (cols, rows) == (self.cols, self.rows) {
            return;
        }
        let fill = Cell::blank(DEFAULT_STYLE);
        self.main.resize(cols, rows, true, fill);
        if let Some(alt) = &mut self.alt {
            alt.resize(cols, rows, false, fill);
        }
        self.cols = cols;
        self.rows = rows;
    }
}

/// Where [`Emulator::down_one`] took the cursor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RowStep {
    /// The region scrolled under it.
    Scrolled,
    /// It was on the last row, below the region, and stayed.
    Stopped,
    /// To the next row.
    Moved,
}

/// What ICH, DCH and ECH do to a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CharEdit {
    /// Blanks in, the rest shifted right.
    Insert,
    /// Cells out, the rest shifted left.
    Delete,
    /// Cells blanked in place.
    Erase,
}
