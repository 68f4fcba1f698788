//! Rebind (spec §6.3, `POST /v1/sessions/{id}/auth/rebind`): a host's binding follows the
//! agent's `auth` as the config has it now, at the next revision. Which grants to add and
//! which to drop is [`crate::providers::imp::broker::binding::plan_rebind`]; this is taking those steps,
//! each recorded before it is taken, and taking back only its own on failure.

use super::{stored, with_effect_remaining, HostContext, Launcher};
use crate::clock::now_ms;
use crate::providers::imp::broker::binding::{plan_rebind, Binding, Grant, PendingRebind};
use crate::providers::imp::broker::BrokerError;
use crate::providers::ProviderError;
use atc_protocol::responses::{AuthBindingState, AuthGrantState};

impl HostContext {
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
    pub async fn rebind(&self, who: &Launcher) -> Result<u32, ProviderError> {
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
                    Ok(()) => revision.ok_or(ProviderError::Internal),
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
        plan: &crate::providers::imp::broker::binding::RebindPlan,
        before: &[Grant],
    ) -> Result<(), ProviderError> {
        for secret in &plan.add {
            let grant = Grant {
                host_key: self.host_key.clone(),
                secret: secret.clone(),
                state: AuthGrantState::Granting,
                preexisted: false,
                attempt_id: pending.attempt_id,
            };
            self.store.grant_put(&grant).await.map_err(stored)?;
            if let Err(e) = self.client.grants_add(&self.imp, secret).await {
                // Unknown whether impd applied it: the rebind's take-back removes it either way.
                self.store
                    .grant_set_state(&self.host_key, secret, AuthGrantState::Uncertain)
                    .await
                    .map_err(stored)?;
                return Err(self.impd("granting a secret", &e).into());
            }
            self.store
                .grant_set_state(&self.host_key, secret, AuthGrantState::Granted)
                .await
                .map_err(stored)?;
        }
        for (secret, held) in &plan.drop {
            if *held {
                self.store
                    .grant_set_state(&self.host_key, secret, AuthGrantState::Revoking)
                    .await
                    .map_err(stored)?;
                match self.ungrant(secret).await {
                    Ok(()) => {}
                    Err(e) => {
                        self.store
                            .grant_set_state(
                                &self.host_key,
                                secret,
                                AuthGrantState::RevocationPending,
                            )
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
                .any(|g| &g.secret == secret && g.state != AuthGrantState::Granted)
            {
                self.store
                    .grant_set_state(&self.host_key, secret, AuthGrantState::Granted)
                    .await
                    .map_err(stored)?;
            }
        }
        for secret in &plan.adopt {
            self.store
                .grant_put(&Grant {
                    host_key: self.host_key.clone(),
                    secret: secret.clone(),
                    state: AuthGrantState::Granted,
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
    async fn rebind_failed(
        &self,
        mut binding: Binding,
        before: &[Grant],
        cause: ProviderError,
    ) -> ProviderError {
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
                                AuthGrantState::RevocationPending,
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
            binding.state = AuthBindingState::RebindFailed;
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
}
