//! [`SequenceTracker`]: where vt100's parser (vte) stands in a byte stream, followed cheaply,
//! and the sequences among those bytes that the screen model's fast path must know about.
//!
//! The fast path ([`super::screen_fast_path`]) may cut a run of text only while vte is in its
//! ground state (a printable byte inside an OSC string or a CSI is not text), and vt100 does
//! not expose that state. Running a second vte parser over every byte cost 12–21% on agent
//! output; this follows vte 0.15's state table with a small state machine instead, and in the
//! ground state it only searches for ESC, the one byte that leaves it. On the way it notes the
//! sequences that change what the fast path may do: a DECSTBM (a scroll region turns the fast
//! path off for good) and what may zero vt100's count of rows scrolled off (RIS, any ED).
//!
//! A unit test checks it against vte's own parser after every byte of random streams.

use memchr::memchr;

/// vte 0.15's parser state (the crate vt100 0.18 parses with), as its state table moves it.
/// Two CSI parameter states stand for vte's one, so that a CSI dispatch knows whether it
/// carries a private marker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum SeqState {
    #[default]
    Ground,
    Escape,
    EscapeIntermediate,
    CsiEntry,
    /// Parameters with no private marker collected: the final byte dispatches with no
    /// intermediates.
    CsiParam,
    /// Parameters after a private marker (`<`, `=`, `>`, `?`), which vte collects as an
    /// intermediate.
    CsiPrivateParam,
    CsiIntermediate,
    CsiIgnore,
    DcsEntry,
    DcsParam,
    DcsIntermediate,
    DcsIgnore,
    DcsPassthrough,
    OscString,
    SosPmApcString,
}

/// Follows vte's state over a byte stream, and whether vt100 has run a DECSTBM.
///
/// vte leaves the ground state only on ESC: C0 and C1 controls (as UTF-8 or as raw bytes) are
/// executed where they stand, and a partial UTF-8 character is cut short by whatever follows.
/// Outside the ground state vte reads only 7-bit codes: bytes from 0x80 change nothing, except
/// 0x9C (ST) in a DCS passthrough, which ends it, also when it is part of a UTF-8 character.
#[derive(Debug, Default)]
pub struct SequenceTracker {
    state: SeqState,
    /// vt100 has seen `CSI Ps ; Ps r` (DECSTBM): it runs that for a CSI ending in `r` with no
    /// intermediates, whatever the parameters.
    region_set: bool,
    /// Since the fast path last looked, vt100 may have zeroed its count of rows scrolled off:
    /// a RIS (`ESC c`), or any CSI ending in `J` (ED 3 and DECSED 3 do; the others are taken
    /// along, as a count too low only costs scrolls).
    count_zeroed: bool,
}

impl SequenceTracker {
    /// Follows `bytes`, the next of the stream.
    pub fn advance(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while let Some((&b, tail)) = rest.split_first() {
            if self.state == SeqState::Ground {
                // Text and controls leave the ground state as it is.
                let Some(esc) = memchr(0x1b, rest) else {
                    return;
                };
                self.state = SeqState::Escape;
                rest = &rest[esc + 1..];
                continue;
            }
            self.step(b);
            rest = tail;
        }
    }

    /// One byte outside the ground state.
    fn step(&mut self, b: u8) {
        use SeqState::*;
        self.state = match (self.state, b) {
            // vte's "anywhere" transitions, taken in every state but the ground state.
            (_, 0x18 | 0x1a) => Ground,
            (_, 0x1b) => Escape,
            (Ground, _) => Ground,
            (Escape, 0x20..=0x2f) => EscapeIntermediate,
            (Escape, b'P') => DcsEntry,
            (Escape, b'[') => CsiEntry,
            (Escape, b']') => OscString,
            (Escape, b'X' | b'^' | b'_') => SosPmApcString,
            (Escape, b'c') => {
                self.count_zeroed = true;
                Ground
            }
            (Escape | EscapeIntermediate, 0x30..=0x7e) => Ground,
            (CsiEntry | CsiParam | CsiPrivateParam, 0x20..=0x2f) => CsiIntermediate,
            (CsiEntry, 0x30..=0x3b) => CsiParam,
            (CsiEntry, 0x3c..=0x3f) => CsiPrivateParam,
            (CsiParam | CsiPrivateParam, 0x3c..=0x3f) => CsiIgnore,
            (CsiIntermediate, 0x30..=0x3f) => CsiIgnore,
            (CsiEntry | CsiParam | CsiPrivateParam | CsiIntermediate, b'J') => {
                self.count_zeroed = true;
                Ground
            }
            (CsiEntry | CsiParam, 0x40..=0x7e) => {
                if b == b'r' {
                    self.region_set = true;
                }
                Ground
            }
            (CsiPrivateParam | CsiIntermediate | CsiIgnore, 0x40..=0x7e) => Ground,
            (DcsEntry | DcsParam, 0x20..=0x2f) => DcsIntermediate,
            (DcsEntry, 0x30..=0x3f) => DcsParam,
            (DcsParam, 0x3c..=0x3f) => DcsIgnore,
            (DcsIntermediate, 0x30..=0x3f) => DcsIgnore,
            (DcsEntry | DcsParam | DcsIntermediate, 0x40..=0x7e) => DcsPassthrough,
            (DcsPassthrough, 0x9c) => Ground,
            (OscString, 0x07) => Ground,
            // Everything else (other C0 controls, parameter bytes, DEL, bytes from 0x80,
            // string contents) stays in the state it is in.
            (state, _) => state,
        };
    }

    /// Whether vte would parse a printable byte fed now as text.
    pub fn in_ground(&self) -> bool {
        self.state == SeqState::Ground
    }

    /// Whether vt100 has run a DECSTBM: it then has, or had, a scroll region.
    pub fn region_set(&self) -> bool {
        self.region_set
    }

    /// Whether vt100 may have zeroed its count of rows scrolled off since the last call.
    pub fn take_count_zeroed(&mut self) -> bool {
        std::mem::take(&mut self.count_zeroed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::screen_fast_path::tests::Rng;

    /// vte's own answer: its performer sees what a probe byte fed after `prefix` becomes, and
    /// whether any dispatch vt100 takes for DECSTBM, or for RIS or an ED, went by.
    #[derive(Default)]
    struct Probe {
        last_print: Option<char>,
        region_set: bool,
        count_zeroed: bool,
    }

    impl vte::Perform for Probe {
        fn print(&mut self, c: char) {
            self.last_print = Some(c);
        }

        fn csi_dispatch(
            &mut self,
            _params: &vte::Params,
            intermediates: &[u8],
            _ignore: bool,
            c: char,
        ) {
            if c == 'r' && intermediates.is_empty() {
                self.region_set = true;
            }
            if c == 'J' {
                self.count_zeroed = true;
            }
        }

        fn esc_dispatch(&mut self, intermediates: &[u8], _ignore: bool, byte: u8) {
            if byte == b'c' && intermediates.is_empty() {
                self.count_zeroed = true;
            }
        }
    }

    /// Whether vte, after `prefix`, prints a printable byte as itself: true in its ground
    /// state only (a pending partial UTF-8 character is printed as U+FFFD first). Also
    /// whether it dispatched a DECSTBM on the way, and a RIS or an ED.
    fn vte_answer(prefix: &[u8]) -> (bool, bool, bool) {
        let mut parser = vte::Parser::new();
        let mut probe = Probe::default();
        parser.advance(&mut probe, prefix);
        let (region_set, count_zeroed) = (probe.region_set, probe.count_zeroed);
        probe.last_print = None;
        parser.advance(&mut probe, b"x");
        (probe.last_print == Some('x'), region_set, count_zeroed)
    }

    /// Pieces that reach every vte state and every way out of it, UTF-8 with C1 controls and
    /// 0x9C continuation bytes, and raw C1 bytes.
    const PIECES: &[&[u8]] = &[
        b"\x1b",
        b"[",
        b"]",
        b"P",
        b"X",
        b"^",
        b"_",
        b"\\",
        b"\x07",
        b"\x18",
        b"\x1a",
        b"\x9c",
        b"\x9b",
        b"\x90",
        b"\x9d",
        b"\xc2\x9b",
        b"\xc2\x9c",
        "✓".as_bytes(),
        "é".as_bytes(),
        "漢".as_bytes(),
        b"\xe2",
        b"\xf0\x9f",
        b"0",
        b"1;2",
        b";",
        b":",
        b"?",
        b"<",
        b">",
        b"=",
        b" ",
        b"!",
        b"/",
        b"r",
        b"J",
        b"c",
        b"m",
        b"H",
        b"@",
        b"~",
        b"x",
        b"\x7f",
        b"\r",
        b"\n",
        b"\x00",
        b"\x08",
        b"\x1b[",
        b"\x1b]",
        b"\x1bP",
        b"abc",
    ];

    #[test]
    fn the_tracker_agrees_with_vte_after_every_byte() {
        let mut ground_seen = 0;
        let mut other_seen = 0;
        let mut region_seen = 0;
        let mut zeroed_seen = 0;
        for seed in 1..=400u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut stream = Vec::new();
            while stream.len() < 160 {
                stream.extend_from_slice(PIECES[rng.below(PIECES.len())]);
            }
            let mut tracker = SequenceTracker::default();
            let mut zeroed = false;
            for at in 0..=stream.len() {
                if at > 0 {
                    // A byte at a time here; the whole stream in one go is checked below.
                    tracker.advance(&stream[at - 1..at]);
                }
                zeroed |= tracker.take_count_zeroed();
                let (ground, region_set, count_zeroed) = vte_answer(&stream[..at]);
                assert_eq!(
                    (tracker.in_ground(), tracker.region_set, zeroed),
                    (ground, region_set, count_zeroed),
                    "after {:?} (seed {seed}); tracker in {:?}",
                    String::from_utf8_lossy(&stream[..at]),
                    tracker.state
                );
                if ground {
                    ground_seen += 1;
                } else {
                    other_seen += 1;
                }
                region_seen += usize::from(region_set);
                zeroed_seen += usize::from(count_zeroed);
            }
            let mut whole = SequenceTracker::default();
            whole.advance(&stream);
            assert_eq!(
                (whole.state, whole.region_set),
                (tracker.state, tracker.region_set)
            );
        }
        assert!(ground_seen > 1000 && other_seen > 1000 && region_seen > 0 && zeroed_seen > 0);
    }

    #[test]
    fn the_tracker_covers_every_state() {
        let reach = |bytes: &[u8]| {
            let mut t = SequenceTracker::default();
            t.advance(bytes);
            t.state
        };
        use SeqState::*;
        let cases: [(&[u8], SeqState); 15] = [
            (b"text \xc2\x9b", Ground),
            (b"\x1b", Escape),
            (b"\x1b(", EscapeIntermediate),
            (b"\x1b[", CsiEntry),
            (b"\x1b[1;2", CsiParam),
            (b"\x1b[?25", CsiPrivateParam),
            (b"\x1b[1 ", CsiIntermediate),
            (b"\x1b[1?", CsiIgnore),
            (b"\x1bP", DcsEntry),
            (b"\x1bP1", DcsParam),
            (b"\x1bP$", DcsIntermediate),
            (b"\x1bP1?", DcsIgnore),
            (b"\x1bPq#0", DcsPassthrough),
            (b"\x1b]0;title \xe2\x9c\x93", OscString),
            (b"\x1b_app", SosPmApcString),
        ];
        for (bytes, state) in cases {
            assert_eq!(reach(bytes), state, "{bytes:?}");
            let (ground, _, _) = vte_answer(bytes);
            assert_eq!(ground, state == Ground, "{bytes:?}");
        }
        // ST as a UTF-8 continuation byte ends a DCS, and only a DCS.
        assert_eq!(reach("\x1bPq✓".as_bytes()), Ground);
        assert_eq!(reach("\x1b]0;✓".as_bytes()), OscString);
    }

    #[test]
    fn only_a_plain_csi_r_counts_as_a_scroll_region() {
        for (bytes, set) in [
            (b"\x1b[1;10r".as_slice(), true),
            (b"\x1b[r", true),
            (b"\x1b[?1r", false),
            (b"\x1b[1 r", false),
            (b"\x1b]1;r\x07", false),
            (b"\x1br", false),
        ] {
            let mut t = SequenceTracker::default();
            t.advance(bytes);
            assert_eq!(t.region_set, set, "{bytes:?}");
            assert_eq!(vte_answer(bytes).1, set, "{bytes:?}");
        }
    }
}
