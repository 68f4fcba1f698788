//! Where a remote harness is in its process's output (spec §5.6, impd §9.6): the boot and
//! execution generation it follows, and the high-water mark — the offset after the last byte
//! the session has. Each connection says where its data starts (`offset`) and how many mode
//! bytes come first (`prelude`, fresh attaches only); from those every later byte has an offset,
//! and any byte below the high-water mark is a repeat and is dropped. Delivery across
//! connections is at-least-once; this is what makes it exactly-once.

use bytes::Bytes;

/// What a connection's `started.output` says, as far as the cursor cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Continuity {
    /// Guest boot identity.
    pub boot_id: String,
    /// One run of the session's process.
    pub generation: String,
    /// Offset of the first data byte after the prelude.
    pub offset: u64,
    /// Mode bytes before the data; they carry no offset.
    pub prelude: u64,
}

/// The harness's position. Empty until a connection with offsets started.
#[derive(Debug, Default, Clone)]
pub struct Cursor {
    boot_id: Option<String>,
    generation: Option<String>,
    high_water: u64,
}

/// One connection's reading position.
#[derive(Debug, Clone)]
pub struct Feed {
    /// Offsets are known (impd advertises them and the agent keeps them).
    counted: bool,
    /// Offset of the next data byte.
    next: u64,
    /// Mode bytes still to pass through before offsets count.
    prelude_left: u64,
}

impl Cursor {
    /// The resume point for a reconnect: `(generation, high-water)`, once there is one.
    pub fn resume_from(&self) -> Option<(String, u64)> {
        self.generation.clone().map(|g| (g, self.high_water))
    }

    /// The boot the harness's process runs in, once known.
    pub fn boot_id(&self) -> Option<&str> {
        self.boot_id.as_deref()
    }

    /// The generation the harness follows, once known.
    pub fn generation(&self) -> Option<&str> {
        self.generation.as_deref()
    }

    /// The offset after the last byte the session has.
    pub fn high_water(&self) -> u64 {
        self.high_water
    }

    /// The position, once there is one.
    pub fn position(&self) -> Option<crate::providers::RemotePosition> {
        Some(crate::providers::RemotePosition {
            boot_id: self.boot_id.clone()?,
            generation: self.generation.clone()?,
            offset: self.high_water,
        })
    }

    /// Takes up a position a previous harness left (a revive or a daemon restart).
    pub fn restore(&mut self, position: &crate::providers::RemotePosition) {
        self.boot_id = Some(position.boot_id.clone());
        self.generation = Some(position.generation.clone());
        self.high_water = position.offset;
    }

    /// Forgets the position (after `INVALID_RESUME`: the next attach is fresh).
    pub fn clear(&mut self) {
        *self = Cursor::default();
    }

    /// A connection started. `fresh` when it replays history (no resume): the session's
    /// screen is reset before it, so its bytes are all delivered and the high-water mark
    /// restarts from the replay. `None` continuity: an agent without offsets; every byte is
    /// delivered (each of its connections is a fresh replay).
    pub fn begin(&mut self, continuity: Option<&Continuity>, fresh: bool) -> Feed {
        let Some(c) = continuity else {
            return Feed {
                counted: false,
                next: 0,
                prelude_left: 0,
            };
        };
        self.boot_id = Some(c.boot_id.clone());
        if fresh || self.generation.as_deref() != Some(c.generation.as_str()) {
            self.generation = Some(c.generation.clone());
            self.high_water = c.offset;
        }
        Feed {
            counted: true,
            next: c.offset,
            prelude_left: c.prelude,
        }
    }

    /// The part of a data chunk the session has not had yet.
    pub fn take(&mut self, feed: &mut Feed, chunk: Bytes) -> Bytes {
        if !feed.counted {
            return chunk;
        }
        let prelude = (feed.prelude_left.min(chunk.len() as u64)) as usize;
        feed.prelude_left -= prelude as u64;
        let data_len = (chunk.len() - prelude) as u64;
        let start = feed.next;
        feed.next += data_len;
        // Bytes [start, start + data_len) of the generation; keep those at or above the mark.
        let skip = self.high_water.saturating_sub(start).min(data_len) as usize;
        if feed.next > self.high_water {
            self.high_water = feed.next;
        }
        if skip == 0 {
            return chunk;
        }
        if prelude == 0 {
            return chunk.slice(skip..);
        }
        let mut out = Vec::with_capacity(chunk.len() - skip);
        out.extend_from_slice(&chunk[..prelude]);
        out.extend_from_slice(&chunk[prelude + skip..]);
        Bytes::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cont(generation: &str, offset: u64, prelude: u64) -> Continuity {
        Continuity {
            boot_id: "B1".into(),
            generation: generation.into(),
            offset,
            prelude,
        }
    }

    #[test]
    fn a_resume_that_repeats_bytes_delivers_each_once() {
        let mut c = Cursor::default();
        let mut f = c.begin(Some(&cont("G1", 0, 0)), true);
        assert_eq!(
            &c.take(&mut f, Bytes::from_static(b"hello "))[..],
            b"hello "
        );
        assert_eq!(c.resume_from(), Some(("G1".into(), 6)));
        // impd resumes a little early: bytes 3..6 again, then new ones.
        let mut f = c.begin(Some(&cont("G1", 3, 0)), false);
        assert_eq!(&c.take(&mut f, Bytes::from_static(b"lo"))[..], b"");
        assert_eq!(&c.take(&mut f, Bytes::from_static(b" world"))[..], b"world");
        assert_eq!(c.high_water(), 11);
        // An exact resume.
        let mut f = c.begin(Some(&cont("G1", 11, 0)), false);
        assert_eq!(&c.take(&mut f, Bytes::from_static(b"!"))[..], b"!");
        assert_eq!(c.resume_from(), Some(("G1".into(), 12)));
    }

    #[test]
    fn a_fresh_replay_passes_its_prelude_and_restarts_the_mark() {
        let mut c = Cursor::default();
        let mut f = c.begin(Some(&cont("G1", 0, 0)), true);
        c.take(&mut f, Bytes::from(vec![b'x'; 100]));
        // Gap, then a fresh attach replaying from 302000 with 3 mode bytes first.
        let mut f = c.begin(Some(&cont("G1", 302_000, 3)), true);
        assert_eq!(
            &c.take(&mut f, Bytes::from_static(b"\x1b[?abc"))[..],
            b"\x1b[?abc"
        );
        assert_eq!(c.high_water(), 302_003);
        // A later resume from an earlier point drops what was had, prelude-free.
        let mut f = c.begin(Some(&cont("G1", 302_001, 0)), false);
        assert_eq!(&c.take(&mut f, Bytes::from_static(b"bcd"))[..], b"d");
        // The prelude split across chunks is still not counted.
        let mut c = Cursor::default();
        let mut f = c.begin(Some(&cont("G2", 10, 4)), true);
        assert_eq!(&c.take(&mut f, Bytes::from_static(b"mm"))[..], b"mm");
        assert_eq!(&c.take(&mut f, Bytes::from_static(b"mmAB"))[..], b"mmAB");
        assert_eq!(c.high_water(), 12);
    }

    #[test]
    fn a_new_generation_or_no_offsets_delivers_everything() {
        let mut c = Cursor::default();
        let mut f = c.begin(Some(&cont("G1", 0, 0)), true);
        c.take(&mut f, Bytes::from_static(b"0123456789"));
        let mut f = c.begin(Some(&cont("G2", 0, 0)), false);
        assert_eq!(&c.take(&mut f, Bytes::from_static(b"new"))[..], b"new");
        assert_eq!(c.resume_from(), Some(("G2".into(), 3)));
        let mut f = c.begin(None, false);
        assert_eq!(&c.take(&mut f, Bytes::from_static(b"any"))[..], b"any");
        c.clear();
        assert_eq!(c.resume_from(), None);
    }
}
