//! `SessionManager`: the supervisor. It owns the map of sessions, spawns new ones, registers
//! the persisted fleet at start, revives it on request, and fans fleet events out to the
//! events sockets. Each session reports what changed through [`FleetNotice`]; the manager
//! keeps the last descriptor of each in its [`Fleet`], so listing never waits on a thousand
//! mailboxes, and the listing body serialized there, so it is not rebuilt per call. Beside
//! this file: `restore` (reviving the fleet after a restart, in its order) and `sub_sessions`
//! (placing a spawn under its parent, and passing what an owner did to its host on to the
//! other sessions there).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use actix::prelude::*;

mod restore;
mod sub_sessions;

use super::fleet::{Entry, Fleet};

mod views;
use super::live_slots::LiveSlot;
use super::messages::*;
use super::session::{
    wait_started, wait_written, RowWritten, Session, SessionDeps, SessionRecord, StartWait,
};
use super::session_error::SessionError;
use super::session_name::{self, NameProblem};
use crate::agents::AgentCatalog;
use crate::agents::LaunchPlan;
use crate::clock::now_ms;
use crate::providers::StartSpec;
use crate::store::FleetRow;
use atc_protocol::{Descriptor, FleetEvent, NamedBy, SessionId};

/// The supervisor of all sessions.
pub struct SessionManager {
    /// Every session, oldest first, with the descriptor it last reported.
    sessions: Fleet<Addr<Session>>,
    /// The events sockets.
    subscribers: super::subscribers::Subscribers,
    catalog: Arc<AgentCatalog>,
    /// Dependencies handed to each session (their `manager` recipient points here).
    deps: SessionDeps,
    pending_rows: Vec<FleetRow>,
    pending_workspaces: HashMap<SessionId, atc_protocol::workspace::WorkspaceInfo>,
    restoring: bool,
    /// A `status.json` rewrite is scheduled.
    status_pending: bool,
    /// A heap trim is scheduled (sessions were removed).
    trim_pending: bool,
    /// Who hears the fleet's counts with each `status.json` rewrite (the systemd notifier).
    status_observer: Option<Recipient<FleetStatusChanged>>,
}

/// What the manager is built from.
pub struct ManagerParts {
    /// Dependencies of every session, except the manager recipient.
    pub deps: SessionDeps,
    /// The agent catalog.
    pub catalog: Arc<AgentCatalog>,
    /// Rows loaded from the store at start.
    pub rows: Vec<FleetRow>,
    /// The ready workspaces of those rows' sessions.
    pub workspaces: HashMap<SessionId, atc_protocol::workspace::WorkspaceInfo>,
}

impl SessionManager {
    /// Starts the manager; `build` gets the manager's own address to put in session deps.
    pub fn start_with(
        build: impl FnOnce(Addr<SessionManager>) -> ManagerParts,
    ) -> Addr<SessionManager> {
        SessionManager::create(|ctx| {
            let parts = build(ctx.address());
            let subscriber_cap = parts.deps.limits.queue_bytes;
            SessionManager {
                sessions: Fleet::default(),
                subscribers: super::subscribers::Subscribers::new(subscriber_cap),
                catalog: parts.catalog,
                deps: parts.deps,
                pending_rows: parts.rows,
                pending_workspaces: parts.workspaces,
                restoring: false,
                status_pending: false,
                trim_pending: false,
                status_observer: None,
            }
        })
    }

    /// Sends `event` to the events sockets that may hear it (see `subscribers`).
    fn broadcast(&mut self, event: &FleetEvent, former_top: Option<SessionId>) {
        let fleet: Vec<&Descriptor> = match self.subscribers.has_views() {
            true => self.sessions.in_order().map(Entry::descriptor).collect(),
            false => Vec::new(),
        };
        self.subscribers.broadcast(event, former_top, &fleet);
    }

    /// Schedules a `status.json` rewrite; changes within the debounce share one write.
    fn schedule_status(&mut self, ctx: &mut Context<Self>) {
        if self.status_pending {
            return;
        }
        self.status_pending = true;
        ctx.run_later(self.deps.timings.status_write, |act, _| {
            act.status_pending = false;
            let status =
                super::status_file::FleetStatus::of(act.sessions.in_order().map(Entry::descriptor));
            // A ~100-byte file at most once per debounce: cheap enough to write in place, and
            // writing here keeps successive versions in order.
            if let Err(e) = super::status_file::write(&act.deps.state_dir, &status) {
                tracing::warn!(error = %e, "could not write status.json");
            }
            if let Some(observer) = &act.status_observer {
                // Once per debounce at most, so no backpressure is needed.
                observer.do_send(FleetStatusChanged(status));
            }
        });
    }

    /// Schedules handing the memory of removed sessions back to the kernel: every removal is
    /// followed by a trim within the delay, and removals within it share one.
    fn schedule_trim(&mut self, ctx: &mut Context<Self>) {
        if self.trim_pending {
            return;
        }
        self.trim_pending = true;
        ctx.run_later(self.deps.timings.heap_trim, |act, _| {
            act.trim_pending = false;
            super::heap_trim::release_freed_memory();
        });
    }

    /// The other session whose id `name` would shadow (see `session_name`).
    fn shadowed_id(&self, name: &str, own: SessionId) -> Option<SessionId> {
        session_name::shadowed_id(
            name,
            own,
            self.sessions.entries().map(|e| &e.descriptor().id),
        )
    }

    /// The name a spawn without one gets: its cwd's basename, without characters a name
    /// cannot hold; the session's own short id where that leaves nothing or would shadow
    /// another session's id.
    fn auto_name(&self, cwd: &Path, own: SessionId) -> String {
        let base: String = cwd
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "/".into())
            .chars()
            .filter(|c| !c.is_control() && !crate::agents::report_check::is_bidi_control(*c))
            .collect();
        let base = base.trim();
        match session_name::check(base) {
            Ok(()) if self.shadowed_id(base, own).is_none() => base.to_string(),
            _ => own.as_uuid().simple().to_string().chars().take(8).collect(),
        }
    }

    /// Checks a spawn and makes its record and launch plan; nothing is written or run yet.
    fn plan_spawn(&self, msg: Spawn) -> Result<(SessionRecord, LaunchPlan), SessionError> {
        let cwd = Path::new(&msg.cwd);
        if !cwd.is_absolute() {
            return Err(SessionError::CwdNotAbsolute);
        }
        // A remote session's cwd is on its host; only a local one can be checked here.
        let remote = self
            .deps
            .providers
            .get(&msg.target)
            .is_some_and(|p| p.remote());
        if !remote && !cwd.is_dir() {
            return Err(SessionError::CwdNotDirectory(msg.cwd.clone()));
        }
        let mut plan = self.catalog.plan(&msg.agent, cwd)?;
        if let Some(agent) = self.catalog.get(&msg.agent) {
            let caps = self
                .deps
                .providers
                .get(&msg.target)
                .map(|p| p.capabilities());
            crate::providers::imp::broker::placement::check(agent, &msg.target, caps)?;
        }
        // Overrides were validated by the caller; they replace the configured flags and stay in
        // the stored argv, so every revive reuses them (spec §9.2).
        let kind = self.catalog.kind(&msg.agent);
        use crate::agents::spawn_options::{apply, SpawnOption};
        if let Some(m) = &msg.model {
            plan.args = apply(kind, &plan.args, SpawnOption::Model, m);
        }
        if let Some(e) = &msg.effort {
            plan.args = apply(kind, &plan.args, SpawnOption::Effort, e);
        }
        // Not `unwrap_or_default`, which clippy takes `new` to equal: SessionId's default is
        // the nil id, and a spawn needs a fresh one.
        #[allow(clippy::unwrap_or_default)]
        let id = msg.id.unwrap_or_else(SessionId::new);
        let parent = self.parent_of(&msg)?;
        let host_key = self.host_key_of(id, &msg, parent.as_ref());
        if let Some(p) = parent.as_ref().filter(|_| host_key != id) {
            self.check_same_auth(&msg.agent, p)?;
        }
        let (name, named_by) = match msg.name {
            Some(n) => {
                if self.shadowed_id(&n, id).is_some() {
                    return Err(SessionError::BadName(NameProblem::ShadowsId));
                }
                (n, NamedBy::User)
            }
            None => (self.auto_name(cwd, id), NamedBy::Auto),
        };
        let created_at = now_ms();
        let record = SessionRecord {
            id,
            name,
            named_by,
            agent: msg.agent,
            args: plan.args.clone(),
            cwd: msg.cwd,
            pinned: false,
            created_at,
            last_attached_at: None,
            target: msg.target,
            target_identity: msg.target_identity,
            agent_session_id: None,
            transcript_path: None,
            remote: None,
            model: msg.model,
            effort: msg.effort,
            limits: msg.limits,
            size: msg.size,
            exit: None,
            leader: None,
            workspace: None,
            parent: parent.map(|p| p.id),
            host_key,
        };
        Ok((record, plan))
    }

    /// Starts the session planned by [`SessionManager::plan_spawn`], its process launched
    /// already where its provider launches off this thread; `deps` are this manager's, as
    /// the launch had them.
    fn start_session(
        &mut self,
        record: SessionRecord,
        spec: StartSpec,
        deps: SessionDeps,
        slot: LiveSlot,
    ) -> Result<(Descriptor, StartWait, RowWritten), SessionError> {
        // Its first row write also puts its directory in the spawn history (store).
        let (addr, descriptor, ready, written) = Session::spawn(record, spec, deps, slot)?;
        tracing::info!(session = %descriptor.id, agent = %descriptor.agent, "session spawned");
        self.sessions.insert(addr, descriptor.clone());
        Ok((descriptor, ready, written))
    }

    /// Answers a started spawn once its row is durable and its harness is known to run
    /// (spec §5.6: a spawn answers only after `waitForStart`). A start refused on the way
    /// leaves nothing behind: the session is forgotten (row deleted, `session.removed`) and
    /// the refusal is the spawn's answer, so a keyed spawn releases its key.
    fn answer_spawn(
        &self,
        descriptor: Descriptor,
        ready: StartWait,
        written: RowWritten,
    ) -> ResponseActFuture<Self, Result<Descriptor, SessionError>> {
        let id = descriptor.id;
        Box::pin(
            async move {
                // Durable first: the answer promises the session outlives a daemon crash.
                wait_written(written, id).await?;
                wait_started(ready).await
            }
            .into_actor(self)
            .then(move |res, act, _| {
                let addr = act.sessions.get(&id).map(|e| e.addr.clone());
                async move {
                    match (res, addr) {
                        // Answer what the session looks like now that it runs.
                        (Ok(()), Some(a)) => {
                            // With its host's binding as it is now (`ready`).
                            Ok(a.send(DescribeWithAuth).await.unwrap_or(descriptor))
                        }
                        (Ok(()), None) => Ok(descriptor),
                        (Err(e), Some(a)) => {
                            // The refusal is the answer; a session that is gone
                            // already has nothing left to discard.
                            let _ = a.send(Discard).await;
                            Err(e)
                        }
                        (Err(e), None) => Err(e),
                    }
                }
                .into_actor(act)
            }),
        )
    }
}

impl Actor for SessionManager {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let deps = self.deps.clone();
        let mut workspaces = std::mem::take(&mut self.pending_workspaces);
        for row in std::mem::take(&mut self.pending_rows) {
            let mut record = SessionRecord::from_row(row);
            record.workspace = workspaces.remove(&record.id);
            let (addr, descriptor) = Session::restore(record, deps.clone());
            self.sessions.insert(addr, descriptor);
        }
        if !self.sessions.is_empty() {
            tracing::info!(sessions = self.sessions.len(), "fleet loaded");
        }
        self.schedule_status(ctx);
        self.sweep_trail(ctx);
        ctx.run_interval(self.deps.timings.trail_sweep, |act, ctx| {
            act.sweep_trail(ctx)
        });
    }
}

impl SessionManager {
    /// Sweeps the trail of what its limits no longer keep, without holding up the mailbox.
    fn sweep_trail(&self, ctx: &mut Context<Self>) {
        let sweep = super::trail_sweep::sweep(
            self.deps.store.clone(),
            self.deps.limits.clone(),
            crate::clock::now_ms(),
        );
        ctx.spawn(sweep.into_actor(self));
    }
}

impl Handler<Spawn> for SessionManager {
    type Result = ResponseActFuture<Self, Result<Descriptor, SessionError>>;

    /// Refuses a spawn here while this machine's memory is below the floor (`admission`).
    /// Makes the workspace first when the spawn asks for one (spec §3.5 step 9), then plans
    /// the spawn here, writes its files and launches its process on a blocking thread
    /// ([`super::launch::off_thread`]), then starts the session here and answers as
    /// [`SessionManager::answer_spawn`] says.
    fn handle(&mut self, mut msg: Spawn, _: &mut Self::Context) -> Self::Result {
        let (began, metrics) = (std::time::Instant::now(), self.deps.metrics.clone());
        let counted = move |answer: Result<Descriptor, SessionError>| {
            let outcome = match answer {
                Ok(_) => crate::metrics::SpawnOutcome::Started,
                Err(_) => crate::metrics::SpawnOutcome::Failed,
            };
            metrics.spawned(outcome, began.elapsed());
            answer
        };
        // Before anything is made (a clone takes memory too); only for a process that runs
        // here, since a remote one's memory is its host's.
        let local = self
            .deps
            .providers
            .get(&msg.target)
            .is_some_and(|p| !p.remote());
        if local {
            let floor = self.deps.limits.memory_floor_mib;
            if let Err(e) = super::admission::check_memory(floor, super::admission::available_mib) {
                return Box::pin(fut::ready(counted(Err(e.into()))));
            }
        }
        // Spec §3.5 step 3, again here: the parent may have gone since the route saw it.
        let parent = match self.parent_of(&msg) {
            Ok(parent) => parent,
            Err(e) => return Box::pin(fut::ready(counted(Err(e)))),
        };
        if let Some(p) = &parent {
            msg.parent = Some(p.id);
            self.inherit_workspace(&mut msg, p);
            // A copy sent into a host lives under the host's directory, which a joined
            // host shares with its owner's copy.
            if msg.workspace.is_some() && !local && self.joins(&msg, p) {
                let e = SessionError::SharedHostWorkspace { parent: p.id };
                return Box::pin(fut::ready(counted(Err(e))));
            }
        }
        let Some(ask) = msg.workspace.take() else {
            if let Err(e) = self.check_overlap(&msg, None) {
                return Box::pin(fut::ready(counted(Err(e))));
            }
            return Box::pin(self.spawn_planned(msg, None).map(move |a, _, _| counted(a)));
        };
        if !Path::new(&msg.cwd).is_absolute() {
            return Box::pin(fut::ready(counted(Err(SessionError::CwdNotAbsolute))));
        }
        // The id is minted now: the workspace's directory and branch are named after it.
        let id = *msg.id.get_or_insert_with(SessionId::new);
        let dir = self.deps.workspaces.dir_of(&ask.source, id);
        if let Err(e) = self.check_overlap(&msg, Some(&dir)) {
            return Box::pin(fut::ready(counted(Err(e))));
        }
        let name = msg
            .name
            .clone()
            .unwrap_or_else(|| self.auto_name(Path::new(&msg.cwd), id));
        let (workspaces, target, cwd) = (
            self.deps.workspaces.clone(),
            msg.target.clone(),
            msg.cwd.clone(),
        );
        let remote = self
            .deps
            .providers
            .get(&msg.target)
            .filter(|p| p.remote())
            .cloned();
        let made = async move {
            workspaces
                .materialize(id, &target, &name, ask, &cwd, remote)
                .await
        };
        Box::pin(
            made.into_actor(self)
                .then(move |made, act, _| -> ResponseActFuture<Self, _> {
                    match made {
                        Ok(made) => {
                            msg.cwd = made.cwd;
                            act.spawn_planned(msg, Some(made.info))
                        }
                        Err(e) => Box::pin(fut::ready(Err(e))),
                    }
                })
                .then(move |answer, act, _| {
                    // A spawn that failed after its workspace was made and left no session
                    // behind takes the workspace back (a listed session's forget does).
                    let orphan = answer.is_err() && act.sessions.get(&id).is_none();
                    let workspaces = act.deps.workspaces.clone();
                    async move {
                        if orphan {
                            if let Err(e) = workspaces.remove(id).await {
                                tracing::error!(session = %id, error = %e,
                                    "a failed spawn's workspace stays");
                            }
                        }
                        answer
                    }
                    .into_actor(act)
                })
                .map(move |answer, _, _| counted(answer)),
        )
    }
}

impl SessionManager {
    /// Spec §3.5 step 7 for a spawn on this machine (`workspace`: the directory its new
    /// workspace will have); a remote spawn's directories are on its own host.
    fn check_overlap(&self, msg: &Spawn, workspace: Option<&Path>) -> Result<(), SessionError> {
        let is_local = |target: &str| self.deps.providers.get(target).is_some_and(|p| !p.remote());
        if !is_local(&msg.target) {
            return Ok(());
        }
        // A sub-session without a workspace of its own works in its parent's.
        let parents = msg.parent.filter(|_| workspace.is_none());
        let others = self
            .sessions
            .entries()
            .map(|e| e.descriptor())
            .filter(|d| is_local(&d.locator.target_id) && Some(d.id) != parents);
        Ok(super::workspace_step::check_overlap(
            others,
            Path::new(&msg.cwd),
            workspace,
        )?)
    }

    /// The spawn after its workspace, if any, was made (`workspace`, its cwd already in
    /// `msg`).
    fn spawn_planned(
        &mut self,
        msg: Spawn,
        workspace: Option<atc_protocol::workspace::WorkspaceInfo>,
    ) -> ResponseActFuture<Self, Result<Descriptor, SessionError>> {
        // The place under the cap is taken here, before the launch leaves this thread, so
        // spawns in flight count against it; a spawn that fails gives it back.
        let planned = self
            .plan_spawn(msg)
            .and_then(|planned| Ok((planned, self.deps.slots.take()?)));
        let ((mut record, plan), slot) = match planned {
            Ok(planned) => planned,
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        record.workspace = workspace;
        Box::pin(
            super::launch::off_thread(record, plan, self.deps.clone())
                .into_actor(self)
                .then(move |launched, act, _| {
                    let started = launched.and_then(|(record, spec, deps)| {
                        act.start_session(record, spec, deps, slot)
                    });
                    match started {
                        Ok((descriptor, ready, written)) => {
                            act.answer_spawn(descriptor, ready, written)
                        }
                        Err(e) => Box::pin(fut::ready(Err(e))),
                    }
                }),
        )
    }
}

impl SessionManager {
    /// Every listed session's id: their workspaces are owned.
    fn listed(&self) -> std::collections::HashSet<SessionId> {
        self.sessions.entries().map(|e| e.descriptor().id).collect()
    }
}

impl Handler<ListOrphans> for SessionManager {
    type Result = ResponseFuture<Result<atc_protocol::workspace::OrphanList, SessionError>>;

    fn handle(&mut self, _: ListOrphans, _: &mut Self::Context) -> Self::Result {
        let (workspaces, listed) = (self.deps.workspaces.clone(), self.listed());
        Box::pin(async move {
            let orphans = workspaces.orphans(listed).await?;
            Ok(atc_protocol::workspace::OrphanList {
                orphans: orphans.into_iter().map(|(o, _)| o).collect(),
            })
        })
    }
}

impl Handler<PruneOrphans> for SessionManager {
    type Result = ResponseFuture<Result<atc_protocol::workspace::PruneAnswer, SessionError>>;

    fn handle(&mut self, msg: PruneOrphans, _: &mut Self::Context) -> Self::Result {
        let (workspaces, listed) = (self.deps.workspaces.clone(), self.listed());
        Box::pin(async move { workspaces.prune(listed, msg.force).await })
    }
}

impl Handler<ShadowedId> for SessionManager {
    type Result = Option<SessionId>;

    fn handle(&mut self, msg: ShadowedId, _: &mut Self::Context) -> Self::Result {
        self.shadowed_id(&msg.name, msg.own)
    }
}

impl Handler<CountSessions> for SessionManager {
    type Result = MessageResult<CountSessions>;

    fn handle(&mut self, _: CountSessions, _: &mut Self::Context) -> Self::Result {
        let mut counts = crate::metrics::scrape::SessionCounts::default();
        for e in self.sessions.entries() {
            let d = e.descriptor();
            counts.count(&d.locator.target_id, d.state);
        }
        MessageResult(counts)
    }
}

/// The permission registry's events go out with the sessions' own.
impl Handler<crate::permissions::registry::PermissionNotice> for SessionManager {
    type Result = ();

    fn handle(
        &mut self,
        msg: crate::permissions::registry::PermissionNotice,
        ctx: &mut Self::Context,
    ) {
        <Self as Handler<FleetNotice>>::handle(self, FleetNotice(msg.0), ctx);
    }
}

impl Handler<FleetNotice> for SessionManager {
    type Result = ();

    fn handle(&mut self, msg: FleetNotice, ctx: &mut Self::Context) {
        // The tree the session was in before this, which a change may take into or out of a
        // principal's reach.
        let former = super::fleet_event_session(&msg.0)
            .and_then(|s| self.sessions.get(&s))
            .map(|e| (e.descriptor().parent, super::reach::top_of(e.descriptor())));
        let former_top = former.map(|(_, top)| top);
        match &msg.0 {
            FleetEvent::Added { session } | FleetEvent::State { session } => {
                self.sessions
                    .update(&session.id, |d| d.clone_from(&**session));
            }
            FleetEvent::Renamed { s, name, named_by } => {
                self.sessions.update(s, |d| {
                    d.name.clone_from(name);
                    d.named_by = *named_by;
                });
            }
            FleetEvent::Resized { s, cols, rows } => {
                self.sessions.update(s, |d| {
                    d.cols = *cols;
                    d.rows = *rows;
                });
            }
            FleetEvent::Removed { s } => {
                self.sessions.remove(s);
                self.parent_removed(*s, ctx);
                self.schedule_trim(ctx);
            }
            FleetEvent::PermissionRequested { .. } | FleetEvent::PermissionResolved { .. } => {}
        }
        self.broadcast(&msg.0, former_top);
        self.tell_changed_trees(&msg.0, former.map(|(parent, _)| parent));
        self.schedule_status(ctx);
    }
}

impl Handler<HookRecipient> for SessionManager {
    type Result = Option<Recipient<HookReported>>;

    fn handle(&mut self, msg: HookRecipient, _: &mut Self::Context) -> Self::Result {
        self.sessions
            .get(&msg.0)
            .map(|e| e.addr.clone().recipient())
    }
}

impl Handler<Subscribe> for SessionManager {
    type Result = ();

    fn handle(&mut self, msg: Subscribe, _: &mut Self::Context) {
        let fleet: Vec<&Descriptor> = self.sessions.in_order().map(Entry::descriptor).collect();
        self.subscribers
            .subscribe(msg.client, msg.queue, msg.reach, &fleet);
    }
}

impl Handler<Heartbeat> for SessionManager {
    type Result = ();

    fn handle(&mut self, _: Heartbeat, _: &mut Self::Context) {}
}

impl Handler<ObserveFleetStatus> for SessionManager {
    type Result = ();

    fn handle(&mut self, msg: ObserveFleetStatus, ctx: &mut Self::Context) {
        self.status_observer = Some(msg.0);
        self.schedule_status(ctx);
    }
}

impl Handler<Unsubscribe> for SessionManager {
    type Result = ();

    fn handle(&mut self, msg: Unsubscribe, _: &mut Self::Context) {
        self.subscribers.unsubscribe(msg.client);
    }
}

impl Handler<ShutdownAll> for SessionManager {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: ShutdownAll, _: &mut Self::Context) -> Self::Result {
        let addrs: Vec<Addr<Session>> = self.sessions.entries().map(|e| e.addr.clone()).collect();
        self.subscribers.close_all();
        let grace = self.deps.timings.shutdown_grace;
        let providers = self.deps.providers.distinct();
        Box::pin(async move {
            let all = futures_util::future::join_all(addrs.iter().map(|a| a.send(Shutdown)));
            if tokio::time::timeout(grace, all).await.is_err() {
                tracing::warn!(
                    "some sessions did not record their exit before the shutdown deadline"
                );
            }
            // Leases go back once the harnesses are let go (spec §5.4).
            let released = futures_util::future::join_all(providers.iter().map(|p| p.shutdown()));
            if tokio::time::timeout(grace, released).await.is_err() {
                tracing::warn!("some hosts did not return their leases before the deadline");
            }
        })
    }
}
