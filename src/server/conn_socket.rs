//! A handle that ends one HTTP connection from outside the task that serves it: a WebSocket
//! route stops its reads once the close handshake is done, and the connection registry closes
//! a tokenless connection to make room for a newer one. [`super::head_guard::HeadGuard`], the
//! connection's byte stream, obeys it; the handle is kept in the connection's data.
//!
//! Why a WebSocket needs it: actix-web hands a WebSocket the rest of the connection as a
//! request body that only ends when the client closes TCP. When our response body (the
//! socket's outbound frames) ends first, actix-http's h1 dispatcher "lingers": it reads and
//! discards input until the client closes or `client_disconnect_timeout` runs out (1 s,
//! measured on a clock that ticks every 500 ms, hence 0.5 to 1 s). A client that waits for the
//! server to close TCP, as RFC 6455 §7.1.1 asks, waited that long on every clean close.
//! Reporting end of input to the dispatcher ends the lingering at once: it flushes what it
//! still has (our close frame included) and shuts down the write half itself, so the FIN always
//! follows the close frame.
//!
//! The handle is a flag and a waker, not a second descriptor: the guard reports end of input
//! (and, once closed, fails writes) itself, so a connection costs the daemon one descriptor,
//! and a handle kept past its connection holds none.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::Waker;

use futures_util::task::AtomicWaker;

/// How far a connection has been ended from outside. Only ever moves down the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Ending {
    /// Nothing asked: the connection runs as its dispatcher decides.
    Open = 0,
    /// Reads end: the dispatcher sees end of input and finishes what it has to write.
    ReadStopped = 1,
    /// The connection is being closed: reads end and writes fail, so even a dispatcher stuck
    /// writing to a client that does not read lets go of it.
    Closed = 2,
}

impl Ending {
    fn from_u8(v: u8) -> Ending {
        match v {
            0 => Ending::Open,
            1 => Ending::ReadStopped,
            _ => Ending::Closed,
        }
    }
}

/// What the handle and the guard share.
#[derive(Debug, Default)]
struct Shared {
    ending: AtomicU8,
    /// The task serving the connection, as of its last read or write.
    task: AtomicWaker,
}

/// One connection's handle; clones share it. `Send`, so the registry (shared by the
/// workers) can close a connection served on another worker's thread.
#[derive(Clone, Debug, Default)]
pub struct ConnSocket(Arc<Shared>);

impl ConnSocket {
    /// A handle on a connection not ended yet.
    pub fn new() -> ConnSocket {
        ConnSocket::default()
    }

    /// Stops reading from the peer, so the HTTP layer sees EOF and ends the connection once it
    /// has written what it holds.
    pub fn stop_reading(&self) {
        self.end(Ending::ReadStopped);
    }

    /// Closes the connection: it stops reading and writing, whatever it was doing.
    pub fn close(&self) {
        self.end(Ending::Closed);
    }

    fn end(&self, ending: Ending) {
        self.0.ending.fetch_max(ending as u8, Ordering::AcqRel);
        self.0.task.wake();
    }

    /// For the guard: registers the serving task to be woken when the connection is ended, and
    /// answers how far it is ended now (registered first, so an end in between is not missed).
    pub fn watch(&self, task: &Waker) -> Ending {
        self.0.task.register(task);
        Ending::from_u8(self.0.ending.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn an_ending_only_moves_on_and_wakes_the_task() {
        let socket = ConnSocket::new();
        let woken = Arc::new(Count::default());
        let waker = Waker::from(woken.clone());
        assert_eq!(socket.watch(&waker), Ending::Open);
        socket.close();
        assert_eq!(woken.0.load(Ordering::SeqCst), 1);
        socket.clone().stop_reading();
        assert_eq!(socket.watch(&waker), Ending::Closed);
    }
}
