//! Malformed request heads, answered by us: every refusal gets the documented error body and an
//! `X-Request-Id`, and is logged at warn.
//!
//! actix-http's h1 dispatcher answers a head it cannot parse (a control byte in a header, a bad
//! or repeated `Content-Length`, a head over its 128 KiB buffer) itself, before any app code
//! runs: an empty 400 or 431, then `error!("stream error")`. It offers no hook for that answer,
//! so [`HeadGuard`] sits between the TCP stream and the dispatcher. It holds back the bytes of
//! each request head until the head is complete, judges the head with actix-http's own decoder
//! (so its verdict and the dispatcher's cannot disagree), and only then lets the dispatcher read
//! it. A bad head never reaches the dispatcher: the guard reports end of input to it instead,
//! lets it finish what came before, and writes its own refusal when the dispatcher shuts the
//! connection down.
//!
//! Only heads are held and copied, each at most [`MAX_HEAD_BYTES`]. To know where the next head
//! begins, the guard follows each body's framing (a `Content-Length` count, or chunk sizes)
//! without copying it; after a head that turns the connection into a stream (a WebSocket
//! upgrade, `CONNECT`) or a chunk framing it cannot follow, it steps aside for the rest of the
//! connection, as the dispatcher then stops parsing heads too.
//!
//! Every head has a deadline, on every connection: the first from the accept, each later one
//! from its first byte (the time between requests is actix-http's keep-alive). A head still
//! incomplete then is refused with 408, as a bad head is. actix-http's own timer covers only
//! the first head, and its keep-alive timer restarts whenever the connection wakes, so without
//! this a client trickling a second head a byte at a time held its connection for ever. A
//! request body the guard is still following twice `timings.body_read` after its head (a
//! route that reads it has answered 408 after `body_read`; a chunked body nobody reads is drained
//! by the dispatcher for as long as it comes) ends the connection without an answer.
//!
//! The guard also obeys the connection's [`ConnSocket`]: asked to stop reading, it reports end
//! of input; asked to close, it fails writes too.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use actix_codec::Decoder;
use actix_http::error::ParseError;
use actix_http::h1::{Codec, Message, MessageType};
use actix_http::header;
use actix_http::HttpMessage;
use actix_http::{ServiceConfig, StatusCode};
use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use super::conn_registry::Registration;
use super::conn_socket::{ConnSocket, Ending};
use crate::protocol::request_error::{HeadProblem, RequestError};
use crate::server::error::Error;

/// Largest request head accepted. Below the dispatcher's own 128 KiB buffer, so a head too
/// large is always ours to refuse; far above any head a real client sends.
pub const MAX_HEAD_BYTES: usize = 32 * 1024;

/// Bytes of input already received that are read and discarded after a refusal, so closing the
/// socket does not reset the connection before the client has read the answer.
const DRAIN_AFTER_REFUSAL: usize = 256 * 1024;

/// Where the next byte of input belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// The start (or more) of a request head.
    Head,
    /// This many bytes of a `Content-Length` body.
    Body(u64),
    /// A chunked body.
    Chunked(Chunk),
    /// The connection is a stream from here on; nothing more to judge.
    Stream,
}

/// Position inside a chunked body (RFC 9112 §7.1), followed only to find where it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// The hex size of the next chunk, so far.
    Size(u64),
    /// After the size: an extension or the line's end.
    SizeLineRest(u64),
    /// This many data bytes of the current chunk.
    Data(u64),
    /// The line end after a chunk's data.
    DataEnd,
    /// At the start of a trailer line (or the final empty line).
    TrailerStart,
    /// Inside a trailer line.
    Trailer,
}

/// What reading one stretch of input decided.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Every byte may go to the dispatcher.
    Pass,
    /// The first `n` bytes may go; the rest starts a head not yet complete.
    HoldFrom(usize),
    /// The first `n` bytes may go; the head after them is refused.
    RefuseFrom(usize, Refusal),
}

/// A refused head: what was wrong with it (its wire form is `crate::server::error`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Refusal(HeadProblem);

impl Refusal {
    fn from_parse_error(e: &ParseError) -> Refusal {
        Refusal(match e {
            ParseError::TooLarge => HeadProblem::TooLarge {
                max_bytes: MAX_HEAD_BYTES,
            },
            ParseError::Method => HeadProblem::Method,
            ParseError::Uri(_) => HeadProblem::Uri,
            ParseError::Version => HeadProblem::Version,
            // Header, Utf8 and the rest (ParseError is non-exhaustive): a byte outside the
            // allowed set in a name or value, a bad or repeated Content-Length, a
            // Transfer-Encoding other than chunked, both of those, or a missing or repeated Host.
            _ => HeadProblem::Headers,
        })
    }

    fn too_large() -> Refusal {
        Refusal::from_parse_error(&ParseError::TooLarge)
    }

    fn error(self) -> Error {
        RequestError::Head(self.0).into()
    }

    /// The whole HTTP response, closing the connection.
    fn response(self, request_id: &str) -> Vec<u8> {
        let error = self.error();
        // Strings and a JSON map: serializing cannot fail.
        let body = serde_json::to_string(&error.body()).unwrap_or_default();
        let status = StatusCode::from_u16(error.wire().status).unwrap_or(StatusCode::BAD_REQUEST);
        let reason = status.canonical_reason().unwrap_or("Bad Request");
        format!(
            "HTTP/1.1 {} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nx-content-type-options: nosniff\r\nx-request-id: {request_id}\r\nconnection: close\r\n\r\n{body}",
            status.as_u16(),
            body.len()
        )
        .into_bytes()
    }
}

/// Follows the framing of one stretch of input, judging each complete head.
struct Judge {
    framing: Framing,
    config: ServiceConfig,
}

impl Judge {
    fn new(config: ServiceConfig) -> Judge {
        Judge {
            framing: Framing::Head,
            config,
        }
    }

    /// Reads `bytes`, which start where the framing says. A head must be complete within
    /// `bytes` to be judged; an incomplete one is held by the caller and offered again, whole,
    /// with what follows it.
    fn read(&mut self, bytes: &[u8]) -> Verdict {
        let mut pos = 0;
        while pos < bytes.len() {
            match self.framing {
                Framing::Stream => return Verdict::Pass,
                Framing::Body(left) => {
                    let take = left.min((bytes.len() - pos) as u64);
                    pos += take as usize;
                    self.framing = match left - take {
                        0 => Framing::Head,
                        n => Framing::Body(n),
                    };
                }
                Framing::Chunked(state) => {
                    let (used, next) = chunk_step(state, &bytes[pos..]);
                    pos += used;
                    self.framing = next;
                }
                Framing::Head => {
                    let rest = &bytes[pos..];
                    match self.judge_head(rest) {
                        HeadRead::Incomplete if rest.len() > MAX_HEAD_BYTES => {
                            return Verdict::RefuseFrom(pos, Refusal::too_large())
                        }
                        HeadRead::Incomplete => return Verdict::HoldFrom(pos),
                        HeadRead::Bad(r) => return Verdict::RefuseFrom(pos, r),
                        HeadRead::Good { len, framing } => {
                            pos += len;
                            self.framing = framing;
                        }
                    }
                }
            }
        }
        Verdict::Pass
    }

    /// Judges the head at the start of `bytes` with actix-http's decoder, copying only the head.
    fn judge_head(&self, bytes: &[u8]) -> HeadRead {
        let Some(end) = head_end(bytes) else {
            // The decoder fails a head on its first bad byte, before the head is complete; so
            // does the guard, rather than wait for the rest of a head already known bad.
            let mut partial = BytesMut::from(&bytes[..bytes.len().min(MAX_HEAD_BYTES + 1)]);
            return match Codec::new(self.config.clone()).decode(&mut partial) {
                Err(e) => HeadRead::Bad(Refusal::from_parse_error(&e)),
                Ok(_) => HeadRead::Incomplete,
            };
        };
        if end > MAX_HEAD_BYTES {
            return HeadRead::Bad(Refusal::too_large());
        }
        let mut head = BytesMut::from(&bytes[..end]);
        let mut codec = Codec::new(self.config.clone());
        match codec.decode(&mut head) {
            // Blank lines before a request line are skipped by the decoder; the head is later.
            Ok(None) => match self.judge_head(&bytes[end..]) {
                HeadRead::Good { len, framing } => HeadRead::Good {
                    len: end + len,
                    framing,
                },
                other => other,
            },
            Ok(Some(Message::Item(req))) => {
                let len = end - head.len();
                let framing = match codec.message_type() {
                    MessageType::None => Framing::Head,
                    MessageType::Stream => Framing::Stream,
                    MessageType::Payload if req.chunked().unwrap_or(false) => {
                        Framing::Chunked(Chunk::Size(0))
                    }
                    MessageType::Payload => req
                        .headers()
                        .get(header::CONTENT_LENGTH)
                        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
                        .map_or(Framing::Stream, Framing::Body),
                };
                HeadRead::Good { len, framing }
            }
            // A fresh codec yields a head first; were it ever a chunk, stepping aside is safe.
            Ok(Some(Message::Chunk(_))) => HeadRead::Good {
                len: end,
                framing: Framing::Stream,
            },
            Err(e) => HeadRead::Bad(Refusal::from_parse_error(&e)),
        }
    }
}

enum HeadRead {
    Incomplete,
    Bad(Refusal),
    Good { len: usize, framing: Framing },
}

/// Where the head at the start of `bytes` ends: just past its empty line (CRLF or bare LF, as
/// the decoder accepts both).
fn head_end(bytes: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(off) = bytes[i..].iter().position(|&b| b == b'\n') {
        let lf = i + off;
        match bytes.get(lf + 1) {
            Some(b'\n') => return Some(lf + 2),
            Some(b'\r') if bytes.get(lf + 2) == Some(&b'\n') => return Some(lf + 3),
            _ => i = lf + 1,
        }
    }
    None
}

/// Follows a chunked body through `bytes`; answers the bytes used and where that leaves us.
/// A framing it cannot follow makes the connection a stream: the dispatcher fails the body
/// then and parses no further head either.
fn chunk_step(mut state: Chunk, bytes: &[u8]) -> (usize, Framing) {
    let mut pos = 0;
    while pos < bytes.len() {
        if let Chunk::Data(left) = state {
            let take = left.min((bytes.len() - pos) as u64);
            pos += take as usize;
            state = match left - take {
                0 => Chunk::DataEnd,
                n => Chunk::Data(n),
            };
            continue;
        }
        let b = bytes[pos];
        pos += 1;
        state = match state {
            Chunk::Size(n) => match (b as char).to_digit(16) {
                Some(d) => match n.checked_mul(16).and_then(|n| n.checked_add(u64::from(d))) {
                    Some(n) => Chunk::Size(n),
                    None => return (pos, Framing::Stream),
                },
                None if b == b'\n' => after_size_line(n),
                None => Chunk::SizeLineRest(n),
            },
            Chunk::SizeLineRest(n) if b == b'\n' => after_size_line(n),
            Chunk::SizeLineRest(n) => Chunk::SizeLineRest(n),
            Chunk::Data(n) => Chunk::Data(n),
            Chunk::DataEnd => match b {
                b'\r' => Chunk::DataEnd,
                b'\n' => Chunk::Size(0),
                _ => return (pos, Framing::Stream),
            },
            Chunk::TrailerStart => match b {
                b'\r' => Chunk::TrailerStart,
                b'\n' => return (pos, Framing::Head),
                _ => Chunk::Trailer,
            },
            Chunk::Trailer if b == b'\n' => Chunk::TrailerStart,
            Chunk::Trailer => Chunk::Trailer,
        };
    }
    (pos, Framing::Chunked(state))
}

fn after_size_line(size: u64) -> Chunk {
    match size {
        0 => Chunk::TrailerStart,
        n => Chunk::Data(n),
    }
}

/// Whether the refusal's answer is still to be written.
#[derive(Debug)]
enum Answer {
    /// No head was refused.
    None,
    /// Written once the dispatcher shuts the connection down; `written` bytes are out.
    Owed { bytes: Vec<u8>, written: usize },
    /// Out, and what had arrived after the bad head was drained.
    Sent,
}

/// How long a connection may take over the parts of a request the guard follows (from
/// `config::Timings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// A request head must be complete this long after the accept (the first head) or after its
    /// first byte (each later one); else 408.
    pub head: Duration,
    /// A request body still arriving this long after its head ends the connection.
    pub body: Duration,
}

/// The deadline running on a connection now.
enum Clock {
    /// Nothing is due: between requests (actix-http's keep-alive counts), or a stream.
    Idle,
    /// The head being read is due then.
    Head(Pin<Box<Sleep>>),
    /// The body being read is due then.
    Body(Pin<Box<Sleep>>),
}

/// What is due, to compare clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    Nothing,
    Head,
    Body,
}

impl Clock {
    fn due(&self) -> Due {
        match self {
            Clock::Idle => Due::Nothing,
            Clock::Head(_) => Due::Head,
            Clock::Body(_) => Due::Body,
        }
    }

    /// Whether the running deadline has passed; registers the task to be woken when it does.
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Option<Due> {
        let (due, timer) = match self {
            Clock::Idle => return None,
            Clock::Head(t) => (Due::Head, t),
            Clock::Body(t) => (Due::Body, t),
        };
        timer.as_mut().poll(cx).is_ready().then_some(due)
    }
}

/// A connection's byte stream as the dispatcher reads it: complete, judged heads only.
pub struct HeadGuard<T> {
    io: T,
    judge: Judge,
    /// The start of a head not yet complete; empty whenever the framing is not `Head`.
    held: BytesMut,
    /// Judged bytes (a head that was held, and what followed it) the dispatcher has yet to read.
    release: BytesMut,
    /// Set once a head is refused: the dispatcher reads end of input from then on.
    answer: Answer,
    /// The connection's end of input was read.
    eof: bool,
    deadlines: Deadlines,
    /// Runs while a head or body is due: from the accept, a head's first byte or a head's end.
    clock: Clock,
    /// How the connection is ended from outside (a WebSocket's clean close, the registry).
    socket: ConnSocket,
    /// The connection's place among the tokenless ones; it leaves with the stream.
    registration: Registration,
    /// The connection has been read from (so has had its chance to show the token).
    read_once: bool,
}

impl<T> HeadGuard<T> {
    /// Guards `io`, accepted just now; `config` is the dispatcher's, so both decode heads
    /// alike. The first head's deadline starts now.
    pub fn new(
        io: T,
        config: ServiceConfig,
        deadlines: Deadlines,
        socket: ConnSocket,
        registration: Registration,
    ) -> HeadGuard<T> {
        HeadGuard {
            io,
            judge: Judge::new(config),
            held: BytesMut::new(),
            release: BytesMut::new(),
            answer: Answer::None,
            eof: false,
            clock: Clock::Head(Box::pin(tokio::time::sleep(deadlines.head))),
            deadlines,
            socket,
            registration,
            read_once: false,
        }
    }

    /// The handle that ends this connection, for its data.
    pub fn socket(&self) -> &ConnSocket {
        &self.socket
    }

    /// The handle that marks this connection as the owner's, for its data.
    pub fn mark(&self) -> super::conn_registry::ConnMark {
        self.registration.mark()
    }

    fn refuse(&mut self, refusal: Refusal) {
        let id = super::next_request_id();
        let error = refusal.error();
        tracing::warn!(id = %id, status = error.wire().status, problem = %error,
            "malformed request refused");
        self.held.clear();
        self.clock = Clock::Idle;
        self.answer = Answer::Owed {
            bytes: refusal.response(&id),
            written: 0,
        };
    }

    /// Starts or stops the clock for what the judge now waits for: a head started and not
    /// complete, or a body not yet at its end.
    fn retime(&mut self) {
        let due = match self.judge.framing {
            Framing::Head if !self.held.is_empty() => Due::Head,
            Framing::Head | Framing::Stream => Due::Nothing,
            Framing::Body(_) | Framing::Chunked(_) => Due::Body,
        };
        if due == self.clock.due() {
            return;
        }
        self.clock = match due {
            Due::Nothing => Clock::Idle,
            Due::Head => Clock::Head(Box::pin(tokio::time::sleep(self.deadlines.head))),
            Due::Body => Clock::Body(Box::pin(tokio::time::sleep(self.deadlines.body))),
        };
    }

    /// Acts on a deadline that passed: a late head is refused with 408; a late body ends the
    /// connection (a route reading it answered 408 long before).
    fn expire(&mut self, due: Due) {
        match due {
            Due::Head => self.refuse(Refusal(HeadProblem::TooSlow {
                within_ms: u64::try_from(self.deadlines.head.as_millis()).unwrap_or(u64::MAX),
            })),
            Due::Body => {
                tracing::warn!(
                    within_ms = self.deadlines.body.as_millis() as u64,
                    "request body still arriving past its deadline; connection closed"
                );
                self.clock = Clock::Idle;
                self.socket.close();
            }
            Due::Nothing => {}
        }
    }

    /// Whether the connection was ended from outside as far as `at_least`; registers the task
    /// to be woken when it is.
    fn ended(&self, cx: &Context<'_>, at_least: Ending) -> bool {
        self.socket.watch(cx.waker()) >= at_least
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> HeadGuard<T> {
    /// Reads more of a held head; `Ready(false)` at end of input.
    fn poll_more_head(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        if self.held.capacity() - self.held.len() < 4096 {
            self.held.reserve(8192);
        }
        let n = ready!(tokio_util::io::poll_read_buf(
            Pin::new(&mut self.io),
            cx,
            &mut self.held
        ))?;
        Poll::Ready(Ok(n > 0))
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for HeadGuard<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.read_once {
            this.read_once = true;
            this.registration.first_read();
        }
        loop {
            if this.ended(cx, Ending::ReadStopped) {
                return Poll::Ready(Ok(()));
            }
            if !this.release.is_empty() {
                let n = this.release.len().min(buf.remaining());
                buf.put_slice(&this.release.split_to(n));
                return Poll::Ready(Ok(()));
            }
            if this.eof || !matches!(this.answer, Answer::None) {
                return Poll::Ready(Ok(()));
            }
            if let Some(due) = this.clock.poll_expired(cx) {
                this.expire(due);
                continue;
            }
            if !this.held.is_empty() {
                if !ready!(this.poll_more_head(cx))? {
                    // The dispatcher would not answer an incomplete head either.
                    this.eof = true;
                    this.held.clear();
                    continue;
                }
                match this.judge.read(&this.held) {
                    Verdict::Pass => this.release = this.held.split(),
                    Verdict::HoldFrom(n) => this.release = this.held.split_to(n),
                    Verdict::RefuseFrom(n, refusal) => {
                        this.release = this.held.split_to(n);
                        this.refuse(refusal);
                        continue;
                    }
                }
                this.retime();
                continue;
            }
            // The common case, a head that arrives whole: judged where it lies in the
            // dispatcher's buffer, and a body passes without a copy.
            let before = buf.filled().len();
            ready!(Pin::new(&mut this.io).poll_read(cx, buf))?;
            if buf.filled().len() == before {
                this.eof = true;
                return Poll::Ready(Ok(()));
            }
            match this.judge.read(&buf.filled()[before..]) {
                Verdict::Pass => {
                    this.retime();
                    return Poll::Ready(Ok(()));
                }
                Verdict::HoldFrom(n) => {
                    this.held.extend_from_slice(&buf.filled()[before + n..]);
                    buf.set_filled(before + n);
                    this.retime();
                    if n > 0 {
                        return Poll::Ready(Ok(()));
                    }
                }
                Verdict::RefuseFrom(n, refusal) => {
                    buf.set_filled(before + n);
                    this.refuse(refusal);
                    return Poll::Ready(Ok(()));
                }
            }
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for HeadGuard<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.ended(cx, Ending::Closed) {
            return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
        }
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.ended(cx, Ending::Closed) {
            return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
        }
        Pin::new(&mut this.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.ended(cx, Ending::Closed) {
            return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
        }
        Pin::new(&mut this.io).poll_flush(cx)
    }

    /// The dispatcher shuts down after the end of input we reported for a refused head, once it
    /// has answered everything before it: the refusal's answer goes out last, as it should.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.ended(cx, Ending::Closed) {
            // Closed from outside: nothing more goes out; dropping the stream closes it.
            return Poll::Ready(Ok(()));
        }
        if let Answer::Owed { bytes, written } = &mut this.answer {
            while *written < bytes.len() {
                let n = ready!(Pin::new(&mut this.io).poll_write(cx, &bytes[*written..]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                *written += n;
            }
            ready!(Pin::new(&mut this.io).poll_flush(cx))?;
            // Unread input makes the close a reset, which can destroy the answer before the
            // client reads it; what has arrived already is read and dropped.
            let mut scratch = [0u8; 8192];
            let mut drained = 0;
            while drained < DRAIN_AFTER_REFUSAL {
                let mut rb = ReadBuf::new(&mut scratch);
                match Pin::new(&mut this.io).poll_read(cx, &mut rb) {
                    Poll::Ready(Ok(())) if !rb.filled().is_empty() => drained += rb.filled().len(),
                    // End of input, an error or nothing more yet: the close is as clean as it
                    // can be made without waiting on the client.
                    _ => break,
                }
            }
            this.answer = Answer::Sent;
        }
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A judge; its config starts a date timer, so the tests run on an actix runtime.
    fn judge() -> Judge {
        Judge::new(ServiceConfig::default())
    }

    #[actix_rt::test]
    async fn bodies_are_skipped_by_their_length_and_the_next_head_is_judged() {
        let mut j = judge();
        let good = b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_eq!(j.read(good), Verdict::Pass);
        assert_eq!(j.framing, Framing::Head);
        let bad =
            b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\nX: \x01\r\n\r\n";
        match judge().read(bad) {
            Verdict::RefuseFrom(n, r) => {
                assert_eq!(n, 28);
                assert_eq!(r, Refusal(HeadProblem::Headers));
            }
            other => panic!("{other:?}"),
        }
    }

    #[actix_rt::test]
    async fn an_incomplete_head_is_held_and_a_huge_one_refused() {
        assert_eq!(judge().read(b"GET /a HTTP/1.1\r\nHo"), Verdict::HoldFrom(0));
        let mut j = judge();
        assert_eq!(
            j.read(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HT"),
            Verdict::HoldFrom(28)
        );
        let huge = vec![b'a'; MAX_HEAD_BYTES + 1];
        assert!(matches!(
            judge().read(&huge),
            Verdict::RefuseFrom(0, Refusal(HeadProblem::TooLarge { .. }))
        ));
    }

    #[actix_rt::test]
    async fn a_bad_byte_is_refused_before_the_head_is_complete() {
        let verdict = judge().read(b"GET /a HTTP/1.1\r\nHost: x\r\nX-Probe: a\x01");
        assert!(
            matches!(
                verdict,
                Verdict::RefuseFrom(0, Refusal(HeadProblem::Headers))
            ),
            "{verdict:?}"
        );
    }

    #[actix_rt::test]
    async fn a_chunked_body_is_followed_to_its_end_across_reads() {
        let mut j = judge();
        let head = b"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(j.read(head), Verdict::Pass);
        assert_eq!(j.framing, Framing::Chunked(Chunk::Size(0)));
        // Chunk data that looks like a bad head must not be judged as one.
        assert_eq!(j.read(b"a;ext=1\r\nGET \x01\r\n\r\n"), Verdict::Pass);
        assert_eq!(j.read(b"\r\n0\r\nTrailer: t\r\n"), Verdict::Pass);
        assert_eq!(
            j.read(b"\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n"),
            Verdict::Pass
        );
        assert_eq!(j.framing, Framing::Head);
    }

    #[actix_rt::test]
    async fn an_upgrade_makes_the_rest_a_stream() {
        let mut j = judge();
        let head = b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n\x01\x02 not http";
        assert_eq!(j.read(head), Verdict::Pass);
        assert_eq!(j.framing, Framing::Stream);
    }

    #[actix_rt::test]
    async fn blank_lines_before_a_head_are_part_of_it() {
        let mut j = judge();
        assert_eq!(
            j.read(b"\r\n\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n"),
            Verdict::Pass
        );
        assert_eq!(j.framing, Framing::Head);
    }

    #[test]
    fn the_refusal_answer_carries_the_body_and_the_request_id() {
        let r = Refusal::from_parse_error(&ParseError::Header);
        let text = String::from_utf8(r.response("r7")).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 "), "{head}");
        assert!(head.contains("x-request-id: r7"), "{head}");
        assert!(head.contains("x-content-type-options: nosniff"), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], "bad_args");
        assert_eq!(v["error"]["data"]["field"], "headers");
    }
}
