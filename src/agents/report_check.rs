//! What a hook report may carry into the daemon, checked where it enters. A report comes from
//! inside a session (or an imp): its event name, ids, paths and texts are hostile input. The
//! values that end up in an argv, a path or a name are validated, and a report with a bad one
//! is refused whole ([`ReportRefused`]), so nothing of it is stored. Texts that are only shown
//! (`lastMsg`, a trail row's message and detail) are cleaned of control characters, so a
//! report cannot drive the terminal of someone running `atc ls` or `atc logs`, and cut to the
//! caps below, so a report cannot grow the store or every descriptor without bound.

use std::path::PathBuf;

use serde_json::Value;

use super::agent_session_id::BadAgentSessionId;

/// Longest event name. Hook names are short PascalCase words (`UserPromptSubmit`).
pub const EVENT_MAX: usize = 64;
/// Characters of a message kept for `lastMsg` and the trail (a notification's text, a tool's
/// name in Codex's approval message). `lastMsg` rides on every session descriptor, so it is
/// kept to a line's worth.
pub const MESSAGE_MAX: usize = 200;
/// Bytes of a turn's result kept on the row and in the trail (spec §3.4: 16 KiB).
pub const DETAIL_MAX: usize = 16 * 1024;
/// Longest transcript path accepted (Linux's `PATH_MAX`).
pub const PATH_MAX: usize = 4096;
/// Longest Grok `promptId` remembered; longer ones are refused.
pub const PROMPT_ID_MAX: usize = 128;

/// Why a report was refused. Nothing of a refused report is stored; the reporter's counters
/// and the log say it happened, without the hostile value itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReportRefused {
    /// The event name is empty, too long, or not letters and digits.
    #[error("the event name must be 1 to {EVENT_MAX} ASCII letters and digits")]
    Event,
    /// The agent session id does not have the agent's id format.
    #[error("bad agent session id: {0}")]
    AgentSessionId(#[from] BadAgentSessionId),
    /// The transcript path is not an absolute path of at most [`PATH_MAX`] bytes without
    /// control characters.
    #[error("the transcript path must be absolute, at most {PATH_MAX} bytes, without control characters")]
    TranscriptPath,
    /// A Grok `promptId` is longer than [`PROMPT_ID_MAX`].
    #[error("the prompt id is longer than {PROMPT_ID_MAX} characters")]
    PromptId,
    /// A Codex `notify` payload has a field of the wrong type (`agents::codex_notify`).
    #[error("the notify payload's fields have the wrong types")]
    Notify,
    /// The session sent more reports than its rate allows.
    #[error("the session's report rate is over its limit")]
    RateLimited,
}

impl ReportRefused {
    /// A stable word for logs and counters.
    pub fn reason(self) -> &'static str {
        match self {
            ReportRefused::Event => "bad_event",
            ReportRefused::AgentSessionId(_) => "bad_agent_session_id",
            ReportRefused::TranscriptPath => "bad_transcript_path",
            ReportRefused::PromptId => "bad_prompt_id",
            ReportRefused::Notify => "bad_notify",
            ReportRefused::RateLimited => "rate_limited",
        }
    }
}

/// Checks an event name.
pub fn event(name: &str) -> Result<(), ReportRefused> {
    let ok =
        (1..=EVENT_MAX).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric());
    ok.then_some(()).ok_or(ReportRefused::Event)
}

/// The first of `keys` that holds a non-empty string.
pub fn text<'a>(payload: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| payload.get(*k).and_then(Value::as_str))
        .filter(|s| !s.is_empty())
}

/// The transcript path a report names (`transcript_path`, or Grok's `transcriptPath`), checked.
/// Checking it says nothing of what is there: whether it may be opened is the reader's call
/// (see `agents::named_file`).
pub fn transcript_path(payload: &Value) -> Result<Option<PathBuf>, ReportRefused> {
    let Some(raw) = text(payload, &["transcript_path", "transcriptPath"]) else {
        return Ok(None);
    };
    let ok = raw.len() <= PATH_MAX && raw.starts_with('/') && !raw.chars().any(char::is_control);
    ok.then(|| Some(PathBuf::from(raw)))
        .ok_or(ReportRefused::TranscriptPath)
}

/// `raw` as one line of at most `max` characters: every control character (C0, DEL, C1; a
/// newline too) and every bidirectional override becomes a space.
pub fn one_line(raw: &str, max: usize) -> String {
    raw.chars()
        .take(max)
        .map(|c| {
            if c.is_control() || is_bidi_control(c) {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// `raw` as text of at most `max` bytes, cut on a character boundary: newlines and tabs stay,
/// every other control character and bidirectional override becomes a space.
pub fn text_block(raw: &str, max: usize) -> String {
    let mut out = String::with_capacity(raw.len().min(max));
    for c in raw.chars() {
        if out.len() + c.len_utf8() > max {
            break;
        }
        let keep = matches!(c, '\n' | '\t') || !(c.is_control() || is_bidi_control(c));
        out.push(if keep { c } else { ' ' });
    }
    out
}

/// The characters that reorder text around them (U+202A–U+202E, U+2066–U+2069: the
/// embeddings, overrides and isolates of Unicode's bidirectional algorithm), which can make a
/// message or a name read as something else. Session names refuse them by this same test.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn event_names_are_short_words() {
        assert_eq!(event("UserPromptSubmit"), Ok(()));
        for bad in ["", "Stop\n", "a b", "--x", "Évén"] {
            assert_eq!(event(bad), Err(ReportRefused::Event), "{bad:?}");
        }
        assert_eq!(event(&"A".repeat(EVENT_MAX)), Ok(()));
        assert_eq!(event(&"A".repeat(EVENT_MAX + 1)), Err(ReportRefused::Event));
    }

    #[test]
    fn transcript_paths_must_be_absolute_bounded_and_plain() {
        let path = |v: Value| transcript_path(&json!({ "transcript_path": v }));
        assert_eq!(path(json!("/h/t.jsonl")), Ok(Some("/h/t.jsonl".into())));
        assert_eq!(
            transcript_path(&json!({"transcriptPath": "/g/t"})),
            Ok(Some("/g/t".into()))
        );
        assert_eq!(transcript_path(&json!({})), Ok(None));
        assert_eq!(path(json!("")), Ok(None));
        assert_eq!(path(json!(1)), Ok(None));
        for bad in ["relative/t", "/a\u{0}b", "/a\nb", "-rf"] {
            assert_eq!(
                path(json!(bad)),
                Err(ReportRefused::TranscriptPath),
                "{bad:?}"
            );
        }
        let long = format!("/{}", "a".repeat(PATH_MAX));
        assert_eq!(path(json!(long)), Err(ReportRefused::TranscriptPath));
    }

    #[test]
    fn shown_texts_lose_control_characters_and_are_cut() {
        assert_eq!(one_line("a\u{1b}[2Jb\nc\u{9b}d", 80), "a [2Jb c d");
        assert_eq!(one_line("x\u{202E}y\u{2066}z", 80), "x y z");
        assert_eq!(
            one_line(&"é".repeat(300), MESSAGE_MAX).chars().count(),
            MESSAGE_MAX
        );
        assert_eq!(text_block("l1\n\tl2\u{1b}]0;t\u{7}", 100), "l1\n\tl2 ]0;t ");
        let cut = text_block(&"é".repeat(10), 5);
        assert_eq!(cut, "éé");
        assert_eq!(
            text_block(&"x".repeat(DETAIL_MAX * 2), DETAIL_MAX).len(),
            DETAIL_MAX
        );
    }
}
