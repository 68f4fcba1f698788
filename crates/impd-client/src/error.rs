//! The one error type of the impd client: impd's own error code (from the oRPC envelope or an
//! `/exec`/`/tunnel` `error` message) or one of the codes this client adds for what impd never
//! says itself (it was unreachable, it refused our credentials, it sent something unreadable).
//! Codes are a closed enum of what spec §3, §9.10 and §12 list, plus [`ImpdCode::Other`] for
//! one this client does not know: impd's set is open-ended, and the daemon passes an unknown
//! code through as a lower-cased `problem`.

use std::fmt;

use serde_json::Value;

/// A code of an impd error, spelled on the wire as [`ImpdCode::as_str`] says.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ImpdCode {
    /// impd's `BAD_REQUEST`: the input fails the schema (spec §3), or a tunnel path under
    /// `/run/imp/` (§12).
    BadRequest,
    /// impd refused the credentials: an HTTP 401 of any shape (the bare
    /// `{"error":"unauthorized"}` or an oRPC `UNAUTHORIZED`), a refused upgrade with 401, a
    /// token source that yields nothing, or a socket closed with 1008 (token revoked).
    Unauthorized,
    /// impd's `FORBIDDEN`: outside the token's scope or patterns; for grants `data.reason`
    /// says which ([`ImpPortError::forbidden_reason`]).
    Forbidden,
    /// impd's `NOT_FOUND` (from the envelope; a plain-text 404 is
    /// [`ImpdCode::UnknownProcedure`]). `data.kind` says what was missing
    /// ([`ImpPortError::not_found_kind`]).
    NotFound,
    /// impd's `CONFLICT` (`{kind, name, reason?}`): a name taken, a host already granted.
    Conflict,
    /// impd's `INVALID_STATE` (`{state, allowed, coldBoots?}`): an illegal lifecycle move, or
    /// an attach with `wake:false` to an imp that is not running.
    InvalidState,
    /// impd's `INVALID_RESUME` (`{end, bufferStart}`): a resume past the generation's end.
    InvalidResume,
    /// impd's `LEASED` (`{leases, otherCount}`): sleep or stop of a leased imp without force.
    Leased,
    /// impd's `LEASE_NOT_HELD`: a renew of a lease that expired, was released or is unknown.
    LeaseNotHeld,
    /// impd's `AGENT_OUTDATED`: the imp's agent predates the feature.
    AgentOutdated,
    /// impd's `MOVING` (`{retryAfterS}`): the imp moves between hosts.
    Moving,
    /// impd's `PRECONDITION_FAILED`: an exec requirement not met (`data: {reason, detail}`,
    /// [`ImpPortError::precondition`]), or a host not configured.
    PreconditionFailed,
    /// impd's `RAM_BUDGET_EXCEEDED`: no RAM to boot or wake.
    RamBudgetExceeded,
    /// impd's `SERVICE_UNAVAILABLE`: impd is shutting down.
    ServiceUnavailable,
    /// impd's `DISK_FULL`: the disk reserve would be cut.
    DiskFull,
    /// `/exec`'s `NO_SESSION` (`{bootId, coldBoots, previous?}`): nothing runs under that
    /// name in the current boot.
    NoSession,
    /// `/exec`'s `SESSION_LIMIT`: a 17th session.
    SessionLimit,
    /// `/exec`'s `EXEC_FAILED`: bad argv, cwd or user.
    ExecFailed,
    /// `/exec`'s `INNER_DOWN`: the imp's container is down.
    InnerDown,
    /// `/tunnel`'s `TUNNEL_LIMIT`.
    TunnelLimit,
    /// `/tunnel`'s `LISTEN_FAILED`: a busy or privileged port, a file in the way, a missing
    /// directory.
    ListenFailed,
    /// `/tunnel`'s `DIAL_FAILED`.
    DialFailed,
    /// Added by this client. Transport failure: no connection, a timeout (RPC or the 10 s
    /// socket open), a reset before any answer. Spec §14: an open that takes longer than 10 s
    /// is "unreachable".
    Unreachable,
    /// Added by this client. A plain 404 on `/rpc/...` without an oRPC envelope: impd has no
    /// such procedure (e.g. `leases.*` on an impd without leases, spec §1) or the base URL is
    /// wrong.
    UnknownProcedure,
    /// Added by this client. Any other non-2xx answer without an oRPC envelope (a proxy's 502,
    /// a GET refused, ...); `status` carries the HTTP status.
    HttpError,
    /// Added by this client. The WebSocket upgrade was refused with a status other than 401.
    /// Spec §2 calls this "the socket simply closed": a caller treats it like a close, not
    /// like a refusal of the request.
    UpgradeRefused,
    /// Added by this client. impd sent something this client cannot parse (not JSON, a missing
    /// field, an unknown channel byte, an unknown resume kind). The client closes the socket
    /// after reporting it.
    BadMessage,
    /// Added by this client. A socket ended (or was already gone when we wrote to it).
    /// `data.closeCode` carries the WebSocket close code when there was one (`null` for a
    /// transport loss).
    Closed,
    /// Added by this client. A `/tunnel` socket closed with 4000: the guest side ended without
    /// an eof (the imp slept, the listener went away). Spec §12.
    Lost,
    /// An `error` message that carried no code (spec §9.3: a schema violation; §9.9: a plain
    /// exec whose agent connection ended). Spelled as the empty string.
    Absent,
    /// A code this client does not know (a newer impd's, or one a caller adds), as spelled.
    Other(String),
}

impl ImpdCode {
    /// Every code but [`ImpdCode::Other`], for the round trip of their spellings.
    pub const KNOWN: [ImpdCode; 30] = [
        ImpdCode::BadRequest,
        ImpdCode::Unauthorized,
        ImpdCode::Forbidden,
        ImpdCode::NotFound,
        ImpdCode::Conflict,
        ImpdCode::InvalidState,
        ImpdCode::InvalidResume,
        ImpdCode::Leased,
        ImpdCode::LeaseNotHeld,
        ImpdCode::AgentOutdated,
        ImpdCode::Moving,
        ImpdCode::PreconditionFailed,
        ImpdCode::RamBudgetExceeded,
        ImpdCode::ServiceUnavailable,
        ImpdCode::DiskFull,
        ImpdCode::NoSession,
        ImpdCode::SessionLimit,
        ImpdCode::ExecFailed,
        ImpdCode::InnerDown,
        ImpdCode::TunnelLimit,
        ImpdCode::ListenFailed,
        ImpdCode::DialFailed,
        ImpdCode::Unreachable,
        ImpdCode::UnknownProcedure,
        ImpdCode::HttpError,
        ImpdCode::UpgradeRefused,
        ImpdCode::BadMessage,
        ImpdCode::Closed,
        ImpdCode::Lost,
        ImpdCode::Absent,
    ];

    /// The code as impd (or this client) spells it.
    pub fn as_str(&self) -> &str {
        match self {
            ImpdCode::BadRequest => "BAD_REQUEST",
            ImpdCode::Unauthorized => "UNAUTHORIZED",
            ImpdCode::Forbidden => "FORBIDDEN",
            ImpdCode::NotFound => "NOT_FOUND",
            ImpdCode::Conflict => "CONFLICT",
            ImpdCode::InvalidState => "INVALID_STATE",
            ImpdCode::InvalidResume => "INVALID_RESUME",
            ImpdCode::Leased => "LEASED",
            ImpdCode::LeaseNotHeld => "LEASE_NOT_HELD",
            ImpdCode::AgentOutdated => "AGENT_OUTDATED",
            ImpdCode::Moving => "MOVING",
            ImpdCode::PreconditionFailed => "PRECONDITION_FAILED",
            ImpdCode::RamBudgetExceeded => "RAM_BUDGET_EXCEEDED",
            ImpdCode::ServiceUnavailable => "SERVICE_UNAVAILABLE",
            ImpdCode::DiskFull => "DISK_FULL",
            ImpdCode::NoSession => "NO_SESSION",
            ImpdCode::SessionLimit => "SESSION_LIMIT",
            ImpdCode::ExecFailed => "EXEC_FAILED",
            ImpdCode::InnerDown => "INNER_DOWN",
            ImpdCode::TunnelLimit => "TUNNEL_LIMIT",
            ImpdCode::ListenFailed => "LISTEN_FAILED",
            ImpdCode::DialFailed => "DIAL_FAILED",
            ImpdCode::Unreachable => "UNREACHABLE",
            ImpdCode::UnknownProcedure => "UNKNOWN_PROCEDURE",
            ImpdCode::HttpError => "HTTP_ERROR",
            ImpdCode::UpgradeRefused => "UPGRADE_REFUSED",
            ImpdCode::BadMessage => "BAD_MESSAGE",
            ImpdCode::Closed => "CLOSED",
            ImpdCode::Lost => "LOST",
            ImpdCode::Absent => "",
            ImpdCode::Other(code) => code,
        }
    }

    /// The code `word` spells; one this client does not know is [`ImpdCode::Other`].
    pub fn parse(word: &str) -> ImpdCode {
        ImpdCode::KNOWN
            .into_iter()
            .find(|c| c.as_str() == word)
            .unwrap_or_else(|| ImpdCode::Other(word.to_string()))
    }
}

impl fmt::Display for ImpdCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for ImpdCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ImpdCode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ImpdCode, D::Error> {
        Ok(ImpdCode::parse(&String::deserialize(d)?))
    }
}

/// What went wrong talking to impd. `code` is stable and is what callers match on (through
/// [`ImpPortError::is`]); `message` is human text and never contractual.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("impd {code}: {message}")]
pub struct ImpPortError {
    /// impd's code, or one this client adds; [`ImpdCode::Absent`] for an `/exec` `error`
    /// message that carried none.
    pub code: ImpdCode,
    /// Human text from impd or from this client.
    pub message: String,
    /// The HTTP status when the error came from an HTTP answer (or a refused upgrade).
    pub status: Option<u16>,
    /// impd's `data` (its shape depends on `code`, spec §3), or `null`.
    pub data: Value,
}

impl ImpPortError {
    /// An error with no status and no data.
    pub fn new(code: ImpdCode, message: impl Into<String>) -> ImpPortError {
        ImpPortError {
            code,
            message: message.into(),
            status: None,
            data: Value::Null,
        }
    }

    /// Whether this is the given code; the way callers branch on impd's answers.
    pub fn is(&self, code: ImpdCode) -> bool {
        self.code == code
    }

    /// [`ImpdCode::Unreachable`] with a cause.
    pub fn unreachable(cause: impl std::fmt::Display) -> ImpPortError {
        ImpPortError::new(
            ImpdCode::Unreachable,
            format!("impd is unreachable: {cause}"),
        )
    }

    /// [`ImpdCode::Unauthorized`] with a cause.
    pub fn unauthorized(cause: impl Into<String>) -> ImpPortError {
        ImpPortError::new(ImpdCode::Unauthorized, cause)
    }

    /// [`ImpdCode::BadMessage`] with a description of what could not be parsed (never the payload:
    /// it may hold terminal bytes).
    pub fn bad_message(what: impl Into<String>) -> ImpPortError {
        ImpPortError::new(ImpdCode::BadMessage, what)
    }

    /// [`ImpdCode::Closed`] for a socket that is gone; `code` is its close code if one was
    /// seen.
    pub fn closed(code: Option<u16>, reason: &str) -> ImpPortError {
        let mut e = ImpPortError::new(
            ImpdCode::Closed,
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
        let e = ImpPortError::new(ImpdCode::parse("LEASED"), "leased");
        assert!(e.is(ImpdCode::Leased));
        assert!(!e.is(ImpdCode::parse("leased")));
    }

    #[test]
    fn codes_round_trip_through_their_spelling_and_unknown_ones_are_kept() {
        for code in ImpdCode::KNOWN {
            assert_eq!(ImpdCode::parse(code.as_str()), code);
            let json = serde_json::to_value(&code).unwrap();
            assert_eq!(json, code.as_str());
            assert_eq!(serde_json::from_value::<ImpdCode>(json).unwrap(), code);
        }
        let newer = ImpdCode::parse("QUOTA_EXCEEDED");
        assert_eq!(newer, ImpdCode::Other("QUOTA_EXCEEDED".into()));
        assert_eq!(newer.to_string(), "QUOTA_EXCEEDED");
        assert_eq!(ImpdCode::parse(""), ImpdCode::Absent);
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
        assert!(e.is(ImpdCode::Closed));
        assert_eq!(e.data["closeCode"], 1011);
        let lost = ImpPortError::closed(None, "reset");
        assert!(lost.data["closeCode"].is_null());
    }
}
