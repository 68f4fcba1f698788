//! A remote harness's input on its way to impd: bounded like local input, and never dropped.
//!
//! Input is held in two places: *pending*, not handed to any connection yet (none is up, or
//! the last one's writer failed), and *handed*, given to the current connection's writer but
//! not yet written to its socket (the writer queues without waiting; its queue drains as the
//! socket takes bytes). Both count against one cap, [`INPUT_BACKLOG_BYTES`], as a child's
//! unread stdin does for a local session: input that would take them past it is refused
//! whole with `too_slow`, so a write is either all accepted or none of it is.
//!
//! Invariants: input leaves in the order it was accepted; nothing pending is written to a
//! connection while anything before it waits (so pending is empty while a healthy connection
//! is up); a writer that refuses a chunk keeps that chunk and everything after it pending; when
//! a connection ends, what its writer never wrote goes back to the front of pending for the
//! next one. What is still here when the harness ends was not delivered, and the harness says
//! so. Bytes a socket took and then lost cannot be told apart from delivered ones: impd
//! acknowledges no stdin on a tty session (impd §9.5), so those are not sent again.

use std::collections::VecDeque;

use bytes::Bytes;

use atc_protocol::TermSize;
use impd_client::exec::STDIN_CHUNK;
use impd_client::ExecWriter;

/// Input waiting for impd (pending and handed together) counts against the providers' one
/// cap, so a remote session is no softer a target than a local child.
pub use crate::providers::INPUT_BACKLOG_BYTES;

/// The socket is gone: nothing more can be written to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gone;

/// The signals a harness sends its process's group: SIGHUP to end it, SIGKILL once the
/// grace runs out (impd takes any `SIG…` name; the daemon needs these two).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGHUP.
    Hangup,
    /// SIGKILL.
    Kill,
}

impl Signal {
    /// The name impd's `signal` message carries.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Hangup => "SIGHUP",
            Signal::Kill => "SIGKILL",
        }
    }
}

/// What the harness writes to one connection (an [`ExecWriter`]; a fake in unit tests).
pub trait Link {
    /// Queues one stdin message (at most [`STDIN_CHUNK`] bytes).
    fn input(&self, bytes: Bytes) -> Result<(), Gone>;
    /// Queues a resize.
    fn resize(&self, size: TermSize) -> Result<(), Gone>;
    /// Queues a signal for the process group.
    fn signal(&self, signal: Signal) -> Result<(), Gone>;
    /// Closes the socket after what is queued.
    fn close(&self);
    /// What queued stdin messages still weigh: each message's bytes plus its channel byte.
    fn queued_bytes(&self) -> usize;
}

impl Link for ExecWriter {
    fn input(&self, bytes: Bytes) -> Result<(), Gone> {
        ExecWriter::input(self, bytes).map_err(|_| Gone)
    }

    fn resize(&self, size: TermSize) -> Result<(), Gone> {
        ExecWriter::resize(self, size.cols, size.rows).map_err(|_| Gone)
    }

    fn signal(&self, signal: Signal) -> Result<(), Gone> {
        ExecWriter::signal(self, signal.name()).map_err(|_| Gone)
    }

    fn close(&self) {
        // Fails only when the socket is gone already, which is what closing asks for.
        let _ = ExecWriter::close(self);
    }

    fn queued_bytes(&self) -> usize {
        ExecWriter::queued_bytes(self)
    }
}

/// Input refused: taking it would put more than [`INPUT_BACKLOG_BYTES`] in waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full {
    /// Bytes waiting when it was refused.
    pub waiting: usize,
}

/// Pending and handed input of one harness.
#[derive(Debug, Default)]
pub struct InputQueue {
    /// Not handed to any connection, oldest first, each at most [`STDIN_CHUNK`].
    pending: VecDeque<Bytes>,
    pending_bytes: usize,
    /// Handed to the current connection's writer and not known written, oldest first; one
    /// writer message each.
    handed: VecDeque<Bytes>,
    handed_bytes: usize,
}

/// A writer's weight for one message: the payload and its channel byte.
fn cost(chunk: &Bytes) -> usize {
    chunk.len() + 1
}

impl InputQueue {
    /// Bytes accepted and not yet written to a socket.
    pub fn waiting(&self) -> usize {
        self.pending_bytes + self.handed_bytes
    }

    /// Bytes accepted and not handed to any connection.
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    /// Accepts `bytes` whole, or refuses them whole when the cap would be passed. With a
    /// connection up (`link`) and nothing pending ahead of it, they go to its writer now.
    pub fn write<W: Link>(&mut self, link: Option<&W>, bytes: Bytes) -> Result<(), Full> {
        if let Some(link) = link {
            self.forget_written(link);
        }
        if self.waiting() + bytes.len() > INPUT_BACKLOG_BYTES {
            return Err(Full {
                waiting: self.waiting(),
            });
        }
        let chunks = (0..bytes.len())
            .step_by(STDIN_CHUNK)
            .map(|at| bytes.slice(at..(at + STDIN_CHUNK).min(bytes.len())));
        for chunk in chunks {
            self.pending_bytes += chunk.len();
            self.pending.push_back(chunk);
        }
        if let Some(link) = link {
            // A writer that refuses keeps the input pending (it is accepted either way); the
            // connection's end is on its way and the next one takes it.
            let _ = self.flush(link);
        }
        Ok(())
    }

    /// Hands pending input to `link` in order, stopping at the first chunk it refuses (that
    /// chunk and the rest stay pending); `Gone` when it refused one.
    pub fn flush<W: Link>(&mut self, link: &W) -> Result<(), Gone> {
        while let Some(chunk) = self.pending.pop_front() {
            if link.input(chunk.clone()).is_err() {
                self.pending.push_front(chunk);
                return Err(Gone);
            }
            self.pending_bytes -= chunk.len();
            self.handed_bytes += chunk.len();
            self.handed.push_back(chunk);
        }
        Ok(())
    }

    /// The connection of `link` is over: what it never wrote is pending again, ahead of
    /// anything accepted since.
    pub fn connection_ended<W: Link>(&mut self, link: &W) {
        self.forget_written(link);
        while let Some(chunk) = self.handed.pop_back() {
            self.handed_bytes -= chunk.len();
            self.pending_bytes += chunk.len();
            self.pending.push_front(chunk);
        }
    }

    /// Drops from `handed` the messages `link` has written: its queue weighs what is left,
    /// and it drains oldest first, a whole message at a time.
    fn forget_written<W: Link>(&mut self, link: &W) {
        let handed_cost: usize = self.handed.iter().map(cost).sum();
        let mut written = handed_cost.saturating_sub(link.queued_bytes());
        while let Some(front) = self.handed.front() {
            if cost(front) > written {
                break;
            }
            written -= cost(front);
            self.handed_bytes -= front.len();
            self.handed.pop_front();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::cell::{Cell, RefCell};

    use super::*;

    /// A writer that records what it was given; `gone` makes it refuse, `stuck` makes it keep
    /// everything queued (a peer that does not read).
    #[derive(Default)]
    pub struct FakeLink {
        pub sent: RefCell<Vec<Bytes>>,
        pub resized: RefCell<Vec<TermSize>>,
        pub signals: RefCell<Vec<String>>,
        pub closed: Cell<bool>,
        pub gone: Cell<bool>,
        pub stuck: Cell<bool>,
        queued: Cell<usize>,
    }

    impl FakeLink {
        pub fn gone() -> FakeLink {
            let l = FakeLink::default();
            l.gone.set(true);
            l
        }

        pub fn stuck() -> FakeLink {
            let l = FakeLink::default();
            l.stuck.set(true);
            l
        }

        /// The socket takes everything queued.
        pub fn drain(&self) {
            self.queued.set(0);
        }

        pub fn text(&self) -> Vec<u8> {
            self.sent.borrow().iter().flat_map(|b| b.to_vec()).collect()
        }
    }

    impl Link for FakeLink {
        fn input(&self, bytes: Bytes) -> Result<(), Gone> {
            if self.gone.get() {
                return Err(Gone);
            }
            assert!(bytes.len() <= STDIN_CHUNK, "one message per chunk");
            if self.stuck.get() {
                self.queued.set(self.queued.get() + cost(&bytes));
            }
            self.sent.borrow_mut().push(bytes);
            Ok(())
        }

        fn resize(&self, size: TermSize) -> Result<(), Gone> {
            if self.gone.get() {
                return Err(Gone);
            }
            self.resized.borrow_mut().push(size);
            Ok(())
        }

        fn signal(&self, signal: Signal) -> Result<(), Gone> {
            if self.gone.get() {
                return Err(Gone);
            }
            self.signals.borrow_mut().push(signal.name().to_string());
            Ok(())
        }

        fn close(&self) {
            self.closed.set(true);
        }

        fn queued_bytes(&self) -> usize {
            self.queued.get()
        }
    }

    /// A shared fake, so a test keeps a handle on the writer the state owns.
    impl Link for std::rc::Rc<FakeLink> {
        fn input(&self, bytes: Bytes) -> Result<(), Gone> {
            (**self).input(bytes)
        }
        fn resize(&self, size: TermSize) -> Result<(), Gone> {
            (**self).resize(size)
        }
        fn signal(&self, signal: Signal) -> Result<(), Gone> {
            (**self).signal(signal)
        }
        fn close(&self) {
            (**self).close()
        }
        fn queued_bytes(&self) -> usize {
            (**self).queued_bytes()
        }
    }

    fn mib(n: usize) -> Bytes {
        Bytes::from(vec![b'x'; n * 1024 * 1024])
    }

    #[test]
    fn pending_input_is_capped_and_a_refused_write_leaves_nothing_behind() {
        let mut q = InputQueue::default();
        q.write::<FakeLink>(None, mib(3)).unwrap();
        q.write::<FakeLink>(None, Bytes::from(vec![b'y'; 1024 * 1024 - 1]))
            .unwrap();
        // One byte short of the cap: a 2-byte write is refused whole, a 1-byte one fits.
        assert!(q
            .write::<FakeLink>(None, Bytes::from_static(b"ab"))
            .is_err());
        assert_eq!(q.waiting(), INPUT_BACKLOG_BYTES - 1);
        q.write::<FakeLink>(None, Bytes::from_static(b"c")).unwrap();
        let link = FakeLink::default();
        q.flush(&link).unwrap();
        let text = link.text();
        assert_eq!(text.len(), INPUT_BACKLOG_BYTES);
        assert_eq!(text.last(), Some(&b'c'));
        assert!(!text.contains(&b'a'));
    }

    #[test]
    fn input_a_connection_has_not_written_counts_against_the_cap() {
        let mut q = InputQueue::default();
        let link = FakeLink::stuck();
        q.write(Some(&link), mib(4)).unwrap();
        assert_eq!(q.waiting(), INPUT_BACKLOG_BYTES);
        assert_eq!(
            q.write(Some(&link), Bytes::from_static(b"z")),
            Err(Full {
                waiting: INPUT_BACKLOG_BYTES
            })
        );
        // The socket took it all: there is room again, and the cap holds.
        link.drain();
        q.write(Some(&link), Bytes::from_static(b"z")).unwrap();
        assert_eq!(q.waiting(), 1);
    }

    #[test]
    fn a_writer_that_fails_keeps_its_input_for_the_next_connection_in_order() {
        let mut q = InputQueue::default();
        q.write::<FakeLink>(None, Bytes::from_static(b"one "))
            .unwrap();
        q.write::<FakeLink>(None, Bytes::from_static(b"two "))
            .unwrap();
        assert_eq!(q.flush(&FakeLink::gone()), Err(Gone));
        // Accepted while the dead writer is still the current one: after what waits.
        let dead = FakeLink::gone();
        q.write(Some(&dead), Bytes::from_static(b"three")).unwrap();
        q.connection_ended(&dead);
        let next = FakeLink::default();
        q.flush(&next).unwrap();
        assert_eq!(next.text(), b"one two three");
        // That socket wrote it all: nothing is left to send again.
        q.connection_ended(&next);
        assert_eq!(q.waiting(), 0);
    }

    #[test]
    fn what_a_connection_never_wrote_goes_out_on_the_next_before_newer_input() {
        let mut q = InputQueue::default();
        let first = FakeLink::stuck();
        q.write(Some(&first), Bytes::from_static(b"abc")).unwrap();
        q.write(Some(&first), Bytes::from_static(b"def")).unwrap();
        // The socket wrote the first message only, then the connection ended.
        first.queued.set(cost(&Bytes::from_static(b"def")));
        q.connection_ended(&first);
        q.write::<FakeLink>(None, Bytes::from_static(b"ghi"))
            .unwrap();
        let next = FakeLink::default();
        q.flush(&next).unwrap();
        assert_eq!(next.text(), b"defghi");
    }

    #[test]
    fn big_input_goes_in_messages_of_at_most_one_chunk() {
        let mut q = InputQueue::default();
        let link = FakeLink::default();
        q.write(Some(&link), Bytes::from(vec![b'q'; STDIN_CHUNK * 2 + 5]))
            .unwrap();
        let sizes: Vec<usize> = link.sent.borrow().iter().map(Bytes::len).collect();
        assert_eq!(sizes, [STDIN_CHUNK, STDIN_CHUNK, 5]);
    }
}
