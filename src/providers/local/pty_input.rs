//! The write side of a local PTY, shared by its harness and by the attach sockets typing into
//! it.
//!
//! A keystroke used to travel socket actor → session → harness → writer task before it reached
//! the PTY: three mailboxes and a wake-up of the sessions' thread, on the path of every echo.
//! Now whoever writes tries the PTY at once, on its own thread, with a non-blocking `write`.
//! Only what the PTY will not take yet (a child that is not reading its stdin) is queued, and
//! one writer task on the harness's thread drains the queue as the PTY becomes writable. Every
//! write goes behind the queue when one exists, so bytes keep the order they were handed in.
//! The queue is bounded by [`INPUT_BACKLOG_BYTES`]: past it, a write is refused, not buffered.
//!
//! The runtime hears of the PTY's write room only while a backlog waits: the writer task then
//! registers a duplicate of the master for writability, and closes it once the queue drains.
//! The rest of the time that readiness wakes nobody ([`super::pty_output`] says why that
//! matters).

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use bytes::Bytes;
use rustix::io::Errno;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::Notify;

use super::pty_output::PtyOutput;
use crate::providers::{ProviderError, INPUT_BACKLOG_BYTES};
use atc_protocol::TermSize;

/// A handle on one PTY's input. Clones share the queue.
#[derive(Clone)]
pub struct PtyInput {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the writer task: bytes were queued, or the input closed.
    queued: Notify,
}

struct State {
    /// `None` once closed (the harness ended) or broken (a write failed: the process is gone).
    pty: Option<Pty>,
    queue: VecDeque<Bytes>,
    queued_bytes: usize,
}

/// The input's descriptor, shared with the output, and its registration for writability while
/// a backlog waits.
struct Pty {
    fd: Arc<OwnedFd>,
    /// A duplicate of `fd`, registered for write room: epoll keeps one registration per
    /// descriptor, and the output's is for reading only. Made at a backlog and closed once
    /// it drains, so an idle session holds no extra descriptor.
    writable: Option<AsyncFd<OwnedFd>>,
}

/// What a write that does not wait got done.
enum Attempt {
    /// All of it.
    Done,
    /// The first `n` bytes; the PTY takes no more for now.
    Partly(usize),
    /// The PTY is gone.
    Broken,
}

impl Pty {
    /// Writes as much of `bytes` as the PTY takes now, without waiting.
    fn write_now(&self, bytes: &[u8]) -> Attempt {
        let mut done = 0;
        while done < bytes.len() {
            match rustix::io::write(&self.fd, &bytes[done..]) {
                Ok(n) => done += n,
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => return Attempt::Partly(done),
                Err(_) => return Attempt::Broken,
            }
        }
        Attempt::Done
    }

    /// After a write the PTY did not take whole: whether it has room again (`true`: try once
    /// more) or this task is registered to hear when it has (`false`).
    fn poll_writable(&mut self, cx: &mut Context<'_>) -> std::io::Result<bool> {
        let writable = match &mut self.writable {
            Some(writable) => writable,
            empty => {
                let dup = self.fd.try_clone()?;
                // SAFETY: the registration needs the fd open and the same for its life; it
                // owns the duplicate, which nothing else can close.
                let registered =
                    unsafe { AsyncFd::register_with_interest(dup, Interest::WRITABLE) };
                empty.insert(registered.map_err(|e| e.into_parts().1)?)
            }
        };
        match writable.poll_write_ready(cx) {
            // The write just failed for want of room, so this readiness is stale unless an
            // edge came after it was reported; clearing it drops only the stale one (tokio
            // clears by tick), so the second poll is ready only if room came since.
            Poll::Ready(Ok(mut guard)) => {
                guard.clear_ready();
                Ok(writable.poll_write_ready(cx).is_ready())
            }
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Ok(false),
        }
    }
}

impl PtyInput {
    /// Splits a PTY's non-blocking `master`: its input, its output, and the task that drains
    /// the input's queue. Call it, and spawn the task, on the thread that reads the output.
    pub fn split(
        master: OwnedFd,
    ) -> std::io::Result<(PtyInput, PtyOutput, impl std::future::Future<Output = ()>)> {
        let fd = Arc::new(master);
        let output = PtyOutput::new(fd.clone())?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                pty: Some(Pty { fd, writable: None }),
                queue: VecDeque::new(),
                queued_bytes: 0,
            }),
            queued: Notify::new(),
        });
        let input = PtyInput {
            shared: shared.clone(),
        };
        Ok((input, output, drain(shared)))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.shared)
    }

    /// Writes `bytes` whole, in order after every earlier write: at once where the PTY takes
    /// them, else queued for the writer task.
    pub fn write(&self, bytes: Bytes) -> Result<(), ProviderError> {
        let mut state = self.state();
        let State {
            pty,
            queue,
            queued_bytes,
        } = &mut *state;
        let Some(open) = pty else {
            return Err(ProviderError::ProcessGone);
        };
        if *queued_bytes + bytes.len() > INPUT_BACKLOG_BYTES {
            return Err(ProviderError::InputBacklogFull);
        }
        let rest = if queue.is_empty() {
            match open.write_now(&bytes) {
                Attempt::Done => {
                    drop(state);
                    super::echo_spin::after_input();
                    return Ok(());
                }
                Attempt::Partly(n) => bytes.slice(n..),
                Attempt::Broken => {
                    state.break_off();
                    return Err(ProviderError::ProcessGone);
                }
            }
        } else {
            bytes
        };
        *queued_bytes += rest.len();
        queue.push_back(rest);
        drop(state);
        self.shared.queued.notify_one();
        Ok(())
    }

    /// Sets the terminal size. Applied at once, not behind queued input: a child that is not
    /// reading must still be able to learn its size.
    pub fn resize(&self, size: TermSize) {
        if let Some(pty) = &self.state().pty {
            let size = rustix::termios::Winsize {
                ws_row: size.rows,
                ws_col: size.cols,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            // A failed resize means the PTY is gone; the exit notice is on its way.
            let _ = rustix::termios::tcsetwinsize(pty.fd.as_fd(), size);
        }
    }

    /// Lets go of the PTY: later writes fail with `ProcessGone`, and the writer task ends.
    pub fn close(&self) {
        self.state().break_off();
        self.shared.queued.notify_one();
    }

    /// Bytes queued and not yet written.
    #[cfg(test)]
    fn queued_bytes(&self) -> usize {
        self.state().queued_bytes
    }
}

impl State {
    fn break_off(&mut self) {
        self.pty = None;
        self.queue.clear();
        self.queued_bytes = 0;
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    // Nothing under this lock panics part-way through a change; a poisoned lock still holds
    // a consistent queue.
    shared
        .state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The writer task: writes the queue as the PTY takes it, until the input closes.
async fn drain(shared: Arc<Shared>) {
    loop {
        shared.queued.notified().await;
        let open = std::future::poll_fn(|cx| poll_drain(&shared, cx)).await;
        if !open {
            return;
        }
    }
}

/// Writes queued bytes until the queue is empty (`true`) or the input is closed (`false`);
/// pending while the PTY is full.
fn poll_drain(shared: &Shared, cx: &mut Context<'_>) -> Poll<bool> {
    let mut state = lock(shared);
    loop {
        let State {
            pty,
            queue,
            queued_bytes,
        } = &mut *state;
        let Some(open) = pty else {
            return Poll::Ready(false);
        };
        let Some(front) = queue.front_mut() else {
            // Drained: stop hearing about write room until the next backlog.
            open.writable = None;
            return Poll::Ready(true);
        };
        match open.write_now(front) {
            Attempt::Done => {
                *queued_bytes -= front.len();
                queue.pop_front();
            }
            Attempt::Partly(n) => {
                *queued_bytes -= n;
                let _ = front.split_to(n);
                match open.poll_writable(cx) {
                    Ok(true) => {}
                    Ok(false) => return Poll::Pending,
                    Err(_) => {
                        state.break_off();
                        return Poll::Ready(false);
                    }
                }
            }
            Attempt::Broken => {
                state.break_off();
                return Poll::Ready(false);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PTY pair in raw mode, whose slave side nobody reads until the test does.
    fn pty_pair() -> (PtyInput, std::fs::File, PtyOutput) {
        let (master, slave) = super::super::pty_output::tests::raw_pty_pair();
        let (input, output, writer) = PtyInput::split(master).expect("split");
        actix_rt::spawn(writer);
        (input, slave, output)
    }

    /// Reads `want` bytes from the slave side, off the runtime's thread; hands the slave back.
    async fn read_slave(mut slave: std::fs::File, want: usize) -> (std::fs::File, Vec<u8>) {
        let read = tokio::task::spawn_blocking(move || {
            let mut got = vec![0; want];
            std::io::Read::read_exact(&mut slave, &mut got).map(|()| (slave, got))
        });
        tokio::time::timeout(std::time::Duration::from_secs(10), read)
            .await
            .expect("the bytes arrive in time")
            .expect("the reader ran")
            .expect("read the slave")
    }

    #[actix_rt::test]
    async fn writes_the_pty_will_not_take_are_queued_and_arrive_in_order() {
        let (input, mut slave, _read) = pty_pair();
        let chunk =
            |i: usize| -> Vec<u8> { (0..4096).map(|j| ((i + j) % 90) as u8 + 33).collect() };
        // Far more than a PTY buffers while nobody reads: most of it must queue.
        for i in 0..64 {
            input.write(Bytes::from(chunk(i))).expect("queued");
        }
        assert!(
            input.queued_bytes() > 0,
            "the PTY cannot have taken 256 KiB"
        );
        // Make room in the PTY while the writer task cannot run (this thread is its thread):
        // a later write must still go behind the queue, not into the room.
        let mut head = vec![0; 8192];
        std::io::Read::read_exact(&mut slave, &mut head).expect("read the slave");
        for i in 64..128 {
            input.write(Bytes::from(chunk(i))).expect("queued");
        }
        let (slave, rest) = read_slave(slave, 128 * 4096 - head.len()).await;
        let want: Vec<u8> = (0..128).flat_map(chunk).collect();
        assert_eq!(
            [head, rest].concat(),
            want,
            "bytes arrive whole and in order"
        );
        // The writer let go of its registration once drained; a second backlog must make a
        // new one and still be written.
        assert_eq!(input.queued_bytes(), 0);
        for i in 128..192 {
            input.write(Bytes::from(chunk(i))).expect("queued");
        }
        assert!(input.queued_bytes() > 0, "a second backlog");
        let (_slave, again) = read_slave(slave, 64 * 4096).await;
        let want: Vec<u8> = (128..192).flat_map(chunk).collect();
        assert!(
            again == want,
            "the second backlog arrives whole and in order"
        );
    }

    #[actix_rt::test]
    async fn a_write_past_the_backlog_is_refused_and_a_closed_input_is_gone() {
        let (input, _slave, _read) = pty_pair();
        let big = Bytes::from(vec![b'x'; INPUT_BACKLOG_BYTES / 2]);
        let mut refused = None;
        for _ in 0..4 {
            if let Err(e) = input.write(big.clone()) {
                refused = Some(e);
                break;
            }
        }
        assert!(matches!(refused, Some(ProviderError::InputBacklogFull)));
        input.close();
        assert!(matches!(
            input.write(Bytes::from_static(b"y")),
            Err(ProviderError::ProcessGone)
        ));
        assert_eq!(input.queued_bytes(), 0);
    }
}
