//! [`PtyChunks`]: a PTY's output as a stream of chunks, one `read` each.
//!
//! Why one read. Linux hands a PTY's output to a reader at most 4 KiB per `read` (the line
//! discipline's buffer). Reading on until `EAGAIN`, to make larger chunks, looked cheaper per
//! byte but is not: once the line discipline is drained, the next `read` waits for the tty's
//! flush worker to move what the writer has written since (`n_tty_read` calls
//! `tty_buffer_flush_work`), a sleep and a wake-up per extra read, on the thread that also
//! serves every socket. Handing on each read instead lets the flush worker refill the buffer
//! while the chunk travels to the clients, so the next read finds it full, as a blocking reader
//! thread does. Measured in three alternating pairs of `atc-bench --phases throughput` (256
//! MiB): one client went from 0.46–0.48× the floor to 0.71–0.82×, for about the same CPU.
//! Chunks are then small, and the session gathers them before the screen model sees them
//! (`session/screen_link.rs`).
//! The reader ([`PtyOutput`](super::pty_output::PtyOutput)) drops readiness after a small
//! read, so an echo's trip has no `read` that finds nothing.
//!
//! Reads land in one scratch buffer per thread and each chunk is copied out at its exact size:
//! an idle session then holds no read buffer at all, and the output ring keeps only the bytes
//! it holds, not the spare capacity of the buffer they were read into.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;
use tokio::io::{AsyncRead, ReadBuf};

use crate::providers::MAX_OUTPUT_CHUNK;

thread_local! {
    static SCRATCH: RefCell<Box<[u8]>> = RefCell::new(vec![0; MAX_OUTPUT_CHUNK].into_boxed_slice());
}

/// Output chunks of a reader; ends at EOF, and after the first error (which it yields).
pub struct PtyChunks<R> {
    reader: R,
    done: bool,
}

impl<R> PtyChunks<R> {
    /// Chunks of `reader`.
    pub fn new(reader: R) -> PtyChunks<R> {
        PtyChunks {
            reader,
            done: false,
        }
    }
}

impl<R: AsyncRead + Unpin> Stream for PtyChunks<R> {
    type Item = io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let mut buf = ReadBuf::new(&mut scratch[..]);
            match Pin::new(&mut this.reader).poll_read(cx, &mut buf) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Ok(())) if buf.filled().is_empty() => {
                    this.done = true;
                    Poll::Ready(None)
                }
                Poll::Ready(Ok(())) => Poll::Ready(Some(Ok(Bytes::copy_from_slice(buf.filled())))),
                // A PTY's read error is EIO once every slave fd closed: the end of output, as
                // EOF is. The harness hears it and the stream ends.
                Poll::Ready(Err(e)) => {
                    this.done = true;
                    Poll::Ready(Some(Err(e)))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use std::collections::VecDeque;

    /// A reader that replays a script of read results, then is pending forever.
    struct Scripted(VecDeque<Poll<io::Result<Vec<u8>>>>);

    impl AsyncRead for Scripted {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            match self.0.pop_front() {
                Some(Poll::Ready(Ok(bytes))) => {
                    let n = bytes.len().min(buf.remaining());
                    buf.put_slice(&bytes[..n]);
                    if n < bytes.len() {
                        self.0.push_front(Poll::Ready(Ok(bytes[n..].to_vec())));
                    }
                    Poll::Ready(Ok(()))
                }
                Some(Poll::Ready(Err(e))) => Poll::Ready(Err(e)),
                Some(Poll::Pending) | None => Poll::Pending,
            }
        }
    }

    fn ready(bytes: &[u8]) -> Poll<io::Result<Vec<u8>>> {
        Poll::Ready(Ok(bytes.to_vec()))
    }

    fn poll_once(s: &mut PtyChunks<Scripted>) -> Poll<Option<io::Result<Bytes>>> {
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        Pin::new(s).poll_next(&mut cx)
    }

    #[test]
    fn each_read_is_a_chunk_and_a_read_that_would_block_is_pending() {
        let mut s = PtyChunks::new(Scripted(
            [ready(b"ab"), ready(b"cd"), Poll::Pending, ready(b"ef")].into(),
        ));
        assert!(matches!(poll_once(&mut s), Poll::Ready(Some(Ok(b))) if b == "ab"));
        assert!(matches!(poll_once(&mut s), Poll::Ready(Some(Ok(b))) if b == "cd"));
        assert!(poll_once(&mut s).is_pending());
        assert!(matches!(poll_once(&mut s), Poll::Ready(Some(Ok(b))) if b == "ef"));
        assert!(poll_once(&mut s).is_pending());
    }

    #[test]
    fn a_chunk_stops_at_the_limit_and_the_rest_follows() {
        let big = vec![b'x'; MAX_OUTPUT_CHUNK + 10];
        let mut s = PtyChunks::new(Scripted([ready(&big)].into()));
        assert!(
            matches!(poll_once(&mut s), Poll::Ready(Some(Ok(b))) if b.len() == MAX_OUTPUT_CHUNK)
        );
        assert!(matches!(poll_once(&mut s), Poll::Ready(Some(Ok(b))) if b.len() == 10));
    }

    #[tokio::test]
    async fn bytes_before_an_end_are_handed_on_then_the_stream_ends() {
        let eio = || Poll::Ready(Err(io::Error::from_raw_os_error(5)));
        let s = PtyChunks::new(Scripted([ready(b"last"), eio(), ready(b"never")].into()));
        let got: Vec<_> = s.collect().await;
        assert!(
            matches!(got.as_slice(), [Ok(b), Err(_)] if b == "last"),
            "{got:?}"
        );

        let s = PtyChunks::new(Scripted([eio()].into()));
        let got: Vec<_> = s.collect().await;
        assert!(matches!(got.as_slice(), [Err(_)]));

        // Nothing is read after EOF.
        let s = PtyChunks::new(Scripted(
            [ready(b"tail"), ready(b""), ready(b"never")].into(),
        ));
        let got: Vec<_> = s.map(|r| r.map(|b| b.to_vec())).collect().await;
        assert!(matches!(got.as_slice(), [Ok(b)] if b == b"tail"), "{got:?}");
    }
}
