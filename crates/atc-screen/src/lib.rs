//! The screen model (placeholder: vt100 behind the API the emulator will have).

/// A headless terminal.
pub struct Terminal {
    parser: vt100::Parser,
}

impl Terminal {
    /// A blank terminal of `cols`×`rows`.
    pub fn new(cols: u16, rows: u16) -> Terminal {
        let n = |v: u16| std::num::NonZeroU16::new(v.max(1)).expect("non-zero");
        Terminal {
            parser: vt100::Parser::new(n(rows), n(cols), 0),
        }
    }

    /// Feeds output bytes.
    pub fn process(&mut self, bytes: &[u8]) {
        self.parser.process(bytes);
    }

    /// Follows a size change.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        let n = |v: u16| std::num::NonZeroU16::new(v.max(1)).expect("non-zero");
        self.parser.set_size(n(rows), n(cols));
    }

    /// Bytes that, written to a fresh terminal of the same size, reproduce this one.
    pub fn repaint(&self) -> Vec<u8> {
        let screen = self.parser.screen();
        let mut out = if screen.alternate_screen() {
            b"\x1b[?1049h".to_vec()
        } else {
            b"\x1b[?1049l".to_vec()
        };
        out.extend_from_slice(b"\x1b[0m\x1b[2J\x1b[H");
        out.extend_from_slice(screen.contents_formatted().as_bytes());
        out.extend_from_slice(screen.input_mode_formatted().as_bytes());
        out
    }
}
