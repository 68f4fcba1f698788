//! [`ImpHarness`]: one session's process inside an imp, kept connected (spec §5.6).
//!
//! The harness first has its host readied (through the imp's [`HostLease`]), then opens
//! connections one at a time, each an [`ImpConnection`] actor. The first connection sends a
//! `start`; once impd has answered one, every later connection is an `attach` with
//! `wake: false` resuming from the [`super::cursor::Cursor`]. How a connection ended decides what follows
//! ([`super::outcome::decide`]): an exit ends the harness, a drop of a started connection reconnects
//! at once, other failures reconnect after the next of the given delays, and when those run
//! out the harness ends with the last outcome's text.
//!
//! Input written while no connection is started waits and goes out in order on the next
//! start (at most 4 MiB waits, counting what a connection has not sent yet; more is
//! `too_slow`); a resize made meanwhile is sent after start when it differs from what the opening
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
//!
//! The actor is a shell: every decision above is [`HarnessState`]'s (a phase machine with
//! unit tests and no actor in it); handlers hand it each event and carry out the
//! [`Effect`]s it answers with. Input is bounded and kept as [`super::input_queue`] says.

use actix::prelude::*;
use tokio::sync::oneshot;

use super::connection::{ConnData, ConnEnded, ConnLaunchRefused, ConnStarted, ImpConnection};
use super::harness_broker::BrokerSide;
use super::harness_state::{Effect, HarnessState, StartParams};
use super::host_error::HostError;
use super::host_lease::{BootSeen, HarnessGone, HostLease, IsSuspending, ReadyHost, SleepIfIdle};
use super::input_queue::Signal;
use super::naming::GUEST_PATH;
use super::opening::Origin;
use super::outcome::{Next, StartRefusal};
use super::report_forward::{CloseForward, Listen, Relisten, ReportForward};
use super::settings::ImpSettings;
use crate::providers::imp::broker::broker_error::CheckOutcome;
use crate::providers::imp::broker::host_binding::AdmitKind;
use crate::providers::imp::broker::BrokerError;
use crate::providers::{
    output_pieces, DetachHarness, Hangup, HarnessEvents, HostUse, OutputArrived, ProviderError,
    ResizeTerminal, StartSpec, WriteInput,
};
use impd_client::ExecWriter;
use impd_client::{ImpdCode, Opening};

/// What a fresh attach writes to the session before impd's replay: reset attributes, home,
/// clear. Not a full terminal reset, which would also clobber clients' terminal modes.
pub const SCREEN_RESET: &[u8] = b"\x1b[0m\x1b[H\x1b[2J";

/// One remote process and its connection.
pub struct ImpHarness {
    settings: ImpSettings,
    lease: Addr<HostLease>,
    state: HarnessState<ExecWriter>,
    events: HarnessEvents,
    ready_tx: Option<oneshot::Sender<Result<(), ProviderError>>>,
    /// The broker refusal the last connection ended with, answered to a waiting spawn.
    start_refusal: Option<StartRefusal>,
    kill_timer: Option<SpawnHandle>,
    /// The report socket, until it is started with the harness's first connection.
    report: Option<ReportForward>,
    /// The report socket once started.
    forward: Option<Addr<ReportForward>>,
    /// The agent's hooks run atc inside the imp: its readying installs `<guestDir>/bin/atc`.
    install_atc: bool,
    /// A broker-backed agent's config folder in the imp, made by each readying.
    auth_dir: Option<String>,
    /// The broker part of the plan, and the session's id its folder is named by: its
    /// revision follows the binding's once that is verified.
    broker_launch: Option<(crate::providers::imp::broker::BrokerLaunch, String)>,
    /// The host's broker binding, for a broker-backed agent.
    broker: Option<BrokerSide>,
    /// Why the binding refused a connection's launch, answered to a waiting spawn.
    launch_refusal: Option<ProviderError>,
    /// A broker-backed agent's sign-in check, run once the host is readied.
    signin: Option<SigninCheck>,
    /// The sign-in check failed, so the start was refused behind the broker.
    signin_refused: bool,
    /// A connection started the process (or joined it) at least once.
    started: bool,
    /// This start is a revive onto a host made before (not a spawn, not a restart's
    /// re-attach): a broker refusal of it puts an otherwise idle host back to sleep.
    revive: bool,
    /// Where reconnects are counted.
    metrics: crate::metrics::Metrics,
    /// When the started connection dropped, while the harness reconnects.
    reconnecting_since: Option<std::time::Instant>,
}

/// The agent's sign-in check (`auth.check`, spec §3.5 step 8): run in the imp through
/// `runCommand` with the harness's own environment and cwd, before its start is sent.
#[derive(Debug, Clone)]
struct SigninCheck {
    agent: String,
    argv: Vec<String>,
    env: std::collections::BTreeMap<String, String>,
    cwd: String,
}

impl ImpHarness {
    /// A harness for `spec` on imp `imp`, readied through `lease`.
    pub fn new(
        settings: ImpSettings,
        lease: Addr<HostLease>,
        imp: String,
        spec: StartSpec,
        events: HarnessEvents,
        ready_tx: oneshot::Sender<Result<(), ProviderError>>,
        report: ReportForward,
    ) -> ImpHarness {
        let plan = spec.plan;
        let install_atc = plan.hooks;
        let mut env: std::collections::BTreeMap<String, String> = [
            ("TERM", "xterm-256color"),
            ("LANG", "C.UTF-8"),
            ("PATH", GUEST_PATH),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        // The agent's own variables and atc's, minus the ones that name daemon-side paths
        // (the report socket inside the imp is a forward of its own) and the key of the
        // daemon's reporter socket, which the bridge does not need and an imp never gets.
        for (k, v) in plan.env {
            if !["ATC_SOCKET", "ATC_SESSION_RECORD", "ATC_REPORT_KEY"].contains(&k.as_str()) {
                env.insert(k, v);
            }
        }
        env.insert("ATC_SESSION_ID".into(), spec.session_id.to_string());
        // A broker-backed agent holds placeholders only, and a config folder of its own
        // that the readying creates.
        let broker_launch = plan.broker.clone();
        let auth_dir = broker_launch
            .as_ref()
            .map(|b| b.config_dir(&settings.guest_dir, &spec.session_id.to_string()));
        if let Some(b) = &broker_launch {
            env.extend(b.env(&settings.guest_dir, &spec.session_id.to_string()));
        }
        // Hooks report to the guest end of the report socket; the outbox (where the guest
        // reporter keeps what it could not send yet) sits beside it.
        let socket = report.path().to_string();
        let base = socket.strip_suffix(".sock").unwrap_or(&socket);
        env.insert("ATC_OUTBOX".into(), format!("{base}.outbox"));
        env.insert("ATC_SOCKET".into(), socket);
        env.insert("ATC_BRIDGE".into(), "1".into());
        let cwd = plan.cwd.display().to_string();
        let signin = broker_launch.as_ref().and_then(|b| {
            Some(SigninCheck {
                agent: b.agent.clone(),
                argv: b.auth.check.clone()?,
                env: env.clone(),
                cwd: cwd.clone(),
            })
        });
        let revive = spec.host == HostUse::Existing && !spec.attach_only;
        let params = StartParams {
            session: impd_client::exec_session_name(&spec.session_id.to_string()),
            imp,
            argv: std::iter::once(plan.bin).chain(plan.args).collect(),
            env,
            cwd,
            require_broker: broker_launch.is_some(),
        };
        // A restart re-attaches with the position its row kept, or with none when the last
        // daemon died between writing the spawn's row and the process's position.
        let origin = match (&spec.remote, spec.attach_only) {
            (p, true) => Origin::Restart {
                generation: p.as_ref().map(|p| p.generation.clone()),
            },
            (Some(_), false) => Origin::Revive,
            (None, false) => Origin::Spawn,
        };
        let state = HarnessState::new(
            params,
            origin,
            spec.size,
            spec.remote.as_ref(),
            settings.reconnect_delays.clone(),
        );
        ImpHarness {
            settings,
            lease,
            state,
            events,
            ready_tx: Some(ready_tx),
            start_refusal: None,
            kill_timer: None,
            report: Some(report),
            forward: None,
            install_atc,
            auth_dir,
            broker_launch: broker_launch.map(|b| (b, spec.session_id.to_string())),
            broker: None,
            launch_refusal: None,
            signin,
            signin_refused: false,
            started: false,
            revive,
            metrics: crate::metrics::Metrics::new(),
            reconnecting_since: None,
        }
    }

    /// Counts reconnects into the daemon's `metrics` (without: into a set nobody reads).
    pub fn with_metrics(mut self, metrics: crate::metrics::Metrics) -> ImpHarness {
        self.metrics = metrics;
        self
    }

    /// A reconnect ended (a connection started again, or the harness ended meanwhile).
    fn reconnect_ended(&mut self, outcome: crate::metrics::ReconnectOutcome) {
        if let Some(since) = self.reconnecting_since.take() {
            self.metrics.reconnected(outcome, since.elapsed());
        }
    }

    /// A broker-backed agent's harness: it binds or verifies its host, and takes a ticket
    /// for each connection (spec §6.4).
    pub fn with_broker(mut self, broker: Option<BrokerSide>) -> ImpHarness {
        self.broker = broker;
        self
    }

    /// Carries out what the state decided, in order.
    fn apply(&mut self, effects: Vec<Effect>, ctx: &mut Context<Self>) {
        use crate::metrics::ReconnectOutcome;
        for effect in effects {
            match effect {
                // Only a started connection's drop is a reconnect; retries before the first
                // start are the spawn's own wait.
                Effect::Reattaching if self.started => {
                    self.reconnecting_since
                        .get_or_insert_with(std::time::Instant::now);
                }
                Effect::Attached(_) => self.reconnect_ended(ReconnectOutcome::Reattached),
                Effect::Finish { .. } => self.reconnect_ended(ReconnectOutcome::Ended),
                _ => {}
            }
            if matches!(effect, Effect::Attached(_)) {
                self.started = true;
                // Before the session hears of the start: whatever it asks the binding next
                // finds it `ready`.
                if let Some(b) = &mut self.broker {
                    b.started();
                }
            }
            if let Some(change) = effect.attachment() {
                // The session announces the change only when the state actually changed.
                self.events.attachment.do_send(change);
            }
            match effect {
                Effect::Open { attempt, opening } => self.connect(attempt, opening, ctx),
                Effect::OpenAfter(delay) => {
                    ctx.run_later(delay, |act, ctx| {
                        let effects = act.state.open();
                        act.apply(effects, ctx);
                    });
                }
                Effect::ResetScreen => self
                    .events
                    .output
                    .do_send(OutputArrived(bytes::Bytes::from_static(SCREEN_RESET))),
                Effect::Reattaching => {}
                Effect::Attached(_) => {
                    if let Some(tx) = self.ready_tx.take() {
                        // The spawn stopped waiting; the session learns of the start anyway.
                        let _ = tx.send(Ok(()));
                    }
                }
                Effect::AskLease => self.ask_lease(ctx),
                Effect::Relisten => {
                    if let Some(forward) = &self.forward {
                        forward.do_send(Relisten);
                    }
                }
                Effect::Finish {
                    exit,
                    give_back_lease,
                } => {
                    let refused_behind_broker = self.broker.is_some()
                        && (self.signin_refused
                            || self.launch_refusal.is_some()
                            || self.start_refusal.is_some());
                    if !self.started {
                        if let Some(b) = &self.broker {
                            // Whichever way it ended before starting (a refusal before any
                            // connection included), a created binding's attempt goes back.
                            let detail = exit.detail.as_deref().unwrap_or("the process ended");
                            b.never_started(detail);
                        }
                    }
                    if give_back_lease {
                        self.lease.do_send(HarnessGone);
                        if self.revive && !self.started && refused_behind_broker {
                            self.sleep_if_idle();
                        }
                    }
                    if let Some(forward) = self.forward.take() {
                        forward.do_send(CloseForward);
                    }
                    if let Some(tx) = self.ready_tx.take() {
                        let detail = exit
                            .detail
                            .clone()
                            .unwrap_or_else(|| "the process ended".into());
                        let (imp, _) = self.state.names();
                        let imp = imp.to_string();
                        // The binding's refusal of a launch comes first: that connection
                        // ended only because of it.
                        let refusal = match (self.launch_refusal.take(), self.start_refusal.take())
                        {
                            (Some(launch), _) => launch,
                            (None, Some(StartRefusal::ImpdTooOld)) => {
                                BrokerError::ExecRequireMissing { imp }.into()
                            }
                            (None, Some(StartRefusal::BrokerNotReady { detail })) => {
                                BrokerError::BrokerNotReady { imp, detail }.into()
                            }
                            (None, None) => HostError::NotStarted {
                                target: self.settings.target.clone(),
                                detail,
                            }
                            .into(),
                        };
                        // The spawn stopped waiting; the session learns of the end anyway.
                        let _ = tx.send(Err(refusal));
                    }
                    let (imp, session) = self.state.names();
                    tracing::info!(imp = %imp, session = %session, end = ?exit.end,
                        detail = ?exit.detail, "remote harness ended");
                    self.events.exited.do_send(exit);
                    ctx.stop();
                }
            }
        }
    }

    /// Opens connection `attempt`; a broker-backed harness first takes a ticket for it, and
    /// the connection checks it at the last moment. A refused admission ends the harness,
    /// with the refusal as its start refusal.
    fn connect(&mut self, attempt: u64, opening: Opening, ctx: &mut Context<Self>) {
        let client = self.settings.client();
        let Some(broker) = &self.broker else {
            ImpConnection::new(attempt, ctx.address(), client, opening, None).start();
            return;
        };
        let kind = match &opening {
            Opening::Start(_) => AdmitKind::Start,
            Opening::Attach(_) => AdmitKind::Attach,
        };
        ctx.wait(
            broker
                .admit(kind)
                .into_actor(self)
                .map(move |res, act, ctx| match res {
                    Ok(ticket) => {
                        ImpConnection::new(attempt, ctx.address(), client, opening, Some(ticket))
                            .start();
                    }
                    Err(e) => act.launch_refused(e, ctx),
                }),
        );
    }

    /// The binding refused a launch (at admission or at its last-moment check): nothing
    /// was sent, and the harness ends with that refusal.
    fn launch_refused(&mut self, e: ProviderError, ctx: &mut Context<Self>) {
        let detail = format!("launch refused ({e})");
        self.launch_refusal = Some(e);
        let effects = self.state.ended_with(detail);
        self.apply(effects, ctx);
    }

    /// A refused revive behind the broker (spec §3.8): the host it woke goes back to sleep,
    /// unless another harness runs there. Sent after `HarnessGone`, so the lease counts this
    /// harness gone by then.
    fn sleep_if_idle(&self) {
        let asked = self.lease.send(SleepIfIdle);
        let imp = self.state.names().0.to_string();
        actix::spawn(async move {
            match asked.await {
                Ok(Ok(())) => tracing::info!(imp = %imp, "refused revive: host back asleep"),
                Ok(Err(e)) => {
                    tracing::info!(imp = %imp, error = %e, "refused revive: host kept awake")
                }
                // The lease actor stopped: the daemon is shutting down.
                Err(_) => {}
            }
        });
    }

    /// Runs the agent's sign-in check in the readied imp, then goes on to listen and
    /// connect; a failed check refuses the start with `auth_not_configured`. What the check
    /// printed is dropped unread: it could name an account. Only how it ended is kept.
    fn check_signin_then_connect(&mut self, ctx: &mut Context<Self>) {
        let Some(check) = self.signin.clone() else {
            return self.listen_then_connect(ctx);
        };
        let client = self.settings.client();
        let target = self.settings.target.clone();
        let spec = impd_client::RunSpec {
            name: self.state.names().0.to_string(),
            argv: check.argv,
            cwd: Some(check.cwd),
            env: check.env,
            stdin: Default::default(),
        };
        ctx.wait(async move { client.run(spec).await }.into_actor(self).map(
            move |res, act, ctx| {
                let outcome = match res {
                    Ok(r) if r.code == Some(0) => return act.listen_then_connect(ctx),
                    Ok(r) => match r.code {
                        Some(code) => CheckOutcome::Exited(code),
                        None => CheckOutcome::Signalled,
                    },
                    Err(e) if e.is(ImpdCode::ExecFailed) => CheckOutcome::NotRun,
                    Err(e) => {
                        let err = HostError::impd(&target, "running the sign-in check", &e);
                        return act.refuse(err, ctx);
                    }
                };
                act.signin_refused = true;
                let err = BrokerError::NotConfigured {
                    agent: check.agent,
                    target,
                    outcome,
                };
                act.refuse(err, ctx);
            },
        ));
    }

    /// Re-attached after a daemon restart: the host counts this harness again.
    fn ask_lease(&mut self, ctx: &mut Context<Self>) {
        // The process runs already, with whatever atc its hooks found.
        let ready = self.lease.send(ReadyHost {
            install_atc: false,
            auth_dir: None,
        });
        ctx.spawn(ready.into_actor(self).map(|res, act, _| match res {
            Ok(Ok(ready)) => {
                if act.state.lease_held(ready.offsets) {
                    act.lease.do_send(HarnessGone);
                }
            }
            Ok(Err(e)) => {
                let (imp, _) = act.state.names();
                tracing::warn!(imp = %imp, error = %e, "re-attached, but the host could not be readied")
            }
            // The lease actor stopped: the daemon is shutting down and nothing is counted.
            Err(_) => {}
        }));
    }

    /// Starts the report socket and opens the first connection once it listens (spec §5.6:
    /// the start waits for the forward); impd's refusal ends the harness.
    fn listen_then_connect(&mut self, ctx: &mut Context<Self>) {
        let Some(report) = self.report.take() else {
            let effects = self.state.open();
            return self.apply(effects, ctx);
        };
        let forward = report.start();
        self.forward = Some(forward.clone());
        ctx.wait(
            forward
                .send(Listen)
                .into_actor(self)
                .map(|res, act, ctx| match res {
                    Ok(Ok(())) => {
                        let effects = act.state.open();
                        act.apply(effects, ctx);
                    }
                    Ok(Err(e)) => {
                        let err = super::report_forward::refused(&act.settings.target, &e);
                        act.refuse(err, ctx);
                    }
                    Err(_) => {
                        let effects = act.state.ended_with("the report socket stopped".into());
                        act.apply(effects, ctx);
                    }
                }),
        );
    }

    /// A start that never succeeded, refused before any connection (the host could not be
    /// readied): the refusal is the spawn's answer.
    fn refuse(&mut self, err: impl Into<ProviderError>, ctx: &mut Context<Self>) {
        let err = err.into();
        let detail = err.to_string();
        if let Some(tx) = self.ready_tx.take() {
            // The spawn stopped waiting; the session learns of the end anyway.
            let _ = tx.send(Err(err));
        }
        let effects = self.state.ended_with(detail);
        self.apply(effects, ctx);
    }

    fn signal(&mut self, signal: Signal) {
        self.state.signal(signal);
    }
}

impl Actor for ImpHarness {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // A broker-backed harness binds (or verifies) its host before anything else: the
        // refusal of either is the spawn's or revive's answer, and nothing reaches impd's
        // /exec.
        if let Some(b) = &self.broker {
            ctx.wait(b.prepare().into_actor(self).map(|res, act, ctx| match res {
                Ok(binding) => {
                    if let Some(b) = &mut act.broker {
                        b.prepared(&binding);
                    }
                    act.follow_revision(binding.revision);
                    act.begin(ctx);
                }
                Err(e) => act.refuse(e, ctx),
            }));
            return;
        }
        self.begin(ctx);
    }
}

impl ImpHarness {
    /// The binding was created or verified at `revision`: the agent's config folder (and
    /// the variable naming it) is that revision's, so a launch after a rebind never reuses
    /// what the earlier credential left behind. Before the first opening only.
    fn follow_revision(&mut self, revision: u32) {
        let Some((launch, session)) = &mut self.broker_launch else {
            return;
        };
        if launch.revision == revision {
            return;
        }
        launch.revision = revision;
        self.auth_dir = Some(launch.config_dir(&self.settings.guest_dir, session));
        self.state
            .set_env(launch.env(&self.settings.guest_dir, session));
    }

    /// Readies the host (or, after a daemon restart, attaches first) and opens the first
    /// connection.
    fn begin(&mut self, ctx: &mut Context<Self>) {
        // A daemon restart attaches first (`wake: false`): readying the host would take the
        // lease, and taking a lease wakes a sleeping imp. The host is readied once the
        // attach found it awake.
        if matches!(self.state.origin(), Origin::Restart { .. }) {
            let effects = self.state.open();
            return self.apply(effects, ctx);
        }
        let ready = self.lease.send(ReadyHost {
            install_atc: self.install_atc,
            auth_dir: self.auth_dir.clone(),
        });
        ctx.wait(ready.into_actor(self).map(|res, act, ctx| {
            match res.unwrap_or(Err(HostError::LeaseGone)) {
                Ok(ready) => {
                    if act.state.lease_held(ready.offsets) {
                        act.lease.do_send(HarnessGone);
                        return;
                    }
                    act.check_signin_then_connect(ctx);
                }
                Err(e) => act.refuse(e, ctx),
            }
        }));
    }
}

impl Handler<ConnStarted> for ImpHarness {
    type Result = ();

    fn handle(&mut self, msg: ConnStarted, ctx: &mut Self::Context) {
        // Only an output with offsets names its boot.
        if let Some(output) = msg.started.output.as_ref().filter(|o| o.has_offsets()) {
            self.lease.do_send(BootSeen(output.boot_id.clone()));
        }
        let effects = self.state.started(msg.attempt, msg.started, msg.writer);
        self.apply(effects, ctx);
    }
}

impl Handler<ConnData> for ImpHarness {
    type Result = ();

    fn handle(&mut self, msg: ConnData, ctx: &mut Self::Context) {
        let bytes = self.state.data(msg.attempt, msg.bytes);
        if bytes.is_empty() {
            return;
        }
        // impd's frames reach 256 KiB on a replay, and the session sizes its screen backlog in
        // pieces of at most MAX_OUTPUT_CHUNK. The harness takes no other message until the last
        // piece is taken: nothing it sends (a screen reset) comes between them, and the
        // connection's next frame waits, which paces impd's stream.
        let output = self.events.output.clone();
        ctx.wait(
            async move {
                for piece in output_pieces(bytes) {
                    if output.send(OutputArrived(piece)).await.is_err() {
                        // A session that stopped takes no more output; the harness ends with it.
                        break;
                    }
                }
            }
            .into_actor(self),
        );
    }
}

impl Handler<ConnLaunchRefused> for ImpHarness {
    type Result = ();

    fn handle(&mut self, msg: ConnLaunchRefused, _: &mut Self::Context) {
        // Kept as the start refusal; the attempt's end (which follows) ends the harness.
        if self.state.is_current(msg.attempt) {
            self.launch_refusal = Some(msg.error);
        }
    }
}

impl Handler<ConnEnded> for ImpHarness {
    type Result = ();

    fn handle(&mut self, msg: ConnEnded, ctx: &mut Self::Context) {
        let Some(next) = self.state.ended(msg.attempt, &msg.end, msg.started) else {
            return;
        };
        self.start_refusal = super::outcome::start_refusal(&msg.end);
        // A sleep under way closes our connection on purpose: what follows is the sleep's
        // business (the session is told the host slept), not a harness end or a reconnect.
        let suspending = self.lease.send(IsSuspending);
        ctx.wait(suspending.into_actor(self).map(move |res, act, ctx| {
            if res.unwrap_or(false) && !matches!(next, Next::Exited { .. }) {
                tracing::debug!(imp = %act.state.names().0,
                    "connection ended by a sleep; outcome not handled");
                return;
            }
            let effects = act.state.after(next);
            act.apply(effects, ctx);
        }));
    }
}

impl Handler<WriteInput> for ImpHarness {
    type Result = Result<(), ProviderError>;

    fn handle(&mut self, msg: WriteInput, _: &mut Self::Context) -> Self::Result {
        self.state.input(msg.0).map_err(ProviderError::from)
    }
}

impl Handler<ResizeTerminal> for ImpHarness {
    type Result = ();

    fn handle(&mut self, msg: ResizeTerminal, _: &mut Self::Context) {
        self.state.resize(msg.0);
    }
}

impl Handler<Hangup> for ImpHarness {
    type Result = ();

    fn handle(&mut self, msg: Hangup, ctx: &mut Self::Context) {
        if self.kill_timer.is_some() {
            return;
        }
        if msg.grace.is_zero() {
            self.signal(Signal::Kill);
            return;
        }
        self.signal(Signal::Hangup);
        self.kill_timer = Some(ctx.run_later(msg.grace, |act, _| act.signal(Signal::Kill)));
    }
}

impl Handler<DetachHarness> for ImpHarness {
    type Result = ();

    /// The process keeps running under its session name; a later attach picks it up.
    fn handle(&mut self, msg: DetachHarness, ctx: &mut Self::Context) {
        let effects = self.state.detach(msg.host_asleep);
        self.apply(effects, ctx);
    }
}
