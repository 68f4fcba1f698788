//! WebSocket framing for our sockets, both ways, on actix-http's codec.
//!
//! We do not use `actix_web_actors::ws::WebsocketContext` for output: its frame buffer is
//! private and unbounded, so a slow client would grow it without the session ever knowing.
//! Instead the response body is an [`OutboundStream`] that pops frames from the client's
//! [`QueueReceiver`] only when actix-http asks for more body, which it does only while the
//! socket keeps up. That is what makes the per-client queue a real bound. Input is decoded
//! by [`InboundMessages`] and fed to the client's actor as a stream.

use std::pin::Pin;
use std::task::{Context, Poll};

use actix_codec::{Decoder, Encoder};
use actix_http::ws::{CloseCode, CloseReason, Codec, Frame, Message, ProtocolError};
use actix_web::error::PayloadError;
use bytes::{Bytes, BytesMut};
use futures_util::Stream;

use crate::config::Timings;
use crate::protocol::ws_fragments::{FragmentError, Fragments, Whole};
use crate::sessions::client_queue::{ClientQueue, Outgoing, QueueReceiver};

/// Encoded bytes handed to actix-http per poll, at most; bounds what sits outside our queue.
const BATCH_BYTES: usize = 64 * 1024;

/// The response body of a socket: frames from a client queue, encoded.
pub struct OutboundStream {
    rx: QueueReceiver,
    codec: Codec,
    buf: BytesMut,
    on_drained: Box<dyn Fn() + Unpin>,
    closed: bool,
}

impl OutboundStream {
    /// `on_drained` runs when the backlog empties after a desync.
    pub fn new(rx: QueueReceiver, on_drained: Box<dyn Fn() + Unpin>) -> OutboundStream {
        OutboundStream {
            rx,
            codec: Codec::new(),
            buf: BytesMut::new(),
            on_drained,
            closed: false,
        }
    }

    fn encode(&mut self, frame: Outgoing) -> Result<(), ProtocolError> {
        let msg = match frame {
            Outgoing::Binary(b) if b.is_empty() => return Ok(()),
            Outgoing::Binary(b) => Message::Binary(b),
            Outgoing::Text(t) => Message::Text(t.into()),
            Outgoing::Ping => Message::Ping(Bytes::new()),
            Outgoing::Pong(b) => Message::Pong(b),
            Outgoing::Close => {
                self.closed = true;
                Message::Close(Some(CloseReason::from(CloseCode::Normal)))
            }
        };
        self.codec.encode(msg, &mut self.buf)
    }
}

impl Stream for OutboundStream {
    type Item = Result<Bytes, actix_web::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        while !this.closed && this.buf.len() < BATCH_BYTES {
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
                Poll::Ready(None) => this.closed = true,
                Poll::Pending => break,
            }
        }
        if !this.buf.is_empty() {
            Poll::Ready(Some(Ok(this.buf.split().freeze())))
        } else if this.closed {
            Poll::Ready(None)
        } else {
            Poll::Pending
        }
    }
}

/// A whole message from the peer (fragments reassembled).
#[derive(Debug)]
pub enum Inbound {
    /// Binary message.
    Binary(Bytes),
    /// Text message (not yet checked for UTF-8).
    Text(Bytes),
    /// Ping with payload.
    Ping(Bytes),
    /// Pong.
    Pong,
    /// The peer closes.
    Close,
}

/// Decodes the request payload of an upgraded connection into messages.
pub struct InboundMessages<S> {
    payload: S,
    codec: Codec,
    buf: BytesMut,
    /// A fragmented message in progress.
    fragments: Fragments,
    eof: bool,
}

impl<S> InboundMessages<S> {
    /// Messages larger than `max_size` end the connection with a protocol error.
    pub fn new(payload: S, max_size: usize) -> InboundMessages<S> {
        InboundMessages {
            payload,
            codec: Codec::new().max_size(max_size),
            buf: BytesMut::new(),
            fragments: Fragments::new(max_size),
            eof: false,
        }
    }

    fn assemble(&mut self, frame: Frame) -> Result<Option<Inbound>, ProtocolError> {
        Ok(Some(match frame {
            Frame::Binary(b) => Inbound::Binary(b),
            Frame::Text(b) => Inbound::Text(b),
            Frame::Ping(b) => Inbound::Ping(b),
            Frame::Pong(_) => Inbound::Pong,
            Frame::Close(_) => Inbound::Close,
            Frame::Continuation(item) => match self.fragments.push(item) {
                Ok(None) => return Ok(None),
                Ok(Some(Whole::Text(b))) => Inbound::Text(b),
                Ok(Some(Whole::Binary(b))) => Inbound::Binary(b),
                Err(FragmentError::NotStarted) => {
                    return Err(ProtocolError::ContinuationNotStarted)
                }
                Err(FragmentError::TooBig) => return Err(ProtocolError::Overflow),
            },
        }))
    }
}

impl<S> Stream for InboundMessages<S>
where
    S: Stream<Item = Result<Bytes, PayloadError>> + Unpin,
{
    type Item = Result<Inbound, ProtocolError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            match this.codec.decode(&mut this.buf) {
                Ok(Some(frame)) => match this.assemble(frame) {
                    Ok(Some(msg)) => return Poll::Ready(Some(Ok(msg))),
                    Ok(None) => continue,
                    Err(e) => return Poll::Ready(Some(Err(e))),
                },
                Ok(None) => {}
                Err(e) => return Poll::Ready(Some(Err(e))),
            }
            if this.eof {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.payload).poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => this.buf.extend_from_slice(&chunk),
                Poll::Ready(Some(Err(e))) => {
                    return Poll::Ready(Some(Err(ProtocolError::Io(std::io::Error::other(
                        e.to_string(),
                    )))))
                }
                Poll::Ready(None) => this.eof = true,
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// A socket actor the heartbeat can watch: when it last heard from its peer, and its queue.
pub trait SocketPeer: actix::Actor<Context = actix::Context<Self>> {
    /// When the peer last sent anything (any frame counts as a sign of life).
    fn last_heard(&self) -> std::time::Instant;
    /// The connection's outbound queue.
    fn queue(&self) -> &ClientQueue;
}

/// Pings the peer every `ws_ping` and stops the actor (closing the socket) once it has been
/// silent for `ws_timeout` or its socket writer is gone. Stopping only ends this connection.
pub fn keep_alive<A: SocketPeer>(ctx: &mut actix::Context<A>, timings: &Timings) {
    use actix::{ActorContext, AsyncContext};
    let timeout = timings.ws_timeout;
    ctx.run_interval(timings.ws_ping, move |act, ctx| {
        if act.last_heard().elapsed() > timeout || act.queue().is_closed() {
            tracing::info!("socket peer went silent; dropping the connection");
            act.queue().push(Outgoing::Close);
            ctx.stop();
        } else {
            act.queue().push(Outgoing::Ping);
        }
    });
}
