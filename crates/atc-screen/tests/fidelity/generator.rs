//! Random streams for the property test: text (ASCII, CJK, combining marks, emoji) mixed with
//! the escape sequences of the named corpus, drawn from a seeded PRNG so any stream can be
//! replayed from its seed alone (`ATC_FIDELITY_SEED`).
//!
//! The emoji are ones xterm.js's Unicode 11 table and the `unicode-width` crate both count as
//! two cells and that need no variation selector or joiner, so a difference is the model's
//! and not a disagreement between width tables.

use crate::reference::Step;
use crate::Stream;

/// splitmix64: tiny, deterministic and good enough to pick among a few dozen choices.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A number in `lo..=hi`.
    pub fn within(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

const SIZES: [(u16, u16); 4] = [(20, 6), (20, 6), (33, 9), (80, 24)];

const WORDS: &[&str] = &[
    "hello",
    "atc ",
    "xyz",
    "The quick brown fox ",
    "0123456789",
    " ",
    "lqqk",
    "x--x",
];
const WIDE: &[&str] = &["中文", "日本語", "한국어", "字", "Ａ"];
const COMBINING: &[&str] = &["e\u{301}", "a\u{308}", "n\u{303}", "o\u{302}\u{323}"];
const EMOJI: &[&str] = &["😀", "🚀", "🎉", "✅", "⭐", "🔥", "👍"];

/// One SGR parameter (or colon group).
fn sgr_param(rng: &mut Rng) -> String {
    let simple = [
        0, 1, 2, 3, 4, 5, 7, 8, 9, 21, 22, 23, 24, 25, 27, 28, 29, 53, 55, 39, 49, 59,
    ];
    match rng.below(8) {
        0 => rng.pick(&simple).to_string(),
        1 => format!("{}", rng.pick(&[30, 40, 90, 100]) + rng.below(8)),
        2 => format!("{};5;{}", rng.pick(&[38, 48, 58]), rng.below(256)),
        3 => format!(
            "{};2;{};{};{}",
            rng.pick(&[38, 48, 58]),
            rng.below(256),
            rng.below(256),
            rng.below(256)
        ),
        4 => format!("4:{}", rng.below(6)),
        5 => format!(
            "58:2::{}:{}:{}",
            rng.below(256),
            rng.below(256),
            rng.below(256)
        ),
        _ => rng.pick(&simple).to_string(),
    }
}

/// One piece of a stream: some text or one control.
fn piece(rng: &mut Rng, cols: u16, rows: u16) -> String {
    let (cols, rows) = (u64::from(cols), u64::from(rows));
    let n = |rng: &mut Rng| rng.within(0, 4);
    match rng.below(40) {
        0..=5 => rng.pick(WORDS).to_string(),
        6 => rng.pick(WIDE).to_string(),
        7 => rng.pick(COMBINING).to_string(),
        8 => rng.pick(EMOJI).to_string(),
        9 => ('a'..='z')
            .cycle()
            .take(rng.within(1, cols * 2) as usize)
            .collect(),
        10 | 11 => "\r\n".into(),
        12 => rng
            .pick(&["\n", "\r", "\x08", "\t", "\x0e", "\x0f", "\x07"])
            .to_string(),
        13..=15 => {
            let params: Vec<String> = (0..rng.within(1, 3)).map(|_| sgr_param(rng)).collect();
            format!("\x1b[{}m", params.join(";"))
        }
        16 => format!(
            "\x1b[{};{}H",
            rng.within(1, rows + 1),
            rng.within(1, cols + 1)
        ),
        17 => format!(
            "\x1b[{}{}",
            n(rng),
            rng.pick(&["A", "B", "C", "D", "G", "d", "E", "F"])
        ),
        18 => format!("\x1b[{}{}", rng.below(3), rng.pick(&["K", "J"])),
        19 => format!(
            "\x1b[{}{}",
            n(rng),
            rng.pick(&["@", "P", "L", "M", "X", "S", "T"])
        ),
        20 => {
            let top = rng.within(1, rows);
            let bottom = rng.within(top, rows);
            if rng.below(4) == 0 {
                "\x1b[r".into()
            } else {
                format!("\x1b[{top};{bottom}r")
            }
        }
        21 => {
            let mode = rng.pick(&[
                "?1049", "?1049", "?47", "?1047", "?6", "?7", "?25", "?2004", "?1000", "?1002",
                "?1003", "?1006", "?1", "?1004", "4",
            ]);
            format!("\x1b[{mode}{}", rng.pick(&["h", "l"]))
        }
        22 => rng
            .pick(&[
                "\x1b=", "\x1b>", "\x1b7", "\x1b8", "\x1bD", "\x1bE", "\x1bM",
            ])
            .to_string(),
        23 => rng
            .pick(&[
                "\x1bH", "\x1b[g", "\x1b[3g", "\x1b[2I", "\x1b[I", "\x1b[Z", "\x1b[2Z",
            ])
            .to_string(),
        24 => rng
            .pick(&["\x1b(0", "\x1b(B", "\x1b)0", "\x1b)B", "\x0e", "\x0f"])
            .to_string(),
        25 => format!("\x1b]{};title {}\x07", rng.pick(&[0, 2]), rng.below(100)),
        26 => format!("\x1b[{} q", rng.below(7)),
        27 => rng.pick(&["\x1b[s", "\x1b[u", "\x1b[3b"]).to_string(),
        28 => {
            if rng.below(10) == 0 {
                "\x1bc".into()
            } else {
                "\x1b[0m".into()
            }
        }
        _ => rng.pick(WORDS).to_string(),
    }
}

/// The stream seed `seed` names.
pub fn stream(seed: u64) -> Stream {
    let mut rng = Rng::new(seed);
    let &(cols, rows) = rng.pick(&SIZES);
    let mut text = String::new();
    for _ in 0..rng.within(5, 80) {
        text.push_str(&piece(&mut rng, cols, rows));
    }
    Stream {
        name: format!("random seed={seed:#018x} {cols}x{rows}"),
        cols,
        rows,
        steps: vec![Step::Write(text.into_bytes())],
    }
}
