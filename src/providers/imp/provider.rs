//! [`ImpProvider`]: the `imp` provider of one target (spec §4.3, §5). It hands each session
//! an [`ImpHarness`] and keeps one [`HostLease`] actor per imp, created the first time a
//! session needs that imp. A session's host key is its own id, or its parent's when it
//! joined the parent's host (spec §4.5): the imp, its lease and its broker binding are the
//! host's, while the report socket, the guest files and the exec session stay the session's,
//! so two sessions on one imp never share a name.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use actix::prelude::*;
use bytes::Bytes;
use futures_util::future::LocalBoxFuture;

use super::bridge::{Binding, Bridges};
use super::harness::ImpHarness;
use super::host_error::HostError;
use super::host_lease::{DestroyHost, HarnessGone, HostLease, ReadyHost, SuspendHost};
use super::naming;
use super::report_forward::{ReportForward, SessionLink};
use super::settings::ImpSettings;
use crate::providers::imp::broker::binding_store::SharedBindingStore;
use crate::providers::{
    AuthAnswer, Capabilities, CheckIdle, ExecutionProvider, HarnessEvents, HarnessHandle,
    HostLifecycle, ProviderError, RunOutput, RunRequest, StartSpec, StartedHarness,
};

/// The provider of one imp target.
pub struct ImpProvider {
    settings: ImpSettings,
    /// The lease actor of each imp, by imp name. A registry of addresses, filled once per imp;
    /// every decision about a host is the actor's.
    hosts: Mutex<HashMap<String, Addr<HostLease>>>,
    /// Epochs and report memory of every session bridge in the daemon (shared by all imp
    /// providers, so epochs are unique per daemon).
    bridges: Arc<Bridges>,
    /// The store that keeps broker bindings; without one the provider claims no broker.
    broker_store: Option<SharedBindingStore>,
    /// The binding actor of each host, by imp name, like `hosts`.
    bindings:
        Mutex<HashMap<String, Addr<crate::providers::imp::broker::host_binding::HostBinding>>>,
    /// Where leases held and reconnects are counted.
    metrics: crate::metrics::Metrics,
}

impl ImpProvider {
    /// A provider for the target these settings describe; `bridges` is the daemon's one
    /// session-bridge memory.
    pub fn new(settings: ImpSettings, bridges: Arc<Bridges>) -> ImpProvider {
        ImpProvider {
            settings,
            hosts: Mutex::new(HashMap::new()),
            bridges,
            broker_store: None,
            bindings: Mutex::new(HashMap::new()),
            metrics: crate::metrics::Metrics::new(),
        }
    }

    /// Counts into the daemon's `metrics` (without: into a set nobody reads).
    pub fn with_metrics(mut self, metrics: crate::metrics::Metrics) -> ImpProvider {
        self.metrics = metrics;
        self
    }

    /// Serves broker-backed agents, with their bindings kept in `store` (spec §6).
    pub fn with_broker(mut self, store: SharedBindingStore) -> ImpProvider {
        self.broker_store = Some(store);
        self
    }

    /// The binding actor of the host `host_key`, for a provider that keeps bindings.
    fn broker_binding(
        &self,
        host_key: &str,
    ) -> Result<
        Addr<crate::providers::imp::broker::host_binding::HostBinding>,
        crate::providers::ProviderError,
    > {
        let store = self
            .broker_store
            .as_ref()
            .ok_or(crate::providers::imp::broker::BrokerError::NotBound)?;
        Ok(self.binding(store, host_key, &self.imp_for(host_key)))
    }

    /// The binding actor of the host `host_key` (imp `imp`), started the first time.
    fn binding(
        &self,
        store: &SharedBindingStore,
        host_key: &str,
        imp: &str,
    ) -> Addr<crate::providers::imp::broker::host_binding::HostBinding> {
        let mut bindings = match self.bindings.lock() {
            Ok(b) => b,
            // A panic while holding this lock left at worst a missing entry behind.
            Err(poisoned) => poisoned.into_inner(),
        };
        bindings
            .entry(imp.to_string())
            .or_insert_with(|| {
                crate::providers::imp::broker::host_binding::HostBinding::new(
                    crate::providers::imp::broker::binder::HostContext {
                        store: store.clone(),
                        client: self.settings.client(),
                        target: self.settings.target.clone(),
                        target_identity: self.settings.identity.clone(),
                        host_key: host_key.to_string(),
                        imp: imp.to_string(),
                        image: self.settings.image.clone(),
                        memory_mib: self.settings.memory_mib.and_then(|m| u32::try_from(m).ok()),
                    },
                )
                .start()
            })
            .clone()
    }

    /// The imp a host key lives in.
    pub fn imp_for(&self, host_key: &str) -> String {
        super::naming::imp_name(&self.settings.imp_prefix, host_key)
    }

    /// The lease actor of `imp`, started on the current arbiter the first time.
    pub fn host(&self, imp: &str) -> Addr<HostLease> {
        let mut hosts = match self.hosts.lock() {
            Ok(h) => h,
            // A panic while holding this lock left at worst a missing entry behind.
            Err(poisoned) => poisoned.into_inner(),
        };
        hosts
            .entry(imp.to_string())
            .or_insert_with(|| {
                HostLease::new(
                    self.settings.clone(),
                    imp.to_string(),
                    self.metrics.lease_flag(),
                )
                .start()
            })
            .clone()
    }

    /// The imp of the host a command or transfer names; a remote command needs one.
    fn host_of(&self, host_key: Option<&str>) -> Result<String, ProviderError> {
        match host_key {
            Some(key) => Ok(self.imp_for(key)),
            None => Err(HostError::NoHostNamed.into()),
        }
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &ImpSettings {
        &self.settings
    }
}

impl ExecutionProvider for ImpProvider {
    fn kind(&self) -> &'static str {
        "imp"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            spawn: true,
            attach: true,
            input: true,
            resize: true,
            kill: true,
            transfer: true,
            run: true,
            headless: false,
            suspend: true,
            destroy: true,
            broker_auth: self.broker_store.is_some(),
        }
    }

    fn remote(&self) -> bool {
        true
    }

    fn guest_atc(&self) -> Option<std::path::PathBuf> {
        Some(super::naming::guest_atc(&self.settings.guest_dir).into())
    }

    fn hosts(&self) -> Option<&dyn HostLifecycle> {
        Some(self)
    }

    fn shutdown(&self) -> LocalBoxFuture<'static, ()> {
        let hosts: Vec<Addr<HostLease>> = match self.hosts.lock() {
            Ok(h) => h.values().cloned().collect(),
            Err(poisoned) => poisoned.into_inner().values().cloned().collect(),
        };
        Box::pin(async move {
            let returns = hosts.iter().map(|h| h.send(super::host_lease::ReturnLease));
            futures_util::future::join_all(returns).await;
        })
    }

    fn start(
        &self,
        spec: StartSpec,
        events: HarnessEvents,
    ) -> Result<StartedHarness, ProviderError> {
        let host_key = spec.host_key.to_string();
        // The report socket is the session's own, whoever else runs on the imp.
        let socket = naming::guest_socket(&self.settings.guest_dir, &spec.session_id.to_string());
        let imp = self.imp_for(&host_key);
        let broker = match (&spec.plan.broker, &self.broker_store) {
            (None, _) => None,
            (Some(b), None) => {
                return Err(
                    crate::providers::imp::broker::BrokerError::TargetUnsupported {
                        agent: b.agent.clone(),
                        target: self.settings.target.clone(),
                    }
                    .into(),
                )
            }
            (Some(b), Some(store)) => Some(super::harness_broker::BrokerSide::new(
                self.binding(store, &host_key, &imp),
                crate::providers::imp::broker::binder::Launcher {
                    agent: b.agent.clone(),
                    auth: b.auth.clone(),
                },
                // A spawn makes its host; a sub-session joining its parent's host, a revive or
                // a restart finds it bound.
                spec.host == crate::providers::HostUse::Creates,
            )),
        };
        let lease = self.host(&imp);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let epoch = self.bridges.begin(spec.session_id, &host_key);
        let binding = Binding {
            session: spec.session_id,
            target: self.settings.target.clone(),
            target_identity: self.settings.identity.clone(),
            host_key,
            epoch,
        };
        let report = ReportForward::new(
            self.settings.clone(),
            imp.clone(),
            socket,
            binding,
            SessionLink {
                hook: events.hook.clone(),
                view: events.view.clone(),
            },
            self.bridges.clone(),
        );
        let addr = ImpHarness::new(self.settings.clone(), lease, imp, spec, events, tx, report)
            .with_broker(broker)
            .with_metrics(self.metrics.clone())
            .start();
        Ok(StartedHarness {
            handle: HarnessHandle {
                input: addr.clone().recipient(),
                resize: addr.clone().recipient(),
                hangup: addr.clone().recipient(),
                detach: addr.recipient(),
                // Input to a remote process is queued across reconnects by its harness.
                direct_input: None,
            },
            ready: Some(rx),
            // Its process runs on its host, where no later daemon here could end it.
            leader: None,
        })
    }

    fn run_command(
        &self,
        req: RunRequest,
    ) -> LocalBoxFuture<'static, Result<RunOutput, ProviderError>> {
        let imp = match self.host_of(req.host_key.as_deref()) {
            Ok(imp) => imp,
            Err(e) => return Box::pin(std::future::ready(Err(e))),
        };
        let client = self.settings.client();
        let target = self.settings.target.clone();
        Box::pin(async move {
            let spec = impd_client::RunSpec {
                name: imp,
                argv: req.argv,
                cwd: Some(req.cwd.display().to_string()),
                env: Default::default(),
                stdin: req.stdin,
            };
            let out = client.run(spec).await.map_err(|e| {
                ProviderError::Host(HostError::impd(&target, "running a command", &e))
            })?;
            Ok(RunOutput {
                code: out.code,
                stdout: out.stdout,
                stderr: out.stderr,
            })
        })
    }

    fn transfer_archive(
        &self,
        archive: Bytes,
        dir: std::path::PathBuf,
        host_key: Option<String>,
    ) -> LocalBoxFuture<'static, Result<(), ProviderError>> {
        let imp = match self.host_of(host_key.as_deref()) {
            Ok(imp) => imp,
            Err(e) => return Box::pin(std::future::ready(Err(e))),
        };
        let client = self.settings.client();
        let target = self.settings.target.clone();
        Box::pin(async move {
            let out = client
                .unpack_tar(&imp, &dir.display().to_string(), archive)
                .await
                .map_err(|e| {
                    ProviderError::Host(HostError::impd(&target, "unpacking an archive", &e))
                })?;
            if out.code == Some(0) {
                return Ok(());
            }
            Err(ProviderError::command_failed(
                "unpacking the archive in the imp",
                out.code,
                &out.stderr,
            ))
        })
    }
}

/// An imp is a host: it sleeps, is destroyed, and holds its agent's broker binding.
impl HostLifecycle for ImpProvider {
    fn prepare_host(
        &self,
        host_key: &str,
    ) -> LocalBoxFuture<'static, Result<std::path::PathBuf, ProviderError>> {
        let host = self.host(&self.imp_for(host_key));
        let dir = std::path::Path::new(&self.settings.guest_dir)
            .join("sessions")
            .join(host_key);
        Box::pin(async move {
            host.send(ReadyHost {
                install_atc: false,
                auth_dir: None,
            })
            .await
            .unwrap_or(Err(HostError::LeaseGone))?;
            // The readying counted one more harness; the session's own counts itself when it
            // starts, so this one is let go now (which may return the lease meanwhile).
            host.do_send(HarnessGone);
            Ok(dir)
        })
    }

    fn suspend_host(
        &self,
        host_key: &str,
        idle: Option<Recipient<CheckIdle>>,
    ) -> LocalBoxFuture<'static, Result<(), ProviderError>> {
        let host = self.host(&self.imp_for(host_key));
        Box::pin(async move {
            host.send(SuspendHost { idle })
                .await
                .unwrap_or(Err(HostError::LeaseGone))
                .map_err(ProviderError::from)
        })
    }

    fn destroy_host(
        &self,
        host_key: &str,
    ) -> LocalBoxFuture<'static, Result<(), crate::providers::ProviderError>> {
        let host = self.host(&self.imp_for(host_key));
        // A bound host is blocked first, and only the imp its binding created goes (spec
        // §6.3); secrets are never deleted.
        let binding = self.broker_binding(host_key).ok();
        Box::pin(async move {
            if let Some(b) = &binding {
                ask(b, crate::providers::imp::broker::host_binding::ForgetBegin).await?;
            }
            host.send(DestroyHost)
                .await
                .unwrap_or(Err(HostError::LeaseGone))?;
            if let Some(b) = &binding {
                ask(b, crate::providers::imp::broker::host_binding::ForgetEnd).await?;
            }
            Ok(())
        })
    }

    fn auth_status(&self, host_key: &str) -> LocalBoxFuture<'static, AuthAnswer> {
        let binding = self.broker_binding(host_key);
        Box::pin(async move {
            ask(
                &binding?,
                crate::providers::imp::broker::host_binding::Status,
            )
            .await
        })
    }

    fn auth_revoke(&self, host_key: &str) -> LocalBoxFuture<'static, AuthAnswer> {
        let binding = self.broker_binding(host_key);
        Box::pin(async move {
            let binding = binding?;
            ask(
                &binding,
                crate::providers::imp::broker::host_binding::Revoke,
            )
            .await?;
            ask(
                &binding,
                crate::providers::imp::broker::host_binding::Status,
            )
            .await
        })
    }

    fn auth_rebind(
        &self,
        host_key: &str,
        launcher: crate::providers::imp::broker::binder::Launcher,
    ) -> LocalBoxFuture<'static, Result<u32, crate::providers::ProviderError>> {
        let binding = self.broker_binding(host_key);
        Box::pin(async move {
            ask(
                &binding?,
                crate::providers::imp::broker::host_binding::Rebind(launcher),
            )
            .await
        })
    }

    fn reconcile_bindings(
        &self,
        bindings: Vec<crate::providers::imp::broker::binding::Binding>,
        listed_hosts: &std::collections::BTreeSet<String>,
    ) -> LocalBoxFuture<'static, crate::providers::imp::broker::binder::ReconcileSummary> {
        use crate::providers::imp::broker::binder::ReconcileSummary;
        let mut summary = ReconcileSummary::default();
        let Some(store) = self.broker_store.as_ref() else {
            return Box::pin(std::future::ready(summary));
        };
        let mut work = Vec::new();
        for b in bindings {
            if b.target_identity != self.settings.identity {
                // Bound through another impd than the target names now: this impd's imps and
                // grants are not the binding's to take back.
                tracing::warn!(target = %b.target, host = %b.host_key, imp = %b.imp_name,
                    "start-up: the binding was made on another impd than the target's; it stays as it is");
                summary.kept += 1;
                continue;
            }
            // The recorded imp name, not one derived again: the prefix may have changed.
            let actor = self.binding(store, &b.host_key, &b.imp_name);
            let has_listed_session = listed_hosts.contains(&b.host_key);
            work.push((b, actor, has_listed_session));
        }
        Box::pin(async move {
            for (b, actor, has_listed_session) in work {
                let outcome = ask(
                    &actor,
                    crate::providers::imp::broker::host_binding::Reconcile { has_listed_session },
                )
                .await;
                summary.record(&b, &outcome);
            }
            summary
        })
    }
}

/// Asks a host's binding actor; one that is gone (the daemon stops) is an internal error.
async fn ask<M, T>(
    binding: &Addr<crate::providers::imp::broker::host_binding::HostBinding>,
    msg: M,
) -> Result<T, crate::providers::ProviderError>
where
    M: Message<Result = Result<T, crate::providers::ProviderError>> + Send + 'static,
    T: Send + 'static,
    crate::providers::imp::broker::host_binding::HostBinding: Handler<M>,
{
    binding
        .send(msg)
        .await
        .unwrap_or(Err(crate::providers::ProviderError::Internal))
}
