//! A connection's byte stream under the head guard: the TCP stream itself, or TLS over it
//! (`--tls-cert`). One type for both, so one HTTP service serves either.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_rt::net::TcpStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The stream the HTTP dispatcher reads, through the head guard.
pub enum Transport {
    /// Plain HTTP.
    Plain(TcpStream),
    /// HTTPS; boxed, as the TLS state is large beside a bare socket.
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

/// Completes the TLS handshake on `io` within `within` (the head deadline: a client that
/// opens a connection and says nothing holds it no longer over TLS than without), or hands
/// the plain stream on when the daemon serves no TLS.
pub async fn accept(
    io: TcpStream,
    tls: Option<&Arc<rustls::ServerConfig>>,
    within: Duration,
) -> io::Result<Transport> {
    let Some(config) = tls else {
        return Ok(Transport::Plain(io));
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(config.clone());
    match tokio::time::timeout(within, acceptor.accept(io)).await {
        Ok(stream) => Ok(Transport::Tls(Box::new(stream?))),
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "TLS handshake not complete in time",
        )),
    }
}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(io) => Pin::new(io).poll_read(cx, buf),
            Transport::Tls(io) => Pin::new(io.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(io) => Pin::new(io).poll_write(cx, buf),
            Transport::Tls(io) => Pin::new(io.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(io) => Pin::new(io).poll_write_vectored(cx, bufs),
            Transport::Tls(io) => Pin::new(io.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Transport::Plain(io) => io.is_write_vectored(),
            Transport::Tls(io) => io.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(io) => Pin::new(io).poll_flush(cx),
            Transport::Tls(io) => Pin::new(io.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(io) => Pin::new(io).poll_shutdown(cx),
            Transport::Tls(io) => Pin::new(io.as_mut()).poll_shutdown(cx),
        }
    }
}
