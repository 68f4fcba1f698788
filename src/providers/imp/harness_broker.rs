//! A remote harness's side of broker authentication (spec §6.4): what it asks its host's
//! binding before it readies the host (create for a spawn, verify otherwise), the ticket it
//! takes for each connection, and what it tells the binding when its start succeeded or
//! never came.

use actix::Addr;

use crate::providers::imp::broker::binder::Launcher;
use crate::providers::imp::broker::binding::Binding;
use crate::providers::imp::broker::host_binding::{
    Abandon, Admit, AdmitKind, Create, HostBinding, MarkReady, Ticket, Verify,
};
use crate::providers::ProviderError;

/// The harness's handle on its host's binding.
pub struct BrokerSide {
    /// The host binding's actor.
    pub binding: Addr<HostBinding>,
    /// Who launches.
    pub launcher: Launcher,
    /// A spawn of a new host creates its binding; every other start verifies it.
    pub creates: bool,
    /// The binding hash the launch was planned for, once prepared.
    hash: Option<String>,
    /// The create attempt, for a harness that created its host's binding.
    creating: Option<uuid::Uuid>,
    /// Whether the binding was told the harness started.
    marked_ready: bool,
}

impl BrokerSide {
    /// The side of a harness that `creates` its host's binding (a spawn) or verifies it.
    pub fn new(binding: Addr<HostBinding>, launcher: Launcher, creates: bool) -> BrokerSide {
        BrokerSide {
            binding,
            launcher,
            creates,
            hash: None,
            creating: None,
            marked_ready: false,
        }
    }

    /// Create or verify, before the host is readied. The binding actor being gone means the
    /// daemon is stopping.
    pub fn prepare(
        &self,
    ) -> impl std::future::Future<Output = Result<Binding, ProviderError>> + 'static {
        let (binding, launcher, creates) =
            (self.binding.clone(), self.launcher.clone(), self.creates);
        async move {
            let answer = if creates {
                binding.send(Create(launcher)).await
            } else {
                binding.send(Verify(launcher)).await
            };
            answer.unwrap_or(Err(ProviderError::Internal))
        }
    }

    /// Keeps the hash the launch was planned for.
    pub fn prepared(&mut self, binding: &Binding) {
        self.hash = Some(binding.hash.clone());
        self.creating = self.creates.then_some(binding.attempt_id);
    }

    /// A ticket for one opening of `kind`.
    pub fn admit(
        &self,
        kind: AdmitKind,
    ) -> impl std::future::Future<Output = Result<Ticket, ProviderError>> + 'static {
        let binding = self.binding.clone();
        let hash = self.hash.clone().unwrap_or_default();
        // Once the harness started, its binding is `ready` and admits like any other.
        let creating = self.creating.filter(|_| !self.marked_ready);
        async move {
            binding
                .send(Admit {
                    kind,
                    hash,
                    creating,
                })
                .await
                .unwrap_or(Err(ProviderError::Internal))
        }
    }

    /// The harness started: a created binding becomes `ready`, once.
    pub fn started(&mut self) {
        if self.creates && !self.marked_ready {
            self.marked_ready = true;
            // Queued now, not in the task: a status asked after the session hears of the
            // start finds the binding `ready`.
            let marked = self.binding.send(MarkReady);
            actix::spawn(async move {
                if let Ok(Err(e)) = marked.await {
                    tracing::error!(error = %e, "could not mark the host's binding ready");
                }
            });
        }
    }

    /// The harness ended before it started: a created binding's attempt is taken back.
    pub fn never_started(&self, why: &str) {
        if !self.creates || self.marked_ready {
            return;
        }
        let (binding, why) = (self.binding.clone(), why.to_string());
        actix::spawn(async move {
            if let Ok(Err(e)) = binding.send(Abandon(why)).await {
                tracing::error!(error = %e, "could not take back the binding of a host that never started");
            }
        });
    }
}
