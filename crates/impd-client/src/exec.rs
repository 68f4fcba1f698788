//! An open `/exec` socket (spec §9): [`ImpdClient::open_exec`] upgrades with the bearer header
//! and sends the opening message; the caller then writes through an [`ExecWriter`] and reads
//! [`ExecEvent`]s from [`ExecEvents`].
//!
//! A reader task on the current arbiter turns messages into events and hands them over through
//! a bounded queue: a consumer that stops reading stops the socket being read, which is how
//! impd learns to slow down or detach it as `slow` (spec §14) rather than this client buffering
//! without bound. Anything unparseable becomes one `Error(BAD_MESSAGE)` and the client closes
//! the socket.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;
use tokio::sync::mpsc;

use super::client::ImpdClient;
use super::error::ImpPortError;
use super::exec_messages::{
    decode_data, decode_server_text, encode_data, resize_message, signal_message,
    stdin_eof_message, ExecEvent, Opening, STDIN,
};
use super::ws_link::{self, Incoming, LinkReader, LinkWriter};

/// Events waiting for the consumer, at most (each is one impd message, ≤ a few hundred KiB).
const EVENT_QUEUE: usize = 64;

/// Largest stdin message sent; bigger input is split. impd closes a socket on an oversized
/// message and its limit is not known (spec §17.2); the daemon stays at 1 MiB.
pub const STDIN_CHUNK: usize = 1024 * 1024;

/// Close code a client uses when impd sent something it cannot parse.
const PROTOCOL_ERROR: u16 = 1002;

/// An open `/exec` socket: write through `writer`, read `events`.
pub struct ExecSocket {
    /// Sends input and control messages; clones share the socket.
    pub writer: ExecWriter,
    /// What impd sends, ending with one `Closed`.
    pub events: ExecEvents,
}

/// The writing half of an `/exec` socket. Methods only queue (in order) and never wait; they
/// fail with `CLOSED` once the socket is gone. Closing, or dropping every clone, ends the
/// socket: for a session socket that is a detach (the process runs on), for a plain exec impd
/// sends SIGHUP (spec §9.8).
#[derive(Clone)]
pub struct ExecWriter {
    link: LinkWriter,
}

impl ExecWriter {
    /// Bytes to the process's stdin or pty, in messages of at most [`STDIN_CHUNK`].
    pub fn input(&self, bytes: Bytes) -> Result<(), ImpPortError> {
        if bytes.is_empty() {
            return Ok(());
        }
        for chunk in bytes.chunks(STDIN_CHUNK) {
            self.link.send_binary(encode_data(STDIN, chunk))?;
        }
        Ok(())
    }

    /// Resizes the pty.
    pub fn resize(&self, cols: u16, rows: u16) -> Result<(), ImpPortError> {
        self.link.send_json(&resize_message(cols, rows))
    }

    /// Sends a signal by name (`"SIGHUP"`) to the process group.
    pub fn signal(&self, signal: &str) -> Result<(), ImpPortError> {
        self.link.send_json(&signal_message(signal))
    }

    /// Closes stdin (plain execs; ignored with a tty).
    pub fn stdin_eof(&self) -> Result<(), ImpPortError> {
        self.link.send_json(&stdin_eof_message())
    }

    /// Closes the socket with 1000 after what is already queued.
    pub fn close(&self) -> Result<(), ImpPortError> {
        self.link.close(1000)
    }

    /// Whether the socket is gone (writes would fail).
    pub fn is_closed(&self) -> bool {
        self.link.is_gone()
    }

    /// Input bytes queued and not yet handed to the socket.
    pub fn queued_bytes(&self) -> usize {
        self.link.queued_bytes()
    }

    /// Waits until fewer than `limit` input bytes are queued, so a bulk writer (a file
    /// transfer) never holds more than that in memory; fails with `CLOSED` once the socket is
    /// gone.
    pub async fn wait_queued_below(&self, limit: usize) -> Result<(), ImpPortError> {
        self.link.wait_queued_below(limit).await
    }
}

/// The events of an `/exec` socket, as a [`Stream`]. It ends after the one `Closed`.
/// Dropping it stops reading; the socket itself stays until the writer is dropped or closed.
pub struct ExecEvents {
    rx: mpsc::Receiver<ExecEvent>,
}

impl Stream for ExecEvents {
    type Item = ExecEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ExecEvent>> {
        self.rx.poll_recv(cx)
    }
}

impl ImpdClient {
    /// Opens `/exec` and sends `opening` as its first message; `started` (or a refusal)
    /// arrives as the first event. A refused upgrade is `UNAUTHORIZED` (401) or
    /// `UPGRADE_REFUSED`; no socket within the open timeout is `UNREACHABLE`.
    ///
    /// This does not check `require` against impd's features: a caller that sets `require`
    /// must first see `features.exec_require` (spec §11).
    pub async fn open_exec(&self, opening: Opening) -> Result<ExecSocket, ImpPortError> {
        self.open_exec_gated(opening, async { Ok::<(), std::convert::Infallible>(()) })
            .await
            .map_err(|e| match e {
                GatedOpenError::Port(e) => e,
                GatedOpenError::Gate(never) => match never {},
            })
    }

    /// [`open_exec`](Self::open_exec) with a last-moment check: `gate` runs once the socket
    /// is open and before the opening message is written (the daemon's launch ticket, spec
    /// §6.4). A refusal closes the socket with 1000 "closed before sending", and impd never
    /// sees the opening.
    pub async fn open_exec_gated<E>(
        &self,
        opening: Opening,
        gate: impl std::future::Future<Output = Result<(), E>>,
    ) -> Result<ExecSocket, GatedOpenError<E>> {
        let opening = serde_json::to_value(&opening)
            .map_err(|e| ImpPortError::bad_message(format!("opening message: {e}")))?;
        let framed = self.open_socket("/exec").await?;
        let (link, reader) = ws_link::split(framed);
        if let Err(refused) = gate.await {
            // Gone already or not, the opening stays unsent; the close is a courtesy.
            let _ = link.close_with(NORMAL_CLOSE, Some(CLOSED_BEFORE_SENDING));
            drop(reader);
            return Err(GatedOpenError::Gate(refused));
        }
        link.send_json(&opening)?;
        let (tx, rx) = mpsc::channel(EVENT_QUEUE);
        actix_rt::spawn(pump(reader, tx));
        Ok(ExecSocket {
            writer: ExecWriter { link },
            events: ExecEvents { rx },
        })
    }
}

/// The close code of a socket the gate stopped.
const NORMAL_CLOSE: u16 = 1000;
/// Its close reason: impd learns nothing was meant for it.
pub const CLOSED_BEFORE_SENDING: &str = "closed before sending";

/// Why a gated open did not go out.
#[derive(Debug)]
pub enum GatedOpenError<E> {
    /// The gate refused; the socket was closed with nothing sent.
    Gate(E),
    /// The socket could not be opened (or written).
    Port(ImpPortError),
}

impl<E> From<ImpPortError> for GatedOpenError<E> {
    fn from(e: ImpPortError) -> Self {
        GatedOpenError::Port(e)
    }
}

/// Reads the socket until it ends, turning messages into events.
async fn pump(mut reader: LinkReader, tx: mpsc::Sender<ExecEvent>) {
    let mut started = false;
    let mut terminal = false;
    while let Some(incoming) = reader.next().await {
        let event = match incoming {
            Incoming::Text(text) => match decode_server_text(&text) {
                Ok(Some(ExecEvent::Started(s))) if !started => {
                    started = true;
                    Some(ExecEvent::Started(s))
                }
                // A repeated `started` is ignored (spec §9.5).
                Ok(Some(ExecEvent::Started(_))) | Ok(None) => None,
                Ok(Some(event)) if !terminal => {
                    terminal = true;
                    Some(event)
                }
                // The first terminal event wins (spec §9.9).
                Ok(Some(_)) => None,
                Err(e) => bad_message(&reader, e, &mut terminal),
            },
            Incoming::Binary(message) => match decode_data(message) {
                Ok((channel, bytes)) => Some(ExecEvent::Data { channel, bytes }),
                Err(e) => bad_message(&reader, e, &mut terminal),
            },
            Incoming::Closed { code, reason } => Some(ExecEvent::Closed { code, reason }),
        };
        if let Some(event) = event {
            if tx.send(event).await.is_err() {
                // Nobody reads the events any more; the writer side decides the socket's end.
                return;
            }
        }
    }
}

/// Reports an unparseable message once (as the terminal event if none came yet) and closes.
fn bad_message(reader: &LinkReader, e: ImpPortError, terminal: &mut bool) -> Option<ExecEvent> {
    reader.close(PROTOCOL_ERROR);
    if *terminal {
        return None;
    }
    *terminal = true;
    Some(ExecEvent::Error(e))
}
