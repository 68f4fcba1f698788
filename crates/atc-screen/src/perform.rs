//! What each control, escape and control sequence does: the parser's [`Perform`] calls mapped
//! to the [`Emulator`]'s operations, after xterm.js's handlers. Anything not listed here
//! (reports, window operations, DCS strings) leaves the screen as it was.

use crate::charset::Charset;
use crate::emulator::{CharEdit, Emulator};
use crate::modes::{MouseEncoding, MouseTracking};
use crate::parser::{Params, Perform};
use crate::sgr;
use crate::table::{Link, MAX_URI};

/// Longest window title kept.
const MAX_TITLE: usize = 1024;

impl Perform for Emulator {
    fn print_ascii(&mut self, text: &[u8]) {
        Emulator::print_ascii(self, text);
    }

    fn print_char(&mut self, c: char) {
        Emulator::print_char(self, c);
    }

    fn print_chars(&mut self, chars: &[char]) {
        Emulator::print_chars(self, chars);
    }

    fn execute(&mut self, byte: u8) {
        self.join = 0;
        match byte {
            0x08 => self.backspace(),
            0x09 if self.buf().x < self.cols => {
                let stop = self.buf().next_stop();
                self.buf_mut().x = stop;
            }
            0x0a..=0x0c => self.line_feed(),
            0x0d => self.buf_mut().x = 0,
            0x0e => self.set_gl(1),
            0x0f => self.set_gl(0),
            _ => {}
        }
    }

    fn esc_dispatch(&mut self, intermediates: &[u8], final_byte: u8) {
        self.join = 0;
        match (intermediates, final_byte) {
            ([], b'7') => self.save_cursor(),
            ([], b'8') => self.restore_cursor(),
            ([], b'D') => self.index(),
            ([], b'E') => {
                self.buf_mut().x = 0;
                self.index();
            }
            ([], b'H') => {
                let x = usize::from(self.buf().x);
                if let Some(stop) = self.buf_mut().tabs.get_mut(x) {
                    *stop = true;
                }
            }
            ([], b'M') => self.reverse_index(),
            ([], b'=') => self.modes.app_keypad = true,
            ([], b'>') => self.modes.app_keypad = false,
            ([], b'c') => self.full_reset(),
            ([], b'n') | ([], b'}') => self.set_gl(2),
            ([], b'o') | ([], b'|') => self.set_gl(3),
            ([], b'~') => self.set_gl(1),
            ([b'#'], b'8') => self.alignment_test(),
            ([b'%'], b'@' | b'G') => {
                self.set_gl(0);
                self.designate(0, Charset::Ascii);
            }
            ([g @ (b'(' | b')' | b'*' | b'+' | b'-' | b'.')], set) => {
                let n = match g {
                    b'(' => 0,
                    b')' | b'-' => 1,
                    b'*' | b'.' => 2,
                    _ => 3,
                };
                self.designate(n, Charset::of_final(set));
            }
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, marker: u8, params: &Params, intermediates: &[u8], final_byte: u8) {
        // xterm.js forgets the character printed last after the handler, so REP sees it.
        let join = std::mem::take(&mut self.join);
        let n = |i: usize| i64::from(params.or(i, 1));
        let count = |i: usize| params.or(i, 1) as usize;
        match (marker, intermediates, final_byte) {
            (0, [], b'@') => self.edit_chars(CharEdit::Insert, count(0)),
            (0, [], b'A') => self.cursor_up(n(0)),
            (0, [], b'B') => self.cursor_down(n(0)),
            (0, [], b'C' | b'a') => self.move_cursor(n(0), 0),
            (0, [], b'D') => self.move_cursor(-n(0), 0),
            (0, [], b'E') => {
                self.cursor_down(n(0));
                self.buf_mut().x = 0;
            }
            (0, [], b'F') => {
                self.cursor_up(n(0));
                self.buf_mut().x = 0;
            }
            // xterm.js passes the row as it is, which origin mode then offsets again.
            (0, [], b'G' | b'`') => {
                let y = i64::from(self.buf().y);
                self.set_cursor(n(0) - 1, y);
            }
            (0, [], b'H' | b'f') => {
                let x = if params.len() >= 2 { n(1) - 1 } else { 0 };
                self.set_cursor(x, n(0) - 1);
            }
            (0, [], b'I') if self.buf().x < self.cols => {
                for _ in 0..count(0).min(usize::from(self.cols)) {
                    let stop = self.buf().next_stop();
                    self.buf_mut().x = stop;
                }
            }
            (0, [], b'Z') if self.buf().x < self.cols => {
                for _ in 0..count(0).min(usize::from(self.cols)) {
                    let stop = self.buf().prev_stop();
                    self.buf_mut().x = stop;
                }
            }
            (0 | b'?', [], b'J') => self.erase_in_display(params.get(0)),
            (0 | b'?', [], b'K') => self.erase_in_line(params.get(0)),
            (0, [], b'L') => self.edit_lines(true, count(0)),
            (0, [], b'M') => self.edit_lines(false, count(0)),
            (0, [], b'P') => self.edit_chars(CharEdit::Delete, count(0)),
            (0, [], b'S') => self.scroll_up(None, count(0)),
            (0, [], b'T') => self.scroll_down(None, count(0), false),
            (0, [], b'X') => self.edit_chars(CharEdit::Erase, count(0)),
            (0, [], b'b') => {
                self.join = join;
                self.repeat(count(0));
                self.join = 0;
            }
            (0, [], b'd') => {
                let x = i64::from(self.buf().x);
                self.set_cursor(x, n(0) - 1);
            }
            (0, [], b'e') => self.move_cursor(0, n(0)),
            (0, [], b'g') => match params.get(0) {
                0 => {
                    let x = usize::from(self.buf().x);
                    if let Some(stop) = self.buf_mut().tabs.get_mut(x) {
                        *stop = false;
                    }
                }
                3 => self.buf_mut().tabs.fill(false),
                _ => {}
            },
            (0, [], b'h') => self.set_ansi_modes(params, true),
            (0, [], b'l') => self.set_ansi_modes(params, false),
            (b'?', [], b'h') => self.set_dec_modes(params, true),
            (b'?', [], b'l') => self.set_dec_modes(params, false),
            (0, [], b'm') => {
                let mut pen = self.pen;
                sgr::apply(&mut pen, params);
                self.set_pen(pen);
            }
            (0, [], b'r') => self.set_scroll_region(params),
            (0, [], b's') => self.save_cursor(),
            (0, [], b'u') => self.restore_cursor(),
            (0, [b' '], b'q') => {
                let style = if params.is_empty() { 1 } else { params.get(0) };
                self.modes.cursor_style = style.min(6) as u8;
            }
            (0, [b' '], b'@') => self.edit_columns(CharEdit::Delete, false, count(0)),
            (0, [b' '], b'A') => self.edit_columns(CharEdit::Insert, false, count(0)),
            (0, [b'\''], b'}') => self.edit_columns(CharEdit::Insert, true, count(0)),
            (0, [b'\''], b'~') => self.edit_columns(CharEdit::Delete, true, count(0)),
            (0, [b'!'], b'p') => self.soft_reset(),
            _ => {}
        }
    }

    fn osc_dispatch(&mut self, data: &[u8]) {
        self.join = 0;
        let Some(at) = data.iter().position(|&b| b == b';') else {
            return;
        };
        match &data[..at] {
            b"0" | b"2" => {
                let title = String::from_utf8_lossy(&data[at + 1..]);
                self.title = title.chars().take(MAX_TITLE).collect();
            }
            b"8" => self.hyperlink(&data[at + 1..]),
            _ => {}
        }
    }
}

impl Emulator {
    /// CUU: stops at the region's top when starting inside or below it.
    fn cursor_up(&mut self, n: i64) {
        let to_top = i64::from(self.buf().y) - i64::from(self.buf().top);
        let by = if to_top >= 0 { n.min(to_top) } else { n };
        self.move_cursor(0, -by);
    }

    /// CUD: stops at the region's bottom when starting inside or above it.
    fn cursor_down(&mut self, n: i64) {
        let to_bottom = i64::from(self.buf().bottom) - i64::from(self.buf().y);
        let by = if to_bottom >= 0 { n.min(to_bottom) } else { n };
        self.move_cursor(0, by);
    }

    fn erase_in_display(&mut self, how: u32) {
        self.restrict(self.cols);
        let (x, y) = (usize::from(self.buf().x), usize::from(self.buf().y));
        let (cols, rows) = (usize::from(self.cols), usize::from(self.rows));
        match how {
            0 => {
                self.erase_in_row(y, x, cols, x == 0);
                self.erase_rows(y + 1, rows);
            }
            1 => {
                self.erase_in_row(y, 0, x + 1, true);
                if x + 1 >= cols && y + 1 < rows {
                    self.buf_mut().grid.row_mut(y + 1).wrapped = false;
                }
                self.erase_rows(0, y);
            }
            2 => self.erase_rows(0, rows),
            _ => {}
        }
    }

    fn erase_in_line(&mut self, how: u32) {
        self.restrict(self.cols);
        let (x, y) = (usize::from(self.buf().x), usize::from(self.buf().y));
        let cols = usize::from(self.cols);
        match how {
            0 => self.erase_in_row(y, x, cols, x == 0),
            1 => self.erase_in_row(y, 0, x + 1, false),
            2 => self.erase_in_row(y, 0, cols, true),
            _ => {}
        }
    }

    /// IL (`insert`) and DL: only with the cursor in the region; the cursor to column 0.
    fn edit_lines(&mut self, insert: bool, n: usize) {
        self.restrict(self.cols - 1);
        let buf = self.buf();
        if buf.y < buf.top || buf.y > buf.bottom {
            return;
        }
        let y = buf.y;
        match insert {
            true => self.scroll_down(Some(y), n, true),
            false => self.scroll_up(Some(y), n),
        }
        self.buf_mut().x = 0;
    }

    /// OSC 8 `params;uri`, read as xterm.js reads it: a URI opens a link (after the first
    /// `;`, so a URI may hold more), none closes it unless params were given, which is ignored.
    fn hyperlink(&mut self, data: &[u8]) {
        let Some(at) = data.iter().position(|&b| b == b';') else {
            return;
        };
        let params = String::from_utf8_lossy(&data[..at]);
        let uri = &data[at + 1..];
        if uri.is_empty() {
            if params.trim().is_empty() {
                self.set_link(None);
            }
            return;
        }
        if uri.len() > MAX_URI {
            self.set_link(None);
            return;
        }
        let id = params
            .trim()
            .split(':')
            .find_map(|p| p.strip_prefix("id="))
            .unwrap_or("");
        self.set_link(Some(Link {
            id: id.into(),
            uri: String::from_utf8_lossy(uri).into(),
        }));
    }

    /// REP: the character before the cursor again, when text was the last thing printed.
    fn repeat(&mut self, n: usize) {
        let width = self.join;
        if width == 0 {
            return;
        }
        let (x, y) = (usize::from(self.buf().x), usize::from(self.buf().y));
        let Some(at) = x.checked_sub(usize::from(width)) else {
            return;
        };
        let cell = self.buf().grid.rows()[y].cells[at.min(usize::from(self.cols) - 1)];
        let text = crate::repaint::cell_text(&self.table, &cell);
        // A screenful at most: more only overprints.
        let n = n.min(usize::from(self.cols) * usize::from(self.rows));
        let ascii = !text.is_empty() && text.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
        if ascii {
            // One print, as xterm.js makes it.
            Emulator::print_ascii(self, text.repeat(n).as_bytes());
            return;
        }
        for _ in 0..n {
            for c in text.chars() {
                match c.is_ascii() && !c.is_ascii_control() {
                    true => Emulator::print_ascii(self, &[c as u8]),
                    false => Emulator::print_char(self, c),
                }
            }
        }
    }

    fn set_scroll_region(&mut self, params: &Params) {
        let rows = u32::from(self.rows);
        let top = params.or(0, 1);
        let bottom = match params.get(1) {
            b if params.len() < 2 || b == 0 || b > rows => rows,
            b => b,
        };
        if bottom > top {
            let buf = self.buf_mut();
            buf.top = (top - 1) as u16;
            buf.bottom = (bottom - 1) as u16;
            self.set_cursor(0, 0);
        }
    }

    fn set_ansi_modes(&mut self, params: &Params, on: bool) {
        for group in params.groups() {
            match group[0] {
                4 => self.modes.insert = on,
                20 => self.modes.newline = on,
                _ => {}
            }
        }
    }

    fn set_dec_modes(&mut self, params: &Params, on: bool) {
        for group in params.groups() {
            match group[0] {
                1 => self.modes.app_cursor = on,
                2 if on => {
                    for n in 0..4 {
                        self.designate(n, Charset::Ascii);
                    }
                }
                6 => {
                    self.modes.origin = on;
                    self.set_cursor(0, 0);
                }
                7 => self.modes.autowrap = on,
                25 => self.modes.cursor_hidden = !on,
                45 => self.modes.reverse_wrap = on,
                66 => self.modes.app_keypad = on,
                9 | 1000 | 1002 | 1003 if !on => self.modes.mouse = MouseTracking::None,
                9 => self.modes.mouse = MouseTracking::X10,
                1000 => self.modes.mouse = MouseTracking::Normal,
                1002 => self.modes.mouse = MouseTracking::ButtonMotion,
                1003 => self.modes.mouse = MouseTracking::AnyMotion,
                1004 => self.modes.focus_events = on,
                1006 if on => self.modes.mouse_encoding = MouseEncoding::Sgr,
                1016 if on => self.modes.mouse_encoding = MouseEncoding::SgrPixels,
                1006 | 1016 => self.modes.mouse_encoding = MouseEncoding::Default,
                1048 if on => self.save_cursor(),
                1048 => self.restore_cursor(),
                1049 if on => {
                    self.save_cursor();
                    self.enter_alt();
                }
                47 | 1047 if on => self.enter_alt(),
                47 | 1047 | 1049 => {
                    self.leave_alt();
                    if group[0] == 1049 {
                        self.restore_cursor();
                    }
                }
                2004 => self.modes.bracketed_paste = on,
                2026 => self.modes.synchronized_output = on,
                2031 => self.modes.colour_scheme_reports = on,
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Terminal;

    #[test]
    fn rep_repeats_the_character_printed_just_before_it() {
        let mut term = Terminal::new(20, 2);
        term.process(b"ab\x1b[3b");
        assert_eq!(term.text().rows[0], "abbbb");
        // Anything but text in between, and there is nothing to repeat.
        term.process(b"\r\n\x1b[mx\x1b[1C\x1b[2b");
        assert_eq!(term.text().rows[1], "x");
    }

    #[test]
    fn osc_8_links_the_text_after_it_until_closed() {
        let mut term = Terminal::new(20, 2);
        term.process(b"\x1b]8;id=7;https://a/;b\x1b\\ab\x1b]8;;\x1b\\c");
        let emu = &term.emulator;
        let cells = emu.buf().grid.rows()[0].cells();
        let link = emu.table.style(cells[0].style()).link;
        let target = emu.table.link(link).expect("a link");
        assert_eq!((&*target.id, &*target.uri), ("7", "https://a/;b"));
        assert_eq!(emu.table.style(cells[1].style()).link, link);
        assert_eq!(emu.table.style(cells[2].style()).link, 0);
    }
}
