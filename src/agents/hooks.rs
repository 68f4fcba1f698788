//! What an agent's hook report means (spec §9.5): each agent kind names its hooks differently,
//! and this module turns a report into one normalized kind the attention state machine reads.
//! Pure functions; the session applies the result.

use serde_json::Value;

/// A hook report, normalized (spec §3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookKind {
    /// The agent started (or resumed).
    Started,
    /// The user submitted a prompt; the agent is working.
    PromptSubmitted,
    /// The agent waits for the user (a permission prompt, a question).
    NeedsInput,
    /// The agent finished its turn.
    TurnDone,
    /// The agent's session ended.
    Ended,
    /// Nothing for the state machine; ids are still captured.
    Heartbeat,
}

impl HookKind {
    /// The trail spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            HookKind::Started => "started",
            HookKind::PromptSubmitted => "prompt-submitted",
            HookKind::NeedsInput => "needs-input",
            HookKind::TurnDone => "turn-done",
            HookKind::Ended => "ended",
            HookKind::Heartbeat => "heartbeat",
        }
    }
}

/// What a report carries for the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    /// The kind.
    pub kind: HookKind,
    /// A message for `lastMsg` (notification text, prompt preview).
    pub message: Option<String>,
    /// The turn's result text (turn-done).
    pub result: Option<String>,
    /// The agent's own session id, when the report names it.
    pub agent_session_id: Option<String>,
}

/// `UserPromptSubmit` previews are cut to this many characters (spec §3.4).
const PROMPT_PREVIEW: usize = 80;

fn text(payload: &Value, keys: &[&str]) -> Option<String> {
    keys.iter()
        .find_map(|k| payload.get(*k).and_then(Value::as_str))
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Maps one report of an agent of `agent` kind. `last` is the previous normalized kind of this
/// session (Grok's idle prompt after a permission prompt is only a heartbeat).
pub fn normalize(agent: &str, event: &str, payload: &Value, last: Option<HookKind>) -> Normalized {
    let agent_session_id = text(payload, &["session_id", "sessionId"]);
    let (kind, message, result) = match (agent, event) {
        (_, "SessionStart") => (HookKind::Started, None, None),
        (_, "SessionEnd") => (HookKind::Ended, None, None),
        (_, "UserPromptSubmit") => (
            HookKind::PromptSubmitted,
            text(payload, &["prompt"]).map(|p| p.chars().take(PROMPT_PREVIEW).collect()),
            None,
        ),
        ("claude", "Notification") => (HookKind::NeedsInput, text(payload, &["message"]), None),
        ("claude", "Stop") | ("codex", "Stop") => (
            HookKind::TurnDone,
            None,
            text(payload, &["last_assistant_message"]),
        ),
        ("codex", "PermissionRequest") => {
            let tool = text(payload, &["tool_name", "tool"]).unwrap_or_else(|| "a tool".into());
            (
                HookKind::NeedsInput,
                Some(format!("waiting for approval: {tool}")),
                None,
            )
        }
        ("grok", "Notification") => match payload.get("type").and_then(Value::as_str) {
            Some("permission_prompt") => (HookKind::NeedsInput, text(payload, &["message"]), None),
            Some("idle_prompt") if last == Some(HookKind::NeedsInput) => {
                (HookKind::Heartbeat, None, None)
            }
            Some("idle_prompt") => (HookKind::TurnDone, None, None),
            _ => (HookKind::Heartbeat, None, None),
        },
        ("grok", "Stop") if payload.get("reason").and_then(Value::as_str) == Some("end_turn") => {
            (HookKind::TurnDone, None, None)
        }
        ("grok", "StopFailure") | ("grok", "StopCancelled") => (HookKind::TurnDone, None, None),
        _ => (HookKind::Heartbeat, None, None),
    };
    Normalized {
        kind,
        message,
        result,
        agent_session_id,
    }
}

/// `session_start` / `sessionStart` / `SessionStart` → `SessionStart`.
pub fn pascal_case(name: &str) -> String {
    name.split(['_', '-'])
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            match c.next() {
                Some(first) => first.to_uppercase().chain(c).collect::<String>(),
                None => String::new(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kind(agent: &str, event: &str, payload: Value) -> HookKind {
        normalize(agent, event, &payload, None).kind
    }

    #[test]
    fn every_agent_maps_its_hooks() {
        for agent in ["claude", "codex", "grok"] {
            assert_eq!(kind(agent, "SessionStart", json!({})), HookKind::Started);
            assert_eq!(
                kind(agent, "UserPromptSubmit", json!({})),
                HookKind::PromptSubmitted
            );
            assert_eq!(kind(agent, "SessionEnd", json!({})), HookKind::Ended);
        }
        assert_eq!(
            kind("claude", "Notification", json!({})),
            HookKind::NeedsInput
        );
        assert_eq!(kind("claude", "Stop", json!({})), HookKind::TurnDone);
        assert_eq!(kind("claude", "PreToolUse", json!({})), HookKind::Heartbeat);
        assert_eq!(
            kind("codex", "PermissionRequest", json!({})),
            HookKind::NeedsInput
        );
        assert_eq!(kind("codex", "Stop", json!({})), HookKind::TurnDone);
        assert_eq!(
            kind("grok", "Notification", json!({"type": "permission_prompt"})),
            HookKind::NeedsInput
        );
        assert_eq!(
            kind("grok", "Notification", json!({"type": "idle_prompt"})),
            HookKind::TurnDone
        );
        assert_eq!(
            normalize(
                "grok",
                "Notification",
                &json!({"type": "idle_prompt"}),
                Some(HookKind::NeedsInput)
            )
            .kind,
            HookKind::Heartbeat
        );
        assert_eq!(
            kind("grok", "Stop", json!({"reason": "end_turn"})),
            HookKind::TurnDone
        );
        assert_eq!(
            kind("grok", "Stop", json!({"reason": "other"})),
            HookKind::Heartbeat
        );
        assert_eq!(kind("grok", "StopCancelled", json!({})), HookKind::TurnDone);
    }

    #[test]
    fn messages_results_and_ids_are_carried() {
        let n = normalize(
            "codex",
            "PermissionRequest",
            &json!({"tool_name": "shell", "session_id": "s1"}),
            None,
        );
        assert_eq!(n.message.as_deref(), Some("waiting for approval: shell"));
        assert_eq!(n.agent_session_id.as_deref(), Some("s1"));
        let long = "x".repeat(200);
        let n = normalize("claude", "UserPromptSubmit", &json!({"prompt": long}), None);
        assert_eq!(n.message.map(|m| m.chars().count()), Some(80));
        let n = normalize(
            "claude",
            "Stop",
            &json!({"last_assistant_message": "all done"}),
            None,
        );
        assert_eq!(n.result.as_deref(), Some("all done"));
    }

    #[test]
    fn event_names_become_pascal_case() {
        assert_eq!(pascal_case("session_start"), "SessionStart");
        assert_eq!(pascal_case("SessionStart"), "SessionStart");
        assert_eq!(pascal_case("user-prompt-submit"), "UserPromptSubmit");
    }
}
