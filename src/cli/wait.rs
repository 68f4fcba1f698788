//! `atc wait ID --for done|needs_you|exited [--timeout S]`: follows the events socket until
//! the session reaches the state. Exits 0 when it does (also when it is already there),
//! 1 when the session ends (exits, or is forgotten) without reaching it, 2 on timeout.
//! Other failures (no such session, no daemon) are errors, which also exit 1 with a message.
//!
//! The socket is opened before the session's state is read, so a change between the two is
//! seen on the socket: nothing falls in a gap.

use std::time::Duration;

use atc_client::{routes, DaemonClient, FrameReader, Incoming, SessionLabels};
use atc_protocol::session::SessionState;
use clap::{Args, ValueEnum};
use serde_json::Value;

use super::output;

/// The exit status when the session ended without reaching the state.
pub const ENDED_OTHERWISE: i32 = 1;
/// The exit status when the timeout passed first.
pub const TIMED_OUT: i32 = 2;

/// Arguments of `atc wait`.
#[derive(Debug, Args)]
pub struct WaitArgs {
    /// Session id (or the short id from `atc ls`) or name.
    pub session: String,
    /// The state to wait for.
    #[arg(long = "for", value_enum, value_name = "STATE")]
    pub target: Target,
    /// Give up after this many seconds (exit 2); default: wait as long as it takes.
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub timeout: Option<Duration>,
}

/// The states a script can wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Target {
    /// The agent finished its turn.
    Done,
    /// The agent waits for its user.
    #[value(name = "needs_you", alias = "needs-you")]
    NeedsYou,
    /// The session's process ended.
    Exited,
}

impl Target {
    fn state(self) -> SessionState {
        match self {
            Target::Done => SessionState::Done,
            Target::NeedsYou => SessionState::NeedsYou,
            Target::Exited => SessionState::Exited,
        }
    }
}

/// What one state seen means for the wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Reached: exit 0.
    Reached,
    /// The session exited first: exit 1.
    EndedOtherwise,
    /// Keep waiting.
    Waiting,
}

/// The rule, on its own.
pub fn judge(target: Target, state: SessionState) -> Verdict {
    if state == target.state() {
        Verdict::Reached
    } else if state == SessionState::Exited {
        Verdict::EndedOtherwise
    } else {
        Verdict::Waiting
    }
}

fn parse_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("{text:?} is not a number of seconds from 0 up"))
}

/// Waits, and answers the exit status.
pub async fn run(client: &DaemonClient, args: WaitArgs) -> anyhow::Result<i32> {
    let id = client.resolve_session(&args.session).await?;
    let deadline = args.timeout.map(|t| tokio::time::Instant::now() + t);
    let mut events = FrameReader::<Value>::new(client.ws_connect(routes::EVENTS).await?);
    let start = client.find_session(&id).await?;
    let label = format!("session {}", start.label());
    let mut last = start.state;
    if let Some(status) = settle(args.target, Seen::State(last), &label) {
        return Ok(status);
    }
    loop {
        let timeout = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let frame = tokio::select! {
            () = timeout => {
                output::note(&format!(
                    "{label} is still {last} after {:?}; not {} yet",
                    args.timeout.unwrap_or_default(),
                    args.target.state()
                ));
                return Ok(TIMED_OUT);
            }
            frame = events.next() => frame,
        };
        let frame = frame.map_err(|e| anyhow::anyhow!("the events socket broke ({e})"))?;
        let event = match frame {
            Incoming::Text(event) => event,
            Incoming::Binary(_) => continue,
            ending => anyhow::bail!(
                "the daemon ended the events socket ({}) before {label} was {}",
                ending.ending().unwrap_or_default(),
                args.target.state()
            ),
        };
        let Some(seen) = about(&event, &id) else {
            continue;
        };
        if let Seen::State(state) = seen {
            last = state;
        }
        if let Some(status) = settle(args.target, seen, &label) {
            return Ok(status);
        }
    }
}

/// The exit status once `seen` settles the wait; `None`: keep waiting.
fn settle(target: Target, seen: Seen, label: &str) -> Option<i32> {
    match seen {
        Seen::State(state) => match judge(target, state) {
            Verdict::Reached => Some(0),
            Verdict::EndedOtherwise => Some(ended(label, target, "exited")),
            Verdict::Waiting => None,
        },
        Seen::Removed => Some(ended(label, target, "was forgotten")),
    }
}

/// What a fleet event says about our session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    State(SessionState),
    Removed,
}

/// Reads only what the wait needs from an event (so new fields or events do not stop it).
fn about(event: &Value, id: &str) -> Option<Seen> {
    match event.get("type")?.as_str()? {
        "session.added" | "session.state" => {
            let session = event.get("session")?;
            (session.get("id")?.as_str()? == id).then_some(())?;
            serde_json::from_value(session.get("state")?.clone())
                .ok()
                .map(Seen::State)
        }
        "session.removed" => (event.get("s")?.as_str()? == id).then_some(Seen::Removed),
        _ => None,
    }
}

fn ended(label: &str, target: Target, how: &str) -> i32 {
    output::note(&format!("{label} {how} without being {}", target.state()));
    ENDED_OTHERWISE
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reached_ended_or_waiting() {
        use SessionState::*;
        for (target, state, want) in [
            (Target::Done, Done, Verdict::Reached),
            (Target::Done, Running, Verdict::Waiting),
            (Target::Done, NeedsYou, Verdict::Waiting),
            (Target::Done, Exited, Verdict::EndedOtherwise),
            (Target::NeedsYou, NeedsYou, Verdict::Reached),
            (Target::NeedsYou, Done, Verdict::Waiting),
            (Target::NeedsYou, Exited, Verdict::EndedOtherwise),
            (Target::Exited, Exited, Verdict::Reached),
            (Target::Exited, Done, Verdict::Waiting),
            (Target::Exited, Running, Verdict::Waiting),
        ] {
            assert_eq!(judge(target, state), want, "{target:?} at {state:?}");
        }
    }

    #[test]
    fn only_this_sessions_events_count() {
        let id = "0b5c3f52-0000-4000-8000-000000000001";
        let other = "0b5c3f52-0000-4000-8000-000000000002";
        let state = |sid: &str, state: &str| json!({"type": "session.state", "session": {"id": sid, "state": state, "extra": 1}});
        assert_eq!(
            about(&state(id, "done"), id),
            Some(Seen::State(SessionState::Done))
        );
        assert_eq!(
            about(
                &json!({"type": "session.added", "session": {"id": id, "state": "needs_you"}}),
                id
            ),
            Some(Seen::State(SessionState::NeedsYou))
        );
        assert_eq!(about(&state(other, "done"), id), None);
        assert_eq!(about(&state(id, "no_such_state"), id), None);
        assert_eq!(
            about(&json!({"type": "session.removed", "s": id}), id),
            Some(Seen::Removed)
        );
        assert_eq!(
            about(&json!({"type": "session.removed", "s": other}), id),
            None
        );
        assert_eq!(
            about(&json!({"type": "permission.requested", "s": id}), id),
            None
        );
    }

    #[test]
    fn timeouts_are_seconds() {
        assert_eq!(parse_seconds("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_seconds("0.5"), Ok(Duration::from_millis(500)));
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("soon").is_err());
        assert!(parse_seconds("inf").is_err());
    }
}
