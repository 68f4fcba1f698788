//! [`PtyOutput`]: the read side of a local PTY's master, registered for readability only.
//!
//! pty-process registers a PTY with the runtime for reading and writing at once. Its epoll
//! registration is edge-triggered, so every time the child reads its input and the master gains
//! write room, the sessions' thread woke for a write-readiness nobody waited for: once or twice
//! on every keystroke's round trip (`strace` of `atc-bench --phases echo` showed `write`, then
//! one or two `epoll_wait`s returning only `EPOLLOUT`, then the echo). Here the master is
//! registered for `EPOLLIN` alone; [`PtyInput`](super::pty_input::PtyInput) writes through the
//! same descriptor and registers a duplicate for writability only while input is backlogged. A
//! trip went from three `epoll_wait`s and two `read`s to two and one; on the 2-core machine
//! that neither the CPU nor the latency of the echo phase showed beyond its noise
//! (docs/performance-log.md, "Spawns and requests, 2026-12-03"), so what this buys is fewer
//! wake-ups per keystroke for every session, not a measured figure.
//!
//! A small read (under [`SMALL_READ`]) emptied the line discipline, and the child is printing
//! a little at a time: a keystroke's echo, a prompt. Readiness is then dropped at once rather
//! than learned from a `read` that returns `EAGAIN` (the last call of every echo's trip
//! before). That is safe because the line discipline wakes its readers, and so the epoll edge
//! fires, every time it receives bytes; and the runtime keeps any edge that arrived since it
//! reported this one (tokio clears readiness only for the tick it saw). A larger read keeps
//! readiness: in bulk output the line discipline refills while a chunk travels to the clients
//! (`pty_reader`'s doc), and the next `read` finding it full is cheaper than a turn through
//! epoll. Dropping readiness after those too cost 4–7 % of the one-client rate, and more CPU,
//! in four alternating pairs of `atc-bench --phases throughput --no-floor`.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, Interest, ReadBuf};

/// Reads shorter than this drop readiness (see the module's doc). Linux hands a reader at most
/// 4 KiB of a PTY's output a call; bulk output comes in reads of that size.
const SMALL_READ: usize = 1024;

/// A PTY master's output. Must be made on the thread, and inside the runtime, that reads it.
pub struct PtyOutput {
    fd: AsyncFd<Arc<OwnedFd>>,
}

impl PtyOutput {
    /// Registers `master` (non-blocking) with this thread's runtime, for reading only. The
    /// input writes through another share of it.
    pub fn new(master: Arc<OwnedFd>) -> io::Result<PtyOutput> {
        // SAFETY: the registration needs the fd open and the same for the AsyncFd's life; it
        // holds a share of the OwnedFd, which closes only when the last share goes.
        let fd = unsafe { AsyncFd::register_with_interest(master, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        Ok(PtyOutput { fd })
    }
}

impl AsyncRead for PtyOutput {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.fd.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let asked = unfilled.len();
            let read = guard.try_io(|fd| {
                rustix::io::read(fd.get_ref().as_fd(), &mut *unfilled).map_err(io::Error::from)
            });
            match read {
                Ok(Ok(n)) => {
                    if n < asked.min(SMALL_READ) {
                        guard.clear_ready();
                    }
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // `EAGAIN`: `try_io` dropped the readiness; wait for the next edge.
                Err(_would_block) => continue,
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::AsyncReadExt;

    /// A fresh PTY in raw mode: its master (non-blocking) and its slave.
    pub(in crate::providers) fn raw_pty_pair() -> (OwnedFd, std::fs::File) {
        let (pty, pts) = pty_process::open().expect("open a pty");
        let slave = pts.as_fd().try_clone_to_owned().expect("dup the slave");
        let mut termios = rustix::termios::tcgetattr(&slave).expect("tcgetattr");
        termios.make_raw();
        rustix::termios::tcsetattr(&slave, rustix::termios::OptionalActions::Now, &termios)
            .expect("raw mode");
        (OwnedFd::from(pty), std::fs::File::from(slave))
    }

    async fn read_some(out: &mut PtyOutput) -> Vec<u8> {
        let mut buf = vec![0; 64 * 1024];
        let n = tokio::time::timeout(Duration::from_secs(10), out.read(&mut buf))
            .await
            .expect("output in time")
            .expect("read");
        buf.truncate(n);
        buf
    }

    #[actix_rt::test]
    async fn output_written_after_a_short_read_still_wakes_the_reader() {
        let (master, mut slave) = raw_pty_pair();
        let mut out = PtyOutput::new(Arc::new(master)).expect("register");
        // Each write lands after the read before it came back short and dropped readiness:
        // a lost edge would leave the next read waiting until the timeout.
        for i in 0..50u8 {
            let line = [b'a' + i % 26];
            std::io::Write::write_all(&mut slave, &line).expect("write the slave");
            let mut got = read_some(&mut out).await;
            while got.is_empty() {
                got = read_some(&mut out).await;
            }
            assert_eq!(got, line);
        }
    }

    #[actix_rt::test]
    async fn bulk_output_arrives_whole_and_the_end_is_an_error_or_eof() {
        let (master, mut slave) = raw_pty_pair();
        let mut out = PtyOutput::new(Arc::new(master)).expect("register");
        let want: Vec<u8> = (0..256 * 1024).map(|i| (i % 251) as u8).collect();
        let writer = {
            let want = want.clone();
            std::thread::spawn(move || {
                std::io::Write::write_all(&mut slave, &want).expect("write the slave");
                // Dropping the slave, the last one open, ends the master's output.
            })
        };
        let mut got = Vec::new();
        let mut buf = vec![0; 32 * 1024];
        loop {
            let read = tokio::time::timeout(Duration::from_secs(10), out.read(&mut buf))
                .await
                .expect("output in time");
            match read {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                // EIO: every slave fd closed.
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error()) => break,
                Err(e) => panic!("read: {e}"),
            }
        }
        writer.join().expect("writer");
        assert_eq!(got.len(), want.len());
        assert!(got == want, "bytes arrive in order");
    }
}
