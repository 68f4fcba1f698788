//! The payload the throughput phases push through a PTY, and the counting that decides how much
//! of it a reader got.
//!
//! A shell types the payload command; its output is a start marker followed by exactly
//! `bytes` payload bytes. The marker is produced by `printf` from octal escapes, so the command's
//! own echo (which shows the escapes as text) can never contain it: the first occurrence in the
//! live stream is the real start. Output post-processing is switched off (`stty -opost`) so the
//! PTY neither expands `\n` to `\r\n` nor touches anything else, which makes the byte count exact.
//!
//! [`PayloadProgress`] turns a reader's live chunks (with their stream offsets) into "received so
//! far" and "complete"; it works the same for a WebSocket client (offsets from the daemon) and for
//! the bare PTY (offsets counted locally). Timing and sockets live in the phases. What the
//! payload's bytes are is `shape.rs`, and the generators of the made-up shapes `generate.rs`.

mod generate;
mod shape;

pub use shape::{parse_shapes, Shape, ShapeList};

/// The line `yes` repeats: printable ASCII with a newline every 99 bytes, so the daemon's screen
/// model does real work (printing, wrapping, scrolling) rather than skipping control bytes.
pub(crate) const PAYLOAD_LINE: &str =
    "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// A marker the bench makes a shell print to learn that it reached a given point.
///
/// The bytes are `\x01ATC<word>\x02`; the command that prints them spells the control bytes as
/// octal escapes and splits the word off as a `printf` argument, so neither the echo of the
/// command nor any prompt contains the marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    word: &'static str,
}

/// Printed when a fresh shell has read and run its first line: it is ready for input.
pub const READY: Marker = Marker { word: "READY" };
/// Printed right before the payload bytes.
pub const START: Marker = Marker { word: "BENCH" };
/// Printed once the terminal is raw and no longer echoes, right before `exec cat`.
pub const CAT: Marker = Marker { word: "CAT" };
/// Printed once a session has printed a screenful (the scale phase's busy sessions).
pub const SCREEN: Marker = Marker { word: "SCREEN" };

impl Marker {
    /// The bytes that appear in the output stream.
    pub fn bytes(&self) -> Vec<u8> {
        let mut v = b"\x01ATC".to_vec();
        v.extend_from_slice(self.word.as_bytes());
        v.push(0x02);
        v
    }

    /// Shell text that prints the marker (no trailing newline).
    pub fn print_command(&self) -> String {
        format!("printf '\\001ATC%s\\002' {}", self.word)
    }
}

/// A line to type into a fresh shell: when its marker comes back the shell reads input.
pub fn ready_line() -> Vec<u8> {
    format!("{}\n", READY.print_command()).into_bytes()
}

/// A line that turns the shell's terminal into a raw, non-echoing `cat`: every byte written to
/// the session afterwards comes back exactly once.
pub fn cat_line() -> Vec<u8> {
    format!("stty raw -echo; {}; exec cat\n", CAT.print_command()).into_bytes()
}

/// A line that makes a shell fill a `cols`×`rows` screen with text (`rows` lines of `cols - 1`
/// printable characters, so none wraps), then print [`SCREEN`].
pub fn screenful_line(cols: u16, rows: u16) -> Vec<u8> {
    let width = usize::from(cols.max(2) - 1);
    // Letters and digits only, so the word needs no quoting.
    let text: String = PAYLOAD_LINE.chars().cycle().take(width).collect();
    format!("yes {text} | head -n {rows}; {}\n", SCREEN.print_command()).into_bytes()
}

/// A payload of a known size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Payload {
    /// Bytes after the start marker.
    pub bytes: u64,
    /// What they are.
    pub shape: Shape,
}

impl Payload {
    /// Shell command (no newline) that prints the start marker then exactly `bytes` payload bytes,
    /// with output processing off so the count through the PTY is exact, and restores the
    /// terminal afterwards.
    pub fn command(&self) -> String {
        format!(
            "stty -opost -echo; {}; {} | head -c {}; stty opost echo",
            START.print_command(),
            self.shape.endless_command(),
            self.bytes
        )
    }

    /// The command as typed into an interactive shell.
    pub fn typed_line(&self) -> Vec<u8> {
        format!("{}\n", self.command()).into_bytes()
    }
}

/// Finds a marker in a stream of live chunks, even when it straddles chunk boundaries.
///
/// It keeps the last `marker.len() - 1` bytes it saw; a gap in offsets (a desync) discards them
/// because bytes on either side of a gap are not adjacent in the stream.
#[derive(Debug, Clone)]
pub struct MarkerScanner {
    marker: Vec<u8>,
    /// The most recent bytes seen, ending just before `tail_end`.
    tail: Vec<u8>,
    /// Offset just past `tail`.
    tail_end: u64,
}

impl MarkerScanner {
    /// A scanner for `marker`, which must be non-empty.
    pub fn new(marker: Marker) -> MarkerScanner {
        MarkerScanner {
            marker: marker.bytes(),
            tail: Vec::new(),
            tail_end: 0,
        }
    }

    /// Feeds live bytes starting at `offset`; returns the offset just past the marker's first
    /// occurrence, if it completes within these bytes.
    pub fn feed(&mut self, offset: u64, bytes: &[u8]) -> Option<u64> {
        if offset != self.tail_end {
            self.tail.clear();
        }
        let tail_len = self.tail.len();
        // The window starts tail_len bytes before `offset`.
        let mut window = std::mem::take(&mut self.tail);
        window.extend_from_slice(bytes);
        let found = window
            .windows(self.marker.len())
            .position(|w| w == self.marker.as_slice())
            .map(|pos| offset - tail_len as u64 + (pos + self.marker.len()) as u64);
        let keep = self.marker.len().saturating_sub(1).min(window.len());
        window.drain(..window.len() - keep);
        self.tail = window;
        self.tail_end = offset + bytes.len() as u64;
        found
    }
}

/// How much of a payload one reader has received.
///
/// The payload occupies `[start, start + len)` in the stream; `start` is learned from the marker,
/// or adopted from another reader of the same session when this one's copy of the marker was
/// dropped. Invariant: `received <= len`.
#[derive(Debug, Clone)]
pub struct PayloadProgress {
    scanner: MarkerScanner,
    len: u64,
    start: Option<u64>,
    received: u64,
}

/// What feeding one chunk revealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fed {
    /// This chunk held the end of the start marker; the payload starts at this offset.
    FoundStart(u64),
    /// Nothing new about where the payload starts.
    Nothing,
}

impl PayloadProgress {
    /// Progress towards a payload of `len` bytes whose start is not yet known.
    pub fn new(len: u64) -> PayloadProgress {
        PayloadProgress {
            scanner: MarkerScanner::new(START),
            len,
            start: None,
            received: 0,
        }
    }

    /// Feeds live bytes at `offset`. `shared_start` is where another reader of the same stream
    /// found the payload to start; it is adopted only once this reader's stream has moved past it
    /// without showing the marker (its copy was dropped).
    pub fn feed(&mut self, offset: u64, bytes: &[u8], shared_start: Option<u64>) -> Fed {
        let mut fed = Fed::Nothing;
        if self.start.is_none() {
            if let Some(start) = self.scanner.feed(offset, bytes) {
                self.start = Some(start);
                fed = Fed::FoundStart(start);
            } else if let Some(shared) = shared_start {
                if offset + bytes.len() as u64 > shared {
                    self.start = Some(shared);
                }
            }
        }
        if let Some(start) = self.start {
            let end = start.saturating_add(self.len);
            let lo = offset.max(start);
            let hi = (offset + bytes.len() as u64).min(end);
            if hi > lo {
                self.received += hi - lo;
            }
        }
        debug_assert!(self.received <= self.len);
        fed
    }

    /// Whether a reader whose next live byte is at `position` has nothing more of the payload to
    /// expect (it got it all, or the daemon skipped it past the end). `shared_start` stands in
    /// for a start this reader never saw, as in [`PayloadProgress::feed`].
    pub fn is_complete(&self, position: u64, shared_start: Option<u64>) -> bool {
        self.start
            .or(shared_start)
            .is_some_and(|start| position >= start.saturating_add(self.len))
    }

    /// Where the payload starts, once known.
    #[cfg(test)]
    pub fn start(&self) -> Option<u64> {
        self.start
    }

    /// Payload bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Payload bytes this reader will never see: `len - received`, meaningful once complete.
    pub fn lost(&self) -> u64 {
        self.len - self.received
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_not_in_their_own_command_text() {
        for m in [READY, START, CAT, SCREEN] {
            let bytes = m.bytes();
            let cmd = m.print_command();
            assert!(!cmd.as_bytes().windows(bytes.len()).any(|w| w == bytes));
            assert!(bytes.starts_with(b"\x01ATC") && bytes.ends_with(b"\x02"));
        }
        let p = Payload {
            bytes: 1 << 28,
            shape: Shape::Lines,
        };
        let line = p.typed_line();
        let start = START.bytes();
        assert!(!line.windows(start.len()).any(|w| w == start));
        assert!(p.command().contains("head -c 268435456"));
        assert!(p
            .command()
            .starts_with("stty -opost -echo; printf '\\001ATC%s\\002' BENCH; yes "));
    }

    #[test]
    fn a_screenful_fills_every_row_without_wrapping_and_then_marks_the_end() {
        let line = String::from_utf8(screenful_line(120, 40)).expect("ASCII");
        let text: String = PAYLOAD_LINE.chars().cycle().take(119).collect();
        assert_eq!(
            line,
            format!("yes {text} | head -n 40; printf '\\001ATC%s\\002' SCREEN\n")
        );
        let screen = SCREEN.bytes();
        assert!(!line.as_bytes().windows(screen.len()).any(|w| w == screen));
    }

    #[test]
    fn scanner_finds_a_marker_split_across_chunks() {
        let mut s = MarkerScanner::new(START);
        let m = START.bytes();
        let mut stream = b"echo of the command\r\n".to_vec();
        stream.extend_from_slice(&m);
        stream.extend_from_slice(b"xxxx");
        let expect = (stream.len() - 4) as u64;
        // Feed one byte at a time: the marker always straddles chunks.
        let mut found = None;
        for (i, b) in stream.iter().enumerate() {
            if let Some(at) = s.feed(i as u64, std::slice::from_ref(b)) {
                found.get_or_insert(at);
            }
        }
        assert_eq!(found, Some(expect));
    }

    #[test]
    fn scanner_forgets_bytes_across_a_gap() {
        let mut s = MarkerScanner::new(START);
        let m = START.bytes();
        let (a, b) = m.split_at(4);
        assert_eq!(s.feed(0, a), None);
        // The second half arrives after a gap: the halves are not adjacent, so no marker.
        assert_eq!(s.feed(100, b), None);
        // Whole marker after the gap is found.
        assert_eq!(s.feed(200, &m), Some(200 + m.len() as u64));
    }

    #[test]
    fn progress_counts_exactly_the_payload_window() {
        let m = START.bytes();
        let mut p = PayloadProgress::new(10);
        let mut first = b"prompt$ ".to_vec();
        first.extend_from_slice(&m);
        first.extend_from_slice(b"abc");
        let start = (8 + m.len()) as u64;
        assert_eq!(p.feed(0, &first, None), Fed::FoundStart(start));
        assert_eq!(p.received(), 3);
        let pos = first.len() as u64;
        assert!(!p.is_complete(pos, None));
        // 7 more payload bytes then trailing prompt bytes that must not count.
        assert_eq!(p.feed(pos, b"defghij$ ", None), Fed::Nothing);
        assert_eq!(p.received(), 10);
        assert!(p.is_complete(pos + 9, None));
        assert_eq!(p.lost(), 0);
    }

    #[test]
    fn dropped_bytes_count_as_lost_once_the_stream_moves_past_the_end() {
        let m = START.bytes();
        let mut p = PayloadProgress::new(100);
        p.feed(0, &m, None);
        let start = m.len() as u64;
        p.feed(start, &[b'x'; 30], None);
        // Desync: resumes at start + 80, after a repaint; 20 more bytes arrive.
        p.feed(start + 80, &[b'x'; 20], None);
        assert!(p.is_complete(start + 100, None));
        assert_eq!(p.received(), 50);
        assert_eq!(p.lost(), 50);
    }

    #[test]
    fn a_reader_that_missed_the_marker_adopts_the_shared_start() {
        let mut p = PayloadProgress::new(100);
        // Bytes before the shared start do not trigger adoption.
        p.feed(0, b"....", Some(50));
        assert_eq!(p.start(), None);
        // Resumed mid-payload: adopt 50 and count from the overlap.
        assert_eq!(p.feed(120, &[b'x'; 40], Some(50)), Fed::Nothing);
        assert_eq!(p.start(), Some(50));
        assert_eq!(p.received(), 30);
        assert!(p.is_complete(160, None));
        assert_eq!(p.lost(), 70);
        // A reader skipped past the whole payload without a live byte in it is complete too.
        let q = PayloadProgress::new(100);
        assert!(!q.is_complete(149, Some(50)));
        assert!(q.is_complete(150, Some(50)));
        assert_eq!(q.lost(), 100);
    }
}
