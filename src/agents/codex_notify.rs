//! Codex's `notify` program (issue 38): Codex runs it at the end of each turn with one JSON
//! argument, and atc sets it, for each start, to `atc hook-report` (`-c notify=[…]`, see
//! [`super::launch`]), which reports it as event `AgentTurnComplete` (the payload's `type`,
//! in PascalCase). This is what a Codex session says `done` by without any hook installed.
//!
//! Checked against the real Codex (0.169 and 0.171): the argument is
//! `{"type":"agent-turn-complete","thread-id","turn-id","cwd","input-messages":[…],
//! "last-assistant-message":…}`. Codex also runs it for its own title-generation turn, whose
//! first input message begins "Generate a concise, single-line task title"; that turn is not
//! the user's and must not end theirs.
//!
//! The payload comes from inside the session: a field of the wrong type refuses the report
//! whole, and the result is cut to [`DETAIL_MAX`] like every turn's.

use serde_json::Value;

use super::report_check::{self, ReportRefused, DETAIL_MAX};

/// The event a notify report arrives as.
pub const TURN_COMPLETE: &str = "AgentTurnComplete";

/// How Codex's title-generation turn's prompt begins.
const TITLE_PROMPT: &str = "Generate a concise, single-line task title";

/// What one `agent-turn-complete` notification says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notified {
    /// The user's turn ended, with the turn's last assistant message (cleaned and capped).
    TurnDone {
        /// The result.
        result: Option<String>,
    },
    /// Codex's own title-generation turn ended: nothing for the session's state.
    TitleTurn,
}

/// Reads an `agent-turn-complete` payload.
pub fn turn_complete(payload: &Value) -> Result<Notified, ReportRefused> {
    let shape = || ReportRefused::Notify;
    if payload.get("type").and_then(Value::as_str) != Some("agent-turn-complete") {
        return Err(shape());
    }
    for key in ["turn-id", "thread-id"] {
        if payload.get(key).is_some_and(|v| !v.is_string()) {
            return Err(shape());
        }
    }
    let first_input = match payload.get("input-messages") {
        None | Some(Value::Null) => None,
        Some(Value::Array(messages)) => {
            if !messages.iter().all(Value::is_string) {
                return Err(shape());
            }
            messages.first().and_then(Value::as_str)
        }
        Some(_) => return Err(shape()),
    };
    if first_input.is_some_and(|m| m.trim_start().starts_with(TITLE_PROMPT)) {
        return Ok(Notified::TitleTurn);
    }
    let result = match payload.get("last-assistant-message") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => {
            (!text.is_empty()).then(|| report_check::text_block(text, DETAIL_MAX))
        }
        Some(_) => return Err(shape()),
    };
    Ok(Notified::TurnDone { result })
}

/// The `-c` override that makes Codex run `atc` as its notify program: `notify=["<atc>",
/// "hook-report"]` (a TOML array; a JSON string is a TOML basic string).
pub fn config_override(atc: &std::path::Path) -> String {
    let program = Value::String(atc.display().to_string());
    format!("notify=[{program},\"hook-report\"]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn payload(first_input: &str, last: Value) -> Value {
        json!({
            "type": "agent-turn-complete",
            "thread-id": "0199a213-81c0-7800-8aa1-bbab2a035a53",
            "turn-id": "12",
            "cwd": "/w",
            "input-messages": [first_input, "more"],
            "last-assistant-message": last,
        })
    }

    #[test]
    fn the_users_turn_is_done_with_its_last_message() {
        assert_eq!(
            turn_complete(&payload("fix the bug", json!("Fixed it."))),
            Ok(Notified::TurnDone {
                result: Some("Fixed it.".into())
            })
        );
        assert_eq!(
            turn_complete(&payload("fix the bug", Value::Null)),
            Ok(Notified::TurnDone { result: None })
        );
        let bare = json!({"type": "agent-turn-complete"});
        assert_eq!(
            turn_complete(&bare),
            Ok(Notified::TurnDone { result: None })
        );
    }

    #[test]
    fn the_title_generation_turn_is_not_the_users() {
        let title = "Generate a concise, single-line task title for the following request: \
                     fix the bug";
        assert_eq!(
            turn_complete(&payload(title, json!("Fix the bug"))),
            Ok(Notified::TitleTurn)
        );
        // Only the first message decides, and only its start.
        let quoted = format!("please: {title}");
        assert!(matches!(
            turn_complete(&payload(&quoted, json!("ok"))),
            Ok(Notified::TurnDone { .. })
        ));
    }

    #[test]
    fn a_payload_of_the_wrong_shape_is_refused_and_a_long_result_is_cut_and_cleaned() {
        for bad in [
            json!({"type": "approval-requested"}),
            json!({"type": 7}),
            json!({}),
            json!({"type": "agent-turn-complete", "input-messages": "fix"}),
            json!({"type": "agent-turn-complete", "input-messages": [1]}),
            json!({"type": "agent-turn-complete", "last-assistant-message": {"a": 1}}),
            json!({"type": "agent-turn-complete", "turn-id": 12}),
        ] {
            assert_eq!(turn_complete(&bad), Err(ReportRefused::Notify), "{bad}");
        }
        let long = format!("\u{1b}]0;x\u{7}{}", "r".repeat(DETAIL_MAX * 2));
        let Ok(Notified::TurnDone { result: Some(r) }) = turn_complete(&payload("x", json!(long)))
        else {
            panic!("a long result is still a result");
        };
        assert_eq!(r.len(), DETAIL_MAX);
        assert!(!r.contains('\u{1b}'), "{r:.20}");
    }

    #[test]
    fn the_override_is_a_toml_array_naming_the_program() {
        assert_eq!(
            config_override(std::path::Path::new("/opt/a \"b\"/atc")),
            r#"notify=["/opt/a \"b\"/atc","hook-report"]"#
        );
    }
}
