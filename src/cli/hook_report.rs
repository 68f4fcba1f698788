//! `atc hook-report`: run by an agent's hook inside a session. It reads the hook's JSON on
//! stdin and drops one line `{"atcId","key","event","payload"}` on the reporter socket named by
//! `ATC_SOCKET`, for the session named by `ATC_SESSION_ID`, with that session's
//! `ATC_REPORT_KEY` (inside an imp there is none: the socket there is the session's own). It always exits 0 within 2 s,
//! whatever happens: a hook must never slow down or break the agent that runs it.
//!
//! Codex's `notify` runs it with the JSON as its last argument instead (`atc hook-report
//! '{"type":"agent-turn-complete",…}'`): stdin is then not read, and the event is the
//! payload's `type` in PascalCase (`AgentTurnComplete`).
//!
//! Claude's statusline runs it too (`--event Statusline --status-file <state>/status.json`):
//! its JSON carries no event name, so the name comes from the flag, and what it prints on
//! stdout becomes the status line.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The whole budget, stdin included.
const BUDGET: Duration = Duration::from_secs(2);

/// Largest hook JSON read from stdin.
const MAX_INPUT: u64 = 1024 * 1024;

/// Flags of `atc hook-report`.
#[derive(Debug, Default, clap::Args)]
pub struct HookReportArgs {
    /// The event name, for callers whose JSON names none (Claude's statusline).
    #[arg(long)]
    pub event: Option<String>,
    /// Print a one-line fleet status read from this file (atc's `status.json`).
    #[arg(long)]
    pub status_file: Option<std::path::PathBuf>,
    /// The JSON as an argument rather than on stdin (Codex's `notify` passes it so); its
    /// event is its `type` unless `--event` names one.
    pub json: Option<String>,
}

/// Runs the reporter; the exit status is always 0.
pub fn run(args: &HookReportArgs) -> i32 {
    if let Some(file) = &args.status_file {
        // Printed first: the status line must not wait on the report.
        if let Some(line) = std::fs::read(file)
            .ok()
            .and_then(|b| crate::sessions::status_file::line(&b))
        {
            println!("{line}");
        }
    }
    report(args.event.as_deref(), args.json.as_deref())
}

fn report(event: Option<&str>, argument: Option<&str>) -> i32 {
    let deadline = Instant::now() + BUDGET;
    let (Some(atc_id), Some(socket)) = (
        std::env::var_os("ATC_SESSION_ID"),
        std::env::var_os("ATC_SOCKET"),
    ) else {
        return 0;
    };
    let key = std::env::var(crate::sessions::report_key::ENV).ok();
    let atc_id = atc_id.to_string_lossy();
    let line = match argument {
        Some(json) => argument_line(&atc_id, key.as_deref(), event, json),
        None => {
            let Some(input) = read_stdin(deadline) else {
                return 0;
            };
            report_line(&atc_id, key.as_deref(), event, &input)
        }
    };
    let Some(line) = line else {
        return 0;
    };
    if let Ok(mut conn) = std::os::unix::net::UnixStream::connect(socket) {
        let left = deadline.saturating_duration_since(Instant::now());
        if !left.is_zero() {
            // Fails only for a zero duration, ruled out just above.
            let _ = conn.set_write_timeout(Some(left));
            // Fire and forget: a daemon that is gone or slow loses this report, nothing more.
            let _ = conn.write_all(line.as_bytes());
        }
    }
    0
}

/// Stdin, up to [`MAX_INPUT`], or `None` once the budget ran out first.
fn read_stdin(deadline: Instant) -> Option<Vec<u8>> {
    // Stdin is read on a thread so a hook that never closes it cannot hold us past the budget.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        // A read error keeps what was read so far; the report is built from that.
        let _ = std::io::stdin().take(MAX_INPUT).read_to_end(&mut buf);
        // The receiver is gone only once the budget ran out; then there is no report to make.
        let _ = tx.send(buf);
    });
    rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .ok()
}

/// The line for JSON passed as an argument (Codex's `notify`): as [`report_line`], the event
/// being `event` when given, else the payload's `type`. `None` when the argument is over
/// [`MAX_INPUT`] bytes or not a JSON object with a string `type`.
pub fn argument_line(
    atc_id: &str,
    key: Option<&str>,
    event: Option<&str>,
    json: &str,
) -> Option<String> {
    if json.len() as u64 > MAX_INPUT {
        return None;
    }
    let payload: Value = serde_json::from_str(json).ok()?;
    let event = match event {
        Some(e) => e.to_string(),
        None => payload.get("type")?.as_str()?.to_string(),
    };
    report_line(atc_id, key, Some(&event), json.as_bytes())
}

/// The line for a hook's JSON: the event name is `event` when given, else `hook_event_name`
/// (or `hookEventName`, Grok's spelling), in PascalCase; `key` goes with it when there is one.
/// `None` when the input is not a JSON object with an event name.
pub fn report_line(
    atc_id: &str,
    key: Option<&str>,
    event: Option<&str>,
    input: &[u8],
) -> Option<String> {
    let payload: Value = serde_json::from_slice(input).ok()?;
    let event = event
        .or_else(|| {
            payload
                .get("hook_event_name")
                .or_else(|| payload.get("hookEventName"))
                .and_then(Value::as_str)
        })
        .filter(|e| !e.is_empty())
        .map(crate::agents::hooks::pascal_case)?;
    if !payload.is_object() {
        return None;
    }
    let mut line = json!({"atcId": atc_id, "event": event, "payload": payload});
    if let (Some(key), Some(fields)) = (key, line.as_object_mut()) {
        fields.insert("key".into(), key.into());
    }
    Some(format!("{line}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_carry_the_id_the_pascal_case_event_and_the_payload() {
        let line = report_line(
            "abc",
            Some("k1"),
            None,
            br#"{"hook_event_name":"user_prompt_submit","prompt":"hi"}"#,
        )
        .unwrap();
        let v: Value = serde_json::from_str(line.trim_end()).unwrap();
        assert_eq!(v["atcId"], "abc");
        assert_eq!(v["key"], "k1");
        assert_eq!(v["event"], "UserPromptSubmit");
        assert_eq!(v["payload"]["prompt"], "hi");
        let keyless = report_line("abc", None, None, br#"{"hookEventName":"Stop"}"#).unwrap();
        assert!(!keyless.contains("\"key\""), "{keyless}");
        assert!(report_line("abc", None, None, b"[]").is_none());
        assert!(report_line("abc", None, None, br#"{"no":"event"}"#).is_none());
        assert!(report_line("abc", None, None, b"garbage").is_none());
        let status =
            report_line("abc", None, Some("Statusline"), br#"{"session_id":"s"}"#).unwrap();
        assert!(status.contains(r#""event":"Statusline""#), "{status}");
    }

    #[test]
    fn a_json_argument_reports_under_its_type() {
        let notify = r#"{"type":"agent-turn-complete","last-assistant-message":"ok"}"#;
        let line = argument_line("abc", Some("k1"), None, notify).unwrap();
        let v: Value = serde_json::from_str(line.trim_end()).unwrap();
        assert_eq!(v["event"], "AgentTurnComplete");
        assert_eq!(v["payload"]["last-assistant-message"], "ok");
        assert!(argument_line("abc", None, None, r#"{"no":"type"}"#).is_none());
        assert!(argument_line("abc", None, None, r#"{"type":7}"#).is_none());
        assert!(argument_line("abc", None, None, "[1]").is_none());
        let huge = format!(
            r#"{{"type":"x","pad":"{}"}}"#,
            "p".repeat(MAX_INPUT as usize)
        );
        assert!(argument_line("abc", None, None, &huge).is_none());
    }
}
