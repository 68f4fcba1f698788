//! The JSON bodies clients send to the HTTP routes (api.md, "Routes"): what a client writes,
//! what the daemon reads them into, and what the OpenAPI document describes.
//!
//! Unlike the answers (which a client reads leniently, so a newer daemon may add fields), a
//! request is closed: a field a body type does not declare is refused as `bad_args` naming it,
//! not dropped, so a client never believes it asked for something it did not get. A field the
//! spec reserves for a part not built yet ([`RequestBody::RESERVED`]) is refused as
//! `unsupported`, naming it. A `None` field is left out rather than sent as `null`.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A JSON request body, as the daemon reads it.
pub trait RequestBody: DeserializeOwned {
    /// Top-level fields the spec gives this request for a part atc has not built yet. The
    /// daemon answers `unsupported` with `data.field` naming the first one a body carries,
    /// before it reads the rest; they are left out of the type so the document does not offer
    /// them.
    const RESERVED: &'static [&'static str] = &[];
}

/// `POST /v1/sessions`: spawn a session (spec `session.spawn`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnRequest {
    /// Agent id; `claude` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Absolute working directory.
    pub cwd: String,
    /// Display name (at most 200 characters, no control characters); derived from `cwd`
    /// when absent or blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Columns, 1–4096 (80 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u16>,
    /// Rows, 1–4096 (24 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u16>,
    /// Target id; the default target when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Model override, checked against the agent's spawn options (spec §9.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Effort override, checked against the agent's spawn options (spec §9.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// A copy of its own of a repository at a commit to work in; the session's `cwd` is then
    /// the same place inside the copy (its root when `cwd` is outside the repository).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<crate::workspace::WorkspaceRequest>,
    /// Limits on the session's processes (a local target's); each may only lower what config
    /// allows for its agent and target, and a higher one answers `bad_args` naming the
    /// ceiling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<crate::limits::SessionLimits>,
    /// The session (id or name) this one is a sub-session of. A parent that is itself a
    /// sub-session is replaced by its own parent. It shares the parent's host when it
    /// resolves to the parent's target at the same identity, and that target has hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

impl RequestBody for SpawnRequest {
    /// Spec §2.6 `session.spawn` and api.md's "Coming with the open issues": a first
    /// prompt, a resume of the agent's own session and a scope (an open question of the
    /// spec, §15) are not built yet.
    const RESERVED: &'static [&'static str] = &["prompt", "resume", "scope"];
}

/// `PATCH /v1/sessions/{id}`: rename or (un)pin.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateRequest {
    /// New name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// New pinned flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<bool>,
}

impl RequestBody for UpdateRequest {}

/// `POST /v1/sessions/{id}/input` as JSON (an `application/octet-stream` body is raw bytes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InputRequest {
    /// UTF-8 text to type, as is.
    pub data: String,
}

impl RequestBody for InputRequest {}

/// `POST /v1/sessions/{id}/submit`: text, then Enter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    /// The text.
    pub text: String,
}

impl RequestBody for SubmitRequest {}

/// `POST /v1/sessions/{id}/resize`: the size of a client not attached by WebSocket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResizeRequest {
    /// Columns, 1–4096.
    pub cols: u16,
    /// Rows, 1–4096.
    pub rows: u16,
}

impl RequestBody for ResizeRequest {}

/// `POST /v1/sessions/{id}/revive`: a fresh harness resumes the session in place.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviveRequest {
    /// Columns, 1–4096; with `rows`, or neither (the session's last size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u16>,
    /// Rows, 1–4096; with `cols`, or neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u16>,
}

impl RequestBody for ReviveRequest {}

/// `POST /v1/sessions/{id}/suspend`: sleep the session's host with the process inside.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SuspendRequest {
    /// Sleep it even while the agent is busy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
}

impl RequestBody for SuspendRequest {}

/// `POST /v1/permissions/{id}`: answer a pending permission request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PermissionDecision {
    /// The decision (`allow`, `deny`, or what the agent offered).
    pub decision: String,
}

impl RequestBody for PermissionDecision {}
