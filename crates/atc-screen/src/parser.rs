//! [`Parser`]: output bytes to terminal actions, after the state machine of DEC's VT500
//! (as described at vt100.net and followed by xterm.js), with UTF-8 decoded in text and in
//! OSC strings.
//!
//! It is built for output that is mostly text: in the ground state it hands whole runs of
//! printable ASCII to [`Perform::print_ascii`] at once, and it keeps no more state across
//! chunks than a sequence cut in half needs. Sequences are bounded: at most [`MAX_PARAMS`]
//! parameters (more are dropped, as xterm.js does) and [`MAX_OSC`] bytes of an OSC string.

/// Parameters a CSI keeps; the rest are ignored.
pub const MAX_PARAMS: usize = 32;
/// Bytes of an OSC string kept; the rest are dropped.
pub const MAX_OSC: usize = 4096;

/// What a parsed stream asks the terminal to do.
pub trait Perform {
    /// Prints printable ASCII (0x20–0x7E), in order.
    fn print_ascii(&mut self, text: &[u8]);
    /// Prints one character outside ASCII.
    fn print_char(&mut self, c: char);
    /// Prints a run of characters outside ASCII, none of them a C1 control.
    fn print_chars(&mut self, chars: &[char]) {
        for &c in chars {
            self.print_char(c);
        }
    }
    /// A C0 control (or a C1 one, as its 7-bit code's meaning: IND, NEL, HTS, RI).
    fn execute(&mut self, byte: u8);
    /// `ESC` with `intermediates` and `final_byte`.
    fn esc_dispatch(&mut self, intermediates: &[u8], final_byte: u8);
    /// A control sequence: its private marker (`?`, `>`, `<`, `=`, or 0), parameters,
    /// intermediates and final byte.
    fn csi_dispatch(&mut self, marker: u8, params: &Params, intermediates: &[u8], final_byte: u8);
    /// An OSC string, without its introducer and terminator.
    fn osc_dispatch(&mut self, data: &[u8]);
}

/// A control sequence's parameters. Each may carry sub-parameters after colons
/// (`38:2::1:2:3`); an empty one is 0, which every sequence reads as its default.
#[derive(Debug, Clone, Default)]
pub struct Params {
    values: [u32; MAX_PARAMS],
    /// Bit i: value i is a sub-parameter of the one before it (it followed a colon).
    sub: u32,
    len: usize,
}

impl Params {
    /// How many values, sub-parameters included.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Value `i`, or 0.
    pub fn get(&self, i: usize) -> u32 {
        if i < self.len {
            self.values[i]
        } else {
            0
        }
    }

    /// Value `i`, with 0 and absent read as `default`.
    pub fn or(&self, i: usize, default: u32) -> u32 {
        match self.get(i) {
            0 => default,
            v => v,
        }
    }

    /// Whether value `i` followed a colon.
    pub fn is_sub(&self, i: usize) -> bool {
        i < self.len && self.sub & (1 << i) != 0
    }

    /// The parameters as groups: each value with the sub-parameters after it.
    pub fn groups(&self) -> impl Iterator<Item = &[u32]> {
        let mut start = 0;
        std::iter::from_fn(move || {
            if start >= self.len {
                return None;
            }
            let mut end = start + 1;
            while end < self.len && self.is_sub(end) {
                end += 1;
            }
            let group = &self.values[start..end];
            start = end;
            Some(group)
        })
    }

    fn clear(&mut self) {
        self.len = 0;
        self.sub = 0;
        self.values[0] = 0;
    }

    /// Starts the next value; `colon` when it is a sub-parameter.
    fn next(&mut self, colon: bool) {
        if self.len == 0 {
            // The empty first value before the separator.
            self.len = 1;
            self.values[0] = 0;
        }
        if self.len < MAX_PARAMS {
            self.values[self.len] = 0;
            if colon {
                self.sub |= 1 << self.len;
            }
            self.len += 1;
        }
    }

    fn digit(&mut self, d: u8) {
        if self.len == 0 {
            self.len = 1;
            self.values[0] = 0;
        }
        let v = &mut self.values[self.len - 1];
        *v = v
            .saturating_mul(10)
            .saturating_add(u32::from(d - b'0'))
            .min(0x7fff_ffff);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ground,
    Escape,
    EscapeIntermediate,
    CsiEntry,
    CsiParam,
    CsiIntermediate,
    CsiIgnore,
    Osc,
    /// DCS, SOS, PM and APC strings: nothing here reads them.
    IgnoredString,
    /// ESC inside a string: `\` ends it, anything else starts a new sequence.
    StringEscape,
}

/// The parser's state between chunks.
#[derive(Debug, Clone)]
pub struct Parser {
    state: State,
    /// Whether the string an ESC interrupted was an OSC (to dispatch it on `ESC \`).
    string_was_osc: bool,
    params: Params,
    marker: u8,
    intermediates: [u8; 2],
    n_intermediates: usize,
    osc: Vec<u8>,
    /// A UTF-8 character cut by the chunk's end.
    utf8: [u8; 4],
    utf8_len: usize,
}

impl Default for Parser {
    fn default() -> Parser {
        Parser {
            state: State::Ground,
            string_was_osc: false,
            params: Params::default(),
            marker: 0,
            intermediates: [0; 2],
            n_intermediates: 0,
            osc: Vec::new(),
            utf8: [0; 4],
            utf8_len: 0,
        }
    }
}

/// Length of the UTF-8 sequence `lead` starts, or 0 for a byte that starts none.
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => 0,
    }
}

/// Characters [`decode_run`] gathers before it hands them on.
const RUN: usize = 64;

/// Decodes whole UTF-8 characters from `bytes[from..]` while there are any, up to [`RUN`] of
/// them, stopping at ASCII, at a C1 control (U+0080–U+009F, which the state machine reads), and
/// at anything invalid or cut by the chunk's end (which the byte-wise path takes), into `chars`.
/// Returns where it stopped and how many it decoded.
fn decode_run(bytes: &[u8], from: usize, chars: &mut [char; RUN]) -> (usize, usize) {
    let mut n = 0;
    let mut i = from;
    while n < RUN && i < bytes.len() {
        let lead = bytes[i];
        let len = utf8_len(lead);
        if len == 0 || i + len > bytes.len() {
            break;
        }
        let mut code = u32::from(lead) & (0x7f >> len);
        let mut valid = true;
        for &b in &bytes[i + 1..i + len] {
            valid &= b & 0xc0 == 0x80;
            code = code << 6 | u32::from(b & 0x3f);
        }
        // Overlong forms and surrogates are invalid, as `from_utf8` says.
        let min = [0, 0, 0x80, 0x800, 0x1_0000][len];
        let Some(c) = char::from_u32(code).filter(|_| valid && code >= min) else {
            break;
        };
        if (0x80..0xa0).contains(&code) {
            break;
        }
        chars[n] = c;
        n += 1;
        i += len;
    }
    (i, n)
}

impl Parser {
    /// Parses `bytes`, continuing from where the last chunk ended.
    pub fn advance(&mut self, out: &mut impl Perform, bytes: &[u8]) {
        let mut chars = ['\0'; RUN];
        let mut i = 0;
        let len = bytes.len();
        while i < len {
            if self.utf8_len > 0 {
                i = self.continue_utf8(out, bytes, i);
                continue;
            }
            let b = bytes[i];
            if self.state == State::Ground {
                // Runs of text, the common case.
                let start = i;
                while i < len && (0x20..0x7f).contains(&bytes[i]) {
                    i += 1;
                }
                if i > start {
                    out.print_ascii(&bytes[start..i]);
                    continue;
                }
                if b >= 0x80 {
                    // A run of whole characters outside ASCII, decoded here at once.
                    let (end, n) = decode_run(bytes, i, &mut chars);
                    if n > 0 {
                        out.print_chars(&chars[..n]);
                        i = end;
                        continue;
                    }
                }
                i += 1;
                match b {
                    0x1b => self.enter_escape(),
                    0x00..=0x1f => out.execute(b),
                    0x7f => {}
                    _ => self.start_utf8(b),
                }
                continue;
            }
            if matches!(self.state, State::CsiEntry | State::CsiParam) && b.is_ascii_digit() {
                // A CSI's digits and separators, the bulk of one, read without the state
                // machine's dispatch for each.
                while i < len {
                    match bytes[i] {
                        d @ b'0'..=b'9' => self.params.digit(d),
                        b';' => self.params.next(false),
                        b':' => self.params.next(true),
                        _ => break,
                    }
                    i += 1;
                }
                self.state = State::CsiParam;
                continue;
            }
            i += 1;
            self.step(out, b);
        }
    }

    fn start_utf8(&mut self, lead: u8) {
        if utf8_len(lead) > 0 {
            self.utf8[0] = lead;
            self.utf8_len = 1;
        }
        // A stray continuation or invalid byte is dropped.
    }

    /// Takes the rest of a UTF-8 character from `bytes[i..]`; returns where it stopped.
    fn continue_utf8(&mut self, out: &mut impl Perform, bytes: &[u8], mut i: usize) -> usize {
        let need = utf8_len(self.utf8[0]);
        while self.utf8_len < need && i < bytes.len() {
            let b = bytes[i];
            if b & 0xc0 != 0x80 {
                // Cut short: drop it and read this byte afresh.
                self.utf8_len = 0;
                return i;
            }
            self.utf8[self.utf8_len] = b;
            self.utf8_len += 1;
            i += 1;
        }
        if self.utf8_len == need {
            self.utf8_len = 0;
            if let Some(c) = std::str::from_utf8(&self.utf8[..need])
                .ok()
                .and_then(|s| s.chars().next())
            {
                self.dispatch_char(out, c);
            }
        }
        i
    }

    /// A decoded character outside ASCII, in any state.
    fn dispatch_char(&mut self, out: &mut impl Perform, c: char) {
        let code = c as u32;
        if (0x80..0xa0).contains(&code) {
            self.c1(out, code as u8);
            return;
        }
        match self.state {
            State::Ground => out.print_char(c),
            State::Osc => {
                let mut buf = [0; 4];
                self.push_osc(c.encode_utf8(&mut buf).as_bytes());
            }
            // Ignored inside sequences, as xterm.js does.
            _ => {}
        }
    }

    /// A C1 control, as a character (U+0080–U+009F).
    fn c1(&mut self, out: &mut impl Perform, code: u8) {
        match code {
            0x9b => self.enter_csi(),
            0x9d => self.enter_osc(),
            0x90 | 0x98 | 0x9e | 0x9f => self.state = State::IgnoredString,
            0x9c => self.end_string(out),
            0x84 => self.ground_then(|| out.esc_dispatch(&[], b'D')),
            0x85 => self.ground_then(|| out.esc_dispatch(&[], b'E')),
            0x88 => self.ground_then(|| out.esc_dispatch(&[], b'H')),
            0x8d => self.ground_then(|| out.esc_dispatch(&[], b'M')),
            _ => {}
        }
    }

    fn ground_then(&mut self, f: impl FnOnce()) {
        if matches!(self.state, State::Osc | State::IgnoredString) {
            return;
        }
        self.state = State::Ground;
        f();
    }

    fn enter_escape(&mut self) {
        self.state = State::Escape;
        self.n_intermediates = 0;
    }

    fn enter_csi(&mut self) {
        self.state = State::CsiEntry;
        self.params.clear();
        self.marker = 0;
        self.n_intermediates = 0;
    }

    fn enter_osc(&mut self) {
        self.state = State::Osc;
        self.osc.clear();
    }

    fn push_osc(&mut self, bytes: &[u8]) {
        let room = MAX_OSC.saturating_sub(self.osc.len());
        self.osc.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn collect(&mut self, b: u8) {
        if self.n_intermediates < self.intermediates.len() {
            self.intermediates[self.n_intermediates] = b;
            self.n_intermediates += 1;
        }
    }

    fn end_string(&mut self, out: &mut impl Perform) {
        let was_osc = match self.state {
            State::Osc => true,
            State::StringEscape => self.string_was_osc,
            _ => false,
        };
        self.state = State::Ground;
        if was_osc {
            out.osc_dispatch(&self.osc);
            self.osc.clear();
        }
    }

    /// One byte outside the ground state.
    fn step(&mut self, out: &mut impl Perform, b: u8) {
        // Bytes of UTF-8 inside sequences and strings.
        if b >= 0x80 {
            self.start_utf8(b);
            return;
        }
        match self.state {
            State::Ground => {}
            State::Osc => match b {
                0x07 => self.end_string(out),
                0x1b => {
                    self.string_was_osc = true;
                    self.state = State::StringEscape;
                }
                0x00..=0x1f => {}
                _ => self.push_osc(&[b]),
            },
            State::IgnoredString => {
                if b == 0x1b {
                    self.string_was_osc = false;
                    self.state = State::StringEscape;
                }
            }
            State::StringEscape => {
                if b == b'\\' {
                    self.end_string(out);
                } else {
                    // The string ends here unfinished (xterm.js dispatches an OSC cut this way
                    // too); the ESC starts a new sequence with this byte.
                    self.end_string(out);
                    self.enter_escape();
                    self.step(out, b);
                }
            }
            _ => self.step_sequence(out, b),
        }
    }

    /// One byte of an escape or control sequence.
    fn step_sequence(&mut self, out: &mut impl Perform, b: u8) {
        match b {
            // CAN and SUB abort a sequence.
            0x18 | 0x1a => {
                self.state = State::Ground;
                return;
            }
            0x1b => {
                self.enter_escape();
                return;
            }
            0x00..=0x1f => {
                out.execute(b);
                return;
            }
            _ => {}
        }
        match self.state {
            State::Escape => match b {
                b'[' => self.enter_csi(),
                b']' => self.enter_osc(),
                b'P' | b'X' | b'^' | b'_' => self.state = State::IgnoredString,
                0x20..=0x2f => {
                    self.collect(b);
                    self.state = State::EscapeIntermediate;
                }
                0x7f => {}
                _ => {
                    self.state = State::Ground;
                    out.esc_dispatch(&[], b);
                }
            },
            State::EscapeIntermediate => match b {
                0x20..=0x2f => self.collect(b),
                0x7f => {}
                _ => {
                    self.state = State::Ground;
                    let n = self.n_intermediates;
                    let inter = self.intermediates;
                    out.esc_dispatch(&inter[..n], b);
                }
            },
            State::CsiEntry | State::CsiParam => match b {
                b'0'..=b'9' => {
                    self.params.digit(b);
                    self.state = State::CsiParam;
                }
                b';' => {
                    self.params.next(false);
                    self.state = State::CsiParam;
                }
                b':' => {
                    self.params.next(true);
                    self.state = State::CsiParam;
                }
                b'<'..=b'?' if self.state == State::CsiEntry => {
                    self.marker = b;
                    self.state = State::CsiParam;
                }
                b'<'..=b'?' => self.state = State::CsiIgnore,
                0x20..=0x2f => {
                    self.collect(b);
                    self.state = State::CsiIntermediate;
                }
                0x7f => {}
                _ => self.dispatch_csi(out, b),
            },
            State::CsiIntermediate => match b {
                0x20..=0x2f => self.collect(b),
                0x30..=0x3f => self.state = State::CsiIgnore,
                0x7f => {}
                _ => self.dispatch_csi(out, b),
            },
            State::CsiIgnore if (0x40..=0x7e).contains(&b) => self.state = State::Ground,
            _ => {}
        }
    }

    fn dispatch_csi(&mut self, out: &mut impl Perform, final_byte: u8) {
        self.state = State::Ground;
        let n = self.n_intermediates;
        let inter = self.intermediates;
        out.csi_dispatch(self.marker, &self.params, &inter[..n], final_byte);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what the parser asked for, as text.
    #[derive(Default)]
    struct Log(Vec<String>);

    impl Perform for Log {
        fn print_ascii(&mut self, text: &[u8]) {
            self.0
                .push(format!("text {}", String::from_utf8_lossy(text)));
        }
        fn print_char(&mut self, c: char) {
            self.0.push(format!("char {c}"));
        }
        fn execute(&mut self, byte: u8) {
            self.0.push(format!("exec {byte:#x}"));
        }
        fn esc_dispatch(&mut self, intermediates: &[u8], final_byte: u8) {
            self.0.push(format!(
                "esc {}{}",
                String::from_utf8_lossy(intermediates),
                final_byte as char
            ));
        }
        fn csi_dispatch(&mut self, marker: u8, params: &Params, inter: &[u8], final_byte: u8) {
            let groups: Vec<String> = params
                .groups()
                .map(|g| g.iter().map(u32::to_string).collect::<Vec<_>>().join(":"))
                .collect();
            let marker = if marker == 0 {
                String::new()
            } else {
                (marker as char).to_string()
            };
            self.0.push(format!(
                "csi {marker}{}{}{}",
                groups.join(";"),
                String::from_utf8_lossy(inter),
                final_byte as char
            ));
        }
        fn osc_dispatch(&mut self, data: &[u8]) {
            self.0
                .push(format!("osc {}", String::from_utf8_lossy(data)));
        }
    }

    fn parse_in(chunks: &[&[u8]]) -> Vec<String> {
        let mut parser = Parser::default();
        let mut log = Log::default();
        for chunk in chunks {
            parser.advance(&mut log, chunk);
        }
        log.0
    }

    #[test]
    fn text_controls_and_sequences() {
        let got = parse_in(&[b"ab\r\n\x1b[1;31mc\x1b[?1049h\x1b(0\x1b7"]);
        assert_eq!(
            got,
            [
                "text ab",
                "exec 0xd",
                "exec 0xa",
                "csi 1;31m",
                "text c",
                "csi ?1049h",
                "esc (0",
                "esc 7"
            ]
        );
    }

    #[test]
    fn sub_parameters_and_empty_ones() {
        let got = parse_in(&[b"\x1b[38:2::1:2:3;4:3m\x1b[;5H\x1b[m"]);
        assert_eq!(got, ["csi 38:2:0:1:2:3;4:3m", "csi 0;5H", "csi m"]);
    }

    #[test]
    fn sequences_and_utf8_cut_across_chunks() {
        let all = "\x1b[12;34H漢é\x1b]0;títle\x07".as_bytes();
        let whole = parse_in(&[all]);
        for cut in 1..all.len() {
            let (a, b) = all.split_at(cut);
            assert_eq!(parse_in(&[a, b]), whole, "cut at {cut}");
        }
        assert_eq!(whole, ["csi 12;34H", "char 漢", "char é", "osc 0;títle"]);
    }

    #[test]
    fn strings_end_with_st_and_ignored_strings_say_nothing() {
        let got = parse_in(&[b"\x1b]2;t\x1b\\\x1bPq#0;1\x1b\\\x1b_x\x1b\\a"]);
        assert_eq!(got, ["osc 2;t", "text a"]);
    }

    #[test]
    fn can_aborts_and_a_new_escape_restarts() {
        let got = parse_in(&[b"\x1b[12\x18x\x1b[3\x1b[4m"]);
        assert_eq!(got, ["text x", "csi 4m"]);
    }

    #[test]
    fn too_many_parameters_are_dropped_and_huge_ones_clamped() {
        let mut seq = b"\x1b[".to_vec();
        for _ in 0..40 {
            seq.extend_from_slice(b"1;");
        }
        seq.extend_from_slice(b"99999999999999H");
        let got = parse_in(&[&seq]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].matches(';').count(), MAX_PARAMS - 1);
    }

    #[test]
    fn invalid_utf8_is_dropped() {
        assert_eq!(parse_in(&[b"a\xffb\xe6\xbc"]), ["text a", "text b"]);
        assert_eq!(parse_in(&[b"\xe6a"]), ["text a"]);
    }
}
