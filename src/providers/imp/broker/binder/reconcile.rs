//! Start-up reconciliation of one host's binding (spec §6.3, "startup reconcile"): what a
//! daemon that died mid-change left is settled before the next one serves. What to do is
//! [`crate::providers::imp::broker::binding::reconcile_action`]; this is doing it, and counting what was done.

use super::{stored, HostContext};
use crate::clock::now_ms;
use crate::providers::imp::broker::binding::{Binding, ReconcileAction};
use crate::providers::imp::host_error::HostError;
use crate::providers::ProviderError;
use atc_protocol::responses::AuthBindingState;

/// What start-up reconciliation did with one host's binding.
#[derive(Debug)]
pub enum Reconciled {
    /// The host holds no binding record.
    NoRecord,
    /// Left as it was, in this state: nothing was cut off, or a listed session owns the
    /// unfinished create.
    Kept(AuthBindingState),
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
        state: AuthBindingState,
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
    pub fn record(&mut self, binding: &Binding, outcome: &Result<Reconciled, ProviderError>) {
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

impl HostContext {
    /// Start-up reconciliation of the host's binding (spec §6.3), before the daemon serves:
    /// a rebind left in flight fails, with the grants it added removed; an unfinished create
    /// (`provisioning`, `rollback_pending`) whose host no listed session uses is taken back;
    /// anything else is left. An impd that cannot be reached leaves the binding as it was.
    pub async fn reconcile(&self, has_listed_session: bool) -> Result<Reconciled, ProviderError> {
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
    async fn fail_rebind_in_flight(
        &self,
        mut binding: Binding,
    ) -> Result<Reconciled, ProviderError> {
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
    async fn take_back_unfinished(&self, binding: Binding) -> Result<Reconciled, ProviderError> {
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
            Ok(Reconciled::Kept(AuthBindingState::Ready)),
            Ok(Reconciled::RebindFailed {
                revision: 1,
                removed: vec!["a".into()],
            }),
            Ok(Reconciled::TakenBack {
                imp: ImpTakenBack::Destroyed,
            }),
            Ok(Reconciled::RollbackPending),
            Ok(Reconciled::Unreachable {
                state: AuthBindingState::Provisioning,
                cause: HostError::LeaseGone,
            }),
            Err(ProviderError::Internal),
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
