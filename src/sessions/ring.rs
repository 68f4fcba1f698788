//! The output ring: the most recent bytes of a session's output stream, with offsets.
//!
//! Every byte a session's harness writes gets the next offset of the session's stream, a
//! counter that starts at 0 and only grows, across revives too. The ring keeps the newest
//! `capacity` bytes so a client can resume exactly where it left off. Memory grows with use:
//! an idle session holds nothing, which is what keeps thousands of them cheap.

use std::collections::VecDeque;

/// Recent output with offsets.
#[derive(Debug)]
pub struct OutputRing {
    bytes: VecDeque<u8>,
    capacity: usize,
    /// Offset one past the newest byte (the total ever written).
    end: u64,
}

impl OutputRing {
    /// An empty ring that keeps at most `capacity` bytes.
    pub fn new(capacity: usize) -> OutputRing {
        OutputRing {
            bytes: VecDeque::new(),
            capacity,
            end: 0,
        }
    }

    /// Offset the next byte will get.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Offset of the oldest byte still held.
    pub fn start(&self) -> u64 {
        self.end - self.bytes.len() as u64
    }

    /// Appends output, dropping the oldest bytes beyond capacity.
    pub fn push(&mut self, data: &[u8]) {
        self.end += data.len() as u64;
        let keep = data.len().min(self.capacity);
        let tail = &data[data.len() - keep..];
        let overflow = (self.bytes.len() + tail.len()).saturating_sub(self.capacity);
        self.bytes.drain(..overflow);
        self.bytes.extend(tail);
    }

    /// Whether the ring still holds offset `from` (the end counts: nothing after it yet).
    pub fn holds(&self, from: u64) -> bool {
        (self.start()..=self.end).contains(&from)
    }

    /// The bytes from `from` to the end, if the ring still holds `from`.
    pub fn since(&self, from: u64) -> Option<Vec<u8>> {
        if !self.holds(from) {
            return None;
        }
        let skip = (from - self.start()) as usize;
        Some(self.bytes.range(skip..).copied().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_only_grow_and_old_bytes_fall_out() {
        let mut r = OutputRing::new(4);
        r.push(b"abc");
        assert_eq!((r.start(), r.end()), (0, 3));
        r.push(b"def");
        assert_eq!((r.start(), r.end()), (2, 6));
        assert_eq!(r.since(2).unwrap(), b"cdef");
        assert_eq!(r.since(5).unwrap(), b"f");
        assert_eq!(r.since(6).unwrap(), b"");
        assert!(r.since(1).is_none());
        assert!(r.since(7).is_none());
        assert!(r.holds(2) && r.holds(6) && !r.holds(1) && !r.holds(7));
    }

    #[test]
    fn a_push_larger_than_the_ring_keeps_its_tail() {
        let mut r = OutputRing::new(3);
        r.push(b"0123456789");
        assert_eq!(r.since(7).unwrap(), b"789");
        assert_eq!(r.end(), 10);
    }
}
