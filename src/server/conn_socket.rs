//! A handle on each HTTP connection's TCP socket, kept in the connection's data, so a
//! WebSocket route can end its connection as soon as the close handshake is done.
//!
//! Why it is needed: actix-web hands a WebSocket the rest of the connection as a request body
//! that only ends when the client closes TCP. When our response body (the socket's outbound
//! frames) ends first, actix-http's h1 dispatcher "lingers": it reads and discards input until
//! the client closes or `client_disconnect_timeout` runs out (1 s, measured on a clock that
//! ticks every 500 ms, hence 0.5 to 1 s). A client that waits for the server to close TCP, as
//! RFC 6455 §7.1.1 asks, waited that long on every clean close. Shutting down the read half of
//! the socket ends the lingering at once: the dispatcher reads EOF, flushes what it still has
//! (our close frame included) and shuts down the write half itself, so the FIN always follows
//! the close frame.
//!
//! The handle is a duplicate of the connection's descriptor (close-on-exec), so it costs one
//! descriptor per open HTTP connection; it is dropped with the connection's data, when the
//! dispatcher drops the connection.

use std::any::Any;
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::rc::Rc;

use actix_web::dev::Extensions;

/// The TCP socket of one connection, shared by the connection's data and a socket's writer.
#[derive(Clone, Debug)]
pub struct ConnSocket(Rc<TcpStream>);

impl ConnSocket {
    /// Stops reading from the peer, so the HTTP layer sees EOF and ends the connection once it
    /// has written what it holds.
    pub fn stop_reading(&self) {
        if let Err(e) = self.0.shutdown(Shutdown::Read) {
            // The connection is already gone (the peer reset it): there is nothing left to end.
            tracing::debug!(error = %e, "socket already closed");
        }
    }
}

/// The connect hook `serve` installs: keeps a [`ConnSocket`] in each plain TCP connection's data.
pub fn on_connect(conn: &dyn Any, data: &mut Extensions) {
    let Some(stream) = conn.downcast_ref::<actix_web::rt::net::TcpStream>() else {
        return;
    };
    match stream.as_fd().try_clone_to_owned() {
        Ok(fd) => {
            data.insert(ConnSocket(Rc::new(TcpStream::from(fd))));
        }
        // Out of descriptors: this connection's sockets will close the slow way (lingering).
        Err(e) => tracing::warn!(error = %e, "cannot keep a handle on a connection"),
    }
}
