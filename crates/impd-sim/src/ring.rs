//! One generation's output history: exactly the last 262144 bytes, addressed by offsets that
//! count every byte the generation ever wrote (protocol §9.6, §9.7, §14).
//!
//! Invariants: `end` only grows; the byte at an offset never changes; `buffer_start() = end -
//! kept`. Alongside the bytes it keeps ground-state checkpoints (an offset where no escape
//! sequence is open, and the modes in effect there), so a fresh attach can start its replay at
//! a safe boundary and restore modes with a prelude.

use std::collections::VecDeque;

use super::modes::{ModeTracker, Modes};

/// Bytes kept per generation (protocol §14: exactly 256 KiB).
pub const RING_BYTES: usize = 262_144;

/// Checkpoints are at least this far apart, which bounds their number to 256 per ring.
const CHECKPOINT_SPACING: u64 = 1024;

/// The output of one generation.
#[derive(Debug)]
pub struct Ring {
    bytes: VecDeque<u8>,
    end: u64,
    tracker: ModeTracker,
    /// `(offset, modes)` at ground-state positions, oldest first, none below `buffer_start`.
    checkpoints: VecDeque<(u64, Modes)>,
}

impl Default for Ring {
    fn default() -> Ring {
        let mut checkpoints = VecDeque::new();
        checkpoints.push_back((0, Modes::default()));
        Ring {
            bytes: VecDeque::with_capacity(RING_BYTES),
            end: 0,
            tracker: ModeTracker::default(),
            checkpoints,
        }
    }
}

impl Ring {
    /// Offset after the last byte written.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Oldest offset still held.
    pub fn buffer_start(&self) -> u64 {
        self.end - self.bytes.len() as u64
    }

    /// Appends output.
    pub fn push(&mut self, data: &[u8]) {
        for &b in data {
            let last = self.checkpoints.back().map(|c| c.0).unwrap_or(0);
            if self.tracker.at_ground() && self.end >= last + CHECKPOINT_SPACING {
                self.checkpoints
                    .push_back((self.end, self.tracker.modes().clone()));
            }
            self.tracker.feed(b);
            self.bytes.push_back(b);
            self.end += 1;
        }
        let excess = self.bytes.len().saturating_sub(RING_BYTES);
        self.bytes.drain(..excess);
        let start = self.buffer_start();
        while self.checkpoints.front().is_some_and(|c| c.0 < start) {
            self.checkpoints.pop_front();
        }
    }

    /// Bytes `[from, to)`, clipped to what is held (and to at most `max` bytes).
    pub fn read(&self, from: u64, max: usize) -> Vec<u8> {
        let from = from.max(self.buffer_start()).min(self.end);
        let skip = (from - self.buffer_start()) as usize;
        self.bytes.range(skip..).take(max).copied().collect()
    }

    /// Where a fresh attach starts and the prelude that restores the modes there: the oldest
    /// ground-state checkpoint still held, or the end with the current modes when there is none.
    pub fn replay_start(&self) -> (u64, Vec<u8>) {
        match self.checkpoints.front() {
            Some((offset, modes)) => (*offset, modes.prelude()),
            None => (self.end, self.tracker.modes().prelude()),
        }
    }
}
