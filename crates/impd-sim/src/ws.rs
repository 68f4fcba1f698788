//! WebSocket framing for `/exec` and `/tunnel` on actix-http's codec, without actors: an
//! upgraded request becomes a [`WsIn`] (decoded messages, fragments reassembled) and a
//! [`WsOut`] (a bounded queue the response body drains only as fast as the peer reads), so a
//! socket's task can be one plain `async fn` with a `select!`.

use actix_codec::{Decoder, Encoder};
use actix_http::ws::{CloseCode, CloseReason, Codec, Frame, Message, ProtocolError};
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;

use ws_fragments::{FragmentError, Fragments, Whole};

/// Frames queued toward the peer before a sender waits.
const OUT_QUEUE: usize = 16;

/// A whole message from the peer.
#[derive(Debug)]
pub enum Inbound {
    Text(Bytes),
    Binary(Bytes),
    Ping(Bytes),
    /// The peer closes (or the connection ended).
    Close,
}

/// Why reading failed.
#[derive(Debug)]
pub enum ReadError {
    /// A message over the size limit.
    TooBig,
    /// Anything else the codec refused.
    Protocol,
}

/// The peer's messages.
pub struct WsIn {
    payload: web::Payload,
    codec: Codec,
    buf: BytesMut,
    fragments: Fragments,
    eof: bool,
}

impl WsIn {
    /// The next message; `Close` once the peer closed or the connection ended.
    pub async fn next(&mut self) -> Result<Inbound, ReadError> {
        loop {
            match self.codec.decode(&mut self.buf) {
                Ok(Some(frame)) => {
                    if let Some(msg) = self.assemble(frame)? {
                        return Ok(msg);
                    }
                    continue;
                }
                Ok(None) => {}
                Err(ProtocolError::Overflow) => return Err(ReadError::TooBig),
                Err(_) => return Err(ReadError::Protocol),
            }
            if self.eof {
                return Ok(Inbound::Close);
            }
            match self.payload.next().await {
                Some(Ok(chunk)) => self.buf.extend_from_slice(&chunk),
                Some(Err(_)) | None => self.eof = true,
            }
        }
    }

    fn assemble(&mut self, frame: Frame) -> Result<Option<Inbound>, ReadError> {
        Ok(Some(match frame {
            Frame::Text(b) => Inbound::Text(b),
            Frame::Binary(b) => Inbound::Binary(b),
            Frame::Ping(b) => Inbound::Ping(b),
            Frame::Pong(_) => return Ok(None),
            Frame::Close(_) => Inbound::Close,
            Frame::Continuation(item) => match self.fragments.push(item) {
                Ok(None) => return Ok(None),
                Ok(Some(Whole::Text(b))) => Inbound::Text(b),
                Ok(Some(Whole::Binary(b))) => Inbound::Binary(b),
                Err(FragmentError::NotStarted) => return Err(ReadError::Protocol),
                Err(FragmentError::TooBig) => return Err(ReadError::TooBig),
            },
        }))
    }
}

/// Sends to the peer. After `close` nothing more goes out.
pub struct WsOut {
    tx: mpsc::Sender<Message>,
    closed: bool,
    /// Data bytes sent in binary messages (channel byte excluded).
    pub data_bytes: u64,
}

impl WsOut {
    /// False once the peer is gone or the socket was closed.
    pub async fn text(&mut self, v: &Value) -> bool {
        self.send(Message::Text(v.to_string().into())).await
    }

    /// A text message that is not JSON (an injected fault).
    pub async fn raw_text(&mut self, s: &str) -> bool {
        self.send(Message::Text(s.to_string().into())).await
    }

    /// Binary message: `channel` byte (if any) then `data`.
    pub async fn binary(&mut self, channel: Option<u8>, data: &[u8]) -> bool {
        let mut b = BytesMut::with_capacity(data.len() + 1);
        if let Some(c) = channel {
            b.extend_from_slice(&[c]);
        }
        b.extend_from_slice(data);
        self.data_bytes += data.len() as u64;
        self.send(Message::Binary(b.freeze())).await
    }

    pub async fn pong(&mut self, b: Bytes) -> bool {
        self.send(Message::Pong(b)).await
    }

    /// Sends a close frame with `code` and `reason`; the connection ends after it.
    pub async fn close(&mut self, code: u16, reason: &str) {
        if self.closed {
            return;
        }
        let reason = CloseReason {
            code: CloseCode::from(code),
            description: (!reason.is_empty()).then(|| reason.to_string()),
        };
        // The peer may be gone already; then there is nobody to tell.
        let _ = self.tx.send(Message::Close(Some(reason))).await;
        self.closed = true;
    }

    async fn send(&mut self, m: Message) -> bool {
        !self.closed && self.tx.send(m).await.is_ok()
    }
}

/// Upgrades the request, or says why it is no WebSocket handshake (a 400 for the caller).
pub fn upgrade(
    req: &HttpRequest,
    payload: web::Payload,
    max: usize,
) -> Result<(HttpResponse, WsIn, WsOut), String> {
    let mut builder = match actix_http::ws::handshake(req.head()) {
        Ok(b) => b,
        Err(e) => return Err(e.to_string()),
    };
    let (tx, rx) = mpsc::channel::<Message>(OUT_QUEUE);
    let body = futures_util::stream::unfold(
        (rx, Codec::new(), false),
        |(mut rx, mut codec, done)| async move {
            if done {
                return None;
            }
            let msg = rx.recv().await?;
            let last = matches!(msg, Message::Close(_));
            let mut buf = BytesMut::new();
            let item = codec
                .encode(msg, &mut buf)
                .map(|()| buf.freeze())
                .map_err(actix_web::Error::from);
            Some((item, (rx, codec, last)))
        },
    );
    let response = match builder.message_body(actix_web::body::BoxBody::new(
        actix_web::body::BodyStream::new(body),
    )) {
        Ok(r) => HttpResponse::from(r),
        Err(e) => return Err(e.to_string()),
    };
    Ok((
        response,
        WsIn {
            payload,
            codec: Codec::new().max_size(max),
            buf: BytesMut::new(),
            fragments: Fragments::new(max),
            eof: false,
        },
        WsOut {
            tx,
            closed: false,
            data_bytes: 0,
        },
    ))
}
