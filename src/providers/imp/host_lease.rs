//! One [`HostLease`] actor per imp host (spec §5.2–5.5): it readies the imp for harnesses,
//! holds and renews this daemon's lease on it, gives the lease back when the last harness is
//! gone, and sleeps or destroys the host on request.
//!
//! Every readying, sleep and lease return of one imp runs strictly one after another, in the
//! order they were asked for: each runs inside `ctx.wait`, so the actor takes no other message
//! until it is done. That is what keeps a sleep from undoing a lease a pending readying is
//! about to rely on.
//!
//! It also keeps what the imp's image offers as atc ([`ImageAtc`], spec §5.3 step 4), learned
//! by the first readying that installs atc and forgotten when the imp cold-boots (as far as
//! the daemon can tell: impd's imp object carries no boot id, so a cold boot shows as an imp
//! that is stopped, failed or new at readying time, or as a harness start under another boot
//! id) or is destroyed.

use actix::prelude::*;
use tokio::sync::oneshot;

use super::guest_atc::{self, ImageAtc, InstallError};
use super::host_error::HostError;
use super::settings::ImpSettings;
use crate::metrics::HeldFlag;
use crate::providers::CheckIdle;
use impd_client::{CreateImp, ImpPortError, ImpdCode, RunSpec};

/// What a readied host offers a harness.
#[derive(Debug, Clone, Copy)]
pub struct HostReady {
    /// impd advertises output offsets (resume by offset is possible).
    pub offsets: bool,
}

/// Ready the host for one more harness (features → get → create when missing → lease →
/// guest dir, and its atc when `install_atc`). Answers once it is ready, or with
/// `host_unavailable` (`unsupported_operation` `no_guest_atc` when atc is needed and cannot be
/// had).
#[derive(Message)]
#[rtype(result = "Result<HostReady, HostError>")]
pub struct ReadyHost {
    /// The harness's hooks run atc inside the imp: `<guestDir>/bin/atc` must work.
    pub install_atc: bool,
    /// A broker-backed agent's config folder, created (mode 700) by the readying.
    pub auth_dir: Option<String>,
}

/// A harness's connection started under this guest boot (`started.output.bootId`); another
/// boot than the one seen before means the imp cold-booted, and what its image offers as atc
/// is asked again.
#[derive(Message)]
#[rtype(result = "()")]
pub struct BootSeen(pub String);

/// A harness that was counted by [`ReadyHost`] is gone (exited, ended or let go).
#[derive(Message)]
#[rtype(result = "()")]
pub struct HarnessGone;

/// Put the host to sleep with its harnesses inside (spec §5.5). `idle`: who to ask whether
/// the host is idle, at the start and again right before the sleep; `None` (an operator's
/// kill) skips the check.
#[derive(Message)]
#[rtype(result = "Result<(), HostError>")]
pub struct SuspendHost {
    /// The session whose idleness decides.
    pub idle: Option<Recipient<CheckIdle>>,
}

/// Put the host to sleep if no harness is counted on it and no sleep is under way (a
/// refused revive behind the broker, spec §3.8); otherwise `host_unavailable` `busy`, and
/// nothing changes.
#[derive(Message)]
#[rtype(result = "Result<(), HostError>")]
pub struct SleepIfIdle;

/// Delete the host and everything on it (`NOT_FOUND` counts as done).
#[derive(Message)]
#[rtype(result = "Result<(), HostError>")]
pub struct DestroyHost;

/// The daemon is stopping: stop renewing and give the lease back now, in turn.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ReturnLease;

/// Whether a sleep of this host is under way (connection ends it causes are not harness
/// ends).
#[derive(Message)]
#[rtype(result = "bool")]
pub struct IsSuspending;

/// The lease and readiness of one imp.
pub struct HostLease {
    settings: ImpSettings,
    imp: String,
    /// Harnesses readied here and not gone yet.
    harnesses: usize,
    /// This daemon holds its lease (as far as it knows); set, it holds a unit of the
    /// leases-held gauge.
    leased: HeldFlag,
    /// impd said our lease is not held any more: never renew (or re-take) it by the timer.
    lease_lost: bool,
    /// impd has leases at all.
    leases_supported: bool,
    renewal: Option<SpawnHandle>,
    suspending: bool,
    /// What the image offers as atc, since the last cold boot the daemon noticed.
    image_atc: Option<ImageAtc>,
    /// The guest boot harnesses last started under.
    boot: Option<String>,
}

impl HostLease {
    /// A lease actor for imp `imp`; `leased` counts the lease while it is held.
    pub fn new(settings: ImpSettings, imp: String, leased: HeldFlag) -> HostLease {
        HostLease {
            settings,
            imp,
            harnesses: 0,
            leased,
            lease_lost: false,
            leases_supported: true,
            renewal: None,
            suspending: false,
            image_atc: None,
            boot: None,
        }
    }

    /// Runs `work` in this imp's turn and answers its result through the returned future.
    fn in_turn<T: 'static>(
        &mut self,
        ctx: &mut Context<Self>,
        work: impl ActorFuture<Self, Output = T> + 'static,
    ) -> oneshot::Receiver<T> {
        let (tx, rx) = oneshot::channel();
        ctx.wait(work.map(move |out, _, _| {
            // The caller may have stopped waiting; the work ran in turn all the same.
            let _ = tx.send(out);
        }));
        rx
    }

    fn start_renewal(&mut self, ctx: &mut Context<Self>) {
        if self.renewal.is_some() || self.lease_lost || !self.leases_supported {
            return;
        }
        let every = self.settings.lease_renew;
        self.renewal = Some(ctx.run_interval(every, |act, ctx| act.renewal_tick(ctx)));
    }

    fn stop_renewal(&mut self, ctx: &mut Context<Self>) {
        if let Some(h) = self.renewal.take() {
            ctx.cancel_future(h);
        }
    }

    /// Renew while harnesses run; with none left, give the lease back instead (spec §5.4).
    fn renewal_tick(&mut self, ctx: &mut Context<Self>) {
        if self.suspending || !self.leased.get() {
            return;
        }
        if self.harnesses == 0 {
            self.release_in_turn(ctx);
            return;
        }
        let client = self.settings.client();
        let (imp, label) = (self.imp.clone(), self.settings.lease_label());
        let ttl = self.settings.lease_ttl.as_secs() as u32;
        ctx.wait(
            async move { client.leases_renew(&imp, &label, ttl).await }
                .into_actor(self)
                .map(|res, act, ctx| match res {
                    Ok(_) => {}
                    Err(e) if e.is(ImpdCode::LeaseNotHeld) => {
                        // Someone ended our lease (a forced sleep): never take it back by
                        // the timer.
                        tracing::warn!(imp = %act.imp, "lease not held any more; renewal stopped");
                        act.leased.set(false);
                        act.lease_lost = true;
                        act.stop_renewal(ctx);
                    }
                    Err(e) => {
                        tracing::warn!(imp = %act.imp, code = %e.code, "lease renewal failed; retried next tick")
                    }
                }),
        );
    }

    fn release_in_turn(&mut self, ctx: &mut Context<Self>) {
        let client = self.settings.client();
        let (imp, label) = (self.imp.clone(), self.settings.lease_label());
        ctx.wait(
            async move { client.leases_release(&imp, &label).await }
                .into_actor(self)
                .map(|res, act, ctx| {
                    // Re-checked in turn: a readying that came first may rely on it again.
                    if act.harnesses > 0 {
                        return;
                    }
                    act.stop_renewal(ctx);
                    act.leased.set(false);
                    match res {
                        Ok(_) => tracing::info!(imp = %act.imp, "lease returned: no harness left"),
                        Err(e) => {
                            tracing::warn!(imp = %act.imp, code = %e.code, "lease return failed; it expires by itself")
                        }
                    }
                }),
        );
    }
}

impl Actor for HostLease {
    type Context = Context<Self>;
}

impl Handler<ReadyHost> for HostLease {
    type Result = ResponseFuture<Result<HostReady, HostError>>;

    fn handle(&mut self, msg: ReadyHost, ctx: &mut Self::Context) -> Self::Result {
        let settings = self.settings.clone();
        let imp = self.imp.clone();
        let relied_on = self.harnesses > 0;
        let rx = self.in_turn(
            ctx,
            // Read in turn: the readying before this one may have learned it.
            actix::fut::wrap_future::<_, Self>(async {})
                .then(move |_, act: &mut HostLease, _| {
                    let atc = msg.install_atc.then(|| act.image_atc.clone());
                    let auth_dir = msg.auth_dir;
                    async move { ready(&settings, &imp, relied_on, atc, auth_dir).await }
                        .into_actor(act)
                })
                .map(|res, act, ctx| {
                    let (ready, leased, image_atc) = res?;
                    if let Some(known) = image_atc {
                        act.image_atc = known;
                    }
                    act.harnesses += 1;
                    act.leases_supported = leased;
                    if leased {
                        act.leased.set(true);
                        act.lease_lost = false;
                        act.start_renewal(ctx);
                    }
                    Ok(ready)
                }),
        );
        Box::pin(async move { rx.await.unwrap_or(Err(HostError::LeaseGone)) })
    }
}

/// What a readying learned of the image's atc: `None` when it did not install atc, else
/// what is known now.
type LearnedAtc = Option<Option<ImageAtc>>;

/// The readying itself. `atc`: `None` when the harness needs no atc inside the imp, else what
/// is known of the image's atc. Returns whether a lease is held and what is known of the
/// image's atc afterwards. A failure undoes only what this call did: an imp it created is
/// destroyed, a lease it took is released unless a running harness already relied on one.
async fn ready(
    s: &ImpSettings,
    imp: &str,
    relied_on: bool,
    atc: LearnedAtc,
    auth_dir: Option<String>,
) -> Result<(HostReady, bool, LearnedAtc), HostError> {
    let client = s.client();
    let fail = |what: &'static str, e: &ImpPortError| HostError::impd(&s.target, what, e);
    let info = client
        .system_info()
        .await
        .map_err(|e| fail("reading impd's features", &e))?;
    // An imp that is new, stopped or failed boots cold when the lease is taken: whatever its
    // image offered before is asked again.
    let mut atc = atc;
    let created = match client.imps_get(imp).await {
        Ok(Some(found)) => {
            if !matches!(found.state.as_str(), "running" | "sleeping") {
                atc = atc.map(|_| None);
            }
            false
        }
        Ok(None) => {
            client
                .imps_create(CreateImp {
                    name: imp.to_string(),
                    image: s.image.clone(),
                    memory_mib: s.memory_mib.and_then(|m| u32::try_from(m).ok()),
                })
                .await
                .map_err(|e| fail("creating the imp", &e))?;
            tracing::info!(imp, target = %s.target, "imp created");
            atc = atc.map(|_| None);
            true
        }
        Err(e) => return Err(fail("reading the imp", &e)),
    };
    let undo_client = client.clone();
    let undo = |err: HostError, took_lease: bool| async move {
        let client = undo_client;
        if took_lease && !relied_on {
            if let Err(e) = client.leases_release(imp, &s.lease_label()).await {
                tracing::warn!(imp, code = %e.code, "could not return the lease after a failed readying");
            }
        }
        if created {
            match client.imps_destroy(imp).await {
                Ok(()) => {}
                Err(e) if e.is(ImpdCode::NotFound) => {}
                Err(e) => {
                    tracing::error!(imp, code = %e.code, "could not destroy the imp a failed readying created");
                    return err.effect_remains();
                }
            }
        }
        err
    };
    let leases = info.features.leases;
    if leases {
        let ttl = s.lease_ttl.as_secs() as u32;
        if let Err(e) = client.leases_acquire(imp, &s.lease_label(), ttl).await {
            return Err(undo(fail("taking the lease", &e), false).await);
        }
    }
    let learned = match atc {
        None => {
            let run = format!("{}/run", s.guest_dir.trim_end_matches('/'));
            if let Err(e) = make_dirs(&client, imp, &[run], None).await {
                return Err(undo(fail("setting up the guest dir", &e), leases).await);
            }
            None
        }
        Some(known) => match guest_atc::install(&client, s, imp, known).await {
            Ok(now) => Some(now),
            Err(InstallError::Impd(what, e)) => return Err(undo(fail(what, &e), leases).await),
            Err(InstallError::Refused(err)) => return Err(undo(err, leases).await),
        },
    };
    if let Some(dir) = auth_dir {
        // The agent's own config folder: only its user reads what it keeps there.
        if let Err(e) = make_dirs(&client, imp, &[dir], Some("700")).await {
            return Err(undo(fail("creating the agent's config folder", &e), leases).await);
        }
    }
    Ok((
        HostReady {
            offsets: info.features.session_offsets,
        },
        leases,
        learned,
    ))
}

/// `mkdir -p [-m MODE] DIRS…` inside `imp` (`<guestDir>/run` for a harness that needs no atc
/// inside the imp; a broker-backed agent's config folder).
async fn make_dirs(
    client: &impd_client::ImpdClient,
    imp: &str,
    dirs: &[String],
    mode: Option<&str>,
) -> Result<(), ImpPortError> {
    let mut argv = vec!["mkdir".to_string(), "-p".to_string()];
    if let Some(m) = mode {
        argv.extend(["-m".to_string(), m.to_string()]);
    }
    argv.extend(dirs.iter().cloned());
    let mkdir = RunSpec {
        name: imp.to_string(),
        argv,
        cwd: None,
        env: Default::default(),
        stdin: Default::default(),
    };
    let r = client.run(mkdir).await?;
    if r.code == Some(0) {
        return Ok(());
    }
    Err(super::guest_atc::guest_setup(format!(
        "mkdir of the guest dir exited {:?}: {}",
        r.code,
        String::from_utf8_lossy(&r.stderr).trim()
    )))
}

impl Handler<BootSeen> for HostLease {
    type Result = ();

    fn handle(&mut self, msg: BootSeen, _: &mut Self::Context) {
        if self.boot.as_deref() == Some(msg.0.as_str()) {
            return;
        }
        if self.boot.is_some() {
            tracing::info!(imp = %self.imp, "the imp booted cold; its image's atc is asked again");
            self.image_atc = None;
        }
        self.boot = Some(msg.0);
    }
}

impl Handler<HarnessGone> for HostLease {
    type Result = ();

    fn handle(&mut self, _: HarnessGone, ctx: &mut Self::Context) {
        self.harnesses = self.harnesses.saturating_sub(1);
        if self.harnesses == 0 && self.leased.get() && !self.suspending {
            self.release_in_turn(ctx);
        }
    }
}

impl Handler<ReturnLease> for HostLease {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: ReturnLease, ctx: &mut Self::Context) -> Self::Result {
        self.stop_renewal(ctx);
        if !self.leased.get() {
            return Box::pin(std::future::ready(()));
        }
        let client = self.settings.client();
        let (imp, label) = (self.imp.clone(), self.settings.lease_label());
        let rx = self.in_turn(
            ctx,
            async move { client.leases_release(&imp, &label).await }
                .into_actor(self)
                .map(|res, act, _| {
                    act.leased.set(false);
                    if let Err(e) = res {
                        tracing::warn!(imp = %act.imp, code = %e.code, "lease return at shutdown failed; it expires by itself");
                    }
                }),
        );
        Box::pin(async move {
            // Fails only if the actor stopped first; the lease then expires by itself.
            let _ = rx.await;
        })
    }
}

impl Handler<IsSuspending> for HostLease {
    type Result = bool;

    fn handle(&mut self, _: IsSuspending, _: &mut Self::Context) -> bool {
        self.suspending
    }
}

impl Handler<SuspendHost> for HostLease {
    type Result = ResponseFuture<Result<(), HostError>>;

    /// In the imp's turn: check idleness, stop renewing, return the lease, check again (a
    /// busy host gets its lease back and stays awake), then sleep without force. impd's
    /// `LEASED` (another owner's lease) re-takes ours and answers `host_leased` with impd's
    /// lease data.
    fn handle(&mut self, msg: SuspendHost, ctx: &mut Self::Context) -> Self::Result {
        self.stop_renewal(ctx);
        self.suspending = true;
        let client = self.settings.client();
        let (imp, label) = (self.imp.clone(), self.settings.lease_label());
        let ttl = self.settings.lease_ttl.as_secs() as u32;
        let held = self.leased.get();
        let s = self.settings.clone();
        let idle = msg.idle;
        let rx = self.in_turn(
            ctx,
            async move {
                let is_idle = || async {
                    match &idle {
                        Some(r) => r.send(CheckIdle).await.unwrap_or(false),
                        None => true,
                    }
                };
                if !is_idle().await {
                    return Suspension::Busy { retaken: held };
                }
                if held {
                    if let Err(e) = client.leases_release(&imp, &label).await {
                        tracing::warn!(imp = %imp, code = %e.code, "could not return the lease before a sleep");
                    }
                }
                let retake = || async {
                    held && client.leases_acquire(&imp, &label, ttl).await.is_ok()
                };
                if !is_idle().await {
                    return Suspension::Busy {
                        retaken: retake().await,
                    };
                }
                match client.imps_sleep(&imp, false).await {
                    Ok(_) => Suspension::Slept,
                    Err(e) if e.is(ImpdCode::Leased) => Suspension::Leased {
                        error: e,
                        retaken: retake().await,
                    },
                    Err(e) => Suspension::Failed {
                        error: e,
                        retaken: retake().await,
                    },
                }
            }
            .into_actor(self)
            .map(move |outcome, act, ctx| {
                act.suspending = false;
                let mut keep_lease = |act: &mut HostLease, retaken: bool| {
                    act.leased.set(retaken);
                    if retaken {
                        act.start_renewal(ctx);
                    }
                };
                match outcome {
                    Suspension::Slept => {
                        act.leased.set(false);
                        tracing::info!(imp = %act.imp, "host asleep");
                        Ok(())
                    }
                    Suspension::Busy { retaken } => {
                        keep_lease(act, retaken);
                        Err(HostError::Busy {
                            target: s.target.clone(),
                        })
                    }
                    Suspension::Leased { error, retaken } => {
                        keep_lease(act, retaken);
                        let leases = ["leases", "otherCount"]
                            .into_iter()
                            .filter_map(|key| Some((key.to_string(), error.data.get(key)?.clone())))
                            .collect();
                        Err(HostError::Leased {
                            target: s.target.clone(),
                            leases,
                        })
                    }
                    Suspension::Failed { error, retaken } => {
                        keep_lease(act, retaken);
                        Err(HostError::impd(&s.target, "putting the host to sleep", &error))
                    }
                }
            }),
        );
        Box::pin(async move { rx.await.unwrap_or(Err(HostError::LeaseGone)) })
    }
}

impl Handler<SleepIfIdle> for HostLease {
    type Result = ResponseFuture<Result<(), HostError>>;

    /// Judged when the message is handled, which is in turn: a readying or a lease return
    /// asked for earlier has run to its end (each runs inside `ctx.wait`).
    fn handle(&mut self, _: SleepIfIdle, ctx: &mut Self::Context) -> Self::Result {
        if self.harnesses > 0 || self.suspending {
            let busy = HostError::Busy {
                target: self.settings.target.clone(),
            };
            return Box::pin(std::future::ready(Err(busy)));
        }
        <Self as Handler<SuspendHost>>::handle(self, SuspendHost { idle: None }, ctx)
    }
}

/// How a sleep attempt ended, and whether our lease was taken back.
enum Suspension {
    Slept,
    Busy { retaken: bool },
    Leased { error: ImpPortError, retaken: bool },
    Failed { error: ImpPortError, retaken: bool },
}

impl Handler<DestroyHost> for HostLease {
    type Result = ResponseFuture<Result<(), HostError>>;

    fn handle(&mut self, _: DestroyHost, ctx: &mut Self::Context) -> Self::Result {
        self.stop_renewal(ctx);
        self.suspending = true;
        let client = self.settings.client();
        let imp = self.imp.clone();
        let target = self.settings.target.clone();
        let rx = self.in_turn(
            ctx,
            async move { client.imps_destroy(&imp).await }
                .into_actor(self)
                .map(move |res, act, ctx| {
                    act.suspending = false;
                    match res {
                        Ok(()) => {}
                        Err(e) if e.is(ImpdCode::NotFound) => {}
                        Err(e) => {
                            act.start_renewal(ctx);
                            return Err(HostError::impd(&target, "destroying the host", &e));
                        }
                    }
                    act.leased.set(false);
                    act.harnesses = 0;
                    act.image_atc = None;
                    act.boot = None;
                    tracing::info!(imp = %act.imp, "host destroyed");
                    Ok(())
                }),
        );
        Box::pin(async move { rx.await.unwrap_or(Err(HostError::LeaseGone)) })
    }
}
