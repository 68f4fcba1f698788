//! The id of a session: a v4 UUID minted at spawn and stable forever (spec §3.2).
//!
//! Session ids cross every module of the daemon and the wire both ways, next to other UUIDs
//! (the daemon's id, a broker binding's attempt id, an output stream's id). As a bare `Uuid`
//! any of those would be accepted where a session is meant; as [`SessionId`] the compiler
//! refuses the mix-up. Only the session's own minting ([`SessionId::new`]) and the edges that
//! read text (a path, a row, a report, `FromStr`) make one.
//!
//! On the wire it is exactly the UUID's hyphenated string (`#[serde(transparent)]`), so
//! nothing a client sees changes. It has no `utoipa::ToSchema` of its own on purpose: a field
//! of this type says `#[schema(value_type = uuid::Uuid)]`, which keeps the OpenAPI document's
//! inline `{type: string, format: uuid}`; a field that forgets it does not compile, instead of
//! silently turning into a `$ref` to a new component.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A session's id. `Default` is [`SessionId::NIL`], for building a [`crate::Descriptor`]
/// field by field; the daemon mints real ones with [`SessionId::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionId(Uuid);

impl SessionId {
    /// The nil id, which no session has: a placeholder before an id is known, and a fixed id
    /// a test can name in a `const`.
    pub const NIL: SessionId = SessionId(Uuid::nil());

    /// A fresh random (v4) id, for a new session (unlike `default()`, which is the nil id).
    pub fn new() -> SessionId {
        SessionId(Uuid::new_v4())
    }

    /// The UUID inside, for what needs its bytes or another of its text forms (a MAC over
    /// the id, a short display prefix).
    pub fn as_uuid(&self) -> &Uuid {
        &self.0
    }
}

impl Default for SessionId {
    fn default() -> SessionId {
        SessionId::NIL
    }
}

/// Wraps a UUID that is known to name a session (a test's fixed id, a value read back from
/// a place that only holds session ids). Being a call to `from`, it is never implicit.
impl From<Uuid> for SessionId {
    fn from(id: Uuid) -> SessionId {
        SessionId(id)
    }
}

/// The hyphenated lowercase form, as on the wire and in the store.
impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

/// Accepts every text form `Uuid::parse_str` does (hyphenated, simple, braced, `urn:uuid:`),
/// as the daemon did when ids were bare UUIDs; what it prints is always the hyphenated form.
impl FromStr for SessionId {
    type Err = BadSessionId;

    fn from_str(s: &str) -> Result<SessionId, BadSessionId> {
        Uuid::parse_str(s).map(SessionId).map_err(BadSessionId)
    }
}

/// Text that is not a session id. Its message is the UUID parser's, which names what is wrong
/// (length, a character, a group) without echoing the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSessionId(uuid::Error);

impl fmt::Display for BadSessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a session id: {}", self.0)
    }
}

impl std::error::Error for BadSessionId {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "3f2a9c1b-0d4e-4a7b-9c2d-1e5f6a7b8c9d";

    #[test]
    fn serde_round_trips_it_as_a_plain_string() {
        let id: SessionId = TEXT.parse().expect("a hyphenated uuid");
        let json = serde_json::to_string(&id).expect("serializes");
        assert_eq!(json, format!("\"{TEXT}\""));
        let back: SessionId = serde_json::from_str(&json).expect("deserializes");
        assert_eq!(back, id);
        assert_eq!(back.as_uuid(), &Uuid::parse_str(TEXT).expect("a uuid"));
    }

    #[test]
    fn it_prints_hyphenated_whatever_form_it_was_read_from() {
        for form in [
            TEXT.to_string(),
            TEXT.replace('-', ""),
            format!("{{{TEXT}}}"),
            format!("urn:uuid:{TEXT}"),
            TEXT.to_uppercase(),
        ] {
            let id: SessionId = form.parse().expect("a uuid form");
            assert_eq!(id.to_string(), TEXT, "{form}");
        }
    }

    #[test]
    fn text_that_is_no_uuid_is_refused_both_ways() {
        for bad in [
            "",
            "main",
            "3f2a9c1b-0d4e-4a7b-9c2d",
            "3f2a9c1b-0d4e-4a7b-9c2d-1e5f6a7b8c9z",
        ] {
            let err = bad.parse::<SessionId>().expect_err(bad);
            assert!(err.to_string().starts_with("not a session id: "), "{err}");
            let json = serde_json::Value::String(bad.into());
            assert!(serde_json::from_value::<SessionId>(json).is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<SessionId>("7").is_err());
    }

    #[test]
    fn new_ids_are_v4_and_distinct() {
        let (a, b) = (SessionId::new(), SessionId::new());
        assert_ne!(a, b);
        assert_eq!(a.as_uuid().get_version_num(), 4);
    }

    #[test]
    fn the_default_is_the_nil_id() {
        assert_eq!(SessionId::default(), SessionId::NIL);
        assert!(SessionId::NIL.as_uuid().is_nil());
    }
}
