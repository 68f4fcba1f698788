//! One `Session` actor per session: its descriptor and state, screen model, output ring with
//! offsets, and attached clients with their bounded queues. It is the only writer of its row
//! in the store. It never touches a PTY or a socket: its harness and its clients' socket
//! writers do that and reach it by message.
//!
//! This file is the actor shell: the state, the descriptor, and one short `Handler` per
//! message. What each handler does lives in a part beside it, the plain ones unit-tested
//! without an actor system: `record` (the row), `clients` and `client_delivery` (what
//! each client is sent and when, the size they agree on), `attention` (attention and
//! permissions), `activity` (the attention of agents without hooks, from output and CPU),
//! `start` (spawn, restore and re-attach, revive, a process's end),
//! `input` (writes to the process, and the port an attached client types through),
//! `host_ops` (kill, suspend, forget and its confirmation), `shared_host` (a host shared
//! with a parent, whose sleeps and destroys follow its owner), `auth` (the host's broker
//! binding, with its handlers) and `naming`. Every handler
//! that reaches the target asks the refusal chain first (`Session::refuse`).

mod activity;
mod attention;
mod auth;
mod client_delivery;
mod clients;
mod host_ops;
mod input;
mod naming;
mod reach_check;
mod record;
mod report_budget;
mod screen_link;
mod shared_host;
mod start;

pub use record::{ExitInfo, SessionRecord};

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::input_port::InputPort;
use super::messages::*;
use super::screen::ScreenText;
use super::screen_worker::{ResizeScreen, ScreenAsText, ScreenWorker, TakeSnapshot};
use crate::agents::hooks::HookMemory;
use crate::agents::AgentCatalog;
use crate::agents::AgentKind;
use crate::clock::now_ms;
use crate::config::{Limits, Timings};
use crate::providers::refusal::{Operation, Refusal};
use crate::providers::{
    AttachmentChanged, CheckIdle, HarnessExited, HarnessHandle, OutputArrived, ResizeTerminal,
};
use crate::sessions::session_error::SessionError;
use crate::store::StateStore;
use atc_protocol::TermSize;
use atc_protocol::{
    AttachFrame, Attachment, Descriptor, ExitReason, FleetEvent, Lifecycle, SessionState,
};
use attention::Attention;
use clients::{counted_size, Clients, Newcomer, Opened};
use host_ops::ForgetConfirmation;
use start::provider_of;
pub use start::{wait_started, wait_written, RowWritten, StartWait};

/// What every session shares with its siblings: the store, the provider, limits and timings.
#[derive(Clone)]
pub struct SessionDeps {
    /// Where rows go.
    pub store: StateStore,
    /// Starts harnesses: the provider of each target.
    pub providers: crate::providers::registry::Providers,
    /// Resolves agents on revive.
    pub catalog: Arc<AgentCatalog>,
    /// Where notices go.
    pub manager: Recipient<FleetNotice>,
    /// Who says whether a name would shadow another session's id (the manager).
    pub names: Recipient<ShadowedId>,
    /// Who hears what an owner did to its host, to pass on to the other sessions there (the
    /// manager).
    pub hosts: crate::sessions::host_messages::HostMates,
    /// Who stops a killed parent's live sub-sessions (the manager).
    pub children: Recipient<ParentKilled>,
    /// Sizes.
    pub limits: Limits,
    /// Durations.
    pub timings: Timings,
    /// The thread where every session's screen model is parsed.
    pub screen_arbiter: actix::ArbiterHandle,
    /// The state dir (session records live under it).
    pub state_dir: std::path::PathBuf,
    /// This daemon's id, for session records.
    pub daemon_id: Uuid,
    /// The refusal chain (spec §4.4), asked once by each operation's handler.
    pub refusal: Refusal,
    /// The reporter socket harnesses report to (`ATC_SOCKET`).
    pub reporter_socket: std::path::PathBuf,
    /// The keys each session's process reports with (`ATC_REPORT_KEY`).
    pub report_keys: crate::sessions::report_key::ReportKeys,
    /// Where Codex keeps `session_index.jsonl` (its names); `None`: Codex names are not read.
    pub codex_home: Option<std::path::PathBuf>,
    /// Where `needs_you` opens permission requests.
    pub permissions: Addr<crate::permissions::registry::PermissionRegistry>,
    /// The `atc` program agents' hooks run (`atc hook-report`).
    pub atc_program: std::path::PathBuf,
    /// This daemon's metrics.
    pub metrics: crate::metrics::Metrics,
    /// The activity rule's shared sweep and thresholds.
    pub activity: crate::sessions::activity_sweep::ActivityWatch,
    /// The cap on sessions with a running process: each start takes a slot.
    pub slots: crate::sessions::live_slots::LiveSlots,
    /// Where sessions' workspaces are made and recorded.
    pub workspaces: crate::sessions::workspace_step::Workspaces,
}

/// Why the process is being ended, which decides the recorded exit reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Killed,
    DaemonStopping,
}

/// One session.
pub struct Session {
    record: SessionRecord,
    deps: SessionDeps,
    /// The screen worker, and the output chunk held back for it.
    screen: screen_link::ScreenLink,
    /// The output stream and the attached clients.
    clients: Clients,
    harness: Option<HarnessHandle>,
    /// The harness's place under the cap on running sessions: held exactly while `harness`
    /// is (given back when the exit is recorded, or with the actor).
    slot: Option<crate::sessions::live_slots::LiveSlot>,
    ending: Option<Ending>,
    /// The harness's connection (remote harnesses report changes).
    attachment: Attachment,
    /// Whether the target's provider runs processes elsewhere.
    remote: bool,
    /// When the process last wrote (idleness for host sleeps).
    last_output: std::time::Instant,
    /// The forget confirmation token minted last, kept one lifetime past its expiry so an
    /// expired token is told apart from an unknown one.
    forget_token: ForgetConfirmation,
    /// The attention state while a harness runs (from hooks or activity), `unread` and
    /// `lastMsg`.
    attention: Attention,
    /// What the attention state follows (the agent's `attention`).
    attention_mode: crate::config::attention::AttentionMode,
    /// The activity rule, while a process runs under it.
    activity: Option<activity::ActivityRule>,
    /// What the hook mapping remembers between reports (spec §9.5).
    hooks: HookMemory,
    /// How many more hook reports the session may send now.
    reports: report_budget::ReportBudget,
    /// Reading the name the agent keeps in its files.
    names: naming::NameRefresh,
    /// The current process was started on purpose (a spawn or a client's revive), not by a
    /// fleet restore; its first `started` report writes `last_used_agent`.
    deliberate_start: bool,
    resize_timer: Option<SpawnHandle>,
    /// Callers waiting for the current process to end (kill, shutdown).
    exit_waiters: Vec<oneshot::Sender<()>>,
    /// The host's broker binding as last learned (see `auth`); `None` for other agents.
    auth: Option<atc_protocol::responses::SessionAuth>,
}

impl Session {
    fn new(record: SessionRecord, deps: SessionDeps) -> Session {
        let attention_mode = activity::mode_of(&deps.catalog, &record.agent);
        Session {
            screen: screen_link::ScreenLink::new({
                let size = record.size;
                // The model may lag the ring by at most half of it, so a snapshot's offset is
                // always still in the ring when the session replays from it.
                let mailbox = (deps.limits.ring_bytes / (2 * screen_link::MAX_FEED_BYTES)).max(1);
                ScreenWorker::start_in_arbiter(&deps.screen_arbiter, move |_| {
                    ScreenWorker::new(size, 0, mailbox)
                })
            }),
            clients: Clients::new(deps.limits.ring_bytes, deps.metrics.clone()),
            harness: None,
            slot: None,
            ending: None,
            attachment: Attachment::Detached,
            remote: deps
                .providers
                .get(&record.target)
                .is_some_and(|p| p.remote()),
            last_output: std::time::Instant::now(),
            forget_token: ForgetConfirmation::default(),
            attention: Attention::new(activity::initial_source(attention_mode)),
            attention_mode,
            activity: None,
            hooks: HookMemory::default(),
            reports: report_budget::ReportBudget::new(
                deps.limits.reports_per_second,
                deps.limits.report_burst,
                std::time::Instant::now(),
            ),
            names: naming::NameRefresh::default(),
            // Spawns are deliberate; each revive says whether it is.
            deliberate_start: true,
            resize_timer: None,
            exit_waiters: Vec::new(),
            auth: None,
            record,
            deps,
        }
    }

    /// The refusal chain for `op` on this session's target and bound identity; each
    /// operation's handler asks it once, before anything else.
    fn refuse(&self, op: Operation) -> Result<(), SessionError> {
        self.deps
            .refusal
            .check(op, &self.record.target, &self.record.target_identity)
            .map_err(SessionError::from)
    }

    /// The kind of the session's agent (`claude`, `codex`, …); `None` for an agent without one.
    fn agent_kind(&self) -> Option<AgentKind> {
        self.deps.catalog.kind(&self.record.agent)
    }

    fn descriptor(&self) -> Descriptor {
        let alive = self.harness.is_some();
        let exit = if alive { None } else { self.record.exit };
        Descriptor {
            id: self.record.id,
            name: self.record.name.clone(),
            named_by: self.record.named_by,
            agent: self.record.agent.clone(),
            cwd: self.record.cwd.clone(),
            state: if alive {
                self.attention.state()
            } else {
                SessionState::Exited
            },
            unread: self.attention.unread(),
            last_msg: self.attention.last_msg().to_string(),
            state_source: self.attention.source(),
            alive,
            exit_code: exit.and_then(|e| e.code),
            exit_signal: exit.and_then(|e| e.signal),
            exit_reason: exit.map(|e| e.reason),
            pinned: self.record.pinned,
            cols: self.record.size.cols,
            rows: self.record.size.rows,
            created_at: self.record.created_at,
            last_attached_at: self.record.last_attached_at,
            kind: atc_protocol::OutputKind::Pty,
            stream: self.clients.stream().to_string(),
            locator: atc_protocol::Locator {
                daemon_id: self.deps.daemon_id,
                target_id: self.record.target.clone(),
            },
            target_identity: self.record.target_identity.clone(),
            agent_session_id: self
                .record
                .agent_session_id
                .as_ref()
                .map(ToString::to_string),
            lifecycle: self.lifecycle(),
            auth: self.auth,
            workspace: self.record.workspace.clone(),
            limits: (!self.record.limits.is_empty()).then_some(self.record.limits),
            usage: None,
            parent: self.record.parent,
            host_key: self.record.host_key,
        }
    }

    fn lifecycle(&self) -> Lifecycle {
        use atc_protocol::{Desired, HarnessLayer, VmState};
        let alive = self.harness.is_some();
        let reason = self.record.exit.map(|e| e.reason);
        // The host went to sleep with the process inside, and no revive has run since.
        let suspended = !alive && reason == Some(ExitReason::Suspended);
        Lifecycle {
            desired: match (alive, reason) {
                (true, _) => Desired::Run,
                (false, Some(ExitReason::Suspended)) => Desired::Sleep,
                (false, Some(ExitReason::Killed)) => Desired::Stop,
                (false, _) => Desired::Run,
            },
            vm: match (self.remote, alive, suspended) {
                (false, _, _) => VmState::None,
                (true, _, true) => VmState::Asleep,
                (true, true, false) if self.attachment == Attachment::Attached => VmState::Awake,
                (true, _, false) => VmState::Unknown,
            },
            harness: match (alive, suspended) {
                (true, _) => HarnessLayer::Running,
                (false, true) => HarnessLayer::Suspended,
                (false, false) => HarnessLayer::Exited,
            },
            attachment: if alive {
                self.attachment
            } else {
                Attachment::Detached
            },
        }
    }

    /// Queues the row write; it lands after every earlier write of this session.
    fn persist(&self) -> oneshot::Receiver<Result<(), crate::store::StoreError>> {
        self.deps.store.upsert_session(self.record.to_row())
    }

    fn notify(&self, event: FleetEvent) {
        self.deps.manager.do_send(FleetNotice(event));
    }

    fn notify_state(&mut self) {
        let d = self.descriptor();
        self.clients.broadcast(&AttachFrame::State {
            session: Box::new(d.clone()),
        });
        self.notify(FleetEvent::State {
            session: Box::new(d),
        });
    }

    /// Applies a new size to the PTY and the screen model if it differs, and tells everyone.
    fn apply_size(&mut self, size: TermSize) {
        if size == self.record.size {
            return;
        }
        self.record.size = size;
        self.screen.worker().do_send(ResizeScreen(size));
        if let Some(h) = &self.harness {
            h.resize.do_send(ResizeTerminal(size));
        }
        self.clients.broadcast(&AttachFrame::Resized {
            cols: size.cols,
            rows: size.rows,
        });
        self.notify(FleetEvent::Resized {
            s: self.record.id,
            cols: size.cols,
            rows: size.rows,
        });
    }

    fn schedule_resize(&mut self, ctx: &mut Context<Self>) {
        if let Some(t) = self.resize_timer.take() {
            ctx.cancel_future(t);
        }
        self.resize_timer = Some(ctx.run_later(self.deps.timings.resize_debounce, |act, _| {
            act.resize_timer = None;
            if let Some(size) = act.clients.size_to_apply(act.record.size) {
                act.apply_size(size);
            }
        }));
    }

    fn attach(
        &mut self,
        msg: Attach,
        ctx: &mut Context<Self>,
    ) -> Result<Option<InputPort>, SessionError> {
        self.refuse(Operation::Attach)?;
        let Some(harness) = &self.harness else {
            return Err(SessionError::Dead { id: self.record.id });
        };
        let port = self.input_port(harness, msg.mode, &ctx.address());
        let resume_from = self.clients.resume_point(msg.resume.as_ref());
        // Spec §3.6: the new effective size applies before the replay, so the repaint fits.
        // The new client learns it from its `attached`, so it applies before the slot exists.
        if let Some(size) = self
            .clients
            .size_on_attach(counted_size(msg.mode, msg.size))
        {
            self.apply_size(size);
        }
        // Pending until its `attached` is out: anything meanwhile is held for it.
        let opened = self.clients.attach(
            msg.client,
            Newcomer {
                queue: msg.queue,
                size: msg.size,
                mode: msg.mode,
                reach: msg.reach,
            },
            resume_from,
            self.record.id,
            self.record.size,
        );
        if opened == Opened::NeedsRepaint {
            self.request_repaint(msg.client, ctx);
        }
        match msg.mode {
            AttachMode::Interactive => {
                // Spec §3.4: attaching answers the attention request.
                let change = self.attention.attached();
                self.permit(change);
                self.record.last_attached_at = Some(now_ms());
                self.persist();
                self.notify_state();
            }
            // A watcher cannot answer a prompt, so a dashboard watching every session must not
            // clear their needs-you flags or unread markers.
            AttachMode::Watch => {}
        }
        Ok(port)
    }

    /// Asks the screen worker for a snapshot; the client gets it (and the ring's bytes after
    /// it) when the answer comes back.
    fn request_repaint(&mut self, client: ClientId, ctx: &mut Context<Self>) {
        // The snapshot has the size the screen has when it takes it: every resize sent to
        // the worker so far, and none sent after (those are held for the client and follow).
        let size = self.record.size;
        ctx.spawn(
            self.screen
                .worker()
                .send(TakeSnapshot)
                .into_actor(self)
                .map(move |res, act, _| match res {
                    Ok(snapshot) => {
                        act.clients
                            .finish_repaint(client, act.record.id, size, snapshot)
                    }
                    Err(e) => {
                        tracing::error!(session = %act.record.id, error = %e, "screen worker gone")
                    }
                }),
        );
    }

    fn on_output(&mut self, bytes: &Bytes) {
        self.last_output = std::time::Instant::now();
        self.activity_output(self.last_output);
        self.deps.metrics.output_read(bytes.len());
        self.clients.output(bytes);
    }

    fn resync(&mut self, client: ClientId, ctx: &mut Context<Self>) {
        if self.clients.start_resync(client) {
            self.request_repaint(client, ctx);
        }
    }
}

impl Handler<HookReported> for Session {
    type Result = Result<(), crate::agents::report_check::ReportRefused>;

    fn handle(&mut self, msg: HookReported, ctx: &mut Self::Context) -> Self::Result {
        self.apply_hook(msg, ctx)
    }
}

impl Handler<GetDescriptor> for Session {
    type Result = MessageResult<GetDescriptor>;

    fn handle(&mut self, _: GetDescriptor, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.descriptor())
    }
}

impl Handler<crate::providers::ReadSessionView> for Session {
    type Result = MessageResult<crate::providers::ReadSessionView>;

    /// What a remote harness's session bridge checks each line against (spec §5.7).
    fn handle(
        &mut self,
        _: crate::providers::ReadSessionView,
        _: &mut Self::Context,
    ) -> Self::Result {
        let d = self.descriptor();
        MessageResult(crate::providers::SessionView {
            target: d.locator.target_id,
            target_identity: d.target_identity,
            state: d.state,
            last_msg: d.last_msg,
        })
    }
}

impl Actor for Session {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // A spawn, and every restore after a daemon restart: the binding is read afresh.
        self.refresh_auth(ctx);
    }
}

impl Handler<OutputArrived> for Session {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, msg: OutputArrived, _: &mut Self::Context) -> Self::Result {
        self.on_output(&msg.0);
        // The clients' frames are queued; the screen model parses the output on its own thread
        // once their socket writers have run, and small chunks only once enough are gathered
        // (`screen_link` says why). Only when the worker's mailbox is full does the harness
        // wait, which paces the PTY reader.
        if !self.screen.hold(msg.0) {
            return Box::pin(fut::ready(()));
        }
        Box::pin(
            fut::wrap_future::<_, Self>(tokio::task::yield_now())
                .then(|(), act, _| fut::wrap_future(act.screen.hand_on())),
        )
    }
}

impl Handler<HarnessExited> for Session {
    type Result = ();

    fn handle(&mut self, msg: HarnessExited, _: &mut Self::Context) {
        self.on_exited(msg);
    }
}

impl Handler<Attach> for Session {
    type Result = Result<Option<InputPort>, SessionError>;

    fn handle(&mut self, msg: Attach, ctx: &mut Self::Context) -> Self::Result {
        self.attach(msg, ctx)
    }
}

impl Handler<Detach> for Session {
    type Result = ();

    fn handle(&mut self, msg: Detach, ctx: &mut Self::Context) {
        if self.clients.detach(msg.client) {
            self.schedule_resize(ctx);
        }
    }
}

impl Handler<Input> for Session {
    type Result = ResponseFuture<Result<(), SessionError>>;

    fn handle(&mut self, msg: Input, _: &mut Self::Context) -> Self::Result {
        if let Err(e) = self.refuse(Operation::Input) {
            return Box::pin(std::future::ready(Err(e)));
        }
        if crate::sessions::input_port::holds_enter(&msg.0) {
            self.activity_input(std::time::Instant::now());
        }
        Box::pin(self.write_together(vec![msg.0]))
    }
}

impl Handler<Submit> for Session {
    type Result = ResponseActFuture<Self, Result<(), SessionError>>;

    fn handle(&mut self, msg: Submit, _: &mut Self::Context) -> Self::Result {
        if let Err(e) = self.refuse(Operation::Submit) {
            return Box::pin(fut::ready(Err(e)));
        }
        self.activity_input(std::time::Instant::now());
        self.submit(msg.0)
    }
}

impl Handler<ClientResized> for Session {
    type Result = ();

    fn handle(&mut self, msg: ClientResized, ctx: &mut Self::Context) {
        // A resize is skipped, never refused (spec §4.4): it needs no capability, so the
        // chain has nothing to say to the client.
        if self.refuse(Operation::Resize).is_err() {
            return;
        }
        if self.clients.resized(msg.client, msg.size) {
            self.schedule_resize(ctx);
        }
    }
}

impl Handler<ResizeSession> for Session {
    type Result = Result<TermSize, SessionError>;

    fn handle(&mut self, msg: ResizeSession, _: &mut Self::Context) -> Self::Result {
        self.refuse(Operation::Resize)?;
        self.apply_size(msg.0);
        self.persist();
        Ok(self.record.size)
    }
}

impl Handler<ClientDrained> for Session {
    type Result = ();

    fn handle(&mut self, msg: ClientDrained, ctx: &mut Self::Context) {
        self.resync(msg.client, ctx);
    }
}

impl Handler<Ack> for Session {
    type Result = MessageResult<Ack>;

    fn handle(&mut self, _: Ack, _: &mut Self::Context) -> Self::Result {
        if self.attention.unread() {
            self.attention.set_unread(false);
            self.notify_state();
        }
        MessageResult(self.descriptor())
    }
}

impl Handler<Update> for Session {
    type Result = ResponseActFuture<Self, Result<Descriptor, SessionError>>;

    fn handle(&mut self, msg: Update, _: &mut Self::Context) -> Self::Result {
        self.update(msg)
    }
}

impl Handler<GetScreen> for Session {
    type Result = ResponseFuture<Result<ScreenText, SessionError>>;

    fn handle(&mut self, _: GetScreen, _: &mut Self::Context) -> Self::Result {
        let screen = self.screen.worker().clone();
        Box::pin(async move {
            screen
                .send(ScreenAsText)
                .await
                .map_err(|_| SessionError::Internal)
        })
    }
}

impl Handler<Kill> for Session {
    type Result = ResponseActFuture<Self, Result<Killed, SessionError>>;

    fn handle(&mut self, _: Kill, _: &mut Self::Context) -> Self::Result {
        self.kill()
    }
}

/// Output this recent counts as "busy" for a host sleep.
const BUSY_OUTPUT: Duration = Duration::from_millis(500);

impl Handler<CheckIdle> for Session {
    type Result = bool;

    /// Idle: no agent turn under way (an agent with hooks whose attention is `running` is
    /// mid-turn) and no output for a moment.
    fn handle(&mut self, _: CheckIdle, _: &mut Self::Context) -> bool {
        let hooked = crate::agents::is_agent_cli(self.deps.catalog.kind(&self.record.agent));
        let mid_turn = hooked && self.attention.state() == SessionState::Running;
        !mid_turn && self.last_output.elapsed() >= BUSY_OUTPUT
    }
}

impl Handler<Suspend> for Session {
    type Result = ResponseActFuture<Self, Result<Descriptor, SessionError>>;

    fn handle(&mut self, msg: Suspend, _: &mut Self::Context) -> Self::Result {
        self.suspend(msg.force)
    }
}

impl Handler<MintForgetToken> for Session {
    type Result = Result<(String, i64), SessionError>;

    fn handle(&mut self, _: MintForgetToken, _: &mut Self::Context) -> Self::Result {
        self.mint_forget_token()
    }
}

impl Handler<ForgetDestroying> for Session {
    type Result = ResponseActFuture<Self, Result<(), SessionError>>;

    fn handle(&mut self, msg: ForgetDestroying, _: &mut Self::Context) -> Self::Result {
        self.forget_destroying(&msg.token)
    }
}

impl Handler<Forget> for Session {
    type Result = ResponseActFuture<Self, Result<(), SessionError>>;

    fn handle(&mut self, msg: Forget, _: &mut Self::Context) -> Self::Result {
        if let Err(e) = self.refuse(Operation::Forget) {
            return Box::pin(fut::ready(Err(e)));
        }
        self.forget(msg.force)
    }
}

impl Handler<ReadWorkspace> for Session {
    type Result = ResponseFuture<Result<atc_protocol::workspace::WorkspaceStatus, SessionError>>;

    fn handle(&mut self, _: ReadWorkspace, _: &mut Self::Context) -> Self::Result {
        let id = self.record.id;
        if self.record.workspace.is_none() {
            return Box::pin(async move { Err(SessionError::NoWorkspace { id }) });
        }
        let workspaces = self.deps.workspaces.clone();
        Box::pin(async move { workspaces.status(id).await })
    }
}

impl Handler<Discard> for Session {
    type Result = ResponseActFuture<Self, Result<(), SessionError>>;

    fn handle(&mut self, _: Discard, _: &mut Self::Context) -> Self::Result {
        // A start that was refused did no work in its workspace.
        self.forget(true)
    }
}

impl Handler<Revive> for Session {
    type Result = ResponseActFuture<Self, Result<Descriptor, SessionError>>;

    fn handle(&mut self, msg: Revive, ctx: &mut Self::Context) -> Self::Result {
        self.revive_for_client(msg.size, ctx)
    }
}

impl Handler<ReviveOnRestore> for Session {
    type Result = ResponseActFuture<Self, Result<Descriptor, SessionError>>;

    fn handle(&mut self, _: ReviveOnRestore, ctx: &mut Self::Context) -> Self::Result {
        self.revive_on_restore(ctx)
    }
}

impl Handler<AttachmentChanged> for Session {
    type Result = ();

    fn handle(&mut self, msg: AttachmentChanged, ctx: &mut Self::Context) {
        if matches!(msg, AttachmentChanged::Attached(_)) {
            // A spawn's binding is `ready` by now; a re-attach re-reads it too.
            self.refresh_auth(ctx);
        }
        self.on_attachment_changed(msg);
    }
}

impl Handler<Shutdown> for Session {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Shutdown, _: &mut Self::Context) -> Self::Result {
        self.shut_down()
    }
}
