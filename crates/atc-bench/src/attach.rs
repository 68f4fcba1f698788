//! One attach WebSocket as the bench reads it: frames become [`Event`]s with live bytes already
//! placed at their stream offsets (repaint bytes skipped), pings are answered, and input is sent as
//! binary frames.
//!
//! The offset bookkeeping itself is [`StreamTracker`]'s; this module only moves frames between
//! `atc-client`'s [`AttachReader`] and it. Nothing here has a deadline of its own: callers wrap waits in
//! [`Deadline::within`](super::phase::Deadline::within), because what counts as too long depends
//! on the phase.

use anyhow::{bail, Context as _};
use atc_client::frame_reader::{AttachReader, Incoming, ReadError};
use awc::ws::Message;
use bytes::Bytes;

use super::api::{DaemonApi, SessionId, TermSize};
use super::payload::{Marker, MarkerScanner};
use super::phase::Deadline;
use super::stream::{ControlFrame, StreamTracker};

/// Something that arrived on the socket.
#[derive(Debug)]
pub enum Event {
    /// Live output bytes, the first at `offset`.
    Live {
        /// Stream offset of `bytes[0]`.
        offset: u64,
        /// The bytes (never empty).
        bytes: Bytes,
    },
    /// A text frame.
    Control(ControlFrame),
    /// The daemon closed the socket (after an `exit` frame, or on its own).
    Closed(String),
}

/// How long a polite close may take before the socket is simply dropped.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// An attached client.
pub struct AttachClient {
    reader: AttachReader,
    tracker: StreamTracker,
}

impl AttachClient {
    /// Opens the attach WebSocket and reads up to the `attached` frame, so the returned client
    /// knows where live bytes start.
    pub async fn connect(
        api: &DaemonApi,
        id: &SessionId,
        size: TermSize,
        deadline: Deadline,
    ) -> anyhow::Result<AttachClient> {
        let socket = deadline
            .within("opening the attach WebSocket", api.attach(id, size))
            .await??;
        let mut client = AttachClient {
            reader: AttachReader::new(socket),
            tracker: StreamTracker::new(),
        };
        loop {
            match deadline
                .within("waiting for the attached frame", client.next())
                .await??
            {
                Event::Control(ControlFrame::Attached { .. }) => return Ok(client),
                Event::Control(ControlFrame::Error { code, message }) => {
                    bail!("attach refused: {code}: {message}")
                }
                Event::Closed(why) => bail!("attach WebSocket closed before attached: {why}"),
                Event::Control(_) | Event::Live { .. } => {}
            }
        }
    }

    /// Reads the next event. Binary frames made only of repaint bytes are consumed silently.
    pub async fn next(&mut self) -> anyhow::Result<Event> {
        loop {
            let control = match self.reader.next().await {
                Ok(Incoming::Text(frame)) => ControlFrame::from(frame),
                // A frame type this bench does not know yet (a newer daemon's) is `Other`;
                // anything else is refused by the parse.
                Err(ReadError::NotAFrame { text, .. }) => ControlFrame::parse(text.as_bytes())?,
                Err(e) => return Err(e).context("reading the attach WebSocket"),
                Ok(Incoming::Binary(data)) => {
                    let placed = self.tracker.on_binary(data.len())?;
                    if placed.skip < data.len() {
                        return Ok(Event::Live {
                            offset: placed.offset,
                            bytes: data.slice(placed.skip..),
                        });
                    }
                    continue;
                }
                Ok(ending) => return Ok(Event::Closed(ending.ending().unwrap_or_default())),
            };
            self.tracker.on_control(&control);
            return Ok(Event::Control(control));
        }
    }

    /// Sends input bytes as one binary frame (written to the harness whole).
    pub async fn send(&mut self, data: Bytes) -> anyhow::Result<()> {
        self.reader
            .send(Message::Binary(data))
            .await
            .context("sending input on the attach WebSocket")
    }

    /// Reads until `marker` appears in the live bytes; fails if the session ends first.
    pub async fn wait_for(&mut self, marker: Marker) -> anyhow::Result<()> {
        let mut scanner = MarkerScanner::new(marker);
        loop {
            match self.next().await? {
                Event::Live { offset, bytes } => {
                    if scanner.feed(offset, &bytes).is_some() {
                        return Ok(());
                    }
                }
                Event::Control(ControlFrame::Exit { reason }) => {
                    bail!(
                        "session exited ({}) before it printed the marker",
                        reason.as_str()
                    )
                }
                Event::Closed(why) => bail!("attach WebSocket {why} before the marker"),
                Event::Control(_) => {}
            }
        }
    }

    /// Where this client is in the stream and what it lost.
    pub fn tracker(&self) -> &StreamTracker {
        &self.tracker
    }

    /// Detaches politely, waiting at most [`CLOSE_WAIT`] for the frame to go out.
    pub async fn close(self) {
        self.reader.close(CLOSE_WAIT).await;
    }
}
