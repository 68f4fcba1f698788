//! [`AgentSessionId`]: an agent's own session id, as a hook report names it (`session_id`,
//! Grok's `sessionId`). It comes from inside a session, so it is hostile input, and it ends up
//! in an argv (`claude --resume=<id>`, `codex resume -- <id>`), in the resume command a user
//! pastes into a shell, and in lookups of the agent's own files. So it is checked where a report
//! enters, and again where a row is read back, and nothing else builds one.
//!
//! The rule every id keeps: 1 to [`MAX_LEN`] characters of ASCII letters, digits, `.`, `_` and
//! `-`, starting with a letter or a digit, so it can never be read as a flag, split into two
//! words, or name another directory. Claude Code and Codex name their sessions with UUIDs, so
//! for those kinds nothing but a hyphenated UUID is their id format; other kinds keep the
//! general rule.

use crate::config::agent_kind::AgentKind;
use std::fmt;

/// Longest id accepted. Real ids are UUIDs (36 characters); the bound leaves room for other
/// agents' formats and stops a report from storing a long string under this name.
pub const MAX_LEN: usize = 128;

/// An agent session id that passed [`AgentSessionId::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AgentSessionId(String);

/// Why a reported id was refused. The id itself is not kept: it is hostile input, and a log
/// line must not carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadAgentSessionId {
    /// Empty, or longer than [`MAX_LEN`].
    #[error("an agent session id must be 1 to {MAX_LEN} characters long")]
    Length,
    /// Starts with something other than a letter or a digit (a `-` would read as a flag).
    #[error("an agent session id must start with a letter or a digit")]
    Start,
    /// Holds a character outside letters, digits, `.`, `_` and `-`.
    #[error("an agent session id may hold only letters, digits, '.', '_' and '-'")]
    Character,
    /// Not a UUID, for an agent whose ids are UUIDs.
    #[error("this agent's session ids are UUIDs")]
    NotUuid,
}

impl AgentSessionId {
    /// Checks `raw` against the rule every id keeps (see the module doc).
    pub fn parse(raw: &str) -> Result<AgentSessionId, BadAgentSessionId> {
        if raw.is_empty() || raw.len() > MAX_LEN {
            return Err(BadAgentSessionId::Length);
        }
        if !raw.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            return Err(BadAgentSessionId::Start);
        }
        if !raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err(BadAgentSessionId::Character);
        }
        Ok(AgentSessionId(raw.to_string()))
    }

    /// Checks `raw` as an id of an agent of `kind`: Claude's and Codex's are hyphenated UUIDs.
    pub fn parse_for(
        kind: Option<AgentKind>,
        raw: &str,
    ) -> Result<AgentSessionId, BadAgentSessionId> {
        let id = AgentSessionId::parse(raw)?;
        let uuid_only = kind.is_some_and(AgentKind::session_ids_are_uuids);
        if uuid_only && !is_hyphenated_uuid(raw) {
            return Err(BadAgentSessionId::NotUuid);
        }
        Ok(id)
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `8-4-4-4-12` hex digits: the form both agents print and accept (`uuid`'s parser also takes
/// braces, `urn:` and the simple form, which no agent writes).
fn is_hyphenated_uuid(raw: &str) -> bool {
    raw.len() == 36 && raw.as_bytes().get(8) == Some(&b'-') && uuid::Uuid::try_parse(raw).is_ok()
}

impl fmt::Display for AgentSessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_could_be_read_as_flags_or_words_are_refused() {
        for (raw, why) in [
            ("", BadAgentSessionId::Length),
            ("--dangerously-skip-permissions", BadAgentSessionId::Start),
            ("-x", BadAgentSessionId::Start),
            (".hidden", BadAgentSessionId::Start),
            ("a b", BadAgentSessionId::Character),
            ("a/../b", BadAgentSessionId::Character),
            ("a;rm", BadAgentSessionId::Character),
            ("a\nb", BadAgentSessionId::Character),
            ("é", BadAgentSessionId::Start),
        ] {
            assert_eq!(AgentSessionId::parse(raw), Err(why), "{raw:?}");
        }
        let long = "a".repeat(MAX_LEN + 1);
        assert_eq!(AgentSessionId::parse(&long), Err(BadAgentSessionId::Length));
        let ok = AgentSessionId::parse("g-1.two_3").unwrap();
        assert_eq!(ok.as_str(), "g-1.two_3");
    }

    #[test]
    fn claude_and_codex_ids_are_hyphenated_uuids_and_others_keep_the_general_rule() {
        let uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
        for kind in ["claude", "codex"] {
            assert!(
                AgentSessionId::parse_for(AgentKind::parse(kind), uuid).is_ok(),
                "{kind}"
            );
            for raw in [
                "s1",
                "0f8fad5bd9cb469fa16570867728950e",
                "0f8fad5b-d9cb-469f-a165-70867728950e-x",
            ] {
                assert_eq!(
                    AgentSessionId::parse_for(AgentKind::parse(kind), raw),
                    Err(BadAgentSessionId::NotUuid),
                    "{kind} {raw}"
                );
            }
            assert_eq!(
                AgentSessionId::parse_for(AgentKind::parse(kind), "--resume"),
                Err(BadAgentSessionId::Start)
            );
        }
        assert!(AgentSessionId::parse_for(Some(AgentKind::Grok), "s1").is_ok());
        assert!(AgentSessionId::parse_for(None, "s1").is_ok());
    }
}
