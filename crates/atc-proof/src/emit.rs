//! `atc-proof emit`: the program the stream suites run inside a session. It writes a
//! deterministic byte stream whose byte at offset k is [`byte_at`]`(k)`, so a client can tell
//! exactly which bytes it missed, saw twice or saw wrong, at a steady rate, until it reads
//! [`STOP`] on its terminal or reaches its size bound. It then writes the stream's length to
//! its done file and waits for its terminal to hang up.
//!
//! The daemon's offsets count the bytes it reads from the PTY, so the terminal must not
//! translate: the program puts its own terminal in raw mode before its first byte (no `\n` to
//! `\r\n`, no echo of what the suite types to stop it).

use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes in each line: a 10-digit line number, a space, 51 letters, `\r\n`.
pub const LINE: u64 = 64;

/// Typed into the session to end the stream (any other input is ignored).
pub const STOP: &[u8] = b"atc-proof:stop\r";

/// How often the writer wakes to keep its rate.
const TICK: Duration = Duration::from_millis(10);

/// The largest write, so a slow tick does not turn into one huge burst.
const MAX_BURST: u64 = 64 * 1024;

/// The stream's byte at offset `k`.
pub fn byte_at(k: u64) -> u8 {
    let line = k / LINE;
    match k % LINE {
        col @ 0..=9 => b'0' + ((line / 10u64.pow(9 - col as u32)) % 10) as u8,
        10 => b' ',
        62 => b'\r',
        63 => b'\n',
        col => b'a' + ((line + col) % 26) as u8,
    }
}

/// How many of `bytes`, placed from offset `at`, differ from the stream.
pub fn count_wrong(at: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .zip(at..)
        .filter(|(b, k)| **b != byte_at(*k))
        .count() as u64
}

/// `atc-proof emit`'s arguments.
#[derive(Debug, clap::Args)]
pub struct EmitArgs {
    /// Bytes a second.
    #[arg(long, default_value_t = 1024 * 1024)]
    pub rate: u64,
    /// Stop by itself after this many bytes (rounded up to a whole line).
    #[arg(long, default_value_t = 1 << 32)]
    pub max: u64,
    /// Where the stream's length goes once it ends (relative to the working directory).
    #[arg(long, default_value = "emit-done")]
    pub done: PathBuf,
}

/// What the done file says, as `<length> <why>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// [`STOP`] was typed.
    Stopped,
    /// The size bound was reached first.
    Full,
}

impl Ended {
    fn word(self) -> &'static str {
        match self {
            Ended::Stopped => "stopped",
            Ended::Full => "full",
        }
    }

    /// Parses a done file's text.
    pub fn parse(text: &str) -> Option<(u64, Ended)> {
        let mut words = text.split_whitespace();
        let len = words.next()?.parse().ok()?;
        let why = match words.next()? {
            "stopped" => Ended::Stopped,
            "full" => Ended::Full,
            _ => return None,
        };
        Some((len, why))
    }
}

/// Runs the emitter; only returns once its terminal is gone.
pub fn run(args: EmitArgs) -> ExitCode {
    if let Err(e) = raw_terminal() {
        eprintln!("atc-proof emit: cannot make the terminal raw: {e}");
        return ExitCode::from(2);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let stop = stop.clone();
        std::thread::spawn(move || watch_stdin(&stop))
    };
    let max = args.max.div_ceil(LINE) * LINE;
    let rate = args.rate.max(LINE);
    let started = Instant::now();
    let mut out = std::io::stdout().lock();
    let mut written = 0u64;
    let mut chunk = Vec::with_capacity(MAX_BURST as usize);
    let ended = loop {
        if stop.load(Ordering::Acquire) {
            break Ended::Stopped;
        }
        if written >= max {
            break Ended::Full;
        }
        let due = (started.elapsed().as_secs_f64() * rate as f64) as u64;
        let want = due
            .saturating_sub(written)
            .min(MAX_BURST)
            .min(max - written)
            / LINE
            * LINE;
        if want > 0 {
            chunk.clear();
            chunk.extend((written..written + want).map(byte_at));
            if out.write_all(&chunk).and_then(|()| out.flush()).is_err() {
                // The terminal hung up: the session is being killed.
                return ExitCode::SUCCESS;
            }
            written += want;
        }
        std::thread::sleep(TICK);
    };
    let text = format!("{written} {}\n", ended.word());
    let tmp = args.done.with_extension("tmp");
    if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &args.done)) {
        eprintln!("atc-proof emit: cannot write {}: {e}", args.done.display());
        return ExitCode::from(2);
    }
    // Stay up (the suites check the session is alive and its screen answers after the
    // stream) until the terminal hangs up, which ends the watcher's read.
    if watcher.join().is_err() {
        return ExitCode::from(2);
    }
    ExitCode::SUCCESS
}

/// Raw mode on the terminal: bytes pass both ways untranslated and unechoed.
fn raw_terminal() -> rustix::io::Result<()> {
    let stdin = std::io::stdin();
    let mut t = rustix::termios::tcgetattr(&stdin)?;
    t.make_raw();
    rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &t)
}

/// Reads the terminal until it ends, raising `stop` once [`STOP`] came (across reads).
fn watch_stdin(stop: &AtomicBool) {
    let mut stdin = std::io::stdin().lock();
    let mut seen: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stdin.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                seen.extend_from_slice(&buf[..n]);
                if seen.windows(STOP.len()).any(|w| w == STOP) {
                    stop.store(true, Ordering::Release);
                    seen.clear();
                }
                // Keep only what could still begin the marker.
                let keep = seen.len().min(STOP.len());
                seen.drain(..seen.len() - keep);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_numbered_and_end_in_crlf() {
        let first: Vec<u8> = (0..LINE).map(byte_at).collect();
        let text = String::from_utf8(first).expect("ascii");
        assert!(text.starts_with("0000000000 lmnop"), "{text}");
        assert!(text.ends_with("\r\n"));
        let line = 1_234_567u64;
        let bytes: Vec<u8> = (line * LINE..line * LINE + 11).map(byte_at).collect();
        assert_eq!(bytes, b"0001234567 ");
        assert_eq!(count_wrong(0, b"0000000001 "), 1);
        assert_eq!(count_wrong(line * LINE, &bytes), 0);
    }

    #[test]
    fn done_files_parse() {
        assert_eq!(Ended::parse("6400 stopped\n"), Some((6400, Ended::Stopped)));
        assert_eq!(Ended::parse("64 full"), Some((64, Ended::Full)));
        assert_eq!(Ended::parse("64"), None);
        assert_eq!(Ended::parse(""), None);
    }
}
