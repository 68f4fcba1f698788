//! A WebSocket client on a bare TCP connection, for what a well-behaved client library will
//! not do: close the connection in the middle of a frame, read exactly as far into a frame as
//! a test wants, send frames that break RFC 6455 (reserved bits, unmasked, oversized headers,
//! fragments that never end). The drops and frames suites read the daemon's sockets with it.
//!
//! It speaks enough of the protocol to be a real client when asked: the upgrade with the
//! bearer token, masked frames, pongs. Server frames are parsed as they come, and a frame over
//! [`MAX_FRAME`] is refused rather than buffered.
//!
//! In *exact* mode every read asks the socket for no more than the frame being read still
//! needs, so "what the client has read" is exactly the frames handed out plus the part of the
//! one in progress: a close then lands at a known byte inside a frame.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::{Buf as _, Bytes, BytesMut};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

/// Frames the daemon sends larger than this are refused (its largest are repaints and resume
/// tails, bounded by its ring).
pub const MAX_FRAME: u64 = 64 * 1024 * 1024;

/// How long a clean close waits for the daemon's answer before the socket is dropped.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// Opcodes (RFC 6455 §5.2).
pub mod op {
    pub const CONTINUATION: u8 = 0x0;
    pub const TEXT: u8 = 0x1;
    pub const BINARY: u8 = 0x2;
    pub const CLOSE: u8 = 0x8;
    pub const PING: u8 = 0x9;
    pub const PONG: u8 = 0xa;
}

/// Why the socket failed.
#[derive(Debug, thiserror::Error)]
pub enum WsError {
    /// The upgrade was answered with something other than 101.
    #[error("the upgrade was answered {status}: {body}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The start of the answer's body.
        body: String,
    },
    /// The connection ended (EOF or reset) before a whole frame arrived.
    #[error("the connection ended")]
    Ended,
    /// The daemon sent something that is not a WebSocket frame we accept.
    #[error("bad frame from the daemon: {0}")]
    Protocol(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A frame's header as it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub fin: bool,
    pub opcode: u8,
    /// Payload bytes.
    pub len: u64,
    /// Header bytes (with the mask key, if any).
    pub header_len: usize,
    masked: bool,
}

/// A whole frame from the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Text(Bytes),
    Binary(Bytes),
    Ping(Bytes),
    Pong(Bytes),
    /// A close frame and its code, if it carried one.
    Close(Option<u16>),
    /// A continuation or reserved opcode (the daemon sends neither).
    Other(u8),
}

/// How to open a socket.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Read exactly what each frame needs (see the module doc).
    pub exact: bool,
    /// Shrink the receive buffer (`SO_RCVBUF`) so a client that stops reading makes the
    /// daemon's queue fill sooner.
    pub recv_buffer: Option<u32>,
}

/// An open WebSocket.
pub struct RawWs {
    stream: TcpStream,
    buf: BytesMut,
    exact: bool,
}

/// `host:port` of an `http://host:port` URL.
pub fn authority(url: &str) -> &str {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("ws://"))
        .unwrap_or(url);
    rest.split('/').next().unwrap_or(rest)
}

/// A mask key that differs between frames (nothing here needs it unpredictable).
fn mask_key() -> [u8; 4] {
    static NEXT: AtomicU32 = AtomicU32::new(0x5a17_c3e1);
    NEXT.fetch_add(0x9e37_79b9, Ordering::Relaxed).to_be_bytes()
}

/// A frame as a client sends it: `rsv` goes in bits 4–6 of the first byte as given (0 for a
/// valid frame), and `mask` is `None` for an (invalid) unmasked frame.
pub fn frame(fin: bool, rsv: u8, opcode: u8, mask: Option<[u8; 4]>, payload: &[u8]) -> Vec<u8> {
    let mut out = header(fin, rsv, opcode, payload.len() as u64, mask);
    match mask {
        Some(key) => out.extend(payload.iter().zip(key.iter().cycle()).map(|(b, k)| b ^ k)),
        None => out.extend_from_slice(payload),
    }
    out
}

/// Only the header of a frame declaring `len` payload bytes (which need not follow).
pub fn header(fin: bool, rsv: u8, opcode: u8, len: u64, mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = vec![(u8::from(fin) << 7) | (rsv & 0x70) | (opcode & 0x0f)];
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    match len {
        0..=125 => out.push(mask_bit | len as u8),
        126..=0xffff => {
            out.push(mask_bit | 126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            out.push(mask_bit | 127);
            out.extend_from_slice(&len.to_be_bytes());
        }
    }
    if let Some(key) = mask {
        out.extend_from_slice(&key);
    }
    out
}

/// A valid, masked, final frame.
pub fn client_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    frame(true, 0, opcode, Some(mask_key()), payload)
}

/// A masked frame with a fresh key and the given FIN bit.
pub fn masked(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    frame(fin, 0, opcode, Some(mask_key()), payload)
}

/// Parses the header at the front of `buf`; `None` until it is all there.
fn parse_header(buf: &[u8]) -> Option<Header> {
    let (&first, &second) = (buf.first()?, buf.get(1)?);
    let masked = second & 0x80 != 0;
    let (len, at) = match second & 0x7f {
        126 => (
            u64::from(u16::from_be_bytes([*buf.get(2)?, *buf.get(3)?])),
            4,
        ),
        127 => (u64::from_be_bytes(buf.get(2..10)?.try_into().ok()?), 10),
        short => (u64::from(short), 2),
    };
    let header_len = at + if masked { 4 } else { 0 };
    if buf.len() < header_len {
        return None;
    }
    Some(Header {
        fin: first & 0x80 != 0,
        opcode: first & 0x0f,
        len,
        header_len,
        masked,
    })
}

impl RawWs {
    /// Opens `path_and_query` on the daemon at `url` with its bearer token.
    pub async fn connect(
        url: &str,
        path_and_query: &str,
        token: &str,
        options: Options,
    ) -> Result<RawWs, WsError> {
        let host = authority(url);
        let addr = tokio::net::lookup_host(host)
            .await?
            .next()
            .ok_or_else(|| WsError::Protocol(format!("no address for {host}")))?;
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        if let Some(size) = options.recv_buffer {
            socket.set_recv_buffer_size(size)?;
        }
        let mut stream = socket.connect(addr).await?;
        stream.set_nodelay(true)?;
        let request = format!(
            "GET {path_and_query} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await?;
        let mut ws = RawWs {
            stream,
            buf: BytesMut::with_capacity(64 * 1024),
            exact: options.exact,
        };
        ws.read_upgrade().await?;
        Ok(ws)
    }

    /// Reads the upgrade's answer. In exact mode it reads a byte at a time so that nothing of
    /// the first frames is read with it.
    async fn read_upgrade(&mut self) -> Result<(), WsError> {
        let end = loop {
            if let Some(at) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            if self.buf.len() > 16 * 1024 {
                return Err(WsError::Protocol("an endless upgrade answer".into()));
            }
            let step = if self.exact { 1 } else { 4096 };
            if self.read_some(step).await? == 0 {
                return Err(WsError::Ended);
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).to_string();
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        self.buf.advance(end);
        if status != 101 {
            // Whatever of the body came with the head says why.
            if self.buf.len() < 512 {
                // A short wait for the rest of a short body; the answer is what it is.
                let _ = tokio::time::timeout(Duration::from_millis(200), self.read_some(512)).await;
            }
            let body = String::from_utf8_lossy(&self.buf[..self.buf.len().min(512)]).to_string();
            return Err(WsError::Refused { status, body });
        }
        Ok(())
    }

    /// Reads at most `max` bytes into the buffer; 0 at EOF.
    async fn read_some(&mut self, max: usize) -> Result<usize, WsError> {
        self.buf.reserve(max);
        let n = (&mut self.stream)
            .take(max as u64)
            .read_buf(&mut self.buf)
            .await?;
        Ok(n)
    }

    /// Fills the buffer to `n` bytes. Cancel-safe: what was read stays in the buffer.
    async fn fill(&mut self, n: usize) -> Result<(), WsError> {
        while self.buf.len() < n {
            let step = if self.exact {
                n - self.buf.len()
            } else {
                (n - self.buf.len()).max(64 * 1024)
            };
            match self.read_some(step).await {
                Ok(0) => return Err(WsError::Ended),
                Ok(_) => {}
                Err(WsError::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return Err(WsError::Ended)
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The next frame's header, read but not consumed.
    pub async fn next_header(&mut self) -> Result<Header, WsError> {
        let mut need = 2;
        loop {
            self.fill(need).await?;
            if let Some(h) = parse_header(&self.buf) {
                if h.len > MAX_FRAME {
                    return Err(WsError::Protocol(format!("a {}-byte frame", h.len)));
                }
                return Ok(h);
            }
            need = match self.buf.get(1).map(|b| b & 0x7f) {
                Some(126) => 4,
                Some(127) => 10,
                _ => 2,
            } + if self.buf.get(1).is_some_and(|b| b & 0x80 != 0) {
                4
            } else {
                0
            };
        }
    }

    /// Reads `part` payload bytes of the frame whose header is next, and no more (in exact
    /// mode): the caller then drops the connection inside the frame.
    pub async fn read_into(&mut self, h: Header, part: u64) -> Result<(), WsError> {
        let want = h.header_len + part.min(h.len) as usize;
        self.fill(want).await
    }

    /// The next whole frame. Cancel-safe.
    pub async fn next_frame(&mut self) -> Result<Frame, WsError> {
        let h = self.next_header().await?;
        let total = h.header_len + h.len as usize;
        self.fill(total).await?;
        let mut whole = self.buf.split_to(total);
        let key = if h.masked {
            whole
                .get(h.header_len - 4..h.header_len)
                .and_then(|k| <[u8; 4]>::try_from(k).ok())
        } else {
            None
        };
        whole.advance(h.header_len);
        if let Some(key) = key {
            for (b, k) in whole.iter_mut().zip(key.iter().cycle()) {
                *b ^= k;
            }
        }
        let payload = whole.freeze();
        Ok(match h.opcode {
            op::TEXT => Frame::Text(payload),
            op::BINARY => Frame::Binary(payload),
            op::PING => Frame::Ping(payload),
            op::PONG => Frame::Pong(payload),
            op::CLOSE => Frame::Close(payload.get(..2).map(|c| u16::from_be_bytes([c[0], c[1]]))),
            other => Frame::Other(other),
        })
    }

    /// Sends bytes as they are (frames built with [`frame`] and [`header`], or half of one).
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), WsError> {
        self.stream.write_all(bytes).await?;
        Ok(())
    }

    /// Sends a valid frame.
    pub async fn send(&mut self, opcode: u8, payload: &[u8]) -> Result<(), WsError> {
        self.send_raw(&client_frame(opcode, payload)).await
    }

    /// Answers a ping.
    pub async fn pong(&mut self, payload: &[u8]) -> Result<(), WsError> {
        self.send(op::PONG, payload).await
    }

    /// The polite way out: a close frame with 1000, then the daemon's close (or EOF), waited
    /// for at most [`CLOSE_WAIT`].
    pub async fn close_clean(mut self) {
        if self.send(op::CLOSE, &1000u16.to_be_bytes()).await.is_err() {
            return;
        }
        // Whatever the daemon still had queued comes first; the wait is bounded, and a socket
        // that does not answer ends when it is dropped here, which the daemon sees as the same
        // detach.
        let _ = tokio::time::timeout(CLOSE_WAIT, async {
            while let Ok(f) = self.next_frame().await {
                if matches!(f, Frame::Close(_)) {
                    break;
                }
            }
        })
        .await;
    }

    /// The rude way out: the TCP connection ends now, with a reset when `reset` (SO_LINGER
    /// 0), else with a FIN, and no close frame either way.
    pub fn abort(self, reset: bool) {
        if reset {
            // Without the linger option the drop still ends the connection, with a FIN: the
            // drop is abrupt either way.
            let _ = self.stream.set_zero_linger();
        }
        drop(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        for len in [0u64, 5, 125, 126, 0xffff, 0x10000, 1 << 33] {
            let h = header(true, 0, op::BINARY, len, Some([1, 2, 3, 4]));
            let parsed = parse_header(&h).expect("a whole header");
            assert_eq!(parsed.len, len);
            assert_eq!(parsed.header_len, h.len());
            assert!(parsed.fin && parsed.masked);
            assert_eq!(parse_header(&h[..h.len() - 1]), None);
        }
        let f = frame(false, 0x40, op::TEXT, None, b"hi");
        assert_eq!(f, [0x41, 2, b'h', b'i']);
    }

    #[test]
    fn masking_is_undone_by_the_same_key() {
        let f = frame(true, 0, op::TEXT, Some([9, 8, 7, 6]), b"hello");
        let unmasked: Vec<u8> = f[6..]
            .iter()
            .zip([9u8, 8, 7, 6].iter().cycle())
            .map(|(b, k)| b ^ k)
            .collect();
        assert_eq!(unmasked, b"hello");
    }

    #[test]
    fn authority_of_a_url() {
        assert_eq!(authority("http://127.0.0.1:5/"), "127.0.0.1:5");
        assert_eq!(authority("http://127.0.0.1:5"), "127.0.0.1:5");
    }
}
