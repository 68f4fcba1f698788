//! The repaint round trip (`checks/round_trip.rs`) over seeded random streams: raw bytes,
//! and streams built from the escape sequences programs print.

#[path = "checks/round_trip.rs"]
mod round_trip;

/// splitmix64: a small deterministic generator, so a failing seed replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Pieces of what programs print, each whole or cut by the chunking.
const PIECES: &[&str] = &[
    "hello ",
    "a longer line of text that wraps ",
    "\r\n",
    "\n",
    "\r",
    "\t",
    "\x08",
    "\x1b[31m",
    "\x1b[1;2;3;4:3;5;7;8;9;53m",
    "\x1b[22;23;24;25;27;28;29;55m",
    "\x1b[0m",
    "\x1b[38;5;200;48;2;1;2;3;58:2::9:8:7m",
    "\x1b[93;104m",
    "\x1b[H",
    "\x1b[3;7H",
    "\x1b[2A",
    "\x1b[5C",
    "\x1b[K",
    "\x1b[1K",
    "\x1b[2K",
    "\x1b[J",
    "\x1b[1J",
    "\x1b[2J",
    "\x1b[2@",
    "\x1b[3P",
    "\x1b[2X",
    "\x1b[L",
    "\x1b[2M",
    "\x1b[S",
    "\x1b[T",
    "\x1b[2;5r",
    "\x1b[r",
    "\x1b[?6h",
    "\x1b[?6l",
    "\x1b[?7l",
    "\x1b[?7h",
    "\x1b[4h",
    "\x1b[4l",
    "\x1b7",
    "\x1b8",
    "\x1b[?1049h",
    "\x1b[?1049l",
    "\x1b[?47h",
    "\x1b[?47l",
    "\x1b(0",
    "\x1b(B",
    "\x1b)0",
    "\x0e",
    "\x0f",
    "lqqk",
    "\x1bH",
    "\x1b[g",
    "\x1b[3g",
    "\x1b[2I",
    "\x1b[Z",
    "\x1bM",
    "\x1bD",
    "\x1bE",
    "\x1b[?25l",
    "\x1b[?25h",
    "\x1b[?2004h",
    "\x1b[?1003h",
    "\x1b[?1006h",
    "\x1b[?1004h",
    "\x1b[5 q",
    "\x1b]0;title\x07",
    "\x1b]2;t\x1b\\",
    "\x1b[3b",
    "中文字",
    "e\u{301}",
    "🙂",
    "\x1b[20h",
    "\x1b[20l",
    "\x1b[!p",
    "\x1bc",
    "\x1b#8",
    "\x1b[?45h",
];

fn stream(rng: &mut Rng) -> Vec<u8> {
    let mut out = vec![rng.next() as u8, rng.next() as u8, rng.next() as u8];
    for _ in 0..rng.below(60) {
        match rng.below(10) {
            0 => out.extend((0..rng.below(16)).map(|_| rng.next() as u8)),
            _ => out.extend_from_slice(PIECES[rng.below(PIECES.len())].as_bytes()),
        }
    }
    out
}

#[test]
fn a_fresh_terminal_fed_the_repaint_shows_what_the_model_shows() {
    let seeds = match std::env::var("ATC_ROUND_TRIP_SEED") {
        Ok(seed) => {
            vec![u64::from_str_radix(seed.trim_start_matches("0x"), 16).expect("a hex seed")]
        }
        // `ATC_ROUND_TRIP_SEEDS=N` runs more (as a longer search does, in release).
        Err(_) => {
            let n = std::env::var("ATC_ROUND_TRIP_SEEDS")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(3000u64);
            (0..n).collect()
        }
    };
    // `ATC_ROUND_TRIP_CHECK=modes` checks what the fuzz target checks.
    let check = match std::env::var("ATC_ROUND_TRIP_CHECK").as_deref() {
        Ok("modes") => round_trip::Check::Modes,
        _ => round_trip::Check::Screen,
    };
    for seed in seeds {
        let data = stream(&mut Rng(seed));
        let outcome = std::panic::catch_unwind(|| round_trip::repaint_round_trip(&data, check));
        assert!(
            outcome.is_ok(),
            "seed {seed:#x} (ATC_ROUND_TRIP_SEED={seed:x} replays it): {:?}",
            data.escape_ascii().to_string()
        );
    }
}
