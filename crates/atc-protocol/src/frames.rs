//! The frames of the two sockets (api.md): the attach socket both ways, and the events
//! socket. Binary frames are raw terminal bytes and have no type here.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::ErrorCode;
use crate::session::{Descriptor, ExitReason, NamedBy};
use crate::session_id::SessionId;

/// How an `attached` frame's replay is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Replay {
    /// A repaint of `prelude` bytes from the screen model, then live bytes from `offset`.
    Screen,
    /// The ring's bytes from the client's `from` offset exactly; no prelude.
    Resume,
}

/// What an attached client may do besides receiving the session's output: the attach
/// socket's `?mode=` (absent for [`AttachMode::Interactive`], `watch` for
/// [`AttachMode::Watch`]; any other value is `bad_args`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AttachMode {
    /// Types into the session, and its size counts toward the session's.
    #[default]
    Interactive,
    /// Only watches: its input is refused with an `unsupported` error frame and never
    /// written, its size never counts, and attaching does not answer the session's attention.
    Watch,
}

impl AttachMode {
    /// The `mode` query value that asks for this mode (`None`: leave the parameter out).
    pub fn query_value(self) -> Option<&'static str> {
        match self {
            AttachMode::Interactive => None,
            AttachMode::Watch => Some("watch"),
        }
    }

    /// The mode a `mode` query value asks for; `None` for a value that names no mode.
    pub fn from_query(value: Option<&str>) -> Option<AttachMode> {
        match value {
            None => Some(AttachMode::Interactive),
            Some("watch") => Some(AttachMode::Watch),
            Some(_) => None,
        }
    }
}

/// Text frames a client sends on the attach socket (binary frames are input bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ClientFrame {
    /// This client's terminal size; the session's is the minimum over its clients.
    Resize {
        /// Columns, 1–4096.
        cols: u16,
        /// Rows, 1–4096.
        rows: u16,
    },
}

/// Text frames the attach socket sends (api.md, "The attach WebSocket").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum AttachFrame {
    /// First frame: where the byte stream starts and how the screen is replayed.
    Attached {
        /// Session id.
        #[schema(value_type = uuid::Uuid)]
        session: SessionId,
        /// Stream id.
        stream: String,
        /// Effective columns.
        cols: u16,
        /// Effective rows.
        rows: u16,
        /// Offset of the first live byte after the prelude.
        offset: u64,
        /// Length of the repaint that follows (0 on resume).
        prelude: usize,
        /// How the screen is replayed.
        replay: Replay,
    },
    /// This client's queue overflowed; `dropped` bytes were not sent.
    Desync {
        /// Bytes dropped.
        dropped: u64,
    },
    /// After a desync: a repaint of `prelude` bytes follows, then live bytes from `offset`.
    Resynced {
        /// Offset of the first live byte after the prelude.
        offset: u64,
        /// Length of the repaint.
        prelude: usize,
    },
    /// The session's effective size changed.
    Resized {
        /// Columns.
        cols: u16,
        /// Rows.
        rows: u16,
    },
    /// The session's descriptor changed.
    State {
        /// The new descriptor.
        session: Box<Descriptor>,
    },
    /// A remote harness's link to its host dropped or came back. Sent only for remote
    /// sessions, and only on a change; the descriptor in the `state` frame sent beside it
    /// carries the same value for clients that read only those.
    Attachment {
        /// The link's new state.
        state: LinkState,
    },
    /// The process ended; a normal close follows.
    Exit {
        /// Exit status, if it exited.
        code: Option<i32>,
        /// Signal, if one ended it.
        signal: Option<i32>,
        /// Why it ended.
        reason: ExitReason,
        /// Human detail.
        detail: String,
    },
    /// A refusal on this socket (e.g. input to a dead session).
    Error {
        /// Stable code.
        code: ErrorCode,
        /// Human text.
        message: String,
    },
}

/// The state of a remote harness's link, as the `attachment` frame reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LinkState {
    /// Connected: output flows and input is delivered.
    Attached,
    /// The connection dropped (or has not come up yet); the harness is being reached again.
    Reattaching,
}

/// Frames of the `/v1/events` socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type")]
pub enum FleetEvent {
    /// A session is listed (also the snapshot on connect).
    #[serde(rename = "session.added")]
    Added {
        /// Its descriptor.
        session: Box<Descriptor>,
    },
    /// A session's state, flags or liveness changed.
    #[serde(rename = "session.state")]
    State {
        /// Its descriptor.
        session: Box<Descriptor>,
    },
    /// A session was renamed.
    #[serde(rename = "session.renamed")]
    Renamed {
        /// Session id.
        #[schema(value_type = uuid::Uuid)]
        s: SessionId,
        /// New name.
        name: String,
        /// Who named it.
        #[serde(rename = "namedBy")]
        named_by: NamedBy,
    },
    /// A session was forgotten.
    #[serde(rename = "session.removed")]
    Removed {
        /// Session id.
        #[schema(value_type = uuid::Uuid)]
        s: SessionId,
    },
    /// A permission request was opened.
    #[serde(rename = "permission.requested")]
    PermissionRequested {
        /// Request id.
        request: String,
        /// Session id.
        #[schema(value_type = uuid::Uuid)]
        s: SessionId,
        /// What the agent asked.
        message: String,
        /// Whether it can be answered through the API.
        respondable: bool,
    },
    /// A permission request was resolved (exactly once per request).
    #[serde(rename = "permission.resolved")]
    PermissionResolved {
        /// Request id.
        request: String,
        /// `deny` (timeout), `dismissed`, or a client's decision.
        decision: String,
    },
    /// A session's effective size changed.
    #[serde(rename = "session.resized")]
    Resized {
        /// Session id.
        #[schema(value_type = uuid::Uuid)]
        s: SessionId,
        /// Columns.
        cols: u16,
        /// Rows.
        rows: u16,
    },
}

impl AttachFrame {
    /// The frame as JSON text. Serialization of these plain shapes cannot fail.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }
}

impl FleetEvent {
    /// The frame as JSON text.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }
}

impl ClientFrame {
    /// Parses a client's text frame.
    pub fn from_text(text: &[u8]) -> Result<ClientFrame, serde_json::Error> {
        serde_json::from_slice(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attached_reads_back_what_it_wrote() {
        let frame = AttachFrame::Attached {
            session: SessionId::NIL,
            stream: "s1".into(),
            cols: 80,
            rows: 24,
            offset: 7,
            prelude: 0,
            replay: Replay::Resume,
        };
        let text = frame.to_text();
        assert!(text.starts_with(r#"{"type":"attached","#), "{text}");
        assert!(text.contains(r#""replay":"resume""#), "{text}");
        assert_eq!(serde_json::from_str::<AttachFrame>(&text).unwrap(), frame);
    }

    #[test]
    fn error_frames_carry_the_wire_code() {
        let text = AttachFrame::Error {
            code: ErrorCode::UnsupportedOperation,
            message: "no".into(),
        }
        .to_text();
        assert_eq!(
            text,
            r#"{"type":"error","code":"unsupported_operation","message":"no"}"#
        );
    }

    #[test]
    fn client_resize_parses_and_unknown_types_do_not() {
        assert_eq!(
            ClientFrame::from_text(br#"{"type":"resize","cols":100,"rows":30,"extra":1}"#).unwrap(),
            ClientFrame::Resize {
                cols: 100,
                rows: 30
            }
        );
        assert!(ClientFrame::from_text(br#"{"type":"paste"}"#).is_err());
    }

    #[test]
    fn fleet_events_use_dotted_type_names() {
        let text = FleetEvent::Removed { s: SessionId::NIL }.to_text();
        assert!(text.contains(r#""type":"session.removed""#), "{text}");
        assert_eq!(
            serde_json::from_str::<FleetEvent>(&text).unwrap(),
            FleetEvent::Removed { s: SessionId::NIL }
        );
    }
}
