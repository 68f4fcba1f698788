//! Tracks the terminal modes a session's output turns on and off, and where the output is at
//! a parser ground state, so a fresh attach can replay from a safe boundary preceded by a
//! `prelude` that restores the modes in effect there (protocol §9.7).
//!
//! Only what impd's prelude restores is tracked: alternate screen, mouse modes, bracketed
//! paste, application cursor keys, cursor visibility, focus events and kitty keyboard flags.

/// The modes in effect at one point of the output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Modes {
    alt_screen: bool,
    app_cursor: bool,
    cursor_hidden: bool,
    bracketed_paste: bool,
    focus_events: bool,
    /// DEC private mouse modes that are on (1000, 1002, 1003, 1005, 1006, 1015), sorted.
    mouse: Vec<u16>,
    /// The kitty keyboard flags stack; the last entry is in effect.
    kitty: Vec<u32>,
}

impl Modes {
    /// The bytes that bring a fresh terminal into these modes; empty for the defaults.
    pub fn prelude(&self) -> Vec<u8> {
        let mut out = String::new();
        if self.alt_screen {
            out.push_str("\x1b[?1049h");
        }
        if self.app_cursor {
            out.push_str("\x1b[?1h");
        }
        if self.cursor_hidden {
            out.push_str("\x1b[?25l");
        }
        if self.bracketed_paste {
            out.push_str("\x1b[?2004h");
        }
        if self.focus_events {
            out.push_str("\x1b[?1004h");
        }
        for m in &self.mouse {
            out.push_str(&format!("\x1b[?{m}h"));
        }
        if let Some(flags) = self.kitty.last() {
            out.push_str(&format!("\x1b[>{flags}u"));
        }
        out.into_bytes()
    }

    fn set_private(&mut self, mode: u16, on: bool) {
        match mode {
            1049 | 1047 | 47 => self.alt_screen = on,
            1 => self.app_cursor = on,
            25 => self.cursor_hidden = !on,
            2004 => self.bracketed_paste = on,
            1004 => self.focus_events = on,
            1000 | 1002 | 1003 | 1005 | 1006 | 1015 => {
                self.mouse.retain(|m| *m != mode);
                if on {
                    self.mouse.push(mode);
                    self.mouse.sort_unstable();
                }
            }
            _ => {}
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Ground,
    Escape,
    /// ESC followed by intermediates (e.g. `ESC (`): one more byte ends it.
    EscapeIntermediate,
    Csi,
    /// OSC, DCS, SOS, PM, APC: runs until BEL or ST.
    String,
    /// ESC seen inside a string: `\` ends it.
    StringEscape,
}

/// A small VT parser that follows only what [`Modes`] needs.
#[derive(Clone, Debug)]
pub struct ModeTracker {
    state: State,
    /// The CSI's private marker (`?`, `>`, `<`, `=`) if any.
    marker: Option<u8>,
    params: Vec<u8>,
    modes: Modes,
}

impl Default for ModeTracker {
    fn default() -> ModeTracker {
        ModeTracker {
            state: State::Ground,
            marker: None,
            params: Vec::new(),
            modes: Modes::default(),
        }
    }
}

impl ModeTracker {
    /// True when the next byte would start outside any escape sequence.
    pub fn at_ground(&self) -> bool {
        self.state == State::Ground
    }

    pub fn modes(&self) -> &Modes {
        &self.modes
    }

    /// Feeds one byte.
    pub fn feed(&mut self, b: u8) {
        self.state = match (self.state, b) {
            (State::Ground, 0x1b) => State::Escape,
            (State::Ground, _) => State::Ground,
            (State::Escape, b'[') => {
                self.marker = None;
                self.params.clear();
                State::Csi
            }
            (State::Escape, b']' | b'P' | b'X' | b'^' | b'_') => State::String,
            (State::Escape, 0x20..=0x2f) => State::EscapeIntermediate,
            (State::Escape, 0x1b) => State::Escape,
            (State::Escape, _) => State::Ground,
            (State::EscapeIntermediate, 0x20..=0x2f) => State::EscapeIntermediate,
            (State::EscapeIntermediate, _) => State::Ground,
            (State::Csi, b'?' | b'>' | b'<' | b'=') if self.params.is_empty() => {
                self.marker = Some(b);
                State::Csi
            }
            (State::Csi, 0x20..=0x3f) => {
                if self.params.len() < 64 {
                    self.params.push(b);
                }
                State::Csi
            }
            (State::Csi, 0x40..=0x7e) => {
                self.finish_csi(b);
                State::Ground
            }
            (State::Csi, 0x1b) => State::Escape,
            (State::Csi, _) => State::Csi,
            (State::String, 0x07) => State::Ground,
            (State::String, 0x1b) => State::StringEscape,
            (State::String, _) => State::String,
            (State::StringEscape, b'\\') => State::Ground,
            (State::StringEscape, 0x1b) => State::StringEscape,
            (State::StringEscape, _) => State::String,
        };
    }

    fn numbers(&self) -> Vec<u32> {
        String::from_utf8_lossy(&self.params)
            .split(';')
            .map(|p| p.parse().unwrap_or(0))
            .collect()
    }

    fn finish_csi(&mut self, fin: u8) {
        match (self.marker, fin) {
            (Some(b'?'), b'h' | b'l') => {
                for n in self.numbers() {
                    if let Ok(mode) = u16::try_from(n) {
                        self.modes.set_private(mode, fin == b'h');
                    }
                }
            }
            (Some(b'>'), b'u') => {
                let flags = self.numbers().first().copied().unwrap_or(0);
                if self.modes.kitty.len() < 16 {
                    self.modes.kitty.push(flags);
                }
            }
            (Some(b'<'), b'u') => {
                let n = self.numbers().first().copied().unwrap_or(1).max(1) as usize;
                let keep = self.modes.kitty.len().saturating_sub(n);
                self.modes.kitty.truncate(keep);
            }
            (Some(b'='), b'u') => {
                let flags = self.numbers().first().copied().unwrap_or(0);
                match self.modes.kitty.last_mut() {
                    Some(top) => *top = flags,
                    None => self.modes.kitty.push(flags),
                }
            }
            _ => {}
        }
    }
}
