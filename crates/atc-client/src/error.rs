//! What can go wrong when the CLI talks to the daemon, with messages that tell the user what
//! to do next. [`ApiError`] is the daemon's own answer (`{"error":{code,message,data}}`)
//! carried through unchanged; every other variant is a failure to get such an answer at all.

use std::fmt;
use std::path::PathBuf;

use atc_protocol::{ErrorBody, ErrorCode};
use serde::Deserialize;

/// The code of an error the daemon answered with: one of the closed set, or, from a daemon
/// newer than this client (or a proxy in between), a name this client does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiCode {
    /// A code of the closed set.
    Known(ErrorCode),
    /// Anything else, as sent (or `http_<status>` for a body that was not an error body).
    Other(String),
}

impl fmt::Display for ApiCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiCode::Known(code) => f.write_str(code.as_str()),
            ApiCode::Other(name) => f.write_str(name),
        }
    }
}

/// An error the daemon answered with: the HTTP status plus the `code`, `message` and `data`
/// of its `{"error": {...}}` body. Callers branch on `code` (a closed set in the behaviour
/// spec, §2.8), never on `message`, which is for people.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status of the response, e.g. 404.
    pub status: u16,
    /// Machine-readable error code, e.g. `no_such_session`.
    pub code: ApiCode,
    /// The daemon's explanation, which already says what to do next.
    pub message: String,
    /// Fields the code defines (empty when absent).
    pub data: serde_json::Map<String, serde_json::Value>,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

/// An error body whose code this client does not know; unknown fields are ignored, as for
/// every wire type.
#[derive(Debug, Deserialize)]
struct UnknownBody {
    error: UnknownDetail,
}

#[derive(Debug, Deserialize)]
struct UnknownDetail {
    code: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    data: serde_json::Map<String, serde_json::Value>,
}

impl ApiError {
    /// Builds the error for a non-success response from its status and body. A body that is
    /// not the daemon's envelope (a proxy, or a route this daemon does not have) still yields
    /// an `ApiError`, with a code made from the status so the user sees something actionable.
    pub fn from_response(status: u16, body: &[u8]) -> ApiError {
        if let Ok(ErrorBody { error }) = serde_json::from_slice::<ErrorBody>(body) {
            return ApiError {
                status,
                code: ApiCode::Known(error.code),
                message: error.message,
                data: error.data,
            };
        }
        match serde_json::from_slice::<UnknownBody>(body) {
            Ok(UnknownBody { error }) => ApiError {
                status,
                code: ApiCode::Other(error.code),
                message: error.message,
                data: error.data,
            },
            Err(_) => ApiError {
                status,
                code: ApiCode::Other(format!("http_{status}")),
                message: format!(
                    "the daemon answered HTTP {status} without an error body; \
                     check that `atc` and the daemon are the same version"
                ),
                data: serde_json::Map::new(),
            },
        }
    }

    /// Whether the daemon answered with `code`.
    pub fn is(&self, code: ErrorCode) -> bool {
        self.code == ApiCode::Known(code)
    }

    /// True when the daemon does not know the session (or name) the request named.
    pub fn is_no_such_session(&self) -> bool {
        self.is(ErrorCode::NoSuchSession)
    }
}

/// Everything that can stop a client call from producing the daemon's answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Neither `$XDG_STATE_HOME` nor `$HOME` gives a usable default state dir.
    #[error(
        "cannot work out the atc state dir: neither $XDG_STATE_HOME nor $HOME is set; pass \
         --state-dir DIR"
    )]
    NoStateDir,

    /// No `daemon.json` in the state dir: no daemon has been started with it.
    #[error(
        "the atc daemon is not running (there is no daemon.json in {}); start it with \
         `atc daemon`, or pass the --state-dir it was started with",
        state_dir.display()
    )]
    NotRunning {
        /// The state dir that was searched.
        state_dir: PathBuf,
    },

    /// `daemon.json` or `token` exists but cannot be read or understood.
    #[error(
        "cannot use {}: {problem}; restart the daemon (`atc daemon`) so it writes the file again",
        path.display()
    )]
    StateFile {
        /// The file that is unreadable or malformed.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },

    /// The address in `daemon.json` does not accept connections: the daemon stopped without
    /// removing the file, or is still starting.
    #[error(
        "cannot reach the atc daemon at {url} ({cause}); it is probably not running, start it \
         with `atc daemon`"
    )]
    Unreachable {
        /// The daemon URL from `daemon.json`.
        url: String,
        /// The connection error.
        cause: String,
    },

    /// The connection was made but the exchange failed (timeout, reset, malformed response).
    #[error("talking to the atc daemon at {url} failed: {cause}; check that it is still running")]
    Transport {
        /// The daemon URL from `daemon.json`.
        url: String,
        /// What failed.
        cause: String,
    },

    /// A success response whose body is not the JSON the contract promises.
    #[error(
        "the atc daemon sent a response that is not valid JSON ({cause}); check that `atc` and \
         the daemon are the same version"
    )]
    BadResponse {
        /// The parse error.
        cause: String,
    },

    /// The daemon refused a WebSocket upgrade. The body of a refused upgrade is not available
    /// through the WebSocket client, so only the status is known.
    #[error("the atc daemon refused the connection to {path}: {}", upgrade_refusal_hint(*status))]
    UpgradeRefused {
        /// The path that was requested.
        path: String,
        /// The HTTP status of the refusal.
        status: u16,
    },

    /// The daemon answered with an error.
    #[error(transparent)]
    Api(#[from] ApiError),

    /// A session was asked for by an empty id or name.
    #[error("give a session id or name; see `atc ls`")]
    NoSessionGiven,

    /// No session has this id, name or id prefix.
    #[error("no session named {given}; see `atc ls`")]
    NoSuchSession {
        /// What the user typed.
        given: String,
    },

    /// Several sessions' ids start with what the user typed.
    #[error("{given} matches {} sessions ({}); type more of the id", ids.len(), ids.join(", "))]
    AmbiguousSession {
        /// What the user typed.
        given: String,
        /// The ids it matches.
        ids: Vec<String>,
    },
}

/// What a refused WebSocket upgrade most likely means, keyed by the statuses of the API's
/// error mapping (design/api.md, "Conventions").
fn upgrade_refusal_hint(status: u16) -> String {
    match status {
        401 => "HTTP 401, the token was not accepted; check --state-dir".to_string(),
        403 => "HTTP 403, the origin or target is not allowed".to_string(),
        404 => "HTTP 404, no such session; see `atc ls`".to_string(),
        409 => "HTTP 409, the session has exited; revive it with `atc revive`".to_string(),
        other => format!("HTTP {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_is_parsed_and_displayed_as_code_colon_message() {
        let body =
            br#"{"error":{"code":"no_such_session","message":"no session x","data":{"s":"x"}}}"#;
        let err = ApiError::from_response(404, body);
        assert_eq!(err.status, 404);
        assert!(err.is_no_such_session());
        assert_eq!(err.to_string(), "no_such_session: no session x");
        assert_eq!(
            serde_json::Value::Object(err.data),
            serde_json::json!({"s": "x"})
        );
    }

    #[test]
    fn body_without_envelope_gets_a_status_code() {
        let err = ApiError::from_response(502, b"Bad Gateway");
        assert_eq!(err.code, ApiCode::Other("http_502".into()));
        assert!(!err.message.is_empty());
    }

    #[test]
    fn a_code_this_client_does_not_know_is_kept_as_sent() {
        let err = ApiError::from_response(409, br#"{"error":{"code":"brand_new","message":"m"}}"#);
        assert_eq!(err.code, ApiCode::Other("brand_new".into()));
        assert_eq!(err.to_string(), "brand_new: m");
    }

    #[test]
    fn not_running_message_says_how_to_start() {
        let err = ClientError::NotRunning {
            state_dir: PathBuf::from("/s"),
        };
        assert!(err.to_string().contains("`atc daemon`"));
        let err = ClientError::Unreachable {
            url: "http://127.0.0.1:1".into(),
            cause: "Connection refused".into(),
        };
        assert!(err.to_string().contains("`atc daemon`"));
    }
}
