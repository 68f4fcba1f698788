//! What an agent's hook report means (spec §9.5): each agent kind names its hooks differently,
//! and this module turns a report into one normalized kind the attention state machine reads.
//! Pure functions over a small per-session memory ([`HookMemory`]); the session applies the
//! result. A report whose values break [`super::report_check`]'s rules is refused before the
//! memory changes.

use crate::config::agent_kind::AgentKind;
use std::collections::VecDeque;

use serde_json::Value;

use super::agent_session_id::AgentSessionId;
use super::codex_notify;
use super::report_check::{self, ReportRefused, DETAIL_MAX, MESSAGE_MAX, PROMPT_ID_MAX};

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

/// What a report carries for the session, every text cleaned and capped
/// ([`report_check::one_line`], [`report_check::text_block`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    /// The kind.
    pub kind: HookKind,
    /// A message for `lastMsg` (notification text, prompt preview): one line, at most
    /// [`MESSAGE_MAX`] characters.
    pub message: Option<String>,
    /// The turn's result text (turn-done), at most [`DETAIL_MAX`] bytes.
    pub result: Option<String>,
    /// The agent's own session id, when the report names it.
    pub agent_session_id: Option<AgentSessionId>,
}

/// `UserPromptSubmit` previews are cut to this many characters (spec §3.4).
const PROMPT_PREVIEW: usize = 80;

/// Longest tool name quoted in Codex's approval message.
const TOOL_MAX: usize = 64;

fn line(payload: &Value, keys: &[&str], max: usize) -> Option<String> {
    report_check::text(payload, keys).map(|s| report_check::one_line(s, max))
}

/// Grok sessions a [`HookMemory`] remembers the latest prompt of (spec §9.5: "per-session state
/// capped at 256 entries"). One terminal sees a new Grok session on each `/new` or resume; the
/// oldest is forgotten first.
pub const GROK_PROMPTS_CAP: usize = 256;

/// What [`normalize`] remembers between the reports of one atc session. The session owns it
/// and passes it to every call; only `normalize` changes it.
#[derive(Debug, Default)]
pub struct HookMemory {
    /// The previous normalized kind (Grok's idle prompt after a permission prompt is only a
    /// heartbeat).
    last: Option<HookKind>,
    /// Grok: the `promptId` of the latest `UserPromptSubmit` per Grok session id (`""` for
    /// reports without one), least recently submitted first; at most [`GROK_PROMPTS_CAP`].
    prompts: VecDeque<(String, String)>,
}

impl HookMemory {
    /// The previous normalized kind.
    pub fn last(&self) -> Option<HookKind> {
        self.last
    }

    fn submitted(&mut self, session: &str, prompt: String) {
        self.prompts.retain(|(s, _)| s != session);
        if self.prompts.len() >= GROK_PROMPTS_CAP {
            self.prompts.pop_front();
        }
        self.prompts.push_back((session.to_string(), prompt));
    }

    /// A stop is stale when it names a prompt and a later one of the same Grok session was
    /// submitted since. A stop without a prompt id, or of a session whose prompts are not
    /// known, is taken at its word.
    fn is_stale(&self, session: &str, prompt: Option<&str>) -> bool {
        let Some(prompt) = prompt else {
            return false;
        };
        self.prompts
            .iter()
            .find(|(s, _)| s == session)
            .is_some_and(|(_, latest)| latest != prompt)
    }
}

/// Maps one report of an agent of `agent` kind and records it in `memory`. A report with an
/// event name, an agent session id or a prompt id that breaks the rules is refused, and
/// `memory` is left as it was.
pub fn normalize(
    agent: Option<AgentKind>,
    event: &str,
    payload: &Value,
    memory: &mut HookMemory,
) -> Result<Normalized, ReportRefused> {
    report_check::event(event)?;
    let agent_session_id = report_check::text(payload, &["session_id", "sessionId"])
        .map(|raw| AgentSessionId::parse_for(agent, raw))
        .transpose()?;
    let prompt_id = report_check::text(payload, &["promptId", "prompt_id"]);
    if prompt_id.is_some_and(|p| p.chars().count() > PROMPT_ID_MAX) {
        return Err(ReportRefused::PromptId);
    }
    let grok_session = agent_session_id.as_ref().map_or("", AgentSessionId::as_str);
    let stale = agent == Some(AgentKind::Grok) && memory.is_stale(grok_session, prompt_id);
    if agent == Some(AgentKind::Grok) && event == "UserPromptSubmit" {
        if let Some(p) = prompt_id {
            memory.submitted(grok_session, p.to_string());
        }
    }
    let last = memory.last;
    let (kind, message, result) = match (agent, event) {
        (_, "SessionStart") => (HookKind::Started, None, None),
        (_, "SessionEnd") => (HookKind::Ended, None, None),
        (_, "UserPromptSubmit") => (
            HookKind::PromptSubmitted,
            line(payload, &["prompt"], PROMPT_PREVIEW),
            None,
        ),
        (Some(AgentKind::Claude), "Notification") => (
            HookKind::NeedsInput,
            line(payload, &["message"], MESSAGE_MAX),
            None,
        ),
        (Some(AgentKind::Claude), "Stop") | (Some(AgentKind::Codex), "Stop") => (
            HookKind::TurnDone,
            None,
            report_check::text(payload, &["last_assistant_message"])
                .map(|r| report_check::text_block(r, DETAIL_MAX)),
        ),
        // Codex's notify program at a turn's end; its own title-generation turn is not the
        // user's.
        (Some(AgentKind::Codex), codex_notify::TURN_COMPLETE) => {
            match codex_notify::turn_complete(payload)? {
                codex_notify::Notified::TurnDone { result } => (HookKind::TurnDone, None, result),
                codex_notify::Notified::TitleTurn => (HookKind::Heartbeat, None, None),
            }
        }
        (Some(AgentKind::Codex), "PermissionRequest") => {
            let tool =
                line(payload, &["tool_name", "tool"], TOOL_MAX).unwrap_or_else(|| "a tool".into());
            (
                HookKind::NeedsInput,
                Some(format!("waiting for approval: {tool}")),
                None,
            )
        }
        (Some(AgentKind::Grok), "Notification") => {
            match payload.get("type").and_then(Value::as_str) {
                Some("permission_prompt") => (
                    HookKind::NeedsInput,
                    line(payload, &["message"], MESSAGE_MAX),
                    None,
                ),
                Some("idle_prompt") if last == Some(HookKind::NeedsInput) => {
                    (HookKind::Heartbeat, None, None)
                }
                Some("idle_prompt") => (HookKind::TurnDone, None, None),
                _ => (HookKind::Heartbeat, None, None),
            }
        }
        // A stop of a prompt that a newer one superseded is only a heartbeat.
        (Some(AgentKind::Grok), "Stop")
            if !stale && payload.get("reason").and_then(Value::as_str) == Some("end_turn") =>
        {
            (HookKind::TurnDone, None, None)
        }
        (Some(AgentKind::Grok), "StopFailure") | (Some(AgentKind::Grok), "StopCancelled")
            if !stale =>
        {
            (HookKind::TurnDone, None, None)
        }
        _ => (HookKind::Heartbeat, None, None),
    };
    memory.last = Some(kind);
    Ok(Normalized {
        kind,
        message,
        result,
        agent_session_id,
    })
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

    const UUID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

    fn kind(agent: &str, event: &str, payload: Value) -> HookKind {
        normalize(
            AgentKind::parse(agent),
            event,
            &payload,
            &mut HookMemory::default(),
        )
        .unwrap()
        .kind
    }

    /// Feeds reports to one memory, answering their kinds.
    fn kinds(agent: &str, reports: &[(&str, Value)]) -> Vec<HookKind> {
        let mut memory = HookMemory::default();
        reports
            .iter()
            .map(|(event, payload)| {
                normalize(AgentKind::parse(agent), event, payload, &mut memory)
                    .unwrap()
                    .kind
            })
            .collect()
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
            Some(AgentKind::Codex),
            "PermissionRequest",
            &json!({"tool_name": "shell", "session_id": UUID}),
            &mut HookMemory::default(),
        )
        .unwrap();
        assert_eq!(n.message.as_deref(), Some("waiting for approval: shell"));
        assert_eq!(
            n.agent_session_id.map(|id| id.to_string()).as_deref(),
            Some(UUID)
        );
        let long = "x".repeat(200);
        let n = normalize(
            Some(AgentKind::Claude),
            "UserPromptSubmit",
            &json!({"prompt": long}),
            &mut HookMemory::default(),
        )
        .unwrap();
        assert_eq!(n.message.map(|m| m.chars().count()), Some(80));
        let n = normalize(
            Some(AgentKind::Claude),
            "Stop",
            &json!({"last_assistant_message": "all done"}),
            &mut HookMemory::default(),
        )
        .unwrap();
        assert_eq!(n.result.as_deref(), Some("all done"));
    }

    #[test]
    fn grok_idle_prompts_are_turn_done_unless_a_permission_prompt_came_just_before() {
        use HookKind::*;
        let permission = ("Notification", json!({"type": "permission_prompt"}));
        let idle = ("Notification", json!({"type": "idle_prompt"}));
        let other = ("Notification", json!({"type": "auth_success"}));
        assert_eq!(
            kinds(
                "grok",
                &[permission.clone(), idle.clone(), idle.clone(), other, idle]
            ),
            vec![NeedsInput, Heartbeat, TurnDone, Heartbeat, TurnDone]
        );
    }

    #[test]
    fn grok_stops_are_turn_done_only_for_the_latest_prompt() {
        use HookKind::*;
        let submit = |p: &str| ("UserPromptSubmit", json!({"promptId": p, "sessionId": "g"}));
        let stop = |p: &str| {
            (
                "Stop",
                json!({"reason": "end_turn", "promptId": p, "sessionId": "g"}),
            )
        };
        assert_eq!(
            kinds(
                "grok",
                &[submit("p1"), submit("p2"), stop("p1"), stop("p2")]
            ),
            vec![PromptSubmitted, PromptSubmitted, Heartbeat, TurnDone]
        );
        for event in ["StopFailure", "StopCancelled"] {
            let end = |p: &str| (event, json!({"promptId": p, "sessionId": "g"}));
            assert_eq!(
                kinds("grok", &[submit("p1"), submit("p2"), end("p1"), end("p2")]),
                vec![PromptSubmitted, PromptSubmitted, Heartbeat, TurnDone],
                "{event}"
            );
        }
        // Stops without a prompt id, or of a prompt never seen submitted, count.
        assert_eq!(
            kinds(
                "grok",
                &[
                    submit("p1"),
                    ("Stop", json!({"reason": "end_turn", "sessionId": "g"})),
                    (
                        "StopFailure",
                        json!({"promptId": "p0", "sessionId": "other"})
                    ),
                ]
            ),
            vec![PromptSubmitted, TurnDone, TurnDone]
        );
        // A stop for another reason is never a turn end.
        assert_eq!(
            kinds(
                "grok",
                &[
                    submit("p1"),
                    (
                        "Stop",
                        json!({"reason": "tool_use", "promptId": "p1", "sessionId": "g"})
                    )
                ]
            ),
            vec![PromptSubmitted, Heartbeat]
        );
        // Prompt ids are per Grok session.
        assert_eq!(
            kinds(
                "grok",
                &[
                    submit("p1"),
                    (
                        "UserPromptSubmit",
                        json!({"promptId": "q1", "sessionId": "h"})
                    ),
                    stop("p1"),
                ]
            ),
            vec![PromptSubmitted, PromptSubmitted, TurnDone]
        );
        // Other agents' stops know nothing of prompt ids.
        assert_eq!(
            kinds(
                "claude",
                &[
                    ("UserPromptSubmit", json!({"promptId": "p2"})),
                    ("Stop", json!({"promptId": "p1"}))
                ]
            ),
            vec![PromptSubmitted, TurnDone]
        );
    }

    #[test]
    fn grok_prompt_memory_keeps_the_latest_256_sessions() {
        let mut memory = HookMemory::default();
        let submit = |m: &mut HookMemory, s: usize, p: &str| {
            normalize(
                Some(AgentKind::Grok),
                "UserPromptSubmit",
                &json!({"promptId": p, "sessionId": format!("s{s}")}),
                m,
            )
            .unwrap();
        };
        for s in 0..=GROK_PROMPTS_CAP {
            submit(&mut memory, s, "new");
        }
        assert_eq!(memory.prompts.len(), GROK_PROMPTS_CAP);
        // s0 was forgotten: its stale stop is taken at its word; s1's is still stale.
        let stop = |m: &mut HookMemory, s: usize| {
            normalize(
                Some(AgentKind::Grok),
                "StopFailure",
                &json!({"promptId": "old", "sessionId": format!("s{s}")}),
                m,
            )
            .unwrap()
            .kind
        };
        assert_eq!(stop(&mut memory, 0), HookKind::TurnDone);
        assert_eq!(stop(&mut memory, 1), HookKind::Heartbeat);
        // Submitting again refreshes a session instead of adding one.
        submit(&mut memory, 1, "newer");
        assert_eq!(memory.prompts.len(), GROK_PROMPTS_CAP);
        assert_eq!(memory.prompts.back().map(|(s, _)| s.as_str()), Some("s1"));
    }

    #[test]
    fn reports_with_hostile_values_are_refused_and_leave_the_memory_as_it_was() {
        use crate::agents::agent_session_id::BadAgentSessionId;
        let mut memory = HookMemory::default();
        let refused = |m: &mut HookMemory, agent: &str, event: &str, payload: Value| {
            normalize(AgentKind::parse(agent), event, &payload, m).unwrap_err()
        };
        assert_eq!(
            refused(
                &mut memory,
                "claude",
                "SessionStart",
                json!({"session_id": "--dangerously-skip-permissions"})
            ),
            ReportRefused::AgentSessionId(BadAgentSessionId::Start)
        );
        assert_eq!(
            refused(
                &mut memory,
                "codex",
                "SessionStart",
                json!({"session_id": "s1"})
            ),
            ReportRefused::AgentSessionId(BadAgentSessionId::NotUuid)
        );
        assert_eq!(
            refused(&mut memory, "grok", "Stop\u{1b}", json!({})),
            ReportRefused::Event
        );
        let long = "p".repeat(PROMPT_ID_MAX + 1);
        assert_eq!(
            refused(
                &mut memory,
                "grok",
                "UserPromptSubmit",
                json!({"promptId": long, "sessionId": "g"})
            ),
            ReportRefused::PromptId
        );
        assert_eq!(memory.last(), None);
        assert!(memory.prompts.is_empty());
    }

    #[test]
    fn messages_and_results_are_cleaned_and_capped() {
        let n = normalize(
            Some(AgentKind::Claude),
            "Notification",
            &json!({"message": format!("\u{1b}]0;x\u{7}{}", "m".repeat(500))}),
            &mut HookMemory::default(),
        )
        .unwrap();
        let message = n.message.unwrap();
        assert_eq!(message.chars().count(), MESSAGE_MAX);
        assert!(message.starts_with(" ]0;x m"), "{message}");
        let n = normalize(
            Some(AgentKind::Claude),
            "Stop",
            &json!({"last_assistant_message": "x".repeat(DETAIL_MAX + 10)}),
            &mut HookMemory::default(),
        )
        .unwrap();
        assert_eq!(n.result.map(|r| r.len()), Some(DETAIL_MAX));
    }

    #[test]
    fn codex_notify_ends_the_users_turn_but_not_its_title_turn() {
        let turn = |first: &str| {
            normalize(
                Some(AgentKind::Codex),
                codex_notify::TURN_COMPLETE,
                &json!({"type": "agent-turn-complete", "input-messages": [first],
                        "last-assistant-message": "reply"}),
                &mut HookMemory::default(),
            )
            .unwrap()
        };
        let done = turn("do it");
        assert_eq!(
            (done.kind, done.result.as_deref()),
            (HookKind::TurnDone, Some("reply"))
        );
        let title = turn("Generate a concise, single-line task title for: do it");
        assert_eq!((title.kind, title.result), (HookKind::Heartbeat, None));
        let mut memory = HookMemory::default();
        assert_eq!(
            normalize(
                Some(AgentKind::Codex),
                codex_notify::TURN_COMPLETE,
                &json!({"type": "agent-turn-complete", "input-messages": 3}),
                &mut memory,
            ),
            Err(ReportRefused::Notify)
        );
        assert_eq!(memory.last(), None);
        // Another agent's report of that name is nothing to it.
        assert_eq!(
            kind("claude", codex_notify::TURN_COMPLETE, json!({})),
            HookKind::Heartbeat
        );
    }

    #[test]
    fn event_names_become_pascal_case() {
        assert_eq!(pascal_case("session_start"), "SessionStart");
        assert_eq!(pascal_case("SessionStart"), "SessionStart");
        assert_eq!(pascal_case("user-prompt-submit"), "UserPromptSubmit");
    }
}
