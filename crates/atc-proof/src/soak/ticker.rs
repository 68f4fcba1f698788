//! `atc-proof ticker`: the soak's steadily printing harness. It writes numbered lines of
//! about 100 bytes to stdout, a burst four times a second, at a given byte rate, until its
//! terminal goes away (SIGHUP, or a failed write). It forks nothing, so a tenth of 4,000
//! sessions printing costs the machine no process churn, only the bytes.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Bursts per second.
const BURSTS_PER_SEC: u32 = 4;

/// Bytes of one line, newline included.
const LINE_BYTES: usize = 100;

/// The lines of burst number `burst`, `bytes` long in all (whole lines, at least one).
pub fn burst(burst: u64, bytes: usize) -> Vec<u8> {
    let lines = (bytes / LINE_BYTES).max(1);
    let mut out = Vec::with_capacity(lines * LINE_BYTES);
    for i in 0..lines {
        let head = format!("tick {burst:>10}.{i:<4} ");
        out.extend_from_slice(head.as_bytes());
        let fill = LINE_BYTES - 1 - head.len();
        out.extend(std::iter::repeat_n(b'a' + (burst % 26) as u8, fill));
        out.push(b'\n');
    }
    out
}

/// Prints `bytes_per_sec` until a write fails.
pub fn run(bytes_per_sec: u64) -> ExitCode {
    let per_burst = (bytes_per_sec / u64::from(BURSTS_PER_SEC)) as usize;
    let every = Duration::from_secs(1) / BURSTS_PER_SEC;
    let start = Instant::now();
    let mut stdout = std::io::stdout().lock();
    for n in 0u64.. {
        if stdout
            .write_all(&burst(n, per_burst))
            .and_then(|()| stdout.flush())
            .is_err()
        {
            // The terminal is gone: the session was killed.
            return ExitCode::SUCCESS;
        }
        // Paced from the start, so a slow write does not slow the rate down for good.
        let next = start + every * u32::try_from(n + 1).unwrap_or(u32::MAX);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_whole_lines_of_the_asked_size() {
        let b = burst(7, 1000);
        assert_eq!(b.len(), 1000);
        assert_eq!(b.iter().filter(|&&c| c == b'\n').count(), 10);
        assert!(b.starts_with(b"tick          7.0"));
        assert_eq!(burst(0, 10).len(), LINE_BYTES);
    }
}
