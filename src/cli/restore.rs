//! `atc restore`: revives every session that died with an old daemon
//! (`POST /v1/fleet/restore`) and says how many came back. While the daemon works through
//! them (one at a time, newest first) a progress line on stderr counts the ones already back,
//! from the events socket; it is drawn by indicatif, and only when stderr is a terminal.
//!
//! The CLI's count of candidates is its own reading of the list (exited with
//! `daemon_stopped`); the daemon may leave some out (a target that refuses), so the summary
//! compares what the daemon restored with what was waiting.

use std::collections::HashSet;
use std::io::IsTerminal;
use std::time::Duration;

use awc::ws::{Frame, Message};
use clap::Args;
use futures_util::{SinkExt, StreamExt};
use indicatif::{ProgressBar, ProgressFinish, ProgressStyle};

use super::output;
use atc_client::atc_protocol::responses::Restored;
use atc_client::atc_protocol::{Descriptor, ExitReason, FleetEvent, SessionId};
use atc_client::{routes, ClientError, DaemonClient, SessionLabels, WsConnection};

/// Arguments of `atc restore` (none yet).
#[derive(Debug, Args)]
pub struct RestoreArgs {}

/// How often the spinner and the elapsed time move.
const TICK: Duration = Duration::from_millis(120);

/// A restore revives sessions one after another, each a spawn; far longer than a single
/// request's bound.
const RESTORE_TIMEOUT: Duration = Duration::from_secs(600);

/// Restores the fleet; exit code 0 when the daemon answered (also when nothing was waiting).
pub async fn run(client: &DaemonClient, _args: RestoreArgs) -> anyhow::Result<i32> {
    let sessions = client.list_sessions().await?;
    let mut waiting: HashSet<SessionId> = sessions
        .iter()
        .filter(|s| restorable(s))
        .map(|s| s.id)
        .collect();
    let candidates = waiting.len();
    let bar = progress_bar(candidates);
    // The events socket only feeds the progress line, so without one it is not opened.
    let mut events = match &bar {
        Some(_) => Some(client.ws_connect(routes::EVENTS).await?),
        None => None,
    };
    let restore = client.post_json_within(routes::FLEET_RESTORE, RESTORE_TIMEOUT);
    tokio::pin!(restore);
    let answer = loop {
        tokio::select! {
            answer = &mut restore => break answer,
            // Only while there is a socket: an always-ready branch would starve the request.
            back = next_revived(&mut events), if events.is_some() => match (back, &bar) {
                (Some(session), Some(bar)) if waiting.remove(&session.id) => {
                    bar.inc(1);
                    bar.set_message(session.label());
                }
                // A session that was not waiting, or the socket is gone: the request still
                // answers, and the summary is what counts.
                (Some(_), _) => {}
                (None, _) => events = None,
            },
        }
    };
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let restored: Restored =
        serde_json::from_value(answer?).map_err(|err| ClientError::BadResponse {
            cause: format!("the restore answer does not parse: {err}"),
        })?;
    output::print(&format!("{}\n", summary(restored.restored, candidates)))?;
    Ok(0)
}

/// What the daemon's restore revives: sessions whose process ended with an old daemon.
fn restorable(s: &Descriptor) -> bool {
    !s.alive && s.exit_reason == Some(ExitReason::DaemonStopped)
}

/// The bar, when stderr is a terminal and there is something to count.
fn progress_bar(candidates: usize) -> Option<ProgressBar> {
    if candidates == 0 || !std::io::stderr().is_terminal() {
        return None;
    }
    let total = u64::try_from(candidates).unwrap_or(u64::MAX);
    let bar = ProgressBar::new(total).with_finish(ProgressFinish::AndClear);
    // The template is a literal; a mistake in it would show in the first run.
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} restoring {pos}/{len} sessions {msg} ({elapsed})")
    {
        bar.set_style(style);
    }
    bar.enable_steady_tick(TICK);
    Some(bar)
}

/// The next session the events socket shows alive; `None` when the socket ended (or there is
/// none), after which this is never asked again.
async fn next_revived(events: &mut Option<WsConnection>) -> Option<Descriptor> {
    let ws = events.as_mut()?;
    loop {
        match ws.next().await? {
            Ok(Frame::Text(text)) => match serde_json::from_slice::<FleetEvent>(&text) {
                Ok(FleetEvent::State { session }) if session.alive => return Some(*session),
                Ok(_) | Err(_) => {}
            },
            Ok(Frame::Ping(payload)) => {
                ws.send(Message::Pong(payload)).await.ok()?;
            }
            Ok(Frame::Close(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// `restored 3 sessions`, or `restored 2 of 3 sessions` when the daemon left some out.
pub fn summary(restored: u64, candidates: usize) -> String {
    let noun = |n: u64| if n == 1 { "session" } else { "sessions" };
    let waiting = u64::try_from(candidates).unwrap_or(u64::MAX);
    match (restored, waiting) {
        (0, 0) => "nothing to restore: no session died with an old daemon".to_string(),
        (r, w) if r < w => format!(
            "restored {r} of {w} {}; see `atc ls` for the ones left exited",
            noun(w)
        ),
        (r, _) => format!("restored {r} {}", noun(r)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_says_what_came_back() {
        assert_eq!(
            summary(0, 0),
            "nothing to restore: no session died with an old daemon"
        );
        assert_eq!(summary(1, 1), "restored 1 session");
        assert_eq!(summary(3, 3), "restored 3 sessions");
        assert_eq!(
            summary(2, 3),
            "restored 2 of 3 sessions; see `atc ls` for the ones left exited"
        );
    }

    #[test]
    fn only_sessions_that_died_with_the_daemon_are_waiting() {
        let gone = Descriptor {
            alive: false,
            exit_reason: Some(ExitReason::DaemonStopped),
            ..Descriptor::default()
        };
        assert!(restorable(&gone));
        let killed = Descriptor {
            exit_reason: Some(ExitReason::Killed),
            ..gone.clone()
        };
        assert!(!restorable(&killed));
        assert!(!restorable(&Descriptor {
            alive: true,
            ..gone
        }));
    }
}
