//! One open WebSocket to impd, split into a queued writer and a message reader, both living on
//! the current arbiter. `/exec` and `/tunnel` sockets are built on it.
//!
//! The writer side is a task fed by an unbounded queue, so the non-async methods callers use
//! (input, resize, ack) never wait on the network and never reorder; the bytes waiting in the
//! queue are counted so a bulk writer can wait for them to drain (`wait_queued_below`). The
//! reader side turns frames into whole messages, answers pings (impd closes an exec socket
//! that leaves its pings unanswered for 30 s), echoes a close, and reports exactly one
//! `Closed` at the end: the peer's close code, or `None` for a transport loss or a close
//! handshake that did not finish within the grace.
//!
//! Dropping every [`LinkWriter`] closes the socket with 1000 (for an `/exec` session that is a
//! detach, spec §9.8). The reader holds only a weak handle to the queue for its pongs and
//! echoes, so it never keeps a socket open by itself.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_codec::Framed;
use actix_http::ws::{CloseCode, CloseReason, Codec, Frame, Item, Message};
use awc::BoxedSocket;
use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::{mpsc, watch, Notify};

use super::error::ImpPortError;
use ws_fragments::{FragmentError, Fragments, Whole};

/// An upgraded socket as awc hands it over.
pub(crate) type WsFramed = Framed<BoxedSocket, Codec>;

/// How long the reader waits for the peer's close after we sent ours before it calls the
/// socket lost. Long enough for impd to flush its last frames, short enough that a vanished
/// peer does not keep a reconnect waiting.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Largest message we assemble from continuation frames; far above anything impd sends
/// (its replay is at most 256 KiB), it only stops a broken peer from growing memory.
const MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// What the writer task sends.
enum Outbound {
    /// A data or control message; `bytes` is what it adds to the queued count.
    Message { msg: Message, bytes: usize },
    /// Our close (or the echo of the peer's); the writer stops after it.
    Close(Option<CloseReason>),
    /// The reader saw the socket end: stop without writing.
    Stop,
}

/// State both halves see.
struct Shared {
    /// Payload bytes queued but not yet handed to the socket.
    queued: AtomicUsize,
    /// The socket can take no more writes (closed, lost, or the writer task ended).
    gone: AtomicBool,
    /// Woken when `queued` drops or `gone` is set.
    changed: Notify,
}

impl Shared {
    fn mark_gone(&self) {
        self.gone.store(true, Ordering::SeqCst);
        self.changed.notify_waiters();
    }
}

/// The sending half: cheap to clone, usable from non-async code.
#[derive(Clone)]
pub(crate) struct LinkWriter {
    tx: mpsc::UnboundedSender<Outbound>,
    shared: Arc<Shared>,
}

/// The receiving half.
pub(crate) struct LinkReader {
    stream: SplitStream<WsFramed>,
    /// Weak, so the reader alone never keeps the socket open.
    tx: mpsc::WeakUnboundedSender<Outbound>,
    shared: Arc<Shared>,
    /// Turns true once the writer has sent our close (or stopped).
    closing: watch::Receiver<bool>,
    /// Set once our close went out: the peer's close must arrive by then.
    deadline: Option<tokio::time::Instant>,
    /// A message being assembled from continuation frames.
    fragments: Fragments,
    ended: bool,
}

/// One whole message from the peer.
#[derive(Debug)]
pub(crate) enum Incoming {
    Text(Bytes),
    Binary(Bytes),
    /// The socket ended; always the last item. `code` is the peer's close code, `None` for a
    /// transport loss; a close frame without a status reads as 1005 (RFC 6455 "no status").
    Closed {
        code: Option<u16>,
        reason: String,
    },
}

/// Splits an upgraded socket and starts its writer task on the current arbiter.
pub(crate) fn split(framed: WsFramed) -> (LinkWriter, LinkReader) {
    let (sink, stream) = framed.split();
    let (tx, rx) = mpsc::unbounded_channel();
    let (closing_tx, closing_rx) = watch::channel(false);
    let shared = Arc::new(Shared {
        queued: AtomicUsize::new(0),
        gone: AtomicBool::new(false),
        changed: Notify::new(),
    });
    actix_rt::spawn(write_loop(sink, rx, shared.clone(), closing_tx));
    let reader = LinkReader {
        stream,
        tx: tx.downgrade(),
        shared: shared.clone(),
        closing: closing_rx,
        deadline: None,
        fragments: Fragments::new(MAX_MESSAGE),
        ended: false,
    };
    (LinkWriter { tx, shared }, reader)
}

/// Drains the queue into the socket, in order, until a close, a stop, a write error, or every
/// writer is dropped (then it closes with 1000).
async fn write_loop(
    mut sink: SplitSink<WsFramed, Message>,
    mut rx: mpsc::UnboundedReceiver<Outbound>,
    shared: Arc<Shared>,
    closing: watch::Sender<bool>,
) {
    loop {
        match rx.recv().await {
            Some(Outbound::Message { msg, bytes }) => {
                let sent = sink.send(msg).await;
                shared.queued.fetch_sub(bytes, Ordering::SeqCst);
                shared.changed.notify_waiters();
                if sent.is_err() {
                    break;
                }
            }
            Some(Outbound::Close(reason)) => {
                // A failed close write means the socket is already gone; the reader sees that.
                let _ = sink.send(Message::Close(reason)).await;
                break;
            }
            Some(Outbound::Stop) => break,
            None => {
                // Every writer was dropped: end the socket politely. A failed write means it is
                // gone already.
                let _ = sink
                    .send(Message::Close(Some(CloseReason::from(CloseCode::Normal))))
                    .await;
                break;
            }
        }
    }
    rx.close();
    shared.mark_gone();
    // The reader may be gone already; then nobody waits for the close handshake.
    let _ = closing.send(true);
}

impl LinkWriter {
    fn push(&self, msg: Message, bytes: usize) -> Result<(), ImpPortError> {
        if self.is_gone() {
            return Err(ImpPortError::closed(None, "the socket is gone"));
        }
        self.shared.queued.fetch_add(bytes, Ordering::SeqCst);
        self.tx.send(Outbound::Message { msg, bytes }).map_err(|_| {
            self.shared.queued.fetch_sub(bytes, Ordering::SeqCst);
            ImpPortError::closed(None, "the socket is gone")
        })
    }

    /// Queues a JSON control message.
    pub(crate) fn send_json(&self, value: &serde_json::Value) -> Result<(), ImpPortError> {
        self.push(Message::Text(value.to_string().into()), 0)
    }

    /// Queues one binary message; its length counts as queued until it is written.
    pub(crate) fn send_binary(&self, bytes: Bytes) -> Result<(), ImpPortError> {
        let n = bytes.len();
        self.push(Message::Binary(bytes), n)
    }

    /// Queues our close; later writes fail.
    pub(crate) fn close(&self, code: u16) -> Result<(), ImpPortError> {
        self.close_with(code, None)
    }

    /// Queues our close with a reason text; later writes fail.
    pub(crate) fn close_with(&self, code: u16, reason: Option<&str>) -> Result<(), ImpPortError> {
        if self.is_gone() {
            return Err(ImpPortError::closed(None, "the socket is gone"));
        }
        self.tx
            .send(Outbound::Close(Some(CloseReason {
                code: CloseCode::from(code),
                description: reason.map(str::to_string),
            })))
            .map_err(|_| ImpPortError::closed(None, "the socket is gone"))
    }

    /// Whether the socket can take no more writes.
    pub(crate) fn is_gone(&self) -> bool {
        self.shared.gone.load(Ordering::SeqCst) || self.tx.is_closed()
    }

    /// Payload bytes queued and not yet written to the socket.
    pub(crate) fn queued_bytes(&self) -> usize {
        self.shared.queued.load(Ordering::SeqCst)
    }

    /// Waits until fewer than `limit` payload bytes are queued; fails once the socket is gone.
    pub(crate) async fn wait_queued_below(&self, limit: usize) -> Result<(), ImpPortError> {
        loop {
            // Created before the check so a wakeup between check and await is not lost.
            let changed = self.shared.changed.notified();
            if self.is_gone() {
                return Err(ImpPortError::closed(None, "the socket is gone"));
            }
            if self.queued_bytes() < limit {
                return Ok(());
            }
            changed.await;
        }
    }
}

impl LinkReader {
    /// The next whole message; after the one `Closed`, `None`.
    pub(crate) async fn next(&mut self) -> Option<Incoming> {
        if self.ended {
            return None;
        }
        loop {
            let frame = match self.deadline {
                Some(deadline) => {
                    match tokio::time::timeout_at(deadline, self.stream.next()).await {
                        Ok(frame) => frame,
                        Err(_) => return Some(self.end(None, "close handshake timed out")),
                    }
                }
                None => {
                    tokio::select! {
                        frame = self.stream.next() => frame,
                        _ = self.closing.wait_for(|sent| *sent) => {
                            self.deadline = Some(tokio::time::Instant::now() + CLOSE_GRACE);
                            continue;
                        }
                    }
                }
            };
            let frame = match frame {
                // After our close a peer may end the connection without echoing it.
                None if self.deadline.is_some() => {
                    return Some(self.end(None, "connection ended after our close"))
                }
                None => return Some(self.end(None, "connection ended")),
                Some(Err(e)) => return Some(self.end(None, &e.to_string())),
                Some(Ok(frame)) => frame,
            };
            match frame {
                Frame::Text(t) => return Some(Incoming::Text(t)),
                Frame::Binary(b) => return Some(Incoming::Binary(b)),
                Frame::Ping(p) => self.queue(Outbound::Message {
                    msg: Message::Pong(p),
                    bytes: 0,
                }),
                Frame::Pong(_) => {}
                Frame::Close(reason) => {
                    self.queue(Outbound::Close(reason.clone()));
                    let (code, text) = match reason {
                        Some(r) => (u16::from(r.code), r.description.unwrap_or_default()),
                        None => (1005, String::new()),
                    };
                    return Some(self.end(Some(code), &text));
                }
                Frame::Continuation(item) => {
                    if let Some(whole) = self.assemble(item) {
                        return Some(whole);
                    }
                }
            }
        }
    }

    /// Closes the socket from the reading side (after a message we cannot parse). The reader
    /// keeps delivering until the peer's close or the grace.
    pub(crate) fn close(&self, code: u16) {
        self.queue(Outbound::Close(Some(CloseReason::from(CloseCode::from(
            code,
        )))));
    }

    fn queue(&self, out: Outbound) {
        if let Some(tx) = self.tx.upgrade() {
            // A closed queue means the writer already ended; nothing is left to answer.
            let _ = tx.send(out);
        }
    }

    fn end(&mut self, code: Option<u16>, reason: &str) -> Incoming {
        self.ended = true;
        self.shared.mark_gone();
        self.queue(Outbound::Stop);
        Incoming::Closed {
            code,
            reason: reason.to_string(),
        }
    }

    /// Adds a continuation frame; returns the message once its last frame arrived.
    fn assemble(&mut self, item: Item) -> Option<Incoming> {
        match self.fragments.push(item) {
            Ok(Some(Whole::Text(bytes))) => Some(Incoming::Text(bytes)),
            Ok(Some(Whole::Binary(bytes))) => Some(Incoming::Binary(bytes)),
            Ok(None) => None,
            // A continuation without a first frame: the codec lets it through; it is dropped.
            Err(FragmentError::NotStarted) => None,
            Err(FragmentError::TooBig) => {
                self.close(1009);
                None
            }
        }
    }
}
