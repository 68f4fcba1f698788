//! The binding operations on one host (spec §6.3): create, verify, revoke and rebind. Each records
//! its step in the store before it takes it, so a crash leaves a state start-up can read,
//! and a failure takes back exactly this attempt's effects, or leaves `rollback_pending` and
//! says that its effect may remain. They run one at a time per host: the host binding actor
//! (`host_binding`) is their only caller.

use std::collections::{BTreeMap, BTreeSet};

use impd_client::{CreateImp, ImpdClient};

use super::binding::{
    plan_rebind, Binding, BindingState, BoundSecret, Grant, GrantState, PendingRebind,
    ReconcileAction,
};
use super::{gate, AgentAuth, BrokerError};
use crate::error::Error;
use crate::providers::imp::host_error::HostError;
use crate::providers::ProviderError;
use crate::sessions::session::now_ms;
use crate::store::{StateStore, StoreError};

/// What the operations of one host need.
#[derive(Clone)]
pub struct HostContext {
    /// The daemon's state.
    pub store: StateStore,
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

/// What start-up reconciliation did with one host's binding.
#[derive(Debug)]
pub enum Reconciled {
    /// The host holds no binding record.
    NoRecord,
    /// Left as it was, in this state: nothing was cut off, or a listed session owns the
    /// unfinished create.
    Kept(BindingState),
    /// A rebind in flight became `rebind_failed` at `revision` (the old one); `removed` are
    /// the secrets whose grants it had added.
    RebindFailed {
        /// The revision the binding stays at.
        revision: u32,
        /// The secrets whose added grants were removed.
        removed: Vec<String>,
    },
    /// An unfinished create was taken back and its record dropped.
    TakenBack {
        /// What became of the imp under the name.
        imp: ImpTakenBack,
    },
    /// The take-back could not be confirmed: the binding is `rollback_pending`.
    RollbackPending,
    /// impd could not be reached (or refused): the binding is left as it was.
    Unreachable {
        /// The state it stays in.
        state: BindingState,
        /// The failed call.
        cause: HostError,
    },
}

/// What taking back an unfinished create did with the imp under its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImpTakenBack {
    /// It was the attempt's, and is destroyed.
    Destroyed,
    /// There was none.
    Absent,
    /// It is another imp than the one the attempt created, and is left alone.
    NotOurs,
}

/// How many bindings start-up reconciliation left and settled, for the daemon's summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReconcileSummary {
    /// Bindings left as they were (and hosts with no record).
    pub kept: u32,
    /// Rebinds in flight that failed.
    pub rebinds_failed: u32,
    /// Unfinished creates taken back.
    pub taken_back: u32,
    /// Unfinished creates whose take-back was not confirmed.
    pub rollback_pending: u32,
    /// Bindings left as they were because impd could not be reached.
    pub unreachable: u32,
    /// Bindings the store could not settle.
    pub failed: u32,
}

impl ReconcileSummary {
    /// Counts what reconciliation did with `binding`, and logs it when it acted (or could
    /// not): one line per binding, naming the target, the host and the imp, never a token.
    pub fn record(&mut self, binding: &Binding, outcome: &Result<Reconciled, Error>) {
        let (target, host, imp) = (&binding.target, &binding.host_key, &binding.imp_name);
        match outcome {
            Ok(Reconciled::NoRecord) | Ok(Reconciled::Kept(_)) => self.kept += 1,
            Ok(Reconciled::RebindFailed { revision, removed }) => {
                self.rebinds_failed += 1;
                tracing::info!(%target, %host, %imp, revision, removed = ?removed,
                    "start-up: a rebind left in flight failed; the grants it added are removed");
            }
            Ok(Reconciled::TakenBack { imp: what }) => {
                self.taken_back += 1;
                tracing::info!(%target, %host, %imp, imp_was = ?what,
                    "start-up: an unfinished create was taken back");
            }
            Ok(Reconciled::RollbackPending) => {
                self.rollback_pending += 1;
                tracing::warn!(%target, %host, %imp,
                    "start-up: an unfinished create could not be taken back; the binding stays rollback_pending");
            }
            Ok(Reconciled::Unreachable { state, cause }) => {
                self.unreachable += 1;
                tracing::warn!(%target, %host, %imp, state = state.as_str(), error = %cause,
                    "start-up: impd could not be reached to reconcile the binding; it stays as it is");
            }
            Err(e) => {
                self.failed += 1;
                tracing::error!(%target, %host, %imp, error = %e,
                    "start-up: the binding could not be reconciled; it stays as it is");
            }
        }
    }

    /// How many bindings it covers.
    pub fn total(self) -> u32 {
        self.kept
            + self.rebinds_failed
            + self.taken_back
            + self.rollback_pending
            + self.unreachable
            + self.failed
    }
}

impl std::ops::AddAssign for ReconcileSummary {
    fn add_assign(&mut self, other: ReconcileSummary) {
        self.kept += other.kept;
        self.rebinds_failed += other.rebinds_failed;
        self.taken_back += other.taken_back;
        self.rollback_pending += other.rollback_pending;
        self.unreachable += other.unreachable;
        self.failed += other.failed;
    }
}

fn stored(e: StoreError) -> Error {
    tracing::error!(error = %e, "binding store step failed");
    Error::Internal
}

/// `cause`, saying that its effect may remain. Only a host's error can say so; a store
/// failure is already an internal error, logged where it happened.
fn with_effect_remaining(cause: Error) -> Error {
    match cause {
        Error::Provider(ProviderError::Host(h)) => h.effect_remains().into(),
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
    pub async fn create(&self, who: &Launcher) -> Result<Binding, Error> {
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
                state: GrantState::Granting,
                preexisted: false,
                attempt_id: binding.attempt_id,
            };
            self.store.grant_put(&grant).await.map_err(stored)?;
            let state = match self.client.grants_add(&self.imp, &secret.name).await {
                Ok(()) => GrantState::Granted,
                Err(e) => {
                    // Unknown whether impd applied it: the take-back removes it either way.
                    let _ = self
                        .store
                        .grant_set_state(&self.host_key, &secret.name, GrantState::Uncertain)
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
    async fn take_back(&self, binding: &Binding, cause: HostError) -> Error {
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
                Err(e) if e.is("NOT_FOUND") => {}
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
            .binding_set_state(&self.host_key, BindingState::RollbackPending, now_ms())
            .await
        {
            stored(e);
        }
        cause.effect_remains().into()
    }

    /// A create whose harness never started (impd refused it, or it ended first): its
    /// attempt is taken back, as a failed step would have been. A binding past
    /// `provisioning` is left alone.
    pub async fn abandon(&self, why: &str) -> Result<(), Error> {
        let Some(binding) = self
            .store
            .binding_get(&self.host_key)
            .await
            .map_err(stored)?
        else {
            return Ok(());
        };
        if binding.state != BindingState::Provisioning {
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

    /// Start-up reconciliation of the host's binding (spec §6.3), before the daemon serves:
    /// a rebind left in flight fails, with the grants it added removed; an unfinished create
    /// (`provisioning`, `rollback_pending`) whose host no listed session uses is taken back;
    /// anything else is left. An impd that cannot be reached leaves the binding as it was.
    pub async fn reconcile(&self, has_listed_session: bool) -> Result<Reconciled, Error> {
        let Some(binding) = self
            .store
            .binding_get(&self.host_key)
            .await
            .map_err(stored)?
        else {
            return Ok(Reconciled::NoRecord);
        };
        match binding.reconcile_action(has_listed_session) {
            ReconcileAction::Keep => Ok(Reconciled::Kept(binding.state)),
            ReconcileAction::FailRebind => self.fail_rebind_in_flight(binding).await,
            ReconcileAction::TakeBackAttempt => self.take_back_unfinished(binding).await,
        }
    }

    /// A rebind a dead daemon left in flight: the grants carrying its attempt id go (impd
    /// first, then the row), then `rebind_failed` at the old revision. A grant impd did not
    /// confirm gone leaves the record as it is, so the next start tries again.
    async fn fail_rebind_in_flight(&self, mut binding: Binding) -> Result<Reconciled, Error> {
        let Some(pending) = binding.pending_rebind.clone() else {
            return Ok(Reconciled::Kept(binding.state));
        };
        let grants = self.store.grants_of(&self.host_key).await.map_err(stored)?;
        let mut removed = Vec::new();
        for g in grants.iter().filter(|g| g.attempt_id == pending.attempt_id) {
            // A grant that was there before the rebind asked for it is not the rebind's to
            // take away; only its row, which the old revision never had, goes.
            if !g.preexisted {
                match self.ungrant(&g.secret).await {
                    Ok(()) => {}
                    Err(e) => {
                        return Ok(Reconciled::Unreachable {
                            state: binding.state,
                            cause: self.impd("removing a grant a rebind added", &e),
                        })
                    }
                }
            }
            self.store
                .grant_delete(&self.host_key, &g.secret)
                .await
                .map_err(stored)?;
            removed.push(g.secret.clone());
        }
        binding.fail_rebind(now_ms());
        self.store.binding_put(&binding).await.map_err(stored)?;
        Ok(Reconciled::RebindFailed {
            revision: binding.revision,
            removed,
        })
    }

    /// A create a dead daemon left unfinished (or whose rollback it could not confirm): its
    /// grants that did not preexist and the imp it created go, then the record. The imp goes
    /// only if impd's id for it is the recorded one, or none was recorded yet and the attempt
    /// was creating it; another imp under the name is left alone, with its grants.
    async fn take_back_unfinished(&self, binding: Binding) -> Result<Reconciled, Error> {
        let found = match self.client.imps_get(&self.imp).await {
            Ok(found) => found,
            Err(e) => {
                return Ok(Reconciled::Unreachable {
                    state: binding.state,
                    cause: self.impd("reading the imp", &e),
                })
            }
        };
        let imp = match (&found, &binding.imp_id) {
            (None, _) => ImpTakenBack::Absent,
            (Some(i), Some(id)) if &i.id == id => ImpTakenBack::Destroyed,
            (Some(_), None) if binding.created_imp => ImpTakenBack::Destroyed,
            (Some(_), _) => ImpTakenBack::NotOurs,
        };
        if imp == ImpTakenBack::NotOurs {
            // This attempt's imp is gone (someone replaced it), and its grants with it.
            self.store
                .binding_delete(&self.host_key)
                .await
                .map_err(stored)?;
            return Ok(Reconciled::TakenBack { imp });
        }
        let attempt = Binding {
            created_imp: imp == ImpTakenBack::Destroyed,
            ..binding
        };
        let cause = HostError::NotStarted {
            target: self.target.clone(),
            detail: "the daemon stopped before the host was bound".into(),
        };
        if self.take_back(&attempt, cause).await.effect_remains() {
            return Ok(Reconciled::RollbackPending);
        }
        Ok(Reconciled::TakenBack { imp })
    }

    /// The harness behind `binding` really started: the binding is `ready`.
    pub async fn mark_ready(&self) -> Result<(), Error> {
        self.store
            .binding_set_state(&self.host_key, BindingState::Ready, now_ms())
            .await
            .map_err(stored)
    }

    /// A launch onto an existing host (revive, restore): the binding is `ready` and its
    /// secrets are the agent's, the gate passes with the bound rules, the imp is the one it
    /// created, and the imp holds exactly its grants. Never grants again.
    pub async fn verify(&self, who: &Launcher) -> Result<Binding, Error> {
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
        if binding.state != BindingState::Ready {
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
    pub async fn revoke(&self) -> Result<(), Error> {
        self.recorded().await?;
        self.store
            .binding_set_state(&self.host_key, BindingState::RevocationPending, now_ms())
            .await
            .map_err(stored)?;
        let mut unconfirmed = Vec::new();
        for g in self.store.grants_of(&self.host_key).await.map_err(stored)? {
            if g.state == GrantState::Revoked {
                continue;
            }
            self.store
                .grant_set_state(&self.host_key, &g.secret, GrantState::Revoking)
                .await
                .map_err(stored)?;
            let state = match self.ungrant(&g.secret).await {
                Ok(()) => GrantState::Revoked,
                Err(e) => {
                    tracing::warn!(imp = %self.imp, secret = %g.secret, code = %e.code,
                        "grant not confirmed revoked");
                    unconfirmed.push(g.secret.clone());
                    GrantState::RevocationPending
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
            .binding_set_state(&self.host_key, BindingState::Revoked, now_ms())
            .await
            .map_err(stored)
    }

    /// Rebinds the host to `who`'s `auth` as configured now (spec §6.3): allowed from
    /// `ready`, `revoked` and `rebind_failed`. The gate runs afresh and binds the rules impd
    /// has now, and the imp must be the one the binding created. The rebind is recorded in
    /// flight before impd is touched; then the grants the imp lacks are added (each row,
    /// carrying the rebind's attempt id, recorded before its step), the dropped ones removed,
    /// and the binding moves to the next revision, `ready`. Answers that revision.
    ///
    /// A failure removes only the grants this rebind added and leaves `rebind_failed` at the
    /// old revision. When a removal is not confirmed, the rebind stays recorded in flight
    /// (blocked as `rebind_failed`, so no launch is admitted) for start-up reconciliation to
    /// finish, and the answer says the effect may remain.
    pub async fn rebind(&self, who: &Launcher) -> Result<u32, Error> {
        let mut binding = self.recorded().await?;
        if !binding.state.allows_rebind() || binding.pending_rebind.is_some() {
            return Err(BrokerError::Blocked {
                state: binding.state.as_str(),
            }
            .into());
        }
        // No bound rules to compare against: a rebind binds what impd has now, which is how
        // a secret whose rules changed (`auth_secret_mismatch`) is brought back.
        let secrets = self.judged_afresh(who).await?;
        self.check_bound_imp(&binding).await?;
        let held = self.held_grants().await?;
        let before = self.store.grants_of(&self.host_key).await.map_err(stored)?;
        let wanted: Vec<String> = secrets.iter().map(|s| s.name.clone()).collect();
        let plan = plan_rebind(&before, &held, &wanted);
        let pending = match binding.begin_rebind(secrets, now_ms()) {
            Ok(p) => p.clone(),
            Err(e) => {
                return Err(BrokerError::Blocked {
                    state: e.0.as_str(),
                }
                .into())
            }
        };
        self.store.binding_put(&binding).await.map_err(stored)?;
        match self.rebind_steps(&pending, &plan, &before).await {
            Ok(()) => {
                let mut committed = binding.clone();
                let revision = committed.commit_rebind(now_ms());
                match self.store.binding_put(&committed).await {
                    Ok(()) => revision.ok_or(Error::Internal),
                    Err(e) => Err(self.rebind_failed(binding, &before, stored(e)).await),
                }
            }
            Err(cause) => Err(self.rebind_failed(binding, &before, cause).await),
        }
    }

    /// The rebind's steps at impd, in the order that keeps the old revision's grants
    /// longest: first what it adds, then what it drops, then the rows of what it keeps.
    async fn rebind_steps(
        &self,
        pending: &PendingRebind,
        plan: &super::binding::RebindPlan,
        before: &[Grant],
    ) -> Result<(), Error> {
        for secret in &plan.add {
            let grant = Grant {
                host_key: self.host_key.clone(),
                secret: secret.clone(),
                state: GrantState::Granting,
                preexisted: false,
                attempt_id: pending.attempt_id,
            };
            self.store.grant_put(&grant).await.map_err(stored)?;
            if let Err(e) = self.client.grants_add(&self.imp, secret).await {
                // Unknown whether impd applied it: the rebind's take-back removes it either way.
                self.store
                    .grant_set_state(&self.host_key, secret, GrantState::Uncertain)
                    .await
                    .map_err(stored)?;
                return Err(self.impd("granting a secret", &e).into());
            }
            self.store
                .grant_set_state(&self.host_key, secret, GrantState::Granted)
                .await
                .map_err(stored)?;
        }
        for (secret, held) in &plan.drop {
            if *held {
                self.store
                    .grant_set_state(&self.host_key, secret, GrantState::Revoking)
                    .await
                    .map_err(stored)?;
                match self.ungrant(secret).await {
                    Ok(()) => {}
                    Err(e) => {
                        self.store
                            .grant_set_state(&self.host_key, secret, GrantState::RevocationPending)
                            .await
                            .map_err(stored)?;
                        return Err(self.impd("removing a dropped grant", &e).into());
                    }
                }
            }
            self.store
                .grant_delete(&self.host_key, secret)
                .await
                .map_err(stored)?;
        }
        for secret in &plan.keep {
            if before
                .iter()
                .any(|g| &g.secret == secret && g.state != GrantState::Granted)
            {
                self.store
                    .grant_set_state(&self.host_key, secret, GrantState::Granted)
                    .await
                    .map_err(stored)?;
            }
        }
        for secret in &plan.adopt {
            self.store
                .grant_put(&Grant {
                    host_key: self.host_key.clone(),
                    secret: secret.clone(),
                    state: GrantState::Granted,
                    preexisted: true,
                    attempt_id: pending.attempt_id,
                })
                .await
                .map_err(stored)?;
        }
        Ok(())
    }

    /// A rebind failed with `cause`: the grants it added are removed and their rows go back
    /// to what `before` recorded, then `rebind_failed` at the old revision. A
    /// removal impd did not confirm keeps the rebind recorded in flight (see
    /// [`rebind`](Self::rebind)).
    async fn rebind_failed(&self, mut binding: Binding, before: &[Grant], cause: Error) -> Error {
        let Some(pending) = binding.pending_rebind.clone() else {
            return cause;
        };
        let mut confirmed = true;
        let rows = match self.store.grants_of(&self.host_key).await {
            Ok(rows) => rows,
            Err(e) => {
                stored(e);
                confirmed = false;
                Vec::new()
            }
        };
        // Only rows carrying the rebind's attempt id are its own: the old revision's rows,
        // and what the rebind did to them (a dropped grant removed or pending removal), say
        // how the grants are now and stay.
        for g in rows.iter().filter(|g| g.attempt_id == pending.attempt_id) {
            if !g.preexisted {
                match self.ungrant(&g.secret).await {
                    Ok(()) => {}
                    Err(e) => {
                        tracing::warn!(imp = %self.imp, secret = %g.secret, code = %e.code,
                            "could not remove a grant a failed rebind added");
                        confirmed = false;
                        if let Err(e) = self
                            .store
                            .grant_set_state(
                                &self.host_key,
                                &g.secret,
                                GrantState::RevocationPending,
                            )
                            .await
                        {
                            stored(e);
                        }
                        continue;
                    }
                }
            }
            // Back to the old revision's row (a kept secret granted again from `revoked`),
            // or none.
            let restored = match before.iter().find(|b| b.secret == g.secret) {
                Some(old) => self.store.grant_put(old).await,
                None => self.store.grant_delete(&self.host_key, &g.secret).await,
            };
            if let Err(e) = restored {
                stored(e);
                confirmed = false;
            }
        }
        if confirmed {
            binding.fail_rebind(now_ms());
        } else {
            // Blocked, with the rebind left for start-up reconciliation to finish.
            binding.state = BindingState::RebindFailed;
            binding.updated_at = now_ms();
        }
        if let Err(e) = self.store.binding_put(&binding).await {
            stored(e);
            confirmed = false;
        }
        if confirmed {
            cause
        } else {
            with_effect_remaining(cause)
        }
    }

    /// The gate on what impd has now, with no bound rules to hold it to: `who`'s secrets as
    /// they are to be bound, or the gate's refusal.
    async fn judged_afresh(&self, who: &Launcher) -> Result<Vec<BoundSecret>, Error> {
        let view = gate::read(&self.client, &self.target).await?;
        Ok(gate::judge(&view, &who.agent, &who.auth, &self.imp, None)?
            .into_iter()
            .map(BoundSecret::from_impd)
            .collect())
    }

    /// `auth_runtime_mismatch` unless the imp under the host's name is the one `binding`
    /// created; none there counts as another.
    async fn check_bound_imp(&self, binding: &Binding) -> Result<(), Error> {
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
    async fn held_grants(&self) -> Result<BTreeSet<String>, Error> {
        Ok(self
            .client
            .grants_list(&self.imp)
            .await
            .map_err(|e| self.impd("listing the imp's grants", &e))?
            .into_iter()
            .collect())
    }

    /// The host's binding; `NotBound` when it holds none.
    async fn recorded(&self) -> Result<Binding, Error> {
        self.store
            .binding_get(&self.host_key)
            .await
            .map_err(stored)?
            .ok_or_else(|| BrokerError::NotBound.into())
    }

    /// A forget of a bound host, before the destroy: the binding admits no more launches,
    /// and the imp under its name must be the one it created, or nothing is destroyed. A
    /// host without a binding has nothing to block.
    pub async fn forget_begin(&self) -> Result<(), Error> {
        let Some(binding) = self
            .store
            .binding_get(&self.host_key)
            .await
            .map_err(stored)?
        else {
            return Ok(());
        };
        self.store
            .binding_set_state(&self.host_key, BindingState::Revoked, now_ms())
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
    pub async fn forget_end(&self) -> Result<(), Error> {
        self.store
            .binding_delete(&self.host_key)
            .await
            .map_err(stored)
    }

    /// The binding as `GET /v1/sessions/{id}/auth` shows it.
    pub async fn status(&self) -> Result<atc_protocol::responses::AuthStatus, Error> {
        let b = self.recorded().await?;
        let grants = self.store.grants_of(&self.host_key).await.map_err(stored)?;
        Ok(super::binding::listed(&b, &grants))
    }

    /// Whether the host's binding admits a launch planned for `hash` now. `creating`: the
    /// create attempt the launch belongs to, whose own first start the binding admits while
    /// it is still `provisioning`.
    pub async fn admits(&self, hash: &str, creating: Option<uuid::Uuid>) -> Result<(), Error> {
        let binding = self.recorded().await?;
        let own_create =
            binding.state == BindingState::Provisioning && creating == Some(binding.attempt_id);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_each_outcome_once() {
        let b = Binding::provisioning("h", "box", "imp:1", "atc-h", vec![], 0);
        let mut s = ReconcileSummary::default();
        let outcomes = [
            Ok(Reconciled::NoRecord),
            Ok(Reconciled::Kept(BindingState::Ready)),
            Ok(Reconciled::RebindFailed {
                revision: 1,
                removed: vec!["a".into()],
            }),
            Ok(Reconciled::TakenBack {
                imp: ImpTakenBack::Destroyed,
            }),
            Ok(Reconciled::RollbackPending),
            Ok(Reconciled::Unreachable {
                state: BindingState::Provisioning,
                cause: HostError::LeaseGone,
            }),
            Err(Error::Internal),
        ];
        for o in &outcomes {
            s.record(&b, o);
        }
        assert_eq!(
            s,
            ReconcileSummary {
                kept: 2,
                rebinds_failed: 1,
                taken_back: 1,
                rollback_pending: 1,
                unreachable: 1,
                failed: 1,
            }
        );
        assert_eq!(s.total(), 7);
        let mut twice = s;
        twice += s;
        assert_eq!(twice.total(), 14);
    }
}
