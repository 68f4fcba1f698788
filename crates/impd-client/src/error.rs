//! The one error type of the impd client: impd's own error code (from the oRPC envelope or an
//! `/exec`/`/tunnel` `error` message) or one of the codes this client adds for what impd never
//! says itself (it was unreachable, it refused our credentials, it sent something unreadable).
//! Codes are strings because impd's set is open-ended (spec §3 lists the known ones) and the
//! daemon passes unknown ones through as a lower-cased `problem`.

use serde_json::Value;

/// Transport failure: no connection, a timeout (RPC or the 10 s socket open), a reset before
/// any answer. Spec §14: an open that takes longer than 10 s is "unreachable".
pub const UNREACHABLE: &str = "UNREACHABLE";
/// impd refused the credentials: an HTTP 401 of any shape (the bare `{"error":"unauthorized"}`
/// or an oRPC `UNAUTHORIZED`), a refused upgrade with 401, a token source that yields nothing,
/// or a socket closed with 1008 (token revoked).
pub const UNAUTHORIZED: &str = "UNAUTHORIZED";
/// impd's `NOT_FOUND` (from the envelope; a plain-text 404 is [`UNKNOWN_PROCEDURE`]).
/// `data.kind` says what was missing ([`ImpPortError::not_found_kind`]).
pub const NOT_FOUND: &str = "NOT_FOUND";
/// impd's `FORBIDDEN`: outside the token's scope or patterns; for grants `data.reason` says
/// which ([`ImpPortError::forbidden_reason`]).
pub const FORBIDDEN: &str = "FORBIDDEN";
/// impd's `CONFLICT` (`{kind, name, reason?}`): a name taken, a host already granted.
pub const CONFLICT: &str = "CONFLICT";
/// impd's `PRECONDITION_FAILED`: an exec requirement not met (`data: {reason, detail}`,
/// [`ImpPortError::precondition`]), or a host not configured.
pub const PRECONDITION_FAILED: &str = "PRECONDITION_FAILED";
/// A plain 404 on `/rpc/...` without an oRPC envelope: impd has no such procedure (e.g.
/// `leases.*` on an impd without leases, spec §1) or the base URL is wrong.
pub const UNKNOWN_PROCEDURE: &str = "UNKNOWN_PROCEDURE";
/// Any other non-2xx answer without an oRPC envelope (a proxy's 502, a GET refused, ...);
/// `status` carries the HTTP status.
pub const HTTP_ERROR: &str = "HTTP_ERROR";
/// The WebSocket upgrade was refused with a status other than 401. Spec §2 calls this "the
/// socket simply closed": a caller treats it like a close, not like a refusal of the request.
pub const UPGRADE_REFUSED: &str = "UPGRADE_REFUSED";
/// impd sent something this client cannot parse (not JSON, a missing field, an unknown
/// channel byte, an unknown resume kind). The client closes the socket after reporting it.
pub const BAD_MESSAGE: &str = "BAD_MESSAGE";
/// A socket ended (or was already gone when we wrote to it). `data.closeCode` carries the
/// WebSocket close code when there was one (`null` for a transport loss).
pub const CLOSED: &str = "CLOSED";
/// A `/tunnel` socket closed with 4000: the guest side ended without an eof (the imp slept,
/// the listener went away). Spec §12.
pub const LOST: &str = "LOST";

/// What went wrong talking to impd. `code` is stable and is what callers match on (through
/// [`ImpPortError::is`]); `message` is human text and never contractual.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("impd {code}: {message}")]
pub struct ImpPortError {
    /// impd's code (`NOT_FOUND`, `LEASED`, `INVALID_STATE`, ...) or one of this module's
    /// constants. Empty for an `/exec` `error` message that carried no code (spec §9.3: a
    /// schema violation; §9.9: a plain exec whose agent connection ended).
    pub code: String,
    /// Human text from impd or from this client.
    pub message: String,
    /// The HTTP status when the error came from an HTTP answer (or a refused upgrade).
    pub status: Option<u16>,
    /// impd's `data` (its shape depends on `code`, spec §3), or `null`.
    pub data: Value,
}

impl ImpPortError {
    /// An error with no status and no data.
    pub fn new(code: &str, message: impl Into<String>) -> ImpPortError {
        ImpPortError {
            code: code.to_string(),
            message: message.into(),
            status: None,
            data: Value::Null,
        }
    }

    /// Whether this is the given code; the way callers branch on impd's answers.
    pub fn is(&self, code: &str) -> bool {
        self.code == code
    }

    /// [`UNREACHABLE`] with a cause.
    pub fn unreachable(cause: impl std::fmt::Display) -> ImpPortError {
        ImpPortError::new(UNREACHABLE, format!("impd is unreachable: {cause}"))
    }

    /// [`UNAUTHORIZED`] with a cause.
    pub fn unauthorized(cause: impl Into<String>) -> ImpPortError {
        ImpPortError::new(UNAUTHORIZED, cause)
    }

    /// [`BAD_MESSAGE`] with a description of what could not be parsed (never the payload:
    /// it may hold terminal bytes).
    pub fn bad_message(what: impl Into<String>) -> ImpPortError {
        ImpPortError::new(BAD_MESSAGE, what)
    }

    /// [`CLOSED`] for a socket that is gone; `code` is its close code if one was seen.
    pub fn closed(code: Option<u16>, reason: &str) -> ImpPortError {
        let mut e = ImpPortError::new(
            CLOSED,
            match code {
                Some(c) => format!("the socket closed ({c} {reason})"),
                None => format!("the socket was lost ({reason})"),
            },
        );
        e.data = serde_json::json!({ "closeCode": code, "reason": reason });
        e
    }

    /// Sets the HTTP status.
    pub fn with_status(mut self, status: u16) -> ImpPortError {
        self.status = Some(status);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_compares_the_code() {
        let e = ImpPortError::new("LEASED", "leased");
        assert!(e.is("LEASED"));
        assert!(!e.is("leased"));
    }

    #[test]
    fn display_names_code_and_message() {
        let e = ImpPortError::unreachable("connection refused");
        assert_eq!(
            e.to_string(),
            "impd UNREACHABLE: impd is unreachable: connection refused"
        );
    }

    #[test]
    fn closed_carries_the_close_code_in_data() {
        let e = ImpPortError::closed(Some(1011), "output dropped");
        assert!(e.is(CLOSED));
        assert_eq!(e.data["closeCode"], 1011);
        let lost = ImpPortError::closed(None, "reset");
        assert!(lost.data["closeCode"].is_null());
    }
}
