//! Messages of the session actors: what the server and the manager ask of a `Session`, and
//! what a `Session` tells the manager. One type per intent; the reply type says what the
//! caller learns.

use actix::prelude::*;
use bytes::Bytes;

use super::client_queue::ClientQueue;
use super::screen::ScreenText;
use super::session_error::SessionError;
use atc_protocol::TermSize;
use atc_protocol::{Descriptor, FleetEvent, SessionId};

/// A host's broker binding as a client sees it, or why not.
pub type AuthAnswer = Result<atc_protocol::responses::AuthStatus, SessionError>;

/// Identifies one attached client connection within the daemon (an attach or events socket).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientId(pub u64);

/// Where an attaching client wants its byte stream to start.
#[derive(Debug, Clone)]
pub struct ResumeFrom {
    /// The stream id the client saw.
    pub stream: String,
    /// The offset of the first byte it has not seen.
    pub from: u64,
}

/// Whether an attached client types or only watches (the socket's `?mode=`).
pub use atc_protocol::AttachMode;

/// Attach a client: register it, apply the new size, then send `attached` and the replay into
/// its queue. Sent by the attach socket actor. Fails with `session_dead` without a harness.
/// An interactive client of a local process gets an [`InputPort`](super::input_port::InputPort)
/// to type through.
#[derive(Message)]
#[rtype(result = "Result<Option<super::input_port::InputPort>, SessionError>")]
pub struct Attach {
    /// The connection.
    pub client: ClientId,
    /// Its outbound queue.
    pub queue: ClientQueue,
    /// The size it reported, if any (never counted for a watcher).
    pub size: Option<TermSize>,
    /// Whether it types or only watches.
    pub mode: AttachMode,
    /// Exact resume, if it asked for one.
    pub resume: Option<ResumeFrom>,
    /// What the principal it attaches as reaches (`None`: the owner). Kept with the client,
    /// which is closed when the session's tree leaves that reach.
    pub reach: Option<std::sync::Arc<super::reach::Reach>>,
}

/// The session's tree changed (a sub-session came or went): `tree` is every session in it
/// now. Clients attached as a principal that no longer reaches all of it are closed.
#[derive(Message)]
#[rtype(result = "()")]
pub struct TreeChanged {
    /// The sessions of the tree.
    pub tree: Vec<Descriptor>,
}

/// The client's socket closed. Never kills or answers anything.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Detach {
    /// The connection.
    pub client: ClientId,
}

/// Write bytes to the session's process, whole. From the attach socket or `POST .../input`.
#[derive(Message)]
#[rtype(result = "Result<(), SessionError>")]
pub struct Input(pub Bytes);

/// A client typed Enter into the session (a CR in its input, or a submitted line). Under the
/// activity rule that starts a turn: a `done` or `needs_you` session is `running` again
/// (`sessions::session::activity`). Sent only for sessions the rule watches.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct LineSubmitted;

/// Type text and press Enter the way the session's agent expects (`POST .../submit`).
#[derive(Message)]
#[rtype(result = "Result<(), SessionError>")]
pub struct Submit(pub String);

/// An attached client reported its size; the session size is recomputed after the debounce.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ClientResized {
    /// The connection.
    pub client: ClientId,
    /// Its size.
    pub size: TermSize,
}

/// Resize for a client that is not attached by WebSocket (`POST .../resize`); applied now.
#[derive(Message)]
#[rtype(result = "Result<TermSize, SessionError>")]
pub struct ResizeSession(pub TermSize);

/// The client's backlog drained after a desync: send `desync`, `resynced` and a repaint.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ClientDrained {
    /// The connection.
    pub client: ClientId,
}

/// Clear the unread flag.
#[derive(Message)]
#[rtype(result = "Descriptor")]
pub struct Ack;

/// Rename and/or pin.
#[derive(Message)]
#[rtype(result = "Result<Descriptor, SessionError>")]
pub struct Update {
    /// New name.
    pub name: Option<String>,
    /// New pinned flag.
    pub pinned: Option<bool>,
}

/// The visible screen as text.
#[derive(Message)]
#[rtype(result = "Result<ScreenText, SessionError>")]
pub struct GetScreen;

/// The session's current descriptor.
#[derive(Message)]
#[rtype(result = "Descriptor")]
pub struct GetDescriptor;

/// A client's kill (spec §3.7): end the process (SIGHUP, SIGKILL after the grace) and answer
/// once the exit is recorded; a session already dead is forgotten instead, unless forgetting
/// destroys its host (`confirmation_required`: that takes the two-step forget).
#[derive(Message)]
#[rtype(result = "Result<Killed, SessionError>")]
pub struct Kill;

/// What a [`Kill`] did.
#[derive(Debug)]
pub enum Killed {
    /// The process ended; the session as it is now.
    Ended(Descriptor),
    /// The session was dead already and is forgotten; how it looked before.
    Forgotten(Descriptor),
}

/// First step of forgetting a session whose target destroys hosts (spec §3.7): mint a token,
/// valid for [`FORGET_CONFIRM_TTL`], that the second step must present. Answers the token
/// and its expiry (epoch ms).
#[derive(Message)]
#[rtype(result = "Result<(String, i64), SessionError>")]
pub struct MintForgetToken;

/// Second step: with a valid token, destroy the session's host and forget the session. The
/// token is consumed even if the destroy then fails.
#[derive(Message)]
#[rtype(result = "Result<(), SessionError>")]
pub struct ForgetDestroying {
    /// The token from the first step.
    pub token: String,
}

/// How long a forget confirmation token is valid.
pub const FORGET_CONFIRM_TTL: std::time::Duration = std::time::Duration::from_secs(60);

/// Put the session's host to sleep with the process inside (imp targets). `force` skips the
/// idleness check (an operator's decision). Answers once the session is recorded asleep.
#[derive(Message)]
#[rtype(result = "Result<Descriptor, SessionError>")]
pub struct Suspend {
    /// Sleep even if the session looks busy.
    pub force: bool,
}

/// The session's host's broker binding (`GET /v1/sessions/{id}/auth`).
#[derive(Message)]
#[rtype(result = "AuthAnswer")]
pub struct AuthStatusOf;

/// Read the session's host's broker binding again and answer the descriptor once it is
/// learned (the manager, before it answers a spawn, so the answer carries `auth`). A
/// session of an agent without `auth` answers at once.
#[derive(Message)]
#[rtype(result = "Descriptor")]
pub struct DescribeWithAuth;

/// Revoke the session's host's broker grants (`POST /v1/sessions/{id}/auth/revoke`). A
/// running harness keeps running; impd fails its later requests.
#[derive(Message)]
#[rtype(result = "AuthAnswer")]
pub struct RevokeAuth;

/// Rebind the session's host's broker binding to its agent's `auth` as the daemon's config
/// has it now (`POST /v1/sessions/{id}/auth/rebind`). Answers the binding's new revision.
#[derive(Message)]
#[rtype(result = "Result<u32, SessionError>")]
pub struct RebindAuth;

/// Start a new process for the same agent, cwd and args under the same id. Sent for a client,
/// so the start counts as deliberate (spec §3.4 `started`).
#[derive(Message)]
#[rtype(result = "Result<Descriptor, SessionError>")]
pub struct Revive {
    /// Size for the new process; the last size when absent.
    pub size: Option<TermSize>,
}

/// Like [`Revive`] at the last size, sent by a fleet restore: the start is not the user's
/// choice, so its `started` report leaves `last_used_agent` alone (spec §3.4).
#[derive(Message)]
#[rtype(result = "Result<Descriptor, SessionError>")]
pub struct ReviveOnRestore;

/// A client's forget: kill the process if any, delete the row, stop the actor.
#[derive(Message)]
#[rtype(result = "Result<(), SessionError>")]
pub struct Forget {
    /// Remove the session's workspace even when that loses work (uncommitted files, commits
    /// on no other branch); without it such a forget is refused as `workspace_dirty`.
    pub force: bool,
}

/// Where the session's workspace stands (`GET /v1/sessions/{id}/workspace`); `NoWorkspace`
/// for a session without one.
#[derive(Message)]
#[rtype(result = "Result<atc_protocol::workspace::WorkspaceStatus, SessionError>")]
pub struct ReadWorkspace;

/// The workspace directories no listed session owns (`GET /v1/workspaces/orphans`); sent to
/// the manager, which knows the listed sessions.
#[derive(Message)]
#[rtype(result = "Result<atc_protocol::workspace::OrphanList, SessionError>")]
pub struct ListOrphans;

/// Remove the orphaned workspaces that hold no work, or all of them with `force`
/// (`POST /v1/workspaces/prune`); sent to the manager.
#[derive(Message)]
#[rtype(result = "Result<atc_protocol::workspace::PruneAnswer, SessionError>")]
pub struct PruneOrphans {
    /// Remove those that hold work too.
    pub force: bool,
}

/// From a session whose process a client's kill just ended, to the manager: its live
/// sub-sessions are stopped the same way (spec §3.7). Answered once each one's end is
/// written; a sub-session that could not be stopped is logged.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ParentKilled {
    /// The killed parent.
    pub parent: SessionId,
}

/// From the manager: the session's parent was removed, so it stands alone now (spec §3.7: a
/// forget's sub-sessions that stay become top-level). Its host key stays what it was.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ParentGone;

/// Like [`Forget`], from the manager, for a session whose start was refused: nothing of a
/// client's reaches the target, so the refusal chain is not asked.
#[derive(Message)]
#[rtype(result = "Result<(), SessionError>")]
pub struct Discard;

/// Daemon shutdown: hang up the process, record its exit as `daemon_stopped`, flush the row.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown;

/// Sent by a session to the manager whenever something clients can see changed.
#[derive(Message)]
#[rtype(result = "()")]
pub struct FleetNotice(pub FleetEvent);

/// Lookup reply of the manager: the session's actor and its last known descriptor.
pub struct Found {
    /// The actor.
    pub addr: Addr<super::session::Session>,
    /// The descriptor as last reported.
    pub descriptor: Descriptor,
}

/// Find a session by id or exact name, among those in `reach` (all, for `None`: the owner).
/// A session out of reach is not found, exactly as one that does not exist.
#[derive(Message)]
#[rtype(result = "Result<Found, SessionError>")]
pub struct Lookup {
    /// An id or a name.
    pub key: String,
    /// What the asker reaches.
    pub reach: Option<std::sync::Arc<super::reach::Reach>>,
}

impl Lookup {
    /// A lookup among every session (the daemon's own, or the owner's).
    pub fn any(key: impl Into<String>) -> Lookup {
        Lookup {
            key: key.into(),
            reach: None,
        }
    }
}

/// The body of `GET /v1/sessions`: every session, oldest first, as the JSON object
/// `{"sessions": [descriptor]}`, serialized by the manager (sent by the route).
#[derive(Message)]
#[rtype(result = "bytes::Bytes")]
pub struct ListSessions {
    /// Only the sessions in this reach (every one for `None`: the owner).
    pub reach: Option<std::sync::Arc<super::reach::Reach>>,
}

/// The ids of the sessions in a principal's reach (its trail, permissions and fleet rows
/// are judged by them).
#[derive(Message)]
#[rtype(result = "std::collections::HashSet<SessionId>")]
pub struct InReach(pub std::sync::Arc<super::reach::Reach>);

/// Every session counted by target and state, from the descriptors the manager keeps (sent
/// by a metrics scrape).
#[derive(Message)]
#[rtype(result = "crate::metrics::scrape::SessionCounts")]
pub struct CountSessions;

/// Spawn a new session.
#[derive(Message)]
#[rtype(result = "Result<Descriptor, SessionError>")]
pub struct Spawn {
    /// The session id, when the caller minted it first (an idempotent spawn records it in its
    /// claim before anything starts); a fresh one otherwise.
    pub id: Option<SessionId>,
    /// Agent id.
    pub agent: String,
    /// Working directory (absolute).
    pub cwd: String,
    /// Name; the cwd's basename when absent.
    pub name: Option<String>,
    /// Initial size.
    pub size: TermSize,
    /// The target it runs on (already through the refusal chain).
    pub target: String,
    /// That target's identity, which the session binds to.
    pub target_identity: String,
    /// A validated model override.
    pub model: Option<String>,
    /// A validated effort override.
    pub effort: Option<String>,
    /// The workspace to make and start in (spec §3.5 step 9), its shape already checked.
    pub workspace: Option<crate::workspaces::source::Ask>,
    /// The limits its processes run under, checked against config and against what its
    /// target's provider can enforce (empty: none).
    pub limits: atc_protocol::SessionLimits,
    /// The session it is a sub-session of, as the route found it in the caller's reach; the
    /// manager checks it is still listed, and replaces a sub-session by its own parent.
    pub parent: Option<SessionId>,
    /// What the asking principal reaches (`None`: the owner). The parent's tree is checked
    /// against it again just before the launch (spec §3.5 step 10): it may have left reach
    /// while the host or the workspace was readied.
    pub reach: Option<std::sync::Arc<super::reach::Reach>>,
}

/// Which other session's id a name would shadow, if any (sent by a session before it takes a
/// name from a client or its agent; see `session_name`).
#[derive(Message)]
#[rtype(result = "Option<SessionId>")]
pub struct ShadowedId {
    /// The name.
    pub name: String,
    /// The asking session, whose own id a name may spell.
    pub own: SessionId,
}

/// Revive every session that died with an old daemon, one at a time, newest first.
#[derive(Message)]
#[rtype(result = "Result<usize, SessionError>")]
pub struct RestoreFleet;

/// Subscribe an events socket: a snapshot of `session.added` frames, then every fleet event.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Subscribe {
    /// The subscriber.
    pub client: ClientId,
    /// Its queue.
    pub queue: ClientQueue,
    /// What it may hear of (everything for `None`: the owner).
    pub reach: Option<std::sync::Arc<super::reach::Reach>>,
}

/// An events socket closed.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Unsubscribe {
    /// The subscriber.
    pub client: ClientId,
}

/// A hook report for one session (it lives with the providers, whose remote harnesses send
/// it too).
pub use crate::providers::HookReported;

/// From the reporter socket, for a line whose key was the session's: where that session takes
/// hook reports (`None`: no such session).
#[derive(Message)]
#[rtype(result = "Option<actix::Recipient<HookReported>>")]
pub struct HookRecipient(pub SessionId);

/// Stop every session and flush the store (daemon shutdown).
#[derive(Message)]
#[rtype(result = "()")]
pub struct ShutdownAll;

/// From the systemd notifier before each watchdog ping: the answer shows that the manager's
/// mailbox, and the arbiter it shares with the sessions, are being served.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Heartbeat;

/// Registers who hears the fleet's counts (the systemd notifier): told at once, then after
/// fleet changes, at most once per status debounce.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ObserveFleetStatus(pub Recipient<FleetStatusChanged>);

/// Sent by the manager to the observer of [`ObserveFleetStatus`]: the fleet's counts now.
#[derive(Message)]
#[rtype(result = "()")]
pub struct FleetStatusChanged(pub super::status_file::FleetStatus);
