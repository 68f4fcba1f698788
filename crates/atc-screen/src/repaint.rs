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
use crate::style::{push_number, Style};
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
        style: None,
        cols: emu.cols,
    };
    // 1. The base.
    p.raw(b"\x1b[?1049l\x1b[r\x1b[?6l\x1b[?7h\x1b[4l\x1b[20l\x1b[?45l");
    p.raw(b"\x1b(B\x1b)B\x1b*B\x1b+B\x0f\x1b[0m");
    p.style = Some(DEFAULT_STYLE);
    // 2. The buffers.
    p.buffer(&emu.main);
    if let Some(alt) = &emu.alt {
        // Saves the main screen's cursor again, as the program's own switch did: the pen and
        // character set are still the saved ones here.
        p.raw(b"\x1b[?1049h");
        p.raw(b"\x1b(B");
        p.buffer(alt);
    }
    p.raw(b"\x1b(B");
    // 3. Modes, character sets, title, cursor, pen.
    p.modes(emu);
    let buf = emu.buf();
    p.cursor(emu, buf);
    p.charsets(emu);
    p.style = None;
    p.set_style(emu.pen);
    p.out
}

struct Painter<'a> {
    out: Vec<u8>,
    table: &'a StyleTable,
    /// The pen as last written, if known.
    style: Option<u16>,
    cols: u16,
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
            self.table.style(id).write_sgr(&mut self.out);
            self.style = Some(id);
        }
    }

    fn set_style(&mut self, style: Style) {
        style.write_sgr(&mut self.out);
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
        self.style = None;
        self.set_style_id(DEFAULT_STYLE);
        self.raw(b"\x1b[H\x1b[2J");
        let rows = buf.grid.rows();
        for (y, row) in rows.iter().enumerate() {
            let continues = rows.get(y + 1).is_some_and(Row::wrapped);
            let continued =
                y > 0 && row.wrapped && rows[y - 1].cells.len() == usize::from(self.cols);
            self.row(row, y as u16, continues, continued);
        }
        self.tabs(&buf.tabs);
        let saved = buf.saved;
        self.cup(saved.y, saved.x.min(self.cols - 1));
        self.style = None;
        self.set_style(saved.style);
        self.raw(b"\x1b(");
        self.out.push(saved.charset.final_byte());
        // The caller puts ASCII back in G0, after the alternate screen's switch has saved
        // this again.
        self.raw(b"\x1b7");
        if buf.top != 0 || usize::from(buf.bottom) + 1 != rows.len() {
            self.raw(b"\x1b[");
            push_number(&mut self.out, buf.top + 1);
            self.out.push(b';');
            push_number(&mut self.out, buf.bottom + 1);
            self.out.push(b'r');
        }
    }

    /// One row. `continued`: the previous row was printed to its end and this one's first
    /// print wraps into it. `continues`: this one must be printed to its end.
    fn row(&mut self, row: &Row, y: u16, continues: bool, continued: bool) {
        let cells = &row.cells;
        let cols = cells.len();
        // Blanks in the default style at the end are already there after the clear.
        let end = match continues {
            true => cols,
            false => cells
                .iter()
                .rposition(|c| {
                    c.has_content()
                        || c.style != DEFAULT_STYLE
                        || (c.is_spacer() && c.has_content())
                })
                .map_or(0, |i| i + 1),
        };
        if end == 0 && !continued {
            return;
        }
        if !continued {
            self.cup(y, 0);
        }
        let mut x = 0;
        // Where the terminal's cursor is, when it is not at `x`.
        let mut at = 0;
        while x < end {
            let cell = cells[x];
            // A wide character's spacer was written with it; a spacer left alone (xterm.js
            // leaves one when a character is inserted into a wide one) reads as a blank.
            if cell.is_spacer() && x > 0 && cells[x - 1].is_wide() && !cell.has_content() {
                x += 1;
                at = x;
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
            // The first cell of a continued row wraps into it, the last of a continuing one
            // leaves the wrap pending: both must be printed.
            let must_print = (continues && x + 1 == cols) || (continued && x == 0);
            if blank && !must_print {
                let run = cells[x..end]
                    .iter()
                    .take_while(|c| !c.has_content() && c.style == cell.style)
                    .count();
                let style = *self.table.style(cell.style);
                if style == style.erased() && !(continues && x + run == cols) {
                    if at != x {
                        self.cup(y, x as u16);
                    }
                    if cell.style != DEFAULT_STYLE {
                        self.set_style_id(cell.style);
                        self.csi(run as u16, b'X');
                    }
                    x += run;
                    continue;
                }
            }
            if at != x {
                self.cup(y, x as u16);
            }
            let blank_cell = Cell::blank(cell.style);
            self.print_cell(if blank { &blank_cell } else { &cell });
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
            let at = match cells[last].is_spacer() && last > 0 && cells[last - 1].is_wide() {
                true => last - 1,
                false => last,
            };
            self.cup(row_y, at as u16);
            self.style = None;
            let cell = cells[at];
            self.print_cell(&cell);
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
