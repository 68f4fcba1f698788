//! [`Modes`]: the terminal modes a program sets, kept to restate them in a repaint.

/// Mouse tracking (DEC modes 9, 1000, 1002, 1003): one setting, the last one set wins.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MouseTracking {
    /// Off.
    #[default]
    None,
    /// 9: presses only.
    X10,
    /// 1000: presses and releases.
    Normal,
    /// 1002: and motion while a button is down.
    ButtonMotion,
    /// 1003: and all motion.
    AnyMotion,
}

impl MouseTracking {
    /// The DEC mode that turns this on.
    pub fn mode(self) -> Option<u16> {
        match self {
            MouseTracking::None => None,
            MouseTracking::X10 => Some(9),
            MouseTracking::Normal => Some(1000),
            MouseTracking::ButtonMotion => Some(1002),
            MouseTracking::AnyMotion => Some(1003),
        }
    }
}

/// How mouse reports are encoded (1006, 1016).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MouseEncoding {
    /// The original X10 bytes.
    #[default]
    Default,
    /// 1006: `CSI < b;x;y M`.
    Sgr,
    /// 1016: SGR in pixels.
    SgrPixels,
}

/// The modes a repaint restates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Modes {
    /// IRM (4): printing shifts the rest of the row right.
    pub insert: bool,
    /// LNM (20): a line feed also returns the carriage.
    pub newline: bool,
    /// DECCKM (?1): cursor keys send application sequences.
    pub app_cursor: bool,
    /// DECKPAM (`ESC =`, ?66): the keypad sends application sequences.
    pub app_keypad: bool,
    /// DECOM (?6): cursor addressing is relative to the scroll region.
    pub origin: bool,
    /// DECAWM (?7): printing past the right margin wraps.
    pub autowrap: bool,
    /// ?45: backspace at the left margin goes up a wrapped line.
    pub reverse_wrap: bool,
    /// DECTCEM (?25) off.
    pub cursor_hidden: bool,
    /// DECSCUSR's parameter (0 the terminal's default).
    pub cursor_style: u8,
    /// ?2004.
    pub bracketed_paste: bool,
    /// ?1004: focus in and out are reported.
    pub focus_events: bool,
    /// ?2031: colour-scheme changes are reported.
    pub colour_scheme_reports: bool,
    /// ?2026: synchronized output.
    pub synchronized_output: bool,
    /// Mouse tracking.
    pub mouse: MouseTracking,
    /// Mouse report encoding.
    pub mouse_encoding: MouseEncoding,
}

impl Default for Modes {
    fn default() -> Modes {
        Modes {
            insert: false,
            newline: false,
            app_cursor: false,
            app_keypad: false,
            origin: false,
            autowrap: true,
            reverse_wrap: false,
            cursor_hidden: false,
            cursor_style: 0,
            bracketed_paste: false,
            focus_events: false,
            colour_scheme_reports: false,
            synchronized_output: false,
            mouse: MouseTracking::None,
            mouse_encoding: MouseEncoding::Default,
        }
    }
}
