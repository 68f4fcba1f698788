//! SGR (`CSI … m`): how its parameters change the pen, as xterm.js reads them.

use crate::parser::{Params, MAX_PARAMS};
use crate::style::{Color, Flag, Style, Underline};

/// Applies one SGR sequence's parameters to `pen`.
pub fn apply(pen: &mut Style, params: &Params) {
    if params.is_empty() {
        reset(pen);
        return;
    }
    // At most MAX_PARAMS groups: gathered on the stack, as SGR comes every few characters.
    let mut gathered: [&[u32]; MAX_PARAMS] = [&[]; MAX_PARAMS];
    let mut n = 0;
    for group in params.groups() {
        gathered[n] = group;
        n += 1;
    }
    let groups = &gathered[..n];
    let mut i = 0;
    while i < groups.len() {
        let group = groups[i];
        i += 1;
        let p = group[0];
        match p {
            0 => reset(pen),
            1 => pen.set(Flag::Bold, true),
            2 => pen.set(Flag::Faint, true),
            3 => pen.set(Flag::Italic, true),
            4 => {
                let style = match group.get(1) {
                    // xterm.js reads an unknown style as single.
                    Some(&n) => {
                        Underline::of_subparam(n.min(6) as u16).unwrap_or(Underline::Single)
                    }
                    None => Underline::Single,
                };
                underline(pen, style);
            }
            5 => pen.set(Flag::Blink, true),
            7 => pen.set(Flag::Inverse, true),
            8 => pen.set(Flag::Hidden, true),
            9 => pen.set(Flag::Strike, true),
            21 => underline(pen, Underline::Double),
            22 => {
                pen.set(Flag::Bold, false);
                pen.set(Flag::Faint, false);
            }
            23 => pen.set(Flag::Italic, false),
            24 => underline(pen, Underline::None),
            25 => pen.set(Flag::Blink, false),
            27 => pen.set(Flag::Inverse, false),
            28 => pen.set(Flag::Hidden, false),
            29 => pen.set(Flag::Strike, false),
            30..=37 => pen.fg = Color::ansi((p - 30) as u8),
            39 => pen.fg = Color::DEFAULT,
            40..=47 => pen.bg = Color::ansi((p - 40) as u8),
            49 => pen.bg = Color::DEFAULT,
            53 => pen.set(Flag::Overline, true),
            55 => pen.set(Flag::Overline, false),
            59 => {
                // xterm.js stores -1, which reads back as 24-bit white.
                pen.underline_color = Color::rgb(255, 255, 255);
                pen.update_extended();
            }
            90..=97 => pen.fg = Color::ansi((p - 90 + 8) as u8),
            100..=107 => pen.bg = Color::ansi((p - 100 + 8) as u8),
            38 | 48 | 58 => {
                let (color, used) = extended_color(group, &groups[i..]);
                i += used;
                if let Some(color) = color {
                    match p {
                        38 => pen.fg = color,
                        48 => pen.bg = color,
                        _ => pen.underline_color = color,
                    }
                }
            }
            _ => {}
        }
    }
}

/// SGR 0: everything but the link, which only OSC 8 ends.
fn reset(pen: &mut Style) {
    *pen = Style {
        link: pen.link,
        ..Style::default()
    };
    pen.update_extended();
}

/// SGR 4, 21, 24: the style into the extended part, the flag on unless it is none.
fn underline(pen: &mut Style, style: Underline) {
    pen.underline = style;
    pen.set(Flag::Underlined, style != Underline::None);
    pen.update_extended();
}

/// The colour of a `38`/`48`/`58` group: with its sub-parameters (`38:5:n`, `38:2::r:g:b`,
/// `38:2:r:g:b`), or from the parameters after it (`38;5;n`, `38;2;r;g;b`). Returns the
/// colour and how many following parameters it took.
fn extended_color(group: &[u32], rest: &[&[u32]]) -> (Option<Color>, usize) {
    if group.len() > 1 {
        let sub = &group[1..];
        let color = match sub[0] {
            5 => sub.get(1).map(|&n| Color::indexed(n as u8)),
            2 => {
                // With the colour-space slot (`2::r:g:b`) or without it (`2:r:g:b`).
                let rgb = if sub.len() >= 5 {
                    &sub[2..5]
                } else {
                    &sub[1..]
                };
                let c = |k: usize| rgb.get(k).copied().unwrap_or(0) as u8;
                Some(Color::rgb(c(0), c(1), c(2)))
            }
            _ => None,
        };
        return (color, 0);
    }
    let first = |k: usize| rest.get(k).map(|g| g[0]);
    match first(0) {
        Some(5) => (first(1).map(|n| Color::indexed(n as u8)), 2.min(rest.len())),
        Some(2) => {
            let c = |k: usize| first(k).unwrap_or(0) as u8;
            (Some(Color::rgb(c(1), c(2), c(3))), 4.min(rest.len()))
        }
        Some(_) => (None, 1),
        None => (None, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::{Parser, Perform};

    /// Collects the params of the one CSI parsed.
    struct Capture(Option<Params>);

    impl Perform for Capture {
        fn print_ascii(&mut self, _: &[u8]) {}
        fn print_char(&mut self, _: char) {}
        fn execute(&mut self, _: u8) {}
        fn esc_dispatch(&mut self, _: &[u8], _: u8) {}
        fn csi_dispatch(&mut self, _: u8, params: &Params, _: &[u8], _: u8) {
            self.0 = Some(params.clone());
        }
        fn osc_dispatch(&mut self, _: &[u8]) {}
    }

    fn sgr(pen: &mut Style, seq: &str) {
        let mut capture = Capture(None);
        Parser::default().advance(&mut capture, seq.as_bytes());
        apply(pen, &capture.0.expect("a CSI"));
    }

    #[test]
    fn bold_and_faint_stay_separate_until_22() {
        let mut pen = Style::default();
        sgr(&mut pen, "\x1b[1m");
        sgr(&mut pen, "\x1b[2m");
        assert!(pen.has(Flag::Bold) && pen.has(Flag::Faint));
        sgr(&mut pen, "\x1b[22m");
        assert!(!pen.has(Flag::Bold) && !pen.has(Flag::Faint));
    }

    #[test]
    fn colours_in_every_form() {
        let mut pen = Style::default();
        sgr(&mut pen, "\x1b[38;5;200;48;2;1;2;3m");
        assert_eq!((pen.fg, pen.bg), (Color::indexed(200), Color::rgb(1, 2, 3)));
        sgr(&mut pen, "\x1b[38:2::4:5:6;48:5:7;58:2::9:8:7m");
        assert_eq!(pen.fg, Color::rgb(4, 5, 6));
        assert_eq!(pen.bg, Color::indexed(7));
        assert_eq!(pen.underline_color, Color::rgb(9, 8, 7));
        sgr(&mut pen, "\x1b[93;104m");
        assert_eq!((pen.fg, pen.bg), (Color::ansi(11), Color::ansi(12)));
        sgr(&mut pen, "\x1b[39;49;59m");
        assert_eq!((pen.fg, pen.bg), (Color::DEFAULT, Color::DEFAULT));
        assert_eq!(pen.underline_color, Color::rgb(255, 255, 255));
    }

    #[test]
    fn underline_styles_and_the_rest_of_the_attributes() {
        let mut pen = Style::default();
        sgr(&mut pen, "\x1b[4:3;5;7;8;9;53;3m");
        assert_eq!(pen.underline, Underline::Curly);
        for flag in [
            Flag::Blink,
            Flag::Inverse,
            Flag::Hidden,
            Flag::Strike,
            Flag::Overline,
            Flag::Italic,
        ] {
            assert!(pen.has(flag), "{flag:?}");
        }
        sgr(&mut pen, "\x1b[4:0;25;27;28;29;55;23m");
        assert_eq!(pen, Style::default());
        sgr(&mut pen, "\x1b[4m");
        assert!(pen.has(Flag::Underlined) && pen.has(Flag::Extended));
        sgr(&mut pen, "\x1b[21m");
        assert_eq!(pen.underline, Underline::Double);
        sgr(&mut pen, "\x1b[m");
        assert_eq!(pen, Style::default());
    }

    #[test]
    fn the_underline_colour_outlives_24_but_not_0_and_59_makes_it_white() {
        let mut pen = Style::default();
        sgr(&mut pen, "\x1b[4;58;5;9m");
        sgr(&mut pen, "\x1b[24m");
        assert!(!pen.has(Flag::Extended));
        assert_eq!(pen.stored().underline_color, Color::DEFAULT);
        sgr(&mut pen, "\x1b[4:3m");
        assert_eq!(
            pen.shown_underline(),
            Some((Underline::Curly, Color::indexed(9)))
        );
        sgr(&mut pen, "\x1b[59m");
        assert_eq!(
            pen.shown_underline(),
            Some((Underline::Curly, Color::rgb(255, 255, 255)))
        );
        pen.link = 1;
        sgr(&mut pen, "\x1b[0m");
        assert_eq!(pen.underline_color, Color::DEFAULT);
        assert!(pen.has(Flag::Extended), "the link outlives SGR 0");
    }
}
