//! What one attached client knows about its place in a session's output stream.
//!
//! The attach WebSocket interleaves two kinds of bytes in binary frames: repaint bytes (the
//! "prelude" announced by `attached` and `resynced`, which have no offset) and live bytes, each of
//! which sits at a known offset of the session's stream. [`StreamTracker`] keeps the bookkeeping
//! that tells them apart: after a control frame it knows how many prelude bytes are still to come
//! and at which offset the next live byte sits. It is pure (no sockets, no clocks), so the rules
//! are unit-tested here; `attach.rs` feeds it the frames it reads.

use atc_protocol::{AttachFrame, ErrorCode, ExitReason};
use thiserror::Error;

/// What the bench makes of a text frame from the attach socket (the frame itself is
/// `atc_protocol::AttachFrame`).
///
/// Only what the bench acts on is kept; frame types it has no use for (`resized`, `state`,
/// `attachment`, and any the contract adds later) become [`ControlFrame::Other`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlFrame {
    /// First frame: live bytes start at `offset`, after `prelude` repaint bytes.
    Attached {
        /// Offset of the first live byte.
        offset: u64,
        /// Repaint bytes that precede it.
        prelude: u64,
    },
    /// This client's queue overflowed and `dropped` bytes will never reach it.
    Desync {
        /// Bytes the daemon dropped for this client.
        dropped: u64,
    },
    /// Live bytes resume at `offset`, after `prelude` repaint bytes.
    Resynced {
        /// Offset of the next live byte.
        offset: u64,
        /// Repaint bytes that precede it.
        prelude: u64,
    },
    /// The harness ended; a normal close follows.
    Exit {
        /// Why.
        reason: ExitReason,
    },
    /// The daemon refused something on this socket.
    Error {
        /// Closed-set error code.
        code: ErrorCode,
        /// What to do next, as the daemon words it.
        message: String,
    },
    /// A frame the bench does not act on.
    Other,
}

impl ControlFrame {
    /// Parses one text frame. A JSON object with a `type` the protocol does not know is
    /// [`ControlFrame::Other`] (a newer daemon may add frames); anything else that does not
    /// parse is an error, since the contract promises every text frame is one of its frames.
    pub fn parse(text: &[u8]) -> Result<ControlFrame, StreamError> {
        match serde_json::from_slice::<AttachFrame>(text) {
            Ok(frame) => Ok(ControlFrame::from(frame)),
            Err(e) => {
                let typed = serde_json::from_slice::<serde_json::Value>(text)
                    .ok()
                    .is_some_and(|v| v.get("type").is_some_and(|t| t.is_string()));
                if typed {
                    Ok(ControlFrame::Other)
                } else {
                    Err(StreamError::BadControl(e.to_string()))
                }
            }
        }
    }
}

impl From<AttachFrame> for ControlFrame {
    /// What the bench keeps of a frame it read.
    fn from(frame: AttachFrame) -> ControlFrame {
        match frame {
            AttachFrame::Attached {
                offset, prelude, ..
            } => ControlFrame::Attached {
                offset,
                prelude: prelude as u64,
            },
            AttachFrame::Desync { dropped } => ControlFrame::Desync { dropped },
            AttachFrame::Resynced { offset, prelude } => ControlFrame::Resynced {
                offset,
                prelude: prelude as u64,
            },
            AttachFrame::Exit { reason, .. } => ControlFrame::Exit { reason },
            AttachFrame::Error { code, message } => ControlFrame::Error { code, message },
            AttachFrame::Resized { .. }
            | AttachFrame::State { .. }
            | AttachFrame::Attachment { .. } => ControlFrame::Other,
        }
    }
}

/// Ways a client's view of the stream stops making sense.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum StreamError {
    /// The contract says `attached` comes first; bytes before it have no place in the stream.
    #[error("binary frame before the attached frame")]
    BinaryBeforeAttached,
    /// A text frame that is not valid JSON with a `type` field.
    #[error("unreadable control frame: {0}")]
    BadControl(String),
}

/// Where a binary frame's bytes belong: the first `skip` bytes are repaint, the rest are live and
/// start at `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// Leading repaint bytes to ignore.
    pub skip: usize,
    /// Stream offset of the first live byte (meaningless when nothing is live).
    pub offset: u64,
}

/// One client's position in a session's output stream.
///
/// Invariant: once attached, `next_offset` only grows, except that a `resynced` frame may move it
/// anywhere (the daemon says where live bytes resume).
#[derive(Debug, Default, Clone)]
pub struct StreamTracker {
    /// Offset of the next live byte; `None` until `attached`.
    next_offset: Option<u64>,
    /// Repaint bytes still expected before live bytes resume.
    prelude_left: u64,
    /// Sum of `dropped` over every `desync`.
    dropped: u64,
    /// How many `desync` frames arrived.
    desyncs: u32,
}

impl StreamTracker {
    /// A tracker that has seen nothing yet.
    pub fn new() -> StreamTracker {
        StreamTracker::default()
    }

    /// Applies a control frame's effect on the stream position.
    pub fn on_control(&mut self, frame: &ControlFrame) {
        match frame {
            ControlFrame::Attached { offset, prelude }
            | ControlFrame::Resynced { offset, prelude } => {
                self.next_offset = Some(*offset);
                self.prelude_left = *prelude;
            }
            ControlFrame::Desync { dropped } => {
                self.dropped = self.dropped.saturating_add(*dropped);
                self.desyncs = self.desyncs.saturating_add(1);
            }
            ControlFrame::Exit { .. } | ControlFrame::Error { .. } | ControlFrame::Other => {}
        }
    }

    /// Places a binary frame of `len` bytes and advances past it.
    pub fn on_binary(&mut self, len: usize) -> Result<Placement, StreamError> {
        let offset = self.next_offset.ok_or(StreamError::BinaryBeforeAttached)?;
        let skip = usize::try_from(self.prelude_left).map_or(len, |left| left.min(len));
        self.prelude_left -= skip as u64;
        let live = (len - skip) as u64;
        self.next_offset = Some(offset.saturating_add(live));
        Ok(Placement { skip, offset })
    }

    /// Offset of the next live byte, once attached.
    pub fn position(&self) -> Option<u64> {
        self.next_offset
    }

    /// Total bytes the daemon reported dropped for this client.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// How many times this client fell behind.
    pub fn desyncs(&self) -> u32 {
        self.desyncs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_frames_it_acts_on_and_ignores_the_rest() {
        let f = ControlFrame::parse(
            br#"{"type":"attached","session":"5f0c2a1e-8b7d-4c3e-9f10-0123456789ab","stream":"x","cols":80,"rows":24,"offset":7,"prelude":3,"replay":"screen"}"#,
        );
        assert_eq!(
            f,
            Ok(ControlFrame::Attached {
                offset: 7,
                prelude: 3
            })
        );
        assert_eq!(
            ControlFrame::parse(br#"{"type":"desync","dropped":10}"#),
            Ok(ControlFrame::Desync { dropped: 10 })
        );
        assert_eq!(
            ControlFrame::parse(br#"{"type":"resized","cols":1,"rows":2}"#),
            Ok(ControlFrame::Other)
        );
        assert!(matches!(
            ControlFrame::parse(br#"{"type":"exit","code":0,"signal":null,"reason":"killed","detail":""}"#),
            Ok(ControlFrame::Exit { reason }) if reason == ExitReason::Killed
        ));
        assert!(ControlFrame::parse(b"not json").is_err());
    }

    #[test]
    fn binary_before_attached_is_refused() {
        let mut t = StreamTracker::new();
        assert_eq!(t.on_binary(4), Err(StreamError::BinaryBeforeAttached));
    }

    #[test]
    fn prelude_is_skipped_across_frames_then_live_bytes_get_offsets() {
        let mut t = StreamTracker::new();
        t.on_control(&ControlFrame::Attached {
            offset: 100,
            prelude: 5,
        });
        assert_eq!(
            t.on_binary(3),
            Ok(Placement {
                skip: 3,
                offset: 100
            })
        );
        assert_eq!(t.position(), Some(100));
        // Two prelude bytes left, then 4 live bytes at 100..104.
        assert_eq!(
            t.on_binary(6),
            Ok(Placement {
                skip: 2,
                offset: 100
            })
        );
        assert_eq!(t.position(), Some(104));
        assert_eq!(
            t.on_binary(10),
            Ok(Placement {
                skip: 0,
                offset: 104
            })
        );
        assert_eq!(t.position(), Some(114));
    }

    #[test]
    fn desync_counts_drops_and_resynced_moves_the_position() {
        let mut t = StreamTracker::new();
        t.on_control(&ControlFrame::Attached {
            offset: 0,
            prelude: 0,
        });
        t.on_binary(10).expect("attached");
        t.on_control(&ControlFrame::Desync { dropped: 90 });
        t.on_control(&ControlFrame::Resynced {
            offset: 100,
            prelude: 2,
        });
        assert_eq!(t.dropped(), 90);
        assert_eq!(t.desyncs(), 1);
        assert_eq!(
            t.on_binary(5),
            Ok(Placement {
                skip: 2,
                offset: 100
            })
        );
        assert_eq!(t.position(), Some(103));
    }
}
