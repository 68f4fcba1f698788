//! Start-up reconciliation of broker bindings (spec §6.3, "startup reconcile"), run by the
//! daemon before it serves or restores a session. It reads every binding once and hands
//! each target's bindings to that target's provider, whose host binding actors settle them;
//! a binding whose target this daemon does not serve stays as it is. What each binding
//! becomes is the binder's (`HostContext::reconcile`); this file only routes and sums up.

use std::collections::{BTreeMap, BTreeSet};

use super::binder::ReconcileSummary;
use super::binding::Binding;
use super::binding_store::BindingStore;
use crate::providers::registry::Providers;

/// Settles every binding the last daemon left mid-change; `listed_hosts` are the host keys
/// listed sessions use. Logs one line per binding acted on and a summary. A store that
/// cannot list the bindings leaves them all as they are (their hosts stay blocked until a
/// later start reads them).
pub async fn reconcile_bindings(
    store: &dyn BindingStore,
    providers: &Providers,
    listed_hosts: &BTreeSet<String>,
) -> ReconcileSummary {
    let bindings = match store.bindings_all().await {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(error = %e,
                "start-up: the broker bindings could not be read; none was reconciled");
            return ReconcileSummary::default();
        }
    };
    if bindings.is_empty() {
        return ReconcileSummary::default();
    }
    let mut by_target: BTreeMap<String, Vec<Binding>> = BTreeMap::new();
    for b in bindings {
        by_target.entry(b.target.clone()).or_default().push(b);
    }
    let mut summary = ReconcileSummary::default();
    for (target, bindings) in by_target {
        let Some(provider) = providers.get(&target) else {
            for b in &bindings {
                tracing::warn!(%target, host = %b.host_key, imp = %b.imp_name,
                    state = b.state.as_str(),
                    "start-up: the binding's target is not served by this daemon; it stays as it is");
            }
            summary.kept += u32::try_from(bindings.len()).unwrap_or(u32::MAX);
            continue;
        };
        summary += match provider.hosts() {
            Some(hosts) => hosts.reconcile_bindings(bindings, listed_hosts).await,
            // A provider without hosts keeps no bindings and leaves them as they are.
            None => ReconcileSummary {
                kept: u32::try_from(bindings.len()).unwrap_or(u32::MAX),
                ..Default::default()
            },
        };
    }
    tracing::info!(
        bindings = summary.total(),
        kept = summary.kept,
        rebinds_failed = summary.rebinds_failed,
        taken_back = summary.taken_back,
        rollback_pending = summary.rollback_pending,
        unreachable = summary.unreachable,
        failed = summary.failed,
        "start-up: broker bindings reconciled"
    );
    summary
}
