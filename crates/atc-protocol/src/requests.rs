//! The JSON bodies clients send to the HTTP routes (api.md, "Routes"). The daemon reads them
//! field by field through its `Params` (so a wrong type names its field in `bad_args`); these
//! types are what a client writes and what the OpenAPI document describes. Unknown fields are
//! ignored, and a `None` field is left out rather than sent as `null`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /v1/sessions`: spawn a session (spec `session.spawn`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
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
}

/// `PATCH /v1/sessions/{id}`: rename or (un)pin.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UpdateRequest {
    /// New name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// New pinned flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<bool>,
}

/// `POST /v1/sessions/{id}/input` as JSON (an `application/octet-stream` body is raw bytes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InputRequest {
    /// UTF-8 text to type, as is.
    pub data: String,
}

/// `POST /v1/sessions/{id}/submit`: text, then Enter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SubmitRequest {
    /// The text.
    pub text: String,
}

/// `POST /v1/sessions/{id}/revive`: a fresh harness resumes the session in place.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReviveRequest {
    /// Columns, 1–4096; with `rows`, or neither (the session's last size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u16>,
    /// Rows, 1–4096; with `cols`, or neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u16>,
}

/// `POST /v1/sessions/{id}/suspend`: sleep the session's host with the process inside.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SuspendRequest {
    /// Sleep it even while the agent is busy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
}

/// `POST /v1/permissions/{id}`: answer a pending permission request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PermissionDecision {
    /// The decision (`allow`, `deny`, or what the agent offered).
    pub decision: String,
}
