//! [`Style`]: what SGR sets for the cells printed after it, and [`Color`], packed small.
//!
//! A style is 20 bytes; a screen has few distinct ones at a time, so cells carry a 16-bit
//! index into the screen's [`StyleTable`](crate::table::StyleTable) instead of the style.
//!
//! The underline is kept as xterm.js keeps it, because its quirks show: a flag in the
//! foreground word ([`Flag::Underlined`]), and an "extended" part (style, colour, OSC 8 link)
//! that counts only while [`Flag::Extended`] is set. SGR keeps the two in step, but DECRC
//! restores the flags alone and leaves the extended part as it was, so they can disagree.

/// A colour: the terminal's default, one of the 256 palette entries, or 24-bit RGB. Packed in
/// a `u32` (tag in the top byte) so a style hashes and compares as four words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Color(u32);

const TAG_ANSI: u32 = 1 << 24;
const TAG_RGB: u32 = 2 << 24;
const TAG_INDEXED: u32 = 3 << 24;

/// What a [`Color`] is, unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorKind {
    /// The terminal's own foreground or background.
    Default,
    /// One of the 16 ANSI colours as SGR 30–37, 90–97 (and the backgrounds) name them:
    /// xterm.js keeps these apart from the same palette entries named by `38;5;n`.
    Ansi(u8),
    /// Palette entry 0–255, named by `38;5;n`.
    Indexed(u8),
    /// 24-bit colour.
    Rgb(u8, u8, u8),
}

impl Color {
    /// The terminal's default.
    pub const DEFAULT: Color = Color(0);

    /// ANSI colour `n` (0–15).
    pub fn ansi(n: u8) -> Color {
        Color(TAG_ANSI | u32::from(n & 15))
    }

    /// Palette entry `n`.
    pub fn indexed(n: u8) -> Color {
        Color(TAG_INDEXED | u32::from(n))
    }

    /// An RGB colour.
    pub fn rgb(r: u8, g: u8, b: u8) -> Color {
        Color(TAG_RGB | u32::from(r) << 16 | u32::from(g) << 8 | u32::from(b))
    }

    /// The colour unpacked.
    pub fn kind(self) -> ColorKind {
        match self.0 & 0xff00_0000 {
            TAG_ANSI => ColorKind::Ansi(self.0 as u8),
            TAG_INDEXED => ColorKind::Indexed(self.0 as u8),
            TAG_RGB => ColorKind::Rgb((self.0 >> 16) as u8, (self.0 >> 8) as u8, self.0 as u8),
            _ => ColorKind::Default,
        }
    }
}

/// How text is underlined (SGR 4, `4:n` and 21).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Underline {
    /// Not underlined.
    #[default]
    None,
    /// SGR 4 or `4:1`.
    Single,
    /// SGR 21 or `4:2`.
    Double,
    /// `4:3`.
    Curly,
    /// `4:4`.
    Dotted,
    /// `4:5`.
    Dashed,
}

impl Underline {
    /// The style for `4:n`; `None` for an unknown `n`, which terminals ignore.
    pub fn of_subparam(n: u16) -> Option<Underline> {
        Some(match n {
            0 => Underline::None,
            1 => Underline::Single,
            2 => Underline::Double,
            3 => Underline::Curly,
            4 => Underline::Dotted,
            5 => Underline::Dashed,
            _ => return None,
        })
    }

    /// `n` of `4:n`.
    pub fn subparam(self) -> u16 {
        self as u16
    }
}

/// One on/off attribute. Bold and faint are separate flags, as in every terminal: `22`
/// clears both, and neither `1` nor `2` clears the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum Flag {
    /// SGR 1.
    Bold = 1,
    /// SGR 2.
    Faint = 1 << 1,
    /// SGR 3.
    Italic = 1 << 2,
    /// SGR 5.
    Blink = 1 << 3,
    /// SGR 7.
    Inverse = 1 << 4,
    /// SGR 8.
    Hidden = 1 << 5,
    /// SGR 9.
    Strike = 1 << 6,
    /// SGR 53.
    Overline = 1 << 7,
    /// xterm.js's underline flag (`FgFlags.UNDERLINE`): set by SGR 4 and 21, cleared by 24 and
    /// `4:0`. With [`Flag::Extended`] the style is [`Style::underline`], without it single.
    Underlined = 1 << 8,
    /// xterm.js's `HAS_EXTENDED`: the extended part (underline style and colour, link) counts.
    /// SGR and OSC 8 set it when that part holds a style or a link; DECRC restores it alone.
    Extended = 1 << 9,
}

impl Flag {
    /// Every flag with the SGR number that sets it, in the order a repaint writes them.
    pub const SGR: [(Flag, u16); 8] = [
        (Flag::Bold, 1),
        (Flag::Faint, 2),
        (Flag::Italic, 3),
        (Flag::Blink, 5),
        (Flag::Inverse, 7),
        (Flag::Hidden, 8),
        (Flag::Strike, 9),
        (Flag::Overline, 53),
    ];
}

/// The attributes of a cell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Style {
    /// Foreground.
    pub fg: Color,
    /// Background.
    pub bg: Color,
    /// Underline colour (SGR 58; SGR 59 makes it white, as xterm.js stores its "unset" -1).
    pub underline_color: Color,
    /// Underline style of the extended part.
    pub underline: Underline,
    pub(crate) flags: u16,
    /// OSC 8 link: 0 for none, else the table's link index plus one.
    pub link: u16,
}

/// Three words rather than a write per field: the style table hashes a style per new pen.
impl std::hash::Hash for Style {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(u64::from(self.fg.0) | u64::from(self.bg.0) << 32);
        state.write_u64(u64::from(self.underline_color.0) | u64::from(self.flags) << 32);
        state.write_u64(u64::from(self.link) | (self.underline as u64) << 16);
    }
}

impl Style {
    /// Every field folded into one word, for [`crate::pen_cache`]'s slots (not a hash anyone
    /// relies on to spread).
    pub(crate) fn mix(&self) -> u64 {
        let colours = u64::from(self.fg.0)
            ^ u64::from(self.bg.0).rotate_left(21)
            ^ u64::from(self.underline_color.0).rotate_left(42);
        colours ^ u64::from(self.flags) << 7 ^ u64::from(self.link) << 29 ^ self.underline as u64
    }

    /// Whether `flag` is on.
    pub fn has(&self, flag: Flag) -> bool {
        self.flags & flag as u16 != 0
    }

    /// Turns `flag` on or off.
    pub fn set(&mut self, flag: Flag, on: bool) {
        match on {
            true => self.flags |= flag as u16,
            false => self.flags &= !(flag as u16),
        }
    }

    /// What erasing with this pen leaves: its background only (background colour erase, as
    /// xterm and xterm.js do).
    pub fn erased(&self) -> Style {
        Style {
            bg: self.bg,
            ..Style::default()
        }
    }

    /// What a cell printed with this pen keeps: xterm.js stores the extended part only while
    /// [`Flag::Extended`] is set, so without it that part is dropped.
    pub fn stored(&self) -> Style {
        match self.has(Flag::Extended) {
            true => *self,
            false => Style {
                underline: Underline::None,
                underline_color: Color::DEFAULT,
                link: 0,
                ..*self
            },
        }
    }

    /// Sets [`Flag::Extended`] from the extended part, as xterm.js's `updateExtended` does
    /// after SGR 0, 4, 21, 24, 59 and OSC 8 (but not 58).
    pub fn update_extended(&mut self) {
        let extended = self.underline != Underline::None || self.link != 0;
        self.set(Flag::Extended, extended);
    }

    /// The flags and colours alone: what DECSC saves (xterm.js's `fg` and `bg` words).
    pub fn words(&self) -> Style {
        Style {
            underline: Underline::None,
            underline_color: Color::DEFAULT,
            link: 0,
            ..*self
        }
    }

    /// What xterm.js shows of the underline: none, or its style, colour and whether it is
    /// a link's. A link is always drawn underlined (dashed, and reported as its style only
    /// with the flag); its colour is the foreground's without the extended part.
    pub fn shown_underline(&self) -> Option<(Underline, Color)> {
        let extended = self.has(Flag::Extended);
        let flag = self.has(Flag::Underlined);
        let ext_style = match self.link {
            0 => self.underline,
            _ => Underline::Dashed,
        };
        if !(flag || (extended && ext_style != Underline::None)) {
            return None;
        }
        let style = match (flag, extended) {
            (false, _) => Underline::None,
            (true, true) => ext_style,
            (true, false) => Underline::Single,
        };
        let colour = if extended {
            self.underline_color
        } else {
            self.fg
        };
        Some((style, colour))
    }

    /// Appends the SGR sequence that sets this style's flags and colours from any other: a
    /// reset, then each attribute that is on, then `underline` (`4:n`, nothing for none) and
    /// the underline colour when not the default. The link and the states only DECRC makes
    /// are the repaint's (`pen.rs`).
    pub fn write_sgr(&self, underline: Underline, out: &mut Vec<u8>) {
        out.extend_from_slice(b"\x1b[0");
        for (flag, n) in Flag::SGR {
            if self.has(flag) {
                push_param(out, n);
            }
        }
        match underline {
            Underline::None => {}
            Underline::Single => push_param(out, 4),
            other => {
                out.extend_from_slice(b";4:");
                push_number(out, other.subparam());
            }
        }
        write_color(out, self.fg, 30, 90, 38);
        write_color(out, self.bg, 40, 100, 48);
        if self.underline_color != Color::DEFAULT {
            write_color(out, self.underline_color, 0, 0, 58);
        }
        out.push(b'm');
    }
}

/// Appends `;n`.
fn push_param(out: &mut Vec<u8>, n: u16) {
    out.push(b';');
    push_number(out, n);
}

/// Appends the decimal digits of `n`.
pub(crate) fn push_number(out: &mut Vec<u8>, n: u16) {
    let mut digits = [0u8; 5];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Appends one colour: the short forms for the 16 ANSI colours (`base`, `bright`; the
/// underline colour has none and takes them as palette entries), `ext;5;n` or
/// `ext;2;r;g;b` otherwise.
fn write_color(out: &mut Vec<u8>, color: Color, base: u16, bright: u16, ext: u16) {
    match color.kind() {
        ColorKind::Default => {}
        ColorKind::Ansi(n) if base != 0 && n < 8 => push_param(out, base + u16::from(n)),
        ColorKind::Ansi(n) if base != 0 => push_param(out, bright + u16::from(n - 8)),
        ColorKind::Ansi(n) | ColorKind::Indexed(n) => {
            push_param(out, ext);
            push_param(out, 5);
            push_param(out, u16::from(n));
        }
        ColorKind::Rgb(r, g, b) => {
            push_param(out, ext);
            push_param(out, 2);
            for c in [r, g, b] {
                push_param(out, u16::from(c));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_pack_and_unpack() {
        assert_eq!(Color::DEFAULT.kind(), ColorKind::Default);
        assert_eq!(Color::indexed(0).kind(), ColorKind::Indexed(0));
        assert_eq!(Color::ansi(9).kind(), ColorKind::Ansi(9));
        assert_ne!(Color::ansi(1), Color::indexed(1));
        assert_eq!(Color::indexed(255).kind(), ColorKind::Indexed(255));
        assert_eq!(Color::rgb(0, 0, 0).kind(), ColorKind::Rgb(0, 0, 0));
        assert_eq!(Color::rgb(1, 2, 3).kind(), ColorKind::Rgb(1, 2, 3));
        assert_ne!(Color::rgb(0, 0, 0), Color::DEFAULT);
        assert_ne!(Color::indexed(0), Color::DEFAULT);
    }

    #[test]
    fn bold_and_faint_are_written_as_two_flags_after_a_reset() {
        let mut style = Style::default();
        style.set(Flag::Faint, true);
        style.set(Flag::Bold, true);
        style.underline = Underline::Curly;
        style.fg = Color::ansi(9);
        style.bg = Color::rgb(1, 2, 3);
        style.underline_color = Color::indexed(200);
        let mut out = Vec::new();
        style.write_sgr(style.underline, &mut out);
        assert_eq!(out, b"\x1b[0;1;2;4:3;91;48;2;1;2;3;58;5;200m");
    }

    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0u16, 7, 10, 99, 255, 65535] {
            let mut out = Vec::new();
            push_number(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }
}
