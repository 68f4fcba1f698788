//! [`FrameReader`]: the one loop that reads a daemon socket's frames. It answers pings on the
//! way, parses each text frame into the socket's protocol type (`AttachFrame` on an attach
//! socket, `FleetEvent` on the events socket) and hands binary frames over as they came, so
//! a caller sees only what the socket means: [`Incoming`].
//!
//! What a caller does with the bytes (skipping a repaint's prelude, placing live bytes at
//! their offsets) differs from one caller to the next and stays with it; reading is the same
//! for all of them: the CLI-adjacent tools (`atc-bench`, `atc-proof`) and the tests' clients.

use std::marker::PhantomData;
use std::time::Duration;

use atc_protocol::{AttachFrame, FleetEvent};
use awc::ws::{CloseCode, CloseReason, Frame, Message};
use bytes::Bytes;
use futures_util::{SinkExt as _, StreamExt as _};
use serde::de::DeserializeOwned;

use crate::WsConnection;

/// What a socket hands over, pings aside.
#[derive(Debug)]
pub enum Incoming<T> {
    /// A text frame, parsed.
    Text(T),
    /// A binary frame: terminal bytes (input on the way in, output on the way out).
    Binary(Bytes),
    /// The peer sent a close frame, with its reason if it gave one.
    Closed(Option<CloseReason>),
    /// The connection ended without a close frame.
    Ended,
}

impl<T> Incoming<T> {
    /// How the socket ended, in words, for a [`Incoming::Closed`] or [`Incoming::Ended`];
    /// `None` for a frame.
    pub fn ending(&self) -> Option<String> {
        match self {
            Incoming::Closed(None) => Some("closed without a reason".into()),
            Incoming::Closed(Some(r)) => Some(format!(
                "closed ({:?}) {}",
                r.code,
                r.description.as_deref().unwrap_or_default()
            )),
            Incoming::Ended => Some("connection ended".into()),
            Incoming::Text(_) | Incoming::Binary(_) => None,
        }
    }
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The WebSocket itself failed (a protocol error, or the connection broke mid-frame).
    #[error("the socket failed: {0}")]
    Socket(String),
    /// A text frame that is not one of the socket's frames. The frame is consumed; the next
    /// read goes on after it.
    #[error("a text frame that is not the protocol's ({cause}): {text}")]
    NotAFrame {
        /// The frame as sent (lossy UTF-8).
        text: String,
        /// What the parser said.
        cause: String,
    },
    /// A fragmented message: the daemon always sends whole frames.
    #[error("a fragmented message; the daemon sends whole frames")]
    Fragmented,
}

/// Reads one socket's frames as [`Incoming`], answering pings. `T` is the text frames' type.
pub struct FrameReader<T> {
    socket: WsConnection,
    frames: PhantomData<fn() -> T>,
}

/// An attach socket's reader.
pub type AttachReader = FrameReader<AttachFrame>;

/// The events socket's reader.
pub type EventsReader = FrameReader<FleetEvent>;

impl<T: DeserializeOwned> FrameReader<T> {
    /// Reads `socket` from its next frame on.
    pub fn new(socket: WsConnection) -> FrameReader<T> {
        FrameReader {
            socket,
            frames: PhantomData,
        }
    }

    /// The next frame. Pings are answered and pongs skipped on the way; dropping the future
    /// between frames loses nothing (it may lose a pong being sent, which the peer's next ping
    /// makes up for).
    pub async fn next(&mut self) -> Result<Incoming<T>, ReadError> {
        loop {
            let Some(frame) = self.socket.next().await else {
                return Ok(Incoming::Ended);
            };
            match frame.map_err(|e| ReadError::Socket(e.to_string()))? {
                Frame::Text(text) => {
                    return serde_json::from_slice(&text)
                        .map(Incoming::Text)
                        .map_err(|e| ReadError::NotAFrame {
                            text: String::from_utf8_lossy(&text).into_owned(),
                            cause: e.to_string(),
                        })
                }
                Frame::Binary(bytes) => return Ok(Incoming::Binary(bytes)),
                Frame::Ping(payload) => self
                    .socket
                    .send(Message::Pong(payload))
                    .await
                    .map_err(|e| ReadError::Socket(format!("answering a ping: {e}")))?,
                Frame::Pong(_) => {}
                Frame::Close(reason) => return Ok(Incoming::Closed(reason)),
                Frame::Continuation(_) => return Err(ReadError::Fragmented),
            }
        }
    }

    /// Sends one message as it is.
    pub async fn send(&mut self, message: Message) -> Result<(), ReadError> {
        self.socket
            .send(message)
            .await
            .map_err(|e| ReadError::Socket(e.to_string()))
    }

    /// The socket underneath, for a caller that must read without answering pings (a client
    /// playing one that stopped answering) or write frames of its own.
    pub fn socket(&mut self) -> &mut WsConnection {
        &mut self.socket
    }

    /// Detaches politely: a normal close, waiting at most `within` for it to go out. A socket
    /// already gone, or too backed up to take the frame, ends when it is dropped here, which
    /// the daemon treats as the same detach.
    pub async fn close(mut self, within: Duration) {
        let close = Message::Close(Some(CloseReason::from(CloseCode::Normal)));
        let _ = actix_rt::time::timeout(within, self.socket.send(close)).await;
    }
}
