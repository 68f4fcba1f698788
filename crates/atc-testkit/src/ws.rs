//! A WebSocket client of the daemon's two sockets for tests: frames read through
//! `atc-client`'s [`FrameReader`] (pings answered, text frames parsed), kept as JSON so a test
//! can check the wire itself, with a log of what it saw for failure messages.

use std::time::{Duration, Instant};

use atc_client::frame_reader::{FrameReader, Incoming};
use awc::ws;
use bytes::Bytes;
use futures_util::StreamExt as _;
use serde_json::Value;

use crate::wait::WITHIN;

/// One frame from a socket.
#[derive(Debug)]
pub enum Frame {
    Text(Value),
    Binary(Bytes),
    Close,
}

/// A WebSocket client with a log of what it saw (printed on failure).
pub struct Ws {
    reader: FrameReader<Value>,
    pub seen: Vec<String>,
}

impl Ws {
    /// The next frame within `within`, or None on timeout. Pings answered on the way do not
    /// extend it.
    pub async fn next_within(&mut self, within: Duration) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + within;
        let item = tokio::time::timeout_at(deadline, self.reader.next())
            .await
            .ok()?;
        let frame = match item {
            Ok(Incoming::Text(v)) => Frame::Text(v),
            Ok(Incoming::Binary(b)) => Frame::Binary(b),
            Ok(Incoming::Closed(_) | Incoming::Ended) => Frame::Close,
            Err(e) => panic!("ws protocol error: {e}; seen: {:?}", self.seen),
        };
        let note = match &frame {
            Frame::Text(v) => v.to_string(),
            Frame::Binary(b) => format!("<{} bytes>", b.len()),
            Frame::Close => "<close>".into(),
        };
        self.seen.push(note);
        if self.seen.len() > 50 {
            self.seen.remove(0);
        }
        Some(frame)
    }

    /// When the next ping arrives, within `within`, skipping every other frame and answering
    /// nothing, as a client that stopped answering would. `None` on timeout or close.
    pub async fn next_ping_unanswered(&mut self, within: Duration) -> Option<Instant> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.reader.socket().next())
                .await
                .ok()?
            {
                Some(Ok(ws::Frame::Ping(_))) => return Some(Instant::now()),
                Some(Ok(ws::Frame::Close(_))) | None => return None,
                Some(Ok(_)) => continue,
                Some(Err(e)) => panic!("ws protocol error: {e}; seen: {:?}", self.seen),
            }
        }
    }

    /// Reads without answering pings until the daemon closes the socket: `true` once it has,
    /// `false` if it is still open after `within`.
    pub async fn closed_unanswered_within(&mut self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.reader.socket().next()).await {
                Err(_) => return false,
                Ok(Some(Ok(ws::Frame::Close(_))) | None | Some(Err(_))) => return true,
                Ok(Some(Ok(_))) => continue,
            }
        }
    }

    /// The next frame, within [`WITHIN`].
    pub async fn next(&mut self) -> Frame {
        match self.next_within(WITHIN).await {
            Some(f) => f,
            None => panic!("no frame within {WITHIN:?}; seen: {:?}", self.seen),
        }
    }

    /// The next text frame of `kind`, skipping binary and other text frames.
    pub async fn next_text(&mut self, kind: &str) -> Value {
        loop {
            match self.next().await {
                Frame::Text(v) if v["type"] == kind => return v,
                Frame::Close => panic!("closed while waiting for {kind}; seen: {:?}", self.seen),
                _ => {}
            }
        }
    }

    /// Reads exactly `n` bytes of binary frames (text frames in between are an error).
    pub async fn read_exact(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            match self.next().await {
                Frame::Binary(b) => out.extend_from_slice(&b),
                other => panic!("expected {n} bytes, got {other:?} after {}", out.len()),
            }
        }
        assert_eq!(out.len(), n, "read past the expected byte count");
        out
    }

    /// Reads whole binary frames until at least `n` bytes arrived; returns them all.
    pub async fn read_at_least(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            match self.next().await {
                Frame::Binary(b) => out.extend_from_slice(&b),
                Frame::Text(_) => {}
                Frame::Close => panic!("closed after {} of {n} bytes", out.len()),
            }
        }
        out
    }

    /// Reads binary frames until the accumulated bytes contain `needle`; returns them all.
    pub async fn read_until(&mut self, needle: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            // Only the new bytes (and a needle's length before them) can complete a match.
            let scan_from = out.len().saturating_sub(needle.len());
            match self.next().await {
                Frame::Binary(b) => out.extend_from_slice(&b),
                Frame::Text(_) => {}
                Frame::Close => panic!(
                    "closed before {:?}; got {:?}",
                    String::from_utf8_lossy(needle),
                    String::from_utf8_lossy(&out)
                ),
            }
            if out[scan_from..].windows(needle.len()).any(|w| w == needle) {
                return out;
            }
        }
    }

    /// Sends input bytes.
    pub async fn send_binary(&mut self, bytes: &[u8]) {
        self.reader
            .send(ws::Message::Binary(Bytes::copy_from_slice(bytes)))
            .await
            .expect("send binary");
    }

    /// Sends a JSON text frame.
    pub async fn send_json(&mut self, v: Value) {
        self.send_text(&v.to_string()).await;
    }

    /// Sends a text frame as written (JSON a `Value` cannot hold, such as a key given twice).
    pub async fn send_text(&mut self, text: &str) {
        self.reader
            .send(ws::Message::Text(text.to_string().into()))
            .await
            .expect("send text");
    }

    /// Closes the socket.
    pub async fn close(mut self) {
        let _ = self.reader.send(ws::Message::Close(None)).await;
    }
}

/// Opens a WebSocket at a full `ws://` URL with an optional bearer token and Origin, returning
/// the HTTP refusal on failure.
pub async fn ws_at(
    url: &str,
    bearer: Option<&str>,
    origin: Option<&str>,
) -> Result<Ws, (u16, String)> {
    ws_at_with(url, bearer, origin, &[]).await
}

/// [`ws_at`] with extra request headers (an `X-Atc-As`).
pub async fn ws_at_with(
    url: &str,
    bearer: Option<&str>,
    origin: Option<&str>,
    headers: &[(&str, &str)],
) -> Result<Ws, (u16, String)> {
    let client = awc::Client::builder()
        .timeout(Duration::from_secs(30))
        .max_http_version(awc::http::Version::HTTP_11)
        .finish();
    ws_through(&client, url, bearer, origin, headers).await
}

/// [`ws_at_with`] through a given client (one that trusts a test CA, for `wss://`).
pub async fn ws_through(
    client: &awc::Client,
    url: &str,
    bearer: Option<&str>,
    origin: Option<&str>,
    headers: &[(&str, &str)],
) -> Result<Ws, (u16, String)> {
    let mut req = client.ws(url).max_frame_size(16 * 1024 * 1024);
    if let Some(t) = bearer {
        req = req.bearer_auth(t);
    }
    if let Some(o) = origin {
        req = req.origin(o);
    }
    for (name, value) in headers {
        req = req.set_header(*name, *value);
    }
    match req.connect().await {
        Ok((_, framed)) => Ok(Ws {
            reader: FrameReader::new(framed),
            seen: Vec::new(),
        }),
        Err(awc::error::WsClientError::InvalidResponseStatus(s)) => {
            Err((s.as_u16(), String::new()))
        }
        Err(e) => Err((0, e.to_string())),
    }
}
