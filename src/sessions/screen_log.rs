//! [`Screen`]: a session's screen, kept as the output that drew it while that output is
//! short, and as a [`ScreenModel`] once it is not.
//!
//! Why. A model's cell grid costs 8 bytes a cell whatever is on the screen (38 KiB at 120×40,
//! 15 KiB at 80×24), plus its rows and style tables. A shell that has shown a prompt and a
//! command's screenful of output has printed about 10 KiB to draw it. Kept as those bytes (and
//! the sizes they were parsed at), the screen costs a quarter of the model, and the model is
//! built only when someone looks: a snapshot for an attach, the screen's text, the paste mode a submit reads.
//! Such a look replays at most [`LOG_LIMIT`] bytes, well under a millisecond, and the model
//! it built is dropped again afterwards.
//!
//! Why it is exact. The model is a deterministic function of the bytes and resizes it was fed
//! in order, hidden state included (the last printed character REP repeats, the count of rows
//! scrolled off that a taller resize brings back, the saved cursor, the scroll region). A
//! replay feeds the same bytes with the resizes at the same places, so it builds the same
//! model, which a rebuild from the visible screen could not.
//!
//! Once output or resizes would pass the limit, the log is replayed into a model one last
//! time and the screen stays a model: from then on it is fed as before, and looks cost
//! nothing extra. A session that prints more than that (an agent's TUI soon does) pays for
//! its grid as it always did.

use atc_protocol::TermSize;

use super::screen::ScreenModel;

/// The most output a screen is kept as (resizes count [`RESIZE_COST`] bytes each). Below the
/// model of the usual agent terminal (120×40, 38 KiB of cells), so a log rarely costs more
/// than the model it stands for.
pub const LOG_LIMIT: usize = 32 * 1024;

/// What one resize counts for against [`LOG_LIMIT`]: its entry in the log's list of resizes.
const RESIZE_COST: usize = std::mem::size_of::<(usize, TermSize)>();

/// A session's screen: the output that drew it, or the model.
pub enum Screen {
    /// Short output, replayed into a model when looked at.
    Log(ScreenLog),
    /// A model fed every byte (boxed: its parser state is 700 bytes, which a log need not
    /// carry).
    Model(Box<ScreenModel>),
}

/// The output a screen has been fed and the sizes it was parsed at, in order.
pub struct ScreenLog {
    /// The size before the first resize.
    first_size: TermSize,
    bytes: Vec<u8>,
    /// Each resize with the length of `bytes` when it came: it applies to the bytes after.
    resizes: Vec<(usize, TermSize)>,
}

impl Screen {
    /// A blank screen of `size`, kept as an empty log.
    pub fn new(size: TermSize) -> Screen {
        Screen::Log(ScreenLog {
            first_size: size,
            bytes: Vec::new(),
            resizes: Vec::new(),
        })
    }

    /// Feeds output bytes.
    pub fn process(&mut self, bytes: &[u8]) {
        match self {
            Screen::Log(log) if log.cost() + bytes.len() <= LOG_LIMIT => log.push(bytes),
            Screen::Log(log) => {
                let mut model = log.replay();
                model.process(bytes);
                *self = Screen::Model(Box::new(model));
            }
            Screen::Model(model) => model.process(bytes),
        }
    }

    /// Follows a terminal size change; it applies to the bytes after it.
    pub fn resize(&mut self, size: TermSize) {
        match self {
            Screen::Log(log) if log.cost() + RESIZE_COST <= LOG_LIMIT => {
                log.resizes.push((log.bytes.len(), size));
            }
            Screen::Log(log) => {
                let mut model = log.replay();
                model.resize(size);
                *self = Screen::Model(Box::new(model));
            }
            Screen::Model(model) => model.resize(size),
        }
    }

    /// Answers `look` from the model: the kept one, or one replayed from the log for it.
    pub fn look<R>(&self, look: impl FnOnce(&ScreenModel) -> R) -> R {
        match self {
            Screen::Log(log) => look(&log.replay()),
            Screen::Model(model) => look(model),
        }
    }

    /// Whether the screen is still kept as its output.
    pub fn is_log(&self) -> bool {
        matches!(self, Screen::Log(_))
    }
}

impl ScreenLog {
    /// What the log holds, as counted against [`LOG_LIMIT`].
    fn cost(&self) -> usize {
        self.bytes.len() + self.resizes.len() * RESIZE_COST
    }

    fn push(&mut self, bytes: &[u8]) {
        // Grow by doubling, but never past the limit: the capacity is what the log costs.
        let needed = self.bytes.len() + bytes.len();
        if needed > self.bytes.capacity() {
            let target = needed.max((self.bytes.capacity() * 2).min(LOG_LIMIT));
            self.bytes.reserve_exact(target - self.bytes.len());
        }
        self.bytes.extend_from_slice(bytes);
    }

    /// The model these bytes and resizes build.
    fn replay(&self) -> ScreenModel {
        let mut model = ScreenModel::new(self.first_size);
        let mut fed = 0;
        for &(at, size) in &self.resizes {
            model.process(&self.bytes[fed..at]);
            model.resize(size);
            fed = at;
        }
        model.process(&self.bytes[fed..]);
        model
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift64*), so a failing seed replays.
    struct Rng(u64);

    impl Rng {
        fn new(seed: u64) -> Rng {
            Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
        }

        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n.max(1)
        }
    }

    /// A random mix of what terminals get: text, line ends, colors, cursor moves, saved
    /// cursors, scroll regions, the alternate screen, bracketed paste, mouse tracking, focus
    /// events, colour-scheme reports, full resets, REP and UTF-8.
    fn mixed_chunk(rng: &mut Rng) -> Vec<u8> {
        const PIECES: &[&[u8]] = &[
            b"hello ",
            b"a longer line of plain text that wraps on narrow screens ",
            b"\r\n",
            b"\n\n\n",
            b"\x1b[31mred\x1b[0m",
            b"\x1b[1;7mbold inverse\x1b[m",
            b"\x1b[5;3H",
            b"\x1b[s\x1b[1;1Hstatus\x1b[u",
            b"\x1b[2;5r",
            b"\x1b[r",
            b"\x1b[?1049h",
            b"\x1b[?1049l",
            b"\x1b[?2004h",
            b"\x1b[?2004l",
            b"x\x1b[4b",
            b"\xe2\x9c\x93 \xe4\xb8\xad\xe6\x96\x87",
            b"\x1b[2K",
            b"\x1b[J",
            b"\x1b[3",
            b"8;2;10;20;30m",
            // The modes Claude Code sets, some of them split, which the repaint carries.
            b"\x1b[?1000;1002;1003;1006h",
            b"\x1b[?1004h\x1b[?20",
            b"31h",
            b"\x1b[?1004;1003l",
            b"\x1b",
            b"c",
        ];
        let mut out = Vec::new();
        for _ in 0..1 + rng.below(8) {
            out.extend_from_slice(PIECES[rng.below(PIECES.len())]);
        }
        out
    }

    /// Everything a look can see of a model, and what it hides until more output comes.
    fn seen(model: &ScreenModel) -> (Vec<u8>, String, bool) {
        (model.repaint(), model.text().text, model.bracketed_paste())
    }

    #[test]
    fn a_screen_answers_as_a_model_fed_the_same_would_before_and_after_the_limit() {
        for seed in 1..=6 {
            let mut rng = Rng::new(seed);
            let size = TermSize { cols: 40, rows: 8 };
            let mut screen = Screen::new(size);
            let mut model = ScreenModel::new(size);
            let mut was_log = true;
            let mut steps = 0;
            // Until the log has turned into a model, and some way past that.
            while was_log || steps < 200 {
                steps += 1;
                if rng.below(12) == 0 {
                    let size = TermSize {
                        cols: 1 + rng.below(60) as u16,
                        rows: 1 + rng.below(20) as u16,
                    };
                    screen.resize(size);
                    model.resize(size);
                } else {
                    let chunk = mixed_chunk(&mut rng);
                    screen.process(&chunk);
                    model.process(&chunk);
                }
                assert_eq!(screen.look(seen), seen(&model), "seed {seed}, step {steps}");
                if !screen.is_log() {
                    was_log = false;
                }
            }
            // Hidden state came through the replay: REP repeats the last printed character.
            let taller = TermSize { cols: 40, rows: 60 };
            screen.resize(taller);
            model.resize(taller);
            screen.process(b"\x1b[5b");
            model.process(b"\x1b[5b");
            assert_eq!(screen.look(seen), seen(&model), "seed {seed}, at the end");
        }
    }

    #[test]
    fn the_hidden_state_of_a_log_survives_its_replay() {
        let size = TermSize { cols: 20, rows: 4 };
        let mut screen = Screen::new(size);
        let mut model = ScreenModel::new(size);
        // A saved cursor, a last character, a scroll region.
        let before = b"1\r\n2\r\n3\r\n4\r\n5\r\n6\r\n\x1b[2;3Hq\x1b7\x1b[2;3r";
        screen.process(before);
        model.process(before);
        assert!(screen.is_log());
        // Looks replay the log each time and leave it a log.
        assert_eq!(screen.look(seen), seen(&model));
        assert!(screen.is_log());
        // Output that lands on all of it: REP, the saved cursor restored, and line feeds
        // inside the region.
        let after = b"\x1b[3b\x1b8!\n\n\n";
        let taller = TermSize { cols: 20, rows: 8 };
        screen.resize(taller);
        model.resize(taller);
        screen.process(after);
        model.process(after);
        assert_eq!(screen.look(seen), seen(&model));
    }

    #[test]
    fn the_modes_a_log_set_survive_its_replay_and_into_the_model() {
        let size = TermSize { cols: 20, rows: 4 };
        let mut screen = Screen::new(size);
        // Claude Code's modes, one of them split across two reads.
        screen.process(b"\x1b[?1049h\x1b[?1003h\x1b[?1006h\x1b[?2004h\x1b[?10");
        screen.process(b"04h\x1b[?2031h> ");
        assert!(screen.is_log());
        let says = |screen: &Screen, what: &[u8]| {
            let repaint = screen.look(ScreenModel::repaint);
            repaint.windows(what.len()).any(|w| w == what)
        };
        for mode in [b"\x1b[?1003h".as_slice(), b"\x1b[?1004h", b"\x1b[?2031h"] {
            assert!(says(&screen, mode), "{}", mode.escape_ascii());
        }
        // Turned off while a log, then past the limit into a model.
        screen.process(b"\x1b[?1004l");
        screen.process(&[b'x'; LOG_LIMIT]);
        assert!(!screen.is_log());
        assert!(says(&screen, b"\x1b[?1004l") && !says(&screen, b"\x1b[?1004h"));
        assert!(says(&screen, b"\x1b[?2031h") && says(&screen, b"\x1b[?1003h"));
    }

    #[test]
    fn past_the_limit_the_screen_becomes_a_model_and_stays_one() {
        let size = TermSize { cols: 80, rows: 24 };
        let mut screen = Screen::new(size);
        let line = [b'x'; 1000];
        for _ in 0..LOG_LIMIT / line.len() {
            screen.process(&line);
        }
        assert!(screen.is_log(), "exactly the limit is still a log");
        let Screen::Log(log) = &screen else {
            unreachable!()
        };
        assert!(
            log.bytes.capacity() <= LOG_LIMIT,
            "grows no larger than the limit"
        );
        screen.process(&line);
        assert!(!screen.is_log());
        screen.resize(TermSize { cols: 20, rows: 2 });
        assert!(!screen.is_log());

        // Resizes alone count too.
        let mut screen = Screen::new(size);
        for i in 0..=LOG_LIMIT / RESIZE_COST {
            screen.resize(TermSize {
                cols: 10 + (i % 2) as u16,
                rows: 5,
            });
        }
        assert!(!screen.is_log());
        assert_eq!(
            screen.look(|m| m.text().cols),
            10 + (LOG_LIMIT / RESIZE_COST % 2) as u16
        );
    }
}
