//! What one attached client may be sent, and when (api.md, the attach WebSocket): `attached`
//! is the first frame on the socket, and `desync` is followed by `resynced` and its repaint
//! with nothing in between. A client whose opening frames are not out yet (its screen snapshot
//! is on the way, or a resume is being put together) is *pending*: text and a close meant for
//! it are held, each with the stream offset it happened at, and sent right after the opening
//! interleaved with the replayed bytes at those offsets, so the client sees them in the order
//! they happened. Output is not held: the ring replays it when the client opens.
//!
//! This is plain state driven by the session actor; it only pushes onto the client's
//! [`ClientQueue`] and knows nothing of actors or sockets.

use bytes::Bytes;

use crate::sessions::client_queue::{ClientQueue, Outgoing};

/// How a pending client is opened, which decides its opening frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// A fresh attach or a resume: `attached` first.
    Attach,
    /// After an overflow: `desync` with the bytes dropped, then `resynced`.
    Resync {
        /// Bytes the client missed.
        dropped: u64,
    },
}

/// Output a client missed because it was too far behind, for the metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Missed {
    /// Bytes not queued.
    pub bytes: u64,
    /// The client began dropping here (a desync is owed).
    pub began: bool,
}

/// A frame held for a pending client, with the stream offset at which it happened.
#[derive(Debug)]
struct Held {
    at: u64,
    frame: Outgoing,
}

#[derive(Debug)]
enum State {
    /// Every output byte is queued for it.
    Live,
    /// Its backlog overflowed: output is counted, not queued, until the backlog drains.
    Dropping(u64),
    /// Its opening frames are not out yet: output is not queued (the ring replays it) and
    /// text is held.
    Pending { opening: Opening, held: Vec<Held> },
}

/// Where one client's delivery stands. Invariant: nothing reaches the queue of a pending
/// client, and nothing at all after a close.
#[derive(Debug)]
pub struct ClientDelivery {
    state: State,
    closed: bool,
}

impl ClientDelivery {
    /// A client that has not been opened yet.
    pub fn pending(opening: Opening) -> ClientDelivery {
        ClientDelivery {
            state: State::Pending {
                opening,
                held: Vec::new(),
            },
            closed: false,
        }
    }

    /// How the client is to be opened, while it is pending.
    pub fn opening(&self) -> Option<Opening> {
        match &self.state {
            State::Pending { opening, .. } => Some(*opening),
            State::Live | State::Dropping(_) => None,
        }
    }

    /// Whether the session has sent (or holds) the client's close.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// A text frame that happened at stream offset `at`: queued now, or held until the
    /// client opens.
    pub fn text(&mut self, queue: &ClientQueue, text: String, at: u64) {
        self.frame(queue, Outgoing::Text(text), at);
    }

    /// Closes the client after everything sent or held before. Returns `true` when the
    /// close is queued (the slot can go); a pending client keeps it until it opens.
    pub fn close(&mut self, queue: &ClientQueue, at: u64) -> bool {
        self.frame(queue, Outgoing::Close, at);
        self.closed = true;
        self.opening().is_none()
    }

    fn frame(&mut self, queue: &ClientQueue, frame: Outgoing, at: u64) {
        if self.closed {
            return;
        }
        match &mut self.state {
            State::Live | State::Dropping(_) => queue.push(frame),
            State::Pending { held, .. } => held.push(Held { at, frame }),
        }
    }

    /// Output the session just wrote; answers what of it the client missed.
    pub fn output(&mut self, queue: &ClientQueue, bytes: &Bytes) -> Missed {
        if self.closed {
            return Missed::default();
        }
        match &mut self.state {
            // The ring replays these when the client opens.
            State::Pending { .. } => Missed::default(),
            State::Live | State::Dropping(_) => self.replay(queue, bytes.clone()),
        }
    }

    /// The client's backlog drained after an overflow: it becomes pending a resync. `false`
    /// when it was not dropping (nothing to resync).
    pub fn start_resync(&mut self) -> bool {
        let State::Dropping(dropped) = self.state else {
            return false;
        };
        self.state = State::Pending {
            opening: Opening::Resync { dropped },
            held: Vec::new(),
        };
        true
    }

    /// Opens a pending client: its opening text frames, the repaint (if any), then the ring's
    /// bytes from offset `from` with every held frame placed at the offset it happened at.
    /// The client is live afterwards. Does nothing for a client that is not pending.
    ///
    /// The opening is queued whole, past the queue's cap if need be, like the repaint: the
    /// ring bounds it, and a resume promises the bytes from its offset (api.md). Capping it
    /// gave a resume whose tail was larger than the queue (`ringBytes` over `queueBytes`) an
    /// `attached` and at once a `desync`, with the bytes still in the ring. Live output after
    /// the opening counts against the cap as always.
    pub fn open(
        &mut self,
        queue: &ClientQueue,
        frames: Vec<String>,
        repaint: Option<Bytes>,
        from: u64,
        tail: Bytes,
    ) {
        let State::Pending { held, .. } = std::mem::replace(&mut self.state, State::Live) else {
            return;
        };
        for f in frames {
            queue.push_text(f);
        }
        if let Some(repaint) = repaint {
            queue.push(Outgoing::Binary(repaint));
        }
        let mut sent = 0usize;
        for h in held {
            let upto = usize::try_from(h.at.saturating_sub(from))
                .unwrap_or(usize::MAX)
                .min(tail.len());
            if upto > sent {
                queue.push(Outgoing::Binary(tail.slice(sent..upto)));
                sent = upto;
            }
            queue.push(h.frame);
        }
        if sent < tail.len() {
            queue.push(Outgoing::Binary(tail.slice(sent..)));
        }
    }

    fn replay(&mut self, queue: &ClientQueue, bytes: Bytes) -> Missed {
        let len = bytes.len() as u64;
        match &mut self.state {
            State::Live => {
                if queue.push_output(bytes) {
                    return Missed::default();
                }
                self.state = State::Dropping(len);
                Missed {
                    bytes: len,
                    began: true,
                }
            }
            State::Dropping(n) => {
                *n += len;
                Missed {
                    bytes: len,
                    began: false,
                }
            }
            State::Pending { .. } => Missed::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::client_queue::{client_queue, QueueReceiver};
    use std::future::poll_fn;

    /// What the writer would see, as short strings: `T:text`, `B:bytes`, `close`.
    async fn drain(rx: &mut QueueReceiver, q: ClientQueue) -> Vec<String> {
        drop(q);
        let mut out = Vec::new();
        while let Some(p) = poll_fn(|cx| rx.poll_pop(cx)).await {
            out.push(match p.frame {
                Outgoing::Text(t) => format!("T:{t}"),
                Outgoing::Binary(b) => format!("B:{}", String::from_utf8_lossy(&b)),
                Outgoing::Close => "close".into(),
                Outgoing::Ping | Outgoing::Pong(_) => "ping".into(),
            });
        }
        out
    }

    #[tokio::test]
    async fn nothing_reaches_a_pending_client_before_its_opening() {
        let (q, mut rx) = client_queue(1024);
        let mut d = ClientDelivery::pending(Opening::Attach);
        d.text(&q, "resized".into(), 10);
        d.output(&q, &Bytes::from_static(b"lost?"));
        d.text(&q, "state".into(), 12);
        assert_eq!(q.backlog(), 0, "a pending client got something");
        d.open(
            &q,
            vec!["attached".into()],
            Some(Bytes::from_static(b"paint")),
            10,
            Bytes::from_static(b"abcdef"),
        );
        d.text(&q, "later".into(), 16);
        assert_eq!(
            drain(&mut rx, q).await,
            [
                "T:attached",
                "B:paint",
                "T:resized",
                "B:ab",
                "T:state",
                "B:cdef",
                "T:later"
            ]
        );
    }

    #[tokio::test]
    async fn a_resync_holds_everything_between_desync_and_its_repaint() {
        // Room for the 8-byte `attached` and 4 bytes of output.
        let (q, mut rx) = client_queue(12);
        let mut d = ClientDelivery::pending(Opening::Attach);
        d.open(&q, vec!["attached".into()], None, 0, Bytes::new());
        assert_eq!(
            d.output(&q, &Bytes::from_static(b"1234")),
            Missed::default()
        );
        let began = Missed {
            bytes: 2,
            began: true,
        };
        assert_eq!(d.output(&q, &Bytes::from_static(b"56")), began);
        let more = Missed {
            bytes: 1,
            began: false,
        };
        assert_eq!(d.output(&q, &Bytes::from_static(b"7")), more);
        assert!(d.start_resync());
        assert_eq!(d.opening(), Some(Opening::Resync { dropped: 3 }));
        d.text(&q, "state".into(), 7);
        d.open(
            &q,
            vec!["desync".into(), "resynced".into()],
            Some(Bytes::from_static(b"P")),
            7,
            Bytes::new(),
        );
        assert!(!d.start_resync(), "a live client has nothing to resync");
        assert_eq!(
            drain(&mut rx, q).await,
            [
                "T:attached",
                "B:1234",
                "B:",
                "T:desync",
                "T:resynced",
                "B:P",
                "T:state"
            ]
        );
    }

    #[tokio::test]
    async fn a_close_held_while_pending_goes_out_last_and_nothing_follows_it() {
        let (q, mut rx) = client_queue(1024);
        let mut d = ClientDelivery::pending(Opening::Attach);
        d.text(&q, "exit".into(), 3);
        assert!(!d.close(&q, 3), "a pending client cannot be closed yet");
        d.text(&q, "state".into(), 3);
        d.open(
            &q,
            vec!["attached".into()],
            None,
            0,
            Bytes::from_static(b"xyz"),
        );
        assert!(d.is_closed());
        d.output(&q, &Bytes::from_static(b"more"));
        assert_eq!(
            drain(&mut rx, q).await,
            ["T:attached", "B:xyz", "T:exit", "close"]
        );
    }

    #[tokio::test]
    async fn a_live_client_gets_frames_at_once_and_its_close_frees_the_slot() {
        let (q, mut rx) = client_queue(1024);
        let mut d = ClientDelivery::pending(Opening::Attach);
        d.open(&q, vec!["attached".into()], None, 0, Bytes::new());
        d.output(&q, &Bytes::from_static(b"out"));
        d.text(&q, "state".into(), 3);
        assert!(d.close(&q, 3));
        assert_eq!(
            drain(&mut rx, q).await,
            ["T:attached", "B:out", "T:state", "close"]
        );
    }

    #[tokio::test]
    async fn an_opening_over_the_cap_is_queued_whole_and_live_output_then_drops() {
        let (q, mut rx) = client_queue(4);
        let mut d = ClientDelivery::pending(Opening::Attach);
        d.open(
            &q,
            vec!["attached".into()],
            None,
            0,
            Bytes::from_static(b"too long"),
        );
        // The backlog is past the cap now: live output is dropped, and a resync is owed.
        let missed = d.output(&q, &Bytes::from_static(b"live"));
        assert_eq!(
            missed,
            Missed {
                bytes: 4,
                began: true
            }
        );
        assert!(d.start_resync());
        let seen = drain(&mut rx, q).await;
        assert_eq!(seen, ["T:attached", "B:too long", "B:"], "{seen:?}");
    }
}
