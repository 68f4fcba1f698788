//! One attach WebSocket as the bench reads it: frames become [`Event`]s with live bytes already
//! placed at their stream offsets (repaint bytes skipped), pings are answered, and input is sent as
//! binary frames.
//!
//! The offset bookkeeping itself is [`StreamTracker`]'s; this module only moves frames between the
//! socket and it. Nothing here has a deadline of its own: callers wrap waits in
//! [`Deadline::within`](super::phase::Deadline::within), because what counts as too long depends
//! on the phase.

use anyhow::{bail, Context as _};
use awc::ws::{CloseCode, CloseReason, Frame, Message};
use bytes::Bytes;
use futures_util::{SinkExt as _, StreamExt as _};

use super::api::{DaemonApi, SessionId, Socket, TermSize};
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
    socket: Socket,
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
            socket,
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
            let Some(frame) = self.socket.next().await else {
                return Ok(Event::Closed("connection ended".into()));
            };
            match frame.context("reading the attach WebSocket")? {
                Frame::Text(text) => {
                    let control = ControlFrame::parse(&text)?;
                    self.tracker.on_control(&control);
                    return Ok(Event::Control(control));
                }
                Frame::Binary(data) => {
                    let placed = self.tracker.on_binary(data.len())?;
                    if placed.skip < data.len() {
                        return Ok(Event::Live {
                            offset: placed.offset,
                            bytes: data.slice(placed.skip..),
                        });
                    }
                }
                Frame::Ping(payload) => {
                    self.socket
                        .send(Message::Pong(payload))
                        .await
                        .context("answering a ping")?;
                }
                Frame::Pong(_) => {}
                Frame::Close(reason) => {
                    let why = reason.map_or_else(
                        || "closed without a reason".to_string(),
                        |r| {
                            format!(
                                "closed ({:?}) {}",
                                r.code,
                                r.description.unwrap_or_default()
                            )
                        },
                    );
                    return Ok(Event::Closed(why));
                }
                Frame::Continuation(_) => {
                    bail!("fragmented WebSocket message; the contract sends whole frames")
                }
            }
        }
    }

    /// Sends input bytes as one binary frame (written to the harness whole).
    pub async fn send(&mut self, data: Bytes) -> anyhow::Result<()> {
        self.socket
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
    pub async fn close(mut self) {
        let close = Message::Close(Some(CloseReason::from(CloseCode::Normal)));
        // Best effort: a socket that is already gone, or too backed up to take the frame, ends
        // when it is dropped here, and the daemon treats that as the same detach.
        let _ = tokio::time::timeout(CLOSE_WAIT, self.socket.send(close)).await;
    }
}
