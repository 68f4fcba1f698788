//! [`Charset`]: the character sets a program can designate into G0–G3 (`ESC ( 0` and the
//! like), which change what the printable ASCII bytes print.

/// A character set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Charset {
    /// US ASCII (`B`), every terminal's default.
    #[default]
    Ascii,
    /// DEC Special Graphics (`0`): line drawing.
    DecGraphics,
    /// United Kingdom (`A`): `#` is `£`.
    Uk,
}

impl Charset {
    /// The set a designation's final byte names. Sets this model does not know read as ASCII,
    /// as xterm.js reads the ones it does not know.
    pub fn of_final(byte: u8) -> Charset {
        match byte {
            b'0' => Charset::DecGraphics,
            b'A' => Charset::Uk,
            _ => Charset::Ascii,
        }
    }

    /// The final byte that designates this set.
    pub fn final_byte(self) -> u8 {
        match self {
            Charset::Ascii => b'B',
            Charset::DecGraphics => b'0',
            Charset::Uk => b'A',
        }
    }

    /// What the printable ASCII byte `b` prints in this set.
    pub fn map(self, b: u8) -> char {
        match self {
            Charset::Ascii => char::from(b),
            Charset::Uk => match b {
                b'#' => '£',
                _ => char::from(b),
            },
            Charset::DecGraphics => match b {
                b'`' => '◆',
                b'a' => '▒',
                b'b' => '␉',
                b'c' => '␌',
                b'd' => '␍',
                b'e' => '␊',
                b'f' => '°',
                b'g' => '±',
                b'h' => '␤',
                b'i' => '␋',
                b'j' => '┘',
                b'k' => '┐',
                b'l' => '┌',
                b'm' => '└',
                b'n' => '┼',
                b'o' => '⎺',
                b'p' => '⎻',
                b'q' => '─',
                b'r' => '⎼',
                b's' => '⎽',
                b't' => '├',
                b'u' => '┤',
                b'v' => '┴',
                b'w' => '┬',
                b'x' => '│',
                b'y' => '≤',
                b'z' => '≥',
                b'{' => 'π',
                b'|' => '≠',
                b'}' => '£',
                b'~' => '·',
                _ => char::from(b),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_drawing_maps_the_lowercase_letters_and_leaves_the_rest() {
        let drawn: String = b"lqqkxmj"
            .iter()
            .map(|&b| Charset::DecGraphics.map(b))
            .collect();
        assert_eq!(drawn, "┌──┐│└┘");
        assert_eq!(Charset::DecGraphics.map(b'A'), 'A');
        assert_eq!(Charset::Uk.map(b'#'), '£');
        for set in [Charset::Ascii, Charset::DecGraphics, Charset::Uk] {
            assert_eq!(Charset::of_final(set.final_byte()), set);
        }
    }
}
