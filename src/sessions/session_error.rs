//! Why a session cannot take what was asked: it is unknown or ambiguous, has no process (or
//! still has one), a forget needs its confirmation, a start would pass the cap on running
//! sessions, a spawn is not admitted now (`admission`), or a field of the request does not fit. What a session asks of the layers below
//! it (the agent catalog, the refusal chain, its provider) fails with their errors, carried
//! whole.

use crate::agents::AgentError;
use crate::providers::imp::broker::BrokerError;
use crate::providers::imp::host_error::HostError;
use crate::providers::refusal::TargetError;
use crate::providers::ProviderError;
use atc_protocol::SessionId;

/// A refusal from the session manager or a session.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No session has this id or name.
    #[error("no session '{key}'; list sessions with GET /v1/sessions")]
    NoSuch {
        /// The id or name asked for.
        key: String,
    },
    /// A name more than one session has.
    #[error("more than one session is named '{name}'; use its id")]
    AmbiguousName {
        /// The name.
        name: String,
    },
    /// The session has no running process.
    #[error("session '{id}' has no running process; revive it first")]
    Dead {
        /// The session id.
        id: SessionId,
    },
    /// The session's actor stopped while a socket still talked to it.
    #[error("the session is gone")]
    Gone,
    /// A revive of a session whose process still runs.
    #[error("session '{id}' is still running; only an exited session can be revived")]
    StillRunning {
        /// The session id.
        id: SessionId,
    },
    /// Killing a dead session would forget it and destroy its host: that takes two steps.
    #[error(
        "session '{id}' is dead; forgetting it destroys its imp: DELETE /v1/sessions/{id} for a confirmation token, then DELETE /v1/sessions/{id}?confirm=TOKEN (`atc forget {id} --yes`)"
    )]
    ConfirmationRequired {
        /// The session id.
        id: SessionId,
    },
    /// A destroying forget's confirmation token that does not hold.
    #[error("{}; ask again with DELETE and no confirm to get a new token", .0.what())]
    BadConfirmation(ConfirmProblem),
    /// A session name that cannot be one (`session_name`).
    #[error("{}; choose another name", .0.what())]
    BadName(super::session_name::NameProblem),
    /// A spawn's cwd that is not absolute.
    #[error("cwd must be an absolute path")]
    CwdNotAbsolute,
    /// A local spawn's cwd that is not a directory here.
    #[error("cwd '{0}' is not an existing directory")]
    CwdNotDirectory(String),
    /// A spawn's limits that config or the target cannot give.
    #[error(transparent)]
    Limits(#[from] crate::config::session_limits::LimitsError),
    /// A fleet restore while one runs.
    #[error("a fleet restore is already running; wait for it to finish")]
    RestoreRunning,
    /// A start past the cap on sessions with a running process (`limits.maxSessions`).
    #[error("{live} sessions run, the daemon's cap (limits.maxSessions {cap}); kill or suspend one first, or raise the cap")]
    CapReached {
        /// The cap.
        cap: usize,
        /// Sessions with a running process when the start was refused.
        live: usize,
    },
    /// A workspace operation on a session that has no workspace.
    #[error("session '{id}' has no workspace; spawn one with `workspace`")]
    NoWorkspace {
        /// The session id.
        id: SessionId,
    },
    /// A look into a workspace whose copy is on a remote host, which has no history to read.
    #[error("session '{id}''s workspace is on its remote host, which keeps no git history of it")]
    RemoteWorkspace {
        /// The session id.
        id: SessionId,
    },
    /// A spawn the daemon or the machine cannot take now (`admission`).
    #[error(transparent)]
    Admission(#[from] super::admission::AdmissionError),
    /// A sub-session asleep in its parent's host: only the parent's forget (which destroys
    /// the host) or a revive of the parent can touch it (spec §3.7).
    #[error("session {id} is asleep in its parent's host; revive the parent first, or forget the parent to destroy the host with everything on it")]
    HostAsleep {
        /// The sub-session.
        id: SessionId,
    },
    /// A sub-session on its parent's host cannot put the host to sleep: the host's sleeps
    /// follow its owner (spec §4.5).
    #[error("session {id} runs on its parent {parent}'s host, whose sleeps follow the parent; suspend the parent instead")]
    HostShared {
        /// The sub-session.
        id: SessionId,
        /// Its parent, the host's owner.
        parent: SessionId,
    },
    /// A sub-session joining its parent's remote host that asks for a workspace of its own:
    /// a copy sent into a host lives in the host's directory, the owner's copy's place.
    #[error("a sub-session on its parent {parent}'s host works in the parent's workspace; spawn it without 'workspace', or on another target")]
    SharedHostWorkspace {
        /// The parent.
        parent: SessionId,
    },
    /// The harness ended before its start was confirmed, and said nothing more.
    #[error("the harness ended before it started; see the session's lastMsg")]
    EndedBeforeStart,
    /// The agent, or a spawn option, refused.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The target refusal chain refused.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The provider or its host.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The session's workspace could not be made or removed.
    #[error(transparent)]
    Workspace(#[from] crate::workspaces::WorkspaceError),
    /// A failure inside the daemon; whoever hit it logged the cause.
    #[error("internal error; the daemon log has details under this request id")]
    Internal,
}

impl From<HostError> for SessionError {
    fn from(e: HostError) -> Self {
        SessionError::Provider(ProviderError::Host(e))
    }
}

impl From<BrokerError> for SessionError {
    fn from(e: BrokerError) -> Self {
        SessionError::Provider(ProviderError::Broker(e))
    }
}

impl SessionError {
    /// Whether the failed operation may have left its effect standing (see
    /// [`ProviderError::effect_remains`]).
    pub fn effect_remains(&self) -> bool {
        matches!(self, SessionError::Provider(p) if p.effect_remains())
    }
}

/// Why a confirmation token does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfirmProblem {
    /// It was redeemed already.
    Used,
    /// It is past its time to live.
    Expired,
    /// This session never gave it out (or gave it out long ago).
    Unknown,
}

impl ConfirmProblem {
    /// The stable word (`data.reason`).
    pub fn as_str(self) -> &'static str {
        match self {
            ConfirmProblem::Used => "used",
            ConfirmProblem::Expired => "expired",
            ConfirmProblem::Unknown => "unknown",
        }
    }

    fn what(self) -> &'static str {
        match self {
            ConfirmProblem::Used => "this confirmation token was used already",
            ConfirmProblem::Expired => "this confirmation token expired",
            ConfirmProblem::Unknown => "no such confirmation token for this session",
        }
    }
}
