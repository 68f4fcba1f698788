//! `<state>/status.json` (spec §1.1): fleet counts for statusline reporters inside sessions
//! that do not speak the API. Rewritten after fleet changes, at most once per debounce.

use std::path::Path;

use serde::Serialize;

use atc_protocol::{Descriptor, SessionState};

/// What the file holds.
#[derive(Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetStatus {
    /// Sessions whose agent is working.
    pub running: usize,
    /// Sessions waiting for the user.
    #[serde(rename = "needs_you")]
    pub needs_you: usize,
    /// Sessions whose turn is done.
    pub done: usize,
    /// Sessions without a process.
    pub exited: usize,
    /// Sessions waiting for the user that nobody has looked at yet (`needs_you` and unread).
    pub urgent: usize,
    /// Name of the first `needs_you` session in list order.
    pub needs_you_name: Option<String>,
}

impl FleetStatus {
    /// Counts a list of sessions, in list order.
    pub fn of<'a>(sessions: impl IntoIterator<Item = &'a Descriptor>) -> FleetStatus {
        let mut s = FleetStatus::default();
        for d in sessions {
            match d.state {
                SessionState::Running => s.running += 1,
                SessionState::NeedsYou => {
                    s.needs_you += 1;
                    if d.unread {
                        s.urgent += 1;
                    }
                    if s.needs_you_name.is_none() {
                        s.needs_you_name = Some(d.name.clone());
                    }
                }
                SessionState::Done => s.done += 1,
                SessionState::Exited => s.exited += 1,
            }
        }
        s
    }
}

/// Where the file lives in a state dir.
pub fn path(state_dir: &Path) -> std::path::PathBuf {
    state_dir.join("status.json")
}

/// Writes the file atomically (temp file, then rename).
pub fn write(state_dir: &Path, status: &FleetStatus) -> std::io::Result<()> {
    let tmp = state_dir.join("status.json.tmp");
    std::fs::write(
        &tmp,
        serde_json::to_vec(status).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(&tmp, path(state_dir))
}

/// The one line a statusline shows for a fleet status file's contents, e.g.
/// `atc: 2 running · 1 needs you (api) · 3 done`; `None` when it cannot be read.
pub fn line(contents: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(contents).ok()?;
    let n = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    let mut parts = Vec::new();
    if n("running") > 0 {
        parts.push(format!("{} running", n("running")));
    }
    if n("needs_you") > 0 {
        let who = v
            .get("needsYouName")
            .and_then(serde_json::Value::as_str)
            .map(|name| format!(" ({name})"))
            .unwrap_or_default();
        parts.push(format!("{} needs you{who}", n("needs_you")));
    }
    if n("done") > 0 {
        parts.push(format!("{} done", n("done")));
    }
    if parts.is_empty() {
        parts.push("idle".into());
    }
    Some(format!("atc: {}", parts.join(" · ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use atc_protocol::NamedBy;

    #[test]
    fn the_statusline_reads_the_file() {
        let status = FleetStatus {
            running: 2,
            needs_you: 1,
            done: 3,
            exited: 4,
            urgent: 1,
            needs_you_name: Some("api".into()),
        };
        let bytes = serde_json::to_vec(&status).unwrap();
        assert_eq!(
            line(&bytes).as_deref(),
            Some("atc: 2 running · 1 needs you (api) · 3 done")
        );
        assert_eq!(line(b"{}").as_deref(), Some("atc: idle"));
        assert_eq!(line(b"nope"), None);
    }

    fn session(name: &str, state: SessionState, unread: bool) -> Descriptor {
        Descriptor {
            id: atc_protocol::SessionId::new(),
            name: name.into(),
            named_by: NamedBy::Auto,
            agent: "shell".into(),
            cwd: "/".into(),
            state,
            unread,
            last_msg: String::new(),
            state_source: None,
            alive: state != SessionState::Exited,
            exit_code: None,
            exit_signal: None,
            exit_reason: None,
            pinned: false,
            cols: 80,
            rows: 24,
            created_at: 0,
            last_attached_at: None,
            kind: atc_protocol::OutputKind::Pty,
            stream: String::new(),
            locator: atc_protocol::Locator {
                daemon_id: uuid::Uuid::nil(),
                target_id: "local".into(),
            },
            target_identity: String::new(),
            agent_session_id: None,
            limits: None,
            usage: None,
            parent: None,
            host_key: atc_protocol::SessionId::default(),
            lifecycle: atc_protocol::Lifecycle {
                desired: atc_protocol::Desired::Run,
                vm: atc_protocol::VmState::None,
                harness: atc_protocol::HarnessLayer::Running,
                attachment: atc_protocol::Attachment::Local,
            },
            auth: None,
            workspace: None,
        }
    }

    #[test]
    fn counts_states_urgency_and_the_first_waiting_name() {
        let fleet = [
            session("a", SessionState::Running, false),
            session("b", SessionState::NeedsYou, false),
            session("c", SessionState::NeedsYou, true),
            session("d", SessionState::Done, true),
            session("e", SessionState::Exited, true),
        ];
        let s = FleetStatus::of(&fleet);
        assert_eq!(
            (s.running, s.needs_you, s.done, s.exited, s.urgent),
            (1, 2, 1, 1, 1)
        );
        assert_eq!(s.needs_you_name.as_deref(), Some("b"));
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["needs_you"], 2);
        assert_eq!(json["needsYouName"], "b");
    }
}
