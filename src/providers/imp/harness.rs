//! [`ImpHarness`]: one session's process inside an imp, kept connected (spec §5.6).
//!
//! The harness first has its host readied (through the imp's [`HostLease`]), then opens
//! connections one at a time, each an [`ImpConnection`] actor. The first connection sends a
//! `start`; once impd has answered one, every later connection is an `attach` with
//! `wake: false` resuming from the [`Cursor`]. How a connection ended decides what follows
//! ([`super::outcome::decide`]): an exit ends the harness, a drop of a started connection reconnects
//! at once, other failures reconnect after the next of the given delays, and when those run
//! out the harness ends with the last outcome's text.
//!
//! Input written while no connection is started waits and goes out in order on the next
//! start; a resize made meanwhile is sent after start when it differs from what the opening
//! asked for; a kill made meanwhile goes out as soon as a connection starts.
//!
//! Two starts continue a process an earlier harness let go of. A revive sends its `start`
//! with the stored position as `resumeFrom`: a process still running (in a woken imp) is
//! resumed exactly; one that is gone is started anew (impd answers `generation_changed`,
//! `created`), under a screen reset. A daemon restart attaches (`wake: false`) without a
//! resume point, so impd's replay rebuilds the empty screen, and checks that the generation
//! is still the stored one — otherwise the process it knew was replaced or ended.
//!
//! The harness's report socket ([`ReportForward`]) listens before the first connection opens
//! (a refusal ends the harness and is the spawn's answer), listens again after an attach if
//! it was lost meanwhile, and closes with the harness.

use std::collections::VecDeque;

use actix::prelude::*;
use bytes::Bytes;
use tokio::sync::oneshot;

use super::connection::{ConnData, ConnEnded, ConnStarted, ImpConnection};
use super::cursor::{Continuity, Cursor, Feed};
use super::host_lease::{lease_gone, HarnessGone, HostLease, IsSuspending, ReadyHost};
use super::naming::GUEST_PATH;
use super::outcome::{decide, Next};
use super::report_forward::{CloseForward, Listen, Relisten, ReportForward};
use super::settings::ImpSettings;
use crate::imp::{AttachMsg, ExecWriter, Opening, Resume, ResumeFrom, StartMsg};
use crate::protocol::{DaemonError, ErrorCode};
use crate::providers::{
    AttachmentChanged, DetachHarness, Hangup, HarnessEnd, HarnessEvents, HarnessExited,
    OutputArrived, ResizeTerminal, StartSpec, WriteInput,
};
use atc_protocol::TermSize;

/// What a fresh attach writes to the session before impd's replay: reset attributes, home,
/// clear. Not a full terminal reset, which would also clobber clients' terminal modes.
pub const SCREEN_RESET: &[u8] = b"\x1b[0m\x1b[H\x1b[2J";

/// Input allowed to wait for a connection; beyond it input is refused with `too_slow`.
const INPUT_BACKLOG_BYTES: usize = 4 * 1024 * 1024;

/// One remote process and its connection.
pub struct ImpHarness {
    settings: ImpSettings,
    lease: Addr<HostLease>,
    imp: String,
    session_name: String,
    argv: Vec<String>,
    env: std::collections::BTreeMap<String, String>,
    cwd: String,
    events: HarnessEvents,
    ready_tx: Option<oneshot::Sender<Result<(), DaemonError>>>,
    /// The host counted this harness (a `HarnessGone` is owed).
    counted: bool,
    offsets: bool,
    cursor: Cursor,
    feed: Option<Feed>,
    attempt: u64,
    writer: Option<ExecWriter>,
    /// impd answered at least one `started`: reconnects attach.
    ever_started: bool,
    /// The current attempt opened with `start` (not `attach`).
    opening_start: bool,
    /// A revive: the first start resumes a stored position or replaces a gone process.
    reviving: bool,
    /// A daemon restart: the first attach must find this generation still running.
    expect_generation: Option<String>,
    /// The host was asked to count this re-attached harness.
    lease_asked: bool,
    /// The current attempt replays history (no resume): reset the screen before it.
    fresh: bool,
    /// The size the current opening asked for, and the size wanted now.
    opening_size: TermSize,
    size: TermSize,
    pending_input: VecDeque<Bytes>,
    pending_bytes: usize,
    pending_signal: Option<&'static str>,
    kill_timer: Option<SpawnHandle>,
    failures: usize,
    handler_failures: usize,
    ended: bool,
    /// The report socket, until it is started with the harness's first connection.
    report: Option<ReportForward>,
    /// The report socket once started.
    forward: Option<Addr<ReportForward>>,
}

impl ImpHarness {
    /// A harness for `spec` on imp `imp`, readied through `lease`.
    pub fn new(
        settings: ImpSettings,
        lease: Addr<HostLease>,
        imp: String,
        spec: StartSpec,
        events: HarnessEvents,
        ready_tx: oneshot::Sender<Result<(), DaemonError>>,
        report: ReportForward,
    ) -> ImpHarness {
        let plan = spec.plan;
        let mut env: std::collections::BTreeMap<String, String> = [
            ("TERM", "xterm-256color"),
            ("LANG", "C.UTF-8"),
            ("PATH", GUEST_PATH),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        // The agent's own variables and atc's, minus the ones that name daemon-side paths
        // (the report socket inside the imp is a forward of its own).
        for (k, v) in plan.env {
            if k != "ATC_SOCKET" && k != "ATC_SESSION_RECORD" {
                env.insert(k, v);
            }
        }
        env.insert("ATC_SESSION_ID".into(), spec.session_id.to_string());
        // Hooks report to the guest end of the report socket; the outbox (where the guest
        // reporter keeps what it could not send yet) sits beside it.
        let socket = report.path().to_string();
        let base = socket.strip_suffix(".sock").unwrap_or(&socket);
        env.insert("ATC_OUTBOX".into(), format!("{base}.outbox"));
        env.insert("ATC_SOCKET".into(), socket);
        env.insert("ATC_BRIDGE".into(), "1".into());
        let argv = std::iter::once(plan.bin).chain(plan.args).collect();
        let mut cursor = Cursor::default();
        if let Some(p) = &spec.remote {
            cursor.restore(p);
        }
        let expect_generation = spec
            .attach_only
            .then(|| spec.remote.as_ref().map(|p| p.generation.clone()))
            .flatten();
        ImpHarness {
            opening_start: false,
            lease_asked: false,
            reviving: spec.remote.is_some() && !spec.attach_only,
            expect_generation,
            session_name: super::naming::exec_session_name(&spec.session_id.to_string()),
            settings,
            lease,
            imp,
            argv,
            env,
            cwd: plan.cwd.display().to_string(),
            events,
            ready_tx: Some(ready_tx),
            counted: false,
            offsets: false,
            cursor,
            feed: None,
            attempt: 0,
            writer: None,
            ever_started: spec.attach_only,
            fresh: false,
            opening_size: spec.size,
            size: spec.size,
            pending_input: VecDeque::new(),
            pending_bytes: 0,
            pending_signal: None,
            kill_timer: None,
            failures: 0,
            handler_failures: 0,
            ended: false,
            report: Some(report),
            forward: None,
        }
    }

    /// Starts the report socket and opens the first connection once it listens (spec §5.6:
    /// the start waits for the forward); impd's refusal ends the harness.
    fn listen_then_connect(&mut self, ctx: &mut Context<Self>) {
        let Some(report) = self.report.take() else {
            return self.connect(ctx);
        };
        let forward = report.start();
        self.forward = Some(forward.clone());
        ctx.wait(
            forward
                .send(Listen)
                .into_actor(self)
                .map(|res, act, ctx| match res {
                    Ok(Ok(())) => act.connect(ctx),
                    Ok(Err(e)) => {
                        let err = super::report_forward::refused(&act.settings.target, &e);
                        act.refuse(err, ctx);
                    }
                    Err(_) => act.ended_with("the report socket stopped".into(), ctx),
                }),
        );
    }

    /// Opens the next connection: a `start` until impd has answered one, then attaches that
    /// never wake a sleeping imp and resume from the cursor when there is one.
    fn connect(&mut self, ctx: &mut Context<Self>) {
        if self.ended {
            return;
        }
        self.attempt += 1;
        self.writer = None;
        self.feed = None;
        self.opening_size = self.size;
        self.opening_start = !self.ever_started;
        let opening = if !self.ever_started {
            // A revive resumes where the last harness left off; a first start has nothing to
            // resume.
            let resume_from = (self.reviving && self.offsets)
                .then(|| self.cursor.resume_from())
                .flatten()
                .map(|(execution_generation, offset)| ResumeFrom {
                    execution_generation,
                    offset,
                });
            // A revive without a resume point joins or starts with a replay: clear first.
            self.fresh = self.reviving && resume_from.is_none();
            Opening::Start(StartMsg {
                name: self.imp.clone(),
                argv: self.argv.clone(),
                tty: true,
                env: self.env.clone(),
                cwd: Some(self.cwd.clone()),
                cols: self.size.cols,
                rows: self.size.rows,
                session: Some(self.session_name.clone()),
                resume_from,
                ..Default::default()
            })
        } else {
            // A restarted daemon has an empty screen: it wants impd's replay, not a resume.
            let resume_from = (self.offsets && self.expect_generation.is_none())
                .then(|| self.cursor.resume_from())
                .flatten()
                .map(|(execution_generation, offset)| ResumeFrom {
                    execution_generation,
                    offset,
                });
            self.fresh = resume_from.is_none();
            Opening::Attach(AttachMsg {
                name: self.imp.clone(),
                session: self.session_name.clone(),
                cols: self.size.cols,
                rows: self.size.rows,
                resume_from,
                wake: false,
                require: Vec::new(),
            })
        };
        ImpConnection::new(self.attempt, ctx.address(), self.settings.client(), opening).start();
    }

    /// Tells the session the connection is being re-established; it announces the change
    /// only when the state actually changed.
    fn reattaching(&self) {
        self.events
            .attachment
            .do_send(AttachmentChanged::Reattaching);
    }

    fn signal(&mut self, name: &'static str) {
        match &self.writer {
            Some(w) if w.signal(name).is_ok() => {}
            _ => self.pending_signal = Some(name),
        }
    }

    /// Ends the harness once: lets the connection go, gives the host its count back, answers
    /// a waiting start with a refusal, and reports the end to the session.
    fn finish(&mut self, mut exit: HarnessExited, ctx: &mut Context<Self>) {
        if self.ended {
            return;
        }
        if exit.position.is_none() {
            exit.position = self.cursor.position();
        }
        self.ended = true;
        self.attempt += 1;
        if let Some(w) = self.writer.take() {
            let _ = w.close();
        }
        if self.counted {
            self.lease.do_send(HarnessGone);
        }
        if let Some(forward) = self.forward.take() {
            forward.do_send(CloseForward);
        }
        if let Some(tx) = self.ready_tx.take() {
            let detail = exit
                .detail
                .clone()
                .unwrap_or_else(|| "the process ended".into());
            let _ = tx.send(Err(DaemonError::new(
                ErrorCode::HostUnavailable,
                format!(
                    "target '{}': the session did not start: {detail}",
                    self.settings.target
                ),
            )
            .with("target", self.settings.target.clone())
            .with("problem", "not_started")));
        }
        tracing::info!(imp = %self.imp, session = %self.session_name, end = ?exit.end,
            detail = ?exit.detail, "remote harness ended");
        self.events.exited.do_send(exit);
        ctx.stop();
    }

    fn ended_with(&mut self, detail: String, ctx: &mut Context<Self>) {
        self.finish(
            HarnessExited {
                code: None,
                signal: None,
                end: HarnessEnd::Ended,
                detail: Some(detail),
                position: None,
            },
            ctx,
        );
    }

    /// A start that never succeeded, refused before any connection (the host could not be
    /// readied): the refusal is the spawn's answer.
    fn refuse(&mut self, err: DaemonError, ctx: &mut Context<Self>) {
        let detail = err.message.clone();
        if let Some(tx) = self.ready_tx.take() {
            let _ = tx.send(Err(err));
        }
        self.ended_with(detail, ctx);
    }

    /// The generation `ours` no longer runs under the session's name: its recorded exit when
    /// impd's `previous` is ours, else someone else's process took the name.
    fn generation_gone(
        &mut self,
        previous: Option<&crate::imp::Previous>,
        ours: &str,
        ctx: &mut Context<Self>,
    ) {
        match previous.filter(|p| p.execution_generation == ours) {
            Some(p) => self.finish(
                HarnessExited::exited(Some(p.exit_code.unwrap_or(1)), None),
                ctx,
            ),
            None => self.ended_with("imp replaced the process".into(), ctx),
        }
    }

    fn on_next(&mut self, next: Next, ctx: &mut Context<Self>) {
        match next {
            Next::Exited { code, signal } => self.finish(HarnessExited::exited(code, signal), ctx),
            Next::Ended(detail) => self.ended_with(detail, ctx),
            Next::Suspended => self.finish(
                HarnessExited {
                    code: None,
                    signal: None,
                    end: HarnessEnd::Suspended,
                    detail: Some("asleep".into()),
                    position: None,
                },
                ctx,
            ),
            Next::FreshAttach => {
                self.cursor.clear();
                self.connect(ctx);
            }
            Next::ReconnectNow => {
                self.reattaching();
                self.connect(ctx);
            }
            Next::Retry { handler, why } => {
                let counter = if handler {
                    &mut self.handler_failures
                } else {
                    &mut self.failures
                };
                *counter += 1;
                let n = *counter;
                match self.settings.reconnect_delays.get(n - 1).copied() {
                    Some(delay) => {
                        tracing::info!(imp = %self.imp, session = %self.session_name, attempt = n,
                            ?delay, why = %why, "reconnecting");
                        self.reattaching();
                        ctx.run_later(delay, |act, ctx| act.connect(ctx));
                    }
                    None => self.ended_with(why, ctx),
                }
            }
        }
    }
}

impl Actor for ImpHarness {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // A daemon restart attaches first (`wake: false`): readying the host would take the
        // lease, and taking a lease wakes a sleeping imp. The host is readied once the
        // attach found it awake.
        if self.expect_generation.is_some() {
            self.offsets = true;
            self.connect(ctx);
            return;
        }
        let ready = self.lease.send(ReadyHost);
        ctx.wait(ready.into_actor(self).map(|res, act, ctx| {
            let res = res.unwrap_or_else(|_| Err(lease_gone()));
            match res {
                Ok(ready) => {
                    act.counted = true;
                    act.offsets = ready.offsets;
                    act.listen_then_connect(ctx);
                }
                Err(e) => act.refuse(e, ctx),
            }
        }));
    }
}

impl Handler<ConnStarted> for ImpHarness {
    type Result = ();

    fn handle(&mut self, msg: ConnStarted, ctx: &mut Self::Context) {
        if msg.attempt != self.attempt || self.ended {
            let _ = msg.writer.close();
            return;
        }
        let output = msg
            .started
            .output
            .filter(|o| o.has_offsets() && self.offsets);
        if let Some(o) = &output {
            match &o.resume {
                Some(Resume::Gap { from, to }) => {
                    // Bytes we never had are gone: start over with a replay under a clean
                    // screen.
                    tracing::info!(imp = %self.imp, session = %self.session_name, from, to,
                        "output gap; attaching fresh");
                    let _ = msg.writer.close();
                    self.cursor.clear();
                    self.connect(ctx);
                    return;
                }
                // A revive's start found the old process gone and started a new one.
                Some(Resume::GenerationChanged { .. }) if self.opening_start => {
                    self.fresh = true;
                }
                Some(Resume::GenerationChanged { .. }) => {
                    let _ = msg.writer.close();
                    let ours = self.cursor.generation().unwrap_or_default().to_string();
                    self.generation_gone(o.previous.as_ref(), &ours, ctx);
                    return;
                }
                Some(Resume::Exact) | None => {}
            }
            // After a daemon restart: the process must still be the one we knew.
            if let Some(expected) = self.expect_generation.take() {
                if o.execution_generation != expected {
                    let _ = msg.writer.close();
                    self.generation_gone(o.previous.as_ref(), &expected, ctx);
                    return;
                }
                self.fresh = true;
            }
        }
        let continuity = output.as_ref().map(|o| Continuity {
            boot_id: o.boot_id.clone(),
            generation: o.execution_generation.clone(),
            offset: o.offset,
            prelude: o.prelude,
        });
        // Without offsets every reconnect replays; with them only an attach without resume.
        let fresh = self.fresh || (self.ever_started && continuity.is_none());
        self.feed = Some(self.cursor.begin(continuity.as_ref(), fresh));
        if fresh {
            self.events
                .output
                .do_send(OutputArrived(Bytes::from_static(SCREEN_RESET)));
        }
        let writer = msg.writer;
        while let Some(bytes) = self.pending_input.pop_front() {
            self.pending_bytes -= bytes.len();
            let _ = writer.input(bytes);
        }
        if self.size != self.opening_size {
            let _ = writer.resize(self.size.cols, self.size.rows);
        }
        if let Some(sig) = self.pending_signal.take() {
            let _ = writer.signal(sig);
        }
        self.writer = Some(writer);
        if !self.counted
            && self.expect_generation.is_none()
            && self.ever_started
            && !self.lease_asked
        {
            // Re-attached after a daemon restart: now hold the host's lease again.
            self.lease_asked = true;
            let ready = self.lease.send(ReadyHost);
            ctx.spawn(ready.into_actor(self).map(|res, act, _| match res {
                Ok(Ok(ready)) => {
                    act.counted = true;
                    act.offsets = ready.offsets;
                    if act.ended {
                        act.lease.do_send(HarnessGone);
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(imp = %act.imp, error = %e, "re-attached, but the host could not be readied")
                }
                Err(_) => {}
            }));
        }
        self.ever_started = true;
        // The imp runs: a report socket lost meanwhile (a sleep, impd losing it) can listen
        // again without waking anything.
        if let Some(forward) = &self.forward {
            forward.do_send(Relisten);
        }
        self.failures = 0;
        self.handler_failures = 0;
        // Every start is reported with the process's position; the session announces the
        // change and records a new generation.
        self.events
            .attachment
            .do_send(AttachmentChanged::Attached(self.cursor.position()));
        if let Some(tx) = self.ready_tx.take() {
            let _ = tx.send(Ok(()));
        }
    }
}

impl Handler<ConnData> for ImpHarness {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, msg: ConnData, _: &mut Self::Context) -> Self::Result {
        let (Some(feed), false) = (self.feed.as_mut(), msg.attempt != self.attempt) else {
            return Box::pin(std::future::ready(()));
        };
        let bytes = self.cursor.take(feed, msg.bytes);
        if bytes.is_empty() {
            return Box::pin(std::future::ready(()));
        }
        let sent = self.events.output.send(OutputArrived(bytes));
        Box::pin(async move {
            let _ = sent.await;
        })
    }
}

impl Handler<ConnEnded> for ImpHarness {
    type Result = ();

    fn handle(&mut self, msg: ConnEnded, ctx: &mut Self::Context) {
        if msg.attempt != self.attempt || self.ended {
            return;
        }
        self.writer = None;
        self.feed = None;
        let next = decide(&msg.end, msg.started, &self.cursor);
        // A sleep under way closes our connection on purpose: what follows is the sleep's
        // business (the session is told the host slept), not a harness end or a reconnect.
        let suspending = self.lease.send(IsSuspending);
        ctx.wait(suspending.into_actor(self).map(move |res, act, ctx| {
            if res.unwrap_or(false) && !matches!(next, Next::Exited { .. }) {
                tracing::debug!(imp = %act.imp, "connection ended by a sleep; outcome not handled");
                return;
            }
            act.on_next(next, ctx);
        }));
    }
}

impl Handler<WriteInput> for ImpHarness {
    type Result = Result<(), DaemonError>;

    fn handle(&mut self, msg: WriteInput, _: &mut Self::Context) -> Self::Result {
        if let Some(w) = &self.writer {
            if w.input(msg.0.clone()).is_ok() {
                return Ok(());
            }
        }
        if self.pending_bytes + msg.0.len() > INPUT_BACKLOG_BYTES {
            return Err(DaemonError::new(
                ErrorCode::TooSlow,
                "the remote session is reconnecting and 4 MiB of input already waits for it; \
                 retry once it is attached",
            ));
        }
        self.pending_bytes += msg.0.len();
        self.pending_input.push_back(msg.0);
        Ok(())
    }
}

impl Handler<ResizeTerminal> for ImpHarness {
    type Result = ();

    fn handle(&mut self, msg: ResizeTerminal, _: &mut Self::Context) {
        self.size = msg.0;
        if let Some(w) = &self.writer {
            let _ = w.resize(msg.0.cols, msg.0.rows);
        }
    }
}

impl Handler<Hangup> for ImpHarness {
    type Result = ();

    fn handle(&mut self, msg: Hangup, ctx: &mut Self::Context) {
        if self.kill_timer.is_some() {
            return;
        }
        if msg.grace.is_zero() {
            self.signal("SIGKILL");
            return;
        }
        self.signal("SIGHUP");
        self.kill_timer = Some(ctx.run_later(msg.grace, |act, _| act.signal("SIGKILL")));
    }
}

impl Handler<DetachHarness> for ImpHarness {
    type Result = ();

    /// The process keeps running under its session name; a later attach picks it up.
    fn handle(&mut self, msg: DetachHarness, ctx: &mut Self::Context) {
        if msg.host_asleep {
            self.on_next(Next::Suspended, ctx);
        } else {
            self.ended_with("detached; the process runs on in its imp".into(), ctx);
        }
    }
}
