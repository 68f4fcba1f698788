//! [`PtyChunks`]: a PTY's output as a stream of chunks, each as large as what is ready.
//!
//! Linux hands a PTY's output to a reader at most 4 KiB per `read` (the line discipline's
//! buffer), so reading once per wake-up makes every 4 KiB a chunk of its own, and every chunk
//! costs a message to the session, one to the screen model, a queue entry and a WebSocket frame
//! per client. This stream keeps reading while the PTY has bytes ready, up to
//! [`MAX_OUTPUT_CHUNK`], and hands the lot on as one chunk. It never waits for more than is
//! ready, so an echo is as prompt as with single reads.
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

use super::MAX_OUTPUT_CHUNK;

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
            // Keep reading while bytes are ready. What ends a chunk: the buffer is full, the
            // reader would block (its waker is registered, so we are polled again), EOF, or an
            // error; the last two end the stream after what was read is handed on.
            let end = loop {
                let before = buf.filled().len();
                match Pin::new(&mut this.reader).poll_read(cx, &mut buf) {
                    Poll::Ready(Ok(())) if buf.filled().len() == before => break Some(None),
                    Poll::Ready(Ok(())) if buf.remaining() == 0 => break None,
                    Poll::Ready(Ok(())) => continue,
                    Poll::Ready(Err(e)) => break Some(Some(e)),
                    Poll::Pending => break None,
                }
            };
            let read = buf.filled();
            match end {
                Some(ending) if read.is_empty() => {
                    this.done = true;
                    Poll::Ready(ending.map(Err))
                }
                Some(ending) => {
                    // The bytes go first. After EOF the next poll reads EOF again and ends
                    // the stream. After an error it ends at the next poll: a PTY's read error
                    // is EIO once every slave fd closed, the end of output like EOF.
                    if let Some(e) = ending {
                        this.done = true;
                        tracing::trace!(error = %e, "pty output ended with an error");
                    }
                    Poll::Ready(Some(Ok(Bytes::copy_from_slice(read))))
                }
                None if read.is_empty() => Poll::Pending,
                None => Poll::Ready(Some(Ok(Bytes::copy_from_slice(read)))),
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
    fn reads_that_are_ready_together_make_one_chunk() {
        let mut s = PtyChunks::new(Scripted(
            [ready(b"ab"), ready(b"cd"), Poll::Pending, ready(b"ef")].into(),
        ));
        assert!(matches!(poll_once(&mut s), Poll::Ready(Some(Ok(b))) if b == "abcd"));
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
        let s = PtyChunks::new(Scripted([ready(b"last"), eio()].into()));
        let got: Vec<_> = s.collect().await;
        assert_eq!(got.len(), 1);
        assert!(matches!(&got[0], Ok(b) if b == "last"));

        let s = PtyChunks::new(Scripted([eio()].into()));
        let got: Vec<_> = s.collect().await;
        assert!(matches!(got.as_slice(), [Err(_)]));

        // EOF reads as EOF again, as a real reader's does.
        let s = PtyChunks::new(Scripted([ready(b"tail"), ready(b""), ready(b"")].into()));
        let got: Vec<_> = s.map(|r| r.map(|b| b.to_vec())).collect().await;
        assert_eq!(got.len(), 1);
    }
}
