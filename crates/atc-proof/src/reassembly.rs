//! One client's view of a session's output stream, put back together from all its
//! connections: where it has got to, and what it lost, saw twice or saw wrong.
//!
//! The client places every live byte at the offset the daemon says it has (an `attached`
//! frame's `offset`, then one more per byte after the prelude) and checks it against the
//! stream the emitter writes ([`crate::emit::byte_at`]). So a resume that starts somewhere
//! else than asked shows up as lost or repeated bytes, and bytes that are not the stream's at
//! their offset (a resume that claims the right offset but sends the wrong bytes) as wrong
//! ones. A `screen` replay where a resume was asked for is the daemon's documented reset (the
//! offset fell out of its ring, or the stream changed): it is counted apart, with the bytes it
//! skipped, and is not a loss.

use crate::emit::count_wrong;

/// How a connection's live bytes count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counting {
    /// Bytes below `next` were promised not to come again: each is a repeat.
    Exact,
    /// After a reset the screen is repainted; bytes below `next` are the overlap of that
    /// repaint with what the client had, not repeats.
    AfterReset,
    /// A plain attach the client only opens to close inside its prelude: its live bytes,
    /// if any arrive, are not the client's stream.
    Ignored,
}

#[derive(Debug, Clone, Copy)]
struct Conn {
    /// Offset of the next live byte on this connection.
    pos: u64,
    /// Prelude bytes still to come before live ones.
    prelude_left: u64,
    counting: Counting,
}

/// How an `attached` frame replays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    Screen,
    Resume,
}

impl Replay {
    /// The wire word (`"screen"`, `"resume"`).
    pub fn parse(word: &str) -> Option<Replay> {
        match word {
            "screen" => Some(Replay::Screen),
            "resume" => Some(Replay::Resume),
            _ => None,
        }
    }
}

/// What a connection opened with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// `stream` + `from`: a resume.
    Resume(u64),
    /// No `from`, and the live bytes are the client's (its first attach).
    First,
    /// No `from`, opened only to be closed inside the repaint.
    Repaint,
}

/// The figures of one client (or of many, added up).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub lost: u64,
    pub repeated: u64,
    pub wrong: u64,
    pub gap_resets: u64,
    pub gap_bytes: u64,
    /// Live bytes taken in.
    pub received: u64,
}

impl Tally {
    pub fn add(&mut self, o: &Tally) {
        self.lost += o.lost;
        self.repeated += o.repeated;
        self.wrong += o.wrong;
        self.gap_resets += o.gap_resets;
        self.gap_bytes += o.gap_bytes;
        self.received += o.received;
    }
}

/// One client's stream.
#[derive(Debug, Default)]
pub struct Reassembly {
    /// Offset of the first live byte of the first attach.
    base: Option<u64>,
    /// The next offset the client has not seen.
    next: u64,
    tally: Tally,
    conn: Option<Conn>,
}

impl Reassembly {
    pub fn new() -> Reassembly {
        Reassembly::default()
    }

    /// Where to resume from, once there is anything to resume.
    pub fn resume_point(&self) -> Option<u64> {
        self.base.map(|_| self.next)
    }

    /// The next offset not seen yet.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// The figures so far.
    pub fn tally(&self) -> Tally {
        self.tally
    }

    /// A connection opened (its `attached` frame, or a `resynced` one read on).
    pub fn attached(&mut self, asked: Asked, offset: u64, prelude: u64, replay: Replay) {
        let counting = match (asked, self.base) {
            (Asked::Repaint, _) => Counting::Ignored,
            (Asked::First, None) | (Asked::Resume(_), None) => {
                self.base = Some(offset);
                self.next = offset;
                Counting::Exact
            }
            (Asked::First, Some(_)) => self.reset_to(offset),
            (Asked::Resume(_), Some(_)) => match replay {
                Replay::Resume => {
                    // The daemon promises the bytes from `from` exactly; from anywhere else
                    // the difference is lost (ahead) or counted as repeats as it arrives.
                    if offset > self.next {
                        self.tally.lost += offset - self.next;
                        self.next = offset;
                    }
                    Counting::Exact
                }
                Replay::Screen => self.reset_to(offset),
            },
        };
        self.conn = Some(Conn {
            pos: offset,
            prelude_left: prelude,
            counting,
        });
    }

    /// A documented reset: the screen is repainted and live bytes start at `offset`.
    fn reset_to(&mut self, offset: u64) -> Counting {
        self.tally.gap_resets += 1;
        self.tally.gap_bytes += offset.saturating_sub(self.next);
        self.next = self.next.max(offset);
        Counting::AfterReset
    }

    /// Prelude bytes this connection still owes, if it is open.
    pub fn prelude_left(&self) -> Option<u64> {
        self.conn.map(|c| c.prelude_left)
    }

    /// A binary frame on the open connection. Answers how many of its bytes were live.
    pub fn binary(&mut self, mut bytes: &[u8]) -> u64 {
        let Some(conn) = self.conn.as_mut() else {
            return 0;
        };
        let skip = conn.prelude_left.min(bytes.len() as u64);
        conn.prelude_left -= skip;
        bytes = &bytes[skip as usize..];
        let live = bytes.len() as u64;
        let at = conn.pos;
        conn.pos += live;
        match conn.counting {
            Counting::Ignored => return 0,
            Counting::Exact | Counting::AfterReset => {}
        }
        let seen = self.next.saturating_sub(at).min(live);
        if conn.counting == Counting::Exact {
            self.tally.repeated += seen;
        }
        let fresh = &bytes[seen as usize..];
        self.tally.wrong += count_wrong(at + seen, fresh);
        self.next = self.next.max(at + live);
        self.tally.received += live;
        live
    }

    /// The connection ended (or a desync made its bytes meaningless until a resync).
    pub fn closed(&mut self) {
        self.conn = None;
    }

    /// The stream ended at `total`: whatever the client has not seen by then is lost.
    pub fn finish(&mut self, total: u64) {
        self.tally.lost += total.saturating_sub(self.next);
        self.next = self.next.max(total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emit::byte_at;

    fn stream(from: u64, to: u64) -> Vec<u8> {
        (from..to).map(byte_at).collect()
    }

    #[test]
    fn exact_resumes_lose_and_repeat_nothing() {
        let mut r = Reassembly::new();
        r.attached(Asked::First, 100, 3, Replay::Screen);
        let mut first = b"PPP".to_vec();
        first.extend(stream(100, 200));
        assert_eq!(r.binary(&first), 100);
        r.closed();
        assert_eq!(r.resume_point(), Some(200));
        r.attached(Asked::Resume(200), 200, 0, Replay::Resume);
        r.binary(&stream(200, 300));
        r.finish(300);
        assert_eq!(
            r.tally(),
            Tally {
                received: 200,
                ..Tally::default()
            }
        );
    }

    #[test]
    fn a_resume_from_the_wrong_place_is_counted() {
        let mut r = Reassembly::new();
        r.attached(Asked::First, 0, 0, Replay::Screen);
        r.binary(&stream(0, 50));
        r.attached(Asked::Resume(50), 40, 0, Replay::Resume);
        r.binary(&stream(40, 60));
        assert_eq!(r.tally().repeated, 10);
        r.attached(Asked::Resume(60), 70, 0, Replay::Resume);
        r.binary(&stream(70, 80));
        assert_eq!(r.tally().lost, 10);
        // The right offset claimed, other bytes sent.
        r.attached(Asked::Resume(80), 80, 0, Replay::Resume);
        r.binary(&stream(81, 91));
        assert!(r.tally().wrong > 0);
        r.finish(100);
        assert_eq!(r.tally().lost, 10 + 10);
    }

    #[test]
    fn a_screen_reset_is_a_counted_gap_not_a_loss() {
        let mut r = Reassembly::new();
        r.attached(Asked::First, 0, 0, Replay::Screen);
        r.binary(&stream(0, 10));
        r.attached(Asked::Resume(10), 500, 4, Replay::Screen);
        let mut bytes = b"RPNT".to_vec();
        bytes.extend(stream(500, 510));
        r.binary(&bytes);
        let t = r.tally();
        assert_eq!(
            (t.lost, t.repeated, t.gap_resets, t.gap_bytes),
            (0, 0, 1, 490)
        );
        // A repaint attach's bytes are not the client's.
        r.attached(Asked::Repaint, 505, 2, Replay::Screen);
        assert_eq!(r.prelude_left(), Some(2));
        r.binary(b"xxjunk");
        assert_eq!(r.next(), 510);
        assert_eq!(r.tally().wrong, 0);
    }
}
