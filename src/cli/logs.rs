//! `atc logs ID|NAME`: a session's event trail (its agent's hook reports, from
//! `GET /v1/events/trail`), one line per event, oldest first; `-f` keeps following with the
//! trail's long poll until Ctrl-C. The trail is the whole fleet's, so it is filtered here.
//!
//! Without a cursor the daemon answers its latest events, at most [`TRAIL_PAGE`] of them for
//! the whole fleet: that is how far back the first page reaches. Following from its cursor
//! misses nothing after it.

use std::time::Duration;

use clap::Args;
use tokio::signal::unix::{signal, SignalKind};

use super::output;
use atc_client::atc_protocol::responses::{Trail, TrailEntry};
use atc_client::atc_protocol::SessionId;
use atc_client::{routes, ClientError, DaemonClient};

/// Arguments of `atc logs`.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// Session id (or the short id from `atc ls`) or name.
    pub session: String,
    /// Keep printing new events as they arrive, until Ctrl-C.
    #[arg(short, long)]
    pub follow: bool,
}

/// The most events one trail read returns (the daemon's cap).
const TRAIL_PAGE: u32 = 200;

/// How long one follow read waits for an event; under the client's 30 s request bound.
const FOLLOW_WAIT: Duration = Duration::from_secs(25);

/// Prints the trail, and with `-f` follows it. Exit code 0 (also on Ctrl-C while following).
pub async fn run(client: &DaemonClient, args: LogsArgs) -> anyhow::Result<i32> {
    let session = client.find_session(&args.session).await?;
    let id = session.id;
    let mut page = read(client, None, Duration::ZERO).await?;
    let mut shown = 0usize;
    if !args.follow {
        shown += print_page(&page, id)?;
        if shown == 0 {
            output::note(&format!(
                "no events for this session in the trail's latest {TRAIL_PAGE}; its agent \
                 reports them through its hooks (`atc logs -f` waits for new ones)"
            ));
        }
        return Ok(0);
    }
    let mut interrupt = signal(SignalKind::interrupt())
        .map_err(|err| anyhow::anyhow!("cannot watch for Ctrl-C: {err}"))?;
    let mut terminate = signal(SignalKind::terminate())
        .map_err(|err| anyhow::anyhow!("cannot watch for signals: {err}"))?;
    loop {
        print_page(&page, id)?;
        // `more`: the next page is already there, so it is read without waiting.
        let wait = if page.more {
            Duration::ZERO
        } else {
            FOLLOW_WAIT
        };
        let cursor = page.cursor.clone();
        tokio::select! {
            _ = interrupt.recv() => return Ok(0),
            _ = terminate.recv() => return Ok(0),
            next = read(client, Some(&cursor), wait) => page = next?,
        }
    }
}

async fn read(
    client: &DaemonClient,
    cursor: Option<&str>,
    wait: Duration,
) -> Result<Trail, ClientError> {
    let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
    let answer = client
        .get_json(&routes::trail(cursor, TRAIL_PAGE, wait_ms))
        .await?;
    serde_json::from_value(answer).map_err(|err| ClientError::BadResponse {
        cause: format!("the event trail does not parse: {err}"),
    })
}

/// Prints the page's events of session `id`; how many there were.
fn print_page(page: &Trail, id: SessionId) -> anyhow::Result<usize> {
    let lines: Vec<String> = page
        .events
        .iter()
        .filter(|e| e.atc_id == id)
        .map(format_event)
        .collect();
    if !lines.is_empty() {
        output::print(&format!("{}\n", lines.join("\n")))?;
    }
    Ok(lines.len())
}

/// `TIME  KIND  MESSAGE — DETAIL`: the normalized kind when there is one (else the hook's own
/// name), and only the parts the event has. Agent text may hold control characters, which
/// are shown as `?` rather than sent to the terminal; a newline is shown as `⏎` so one event
/// stays one line.
pub fn format_event(e: &TrailEntry) -> String {
    let mut line = format!(
        "{}  {}",
        printable(&e.ts),
        printable(e.kind.as_deref().unwrap_or(&e.event))
    );
    if e.kind.is_some() && e.kind.as_deref() != Some(e.event.as_str()) {
        line.push_str(&format!(" ({})", printable(&e.event)));
    }
    if let Some(message) = e.message.as_deref().filter(|m| !m.is_empty()) {
        line.push_str("  ");
        line.push_str(&printable(message));
    }
    if let Some(detail) = e.detail.as_deref().filter(|d| !d.is_empty()) {
        line.push_str(" — ");
        line.push_str(&printable(detail));
    }
    line
}

fn printable(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' => '⏎',
            c if c.is_control() => '?',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(event: &str, kind: Option<&str>, message: Option<&str>) -> TrailEntry {
        TrailEntry {
            id: 1,
            ts: "2026-12-01T21:04:10.000Z".into(),
            atc_id: SessionId::NIL,
            event: event.into(),
            message: message.map(str::to_string),
            session_id: None,
            kind: kind.map(str::to_string),
            detail: None,
        }
    }

    #[test]
    fn an_event_is_one_line_with_what_it_has() {
        assert_eq!(
            format_event(&entry("Notification", Some("needs-input"), Some("Allow?"))),
            "2026-12-01T21:04:10.000Z  needs-input (Notification)  Allow?"
        );
        assert_eq!(
            format_event(&entry("PreToolUse", None, None)),
            "2026-12-01T21:04:10.000Z  PreToolUse"
        );
        let done = TrailEntry {
            detail: Some("all\ngood\x1b[2J".into()),
            ..entry("Stop", Some("turn-done"), Some(""))
        };
        assert_eq!(
            format_event(&done),
            "2026-12-01T21:04:10.000Z  turn-done (Stop) — all⏎good?[2J"
        );
    }
}
