//! The part of the daemon's session descriptor that the CLI reads, and the rule for finding a
//! session from what a user typed. The daemon resolves a full uuid or an exact name; the CLI
//! adds one convenience on top: the short id `atc ls` prints (a unique uuid prefix).

use serde::Deserialize;

use super::error::ClientError;

/// The descriptor fields the CLI shows or acts on. Unknown fields are ignored and missing ones
/// default, so a daemon that adds or drops a display field does not break `atc ls`.
/// `state` and `exit_reason` stay as the daemon spells them: the CLI only prints them, and a
/// state added later then prints without a client update.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionSummary {
    /// The session's uuid.
    pub id: String,
    /// Display name (unique per daemon); may be absent for unnamed sessions.
    pub name: Option<String>,
    /// Agent id, e.g. `claude` or `shell`.
    pub agent: String,
    /// `running`, `needs_you`, `done` or `exited`.
    pub state: String,
    /// Whether a harness process is running for the session.
    pub alive: bool,
    /// Current PTY width.
    pub cols: u32,
    /// Current PTY height.
    pub rows: u32,
    /// Working directory the session was spawned in.
    pub cwd: String,
    /// Spawn time, epoch milliseconds.
    pub created_at: u64,
    /// Exit status of the last harness, when it exited normally.
    pub exit_code: Option<i64>,
    /// Signal that ended the last harness, when one did.
    pub exit_signal: Option<i64>,
    /// Why the last harness ended: `exited`, `killed`, `daemon_stopped`, `spawn_failed`,
    /// `suspended`, `ended`.
    pub exit_reason: Option<String>,
    /// Where it runs.
    pub locator: SummaryLocator,
    /// The layers behind `state` (the CLI reads the connection of remote sessions).
    pub lifecycle: SummaryLifecycle,
}

/// `locator` as the CLI reads it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SummaryLocator {
    /// The target's id.
    #[serde(rename = "targetID")]
    pub target_id: String,
}

/// `lifecycle` as the CLI reads it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SummaryLifecycle {
    /// `local`, `attached`, `reattaching` or `detached`.
    pub attachment: String,
}

impl SessionSummary {
    /// Parses one descriptor as the daemon sends it.
    pub fn from_value(value: &serde_json::Value) -> Result<SessionSummary, serde_json::Error> {
        SessionSummary::deserialize(value)
    }

    /// The first 8 characters of the id: what `atc ls` shows and what users type back.
    pub fn short_id(&self) -> String {
        self.id.chars().take(SHORT_ID_LEN).collect()
    }

    /// The name when there is one, else the short id, for messages about this session.
    pub fn label(&self) -> String {
        match &self.name {
            Some(name) if !name.is_empty() => name.clone(),
            _ => self.short_id(),
        }
    }
}

/// Parses the `{sessions: [descriptor]}` answer of `GET /v1/sessions`.
pub fn parse_list(answer: &serde_json::Value) -> Result<Vec<SessionSummary>, ClientError> {
    let list = answer
        .get("sessions")
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| ClientError::BadResponse {
            cause: "the session list has no `sessions` array".to_string(),
        })?;
    list.iter()
        .map(|value| {
            SessionSummary::from_value(value).map_err(|err| ClientError::BadResponse {
                cause: format!("a session descriptor does not parse: {err}"),
            })
        })
        .collect()
}

/// Parses the `{session: descriptor, ..}` answer of the per-session routes.
pub fn parse_one(answer: &serde_json::Value) -> Result<SessionSummary, ClientError> {
    let value = answer
        .get("session")
        .ok_or_else(|| ClientError::BadResponse {
            cause: "the answer has no `session` field".to_string(),
        })?;
    SessionSummary::from_value(value).map_err(|err| ClientError::BadResponse {
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
    One(&'a SessionSummary),
    /// No session's id starts with it (or the input cannot be an id prefix).
    None,
    /// Several do; the user must type more.
    Many(Vec<&'a SessionSummary>),
}

/// Finds the session whose uuid starts with `prefix` (case-insensitive). Only inputs that
/// could be a uuid prefix (hex digits and dashes, at least 4 characters) are tried.
pub fn match_id_prefix<'a>(sessions: &'a [SessionSummary], prefix: &str) -> PrefixMatch<'a> {
    let could_be_id =
        prefix.len() >= MIN_PREFIX_LEN && prefix.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    if !could_be_id {
        return PrefixMatch::None;
    }
    let prefix = prefix.to_ascii_lowercase();
    let mut found: Vec<&SessionSummary> = sessions
        .iter()
        .filter(|s| s.id.to_ascii_lowercase().starts_with(&prefix))
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

    fn with_id(id: &str) -> SessionSummary {
        SessionSummary {
            id: id.to_string(),
            ..SessionSummary::default()
        }
    }

    #[test]
    fn descriptor_parses_with_unknown_and_missing_fields() -> anyhow::Result<()> {
        let value = serde_json::json!({
            "id": "5f0c2a1e-8b7d-4c3e-9f10-0123456789ab", "name": "fix-bug", "namedBy": "user",
            "agent": "shell", "cwd": "/tmp", "state": "running", "alive": true, "cols": 80,
            "rows": 24, "createdAt": 1700000000000u64, "exitCode": null, "kind": "pty",
            "somethingNew": {"x": 1}
        });
        let s = SessionSummary::from_value(&value)?;
        assert_eq!(s.short_id(), "5f0c2a1e");
        assert_eq!(s.label(), "fix-bug");
        assert!(s.alive);
        assert_eq!((s.cols, s.rows), (80, 24));
        assert_eq!(s.exit_code, None);
        Ok(())
    }

    #[test]
    fn list_and_one_answers_parse() -> anyhow::Result<()> {
        let list = parse_list(&serde_json::json!({"sessions": [{"id": "a"}, {"id": "b"}]}))?;
        assert_eq!(list.len(), 2);
        assert_eq!(
            parse_one(&serde_json::json!({"session": {"id": "c"}}))?.id,
            "c"
        );
        assert!(parse_list(&serde_json::json!({})).is_err());
        assert!(parse_one(&serde_json::json!({"session": {"id": 5}})).is_err());
        Ok(())
    }

    #[test]
    fn unnamed_session_is_labelled_by_short_id() {
        assert_eq!(with_id("abcdef0123456789").label(), "abcdef01");
    }

    #[test]
    fn unique_prefix_matches() {
        let all = [with_id("abcd1111-0000"), with_id("abce2222-0000")];
        assert_eq!(match_id_prefix(&all, "ABCD1"), PrefixMatch::One(&all[0]));
    }

    #[test]
    fn ambiguous_prefix_lists_candidates() {
        let all = [with_id("abcd1111"), with_id("abcd2222")];
        assert!(matches!(match_id_prefix(&all, "abcd"), PrefixMatch::Many(v) if v.len() == 2));
    }

    #[test]
    fn short_or_non_hex_input_is_not_a_prefix() {
        let all = [with_id("abcd1111")];
        assert_eq!(match_id_prefix(&all, "abc"), PrefixMatch::None);
        assert_eq!(match_id_prefix(&all, "abcz"), PrefixMatch::None);
        assert_eq!(match_id_prefix(&all, "ffff"), PrefixMatch::None);
    }
}
