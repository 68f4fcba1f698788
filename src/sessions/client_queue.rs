//! The bounded outbound queue of one attached client (spec §11.3).
//!
//! The session pushes frames; the client's socket writer pops them only as fast as the socket
//! accepts bytes. The byte count of frames pushed but not yet popped is the client's backlog.
//! Output that would take the backlog past the cap is not queued at all: the session counts it
//! as dropped for that client, and once the backlog has fully drained the writer reports it so
//! the session can send `desync` and a repaint. A slow client therefore costs at most its cap
//! in memory and never slows the PTY reader or the other clients.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::sync::mpsc;

/// One frame for a client socket.
#[derive(Debug)]
pub enum Outgoing {
    /// Raw output bytes.
    Binary(Bytes),
    /// A JSON text frame.
    Text(String),
    /// Keep-alive probe.
    Ping,
    /// Answer to the peer's ping.
    Pong(Bytes),
    /// A normal close; nothing is sent after it.
    Close,
}

impl Outgoing {
    fn cost(&self) -> usize {
        match self {
            Outgoing::Binary(b) => b.len(),
            Outgoing::Text(t) => t.len(),
            Outgoing::Ping | Outgoing::Pong(_) | Outgoing::Close => 0,
        }
    }
}

#[derive(Debug, Default)]
struct Shared {
    backlog: AtomicUsize,
    /// Set while output is being dropped; cleared by the writer when it reports the drain.
    desynced: AtomicBool,
}

/// The pushing side, held by the session (and by the client actor for pongs and close).
#[derive(Debug, Clone)]
pub struct ClientQueue {
    tx: mpsc::UnboundedSender<Outgoing>,
    shared: Arc<Shared>,
    cap: usize,
}

/// The popping side, held by the socket writer.
#[derive(Debug)]
pub struct QueueReceiver {
    rx: mpsc::UnboundedReceiver<Outgoing>,
    shared: Arc<Shared>,
}

/// What the writer popped, and whether that pop finished draining a desynced backlog.
#[derive(Debug)]
pub struct Popped {
    /// The frame to write.
    pub frame: Outgoing,
    /// The backlog just reached zero after a desync: tell the session to resync.
    pub drained_after_desync: bool,
}

/// A queue with a byte cap.
pub fn client_queue(cap: usize) -> (ClientQueue, QueueReceiver) {
    let (tx, rx) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared::default());
    (
        ClientQueue {
            tx,
            shared: shared.clone(),
            cap,
        },
        QueueReceiver { rx, shared },
    )
}

impl ClientQueue {
    /// Queues output bytes if they fit under the cap. `false` means they were not queued: the
    /// caller counts them as dropped, and the writer will report when the backlog drains.
    pub fn push_output(&self, bytes: Bytes) -> bool {
        let len = bytes.len();
        if self.shared.backlog.load(Ordering::Acquire) + len > self.cap {
            self.shared.desynced.store(true, Ordering::Release);
            // A backlog that drained between the load and the store above would never report;
            // nudge the writer with an empty frame so it re-checks.
            self.push(Outgoing::Binary(Bytes::new()));
            return false;
        }
        self.push(Outgoing::Binary(bytes));
        true
    }

    /// Queues a frame regardless of the cap (control text is small and must not be lost).
    pub fn push(&self, frame: Outgoing) {
        let cost = frame.cost();
        self.shared.backlog.fetch_add(cost, Ordering::AcqRel);
        if self.tx.send(frame).is_err() {
            // The writer is gone (socket closed); undo so the count stays meaningful.
            self.shared.backlog.fetch_sub(cost, Ordering::AcqRel);
        }
    }

    /// Queues a JSON text frame.
    pub fn push_text(&self, text: String) {
        self.push(Outgoing::Text(text));
    }

    /// Bytes queued and not yet taken by the writer.
    pub fn backlog(&self) -> usize {
        self.shared.backlog.load(Ordering::Acquire)
    }

    /// Whether the writer has gone away.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

impl QueueReceiver {
    /// Pops the next frame.
    pub fn poll_pop(&mut self, cx: &mut Context<'_>) -> Poll<Option<Popped>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(frame)) => {
                let left = self
                    .shared
                    .backlog
                    .fetch_sub(frame.cost(), Ordering::AcqRel)
                    - frame.cost();
                let drained_after_desync =
                    left == 0 && self.shared.desynced.swap(false, Ordering::AcqRel);
                Poll::Ready(Some(Popped {
                    frame,
                    drained_after_desync,
                }))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;

    #[tokio::test]
    async fn overflow_is_refused_and_reported_once_drained() {
        let (q, mut rx) = client_queue(10);
        assert!(q.push_output(Bytes::from_static(b"12345678")));
        assert!(!q.push_output(Bytes::from_static(b"abcdef")));
        assert_eq!(q.backlog(), 8);
        let first = poll_fn(|cx| rx.poll_pop(cx)).await.unwrap();
        assert!(matches!(first.frame, Outgoing::Binary(ref b) if b.len() == 8));
        // The pop that empties the backlog reports the drain (here: the 8-byte frame; the
        // empty nudge that follows reports nothing more).
        let nudge = poll_fn(|cx| rx.poll_pop(cx)).await.unwrap();
        assert!(first.drained_after_desync ^ nudge.drained_after_desync);
        assert_eq!(q.backlog(), 0);
        assert!(q.push_output(Bytes::from_static(b"again")));
    }

    #[tokio::test]
    async fn text_is_never_refused() {
        let (q, mut rx) = client_queue(4);
        q.push_text("a long control frame".into());
        let p = poll_fn(|cx| rx.poll_pop(cx)).await.unwrap();
        assert!(matches!(p.frame, Outgoing::Text(_)));
    }
}
