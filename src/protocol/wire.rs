//! JSON shapes clients see: the session descriptor, the attach socket's text frames and the
//! events socket's frames. States are enums here and become strings only on the wire.

use serde::Serialize;
use uuid::Uuid;

use super::params::TermSize;

/// The listed state of a session (spec §3.3): the attention state while a harness runs,
/// else `exited`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// The agent is working (or nothing has said otherwise).
    Running,
    /// The agent waits for the user.
    NeedsYou,
    /// The agent finished its turn.
    Done,
    /// No harness: the process ended, was killed, or died with an old daemon.
    Exited,
}

/// Why a session's process is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitReason {
    /// The process ended by itself.
    Exited,
    /// A client killed it.
    Killed,
    /// The daemon stopped (or crashed) while it ran; revive brings it back.
    DaemonStopped,
    /// The process could not be started.
    SpawnFailed,
    /// Its host went to sleep with the process inside; a revive wakes it and re-attaches.
    Suspended,
    /// The harness ended without a confirmed exit (a remote process replaced, a host
    /// rebooted, a connection lost for good); `lastMsg` says which.
    Ended,
}

impl ExitReason {
    /// The wire (and store) spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ExitReason::Exited => "exited",
            ExitReason::Killed => "killed",
            ExitReason::DaemonStopped => "daemon_stopped",
            ExitReason::SpawnFailed => "spawn_failed",
            ExitReason::Suspended => "suspended",
            ExitReason::Ended => "ended",
        }
    }

    /// Parses the store spelling; unknown text (a newer daemon's) reads as a plain exit.
    pub fn parse(s: &str) -> ExitReason {
        match s {
            "killed" => ExitReason::Killed,
            "daemon_stopped" => ExitReason::DaemonStopped,
            "spawn_failed" => ExitReason::SpawnFailed,
            "suspended" => ExitReason::Suspended,
            "ended" => ExitReason::Ended,
            _ => ExitReason::Exited,
        }
    }
}

/// A harness's connection state (spec §3.3 `attachment`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Attachment {
    /// A local PTY: nothing to connect.
    Local,
    /// A remote harness, connected.
    Attached,
    /// A remote harness whose connection dropped (or has not come up yet).
    Reattaching,
    /// No harness: after an exit, a sleep or a restart.
    Detached,
}

/// The layers behind the listed state (spec §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Lifecycle {
    /// Operator intent: `run`, `sleep` or `stop`.
    pub desired: &'static str,
    /// The host: `none` (this machine), `awake`, `asleep` or `unknown`.
    pub vm: &'static str,
    /// `running`, `suspended` or `exited`.
    pub harness: &'static str,
    /// The connection.
    pub attachment: Attachment,
}

/// How a name was given: agent rename beats user rename beats the automatic one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NamedBy {
    /// Derived from the cwd.
    Auto,
    /// Set by a client.
    User,
    /// Renamed inside the agent (a Claude `/rename`, a manual Grok title).
    Agent,
}

/// The wire shape of a session (spec §3.2, the fields that apply to local sessions).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Minted at spawn, stable forever.
    pub id: Uuid,
    /// Display name.
    pub name: String,
    /// Strength of the name.
    pub named_by: NamedBy,
    /// Agent id.
    pub agent: String,
    /// Working directory.
    pub cwd: String,
    /// Listed state.
    pub state: SessionState,
    /// Attention flag.
    pub unread: bool,
    /// Short status line.
    pub last_msg: String,
    /// A harness is present.
    pub alive: bool,
    /// Exit status of the last process, when it exited normally.
    pub exit_code: Option<i32>,
    /// Signal that ended the last process, if one did.
    pub exit_signal: Option<i32>,
    /// Why the last process is gone.
    pub exit_reason: Option<ExitReason>,
    /// Kept at the top of lists by clients.
    pub pinned: bool,
    /// Current terminal columns.
    pub cols: u16,
    /// Current terminal rows.
    pub rows: u16,
    /// Epoch milliseconds.
    pub created_at: i64,
    /// Epoch milliseconds of the last attach.
    pub last_attached_at: Option<i64>,
    /// Output discipline; always `pty` for now.
    pub kind: &'static str,
    /// Output stream id (changes only when a daemon restart resets the counter).
    pub stream: String,
    /// Where it runs.
    pub locator: Locator,
    /// The agent's own session id, once a hook reported it.
    #[serde(rename = "agentSessionID", skip_serializing_if = "Option::is_none")]
    pub agent_session_id: Option<String>,
    /// The layers behind `state`.
    pub lifecycle: Lifecycle,
    /// The identity of its target when it was spawned; the refusal chain compares it with the
    /// target's current one. Not on the wire.
    #[serde(skip)]
    pub target_identity: String,
}

/// Where a session runs (spec §3.2).
#[derive(Debug, Clone, Serialize)]
pub struct Locator {
    /// The daemon that owns it.
    #[serde(rename = "daemonID")]
    pub daemon_id: Uuid,
    /// Its target's id.
    #[serde(rename = "targetID")]
    pub target_id: String,
}

impl Descriptor {
    /// The current size as one value.
    pub fn size(&self) -> TermSize {
        TermSize {
            cols: self.cols,
            rows: self.rows,
        }
    }
}

/// Text frames the attach socket sends (api.md, "The attach WebSocket").
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum AttachFrame {
    /// First frame: where the byte stream starts and how the screen is replayed.
    Attached {
        /// Session id.
        session: Uuid,
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
        /// `screen` or `resume`.
        replay: &'static str,
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
        code: &'static str,
        /// Human text.
        message: String,
    },
}

/// Frames of the `/v1/events` socket.
#[derive(Debug, Clone, Serialize)]
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
        s: Uuid,
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
        s: Uuid,
    },
    /// A permission request was opened.
    #[serde(rename = "permission.requested")]
    PermissionRequested {
        /// Request id.
        request: String,
        /// Session id.
        s: Uuid,
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
        s: Uuid,
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
