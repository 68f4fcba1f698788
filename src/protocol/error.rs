//! Every refusal the daemon gives is a [`DaemonError`]: a stable [`ErrorCode`] (the closed
//! set and its HTTP status are `atc_protocol`'s), a message that tells the user what to do
//! next, and structured `data` whose fields the code defines. It becomes the wire's
//! [`ErrorBody`] in [`DaemonError::body`]; the HTTP response is built in `server`.

pub use atc_protocol::ErrorCode;
use atc_protocol::{ErrorBody, ErrorDetail};
use serde_json::{Map, Value};

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

    /// The wire body `{"error": {...}}`.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message.clone(),
                data: self.data.clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_carries_code_message_and_data() {
        let e = DaemonError::bad_arg("cols", "cols must be 1-4096");
        let b = e.body();
        assert_eq!(b.error.code, ErrorCode::BadArgs);
        assert_eq!(b.error.data["field"], "cols");
    }
}
