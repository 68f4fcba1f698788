//! WebSocket framing for our sockets, both ways, on actix-http's codec.
//!
//! We do not use `actix_web_actors::ws::WebsocketContext` for output: its frame buffer is
//! private and unbounded, so a slow client would grow it without the session ever knowing.
//! Instead the response body is an [`OutboundStream`] that pops frames from the client's
//! [`QueueReceiver`] only when actix-http asks for more body, which it does only while the
//! socket keeps up. That is what makes the per-client queue a real bound. Input is decoded
//! by [`InboundMessages`] and fed to the client's actor as a stream; each frame header is
//! checked before its payload is read (`ws_header`), so a client cannot make us buffer more
//! than the cap. A socket ends in one of two ways: a close frame that comes through the queue
//! (the session or the keep-alive closing, `keep_alive.rs`), after which actix-http lingers
//! for the peer as it always does, or a [`Hangup`] from the socket's actor (the close
//! handshake is done, or the peer broke the protocol), after which the TCP connection ends at
//! once.
//!
//! Large output frames are not copied into the codec's buffer: their header is written on its
//! own and the payload goes to actix-http as the very `Bytes` the PTY reader made, shared with
//! the ring and every other client (actix-http copies it once, into its write buffer, as it
//! does any body chunk).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use actix_codec::{Decoder, Encoder};
use actix_http::ws::{CloseCode, CloseReason, Codec, Frame, Message, ProtocolError};
use actix_web::error::PayloadError;
use bytes::{Bytes, BytesMut};
use futures_util::Stream;
use tokio::sync::oneshot;

use super::conn_socket::ConnSocket;
use super::ws_header::{self, Violation};
use crate::protocol::ws_fragments::{FragmentError, Fragments, Whole};
use crate::sessions::client_queue::{Outgoing, QueueReceiver};

/// Encoded bytes taken from the queue per poll, at most; bounds what sits outside our queue.
const BATCH_BYTES: usize = 64 * 1024;

/// Binary frames at least this large go out as header + shared payload; smaller ones are
/// copied into the batch, which is cheaper than a body chunk of their own.
const SHARED_PAYLOAD_MIN: usize = 2 * 1024;

/// The header of an unmasked, final binary frame (RFC 6455 §5.2) of `len` payload bytes, as a
/// server sends it.
fn binary_frame_header(len: usize, out: &mut BytesMut) {
    const FIN_BINARY: u8 = 0x82;
    out.extend_from_slice(&[FIN_BINARY]);
    match len {
        0..=125 => out.extend_from_slice(&[len as u8]),
        126..=0xffff => {
            out.extend_from_slice(&[126]);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            out.extend_from_slice(&[127]);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
}

/// How the TCP connection ends once the writer's close frame is out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// As actix-http ends any response whose request is still open: it reads on until the
    /// peer closes or its disconnect timeout runs out. Right when we closed first and the
    /// peer still owes us its close frame.
    Linger,
    /// Right away: the close handshake is over, or the peer is being failed.
    AtOnce,
}

/// Where the writer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Frames go out.
    Open,
    /// The close frame is written (or the queue ended); nothing more goes out.
    Closed(Ending),
}

/// The response body of a socket: frames from a client queue, encoded.
pub struct OutboundStream {
    rx: QueueReceiver,
    /// Fires once, from the socket's actor; `None` once it fired or its sender is gone.
    hangup: Option<oneshot::Receiver<CloseCode>>,
    /// The connection's socket, to end it at once (absent only if it could not be kept).
    socket: Option<ConnSocket>,
    codec: Codec,
    /// Frames encoded and not yet handed to actix-http.
    buf: BytesMut,
    /// Body chunks ready for actix-http, in order, ahead of `buf`: the headers and payloads of
    /// large binary frames, and the encoded frames before them.
    ready: VecDeque<Bytes>,
    /// Bytes in `ready`.
    ready_len: usize,
    on_drained: Box<dyn Fn() + Unpin>,
    phase: Phase,
}

/// The actor's way to end its socket at once: a close frame with the given code goes out ahead
/// of anything still queued (the peer is leaving or being failed, so queued output is moot),
/// then the TCP connection ends without waiting for the peer.
pub struct Hangup(Option<oneshot::Sender<CloseCode>>);

impl Hangup {
    /// Closes with `code` and ends the connection; later calls do nothing.
    pub fn hang_up(&mut self, code: CloseCode) {
        if let Some(tx) = self.0.take() {
            if tx.send(code).is_err() {
                // The writer is gone: the connection already ended.
                tracing::debug!("socket writer gone before the hang-up");
            }
        }
    }
}

impl OutboundStream {
    /// A writer on `rx` for the connection `socket` (from the request's connection data), and
    /// the [`Hangup`] for the socket's actor. `on_drained` runs when the backlog empties after
    /// a desync.
    pub fn new(
        rx: QueueReceiver,
        socket: Option<ConnSocket>,
        on_drained: Box<dyn Fn() + Unpin>,
    ) -> (OutboundStream, Hangup) {
        let (tx, hangup) = oneshot::channel();
        let stream = OutboundStream {
            rx,
            hangup: Some(hangup),
            socket,
            codec: Codec::new(),
            buf: BytesMut::new(),
            ready: VecDeque::new(),
            ready_len: 0,
            on_drained,
            phase: Phase::Open,
        };
        (stream, Hangup(Some(tx)))
    }

    fn close(&mut self, code: CloseCode, ending: Ending) -> Result<(), ProtocolError> {
        self.phase = Phase::Closed(ending);
        self.codec
            .encode(Message::Close(Some(CloseReason::from(code))), &mut self.buf)
    }

    /// Moves what `buf` holds to the end of `ready`.
    fn flush_buf(&mut self) {
        if !self.buf.is_empty() {
            self.ready_len += self.buf.len();
            self.ready.push_back(self.buf.split().freeze());
        }
    }

    fn encode(&mut self, frame: Outgoing) -> Result<(), ProtocolError> {
        let msg = match frame {
            Outgoing::Binary(b) if b.is_empty() => return Ok(()),
            Outgoing::Binary(b) if b.len() >= SHARED_PAYLOAD_MIN => {
                binary_frame_header(b.len(), &mut self.buf);
                self.flush_buf();
                self.ready_len += b.len();
                self.ready.push_back(b);
                return Ok(());
            }
            Outgoing::Binary(b) => Message::Binary(b),
            Outgoing::Text(t) => Message::Text(t.into()),
            Outgoing::Ping => Message::Ping(Bytes::new()),
            Outgoing::Pong(b) => Message::Pong(b),
            Outgoing::Close => return self.close(CloseCode::Normal, Ending::Linger),
        };
        self.codec.encode(msg, &mut self.buf)
    }

    /// A hang-up from the actor, if one came. Checked before the queue: the actor hangs up
    /// before it stops, and its stopping is what ends the queue.
    fn poll_hangup(&mut self, cx: &mut Context<'_>) -> Option<CloseCode> {
        let rx = self.hangup.as_mut()?;
        match Pin::new(rx).poll(cx) {
            Poll::Ready(Ok(code)) => {
                self.hangup = None;
                Some(code)
            }
            // The actor stopped without hanging up; the queue decides how the socket ends.
            Poll::Ready(Err(_)) => {
                self.hangup = None;
                None
            }
            Poll::Pending => None,
        }
    }
}

impl Stream for OutboundStream {
    type Item = Result<Bytes, actix_web::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.phase == Phase::Open {
            if let Some(code) = this.poll_hangup(cx) {
                if let Err(e) = this.close(code, Ending::AtOnce) {
                    return Poll::Ready(Some(Err(e.into())));
                }
            }
        }
        if let Some(chunk) = this.ready.pop_front() {
            this.ready_len -= chunk.len();
            return Poll::Ready(Some(Ok(chunk)));
        }
        while this.phase == Phase::Open && this.buf.len() + this.ready_len < BATCH_BYTES {
            match this.rx.poll_pop(cx) {
                Poll::Ready(Some(popped)) => {
                    if popped.drained_after_desync {
                        (this.on_drained)();
                    }
                    if let Err(e) = this.encode(popped.frame) {
                        return Poll::Ready(Some(Err(e.into())));
                    }
                }
                // Every sender is gone: the session dropped this client and its actor stopped.
                Poll::Ready(None) => this.phase = Phase::Closed(Ending::Linger),
                Poll::Pending => break,
            }
        }
        this.flush_buf();
        if let Some(chunk) = this.ready.pop_front() {
            this.ready_len -= chunk.len();
            return Poll::Ready(Some(Ok(chunk)));
        }
        match this.phase {
            Phase::Open => Poll::Pending,
            Phase::Closed(Ending::Linger) => Poll::Ready(None),
            Phase::Closed(Ending::AtOnce) => {
                // The close frame is with actix-http now; it writes it before it acts on the
                // EOF this causes.
                if let Some(socket) = this.socket.take() {
                    socket.stop_reading();
                }
                Poll::Ready(None)
            }
        }
    }
}

/// A whole message from the peer (fragments reassembled).
#[derive(Debug)]
pub enum Inbound {
    /// Binary message.
    Binary(Bytes),
    /// Text message, valid UTF-8.
    Text(Bytes),
    /// Ping with payload.
    Ping(Bytes),
    /// Pong.
    Pong,
    /// The peer closes.
    Close,
}

/// Why the peer's messages ended.
#[derive(Debug, thiserror::Error)]
pub enum InboundError {
    /// The peer broke the protocol; the socket answers with the violation's close code.
    #[error("the peer broke the WebSocket protocol: {0}")]
    Violation(#[from] Violation),
    /// The connection failed under us (the peer vanished, or the body ended after an exit).
    #[error("the connection failed: {0}")]
    Failed(#[source] std::io::Error),
}

/// Decodes the request payload of an upgraded connection into messages. After the first
/// error it ends: a connection that broke the protocol is not read further.
pub struct InboundMessages<S> {
    payload: S,
    codec: Codec,
    buf: BytesMut,
    /// A fragmented message in progress.
    fragments: Fragments,
    cap: usize,
    eof: bool,
    failed: bool,
}

impl<S> InboundMessages<S> {
    /// Messages larger than `max_size` end the connection with close code 1009, refused from
    /// the header of the frame that declares them.
    pub fn new(payload: S, max_size: usize) -> InboundMessages<S> {
        InboundMessages {
            payload,
            codec: Codec::new().max_size(max_size),
            buf: BytesMut::new(),
            fragments: Fragments::new(max_size),
            cap: max_size,
            eof: false,
            failed: false,
        }
    }

    fn assemble(&mut self, frame: Frame) -> Result<Option<Inbound>, Violation> {
        Ok(Some(match frame {
            Frame::Binary(b) => Inbound::Binary(b),
            Frame::Text(b) => Inbound::Text(utf8(b)?),
            Frame::Ping(b) => Inbound::Ping(b),
            Frame::Pong(_) => Inbound::Pong,
            Frame::Close(_) => Inbound::Close,
            Frame::Continuation(item) => match self.fragments.push(item) {
                Ok(None) => return Ok(None),
                Ok(Some(Whole::Text(b))) => Inbound::Text(utf8(b)?),
                Ok(Some(Whole::Binary(b))) => Inbound::Binary(b),
                Err(FragmentError::NotStarted) => return Err(Violation::BadContinuation),
                Err(FragmentError::TooBig) => {
                    return Err(Violation::TooBig {
                        declared: self.cap as u64 + 1,
                        cap: self.cap,
                    })
                }
            },
        }))
    }

    /// The next message already in the buffer, if a whole one is there.
    fn next_buffered(&mut self) -> Result<Option<Inbound>, InboundError> {
        while ws_header::check(&self.buf, self.cap)? {
            let frame = match self.codec.decode(&mut self.buf) {
                Ok(Some(frame)) => frame,
                Ok(None) => return Ok(None),
                Err(e) => {
                    return Err(match Violation::from_codec(&e, self.cap) {
                        Some(v) => InboundError::Violation(v),
                        None => InboundError::Failed(std::io::Error::other(e.to_string())),
                    })
                }
            };
            if let Some(msg) = self.assemble(frame)? {
                return Ok(Some(msg));
            }
        }
        Ok(None)
    }
}

/// Text as the peer sent it, once it is known to be UTF-8.
fn utf8(text: Bytes) -> Result<Bytes, Violation> {
    match std::str::from_utf8(&text) {
        Ok(_) => Ok(text),
        Err(_) => Err(Violation::InvalidUtf8),
    }
}

impl<S> Stream for InboundMessages<S>
where
    S: Stream<Item = Result<Bytes, PayloadError>> + Unpin,
{
    type Item = Result<Inbound, InboundError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if this.failed {
                return Poll::Ready(None);
            }
            match this.next_buffered() {
                Ok(Some(msg)) => return Poll::Ready(Some(Ok(msg))),
                Ok(None) => {}
                Err(e) => {
                    this.failed = true;
                    return Poll::Ready(Some(Err(e)));
                }
            }
            if this.eof {
                return Poll::Ready(None);
            }
            // The header check above bounds this buffer: at most one frame under the cap, plus
            // the chunk that completes it.
            match Pin::new(&mut this.payload).poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => this.buf.extend_from_slice(&chunk),
                Poll::Ready(Some(Err(e))) => {
                    this.failed = true;
                    return Poll::Ready(Some(Err(InboundError::Failed(std::io::Error::other(
                        e.to_string(),
                    )))));
                }
                Poll::Ready(None) => this.eof = true,
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_header_is_what_the_codec_writes_before_the_payload() {
        for len in [1, 125, 126, 127, 0xffff, 0x10000, 200_000] {
            let payload = Bytes::from(vec![7u8; len]);
            let mut by_codec = BytesMut::new();
            Codec::new()
                .encode(Message::Binary(payload.clone()), &mut by_codec)
                .unwrap();
            let mut ours = BytesMut::new();
            binary_frame_header(len, &mut ours);
            ours.extend_from_slice(&payload);
            assert_eq!(ours, by_codec, "payload of {len} bytes");
        }
    }
}
