//! How the repaint sets xterm.js's pen to a [`Style`]: SGR for colours and flags, OSC 8 for
//! links, and for the underline states only a DECRC makes (the underline flag and the
//! "extended" flag out of step with the extended part, see [`crate::style`]) a DECSC/DECRC
//! pair around the part that must not come from the restore.
//!
//! The pair moves the cursor back to where it was and restores the character set in force,
//! so it is harmless while cells are painted, before the buffer's own saved cursor is set.

use crate::style::{Flag, Style, Underline};
use crate::table::StyleTable;

/// A URI for a link that is opened only to set the "extended" flag and closed again.
const SCRATCH_URI: &[u8] = b"about:blank";

/// Writes bytes that set the pen, tracking which link xterm.js has open.
pub struct PenWriter<'a> {
    pub table: &'a StyleTable,
    /// The link xterm.js's pen holds, as a style's `link` names it.
    pub open_link: u16,
}

impl PenWriter<'_> {
    /// OSC 8 opening the table's link `id`, or closing the open one for 0.
    pub fn link(&mut self, id: u16, out: &mut Vec<u8>) {
        if id == self.open_link {
            return;
        }
        out.extend_from_slice(b"\x1b]8;");
        if let Some(link) = self.table.link(id) {
            if !link.id.is_empty() {
                out.extend_from_slice(b"id=");
                out.extend_from_slice(link.id.as_bytes());
            }
            out.push(b';');
            out.extend_from_slice(link.uri.as_bytes());
        } else {
            out.push(b';');
        }
        out.extend_from_slice(b"\x1b\\");
        self.open_link = if self.table.link(id).is_some() { id } else { 0 };
    }

    /// Sets a pen that prints cells in `style`, a style as cells store it
    /// ([`Style::stored`]): what they show is all that must match.
    pub fn cell_style(&mut self, style: &Style, out: &mut Vec<u8>) {
        let extended = style.has(Flag::Extended);
        let flag = style.has(Flag::Underlined);
        if !extended || style.link != 0 {
            // Without the extended part the flag alone is never set (SGR sets both); with a
            // link the style shows as dashed whatever it is.
            self.link(if extended { style.link } else { 0 }, out);
            let underline = if flag {
                Underline::Single
            } else {
                Underline::None
            };
            style.write_sgr(underline, out);
            return;
        }
        self.link(0, out);
        match (flag, style.underline) {
            (true, Underline::None) => {
                // The flag with an empty extended part: the flag from a restore.
                style.write_sgr(Underline::Single, out);
                // 24 keeps the underline colour.
                out.extend_from_slice(b"\x1b7\x1b[24m\x1b8");
            }
            (false, underline) if underline != Underline::None => {
                // A style without the flag: the flags from a restore of a pen whose extended
                // flag a link set.
                self.scratch_link(out);
                style.write_sgr(Underline::None, out);
                out.extend_from_slice(b"\x1b7");
                self.link(0, out);
                style.write_sgr(underline, out);
                out.extend_from_slice(b"\x1b8");
            }
            (_, underline) => style.write_sgr(underline, out),
        }
    }

    /// Sets a pen whose flags and colours are `words` (what DECSC saves), with an empty
    /// extended part and no link.
    pub fn words(&mut self, words: &Style, out: &mut Vec<u8>) {
        let extended = words.has(Flag::Extended);
        let flag = words.has(Flag::Underlined);
        match (flag, extended) {
            (false, true) => {
                self.scratch_link(out);
                words.write_sgr(Underline::None, out);
                // Closing the link would clear the flag again; the caller saves first.
            }
            (true, _) => words.write_sgr(Underline::Single, out),
            (false, false) => {
                self.link(0, out);
                words.write_sgr(Underline::None, out);
            }
        }
    }

    /// Sets the pen to `pen` exactly when SGR and OSC 8 can (its flags in step with its
    /// extended part), and returns false when only a DECRC can.
    pub fn pen(&mut self, pen: &Style, out: &mut Vec<u8>) -> bool {
        let flag = pen.has(Flag::Underlined);
        let extended = pen.has(Flag::Extended);
        let in_step = flag == (pen.underline != Underline::None)
            && extended == (pen.underline != Underline::None || pen.link != 0);
        self.ext(pen, out);
        in_step
    }

    /// Sets the extended part (underline style and colour, link) to `pen`'s, and the flags
    /// and colours with it.
    pub fn ext(&mut self, pen: &Style, out: &mut Vec<u8>) {
        self.link(pen.link, out);
        pen.write_sgr(pen.underline, out);
    }

    fn scratch_link(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"\x1b]8;;");
        out.extend_from_slice(SCRATCH_URI);
        out.extend_from_slice(b"\x1b\\");
        // Not a link of the table: closing it must always be written.
        self.open_link = u16::MAX;
    }
}

#[cfg(test)]
mod tests {
    use crate::Terminal;

    #[test]
    fn an_underline_flag_only_a_restore_makes_is_painted_with_a_restore() {
        let mut term = Terminal::new(10, 2);
        // The flag saved, the extended part emptied by 24, then restored.
        term.process(b"\x1b[4m\x1b7\x1b[24m\x1b8x");
        let repaint = String::from_utf8_lossy(&term.repaint()).into_owned();
        assert!(
            repaint.contains("\x1b[0;4m\x1b7\x1b[24m\x1b8x"),
            "{repaint:?}"
        );
    }
}
