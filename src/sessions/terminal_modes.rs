//! [`TerminalModes`]: the DEC private modes a program can set that vt100 does not keep, so
//! that a repaint can hand them to a fresh client along with the ones vt100 does keep.
//!
//! Claude Code 2.1 sets focus events (1004) and colour-scheme reports (2031) besides the
//! alternate screen, mouse tracking and bracketed paste, which vt100 follows. vt100 passes a
//! `CSI ? Pm h` or `CSI ? Pm l` whose parameters it does not know to its callbacks, from its
//! own parser: so these modes are read from exactly the bytes, in exactly the order, that
//! vt100 parses (a sequence split across reads, or inside a string where it does not count,
//! is seen the way vt100 sees it), and the screen model's fast path, which cuts only text in
//! vte's ground state, cannot skip one.
//!
//! A full reset (RIS, `ESC c`) resets these modes in a terminal, but vt100 runs RIS itself and
//! tells no callback: [`ScreenModel`](super::screen::ScreenModel) finds it in the bytes and
//! calls [`TerminalModes::reset`].

/// A DEC private mode followed here: one vt100 does not keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrivateMode {
    /// 1004: the terminal reports focus in and out (`CSI I`, `CSI O`).
    FocusEvents,
    /// 2031: the terminal reports a change of its light or dark colour scheme.
    ColourSchemeReports,
}

impl PrivateMode {
    /// Every mode followed, in the order a repaint states them.
    pub const ALL: [PrivateMode; 2] = [PrivateMode::FocusEvents, PrivateMode::ColourSchemeReports];

    /// The mode's number in `CSI ? n h`.
    pub fn number(self) -> u16 {
        match self {
            PrivateMode::FocusEvents => 1004,
            PrivateMode::ColourSchemeReports => 2031,
        }
    }

    fn of_number(n: u16) -> Option<PrivateMode> {
        PrivateMode::ALL.into_iter().find(|mode| mode.number() == n)
    }
}

/// Whether a mode is set (`CSI ? n h`) or reset (`CSI ? n l`, and every mode's default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Setting {
    /// Off, as in a fresh terminal.
    #[default]
    Reset,
    /// On.
    Set,
}

/// The settings of the [`PrivateMode`]s, as the program's output left them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TerminalModes {
    focus_events: Setting,
    colour_scheme_reports: Setting,
}

impl TerminalModes {
    /// The setting of `mode`.
    pub fn get(&self, mode: PrivateMode) -> Setting {
        match mode {
            PrivateMode::FocusEvents => self.focus_events,
            PrivateMode::ColourSchemeReports => self.colour_scheme_reports,
        }
    }

    fn set(&mut self, mode: PrivateMode, setting: Setting) {
        match mode {
            PrivateMode::FocusEvents => self.focus_events = setting,
            PrivateMode::ColourSchemeReports => self.colour_scheme_reports = setting,
        }
    }

    /// Follows a DECSET or DECRST with these parameters. Like vt100, a parameter counts only
    /// without sub-parameters (`1004`, not `1004:1`).
    pub fn apply(&mut self, params: &[&[u16]], setting: Setting) {
        for param in params {
            if let [n] = param {
                if let Some(mode) = PrivateMode::of_number(*n) {
                    self.set(mode, setting);
                }
            }
        }
    }

    /// Follows a full reset (RIS): every mode back to its default.
    pub fn reset(&mut self) {
        *self = TerminalModes::default();
    }

    /// Appends the sequences that put a terminal into these settings: every mode, set or
    /// reset, so that a terminal that had one set from an earlier attach loses it.
    pub fn write_formatted(&self, out: &mut Vec<u8>) {
        for mode in PrivateMode::ALL {
            let end = match self.get(mode) {
                Setting::Set => 'h',
                Setting::Reset => 'l',
            };
            out.extend_from_slice(format!("\x1b[?{}{end}", mode.number()).as_bytes());
        }
    }
}

/// vt100 hands over the DECSET and DECRST parameters it does not handle itself. It calls this
/// once per parameter it does not know, each time with all of the sequence's parameters:
/// applying them is idempotent, so the repeats change nothing. A second intermediate is
/// ignored, as vt100 ignores it for the modes it handles.
impl vt100::Callbacks for TerminalModes {
    fn unhandled_csi(
        &mut self,
        _: &mut vt100::Screen,
        i1: Option<u8>,
        _i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        match (i1, c) {
            (Some(b'?'), 'h') => self.apply(params, Setting::Set),
            (Some(b'?'), 'l') => self.apply(params, Setting::Reset),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parser() -> vt100::Parser<TerminalModes> {
        vt100::Parser::new_with_callbacks(
            std::num::NonZeroU16::MIN.saturating_add(23),
            std::num::NonZeroU16::MIN.saturating_add(79),
            0,
            TerminalModes::default(),
        )
    }

    #[test]
    fn a_decset_sets_and_a_decrst_resets_each_mode() {
        for mode in PrivateMode::ALL {
            let mut p = parser();
            assert_eq!(p.callbacks().get(mode), Setting::Reset);
            p.process(format!("\x1b[?{}h", mode.number()).as_bytes());
            assert_eq!(p.callbacks().get(mode), Setting::Set, "{mode:?}");
            p.process(format!("\x1b[?{}l", mode.number()).as_bytes());
            assert_eq!(p.callbacks().get(mode), Setting::Reset, "{mode:?}");
        }
    }

    #[test]
    fn modes_among_others_vt100_handles_count_in_one_sequence() {
        let mut p = parser();
        p.process(b"\x1b[?1049;1004;2004;2031h");
        assert!(p.screen().alternate_screen() && p.screen().bracketed_paste());
        assert_eq!(p.callbacks().get(PrivateMode::FocusEvents), Setting::Set);
        assert_eq!(
            p.callbacks().get(PrivateMode::ColourSchemeReports),
            Setting::Set
        );
        p.process(b"\x1b[?2031;25l");
        assert_eq!(
            p.callbacks().get(PrivateMode::ColourSchemeReports),
            Setting::Reset
        );
        assert_eq!(p.callbacks().get(PrivateMode::FocusEvents), Setting::Set);
    }

    #[test]
    fn what_is_not_a_decset_of_the_mode_changes_nothing() {
        let mut p = parser();
        // Without the private marker (ANSI SM), with a sub-parameter, as text, or cancelled
        // by CAN before its final byte.
        p.process(b"\x1b[1004h\x1b[?1004:1h [?2031h");
        p.process(b"\x1b[?2031\x18h");
        assert_eq!(*p.callbacks(), TerminalModes::default());
    }

    #[test]
    fn the_formatted_settings_state_every_mode() {
        let mut modes = TerminalModes::default();
        let mut out = Vec::new();
        modes.write_formatted(&mut out);
        assert_eq!(out, b"\x1b[?1004l\x1b[?2031l");
        modes.apply(&[&[1004]], Setting::Set);
        out.clear();
        modes.write_formatted(&mut out);
        assert_eq!(out, b"\x1b[?1004h\x1b[?2031l");
        modes.reset();
        assert_eq!(modes, TerminalModes::default());
    }
}
