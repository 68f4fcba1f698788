//! The repaint: bytes that bring a terminal in any state to this one's, for a client that
//! attaches after output (or fell behind).
//!
//! It states everything, in an order where each step cannot undo the ones before:
//! 1. a known base: the main screen, no scroll region, origin and insert off, autowrap on,
//!    ASCII in G0–G3, the default pen;
//! 2. the main screen's cells, tab stops, saved cursor and scroll region (each buffer has its
//!    own, as in xterm.js); with the alternate screen active, the main screen is painted
//!    first and then the alternate one the same way, so quitting a full-screen program after
//!    a reattach brings back what was under it;
//! 3. the modes, the character sets, the title, the cursor (a pending wrap included: the
//!    cursor after the last column, which only printing that column again can reproduce) and
//!    last the pen.
//!
//! Rows that continue onto the next (autowrapped) are printed through to their last column
//! so that the next row's first character wraps again: a terminal that reflows on resize
//! then joins them as it would have.

use crate::buffer::Buffer;
use crate::cell::{Cell, CLUSTER, EMPTY};
use crate::emulator::Emulator;
use crate::grid::Row;
use crate::modes::{MouseEncoding, MouseTracking};
use crate::pen::PenWriter;
use crate::style::push_number;
use crate::table::{StyleTable, DEFAULT_STYLE};

/// The text a cell shows: its character or cluster, nothing for a blank.
pub fn cell_text(table: &StyleTable, cell: &Cell) -> String {
    match cell.content {
        EMPTY => String::new(),
        c if c & CLUSTER != 0 => table.cluster(c & !CLUSTER).to_string(),
        c => char::from_u32(c).map(String::from).unwrap_or_default(),
    }
}

/// The repaint of `emu`.
pub fn repaint(emu: &Emulator) -> Vec<u8> {
    let mut p = Painter {
        out: Vec::with_capacity(usize::from(emu.cols) * usize::from(emu.rows) * 2),
        table: &emu.table,
        pens: PenWriter {
            table: &emu.table,
            open_link: 0,
        },
        style: None,
        cols: emu.cols,
        must: vec![false; usize::from(emu.cols)],
        must_next: vec![false; usize::from(emu.cols)],
    };
    // 1. The base.
    p.raw(b"\x1b[?1049l\x1b[r\x1b[?6l\x1b[?7h\x1b[4l\x1b[20l\x1b[?45l");
    p.raw(b"\x1b(B\x1b)B\x1b*B\x1b+B\x0f\x1b]8;;\x1b\\\x1b[0m");
    p.style = Some(DEFAULT_STYLE);
    // 2. The buffers.
    p.buffer(&emu.main);
    if let Some(alt) = &emu.alt {
        // Saves the main screen's cursor again, as the program's own switch did: restored
        // first so the switch saves it as it is. The restore brings back its character set
        // too, which the alternate screen's cells are printed without.
        p.raw(b"\x1b8\x1b[?1049h\x1b(B\x0f");
        p.buffer(alt);
    }
    // 3. Modes, character sets, title, cursor, the pen.
    p.modes(emu);
    let buf = emu.buf();
    p.cursor(emu, buf);
    p.charsets(emu);
    p.style = None;
    let mut pen = Vec::new();
    let in_step = p.pens.pen(&emu.pen, &mut pen);
    p.raw(&pen);
    // Two states only a restore makes: the pen's flags out of step with its extended part,
    // and a character set in force other than GL's. Restoring moves the cursor back to the
    // saved one, so it is placed again (a pending wrap is lost then).
    let saved = buf.saved;
    let words_from_restore = !in_step && emu.pen.words() == saved.style;
    let charset_from_restore =
        emu.charset != emu.g[usize::from(emu.gl)] && emu.charset == saved.charset;
    if words_from_restore || charset_from_restore {
        p.raw(b"\x1b8");
        if !words_from_restore {
            p.raw(&pen);
        }
        if !charset_from_restore {
            p.charsets(emu);
        }
        p.cursor_at(emu, buf);
    }
    p.out
}

struct Painter<'a> {
    out: Vec<u8>,
    table: &'a StyleTable,
    pens: PenWriter<'a>,
    /// The pen as last written for cells, if known.
    style: Option<u16>,
    cols: u16,
    /// Columns of the row being painted that hold something the repaint put there on the
    /// way (to set a flag xterm.js only sets while printing), so blanks there are written.
    must: Vec<bool>,
    /// The same for the next row.
    must_next: Vec<bool>,
}

/// A character xterm.js (Unicode 11) prints two columns wide, for the tricks below.
const WIDE: &[u8] = "中".as_bytes();

/// A cell with nothing printed whose style is more than its background: xterm.js leaves
/// these where a wide character did not fit, or was cut, in the full pen; printing a space
/// would give it content.
fn full_blank(table: &StyleTable, cell: &Cell) -> bool {
    let style = table.style(cell.style);
    !cell.has_content() && !cell.is_spacer() && *style != style.erased()
}

impl Painter<'_> {
    fn raw(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    fn csi(&mut self, n: u16, final_byte: u8) {
        self.raw(b"\x1b[");
        push_number(&mut self.out, n);
        self.out.push(final_byte);
    }

    fn cup(&mut self, y: u16, x: u16) {
        self.raw(b"\x1b[");
        push_number(&mut self.out, y + 1);
        self.out.push(b';');
        push_number(&mut self.out, x + 1);
        self.out.push(b'H');
    }

    fn set_style_id(&mut self, id: u16) {
        if self.style != Some(id) {
            self.pens.cell_style(self.table.style(id), &mut self.out);
            self.style = Some(id);
        }
    }

    /// Prints what `cell` shows (a space for a blank) in its style.
    fn print_cell(&mut self, cell: &Cell) {
        self.set_style_id(cell.style);
        match cell.content {
            EMPTY => self.out.push(b' '),
            _ => {
                let text = cell_text(self.table, cell);
                self.raw(text.as_bytes());
            }
        }
    }

    /// One buffer, made active by the caller: cells, tab stops, saved cursor, region.
    fn buffer(&mut self, buf: &Buffer) {
        self.must.fill(false);
        self.must_next.fill(false);
        self.style = None;
        self.set_style_id(DEFAULT_STYLE);
        self.raw(b"\x1b[H\x1b[2J");
        let rows = buf.grid.rows();
        self.wrap_flags(rows);
        for (y, row) in rows.iter().enumerate() {
            std::mem::swap(&mut self.must, &mut self.must_next);
            self.must_next.fill(false);
            let next_wrapped = rows.get(y + 1).is_some_and(Row::wrapped);
            self.row(row, y as u16, next_wrapped);
        }
        self.must.fill(false);
        self.tabs(buf.stops());
        let saved = buf.saved;
        // A saved row below a screen made shorter is clamped by DECRC anyway.
        let last_row = (rows.len() as u16).saturating_sub(1);
        self.cup(saved.y.min(last_row), saved.x.min(self.cols - 1));
        self.style = None;
        let mut words = Vec::new();
        self.pens.words(&saved.style, &mut words);
        self.raw(&words);
        self.raw(b"\x1b(");
        self.out.push(saved.charset.final_byte());
        self.raw(b"\x1b7\x1b(B");
        let mut close = Vec::new();
        self.pens.link(0, &mut close);
        self.raw(&close);
        if buf.top != 0 || usize::from(buf.bottom) + 1 != rows.len() {
            self.raw(b"\x1b[");
            push_number(&mut self.out, buf.top + 1);
            self.out.push(b';');
            push_number(&mut self.out, buf.bottom + 1);
            self.out.push(b'r');
        }
    }

    /// Marks the rows that continue the one above, as xterm.js marks them: by printing past
    /// the end of the row above. Row 0 is made that way on row 1 and scrolled up. What this
    /// prints is painted over or erased when the rows are painted.
    fn wrap_flags(&mut self, rows: &[Row]) {
        let last = self.cols - 1;
        if rows.len() >= 2 && rows[0].wrapped {
            self.cup(0, last);
            self.raw(b"xx\x1b[S\x1b[H\x1b[X");
        }
        for (y, row) in rows.iter().enumerate().skip(1) {
            if row.wrapped {
                self.cup(y as u16 - 1, last);
                self.raw(b"xx");
            }
        }
        // The rows' painting goes top down, so marks for row `y` are set while painting it.
    }

    /// One row. `next_wrapped`: the next row continues this one.
    fn row(&mut self, row: &Row, y: u16, next_wrapped: bool) {
        let cells = &row.cells;
        let cols = cells.len();
        if row.wrapped && y > 0 {
            // What `wrap_flags` printed at this row's start.
            self.must[0] = true;
        }
        if next_wrapped && cols > 0 {
            self.must[cols - 1] = true;
        }
        let mut x = 0;
        // Where the terminal's cursor is, when it is not at `x`.
        let mut at = usize::MAX;
        let last = cols.saturating_sub(1);
        // A blank in the full pen in the last column is made first, when that takes
        // printing in the column before it.
        let last_full = cols >= 2 && full_blank(self.table, &cells[last]);
        let y_next_exists = next_wrapped;
        if last_full && !y_next_exists {
            self.cup(y, (last - 1) as u16);
            self.raw(WIDE);
            self.cup(y, last as u16);
            self.set_style_id(cells[last].style);
            self.raw(b" ");
            self.cup(y, (last - 1) as u16);
            self.set_style_id(DEFAULT_STYLE);
            self.raw(b"\x1b[@");
            self.must[last - 1] = true;
            self.must[last] = false;
        }
        let end = cells
            .iter()
            .enumerate()
            .rposition(|(i, c)| c.has_content() || c.style != DEFAULT_STYLE || self.must[i])
            .map_or(0, |i| i + 1);
        let end = if last_full && !y_next_exists {
            end.min(last)
        } else {
            end
        };
        while x < end {
            let cell = cells[x];
            // A wide character's spacer was written with it; a spacer left alone (xterm.js
            // leaves one when a character is inserted into a wide one) reads as a blank.
            if cell.is_spacer() && x > 0 && cells[x - 1].is_wide() && !cell.has_content() {
                x += 1;
                continue;
            }
            if full_blank(self.table, &cell) {
                if at != x {
                    self.cup(y, x as u16);
                }
                if x == last {
                    // Only with the next row continuing this one: a wide character that
                    // does not fit blanks the column in the pen and wraps.
                    self.set_style_id(cell.style);
                    self.raw(WIDE);
                    self.must_next[0] = true;
                    if cols > 1 {
                        self.must_next[1] = true;
                    }
                    at = usize::MAX;
                    x += 1;
                    continue;
                }
                // A print into a wide character's second column blanks its first in the
                // pen: the next column is painted again after.
                self.raw(WIDE);
                self.cup(y, x as u16 + 1);
                self.set_style_id(cell.style);
                self.raw(b" ");
                self.must[x + 1] = true;
                at = x + 2;
                x += 1;
                continue;
            }
            // A combining mark that joined nothing (it followed a control, not text): xterm.js
            // keeps it as a zero-width cell, which printing it after an SGR makes again.
            if cell.is_spacer() && cell.has_content() {
                if at != x {
                    self.cup(y, x as u16);
                }
                self.style = None;
                self.print_cell(&cell);
                x += 1;
                at = x;
                continue;
            }
            let blank = !cell.has_content();
            if blank {
                let run = cells[x..end]
                    .iter()
                    .take_while(|c| {
                        !c.has_content() && c.style == cell.style && !full_blank(self.table, c)
                    })
                    .count()
                    .max(1);
                let must = self.must[x..x + run].iter().any(|&m| m);
                if at != x {
                    self.cup(y, x as u16);
                }
                if cell.style != DEFAULT_STYLE || must {
                    self.set_style_id(cell.style);
                    self.csi(run as u16, b'X');
                }
                at = x;
                x += run;
                continue;
            }
            if at != x {
                self.cup(y, x as u16);
            }
            self.print_cell(&cell);
            // A wide character whose second column text overwrote: only printing past the
            // right margin with autowrap off does that (the print then lands in the last
            // column without blanking the wide character), so that is how it is made again.
            if cell.is_wide() && x + 1 == cols - 1 && !cells[x + 1].is_spacer() {
                self.raw(b"\x1b[?7l");
                self.print_cell(&cells[x + 1]);
                self.raw(b"\x1b[?7h");
                x = cols;
                at = usize::MAX;
                continue;
            }
            x += if cell.is_wide() { 2 } else { 1 };
            at = x;
        }
    }

    /// Clears every tab stop, then sets this buffer's.
    fn tabs(&mut self, tabs: &[bool]) {
        self.raw(b"\x1b[3g");
        for (x, _) in tabs.iter().enumerate().filter(|(_, set)| **set) {
            self.cup(0, x as u16);
            self.raw(b"\x1bH");
        }
    }

    fn set_mode(&mut self, private: bool, n: u16, on: bool) {
        self.raw(if private { b"\x1b[?" } else { b"\x1b[" });
        push_number(&mut self.out, n);
        self.out.push(if on { b'h' } else { b'l' });
    }

    fn modes(&mut self, emu: &Emulator) {
        let m = &emu.modes;
        self.raw(if m.app_keypad { b"\x1b=" } else { b"\x1b>" });
        self.set_mode(true, 1, m.app_cursor);
        self.set_mode(true, 2004, m.bracketed_paste);
        self.set_mode(true, 1004, m.focus_events);
        self.set_mode(true, 2031, m.colour_scheme_reports);
        self.set_mode(true, 2026, m.synchronized_output);
        // Mouse tracking is one setting: all off, then the one in effect.
        self.raw(b"\x1b[?9l\x1b[?1000l\x1b[?1002l\x1b[?1003l");
        if let Some(mode) = m.mouse.mode() {
            self.set_mode(true, mode, true);
        }
        debug_assert!(m.mouse != MouseTracking::None || m.mouse.mode().is_none());
        self.raw(b"\x1b[?1006l\x1b[?1016l");
        match m.mouse_encoding {
            MouseEncoding::Default => {}
            MouseEncoding::Sgr => self.set_mode(true, 1006, true),
            MouseEncoding::SgrPixels => self.set_mode(true, 1016, true),
        }
        self.raw(b"\x1b[");
        push_number(&mut self.out, u16::from(m.cursor_style));
        self.raw(b" q");
        self.set_mode(true, 25, !m.cursor_hidden);
        self.set_mode(true, 45, m.reverse_wrap);
        self.set_mode(false, 20, m.newline);
        self.raw(b"\x1b]2;");
        self.raw(emu.title.as_bytes());
        self.raw(b"\x1b\\");
    }

    /// The cursor, with origin mode, autowrap and insert mode set around it.
    fn cursor(&mut self, emu: &Emulator, buf: &Buffer) {
        let m = &emu.modes;
        let origin_top = if m.origin { buf.top } else { 0 };
        if m.origin {
            self.set_mode(true, 6, true);
        }
        let (x, y) = (buf.x, buf.y);
        let row_y = y.saturating_sub(origin_top);
        if x >= self.cols {
            // A pending wrap: print the last column again.
            let cells = &buf.grid.rows()[usize::from(y)].cells;
            let last = usize::from(self.cols - 1);
            let wide_before = last > 0 && cells[last - 1].is_wide();
            let at = match cells[last].is_spacer() && wide_before {
                true => last - 1,
                false => last,
            };
            self.style = None;
            if wide_before && at == last {
                // Text overwrote the wide character's second column past the margin (see
                // `row`): printed again the same way, or the print would blank it.
                self.cup(row_y, (last - 1) as u16);
                self.print_cell(&cells[last - 1]);
                self.raw(b"\x1b[?7l");
                self.print_cell(&cells[last]);
                self.raw(b"\x1b[?7h");
            } else {
                self.cup(row_y, at as u16);
                let cell = cells[at];
                self.print_cell(&cell);
            }
        } else {
            self.cup(row_y, x);
        }
        if !m.autowrap {
            self.set_mode(true, 7, false);
        }
        if m.insert {
            self.set_mode(false, 4, true);
        }
    }

    /// The cursor placed again after a restore, without printing (a pending wrap becomes the
    /// last column).
    fn cursor_at(&mut self, emu: &Emulator, buf: &Buffer) {
        let origin_top = if emu.modes.origin { buf.top } else { 0 };
        self.cup(buf.y.saturating_sub(origin_top), buf.x.min(self.cols - 1));
    }

    fn charsets(&mut self, emu: &Emulator) {
        for (n, set) in emu.g.iter().enumerate() {
            self.out.push(0x1b);
            self.out.push(b"()*+"[n]);
            self.out.push(set.final_byte());
        }
        self.raw(match emu.gl {
            0 => b"\x0f",
            1 => b"\x0e",
            2 => b"\x1bn",
            _ => b"\x1bo",
        });
    }
}
