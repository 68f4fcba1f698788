//! The closed set of error codes a client can see, and the one mapping from code to HTTP status.
//!
//! Every refusal the daemon gives is a [`DaemonError`]: a stable [`ErrorCode`], a message that
//! tells the user what to do next, and structured `data` whose fields the code defines. Codes the
//! spec reserves for later issues (targets, idempotency, imp hosts) are listed already so the
//! wire set never changes shape; they are simply not produced yet.

use actix_web::http::StatusCode;
use serde_json::{json, Map, Value};

/// A stable error code from the spec's closed set (§2.8). The wire form is the snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// A parameter failed validation; `data.field` names it.
    BadArgs,
    /// Missing or wrong bearer token.
    Unauthorized,
    /// A WebSocket upgrade from an Origin that is not allowed.
    ForbiddenOrigin,
    /// The session id or name is not known.
    NoSuchSession,
    /// The session has no live harness to talk to.
    SessionDead,
    /// The agent is not registered or not installed.
    Unsupported,
    /// The provider lacks a capability (reserved for the targets issue).
    UnsupportedOperation,
    /// Target id not configured (reserved).
    UnknownTarget,
    /// Target identity changed since the session bound to it (reserved).
    TargetChanged,
    /// Target configuration invalid (reserved).
    TargetConfigInvalid,
    /// Target configured but not servable (reserved).
    TargetUnavailable,
    /// A permission request was already resolved.
    AlreadyAnswered,
    /// No permission request has this id (or it was resolved so long ago it was forgotten).
    NoSuchRequest,
    /// Same idempotency key, different payload.
    IdempotencyConflict,
    /// A keyed effect may or may not have happened; `data.effectRef` names it.
    OutcomeUnknown,
    /// `Idempotency-Replay-Only` for a key the daemon does not hold.
    IdempotencyKeyUnknown,
    /// The client cannot keep up (reserved for headless sessions).
    TooSlow,
    /// The remote host could not be readied or reached; `data.problem` says why.
    HostUnavailable,
    /// The remote host is leased by someone else and will not sleep; `data` has impd's leases.
    HostLeased,
    /// A second kill of a dead session whose forgetting would destroy its host: forget it
    /// with the two-step `DELETE` instead (`data.session`).
    ConfirmationRequired,
    /// No such route or method.
    UnknownMethod,
    /// Anything else; details are logged, never sent.
    Internal,
}

impl ErrorCode {
    /// The wire name of the code.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadArgs => "bad_args",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::ForbiddenOrigin => "forbidden_origin",
            ErrorCode::NoSuchSession => "no_such_session",
            ErrorCode::SessionDead => "session_dead",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::UnsupportedOperation => "unsupported_operation",
            ErrorCode::UnknownTarget => "unknown_target",
            ErrorCode::TargetChanged => "target_changed",
            ErrorCode::TargetConfigInvalid => "target_config_invalid",
            ErrorCode::TargetUnavailable => "target_unavailable",
            ErrorCode::AlreadyAnswered => "already_answered",
            ErrorCode::NoSuchRequest => "no_such_request",
            ErrorCode::IdempotencyConflict => "idempotency_conflict",
            ErrorCode::OutcomeUnknown => "outcome_unknown",
            ErrorCode::IdempotencyKeyUnknown => "idempotency_key_unknown",
            ErrorCode::TooSlow => "too_slow",
            ErrorCode::HostUnavailable => "host_unavailable",
            ErrorCode::HostLeased => "host_leased",
            ErrorCode::ConfirmationRequired => "confirmation_required",
            ErrorCode::UnknownMethod => "unknown_method",
            ErrorCode::Internal => "internal",
        }
    }

    /// The HTTP status api.md assigns to the code. Exhaustive on purpose: a new code does not
    /// compile until someone decides its status.
    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::BadArgs => StatusCode::BAD_REQUEST,
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::ForbiddenOrigin => StatusCode::FORBIDDEN,
            ErrorCode::NoSuchSession
            | ErrorCode::UnknownTarget
            | ErrorCode::UnknownMethod
            | ErrorCode::IdempotencyKeyUnknown
            | ErrorCode::NoSuchRequest => StatusCode::NOT_FOUND,
            ErrorCode::SessionDead
            | ErrorCode::AlreadyAnswered
            | ErrorCode::IdempotencyConflict
            | ErrorCode::OutcomeUnknown
            | ErrorCode::HostLeased
            | ErrorCode::ConfirmationRequired
            | ErrorCode::TargetChanged => StatusCode::CONFLICT,
            ErrorCode::TooSlow => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::Unsupported | ErrorCode::UnsupportedOperation => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            ErrorCode::TargetConfigInvalid
            | ErrorCode::TargetUnavailable
            | ErrorCode::HostUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal a client sees: code, a message saying what to do next, and code-defined data.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code}: {message}")]
pub struct DaemonError {
    /// The stable code.
    pub code: ErrorCode,
    /// Human text; says what to do next.
    pub message: String,
    /// Fields the code defines (e.g. `field` for `bad_args`).
    pub data: Map<String, Value>,
    /// The failed operation may have left its effect standing (an imp it created and could
    /// not destroy again): a keyed spawn must answer `outcome_unknown` and never run again
    /// (spec §7.4 "effect remains"). Not on the wire.
    pub effect_remains: bool,
}

impl DaemonError {
    /// An error with no data.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        DaemonError {
            code,
            message: message.into(),
            data: Map::new(),
            effect_remains: false,
        }
    }

    /// Marks the error as one whose effect may still stand.
    pub fn effect_remains(mut self) -> Self {
        self.effect_remains = true;
        self
    }

    /// Adds one `data` field.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.data.insert(key.to_string(), value.into());
        self
    }

    /// `bad_args` naming the offending field, as every validation failure must.
    pub fn bad_arg(field: &str, message: impl Into<String>) -> Self {
        DaemonError::new(ErrorCode::BadArgs, message).with("field", field)
    }

    /// `no_such_session` for an id or name nobody knows.
    pub fn no_such_session(session: &str) -> Self {
        DaemonError::new(
            ErrorCode::NoSuchSession,
            format!("no session '{session}'; list sessions with GET /v1/sessions"),
        )
        .with("session", session)
    }

    /// `session_dead` for a session without a live harness.
    pub fn session_dead(session: &str) -> Self {
        DaemonError::new(
            ErrorCode::SessionDead,
            format!("session '{session}' has no running process; revive it first"),
        )
        .with("session", session)
    }

    /// `internal`: the cause is logged by the caller; the client learns nothing about internals.
    pub fn internal() -> Self {
        DaemonError::new(
            ErrorCode::Internal,
            "internal error; the daemon log has details under this request id",
        )
    }

    /// The JSON body `{"error": {...}}`.
    pub fn body(&self) -> Value {
        json!({"error": {"code": self.code.as_str(), "message": self.message, "data": self.data}})
    }
}

impl actix_web::ResponseError for DaemonError {
    fn status_code(&self) -> StatusCode {
        self.code.status()
    }

    fn error_response(&self) -> actix_web::HttpResponse {
        actix_web::HttpResponse::build(self.status_code()).json(self.body())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_api_md() {
        assert_eq!(ErrorCode::BadArgs.status().as_u16(), 400);
        assert_eq!(ErrorCode::Unauthorized.status().as_u16(), 401);
        assert_eq!(ErrorCode::ForbiddenOrigin.status().as_u16(), 403);
        assert_eq!(ErrorCode::NoSuchSession.status().as_u16(), 404);
        assert_eq!(ErrorCode::SessionDead.status().as_u16(), 409);
        assert_eq!(ErrorCode::Unsupported.status().as_u16(), 422);
        assert_eq!(ErrorCode::TooSlow.status().as_u16(), 429);
        assert_eq!(ErrorCode::TargetUnavailable.status().as_u16(), 503);
        assert_eq!(ErrorCode::Internal.status().as_u16(), 500);
    }

    #[test]
    fn body_carries_code_message_and_data() {
        let e = DaemonError::bad_arg("cols", "cols must be 1-4096");
        let b = e.body();
        assert_eq!(b["error"]["code"], "bad_args");
        assert_eq!(b["error"]["data"]["field"], "cols");
    }
}
