//! Raw HTTP/1.1 over a loopback TCP connection: what the security checks need that a client
//! library hides (a request with no token at all, a WebSocket upgrade with a chosen Origin, a
//! head or body trickled byte by byte), and every byte of the answer, for the credential grep.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An answer read off a connection.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The status code of the first answer.
    pub status: u16,
    /// The head as text (status line and headers).
    pub head: String,
    /// The body (as far as its `Content-Length` says; empty for a 101).
    pub body: Vec<u8>,
}

/// Why no answer came.
#[derive(Debug, thiserror::Error)]
pub enum RawError {
    #[error("connect: {0}")]
    Connect(std::io::Error),
    #[error("write: {0}")]
    Write(std::io::Error),
    #[error("no complete answer within {0:?}")]
    Timeout(Duration),
    #[error("the connection closed with no answer ({0} bytes read)")]
    Closed(usize),
    #[error("the answer has no status line: {0:?}")]
    NoStatus(String),
}

/// Sends `request` on a fresh connection to `addr` (`127.0.0.1:PORT`) and reads the first
/// answer, bounded by `within`.
pub async fn exchange(addr: &str, request: &[u8], within: Duration) -> Result<Answer, RawError> {
    let mut conn = TcpStream::connect(addr).await.map_err(RawError::Connect)?;
    conn.write_all(request).await.map_err(RawError::Write)?;
    read_answer(&mut conn, within).await
}

/// Reads one answer: its head, then as much body as `Content-Length` announces (a 101 has
/// none), or what came before the peer closed.
pub async fn read_answer(conn: &mut TcpStream, within: Duration) -> Result<Answer, RawError> {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        if let Some(answer) = complete(&got)? {
            return Ok(answer);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, conn.read(&mut buf)).await {
            Err(_) => return Err(RawError::Timeout(within)),
            Ok(Ok(0)) | Ok(Err(_)) => {
                return match split_head(&got) {
                    Some((head, body)) => answer_of(head, body),
                    None => Err(RawError::Closed(got.len())),
                }
            }
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

fn split_head(got: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = got.windows(4).position(|w| w == b"\r\n\r\n")?;
    Some((&got[..at], &got[at + 4..]))
}

fn answer_of(head: &[u8], body: &[u8]) -> Result<Answer, RawError> {
    let head = String::from_utf8_lossy(head).to_string();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| RawError::NoStatus(head.clone()))?;
    Ok(Answer {
        status,
        head,
        body: body.to_vec(),
    })
}

/// The answer in `got`, once its head and announced body are all there.
fn complete(got: &[u8]) -> Result<Option<Answer>, RawError> {
    let Some((head, body)) = split_head(got) else {
        return Ok(None);
    };
    let answer = answer_of(head, &[])?;
    if answer.status == 101 {
        return Ok(Some(answer));
    }
    let len = header(&answer.head, "content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    if body.len() < len {
        return Ok(None);
    }
    Ok(Some(Answer {
        body: body[..len].to_vec(),
        ..answer
    }))
}

/// A header's value in `head`, by case-insensitive name.
pub fn header(head: &str, name: &str) -> Option<String> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

/// A request head: `method path`, `Host`, then `headers` in order, and a `Content-Length`
/// when `body` is given (which follows).
pub fn request(
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Vec<u8> {
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        out.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    out.push_str("Connection: close\r\n\r\n");
    let mut bytes = out.into_bytes();
    if let Some(b) = body {
        bytes.extend_from_slice(b);
    }
    bytes
}

/// A WebSocket upgrade of `path` with `headers` added (Origin, Authorization).
pub fn upgrade(path: &str, host: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    let mut out = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    );
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// What became of a connection fed slowly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trickle {
    /// The daemon answered or closed after this long.
    CutOff(Duration),
    /// Still open when the deadline came.
    StillOpen,
    /// It could not even connect.
    NoConnection,
}

/// Sends `prefix` at once, then `drip` one byte every `every`, until the daemon answers or
/// closes the connection, or `deadline` passes. The time is measured from the first byte.
pub async fn trickle(
    addr: &str,
    prefix: &[u8],
    drip: &[u8],
    every: Duration,
    deadline: Duration,
) -> Trickle {
    let Ok(mut conn) = TcpStream::connect(addr).await else {
        return Trickle::NoConnection;
    };
    let started = Instant::now();
    if conn.write_all(prefix).await.is_err() {
        return Trickle::CutOff(started.elapsed());
    }
    let mut next = 0usize;
    let mut buf = [0u8; 1024];
    let mut tick = tokio::time::interval(every);
    // The first tick is immediate; the first byte of the drip waits one period.
    tick.tick().await;
    while started.elapsed() < deadline {
        tokio::select! {
            read = conn.read(&mut buf) => {
                // Anything read (an answer) or an end of the connection is a cut-off.
                let _ = read;
                return Trickle::CutOff(started.elapsed());
            }
            _ = tick.tick() => {
                let byte = drip.get(next % drip.len().max(1)).copied().unwrap_or(b'a');
                next += 1;
                if conn.write_all(&[byte]).await.is_err() {
                    return Trickle::CutOff(started.elapsed());
                }
            }
        }
    }
    Trickle::StillOpen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_complete_with_its_announced_body() {
        let head = b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 4\r\n\r\n";
        let mut got = head.to_vec();
        got.extend_from_slice(b"ab");
        assert!(complete(&got).unwrap().is_none());
        got.extend_from_slice(b"cd");
        let a = complete(&got).unwrap().unwrap();
        assert_eq!((a.status, a.body.as_slice()), (401, &b"abcd"[..]));
        assert_eq!(header(&a.head, "Content-Length").as_deref(), Some("4"));
        let up = complete(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n\x81")
            .unwrap()
            .unwrap();
        assert_eq!(up.status, 101);
    }
}
