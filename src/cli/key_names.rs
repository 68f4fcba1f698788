//! Key names as tmux's `send-keys` spells them (`Enter`, `C-c`, `Escape`, `Up`, `M-x`,
//! `F5`, `PageUp`...), turned into the bytes an xterm sends for them, for `atc send --keys`.
//!
//! The rules are tmux's where they can be: names are matched without regard to case; `C-`,
//! `M-` and `S-` (and `^` for Ctrl) prefix a key in any order; a word that is no key name is
//! typed as literal text. Unlike tmux, a modifier on something that is no key (`C-Foo`, `M-`)
//! is an error rather than text: it can only be a misspelt key.
//!
//! The bytes are xterm's in its normal modes: the arrows as `ESC [ A` (not application
//! mode's `ESC O A`, which the client cannot know the session is in; full-screen programs
//! read both), Home and End as `ESC [ H` and `ESC [ F`, a modified special key with xterm's
//! `;m` parameter (`C-Up` is `ESC [ 1 ; 5 A`), Meta as an `ESC` prefix.

/// Why a key name could not be turned into bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// A modifier prefix on something that is no key.
    #[error("unknown key {0:?}: a modifier (C-, M-, S-, ^) must be followed by a key name such as Enter, Up or F5, or by one character")]
    Unknown(String),
    /// Ctrl with a character that has no control code.
    #[error("no control code for {0:?}: Ctrl goes with a letter, a space or one of @[\\]^_?")]
    NoControl(String),
    /// An empty argument.
    #[error("an empty key name")]
    Empty,
}

/// Keys with names of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Named {
    Enter,
    Escape,
    Tab,
    BTab,
    BSpace,
    Space,
    Up,
    Down,
    Right,
    Left,
    Home,
    End,
    Insert,
    Delete,
    PageUp,
    PageDown,
    F(u8),
}

/// Names, as tmux spells them and the aliases it takes, lower-cased.
const NAMES: &[(&str, Named)] = &[
    ("enter", Named::Enter),
    ("escape", Named::Escape),
    ("tab", Named::Tab),
    ("btab", Named::BTab),
    ("bspace", Named::BSpace),
    ("space", Named::Space),
    ("up", Named::Up),
    ("down", Named::Down),
    ("right", Named::Right),
    ("left", Named::Left),
    ("home", Named::Home),
    ("end", Named::End),
    ("ic", Named::Insert),
    ("insert", Named::Insert),
    ("dc", Named::Delete),
    ("delete", Named::Delete),
    ("ppage", Named::PageUp),
    ("pageup", Named::PageUp),
    ("pgup", Named::PageUp),
    ("npage", Named::PageDown),
    ("pagedown", Named::PageDown),
    ("pgdn", Named::PageDown),
];

/// Modifiers held with a key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Mods {
    ctrl: bool,
    meta: bool,
    shift: bool,
}

impl Mods {
    fn any(self) -> bool {
        self.ctrl || self.meta || self.shift
    }

    /// xterm's modifier parameter: 1 plus Shift 1, Meta (Alt) 2, Ctrl 4.
    fn param(self) -> u8 {
        1 + u8::from(self.shift) + 2 * u8::from(self.meta) + 4 * u8::from(self.ctrl)
    }
}

/// The bytes for all of `keys`, in order.
pub fn keys_to_bytes<S: AsRef<str>>(keys: &[S]) -> Result<Vec<u8>, KeyError> {
    let mut out = Vec::new();
    for key in keys {
        out.extend(key_to_bytes(key.as_ref())?);
    }
    Ok(out)
}

/// The bytes for one argument: a key, a modified key, or literal text.
pub fn key_to_bytes(word: &str) -> Result<Vec<u8>, KeyError> {
    if word.is_empty() {
        return Err(KeyError::Empty);
    }
    if let Some(named) = lookup(word) {
        return Ok(named_bytes(named, Mods::default()));
    }
    let (mods, rest) = split_mods(word);
    if !mods.any() {
        return Ok(word.as_bytes().to_vec());
    }
    if let Some(named) = lookup(rest) {
        return Ok(named_bytes(named, mods));
    }
    let mut chars = rest.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => char_bytes(c, mods, word),
        _ => Err(KeyError::Unknown(word.to_string())),
    }
}

/// Splits the modifier prefixes off; a lone `C`/`M`/`S` (the key itself) is no prefix.
fn split_mods(word: &str) -> (Mods, &str) {
    let mut mods = Mods::default();
    let mut rest = word;
    loop {
        if rest.len() > 1 {
            if let Some(after) = rest.strip_prefix('^') {
                mods.ctrl = true;
                rest = after;
                continue;
            }
        }
        let bytes = rest.as_bytes();
        if bytes.len() > 2 && bytes[1] == b'-' {
            let flag = match bytes[0] {
                b'C' | b'c' => &mut mods.ctrl,
                b'M' | b'm' => &mut mods.meta,
                b'S' | b's' => &mut mods.shift,
                _ => return (mods, rest),
            };
            *flag = true;
            rest = &rest[2..];
            continue;
        }
        // `C-` with nothing after it: a modifier of nothing.
        if bytes.len() == 2 && bytes[1] == b'-' && b"CcMmSs".contains(&bytes[0]) {
            return (Mods { ctrl: true, ..mods }, "");
        }
        return (mods, rest);
    }
}

fn lookup(name: &str) -> Option<Named> {
    let lower = name.to_ascii_lowercase();
    if let Some((_, named)) = NAMES.iter().find(|(n, _)| *n == lower) {
        return Some(*named);
    }
    let n: u8 = lower.strip_prefix('f')?.parse().ok()?;
    (1..=12).contains(&n).then_some(Named::F(n))
}

/// A named key's bytes with `mods` held.
fn named_bytes(key: Named, mods: Mods) -> Vec<u8> {
    let plain: &[u8] = match key {
        Named::Enter => b"\r",
        Named::Escape => b"\x1b",
        Named::Tab if mods.shift => return b"\x1b[Z".to_vec(),
        Named::Tab => b"\t",
        Named::BTab => b"\x1b[Z",
        Named::BSpace => b"\x7f",
        Named::Space => b" ",
        Named::Up => return csi_letter(b'A', mods),
        Named::Down => return csi_letter(b'B', mods),
        Named::Right => return csi_letter(b'C', mods),
        Named::Left => return csi_letter(b'D', mods),
        Named::Home => return csi_letter(b'H', mods),
        Named::End => return csi_letter(b'F', mods),
        Named::Insert => return csi_tilde(2, mods),
        Named::Delete => return csi_tilde(3, mods),
        Named::PageUp => return csi_tilde(5, mods),
        Named::PageDown => return csi_tilde(6, mods),
        Named::F(n @ 1..=4) => return ss3_function(b'P' + (n - 1), mods),
        Named::F(n) => {
            // F5..F12: 15, 17, 18, 19, 20, 21, 23, 24 (xterm skips 16 and 22).
            const CODES: [u8; 8] = [15, 17, 18, 19, 20, 21, 23, 24];
            return csi_tilde(CODES[usize::from(n - 5).min(7)], mods);
        }
    };
    // Enter, Escape, Tab, Backspace, Space: Ctrl and Shift change nothing xterm sends by
    // default (but C-Space, which is NUL); Meta prefixes ESC.
    let mut out = Vec::new();
    if mods.meta {
        out.push(0x1b);
    }
    if key == Named::Space && mods.ctrl {
        out.push(0);
    } else {
        out.extend_from_slice(plain);
    }
    out
}

/// `ESC [ X`, or `ESC [ 1 ; m X` with modifiers.
fn csi_letter(letter: u8, mods: Mods) -> Vec<u8> {
    if mods.any() {
        format!("\x1b[1;{}{}", mods.param(), letter as char).into_bytes()
    } else {
        vec![0x1b, b'[', letter]
    }
}

/// `ESC [ n ~`, or `ESC [ n ; m ~` with modifiers.
fn csi_tilde(n: u8, mods: Mods) -> Vec<u8> {
    if mods.any() {
        format!("\x1b[{n};{}~", mods.param()).into_bytes()
    } else {
        format!("\x1b[{n}~").into_bytes()
    }
}

/// F1..F4: `ESC O P`, or `ESC [ 1 ; m P` with modifiers.
fn ss3_function(letter: u8, mods: Mods) -> Vec<u8> {
    if mods.any() {
        csi_letter(letter, mods)
    } else {
        vec![0x1b, b'O', letter]
    }
}

/// One character with modifiers: Shift upper-cases, Ctrl makes a control code, Meta
/// prefixes ESC.
fn char_bytes(c: char, mods: Mods, word: &str) -> Result<Vec<u8>, KeyError> {
    let c = if mods.shift {
        c.to_ascii_uppercase()
    } else {
        c
    };
    let mut out = Vec::new();
    if mods.meta {
        out.push(0x1b);
    }
    if mods.ctrl {
        out.push(control_code(c).ok_or_else(|| KeyError::NoControl(word.to_string()))?);
    } else {
        let mut buf = [0; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }
    Ok(out)
}

/// The control code Ctrl with `c` sends, if there is one.
fn control_code(c: char) -> Option<u8> {
    match c {
        'a'..='z' => Some(c as u8 - b'a' + 1),
        'A'..='Z' => Some(c as u8 - b'A' + 1),
        '@' | ' ' | '2' => Some(0),
        '[' | '3' => Some(0x1b),
        '\\' | '4' => Some(0x1c),
        ']' | '5' => Some(0x1d),
        '^' | '6' => Some(0x1e),
        '_' | '/' | '7' => Some(0x1f),
        '?' | '8' => Some(0x7f),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(word: &str) -> Vec<u8> {
        key_to_bytes(word).unwrap_or_else(|e| panic!("{word}: {e}"))
    }

    #[test]
    fn plain_names_in_any_case() {
        assert_eq!(b("Enter"), b"\r");
        assert_eq!(b("enter"), b"\r");
        assert_eq!(b("ENTER"), b"\r");
        assert_eq!(b("Escape"), b"\x1b");
        assert_eq!(b("Tab"), b"\t");
        assert_eq!(b("BTab"), b"\x1b[Z");
        assert_eq!(b("BSpace"), b"\x7f");
        assert_eq!(b("Space"), b" ");
        assert_eq!(b("Up"), b"\x1b[A");
        assert_eq!(b("Down"), b"\x1b[B");
        assert_eq!(b("Right"), b"\x1b[C");
        assert_eq!(b("Left"), b"\x1b[D");
        assert_eq!(b("Home"), b"\x1b[H");
        assert_eq!(b("End"), b"\x1b[F");
        assert_eq!(b("IC"), b"\x1b[2~");
        assert_eq!(b("DC"), b"\x1b[3~");
        for page_up in ["PageUp", "PPage", "PgUp"] {
            assert_eq!(b(page_up), b"\x1b[5~");
        }
        for page_down in ["PageDown", "NPage", "PgDn"] {
            assert_eq!(b(page_down), b"\x1b[6~");
        }
    }

    #[test]
    fn function_keys_one_to_twelve() {
        assert_eq!(b("F1"), b"\x1bOP");
        assert_eq!(b("F4"), b"\x1bOS");
        assert_eq!(b("F5"), b"\x1b[15~");
        assert_eq!(b("F6"), b"\x1b[17~");
        assert_eq!(b("F10"), b"\x1b[21~");
        assert_eq!(b("F11"), b"\x1b[23~");
        assert_eq!(b("F12"), b"\x1b[24~");
        // Not a function key: text, as tmux types it.
        assert_eq!(b("F13"), b"F13");
        assert_eq!(b("F0"), b"F0");
    }

    #[test]
    fn ctrl_makes_control_codes() {
        assert_eq!(b("C-c"), [3]);
        assert_eq!(b("C-C"), [3]);
        assert_eq!(b("c-d"), [4]);
        assert_eq!(b("^c"), [3]);
        assert_eq!(b("C-a"), [1]);
        assert_eq!(b("C-z"), [26]);
        assert_eq!(b("C-["), [0x1b]);
        assert_eq!(b("C-\\"), [0x1c]);
        assert_eq!(b("C-]"), [0x1d]);
        assert_eq!(b("C-_"), [0x1f]);
        assert_eq!(b("C-?"), [0x7f]);
        assert_eq!(b("C-@"), [0]);
        assert_eq!(b("C-Space"), [0]);
    }

    #[test]
    fn meta_prefixes_escape_and_modified_specials_take_xterms_parameter() {
        assert_eq!(b("M-x"), b"\x1bx");
        assert_eq!(b("M-Enter"), b"\x1b\r");
        assert_eq!(b("C-M-c"), b"\x1b\x03");
        assert_eq!(b("M-C-c"), b"\x1b\x03");
        assert_eq!(b("S-a"), b"A");
        assert_eq!(b("C-Up"), b"\x1b[1;5A");
        assert_eq!(b("S-Left"), b"\x1b[1;2D");
        assert_eq!(b("M-Right"), b"\x1b[1;3C");
        assert_eq!(b("C-S-Home"), b"\x1b[1;6H");
        assert_eq!(b("C-PageUp"), b"\x1b[5;5~");
        assert_eq!(b("S-F1"), b"\x1b[1;2P");
        assert_eq!(b("C-F5"), b"\x1b[15;5~");
        assert_eq!(b("S-Tab"), b"\x1b[Z");
    }

    #[test]
    fn other_words_are_literal_text() {
        assert_eq!(b("hello"), b"hello");
        assert_eq!(b("ls -la"), b"ls -la");
        assert_eq!(b("λ"), "λ".as_bytes());
        // A lone letter that is also a modifier's is itself.
        assert_eq!(b("C"), b"C");
        assert_eq!(b("M"), b"M");
        assert_eq!(b("^"), b"^");
        assert_eq!(b("-"), b"-");
        assert_eq!(b("x-y"), b"x-y");
    }

    #[test]
    fn unknown_modified_keys_are_errors() {
        for word in ["C-Foo", "M-Entr", "S-up-ish", "C-", "M-", "^Bogus"] {
            let err = key_to_bytes(word).expect_err(word);
            assert!(matches!(err, KeyError::Unknown(_)), "{word}: {err}");
            assert!(err.to_string().contains(word), "{err}");
        }
        assert_eq!(key_to_bytes("C-é"), Err(KeyError::NoControl("C-é".into())));
        assert_eq!(key_to_bytes(""), Err(KeyError::Empty));
    }

    #[test]
    fn a_sequence_is_the_keys_in_order() {
        let bytes = keys_to_bytes(&["echo", "Space", "hi", "Enter", "C-c"]).expect("keys");
        assert_eq!(bytes, b"echo hi\r\x03");
        assert!(keys_to_bytes(&["ok", "C-Nope"]).is_err());
    }
}
