//! One attach socket as the soak drives it: opened at a size, read as [`Event`]s with the
//! repaint prelude already skipped (so only live bytes reach the caller), pings answered, input
//! sent as binary frames and resizes as `resize` text frames. Offsets are not checked here; the
//! drops suite owns that promise, the soak only needs to see output keep coming and echoes come
//! back.

use std::time::Duration;

use atc_client::frame_reader::{AttachReader, Incoming, ReadError};
use atc_client::{routes, DaemonClient};
use atc_protocol::{AttachFrame, ClientFrame, SessionId};
use awc::ws::Message;
use bytes::Bytes;

/// How long a polite close may take before the socket is simply dropped.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// Why an attach socket could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// The upgrade or the connection failed.
    #[error("attach: {0}")]
    Client(#[from] atc_client::ClientError),
    /// The socket failed while writing.
    #[error("attach socket: {0}")]
    Socket(String),
    /// Reading failed: the socket broke, or sent what an attach socket does not carry (a
    /// text frame that is not an attach frame, a fragment).
    #[error("attach socket: {0}")]
    Read(#[from] ReadError),
    /// The socket ended before the `attached` frame.
    #[error("attach socket ended before the attached frame: {0}")]
    NotAttached(String),
}

/// Something that arrived.
#[derive(Debug)]
pub enum Event {
    /// Live output bytes (never prelude, never empty).
    Live(Bytes),
    /// A text frame other than `attached`.
    Frame(AttachFrame),
    /// The socket ended.
    Closed(String),
}

/// An attached client.
pub struct Attach {
    reader: AttachReader,
    /// Repaint bytes still to come before live ones.
    prelude_left: usize,
}

impl Attach {
    /// Opens the attach socket of `id` at `cols`×`rows` and reads up to its `attached` frame.
    pub async fn open(
        client: &DaemonClient,
        id: SessionId,
        cols: u16,
        rows: u16,
    ) -> Result<Attach, AttachError> {
        let socket = client.ws_connect(&routes::attach(id, cols, rows)).await?;
        let mut attach = Attach {
            reader: AttachReader::new(socket),
            prelude_left: 0,
        };
        match attach.next_raw().await? {
            Event::Frame(AttachFrame::Attached { prelude, .. }) => {
                attach.prelude_left = prelude;
                Ok(attach)
            }
            Event::Frame(other) => Err(AttachError::NotAttached(other.to_text())),
            Event::Closed(why) => Err(AttachError::NotAttached(why)),
            Event::Live(_) => Err(AttachError::NotAttached(
                "output came before the attached frame".into(),
            )),
        }
    }

    /// The next event; prelude bytes (after `attached` or `resynced`) are consumed silently.
    pub async fn next(&mut self) -> Result<Event, AttachError> {
        loop {
            match self.next_raw().await? {
                Event::Live(bytes) => {
                    let skip = self.prelude_left.min(bytes.len());
                    self.prelude_left -= skip;
                    if skip < bytes.len() {
                        return Ok(Event::Live(bytes.slice(skip..)));
                    }
                }
                Event::Frame(AttachFrame::Resynced { prelude, .. }) => {
                    self.prelude_left = prelude;
                }
                other => return Ok(other),
            }
        }
    }

    /// One frame off the socket, prelude not yet accounted for.
    async fn next_raw(&mut self) -> Result<Event, AttachError> {
        Ok(match self.reader.next().await? {
            Incoming::Text(frame) => Event::Frame(frame),
            Incoming::Binary(data) => Event::Live(data),
            ending => Event::Closed(ending.ending().unwrap_or_default()),
        })
    }

    /// Sends input bytes as one binary frame.
    pub async fn input(&mut self, data: Bytes) -> Result<(), AttachError> {
        self.reader
            .send(Message::Binary(data))
            .await
            .map_err(|e| AttachError::Socket(format!("sending input: {e}")))
    }

    /// Reports this client's size.
    pub async fn resize(&mut self, cols: u16, rows: u16) -> Result<(), AttachError> {
        let text = serde_json::to_string(&ClientFrame::Resize { cols, rows })
            .map_err(|e| AttachError::Socket(format!("encoding a resize: {e}")))?;
        self.reader
            .send(Message::Text(text.into()))
            .await
            .map_err(|e| AttachError::Socket(format!("sending a resize: {e}")))
    }

    /// Detaches politely, waiting at most [`CLOSE_WAIT`] for the close to go out.
    pub async fn close(self) {
        self.reader.close(CLOSE_WAIT).await;
    }
}
