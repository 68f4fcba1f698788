//! The session descriptor (spec §3.2) and the closed sets inside it. States are enums here
//! and become strings only through serde.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::session_id::SessionId;
use crate::size::TermSize;

/// The listed state of a session (spec §3.3): the attention state while a harness runs,
/// else `exited`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// The agent is working (or nothing has said otherwise).
    #[default]
    Running,
    /// The agent waits for the user.
    NeedsYou,
    /// The agent finished its turn.
    Done,
    /// No harness: the process ended, was killed, or died with an old daemon.
    Exited,
}

impl SessionState {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Running => "running",
            SessionState::NeedsYou => "needs_you",
            SessionState::Done => "done",
            SessionState::Exited => "exited",
        }
    }
}

impl std::fmt::Display for SessionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a session's `state` follows (issue 38): the agent's own reports, or what atc measures
/// of the session from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StateSource {
    /// The agent's hook reports (Claude's hooks, Codex's hooks and `notify`, Grok's hooks).
    Hooks,
    /// The session's output and its processes' CPU: quiet and idle past a threshold is
    /// `needs_you`, output or CPU again is `running`.
    Activity,
}

/// Why a session's process is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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
    /// The kernel killed it at its session's memory limit (`limits.memoryMiB`).
    MemoryLimit,
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
            ExitReason::MemoryLimit => "memory_limit",
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
            "memory_limit" => ExitReason::MemoryLimit,
            _ => ExitReason::Exited,
        }
    }
}

/// A harness's connection state (spec §3.3 `attachment`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Attachment {
    /// A local PTY: nothing to connect.
    #[default]
    Local,
    /// A remote harness, connected.
    Attached,
    /// A remote harness whose connection dropped (or has not come up yet).
    Reattaching,
    /// No harness: after an exit, a sleep or a restart.
    Detached,
}

/// The layers behind the listed state (spec §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, ToSchema)]
pub struct Lifecycle {
    /// Operator intent.
    pub desired: Desired,
    /// The host.
    pub vm: VmState,
    /// The harness.
    pub harness: HarnessLayer,
    /// The connection.
    pub attachment: Attachment,
}

/// Operator intent for a session (spec §3.3 `desired`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Desired {
    /// It should run.
    #[default]
    Run,
    /// Its host should sleep with it inside.
    Sleep,
    /// It was stopped on purpose.
    Stop,
}

/// The state of a session's host (spec §3.3 `vm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum VmState {
    /// No host of its own: it runs on the daemon's machine.
    #[default]
    None,
    /// The host is awake and connected.
    Awake,
    /// The host sleeps with the process inside.
    Asleep,
    /// Not known right now (connecting, or after an exit).
    Unknown,
}

/// The harness layer (spec §3.3 `harness`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HarnessLayer {
    /// A harness runs the process.
    #[default]
    Running,
    /// The process sleeps with its host.
    Suspended,
    /// No process.
    Exited,
}

/// How a session's output is carried; only terminals exist so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputKind {
    /// A pseudo-terminal's byte stream.
    #[default]
    Pty,
}

/// How a name was given: agent rename beats user rename beats the automatic one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NamedBy {
    /// Derived from the cwd.
    #[default]
    Auto,
    /// Set by a client.
    User,
    /// Renamed inside the agent (a Claude `/rename`, a manual Grok title).
    Agent,
}

/// The wire shape of a session (spec §3.2, the fields that apply to local sessions).
/// `Default` is a fresh local session with a nil id, for building one field by field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Minted at spawn, stable forever.
    #[schema(value_type = uuid::Uuid)]
    pub id: SessionId,
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
    /// Where the current `state` came from: `hooks` (the agent's reports) or `activity`
    /// (output and CPU). Absent for a session whose attention is `none` (a `shell` by
    /// default), whose state only follows its process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_source: Option<StateSource>,
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
    /// Output discipline.
    pub kind: OutputKind,
    /// Output stream id (changes only when a daemon restart resets the counter).
    pub stream: String,
    /// Where it runs.
    pub locator: Locator,
    /// The agent's own session id, once a hook reported it.
    #[serde(rename = "agentSessionID", skip_serializing_if = "Option::is_none")]
    pub agent_session_id: Option<String>,
    /// The layers behind `state`.
    pub lifecycle: Lifecycle,
    /// The broker binding of its host, for a broker-backed agent's session (absent for
    /// others, and until the daemon has learned it after a restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<crate::responses::SessionAuth>,
    /// The copy of a repository it works in, if its spawn asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<crate::workspace::WorkspaceInfo>,
    /// The limits its processes run under (a local session's, when any is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<crate::limits::SessionLimits>,
    /// What its processes use now, read from its cgroup when asked (a local session with a
    /// running process on a daemon that has cgroups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::limits::Usage>,
    /// The session it is a sub-session of (one level deep: a parent has no parent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<uuid::Uuid>)]
    pub parent: Option<SessionId>,
    /// The host it runs on, named by the session that owns the host: its own id, or its
    /// parent's when it joined the parent's host (spec §4.5). Sessions with one host key
    /// sleep, wake and are destroyed together.
    #[schema(value_type = uuid::Uuid)]
    pub host_key: SessionId,
    /// The identity of its target when it was spawned; the daemon's refusal chain compares
    /// it with the target's current one. Never on the wire (clients read it as empty).
    #[serde(skip)]
    pub target_identity: String,
}

/// Where a session runs (spec §3.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, ToSchema)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names_are_the_wire_spelling() {
        for state in [
            SessionState::Running,
            SessionState::NeedsYou,
            SessionState::Done,
            SessionState::Exited,
        ] {
            assert_eq!(serde_json::to_value(state).unwrap(), state.as_str());
        }
    }

    #[test]
    fn a_descriptor_reads_back_what_it_wrote() {
        let d = Descriptor {
            name: "fix-bug".into(),
            exit_reason: Some(ExitReason::Suspended),
            ..Descriptor::default()
        };
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["lifecycle"]["vm"], "none");
        assert_eq!(json["kind"], "pty");
        assert_eq!(json["locator"]["targetID"], "");
        assert_eq!(serde_json::from_value::<Descriptor>(json).unwrap(), d);
    }
}
