//! The binding operations on one host (spec §6.3): create, verify, revoke, forget, and (in
//! `rebind` and `reconcile` below) rebind and start-up reconciliation. Each records
//! its step in the store before it takes it, so a crash leaves a state start-up can read,
//! and a failure takes back exactly this attempt's effects, or leaves `rollback_pending` and
//! says that its effect may remain. They run one at a time per host: the host binding actor
//! (`host_binding`) is their only caller.

use std::collections::{BTreeMap, BTreeSet};

use impd_client::{CreateImp, ImpdClient, ImpdCode};

use super::binding::{Binding, BoundSecret, Grant};
use super::binding_store::{SharedBindingStore, StoreFailure};
use super::{gate, AgentAuth, BrokerError};
use crate::clock::now_ms;
use crate::providers::imp::host_error::HostError;
use crate::providers::ProviderError;
use atc_protocol::responses::{AuthBindingState, AuthGrantState};

mod rebind;
mod reconcile;

pub use reconcile::{ImpTakenBack, ReconcileSummary, Reconciled};

/// What the operations of one host need.
#[derive(Clone)]
pub struct HostContext {
    /// The daemon's state.
    pub store: SharedBindingStore,
    /// impd.
    pub client: ImpdClient,
    /// The target id and identity the binding belongs to.
    pub target: String,
    /// The target's identity.
    pub target_identity: String,
    /// The host key (the owning session's id) and its imp.
    pub host_key: String,
    /// The imp's name.
    pub imp: String,
    /// The image and memory a created imp gets.
    pub image: Option<String>,
    /// Its memory in MiB.
    pub memory_mib: Option<u32>,
}

/// Who asks: the agent and its `auth`.
#[derive(Debug, Clone)]
pub struct Launcher {
    /// The agent id.
    pub agent: String,
    /// Its `auth`.
    pub auth: AgentAuth,
}

fn stored(e: StoreFailure) -> ProviderError {
    tracing::error!(error = %e, "binding store step failed");
    ProviderError::Internal
}

/// `cause`, saying that its effect may remain. Only a host's error can say so; a store
/// failure is already an internal error, logged where it happened.
fn with_effect_remaining(cause: ProviderError) -> ProviderError {
    match cause {
        ProviderError::Host(h) => h.effect_remains().into(),
        other => other,
    }
}

impl HostContext {
    fn impd(&self, what: &'static str, e: &impd_client::ImpPortError) -> HostError {
        HostError::impd(&self.target, what, e)
    }

    /// Removes the imp's grant of `secret`; a grant impd no longer has counts as removed,
    /// which every take-back, revoke and rebind relies on to be retried safely.
    async fn ungrant(&self, secret: &str) -> Result<(), impd_client::ImpPortError> {
        match self.client.grants_delete(&self.imp, secret).await {
            Err(e) if e.not_found_kind().is_some() => Ok(()),
            other => other,
        }
    }

    /// A new host for `who` (a spawn): the gate, then `provisioning`, the imp, each grant.
    /// Answers the binding, still `provisioning` until [`mark_ready`](Self::mark_ready).
    pub async fn create(&self, who: &Launcher) -> Result<Binding, ProviderError> {
        if self
            .store
            .binding_get(&self.host_key)
            .await
            .map_err(stored)?
            .is_some()
        {
            return Err(BrokerError::RuntimeExists {
                imp: self.imp.clone(),
            }
            .into());
        }
        let secrets = self.judged_afresh(who).await?;
        match self.client.imps_get(&self.imp).await {
            Ok(None) => {}
            Ok(Some(_)) => {
                return Err(BrokerError::RuntimeExists {
                    imp: self.imp.clone(),
                }
                .into())
            }
            Err(e) => return Err(self.impd("reading the imp", &e).into()),
        }
        let mut binding = Binding::provisioning(
            &self.host_key,
            &self.target,
            &self.target_identity,
            &self.imp,
            secrets,
            now_ms(),
        );
        // Recorded before `imps.create` goes out: no imp was under the name a moment ago, so
        // one found there later with no id recorded (the answer was lost, or the daemon died
        // with the call in flight) is this attempt's, and goes with it.
        binding.created_imp = true;
        self.store.binding_put(&binding).await.map_err(stored)?;
        let created = self
            .client
            .imps_create(CreateImp {
                name: self.imp.clone(),
                image: self.image.clone(),
                memory_mib: self.memory_mib,
            })
            .await;
        match created {
            Ok(imp) => {
                binding.imp_id = Some(imp.id);
                binding.updated_at = now_ms();
                self.store.binding_put(&binding).await.map_err(stored)?;
            }
            Err(e) => {
                // The answer may have been lost after the effect: the take-back destroys an
                // imp under our name (`created_imp` says it is this attempt's).
                let err = self.impd("creating the imp", &e);
                return Err(self.take_back(&binding, err).await);
            }
        }
        for secret in binding.secrets.clone() {
            let grant = Grant {
                host_key: self.host_key.clone(),
                secret: secret.name.clone(),
                state: AuthGrantState::Granting,
                preexisted: false,
                attempt_id: binding.attempt_id,
            };
            self.store.grant_put(&grant).await.map_err(stored)?;
            let state = match self.client.grants_add(&self.imp, &secret.name).await {
                Ok(()) => AuthGrantState::Granted,
                Err(e) => {
                    // Unknown whether impd applied it: the take-back removes it either way.
                    let _ = self
                        .store
                        .grant_set_state(&self.host_key, &secret.name, AuthGrantState::Uncertain)
                        .await
                        .map_err(stored);
                    let err = self.impd("granting a secret", &e);
                    return Err(self.take_back(&binding, err).await);
                }
            };
            self.store
                .grant_set_state(&self.host_key, &secret.name, state)
                .await
                .map_err(stored)?;
        }
        Ok(binding)
    }

    /// Takes back exactly what `binding`'s attempt did: its grants that did not preexist,
    /// then the imp it created, then the record. What cannot be confirmed leaves
    /// `rollback_pending`, and the answer says the effect may remain.
    async fn take_back(&self, binding: &Binding, cause: HostError) -> ProviderError {
        let mut confirmed = true;
        let grants = self
            .store
            .grants_of(&self.host_key)
            .await
            .unwrap_or_default();
        for g in grants
            .iter()
            .filter(|g| g.attempt_id == binding.attempt_id && !g.preexisted)
        {
            match self.ungrant(&g.secret).await {
                Ok(()) => {}
                Err(e) => {
                    tracing::warn!(imp = %self.imp, secret = %g.secret, code = %e.code,
                        "could not take back a grant");
                    confirmed = false;
                    continue;
                }
            }
            if let Err(e) = self.store.grant_delete(&self.host_key, &g.secret).await {
                stored(e);
                confirmed = false;
            }
        }
        if confirmed && binding.created_imp {
            match self.client.imps_destroy(&self.imp).await {
                Ok(()) => {}
                Err(e) if e.is(ImpdCode::NotFound) => {}
                Err(e) => {
                    tracing::warn!(imp = %self.imp, code = %e.code,
                        "could not destroy the imp a failed create made");
                    confirmed = false;
                }
            }
        }
        if confirmed && self.store.binding_delete(&self.host_key).await.is_ok() {
            return cause.into();
        }
        if let Err(e) = self
            .store
            .binding_set_state(&self.host_key, AuthBindingState::RollbackPending, now_ms())
            .await
        {
            stored(e);
        }
        cause.effect_remains().into()
    }

    /// A create whose harness never started (impd refused it, or it ended first): its
    /// attempt is taken back, as a failed step would have been. A binding past
    /// `provisioning` is left alone.
    pub async fn abandon(&self, why: &str) -> Result<(), ProviderError> {
        let Some(binding) = self
            .store
            .binding_get(&self.host_key)
            .await
            .map_err(stored)?
        else {
            return Ok(());
        };
        if binding.state != AuthBindingState::Provisioning {
            return Ok(());
        }
        let cause = HostError::NotStarted {
            target: self.target.clone(),
            detail: why.to_string(),
        };
        match self.take_back(&binding, cause).await {
            e if e.effect_remains() => Err(e),
            _ => Ok(()),
        }
    }

    /// The harness behind `binding` really started: the binding is `ready`.
    pub async fn mark_ready(&self) -> Result<(), ProviderError> {
        self.store
            .binding_set_state(&self.host_key, AuthBindingState::Ready, now_ms())
            .await
            .map_err(stored)
    }

    /// A launch onto an existing host (revive, restore): the binding is `ready` and its
    /// secrets are the agent's, the gate passes with the bound rules, the imp is the one it
    /// created, and the imp holds exactly its grants. Never grants again.
    pub async fn verify(&self, who: &Launcher) -> Result<Binding, ProviderError> {
        let Some(binding) = self
            .store
            .binding_get(&self.host_key)
            .await
            .map_err(stored)?
        else {
            return Err(BrokerError::RebindRequired {
                reason: "the host holds no binding for this agent's auth".into(),
            }
            .into());
        };
        if binding.state != AuthBindingState::Ready {
            return Err(BrokerError::Blocked {
                state: binding.state.as_str(),
            }
            .into());
        }
        let bound: BTreeSet<&str> = binding.secrets.iter().map(|s| s.name.as_str()).collect();
        let wanted: BTreeSet<&str> = who.auth.secrets.iter().map(String::as_str).collect();
        if bound != wanted {
            return Err(BrokerError::RebindRequired {
                reason: "the agent's auth.secrets changed since the host was bound".into(),
            }
            .into());
        }
        let view = gate::read(&self.client, &self.target).await?;
        let rules: BTreeMap<String, Vec<impd_client::SecretRule>> = binding
            .secrets
            .iter()
            .map(|s| (s.name.clone(), s.impd_rules()))
            .collect();
        gate::judge(&view, &who.agent, &who.auth, &self.imp, Some(&rules))?;
        self.check_bound_imp(&binding).await?;
        let held = self.held_grants().await?;
        let wanted: BTreeSet<String> = bound.iter().map(|s| s.to_string()).collect();
        let missing: Vec<String> = wanted.difference(&held).cloned().collect();
        if !missing.is_empty() {
            return Err(BrokerError::GrantMissing { missing }.into());
        }
        let extra: Vec<String> = held.difference(&wanted).cloned().collect();
        if !extra.is_empty() {
            return Err(BrokerError::GrantsMismatch { extra }.into());
        }
        Ok(binding)
    }

    /// Revokes every grant of the host's binding: `revocation_pending` first, then each grant
    /// (one already gone counts as revoked), then `revoked`. A grant impd did not confirm
    /// keeps the state, so the call can be retried.
    pub async fn revoke(&self) -> Result<(), ProviderError> {
        self.recorded().await?;
        self.store
            .binding_set_state(
                &self.host_key,
                AuthBindingState::RevocationPending,
                now_ms(),
            )
            .await
            .map_err(stored)?;
        let mut unconfirmed = Vec::new();
        for g in self.store.grants_of(&self.host_key).await.map_err(stored)? {
            if g.state == AuthGrantState::Revoked {
                continue;
            }
            self.store
                .grant_set_state(&self.host_key, &g.secret, AuthGrantState::Revoking)
                .await
                .map_err(stored)?;
            let state = match self.ungrant(&g.secret).await {
                Ok(()) => AuthGrantState::Revoked,
                Err(e) => {
                    tracing::warn!(imp = %self.imp, secret = %g.secret, code = %e.code,
                        "grant not confirmed revoked");
                    unconfirmed.push(g.secret.clone());
                    AuthGrantState::RevocationPending
                }
            };
            self.store
                .grant_set_state(&self.host_key, &g.secret, state)
                .await
                .map_err(stored)?;
        }
        if !unconfirmed.is_empty() {
            return Err(BrokerError::RevocationPending { unconfirmed }.into());
        }
        self.store
            .binding_set_state(&self.host_key, AuthBindingState::Revoked, now_ms())
            .await
            .map_err(stored)
    }

    /// The gate on what impd has now, with no bound rules to hold it to: `who`'s secrets as
    /// they are to be bound, or the gate's refusal.
    async fn judged_afresh(&self, who: &Launcher) -> Result<Vec<BoundSecret>, ProviderError> {
        let view = gate::read(&self.client, &self.target).await?;
        Ok(gate::judge(&view, &who.agent, &who.auth, &self.imp, None)?
            .into_iter()
            .map(BoundSecret::from_impd)
            .collect())
    }

    /// `auth_runtime_mismatch` unless the imp under the host's name is the one `binding`
    /// created; none there counts as another.
    async fn check_bound_imp(&self, binding: &Binding) -> Result<(), ProviderError> {
        let imp = self
            .client
            .imps_get(&self.imp)
            .await
            .map_err(|e| self.impd("reading the imp", &e))?;
        if imp.map(|i| i.id) != binding.imp_id {
            return Err(BrokerError::RuntimeMismatch {
                imp: self.imp.clone(),
            }
            .into());
        }
        Ok(())
    }

    /// The secrets impd holds granted to the host's imp now.
    async fn held_grants(&self) -> Result<BTreeSet<String>, ProviderError> {
        Ok(self
            .client
            .grants_list(&self.imp)
            .await
            .map_err(|e| self.impd("listing the imp's grants", &e))?
            .into_iter()
            .collect())
    }

    /// The host's binding; `NotBound` when it holds none.
    async fn recorded(&self) -> Result<Binding, ProviderError> {
        self.store
            .binding_get(&self.host_key)
            .await
            .map_err(stored)?
            .ok_or_else(|| BrokerError::NotBound.into())
    }

    /// A forget of a bound host, before the destroy: the binding admits no more launches,
    /// and the imp under its name must be the one it created, or nothing is destroyed. A
    /// host without a binding has nothing to block.
    pub async fn forget_begin(&self) -> Result<(), ProviderError> {
        let Some(binding) = self
            .store
            .binding_get(&self.host_key)
            .await
            .map_err(stored)?
        else {
            return Ok(());
        };
        self.store
            .binding_set_state(&self.host_key, AuthBindingState::Revoked, now_ms())
            .await
            .map_err(stored)?;
        let imp = self
            .client
            .imps_get(&self.imp)
            .await
            .map_err(|e| self.impd("reading the imp", &e))?;
        match imp {
            Some(i) if Some(&i.id) != binding.imp_id.as_ref() => {
                Err(BrokerError::RuntimeMismatch {
                    imp: self.imp.clone(),
                }
                .into())
            }
            _ => Ok(()),
        }
    }

    /// The forgotten host was destroyed: its binding and grant rows go.
    pub async fn forget_end(&self) -> Result<(), ProviderError> {
        self.store
            .binding_delete(&self.host_key)
            .await
            .map_err(stored)
    }

    /// The binding as `GET /v1/sessions/{id}/auth` shows it.
    pub async fn status(&self) -> Result<atc_protocol::responses::AuthStatus, ProviderError> {
        let b = self.recorded().await?;
        let grants = self.store.grants_of(&self.host_key).await.map_err(stored)?;
        Ok(super::binding::listed(&b, &grants))
    }

    /// Whether the host's binding admits a launch planned for `hash` now. `creating`: the
    /// create attempt the launch belongs to, whose own first start the binding admits while
    /// it is still `provisioning`.
    pub async fn admits(
        &self,
        hash: &str,
        creating: Option<uuid::Uuid>,
    ) -> Result<(), ProviderError> {
        let binding = self.recorded().await?;
        let own_create =
            binding.state == AuthBindingState::Provisioning && creating == Some(binding.attempt_id);
        if !binding.state.admits_launch() && !own_create {
            return Err(BrokerError::Blocked {
                state: binding.state.as_str(),
            }
            .into());
        }
        // The hash, not the revision: a harness planned (created or verified) before a
        // rebind carries the old hash, so its next start or re-attach is refused here with
        // `auth_rebind_required` even though the binding is `ready` again. Only a launch
        // verified against the new revision (a revive) gets in.
        if binding.hash != hash {
            return Err(BrokerError::RebindRequired {
                reason: "the host's binding changed since this launch was planned".into(),
            }
            .into());
        }
        Ok(())
    }
}
