//! The check of what the attached client received: the session's program prints numbered
//! lines (`L1`, `L2`, …), so any byte lost or repeated anywhere between the program and the
//! client shows as a number skipped or seen again. [`LineCheck`] reads the client's live bytes
//! (repaint preludes already left out by the client) and counts, in bytes of the lines
//! involved, what was lost and what was repeated. A screen reset (what the daemon writes before
//! a fresh impd replay) is a counted gap reset: the numbering restarts from the next whole line
//! and nothing across it counts as lost or repeated.

/// What the daemon writes before impd's replay when it attaches fresh (daemon spec §5.6).
pub const SCREEN_RESET: &[u8] = b"\x1b[0m\x1b[H\x1b[2J";

/// Counts so far; they only grow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineCounts {
    /// Bytes of the lines whose numbers were skipped.
    pub lost: u64,
    /// Bytes of lines whose numbers came again.
    pub repeated: u64,
    /// Screen resets seen.
    pub gap_resets: u64,
    /// Whole lines, while in step, that are not `L<n>` (a torn or foreign line).
    pub garbled: u64,
    /// Good lines read.
    pub lines: u64,
}

/// The reader's state.
#[derive(Debug, Default)]
pub struct LineCheck {
    /// Bytes after the last line end.
    partial: Vec<u8>,
    /// The last good number; `None` until the first whole line (or after a reset).
    last: Option<u64>,
    counts: LineCounts,
}

/// The bytes `L<n>\r\n` takes.
pub fn line_len(n: u64) -> u64 {
    // 'L', the digits, CR, LF.
    1 + n.to_string().len() as u64 + 2
}

impl LineCheck {
    /// The counts so far.
    pub fn counts(&self) -> LineCounts {
        self.counts
    }

    /// The last good line number read.
    pub fn last(&self) -> Option<u64> {
        self.last
    }

    /// Forgets the line in progress and the numbering, as after a repaint the client chose
    /// (a desync's resync): the next whole line is the new baseline.
    pub fn resync(&mut self) {
        self.partial.clear();
        self.last = None;
    }

    /// Reads live bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(at) = find(&self.partial[start..], b"\r\n") {
            let end = start + at;
            let line = self.partial[start..end].to_vec();
            self.line(&line);
            start = end + 2;
        }
        self.partial.drain(..start);
        // A reset in the unfinished line is counted when its line ends; this only keeps a
        // stream with no line ends at all from growing without bound.
        if self.partial.len() > 64 * 1024 {
            self.partial.clear();
            self.counts.garbled += 1;
            self.last = None;
        }
    }

    fn line(&mut self, line: &[u8]) {
        if find(line, SCREEN_RESET).is_some() {
            // The reset tears the line it lands in; the replay after it repeats what the ring
            // kept. Both are what a gap reset means, not losses.
            self.counts.gap_resets += 1;
            self.last = None;
            return;
        }
        let Some(n) = number(line) else {
            if self.last.is_some() {
                self.counts.garbled += 1;
            }
            // Before the baseline: the tail of a line the client joined in the middle of.
            return;
        };
        self.counts.lines += 1;
        match self.last {
            None => self.last = Some(n),
            Some(last) if n == last + 1 => self.last = Some(n),
            Some(last) if n > last => {
                self.counts.lost += (last + 1..n).map(line_len).sum::<u64>();
                self.last = Some(n);
            }
            // n <= last: a repeat; the numbering stays where it was.
            Some(_) => self.counts.repeated += line_len(n),
        }
    }
}

/// `L<n>` → n.
fn number(line: &[u8]) -> Option<u64> {
    let digits = line.strip_prefix(b"L")?;
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(range: std::ops::RangeInclusive<u64>) -> Vec<u8> {
        range
            .flat_map(|i| format!("L{i}\r\n").into_bytes())
            .collect()
    }

    #[test]
    fn an_unbroken_stream_in_any_split_counts_nothing() {
        let all = lines(1..=500);
        for split in [1, 3, 7, 64, 1000] {
            let mut c = LineCheck::default();
            for chunk in all.chunks(split) {
                c.feed(chunk);
            }
            let n = c.counts();
            assert_eq!((n.lost, n.repeated, n.gap_resets, n.garbled), (0, 0, 0, 0));
            assert_eq!(n.lines, 500);
            assert_eq!(c.last(), Some(500));
        }
    }

    #[test]
    fn joining_mid_line_starts_at_the_next_whole_line() {
        let mut c = LineCheck::default();
        c.feed(b"23\r\nL124\r\nL125\r\n");
        assert_eq!(c.counts().garbled, 0);
        assert_eq!(c.last(), Some(125));
    }

    #[test]
    fn skipped_and_repeated_lines_count_their_bytes() {
        let mut c = LineCheck::default();
        c.feed(&lines(1..=10));
        c.feed(&lines(13..=14));
        assert_eq!(c.counts().lost, line_len(11) + line_len(12));
        c.feed(&lines(13..=15));
        assert_eq!(c.counts().repeated, line_len(13) + line_len(14));
        assert_eq!(c.last(), Some(15));
    }

    #[test]
    fn a_screen_reset_is_a_gap_reset_and_restarts_the_numbering() {
        let mut c = LineCheck::default();
        c.feed(&lines(1..=10));
        c.feed(b"L1");
        c.feed(SCREEN_RESET);
        c.feed(b"\x1b[?25h0\r\n");
        c.feed(&lines(5..=20));
        let n = c.counts();
        assert_eq!((n.lost, n.repeated, n.gap_resets, n.garbled), (0, 0, 1, 0));
        assert_eq!(c.last(), Some(20));
    }

    #[test]
    fn a_foreign_line_in_step_is_garbled() {
        let mut c = LineCheck::default();
        c.feed(&lines(1..=3));
        c.feed(b"L4 and more\r\nL5\r\n");
        assert_eq!(c.counts().garbled, 1);
        assert_eq!(c.counts().lost, line_len(4));
    }
}
