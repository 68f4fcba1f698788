//! The screen model's fast path: it decides which bytes of a chunk vt100 need not print.
//!
//! Within one chunk, a run of printable ASCII, CR and LF that moves the cursor down at least
//! `rows` times after some line ends can only leave the rows of its last lines on the screen:
//! everything printed before them scrolls off, and with scrollback off nothing keeps it. So
//! the text of those earlier lines is not printed; vt100 gets the row advances it would have
//! made (line feeds and autowraps), as line feeds down to the bottom row and then as scrolls
//! (SU, a screenful at a time), which keeps the cursor's row and the screen exactly as they
//! were, and then a CR and a cursor-forward to the column the text left the cursor at, when
//! that differs. The text after the cut is fed as is. The run's starting
//! column is the parser's cursor column, read once the parser has been fed up to the run:
//! output with line feeds and no CRs (a PTY with output processing off) is cut as well.
//!
//! How many scrolls. After a screenful of scrolls the screen is blank and further scrolls
//! change only vt100's count of rows scrolled off, which decides how many blank rows a taller
//! resize brings back at the top (as a terminal with scrollback would bring back lines).
//! Each scroll costs vt100 a row cleared, which was a fifth of the daemon's CPU in a flood.
//! A resize brings back at most its growth, at most 4,095 rows, so the count matters only
//! that far: the fast path keeps it at least [`SCROLL_CREDIT`] rows (a lower bound it tracks
//! itself, as vt100 does not expose the count) and feeds no more scrolls than that needs.
//! The screen then differs from unskipped vt100's only if taller resizes bring back more
//! than [`SCROLL_CREDIT`] rows in all before the next flood tops the count up: sixteen
//! resizes from one row to the largest screen, each after the program moved its cursor back
//! to the top. Whatever zeroes vt100's count (RIS, and conservatively any ED, `CSI … J`)
//! zeroes the bound. On the alternate screen, which keeps no count, a screenful is enough.
//!
//! That holds only while vt100's parser (vte) is in its ground state at the run, since a
//! printable byte inside an OSC string or a CSI is not text, and only while the scroll region
//! is the whole screen: rows outside it never scroll, and text below it overprints one row.
//! A [`SequenceTracker`] follows vte's state byte for byte and notes any DECSTBM; once one has
//! been seen the fast path stays off for that screen. vt100 has no autowrap, insert or newline
//! modes to change the rest.
//!
//! This module is pure logic over bytes; [`super::screen::ScreenModel`] owns the vt100 parser
//! and hands it what [`FastPath::process`] passes on.

use super::sequence_tracker::SequenceTracker;

/// Line feeds fed to vt100 in place of skipped text, a slice at a time.
const LINE_FEEDS: [u8; 4096] = [b'\n'; 4096];

/// Rows scrolled off the main screen that the fast path keeps vt100 counting, at the least:
/// sixteen times the largest growth of one resize (4,095 rows). See the module's doc.
pub const SCROLL_CREDIT: u64 = 16 * 4096;

/// The fast path of one screen: the tracker of vte's state across chunks and what it skipped.
#[derive(Debug)]
pub struct FastPath {
    tracker: SequenceTracker,
    /// Bytes of text not printed, for measurement and tests.
    skipped: u64,
    /// A lower bound on vt100's count of rows scrolled off the main screen.
    scrolled_off: u64,
    /// The count this fast path keeps vt100 at, at the least: [`SCROLL_CREDIT`].
    credit: u64,
}

impl Default for FastPath {
    fn default() -> FastPath {
        FastPath::with_credit(SCROLL_CREDIT)
    }
}

impl FastPath {
    /// A fast path for a screen whose parser has seen nothing yet.
    pub fn new() -> FastPath {
        FastPath::default()
    }

    /// A fast path that keeps vt100's count of rows scrolled off at `credit` at the least;
    /// tests use a small one to see the bound at work.
    pub fn with_credit(credit: u64) -> FastPath {
        FastPath {
            tracker: SequenceTracker::default(),
            skipped: 0,
            scrolled_off: 0,
            credit,
        }
    }

    /// Follows a resize: a taller screen takes back up to its growth from vt100's count.
    pub fn resized(&mut self, old_rows: u16, new_rows: u16) {
        let growth = u64::from(new_rows.saturating_sub(old_rows));
        self.scrolled_off = self.scrolled_off.saturating_sub(growth);
    }

    /// Bytes of text skipped so far: printed text replaced by line feeds.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Passes `bytes`, in order, to `parser`, as the parser of a `rows`×`cols` screen should
    /// see them: the same bytes except for runs of text that would scroll off within the
    /// chunk, which are passed as line feeds and a cursor move. `parser` must be the one this
    /// fast path has tracked since its first byte.
    pub fn process(&mut self, bytes: &[u8], rows: u16, cols: u16, parser: &mut impl Parser) {
        if self.tracker.region_set() {
            parser.feed(bytes);
            return;
        }
        // A run shorter than this cannot hold `rows` line ends plus a cut, or would save
        // too little to pay for its plan.
        let min_run = 2 * usize::from(rows).max(1);
        let mut tracked = 0;
        let mut fed = 0;
        let mut from = 0;
        while let Some((start, end)) = next_run(bytes, from, min_run) {
            from = end;
            self.tracker.advance(&bytes[tracked..start]);
            if self.tracker.region_set() {
                break;
            }
            if !self.tracker.in_ground() {
                // Part of a sequence (a CSI's parameters, an OSC string): the tracker reads it.
                self.tracker.advance(&bytes[start..end]);
                tracked = end;
                continue;
            }
            // Text in the ground state holds no ESC, so the state is still ground at its end.
            tracked = end;
            // The count is read only here, before a skip: a zeroing seen after the last run of
            // a chunk waits in the tracker for the next one.
            if self.tracker.take_count_zeroed() {
                self.scrolled_off = 0;
            }
            // The parser's cursor column at the run's first byte.
            parser.feed(&bytes[fed..start]);
            fed = start;
            let column = usize::from(parser.cursor_column());
            let Some(skip) = plan_skip(&bytes[start..end], rows, cols, column) else {
                continue;
            };
            // The alternate screen keeps no count: a screenful of scrolls blanks it.
            let alternate = parser.alternate_screen();
            let wanted = match alternate {
                true => 0,
                false => self.credit.saturating_sub(self.scrolled_off),
            };
            let scrolled = feed_advances(parser, skip.advances, rows, wanted);
            if !alternate {
                self.scrolled_off = self.scrolled_off.saturating_add(scrolled);
            }
            // Line feeds keep the column; put the cursor where the text left it.
            if skip.column != column {
                parser.feed(b"\r");
                if skip.column > 0 {
                    parser.feed(format!("\x1b[{}C", skip.column).as_bytes());
                }
            }
            fed = start + skip.end;
            self.skipped += skip.end as u64;
        }
        self.tracker.advance(&bytes[tracked..]);
        parser.feed(&bytes[fed..]);
    }
}

/// Gives `parser` the effect of `advances` line feeds on a `rows`-row screen whose scroll
/// region is the whole screen: line feeds while they only move the cursor down, then the
/// scrolls as SU (`CSI n S`), a screenful at most per sequence. vt100 handles a line feed at
/// the bottom row as a scroll of one (`row_inc_scroll`, then `scroll_up(1)`) and SU as
/// `scroll_up(n)` of the same rows, which clears, rotates and counts rows scrolled off alike
/// and leaves the cursor where it is; one call per screenful saves a parse, a dispatch and a
/// rotation of the row table per line of a flood. `scroll_up` scrolls no more than the region
/// holds, hence the screenful.
///
/// Past a screenful, scrolls only add to vt100's count of rows scrolled off: no more are fed
/// than a screenful or `wanted`, whichever is more. Returns the scrolls fed.
fn feed_advances(parser: &mut impl Parser, advances: usize, rows: u16, wanted: u64) -> u64 {
    let to_bottom = usize::from(rows.saturating_sub(1).saturating_sub(parser.cursor_row()));
    let mut moves = advances.min(to_bottom);
    while moves > 0 {
        let n = moves.min(LINE_FEEDS.len());
        parser.feed(&LINE_FEEDS[..n]);
        moves -= n;
    }
    let screenful = usize::from(rows.max(1));
    let needed = usize::try_from(wanted).unwrap_or(usize::MAX).max(screenful);
    let mut scrolls = advances.saturating_sub(to_bottom).min(needed);
    let fed = scrolls as u64;
    while scrolls > 0 {
        let n = scrolls.min(screenful);
        parser.feed(format!("\x1b[{n}S").as_bytes());
        scrolls -= n;
    }
    fed
}

/// What the fast path feeds: a terminal parser whose cursor it can read.
pub trait Parser {
    /// Parses bytes.
    fn feed(&mut self, bytes: &[u8]);
    /// The cursor's zero-based column; the number of columns while a wrap is pending (the
    /// last column was just printed).
    fn cursor_column(&self) -> u16;
    /// The cursor's zero-based row.
    fn cursor_row(&self) -> u16;
    /// Whether the alternate screen is the one shown.
    fn alternate_screen(&self) -> bool;
}

impl<CB: vt100::Callbacks> Parser for vt100::Parser<CB> {
    fn feed(&mut self, bytes: &[u8]) {
        self.process(bytes);
    }

    fn cursor_column(&self) -> u16 {
        self.screen().cursor_position().1
    }

    fn cursor_row(&self) -> u16 {
        self.screen().cursor_position().0
    }

    fn alternate_screen(&self) -> bool {
        self.screen().alternate_screen()
    }
}

/// The next run of text bytes (printable ASCII, CR, LF) at or after `from` that is at least
/// `min_len` long, as `(start, end)`. Runs are maximal: the bytes around one are not text.
fn next_run(bytes: &[u8], from: usize, min_len: usize) -> Option<(usize, usize)> {
    // ESC is not text, and agent output has one every few bytes: only the stretches between
    // two that are long enough can hold a run, and only those are scanned a byte at a time.
    let mut gap = from;
    while gap < bytes.len() {
        let gap_end = memchr::memchr(0x1b, &bytes[gap..]).map_or(bytes.len(), |n| gap + n);
        if gap_end - gap >= min_len {
            if let Some(run) = scan_run(&bytes[..gap_end], gap, min_len) {
                return Some(run);
            }
        }
        gap = gap_end + 1;
    }
    None
}

/// [`next_run`] a byte at a time.
fn scan_run(bytes: &[u8], from: usize, min_len: usize) -> Option<(usize, usize)> {
    let mut start = from;
    while let Some(n) = first_non_text(&bytes[start..]) {
        if n >= min_len {
            return Some((start, start + n));
        }
        start += n + 1;
    }
    (bytes.len().saturating_sub(start) >= min_len).then_some((start, bytes.len()))
}

/// The position of the first byte that is not text. Blocks of 32 bytes are checked whole,
/// with no early exit inside a block, which the compiler turns into vector code; only the
/// block that holds the answer is looked at a byte at a time.
fn first_non_text(bytes: &[u8]) -> Option<usize> {
    const BLOCK: usize = 32;
    let mut blocks = bytes.chunks_exact(BLOCK);
    let mut at = 0;
    for block in &mut blocks {
        if !block.iter().fold(true, |all, &b| all & is_text(b)) {
            break;
        }
        at += BLOCK;
    }
    bytes[at..]
        .iter()
        .position(|&b| !is_text(b))
        .map(|n| at + n)
}

/// What to skip of a run: its first `end` bytes, replaced by `advances` line feeds, after
/// which the cursor is at `column`.
#[derive(Debug, PartialEq)]
struct Skip {
    end: usize,
    advances: usize,
    column: usize,
}

fn is_printable(b: u8) -> bool {
    (0x20..=0x7e).contains(&b)
}

#[inline(always)]
fn is_text(b: u8) -> bool {
    // Branch-free, so block checks vectorize.
    (b.wrapping_sub(0x20) < 0x5f) | (b == b'\r') | (b == b'\n')
}

/// Where a run of printable ASCII, CR and LF, fed to vt100 in its ground state with a
/// full-screen scroll region and the cursor at `column`, can be cut. The skipped part starts
/// at the run's first byte and ends after a line feed; what follows must move the cursor down
/// `rows` times or more (so every row the skipped text wrote scrolls off) and print something
/// (vt100 remembers the last printed character for REP). The cut's column must be one a
/// cursor-forward can reach (not a pending wrap), unless it is the column the run started at,
/// which the line feeds keep.
fn plan_skip(run: &[u8], rows: u16, cols: u16, column: usize) -> Option<Skip> {
    let last_printable = run.iter().rposition(|&b| is_printable(b))?;
    let cols = usize::from(cols);
    let mut total = 0;
    walk(run, cols, column, |_, _, adv| {
        total = adv;
        true
    });
    let limit = total.checked_sub(usize::from(rows))?;
    let mut best = None;
    walk(run, cols, column, |at, col, adv| {
        if adv > limit || at >= last_printable {
            return false;
        }
        if col < cols || col == column {
            best = Some((at + 1, adv, col));
        }
        true
    });
    let (end, advances, column) = best?;
    Some(Skip {
        end,
        advances,
        column,
    })
}

/// Follows vt100's cursor through a run of text from `column`, a stretch of printable bytes
/// at a time, and calls `at_line_feed(position, column, advances so far)` after each line
/// feed, until it answers `false`. The advances (line feeds and autowraps) of the whole run,
/// trailing text included, are reported once more at the end, at `run.len()`.
fn walk(
    run: &[u8],
    cols: usize,
    column: usize,
    mut at_line_feed: impl FnMut(usize, usize, usize) -> bool,
) {
    let (mut col, mut adv, mut at) = (column, 0, 0);
    while at < run.len() {
        let next = memchr::memchr2(b'\r', b'\n', &run[at..]).map_or(run.len(), |n| at + n);
        let (c, wraps) = print_span(cols, col, next - at);
        (col, adv) = (c, adv + wraps);
        if next == run.len() {
            break;
        }
        if run[next] == b'\r' {
            col = 0;
        } else {
            adv += 1;
            if !at_line_feed(next, col, adv) {
                return;
            }
        }
        at = next + 1;
    }
    at_line_feed(run.len(), col, adv);
}

/// Where printing `len` printable bytes from column `col` leaves vt100's cursor, and how many
/// autowraps it makes: in closed form, what the tests' byte-at-a-time `step` gives.
fn print_span(cols: usize, col: usize, len: usize) -> (usize, usize) {
    if len == 0 {
        return (col, 0);
    }
    // A pending wrap wraps before the first character.
    let (col, wraps) = if col >= cols { (0, 1) } else { (col, 0) };
    let end = col + len;
    if end <= cols {
        return (end, wraps);
    }
    let more = (end - cols).div_ceil(cols);
    (end - cols - (more - 1) * cols, wraps + more)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[inline(always)]
    /// vt100's cursor over one byte of such a run: a character at column `cols` (the pending
    /// wrap) first moves to the next row; a line feed keeps the column.
    fn step(cols: usize, col: &mut usize, advances: &mut usize, b: u8) {
        match b {
            b'\r' => *col = 0,
            b'\n' => *advances += 1,
            _ => {
                if *col >= cols {
                    *advances += 1;
                    *col = 0;
                }
                *col += 1;
            }
        }
    }

    /// The plan a byte at a time: what [`plan_skip`] computes a stretch at a time.
    fn plan_skip_bytewise(run: &[u8], rows: u16, cols: u16, column: usize) -> Option<Skip> {
        let last_printable = run.iter().rposition(|&b| is_printable(b))?;
        let cols = usize::from(cols);
        let (mut col, mut total) = (column, 0);
        for &b in run {
            step(cols, &mut col, &mut total, b);
        }
        let limit = total.checked_sub(usize::from(rows))?;
        let (mut col, mut adv) = (column, 0);
        let mut best = None;
        for (at, &b) in run.iter().enumerate() {
            step(cols, &mut col, &mut adv, b);
            if adv > limit || at >= last_printable {
                break;
            }
            if b == b'\n' && (col < cols || col == column) {
                best = Some((at + 1, adv, col));
            }
        }
        let (end, advances, column) = best?;
        Some(Skip {
            end,
            advances,
            column,
        })
    }

    #[test]
    fn the_plan_a_stretch_at_a_time_is_the_plan_a_byte_at_a_time() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for _ in 0..3000 {
            let len = rng.below(400);
            let run: Vec<u8> = (0..len)
                .map(|_| match rng.below(12) {
                    0 => b'\n',
                    1 => b'\r',
                    _ => b'a',
                })
                .collect();
            let cols = 1 + rng.below(30) as u16;
            let rows = 1 + rng.below(8) as u16;
            let column = rng.below(usize::from(cols) + 1);
            assert_eq!(
                plan_skip(&run, rows, cols, column),
                plan_skip_bytewise(&run, rows, cols, column),
                "{:?} at {rows}x{cols} from column {column}",
                String::from_utf8_lossy(&run)
            );
        }
    }

    #[test]
    fn the_block_search_finds_the_first_byte_that_is_not_text() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2000 {
            let len = rng.below(200);
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    if rng.below(40) == 0 {
                        rng.below(256) as u8
                    } else {
                        b'x'
                    }
                })
                .collect();
            assert_eq!(
                first_non_text(&bytes),
                bytes.iter().position(|&b| !is_text(b))
            );
        }
        for b in 0..=255u8 {
            assert_eq!(is_text(b), is_printable(b) || b == b'\r' || b == b'\n');
        }
    }

    /// A small xorshift generator: the random streams are the same on every run. The screen
    /// model's tests use it too.
    pub(crate) struct Rng(pub(crate) u64);

    impl Rng {
        /// A generator from a small seed, spread over the state's bits and never zero.
        pub(crate) fn new(seed: u64) -> Rng {
            Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
        }

        pub(crate) fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    #[test]
    fn runs_are_maximal_stretches_of_text() {
        let bytes = b"ab\x1b[1mcdef\r\ngh\x07ij";
        assert_eq!(next_run(bytes, 0, 2), Some((0, 2)));
        // `[1m` is text to this scan; the tracker tells it is part of a CSI.
        assert_eq!(next_run(bytes, 2, 2), Some((3, 14)));
        assert_eq!(next_run(bytes, 2, 12), None);
        assert_eq!(next_run(bytes, 14, 2), Some((15, 17)));
        assert_eq!(next_run(bytes, 17, 1), None);
    }

    #[test]
    fn runs_found_between_escapes_are_the_runs_a_byte_scan_finds() {
        for seed in 1..=300u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut bytes = Vec::new();
            while bytes.len() < 200 {
                let piece: &[u8] = [
                    b"\x1b".as_slice(),
                    b"\x1b[1m",
                    b"ab",
                    b"\r\n",
                    b"\x07",
                    "é".as_bytes(),
                ][rng.below(6)];
                bytes.extend_from_slice(piece);
                bytes.extend(std::iter::repeat_n(b'x', rng.below(12)));
            }
            for min_len in [1, 2, 5, 9, 16] {
                for from in 0..=bytes.len() {
                    assert_eq!(
                        next_run(&bytes, from, min_len),
                        scan_run(&bytes, from, min_len),
                        "from {from}, min {min_len}, seed {seed}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_plan_cuts_after_a_line_end_and_leaves_a_screenful() {
        // 10 lines of "ab" at 3 rows: the skipped part ends after the line that leaves 3 row
        // advances and some text after it.
        let run = b"ab\r\n".repeat(10);
        let skip = plan_skip(&run, 3, 80, 0).expect("a cut");
        // Lines 1 to 7 are skipped (7 advances); lines 8 to 10 stay.
        assert_eq!((skip.end, skip.advances, skip.column), (4 * 7, 7, 0));
        assert_eq!(plan_skip(b"ab\r\nab\r\n", 3, 80, 0), None);
        // Autowraps count as advances: 30 columns at 10 wrap twice.
        let wide = [b"\r".as_slice(), &[b'w'; 30], b"\r\n"].concat().repeat(4);
        let skip = plan_skip(&wide, 3, 10, 0).expect("a cut");
        assert_eq!((skip.end, skip.advances, skip.column), (3 * 33, 9, 0));
    }

    #[test]
    fn without_crs_the_cut_knows_the_column_from_where_the_run_started() {
        // Line feeds alone keep the column: starting at column 5, "ab\n" leaves it at 7, 9...
        let run = b"ab\n".repeat(10);
        let skip = plan_skip(&run, 3, 80, 5).expect("a cut");
        assert_eq!(
            (skip.end, skip.advances, skip.column),
            (3 * 7, 7, 5 + 2 * 7)
        );
        // At 10 columns, from column 8: "ab" fills the row (pending wrap, column 10), which
        // a cursor move cannot reach, so the cut is after the next line: "ab" wraps first.
        let skip = plan_skip(&b"ab\n".repeat(10), 3, 10, 8).expect("a cut");
        assert!(skip.column < 10, "{skip:?}");
        // A pending wrap at the start is kept by line feeds alone.
        let run = [b"\n".repeat(8).as_slice(), b"x"].concat();
        let skip = plan_skip(&run, 3, 10, 10).expect("a cut");
        assert_eq!((skip.advances, skip.column), (6, 10));
    }

    /// What a parser was fed, and a cursor that stays at the top left.
    #[derive(Default)]
    struct Recorder(Vec<u8>, bool);

    impl Parser for Recorder {
        fn feed(&mut self, bytes: &[u8]) {
            self.0.extend_from_slice(bytes);
        }

        fn cursor_column(&self) -> u16 {
            0
        }

        fn cursor_row(&self) -> u16 {
            0
        }

        fn alternate_screen(&self) -> bool {
            self.1
        }
    }

    /// Rows scrolled by the SUs in `fed`.
    fn scrolls_in(fed: &[u8]) -> u64 {
        let text = String::from_utf8_lossy(fed);
        text.split("\x1b[")
            .skip(1)
            .filter_map(|s| s.split_once('S'))
            .filter_map(|(n, _)| n.parse::<u64>().ok())
            .sum()
    }

    #[test]
    fn scrolls_stop_once_the_count_is_kept_and_start_again_after_it_is_zeroed() {
        let flood = b"line\r\n".repeat(1000);
        let mut fast = FastPath::with_credit(100);
        let mut fed = Recorder::default();
        fast.process(&flood, 4, 80, &mut fed);
        // The credit and no more: 996 rows scrolled off, 100 counted.
        assert_eq!(scrolls_in(&fed.0), 100);
        // Kept: the next flood feeds a screenful, which blanks the screen.
        let mut fed = Recorder::default();
        fast.process(&flood, 4, 80, &mut fed);
        assert_eq!(scrolls_in(&fed.0), 4);
        // A taller resize takes rows back from the count (104 less 30), and the next flood
        // tops it up to the credit.
        fast.resized(4, 34);
        let mut fed = Recorder::default();
        fast.process(&flood, 4, 80, &mut fed);
        assert_eq!(scrolls_in(&fed.0), 26);
        // ED and RIS may zero vt100's count: the whole credit again.
        for zeroing in [b"\x1b[3J".as_slice(), b"\x1b[?3J", b"\x1bc"] {
            let mut fed = Recorder::default();
            fast.process(zeroing, 4, 80, &mut fed);
            fast.process(&flood, 4, 80, &mut fed);
            assert_eq!(scrolls_in(&fed.0), 100, "{zeroing:?}");
            // Within one chunk too. (A BEL ends the sequence's run: a run of text that
            // starts inside a sequence is never cut.)
            let mut fed = Recorder::default();
            fast.process(&[zeroing, b"\x07", &flood].concat(), 4, 80, &mut fed);
            assert_eq!(scrolls_in(&fed.0), 100, "{zeroing:?} in one chunk");
        }
        // The alternate screen keeps no count.
        let mut fast = FastPath::with_credit(100);
        let mut fed = Recorder(Vec::new(), true);
        fast.process(&flood, 4, 80, &mut fed);
        assert_eq!(scrolls_in(&fed.0), 4);
    }

    #[test]
    fn text_inside_a_sequence_is_fed_as_is() {
        let lines: Vec<u8> = b"line\r\n".repeat(50);
        let mut fast = FastPath::new();
        let mut fed = Recorder::default();
        let data = [b"\x1b]0;".as_slice(), &lines, b"\x07"].concat();
        fast.process(&data, 4, 80, &mut fed);
        assert_eq!((fed.0, fast.skipped()), (data, 0));
        // The same lines as output are cut down to the line feeds and the last screenful.
        let mut fed = Recorder::default();
        fast.process(&lines, 4, 80, &mut fed);
        assert!(fast.skipped() > 0);
        // 46 advances from the top row of 4: three line feeds reach the bottom, then the
        // other 43 are scrolls, a screenful per SU.
        let mut expected = vec![b'\n'; 3];
        expected.extend_from_slice(&b"\x1b[4S".repeat(10));
        expected.extend_from_slice(b"\x1b[3S");
        expected.extend_from_slice(&b"line\r\n".repeat(4));
        assert_eq!(fed.0, expected);
    }
}
