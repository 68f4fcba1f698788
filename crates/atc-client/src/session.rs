//! Reading session answers into the protocol's [`Descriptor`], and the rule for finding a
//! session from what a user typed. The daemon resolves a full uuid or an exact name; the CLI
//! adds one convenience on top: the short id `atc ls` prints (a unique uuid prefix).

use atc_protocol::responses::{SessionEnvelope, SessionList};
use atc_protocol::Descriptor;

use super::error::ClientError;

/// How a client names a session to a person.
pub trait SessionLabels {
    /// The first 8 characters of the id: what `atc ls` shows and what users type back.
    fn short_id(&self) -> String;
    /// The name when there is one, else the short id, for messages about this session.
    fn label(&self) -> String;
}

impl SessionLabels for Descriptor {
    fn short_id(&self) -> String {
        self.id.to_string().chars().take(SHORT_ID_LEN).collect()
    }

    fn label(&self) -> String {
        if self.name.is_empty() {
            self.short_id()
        } else {
            self.name.clone()
        }
    }
}

/// Parses the `{sessions: [descriptor]}` answer of `GET /v1/sessions`.
pub fn parse_list(answer: serde_json::Value) -> Result<Vec<Descriptor>, ClientError> {
    serde_json::from_value::<SessionList>(answer)
        .map(|list| list.sessions)
        .map_err(|err| ClientError::BadResponse {
            cause: format!("the session list does not parse: {err}"),
        })
}

/// Parses the body of `GET /v1/sessions` as it came, without a JSON tree in between.
pub fn parse_list_body(body: &[u8]) -> Result<Vec<Descriptor>, ClientError> {
    serde_json::from_slice::<SessionList>(body)
        .map(|list| list.sessions)
        .map_err(|err| ClientError::BadResponse {
            cause: format!("the session list does not parse: {err}"),
        })
}

/// Parses the `{session: descriptor, ..}` answer of the per-session routes.
pub fn parse_one(answer: serde_json::Value) -> Result<Descriptor, ClientError> {
    serde_json::from_value::<SessionEnvelope>(answer)
        .map(|one| one.session)
        .map_err(|err| ClientError::BadResponse {
            cause: format!("the session descriptor does not parse: {err}"),
        })
}

/// How many characters of the uuid `atc ls` prints.
pub const SHORT_ID_LEN: usize = 8;

/// Shortest input tried as an id prefix; shorter hex strings are too likely to be meant as
/// names and to match several sessions.
const MIN_PREFIX_LEN: usize = 4;

/// The outcome of looking a typed id prefix up among sessions.
#[derive(Debug, PartialEq)]
pub enum PrefixMatch<'a> {
    /// Exactly one session's id starts with the prefix.
    One(&'a Descriptor),
    /// No session's id starts with it (or the input cannot be an id prefix).
    None,
    /// Several do; the user must type more.
    Many(Vec<&'a Descriptor>),
}

/// Finds the session whose uuid starts with `prefix` (case-insensitive). Only inputs that
/// could be a uuid prefix (hex digits and dashes, at least 4 characters) are tried.
pub fn match_id_prefix<'a>(sessions: &'a [Descriptor], prefix: &str) -> PrefixMatch<'a> {
    let could_be_id =
        prefix.len() >= MIN_PREFIX_LEN && prefix.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    if !could_be_id {
        return PrefixMatch::None;
    }
    let prefix = prefix.to_ascii_lowercase();
    let mut found: Vec<&Descriptor> = sessions
        .iter()
        .filter(|s| s.id.to_string().starts_with(&prefix))
        .collect();
    match found.len() {
        0 => PrefixMatch::None,
        1 => found.pop().map_or(PrefixMatch::None, PrefixMatch::One),
        _ => PrefixMatch::Many(found),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_id(id: &str) -> Descriptor {
        Descriptor {
            id: id.parse().expect("test ids are uuids"),
            ..Descriptor::default()
        }
    }

    #[test]
    fn list_and_one_answers_parse_and_bad_ones_do_not() {
        let one = serde_json::to_value(SessionEnvelope {
            session: with_id("5f0c2a1e-8b7d-4c3e-9f10-0123456789ab"),
        })
        .unwrap();
        let mut with_extra = one.clone();
        with_extra["warnings"] = serde_json::json!(["x"]);
        with_extra["session"]["somethingNew"] = serde_json::json!({"x": 1});
        let parsed = parse_one(with_extra).unwrap();
        assert_eq!(parsed.short_id(), "5f0c2a1e");
        let list = parse_list(serde_json::json!({"sessions": [one["session"], one["session"]]}));
        assert_eq!(list.unwrap().len(), 2);
        assert!(parse_list(serde_json::json!({})).is_err());
        assert!(parse_one(serde_json::json!({"session": {"id": 5}})).is_err());
    }

    #[test]
    fn a_list_body_parses_from_its_bytes_with_unknown_fields_and_bad_ones_do_not() {
        let one = serde_json::to_value(with_id("5f0c2a1e-8b7d-4c3e-9f10-0123456789ab")).unwrap();
        let mut newer = one.clone();
        newer["somethingNew"] = serde_json::json!({"x": 1});
        let body = serde_json::to_vec(&serde_json::json!({"sessions": [one, newer]})).unwrap();
        let list = parse_list_body(&body).unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[1].short_id(), "5f0c2a1e");
        assert!(parse_list_body(br#"{"sessions":[{"id":5}]}"#).is_err());
        assert!(parse_list_body(b"").is_err());
    }

    #[test]
    fn unnamed_session_is_labelled_by_short_id() {
        assert_eq!(
            with_id("abcdef01-2345-6789-abcd-ef0123456789").label(),
            "abcdef01"
        );
    }

    #[test]
    fn unique_prefix_matches() {
        let all = [
            with_id("abcd1111-0000-0000-0000-000000000000"),
            with_id("abce2222-0000-0000-0000-000000000000"),
        ];
        assert_eq!(match_id_prefix(&all, "ABCD1"), PrefixMatch::One(&all[0]));
    }

    #[test]
    fn ambiguous_prefix_lists_candidates() {
        let all = [
            with_id("abcd1111-0000-0000-0000-000000000000"),
            with_id("abcd2222-0000-0000-0000-000000000000"),
        ];
        assert!(matches!(match_id_prefix(&all, "abcd"), PrefixMatch::Many(v) if v.len() == 2));
    }

    #[test]
    fn short_or_non_hex_input_is_not_a_prefix() {
        let all = [with_id("abcd1111-0000-0000-0000-000000000000")];
        assert_eq!(match_id_prefix(&all, "abc"), PrefixMatch::None);
        assert_eq!(match_id_prefix(&all, "abcz"), PrefixMatch::None);
        assert_eq!(match_id_prefix(&all, "ffff"), PrefixMatch::None);
    }
}
