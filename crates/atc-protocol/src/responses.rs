//! The JSON answers of the HTTP routes (api.md, "Routes"): the daemon serializes these types
//! and clients read them. `GET /v1/sessions` alone is sent as bytes the session manager keeps
//! serialized (each descriptor is still this crate's); the root crate's `tests/it/openapi.rs` validates every
//! route's answers against the document these types generate.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::capabilities::Capabilities;
use crate::session::Descriptor;
use crate::session_id::SessionId;

/// `GET /v1/health`'s one status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HealthStatus {
    /// The daemon answers.
    Ok,
}

/// `GET /v1/health` (no token needed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// Always `ok` when it answers at all.
    pub status: HealthStatus,
    /// The daemon's package version.
    pub version: String,
    /// Stable daemon id.
    pub daemon_id: Uuid,
}

/// An answer with nothing to say: `{}` (quit, input, submit, a permission decision).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Empty {}

/// `GET /v1/daemon` (spec `daemon.hello`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonInfo {
    /// `atc/<version>`.
    pub build: String,
    /// Stable daemon id.
    pub daemon_id: Uuid,
    /// The daemon's process id.
    pub pid: u32,
    /// The address it listens on.
    pub listen: String,
    /// Its state directory.
    pub state_dir: String,
    /// Its sizes.
    pub limits: Limits,
    /// Optional behaviours it has (`session.forget`, `session.submit`, `daemon.id`).
    pub features: Vec<String>,
    /// The agent of the last deliberate spawn that reported its start (`claude` until one
    /// has).
    pub last_used_agent: String,
    /// Problems found in the config file; the daemon runs on regardless.
    pub config_problems: Vec<ConfigProblem>,
    /// What the hook reporter socket received.
    pub reporter: ReporterCounts,
}

/// The daemon's limits: sizes in bytes, its cap on running sessions, the hook reports' rate
/// and the trail's retention.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// Bytes a client may have queued before it is desynced.
    pub queue_bytes: u64,
    /// Bytes of recent output kept per session for exact resume.
    pub ring_bytes: u64,
    /// Largest request body.
    pub body_cap_bytes: u64,
    /// Hook reports a session may send per second, on average.
    pub reports_per_second: u32,
    /// Hook reports a session may send at once.
    pub report_burst: u32,
    /// Trail rows kept per session.
    pub trail_per_session: u32,
    /// Trail rows kept in all.
    pub trail_rows: u32,
    /// Days a trail row is kept.
    pub trail_max_age_days: u32,
    /// HTTP connections from one peer address that have not shown the token.
    pub tokenless_connections: u64,
    /// The most sessions with a running process at once (`limits.maxSessions`, or the number
    /// the daemon worked out from its host at start); absent from daemons older than it.
    #[serde(default)]
    pub max_sessions: Option<u64>,
}

/// A problem of the config file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ConfigProblem {
    /// `config` for the whole file, `agents.<id>` for one entry.
    pub scope: String,
    /// `config_unreadable`, `config_malformed`, `agent_invalid`.
    pub problem: String,
    /// Parser or OS detail; never the file's values.
    pub detail: String,
    /// The file involved.
    pub path: Option<String>,
}

/// Counts of lines the reporter socket received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReporterCounts {
    /// Lines routed to a session.
    pub accepted: u64,
    /// Lines dropped: malformed, too long, too slow, or naming no session.
    pub dropped: u64,
}

/// `GET /v1/agents` (spec `agents.list`, §9.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentsListing {
    /// Every agent, built in or configured.
    pub agents: Vec<AgentEntry>,
    /// Every configured target, never with its options.
    pub targets: Vec<TargetEntry>,
    /// The default target's id, if there is one.
    pub default_target: Option<String>,
    /// What a spawn without `agent` or `target` uses.
    pub spawn_defaults: SpawnDefaults,
    /// Changes whenever targets, identities, the default or the errors change.
    pub config_revision: String,
    /// Problems of the target configuration.
    pub target_errors: Vec<TargetProblem>,
    /// Configured agents left out for a problem of their entry.
    pub agent_errors: Vec<AgentProblem>,
}

/// One agent of `GET /v1/agents`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AgentEntry {
    /// Agent id.
    pub id: String,
    /// Display label.
    pub label: String,
    /// Whether its program resolves now.
    pub installed: bool,
    /// The configured program.
    pub bin: String,
    /// Built in or configured.
    pub builtin: bool,
    /// `claude`, `codex`, `grok`, or null.
    pub kind: Option<String>,
    /// Role → model map (spec §9.1), or null.
    pub models: Option<BTreeMap<String, String>>,
    /// `{model, effort}`, each as spec §9.2 describes it (supported, available, values,
    /// examples, default, backendEffect, note).
    #[serde(rename = "spawnOptions")]
    #[schema(value_type = Object, required = true)]
    pub spawn_options: Option<SpawnOptions>,
    /// Whether its credential stays in impd's broker: it runs only on a broker target.
    #[serde(rename = "brokerAuth", default)]
    pub broker_auth: bool,
    /// What a client can do with it.
    pub capabilities: AgentCapabilities,
    /// Why its config entry left it out; absent when it is fine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<AgentProblem>,
}

/// What an agent takes on spawn (spec §9.2); `null` for an agent its config entry left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SpawnOptions {
    /// The `model` override.
    pub model: SpawnOptionListing,
    /// The `effort` override.
    pub effort: SpawnOptionListing,
}

/// How an agent takes one spawn option (spec §9.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpawnOptionListing {
    /// Whether the agent's kind takes the option at all.
    pub supported: bool,
    /// Whether it can be given now (supported, and the agent can be spawned).
    pub available: bool,
    /// The closed set of values, when there is one.
    pub values: Option<Vec<String>>,
    /// Values to offer (a gateway's model tiers with what each resolves to).
    pub examples: Vec<SpawnOptionExample>,
    /// The value the agent runs with when none is given, if known.
    pub default: Option<String>,
    /// `applied`, or `unverified` where atc cannot vouch that the backend honours it;
    /// null when unsupported.
    pub backend_effect: Option<BackendEffect>,
    /// Why it is not supported (`takes no model`); null otherwise.
    pub note: Option<String>,
}

/// One example value of a spawn option.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpawnOptionExample {
    /// The value to give.
    pub value: String,
    /// What a gateway maps it to, if it does.
    pub resolves_to: Option<String>,
}

/// Whether a spawn option reaches the model's backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BackendEffect {
    /// atc passes it and the agent applies it.
    Applied,
    /// atc passes it, but a gateway may not honour it.
    Unverified,
}

/// What a client can do with an agent (spec §9.1). Only `spawn` varies: attaching, reading
/// the screen and typing work for every agent's sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AgentCapabilities {
    /// Installed (or, for a broker-backed agent, some target has a broker) and not refused.
    pub spawn: bool,
    /// Its sessions can be attached.
    pub attach: bool,
    /// Its sessions' screens can be read.
    pub screen: bool,
    /// Its sessions take input.
    pub input: bool,
}

impl AgentCapabilities {
    /// Every capability, with `spawn` as given.
    pub fn with_spawn(spawn: bool) -> AgentCapabilities {
        AgentCapabilities {
            spawn,
            attach: true,
            screen: true,
            input: true,
        }
    }
}

/// A configured agent left out for a problem of its entry (spec §9.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AgentProblem {
    /// Agent id.
    pub agent: String,
    /// `agent_invalid`, or `auth_binding_invalid` for its `auth`.
    pub problem: String,
    /// Which key is at fault and why; never its value.
    pub detail: String,
}

/// One target of `GET /v1/agents` (spec §4.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TargetEntry {
    /// Its id.
    pub id: String,
    /// Provider kind, e.g. `local-pty`.
    pub provider: String,
    /// `<kind>:<16 hex of sha256 over the canonical options>`.
    pub identity: String,
    /// Whether this daemon can serve it now.
    pub available: bool,
    /// Whether it is the default target.
    pub default: bool,
    /// What its provider can do (all false when unavailable).
    pub capabilities: Capabilities,
    /// Whether its provider has a credential broker (spec §6.1).
    #[serde(rename = "brokerAuth", default)]
    pub broker_auth: bool,
}

/// What a spawn without `agent` or `target` uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SpawnDefaults {
    /// Agent id.
    pub agent: String,
    /// Target id, if there is a default target.
    pub target: Option<String>,
}

/// Where a target problem sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum TargetProblemScope {
    /// The whole file: no target is usable.
    Config,
    /// The `targets` map: no target is usable.
    Targets,
    /// One entry: that target is unusable.
    Target,
    /// `defaultTarget`: there is no default.
    DefaultTarget,
}

/// One problem of the target configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TargetProblem {
    /// Where.
    pub scope: TargetProblemScope,
    /// The target it concerns, for `target` scope.
    pub target: Option<String>,
    /// A stable word: `config_unreadable`, `config_malformed`, `not_an_object`, `no_provider`…
    pub problem: String,
    /// Human detail (never option values).
    pub detail: String,
}

/// `GET /v1/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionList {
    /// Every session.
    pub sessions: Vec<Descriptor>,
}

/// `{session}`: what spawn, get, update, ack, revive and suspend answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionEnvelope {
    /// The session as it is now.
    pub session: Descriptor,
}

/// `GET /v1/sessions/{id}/auth` and `POST .../auth/revoke`: the host's broker binding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuthEnvelope {
    /// The binding.
    pub auth: AuthStatus,
}

/// `POST /v1/sessions/{id}/auth/rebind`: the binding's revision after the rebind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuthRebound {
    /// The new revision (the old one plus one).
    pub revision: u32,
}

/// A host's broker binding as a client sees it (issue 9 item 3): names and states, never a
/// credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuthStatus {
    /// Where the binding is.
    pub state: AuthBindingState,
    /// Its revision (1 at create; a rebind moves it on).
    pub revision: u32,
    /// sha256 of the canonical bound secrets (names, kinds, rules).
    pub hash: String,
    /// The imp it binds.
    pub imp: AuthImp,
    /// Its grants.
    pub grants: Vec<AuthGrant>,
    /// The launch tickets this daemon's binding actor gave out and got back since it
    /// started (spec §6.4). A ticket is held by one connection attempt from its admission
    /// until that connection ends, so `issued - released` is 1 while a harness's
    /// connection is up (or opening) and 0 once it let go.
    #[serde(default)]
    pub admissions: AuthAdmissions,
}

/// How many launch tickets a host's binding issued and released (see
/// [`AuthStatus::admissions`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuthAdmissions {
    /// Tickets handed to a connection.
    pub issued: u64,
    /// Tickets given back (each exactly once).
    pub released: u64,
}

/// The broker binding of a session's host as its descriptor carries it (spec §3.2, issue
/// 9 item 3): only on sessions of broker-backed agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SessionAuth {
    /// The binding's state.
    pub state: AuthBindingState,
    /// Its revision.
    pub revision: u32,
}

impl From<&AuthStatus> for SessionAuth {
    fn from(a: &AuthStatus) -> SessionAuth {
        SessionAuth {
            state: a.state,
            revision: a.revision,
        }
    }
}

/// The imp of a binding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuthImp {
    /// The imp's name.
    pub name: String,
    /// impd's id of it, once created.
    pub id: Option<String>,
}

/// One grant of a binding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuthGrant {
    /// The impd secret.
    pub secret: String,
    /// Where the grant is.
    pub state: AuthGrantState,
    /// It existed before the binding asked for it.
    pub preexisted: bool,
}

/// A binding's state (spec §6.3).
// Only `Ready` admits a launch. The daemon keeps it in its store as `as_str`'s word, which is
// also serde's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthBindingState {
    /// A create is running (or was, when a daemon died): the imp and grants may be partial;
    /// ready once its harness started behind the broker.
    Provisioning,
    /// Granted, and a harness really started behind the broker: admits launches.
    Ready,
    /// Every grant was revoked; a rebind can bring it back.
    Revoked,
    /// A revoke began and not every grant is confirmed gone; the revoke can be retried.
    RevocationPending,
    /// A failed create could not confirm taking its effects back.
    RollbackPending,
    /// A rebind failed and took back what it added; the old revision stands.
    RebindFailed,
}

impl AuthBindingState {
    /// Every state, in declaration order.
    pub const ALL: [AuthBindingState; 6] = [
        AuthBindingState::Provisioning,
        AuthBindingState::Ready,
        AuthBindingState::Revoked,
        AuthBindingState::RevocationPending,
        AuthBindingState::RollbackPending,
        AuthBindingState::RebindFailed,
    ];

    /// The wire and store word.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthBindingState::Provisioning => "provisioning",
            AuthBindingState::Ready => "ready",
            AuthBindingState::Revoked => "revoked",
            AuthBindingState::RevocationPending => "revocation_pending",
            AuthBindingState::RollbackPending => "rollback_pending",
            AuthBindingState::RebindFailed => "rebind_failed",
        }
    }

    /// The state a word names.
    pub fn parse(word: &str) -> Option<AuthBindingState> {
        AuthBindingState::ALL
            .into_iter()
            .find(|s| s.as_str() == word)
    }

    /// Whether a launch (start or attach) may be admitted: only a ready binding has every
    /// grant confirmed and none being taken away.
    pub fn admits_launch(self) -> bool {
        match self {
            AuthBindingState::Ready => true,
            AuthBindingState::Provisioning
            | AuthBindingState::Revoked
            | AuthBindingState::RevocationPending
            | AuthBindingState::RollbackPending
            | AuthBindingState::RebindFailed => false,
        }
    }

    /// Whether a rebind may start from here (spec §6.3). A revoke or a rollback still waiting
    /// for confirmation must finish first, since a rebind would race its grant deletions.
    pub fn allows_rebind(self) -> bool {
        match self {
            AuthBindingState::Ready
            | AuthBindingState::Revoked
            | AuthBindingState::RebindFailed => true,
            AuthBindingState::Provisioning
            | AuthBindingState::RevocationPending
            | AuthBindingState::RollbackPending => false,
        }
    }
}

/// A grant's state (spec §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthGrantState {
    /// `grants.add` is about to be sent or is in flight: asked for, not yet confirmed.
    Granting,
    /// impd confirmed the grant.
    Granted,
    /// `grants.add` got no answer: the grant may or may not exist.
    Uncertain,
    /// `grants.delete` is about to be sent or is in flight.
    Revoking,
    /// impd confirmed the grant gone (or absent).
    Revoked,
    /// `grants.delete` got no answer; the revoke must be retried.
    RevocationPending,
}

impl AuthGrantState {
    /// Every state, in declaration order.
    pub const ALL: [AuthGrantState; 6] = [
        AuthGrantState::Granting,
        AuthGrantState::Granted,
        AuthGrantState::Uncertain,
        AuthGrantState::Revoking,
        AuthGrantState::Revoked,
        AuthGrantState::RevocationPending,
    ];

    /// The wire and store word.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthGrantState::Granting => "granting",
            AuthGrantState::Granted => "granted",
            AuthGrantState::Uncertain => "uncertain",
            AuthGrantState::Revoking => "revoking",
            AuthGrantState::Revoked => "revoked",
            AuthGrantState::RevocationPending => "revocation_pending",
        }
    }

    /// The state a word names.
    pub fn parse(word: &str) -> Option<AuthGrantState> {
        AuthGrantState::ALL.into_iter().find(|s| s.as_str() == word)
    }
}

/// `POST /v1/sessions/{id}/kill`: the session, and `forgotten: true` when it was already dead
/// and the kill forgot it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct KillAnswer {
    /// The session (as it was, when forgotten).
    pub session: Descriptor,
    /// Present (true) when the kill forgot a dead session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forgotten: Option<bool>,
}

/// `DELETE /v1/sessions/{id}`: forgotten, or (on a target that destroys hosts, without
/// `confirm`) the token that confirms it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ForgetAnswer {
    /// The session is gone.
    Forgotten(Forgotten),
    /// Step one of two: repeat with `?confirm=<confirmToken>` before `expiresAt`.
    Confirm(ForgetConfirmation),
}

/// The session is forgotten.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Forgotten {
    /// Always true.
    pub forgotten: bool,
    /// Whether its host was destroyed with it.
    pub destroyed: bool,
}

/// Step one of a forget that destroys a host (spec §3.7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForgetConfirmation {
    /// Single-use token for `?confirm=`.
    pub confirm_token: String,
    /// Epoch milliseconds after which the token is refused.
    pub expires_at: i64,
    /// What confirming destroys.
    pub destroys: String,
}

/// `POST /v1/tickets`: a single-use ticket that opens one WebSocket as `?ticket=`, instead
/// of the token (for browsers, which cannot send a header on an upgrade).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ticket {
    /// The ticket, for `?ticket=` on one upgrade of the attach or events socket.
    pub ticket: String,
    /// Epoch milliseconds after which it is refused.
    pub expires_at: i64,
}

/// `GET /v1/sessions/{id}/screen`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ScreenText {
    /// Rows joined by `\n`, trailing blanks trimmed.
    pub text: String,
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
    /// Cursor position.
    pub cursor: Cursor,
}

/// A zero-based cursor position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Cursor {
    /// Zero-based row.
    pub row: u16,
    /// Zero-based column.
    pub col: u16,
}

/// `GET /v1/sessions/{id}/resume-command`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ResumeCommand {
    /// A shell command line that resumes the agent's session outside atc.
    pub command: String,
}

/// `GET /v1/fleet`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FleetList {
    /// Every persisted session row.
    pub fleet: Vec<FleetEntry>,
}

/// One persisted session row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetEntry {
    /// Session id.
    #[schema(value_type = uuid::Uuid)]
    pub session_id: SessionId,
    /// Display name.
    pub name: String,
    /// `auto`, `user` or `agent`.
    pub named_by: String,
    /// Working directory.
    pub cwd: String,
    /// Pinned flag.
    pub pinned: bool,
    /// Epoch milliseconds of the last attach.
    pub last_attached: Option<i64>,
    /// Agent id.
    pub agent: String,
    /// The agent's arguments.
    pub args: Vec<String>,
    /// Whether the process is gone.
    pub exited: bool,
    /// Exit status.
    pub exit_code: Option<i32>,
    /// Ending signal.
    pub exit_signal: Option<i32>,
    /// Why it is gone.
    pub exit_reason: Option<String>,
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
    /// Epoch milliseconds.
    pub created_at: i64,
    /// Target id.
    pub target: Option<String>,
    /// The target's identity at spawn.
    pub target_identity: Option<String>,
    /// The agent's own session id.
    pub agent_session_id: Option<String>,
    /// The agent's transcript file.
    pub transcript_path: Option<String>,
    /// The last turn's result.
    pub result: Option<String>,
    /// Model override.
    pub model: Option<String>,
    /// Effort override.
    pub effort: Option<String>,
}

/// `POST /v1/fleet/restore`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Restored {
    /// How many sessions were revived.
    pub restored: u64,
}

/// `GET /v1/principals`: the principals config declares, in id order. Never a token: where
/// each one's token file is, for its owner to read or rewrite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PrincipalList {
    /// One entry per configured principal (entries config left out for a problem are not
    /// here; `GET /v1/daemon` lists those problems).
    pub principals: Vec<PrincipalEntry>,
}

/// One configured principal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrincipalEntry {
    /// Its id (`[a-z0-9_-]`, at most 64 characters).
    pub id: String,
    /// The target names config grants it, as written.
    pub targets: Vec<String>,
    /// The absolute path of its token file (`<state dir>/principals/<id>`).
    pub token_file: String,
}

/// `GET /v1/dirs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Dirs {
    /// Recent spawn directories, most recent first.
    pub dirs: Vec<String>,
}

/// `GET /v1/permissions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PermissionList {
    /// Pending requests, oldest first.
    pub permissions: Vec<PermissionRequest>,
}

/// A pending permission request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PermissionRequest {
    /// `p<n>`.
    pub request: String,
    /// The session it concerns.
    #[schema(value_type = uuid::Uuid)]
    pub session: SessionId,
    /// What the agent asked.
    pub message: String,
    /// Whether a decision can be sent through the API (PTY prompts are answered by typing).
    pub respondable: bool,
}

/// `GET /v1/events/trail`: a page of the event trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Trail {
    /// Events, oldest first.
    pub events: Vec<TrailEntry>,
    /// Whether more follow right away.
    pub more: bool,
    /// Opaque; pass it back as `?cursor=` for what follows.
    pub cursor: String,
}

/// One trail event (a hook report).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrailEntry {
    /// Row id.
    pub id: i64,
    /// RFC 3339 UTC time.
    pub ts: String,
    /// The atc session id.
    // Documented as the plain string it was listed as before it had a type (a `uuid` format
    // here would change the published document).
    #[schema(value_type = String)]
    pub atc_id: SessionId,
    /// The hook's name.
    pub event: String,
    /// Its message.
    pub message: Option<String>,
    /// The agent's own session id.
    pub session_id: Option<String>,
    /// Normalized kind.
    pub kind: Option<String>,
    /// Extra detail (a turn's result).
    pub detail: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_and_grant_words_are_serde_s() {
        for s in AuthBindingState::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
            assert_eq!(AuthBindingState::parse(s.as_str()), Some(s));
        }
        for s in AuthGrantState::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
            assert_eq!(AuthGrantState::parse(s.as_str()), Some(s));
        }
    }
}
