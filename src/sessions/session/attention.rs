//! Attention (spec §3.4) and the permission requests it opens (spec §8): the hook-driven
//! state of a running session, its `unread` flag and its `lastMsg`. Entering `needs_you`
//! opens a permission request carrying the `lastMsg` of that moment; leaving it, by any way
//! (a prompt, a turn done, an attach, the process ending), dismisses the session's pending
//! requests. Plain state: it answers the [`PermissionChange`] to make and the session actor
//! sends it to the registry. Below it, the actor's side: applying a hook report (spec §3.4,
//! the trail of §9.5) and telling the registry.

use actix::prelude::*;

use super::report_budget::Admission;
use super::Session;
use crate::agents::agent_session_id::AgentSessionId;
use crate::agents::hooks::{normalize, HookKind};
use crate::agents::report_check::{self, ReportRefused};
use crate::clock::rfc3339_now;
use crate::providers::{HookReported, ReportOrigin};
use atc_protocol::{SessionState, StateSource};

/// What the permission registry is to be told after a transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionChange {
    /// The session started waiting for its user: open a request with this message.
    Open(String),
    /// It no longer waits: dismiss its pending requests.
    Dismiss,
}

/// What `lastMsg` says: a message, or that a revived agent CLI is adopting its own session
/// (resuming it) until its `started` report comes, when it says `adopted`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LastMsg {
    /// A message.
    Said(String),
    /// A revived agent resuming its own session, not yet started.
    Adopting,
}

impl LastMsg {
    /// The `lastMsg` text.
    pub fn as_str(&self) -> &str {
        match self {
            LastMsg::Said(text) => text,
            LastMsg::Adopting => "adopting…",
        }
    }
}

impl From<&str> for LastMsg {
    fn from(text: &str) -> LastMsg {
        LastMsg::Said(text.to_string())
    }
}

impl From<String> for LastMsg {
    fn from(text: String) -> LastMsg {
        LastMsg::Said(text)
    }
}

impl PartialEq<&str> for LastMsg {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A session's attention, `unread` and `lastMsg`.
#[derive(Debug)]
pub struct Attention {
    state: SessionState,
    unread: bool,
    last_msg: LastMsg,
    /// Where the state came from (`None`: attention `none`).
    source: Option<StateSource>,
}

impl Attention {
    /// A running session with nothing unread and no message yet, whose state will come from
    /// `source`.
    pub fn new(source: Option<StateSource>) -> Attention {
        Attention {
            state: SessionState::Running,
            unread: false,
            last_msg: LastMsg::Said(String::new()),
            source,
        }
    }

    /// Where the state came from.
    pub fn source(&self) -> Option<StateSource> {
        self.source
    }

    /// Says where the next state comes from.
    pub fn set_source(&mut self, source: StateSource) {
        self.source = Some(source);
    }

    /// The attention state while a process runs.
    pub fn state(&self) -> SessionState {
        self.state
    }

    /// Whether something happened that the user has not seen.
    pub fn unread(&self) -> bool {
        self.unread
    }

    /// What the session last said.
    pub fn last_msg(&self) -> &str {
        self.last_msg.as_str()
    }

    /// Replaces `lastMsg`.
    pub fn say(&mut self, msg: impl Into<LastMsg>) {
        self.last_msg = msg.into();
    }

    /// Marks the session unread (`true`) or read.
    pub fn set_unread(&mut self, unread: bool) {
        self.unread = unread;
    }

    /// Changes the state; see the module doc for the permission change it answers.
    pub fn set(&mut self, next: SessionState) -> Option<PermissionChange> {
        let was = std::mem::replace(&mut self.state, next);
        match (
            was == SessionState::NeedsYou,
            next == SessionState::NeedsYou,
        ) {
            (false, true) => Some(PermissionChange::Open(self.last_msg.as_str().to_string())),
            (true, false) => Some(PermissionChange::Dismiss),
            _ => None,
        }
    }

    /// A client attached: the session is read, and attaching answers a request for attention.
    pub fn attached(&mut self) -> Option<PermissionChange> {
        self.unread = false;
        if self.state != SessionState::NeedsYou {
            return None;
        }
        self.last_msg = "attached".into();
        self.set(SessionState::Running)
    }

    /// The process ended: without a process the session waits for nobody.
    pub fn ended(&mut self) -> Option<PermissionChange> {
        self.set(SessionState::Running)
    }

    /// One hook report of `kind`, with the message it carried.
    pub fn on_hook(&mut self, kind: HookKind, message: Option<String>) -> Option<PermissionChange> {
        if matches!(
            kind,
            HookKind::PromptSubmitted | HookKind::NeedsInput | HookKind::TurnDone
        ) {
            self.source = Some(StateSource::Hooks);
        }
        match kind {
            HookKind::Started => {
                if self.last_msg == LastMsg::Adopting {
                    self.last_msg = "adopted".into();
                }
                None
            }
            HookKind::PromptSubmitted => {
                self.unread = false;
                self.last_msg = message.unwrap_or_else(|| "working".into()).into();
                self.set(SessionState::Running)
            }
            HookKind::NeedsInput => {
                self.unread = true;
                self.last_msg = message.unwrap_or_else(|| "needs input".into()).into();
                self.set(SessionState::NeedsYou)
            }
            HookKind::TurnDone => {
                self.unread = true;
                self.last_msg = "turn done".into();
                self.set(SessionState::Done)
            }
            // A live terminal may report its end without dying; only a session without a
            // harness is exited, and that is already what its descriptor says.
            HookKind::Ended => {
                self.unread = false;
                self.last_msg = "session ended".into();
                None
            }
            HookKind::Heartbeat => None,
        }
    }
}

impl Session {
    /// Changes the attention state and tells the permission registry what that means.
    pub(super) fn set_attention(&mut self, next: SessionState) {
        let change = self.attention.set(next);
        self.permit(change);
    }

    /// Spec §8: entering `needs_you` opens a permission request with the `lastMsg` of that
    /// moment; leaving it dismisses the session's pending ones.
    pub(super) fn permit(&self, change: Option<PermissionChange>) {
        match change {
            Some(PermissionChange::Open(message)) => {
                self.deps
                    .permissions
                    .do_send(crate::permissions::registry::OpenRequest {
                        session: self.record.id,
                        message,
                        // A PTY prompt is answered by typing into the terminal.
                        respondable: false,
                    })
            }
            Some(PermissionChange::Dismiss) => self.dismiss_permissions(),
            None => {}
        }
    }

    pub(super) fn dismiss_permissions(&self) {
        self.deps
            .permissions
            .do_send(crate::permissions::registry::DismissSession(self.record.id));
    }

    /// Applies one hook report (spec §3.4), or refuses it: over the session's report rate
    /// (the trail says so once per flood), or carrying a value that breaks
    /// `agents::report_check`'s rules. Nothing of a refused report is stored.
    pub(super) fn apply_hook(
        &mut self,
        report: HookReported,
        ctx: &mut Context<Self>,
    ) -> Result<(), ReportRefused> {
        let HookReported {
            event,
            payload,
            origin,
        } = report;
        match self.reports.take(std::time::Instant::now()) {
            Admission::Taken => {}
            Admission::Refused { first } => {
                if first {
                    self.trail_flood();
                }
                return Err(ReportRefused::RateLimited);
            }
        }
        let checked = report_check::transcript_path(&payload).and_then(|transcript| {
            let n = normalize(self.agent_kind(), &event, &payload, &mut self.hooks)?;
            Ok((transcript, n))
        });
        let (transcript, mut n) = checked.inspect_err(|e| {
            tracing::warn!(session = %self.record.id, reason = e.reason(), error = %e,
                "hook report refused");
        })?;
        let kind = self.agent_kind();
        let mut persist = false;
        if let Some(id) = n
            .agent_session_id
            .take()
            .filter(|id| Some(id) != self.record.agent_session_id.as_ref())
        {
            self.record.agent_session_id = Some(id);
            persist = true;
        }
        if let Some(path) = transcript
            .as_ref()
            .map(|p| p.display().to_string())
            .filter(|p| Some(p) != self.record.transcript_path.as_ref())
        {
            // A full write below carries it too; alone, it is a single-row update (§3.10).
            if !persist {
                self.deps.store.set_transcript_path(self.record.id, &path);
            }
            self.record.transcript_path = Some(path);
        }
        // Statusline pings come several times a second and carry nothing new to name. A guest's
        // paths name files inside its imp: they are never opened on this host, and neither is
        // this host's Codex index read for a session that runs elsewhere.
        if event != "Statusline" && origin == ReportOrigin::Local {
            if let Some(source) = crate::agents::names::source_of(
                kind,
                transcript.as_deref(),
                self.record
                    .agent_session_id
                    .as_ref()
                    .map(AgentSessionId::as_str),
                self.deps.codex_home.as_deref(),
            ) {
                self.refresh_name(source, ctx);
            }
        }
        if n.kind == HookKind::Started {
            self.note_started();
        }
        // Attention `none`: a report is kept in the trail and its ids are learned, but it
        // does not move the state.
        if self.attention_mode != crate::config::attention::AttentionMode::None {
            if n.kind == HookKind::PromptSubmitted {
                self.hand_over_to_hooks();
            }
            let change = self.attention.on_hook(n.kind, n.message.take());
            self.permit(change);
        }
        if n.kind == HookKind::TurnDone {
            if let Some(result) = &n.result {
                self.deps.store.set_result(self.record.id, result);
            }
        }
        if event != "Statusline" {
            // The trail (spec §9.5): every report but statusline pings.
            self.trail(TrailRow {
                event,
                message: (n.kind == HookKind::NeedsInput || n.kind == HookKind::PromptSubmitted)
                    .then(|| self.attention.last_msg().to_string()),
                kind: Some(n.kind.as_str()),
                detail: n.result,
            });
        }
        if persist {
            self.persist();
        }
        if n.kind != HookKind::Heartbeat || persist {
            self.notify_state();
        }
        Ok(())
    }

    /// The trail row that tells a flood of reports began to be refused.
    fn trail_flood(&self) {
        tracing::warn!(session = %self.record.id, "hook reports over the session's rate refused");
        let limits = &self.deps.limits;
        self.trail(TrailRow {
            event: "ReportsRefused".into(),
            message: Some(format!(
                "reports over {} a second (bursts of {}) are refused",
                limits.reports_per_second, limits.report_burst
            )),
            kind: None,
            detail: None,
        });
    }

    /// Appends a row to the session's trail, keeping at most `limits.trailPerSession` of them.
    pub(super) fn trail(&self, row: TrailRow) {
        self.deps.store.append_event(
            atc_protocol::responses::TrailEntry {
                id: 0,
                ts: rfc3339_now(),
                atc_id: self.record.id,
                event: row.event,
                message: row.message,
                session_id: self
                    .record
                    .agent_session_id
                    .as_ref()
                    .map(ToString::to_string),
                kind: row.kind.map(str::to_string),
                detail: row.detail,
            },
            crate::sessions::trail_sweep::keep(&self.deps.limits),
        );
    }
}

/// What one trail row says, besides the session and the time.
pub(super) struct TrailRow {
    /// The event's name (`Stop`, `ReportsRefused`, `LimitKilled`, ...).
    pub event: String,
    /// What the user reads.
    pub message: Option<String>,
    /// The attention kind it carries, if any.
    pub kind: Option<&'static str>,
    /// More, if any.
    pub detail: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needing_input_opens_a_request_with_the_message_and_a_prompt_dismisses_it() {
        let mut a = Attention::new(Some(StateSource::Hooks));
        let opened = a.on_hook(HookKind::NeedsInput, Some("Allow Bash(ls)?".into()));
        assert_eq!(
            opened,
            Some(PermissionChange::Open("Allow Bash(ls)?".into()))
        );
        assert_eq!((a.state(), a.unread()), (SessionState::NeedsYou, true));
        // Asking again while it waits opens nothing more.
        assert_eq!(a.on_hook(HookKind::NeedsInput, None), None);
        assert_eq!(a.last_msg(), "needs input");
        let answered = a.on_hook(HookKind::PromptSubmitted, Some("go on".into()));
        assert_eq!(answered, Some(PermissionChange::Dismiss));
        assert_eq!(
            (a.state(), a.unread(), a.last_msg()),
            (SessionState::Running, false, "go on")
        );
    }

    #[test]
    fn a_turn_done_or_the_process_ending_dismisses_a_waiting_request() {
        let mut a = Attention::new(Some(StateSource::Hooks));
        a.on_hook(HookKind::NeedsInput, None);
        assert_eq!(
            a.on_hook(HookKind::TurnDone, None),
            Some(PermissionChange::Dismiss)
        );
        assert_eq!((a.state(), a.last_msg()), (SessionState::Done, "turn done"));
        assert_eq!(a.ended(), None, "done is not waiting");
        a.on_hook(HookKind::NeedsInput, None);
        assert_eq!(a.ended(), Some(PermissionChange::Dismiss));
        assert_eq!(a.state(), SessionState::Running);
    }

    #[test]
    fn attaching_answers_a_request_for_attention_and_reads_the_session() {
        let mut a = Attention::new(Some(StateSource::Hooks));
        a.on_hook(HookKind::TurnDone, None);
        assert_eq!(a.attached(), None, "nothing was waiting");
        assert_eq!(
            (a.state(), a.unread(), a.last_msg()),
            (SessionState::Done, false, "turn done")
        );
        a.on_hook(HookKind::NeedsInput, Some("question".into()));
        assert_eq!(a.attached(), Some(PermissionChange::Dismiss));
        assert_eq!(
            (a.state(), a.unread(), a.last_msg()),
            (SessionState::Running, false, "attached")
        );
    }

    #[test]
    fn a_start_finishes_an_adoption_and_heartbeats_change_nothing() {
        let mut a = Attention::new(Some(StateSource::Hooks));
        a.say(LastMsg::Adopting);
        assert_eq!(a.on_hook(HookKind::Started, None), None);
        assert_eq!(a.last_msg(), "adopted");
        assert_eq!(a.on_hook(HookKind::Heartbeat, Some("x".into())), None);
        assert_eq!(a.on_hook(HookKind::Ended, None), None);
        assert_eq!(
            (a.state(), a.unread(), a.last_msg()),
            (SessionState::Running, false, "session ended")
        );
    }
}
