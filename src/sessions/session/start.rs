//! Starting a session's process: a spawn, a restore (with a restarted daemon re-attaching a
//! remote process that kept running, spec §5.6), a revive under the same id, and the end of
//! each process, which decides the exit reason and what the session says about it. A revive
//! starts a process, not a stream: the output ring and its offsets go on (see
//! [`super::clients`]). The decisions are plain functions with unit tests; the rest starts
//! harnesses through the provider and needs the actor.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::oneshot;

use super::attention::LastMsg;
use super::record::{ExitInfo, SessionRecord};
use super::{Ending, Session, SessionDeps};
use crate::providers::refusal::Operation;
use crate::providers::refusal::TargetError;
use crate::providers::ProviderError;
use crate::providers::{
    AttachmentChanged, DetachHarness, ExecutionProvider, Hangup, HarnessEnd, HarnessEvents,
    HarnessExited, HostUse, StartSpec,
};
use crate::sessions::host_messages::HostWoken;
use crate::sessions::live_slots::LiveSlot;
use crate::sessions::screen_worker::ResizeScreen;
use crate::sessions::session_error::SessionError;
use atc_protocol::{
    AttachFrame, Attachment, Descriptor, ExitReason, FleetEvent, LinkState, SessionId,
    SessionState, TermSize,
};

/// The provider of `target`. The refusal chain has already run when this is asked, so a
/// missing provider means the target lost its provider since (it cannot, today).
pub(super) fn provider_of<'a>(
    deps: &'a SessionDeps,
    target: &str,
) -> Result<&'a Arc<dyn ExecutionProvider>, SessionError> {
    deps.providers.get(target).ok_or_else(|| {
        TargetError::NotServed {
            id: target.to_string(),
        }
        .into()
    })
}

/// Whether `record` is a remote session whose process was running when the daemon stopped and
/// whose target still serves it unchanged, so its harness rejoins that process.
fn reattachable(record: &SessionRecord, deps: &SessionDeps) -> bool {
    let Some(provider) = deps.providers.get(&record.target) else {
        return false;
    };
    if !may_reattach(record, provider.remote()) {
        return false;
    }
    let allowed = deps
        .refusal
        .check(Operation::Reattach, &record.target, &record.target_identity);
    if let Err(e) = allowed {
        tracing::warn!(session = %record.id, error = %e, "target refuses; not re-attached");
        return false;
    }
    true
}

/// Starts a harness that joins the remote process of `record` (it sends no `start`).
fn start_reattach(
    record: &SessionRecord,
    deps: &SessionDeps,
    addr: &Addr<Session>,
) -> Result<crate::providers::StartedHarness, SessionError> {
    let bin = deps
        .catalog
        .get(&record.agent)
        .map(|a| a.bin.clone())
        .unwrap_or_else(|| record.agent.clone());
    // Only the names matter for an attach; argv and environment stay with the process.
    let plan = crate::agents::LaunchPlan {
        program: std::path::PathBuf::from(&bin),
        bin,
        args: record.args.clone(),
        env: Default::default(),
        cwd: std::path::PathBuf::from(&record.cwd),
        hooks: false,
        // A restart's re-attach carries the requirement its start had, so it never joins
        // the process past it.
        broker: deps.catalog.broker_launch(&record.agent),
    };
    Ok(provider_of(deps, &record.target)?.start(
        StartSpec {
            session_id: record.id,
            host_key: record.host_key,
            plan,
            size: record.size,
            // No position: the last daemon wrote the row before the process's position
            // reached it (it was killed between the two). The process may run all the same,
            // and is joined by the name derived from the session's id.
            remote: record.remote.clone(),
            attach_only: true,
            host: HostUse::Existing,
            launched: None,
            limits: record.limits,
        },
        events_for(addr),
    )?)
}

/// What a start hands back to wait on: see [`crate::providers::StartedHarness::ready`].
pub type StartWait = Option<tokio::sync::oneshot::Receiver<Result<(), ProviderError>>>;

/// Fires once a new session's first row write has landed (or failed): a spawn answers only
/// after it, so a daemon killed right after the answer still lists the session.
pub type RowWritten = tokio::sync::oneshot::Receiver<Result<(), crate::store::StoreError>>;

/// A local harness has no connection to lose; a remote one (whose start hands back a wait)
/// connects first.
fn initial_attachment(connects_first: bool) -> Attachment {
    if connects_first {
        Attachment::Reattaching
    } else {
        Attachment::Local
    }
}

pub(super) fn events_for(addr: &Addr<Session>) -> HarnessEvents {
    HarnessEvents {
        output: addr.clone().recipient(),
        exited: addr.clone().recipient(),
        attachment: addr.clone().recipient(),
        hook: addr.clone().recipient(),
        view: addr.clone().recipient(),
    }
}

impl Session {
    /// What a new session's harness starts with: its plan shaped for the agent's kind, and
    /// the session's record and settings files written (`launch::prepare`).
    pub fn spawn_spec(
        record: &SessionRecord,
        mut plan: crate::agents::LaunchPlan,
        deps: &SessionDeps,
    ) -> StartSpec {
        crate::sessions::launch::prepare(record, deps, &mut plan, None);
        StartSpec {
            session_id: record.id,
            host_key: record.host_key,
            plan,
            size: record.size,
            remote: None,
            attach_only: false,
            // A sub-session on its parent's host finds it made (spec §4.5).
            host: if record.on_parents_host() {
                HostUse::Joins
            } else {
                HostUse::Creates
            },
            launched: None,
            limits: record.limits,
        }
    }

    /// Starts a session with a fresh harness from `spec` (see [`Session::spawn_spec`]), whose
    /// process may be launched already, in the place under the cap its spawn took (`slot`).
    /// Nothing is started (and no actor exists) when the harness cannot start.
    pub fn spawn(
        record: SessionRecord,
        spec: StartSpec,
        deps: SessionDeps,
        slot: LiveSlot,
    ) -> Result<(Addr<Session>, Descriptor, StartWait, RowWritten), SessionError> {
        let ctx = Context::new();
        let started =
            provider_of(&deps, &record.target)?.start(spec, events_for(&ctx.address()))?;
        let mut session = Session::new(record, deps);
        session.attachment = initial_attachment(started.ready.is_some());
        session.harness = Some(started.handle);
        session.slot = Some(slot);
        session.record.leader = started.leader;
        session.attention.say("started");
        session.start_activity(&ctx.address());
        let descriptor = session.descriptor();
        let written = session.persist();
        session.notify(FleetEvent::Added {
            session: Box::new(descriptor.clone()),
        });
        Ok((ctx.run(session), descriptor, started.ready, written))
    }

    /// Registers a session loaded from the store, without a process.
    ///
    /// A remote session that ran when the daemon stopped is re-attached instead (spec §5.6,
    /// issue 4): its process kept running in its imp. A sleeping imp answers the attach with
    /// `INVALID_STATE`, which leaves the session suspended until a revive wakes it.
    ///
    /// A re-attach takes a place under the cap on running sessions like any start; past the
    /// cap the session is left without a process, and the log says so.
    pub fn restore(record: SessionRecord, deps: SessionDeps) -> (Addr<Session>, Descriptor) {
        let slot = reattachable(&record, &deps)
            .then(|| {
                deps.slots.take().map_err(|e| {
                    tracing::warn!(session = %record.id, error = %e,
                        "not re-attached: the session cap is reached");
                })
            })
            .and_then(Result::ok);
        if let Some(slot) = slot {
            let ctx = Context::new();
            match start_reattach(&record, &deps, &ctx.address()) {
                Ok(started) => {
                    let mut session = Session::new(record, deps);
                    session.attachment = Attachment::Reattaching;
                    session.harness = Some(started.handle);
                    session.slot = Some(slot);
                    session.record.exit = None;
                    session.attention.say("reattaching");
                    session.start_activity(&ctx.address());
                    session.persist();
                    let descriptor = session.descriptor();
                    tracing::info!(session = %descriptor.id, "re-attaching a remote session");
                    return (ctx.run(session), descriptor);
                }
                Err(e) => {
                    tracing::warn!(session = %record.id, error = %e, "could not re-attach a remote session")
                }
            }
        }
        let mut session = Session::new(record, deps);
        session
            .attention
            .say(restored_message(session.record.exit.map(|e| e.reason)));
        // Rows loaded alive are rewritten as exited so the store agrees with the listing.
        session.persist();
        let descriptor = session.descriptor();
        (session.start(), descriptor)
    }

    pub(super) fn on_exited(&mut self, status: HarnessExited) {
        self.harness = None;
        self.stop_activity();
        self.slot = None;
        self.record.leader = None;
        // Without a process the session is exited, and no longer waits for anyone.
        let change = self.attention.ended();
        self.permit(change);
        let reason = exit_reason(self.ending.take(), status.end);
        if reason == ExitReason::MemoryLimit {
            self.deps
                .metrics
                .limit_killed(crate::metrics::LimitKind::Memory);
            // The trail keeps it after the session is revived or forgotten: a leaking agent
            // shows as a row per kill.
            let limit = self
                .record
                .limits
                .memory_mib
                .map_or_else(String::new, |m| format!(" of {m} MiB"));
            self.trail(super::attention::TrailRow {
                event: "LimitKilled".into(),
                message: Some(format!("killed at its memory limit{limit}")),
                kind: Some("memory_limit"),
                detail: None,
            });
        }
        self.attachment = Attachment::Detached;
        if status.position.is_some() {
            self.record.remote = status.position.clone();
        }
        self.record.exit = Some(ExitInfo {
            code: status.code,
            signal: status.signal,
            reason,
        });
        self.attention.set_unread(true);
        self.attention
            .say(exit_message(reason, status.detail.as_deref()));
        tracing::info!(session = %self.record.id, code = ?status.code, signal = ?status.signal,
            reason = reason.as_str(), detail = ?status.detail, "process ended");
        let detail = exit_detail(status.code, status.signal, status.detail.as_deref());
        self.clients.exited(&AttachFrame::Exit {
            code: status.code,
            signal: status.signal,
            reason,
            detail,
        });
        let written = self.persist();
        self.notify_state();
        let waiters = std::mem::take(&mut self.exit_waiters);
        // Answer kill and shutdown only once the row saying so is durable.
        actix_rt::spawn(async move {
            // A failed write was logged by the store's writer; the process is gone either way, so
            // the waiters are answered regardless.
            let _ = written.await;
            for w in waiters {
                // A waiter whose request went away needs no answer.
                let _ = w.send(());
            }
        });
    }

    /// Ends the process and returns a receiver that fires once its exit is written.
    pub(super) fn end_process(&mut self, ending: Ending, grace: Duration) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        match &self.harness {
            Some(h) => {
                self.ending.get_or_insert(ending);
                self.exit_waiters.push(tx);
                h.hangup.do_send(Hangup { grace });
            }
            None => {
                // Cannot fail: the receiver is returned below.
                let _ = tx.send(());
            }
        }
        rx
    }

    pub(super) fn revive(
        &mut self,
        size: Option<TermSize>,
        ctx: &mut Context<Self>,
    ) -> Result<StartWait, SessionError> {
        if self.harness.is_some() {
            return Err(SessionError::StillRunning { id: self.record.id });
        }
        // Given back if the start fails below.
        let slot = self.deps.slots.take()?;
        let mut plan = self
            .deps
            .catalog
            .plan(&self.record.agent, std::path::Path::new(&self.record.cwd))?;
        plan.args = self.record.args.clone();
        // An agent that reported its own session id resumes it (spec §3.8); others start anew.
        let resume = self.record.agent_session_id.clone();
        crate::sessions::launch::prepare(&self.record, &self.deps, &mut plan, resume.as_ref());
        if let Some(size) = size {
            self.record.size = size;
            self.screen.worker().do_send(ResizeScreen(size));
        }
        let started = provider_of(&self.deps, &self.record.target)?.start(
            StartSpec {
                session_id: self.record.id,
                host_key: self.record.host_key,
                plan,
                size: self.record.size,
                // A remote process still running (in a woken imp) is resumed, not restarted.
                remote: self.record.remote.clone(),
                attach_only: false,
                host: HostUse::Existing,
                launched: None,
                limits: self.record.limits,
            },
            events_for(&ctx.address()),
        )?;
        self.attachment = initial_attachment(started.ready.is_some());
        self.harness = Some(started.handle);
        self.slot = Some(slot);
        self.record.leader = started.leader;
        self.ending = None;
        self.record.exit = None;
        self.set_attention(SessionState::Running);
        let agent_cli = crate::agents::is_agent_cli(self.deps.catalog.kind(&self.record.agent));
        self.attention
            .say(revive_message(resume.is_some(), agent_cli));
        self.start_activity(&ctx.address());
        self.persist();
        self.notify_state();
        tracing::info!(session = %self.record.id, "session revived");
        Ok(started.ready)
    }
}

impl Session {
    /// Answers a revive with the descriptor once the harness is known to run (a remote start
    /// may still be connecting), or with the refusal that ended it first.
    pub(super) fn answer_when_started(
        &mut self,
        ready: StartWait,
    ) -> ResponseActFuture<Self, Result<Descriptor, SessionError>> {
        Box::pin(
            async move { wait_started(ready).await }
                .into_actor(self)
                .map(|res, act, _| res.map(|()| act.descriptor())),
        )
    }
}

/// Waits for a new session's first row write. A failure is logged here; the spawn answers
/// `internal`, since nothing the client sent caused it.
pub async fn wait_written(written: RowWritten, id: SessionId) -> Result<(), SessionError> {
    match written.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => {
            tracing::error!(session = %id, error = %e, "the new session's row could not be written");
            Err(SessionError::Internal)
        }
        Err(_) => {
            tracing::error!(session = %id, "the store's writer stopped before the new session's row was written");
            Err(SessionError::Internal)
        }
    }
}

/// Waits for a harness start; `None` means it runs already.
pub async fn wait_started(ready: StartWait) -> Result<(), SessionError> {
    match ready {
        None => Ok(()),
        Some(rx) => match rx.await {
            Ok(started) => Ok(started?),
            Err(_) => Err(SessionError::EndedBeforeStart),
        },
    }
}

impl Session {
    /// A client's revive: the start counts as deliberate (spec §3.4 `started`).
    pub(super) fn revive_for_client(
        &mut self,
        size: Option<TermSize>,
        ctx: &mut Context<Self>,
    ) -> ResponseActFuture<Self, Result<Descriptor, SessionError>> {
        if let Err(e) = self.refuse(Operation::Revive) {
            return Box::pin(fut::ready(Err(e)));
        }
        let ready = match self.revive(size, ctx) {
            Ok(ready) => ready,
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        self.deliberate_start = true;
        Box::pin(self.answer_when_started(ready).map(|res, act, _| {
            // The owner's revive woke its host: every other session suspended there comes
            // back with it (spec §3.8).
            if res.is_ok() && !act.record.on_parents_host() {
                act.deps.hosts.woken.do_send(HostWoken {
                    host_key: act.record.host_key,
                    owner: act.record.id,
                });
            }
            res
        }))
    }

    /// A fleet restore's revive at the last size; the manager asked the refusal chain for
    /// the restore already, and the start is not the user's choice.
    pub(super) fn revive_on_restore(
        &mut self,
        ctx: &mut Context<Self>,
    ) -> ResponseActFuture<Self, Result<Descriptor, SessionError>> {
        let ready = match self.revive(None, ctx) {
            Ok(ready) => ready,
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        self.deliberate_start = false;
        self.answer_when_started(ready)
    }

    /// Every change between attached and reattaching is announced (spec §3.3).
    pub(super) fn on_attachment_changed(&mut self, msg: AttachmentChanged) {
        let (next, link) = match msg {
            AttachmentChanged::Attached(position) => {
                // A new process (or the first attach) is recorded at once, so a daemon that
                // dies without a clean stop can still re-attach it.
                let moved = position.as_ref().map(|p| (&p.boot_id, &p.generation))
                    != self
                        .record
                        .remote
                        .as_ref()
                        .map(|p| (&p.boot_id, &p.generation));
                if position.is_some() && moved {
                    self.record.remote = position;
                    self.persist();
                }
                (Attachment::Attached, LinkState::Attached)
            }
            AttachmentChanged::Reattaching => (Attachment::Reattaching, LinkState::Reattaching),
        };
        if self.harness.is_some() && next != self.attachment {
            self.attachment = next;
            self.clients
                .broadcast(&AttachFrame::Attachment { state: link });
            self.notify_state();
        }
    }

    /// The daemon stops: a local process is hung up; a remote one outlives the daemon and is
    /// let go, for the next daemon to re-attach. Resolves once the exit is written.
    pub(super) fn shut_down(&mut self) -> futures_util::future::LocalBoxFuture<'static, ()> {
        if self.remote {
            if let Some(h) = &self.harness {
                let (tx, rx) = oneshot::channel();
                self.ending.get_or_insert(Ending::DaemonStopping);
                self.exit_waiters.push(tx);
                h.detach.do_send(DetachHarness { host_asleep: false });
                return Box::pin(async move {
                    // Its sender goes only with the actor; either way the session is done.
                    let _ = rx.await;
                });
            }
        }
        let done = self.end_process(Ending::DaemonStopping, self.deps.timings.kill_grace);
        Box::pin(async move {
            // Its sender goes only with the actor; either way the session is done.
            let _ = done.await;
        })
    }
}

/// Whether a loaded record's process may still run in its host: its target runs processes
/// elsewhere and the daemon stopped without ending it.
fn may_reattach(record: &SessionRecord, remote: bool) -> bool {
    remote && record.exit.map(|e| e.reason) == Some(ExitReason::DaemonStopped)
}

/// Why a process ended: the session's own reason for ending it wins over the harness's.
fn exit_reason(ending: Option<Ending>, end: HarnessEnd) -> ExitReason {
    match (ending, end) {
        (Some(Ending::Killed), _) => ExitReason::Killed,
        (Some(Ending::DaemonStopping), _) => ExitReason::DaemonStopped,
        (None, HarnessEnd::Exited) => ExitReason::Exited,
        (None, HarnessEnd::Suspended) => ExitReason::Suspended,
        (None, HarnessEnd::Ended) => ExitReason::Ended,
        (None, HarnessEnd::MemoryLimit) => ExitReason::MemoryLimit,
    }
}

/// The `lastMsg` of a session whose process ended for `reason` (`detail`: the harness's word).
fn exit_message(reason: ExitReason, detail: Option<&str>) -> String {
    match reason {
        ExitReason::Killed => "killed".into(),
        ExitReason::DaemonStopped => "daemon stopped".into(),
        ExitReason::Suspended => "asleep".into(),
        ExitReason::Ended => detail.unwrap_or("ended").into(),
        ExitReason::MemoryLimit => "killed at its memory limit".into(),
        ExitReason::Exited | ExitReason::SpawnFailed => "process exited".into(),
    }
}

/// The `detail` of the `exit` frame.
fn exit_detail(code: Option<i32>, signal: Option<i32>, detail: Option<&str>) -> String {
    match (code, signal, detail) {
        (_, _, Some(d)) => d.to_string(),
        (Some(c), _, None) => format!("exited with status {c}"),
        (None, Some(s), None) => format!("ended by signal {s}"),
        (None, None, None) => "ended".to_string(),
    }
}

/// The `lastMsg` of a session loaded without a process.
fn restored_message(reason: Option<ExitReason>) -> &'static str {
    match reason {
        Some(ExitReason::DaemonStopped) => "daemon stopped",
        Some(ExitReason::Suspended) => "asleep",
        _ => "process exited",
    }
}

/// The `lastMsg` of a revive: an agent CLI resuming its own session is adopting it until its
/// `started` report comes.
fn revive_message(resumes: bool, agent_cli: bool) -> LastMsg {
    if resumes && agent_cli {
        LastMsg::Adopting
    } else {
        "revived".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(reason: Option<ExitReason>) -> SessionRecord {
        SessionRecord {
            id: SessionId::NIL,
            name: "s".into(),
            named_by: atc_protocol::NamedBy::Auto,
            agent: "cat".into(),
            args: vec![],
            cwd: "/".into(),
            pinned: false,
            created_at: 0,
            last_attached_at: None,
            target: "box".into(),
            target_identity: "imp:x".into(),
            agent_session_id: None,
            transcript_path: None,
            remote: None,
            model: None,
            effort: None,
            size: TermSize::DEFAULT,
            exit: reason.map(|reason| ExitInfo {
                code: None,
                signal: None,
                reason,
            }),
            leader: None,
            workspace: None,
            limits: Default::default(),
            parent: None,
            host_key: SessionId::NIL,
        }
    }

    #[test]
    fn only_a_remote_process_the_daemon_left_running_is_reattached() {
        let stopped = record(Some(ExitReason::DaemonStopped));
        assert!(may_reattach(&stopped, true));
        assert!(
            !may_reattach(&stopped, false),
            "a local process died with the daemon"
        );
        for other in [
            ExitReason::Killed,
            ExitReason::Suspended,
            ExitReason::Exited,
        ] {
            assert!(!may_reattach(&record(Some(other)), true), "{other:?}");
        }
        assert!(!may_reattach(&record(None), true));
    }

    #[test]
    fn the_sessions_own_ending_names_the_exit_before_the_harness_does() {
        use HarnessEnd::*;
        assert_eq!(
            exit_reason(Some(Ending::Killed), Suspended),
            ExitReason::Killed
        );
        assert_eq!(
            exit_reason(Some(Ending::DaemonStopping), Exited),
            ExitReason::DaemonStopped
        );
        assert_eq!(exit_reason(None, Exited), ExitReason::Exited);
        assert_eq!(exit_reason(None, Suspended), ExitReason::Suspended);
        assert_eq!(exit_reason(None, Ended), ExitReason::Ended);
        assert_eq!(
            exit_reason(None, HarnessEnd::MemoryLimit),
            ExitReason::MemoryLimit
        );
        assert_eq!(
            exit_reason(Some(Ending::Killed), HarnessEnd::MemoryLimit),
            ExitReason::Killed,
            "a kill asked for is a kill, whatever the kernel did meanwhile"
        );
    }

    #[test]
    fn what_an_ended_session_says() {
        assert_eq!(exit_message(ExitReason::Killed, Some("x")), "killed");
        assert_eq!(
            exit_message(ExitReason::Ended, Some("imp gone")),
            "imp gone"
        );
        assert_eq!(exit_message(ExitReason::Ended, None), "ended");
        assert_eq!(exit_message(ExitReason::Suspended, None), "asleep");
        assert_eq!(
            exit_message(ExitReason::SpawnFailed, None),
            "process exited"
        );
        assert_eq!(exit_detail(Some(3), Some(9), None), "exited with status 3");
        assert_eq!(exit_detail(None, Some(9), None), "ended by signal 9");
        assert_eq!(exit_detail(Some(0), None, Some("why")), "why");
        assert_eq!(exit_detail(None, None, None), "ended");
        assert_eq!(restored_message(Some(ExitReason::Suspended)), "asleep");
        assert_eq!(
            restored_message(Some(ExitReason::DaemonStopped)),
            "daemon stopped"
        );
        assert_eq!(restored_message(Some(ExitReason::Killed)), "process exited");
    }

    #[test]
    fn a_revive_adopts_only_an_agent_cli_resuming_its_own_session() {
        assert_eq!(revive_message(true, true), "adopting…");
        assert_eq!(revive_message(true, false), "revived");
        assert_eq!(revive_message(false, true), "revived");
        assert_eq!(initial_attachment(true), Attachment::Reattaching);
        assert_eq!(initial_attachment(false), Attachment::Local);
    }
}
