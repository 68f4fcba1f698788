//! Which provider serves each target. Built once at start from the configured targets: every
//! `local-pty` target shares the one local provider, and each usable target of another kind
//! gets a provider of its own from its kind in [`KINDS`] (an `imp` target: its own impd, token
//! and host leases). A target without an entry here is one this daemon cannot serve; the
//! refusal chain answers `target_unavailable` for it.
//!
//! Adding a provider is a folder beside `local/` and `imp/`, and a line in [`KINDS`].

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::imp::bridge::Bridges;
use super::imp::broker::binding_store::SharedBindingStore;
use super::targets::{OptionCheck, Target, Targets};
use super::ExecutionProvider;
use crate::config::Timings;
use crate::metrics::Metrics;
use serde_json::{Map, Value};

/// What the daemon gives a provider kind to build a target's provider with.
pub struct BuildContext<'a> {
    /// This daemon's id (imp names and leases carry it).
    pub daemon_id: &'a str,
    /// The daemon's timings.
    pub timings: &'a Timings,
    /// The atc program hosts get as theirs (spec §5.3 step 4).
    pub atc_program: &'a Path,
    /// The session bridges of remote harnesses.
    pub bridges: &'a Arc<Bridges>,
    /// Where broker bindings are kept.
    pub bindings: &'a SharedBindingStore,
    /// The daemon's metrics.
    pub metrics: &'a Metrics,
}

/// A provider kind other than the local one: the name targets give it, what its targets'
/// options mean, and how it builds the provider of one of its targets (`None`: this target's
/// options leave it nothing to serve).
pub struct ProviderKind {
    /// The target's `provider`.
    pub name: &'static str,
    /// Checks a target's options (without `provider`) when the config is read.
    pub check_options: fn(&Map<String, Value>) -> OptionCheck,
    /// A target's identity from its options (without `provider`), spec §4.2.
    pub identity: fn(&Map<String, Value>) -> String,
    /// The environment variables a target's options name as holding its credential.
    pub credential_vars: fn(&Map<String, Value>) -> Vec<String>,
    /// Builds the provider of a target of this kind.
    pub build: fn(&Target, &BuildContext<'_>) -> Option<Arc<dyn ExecutionProvider>>,
}

/// Every provider kind besides `local-pty`, whose one provider every local target shares.
pub const KINDS: &[ProviderKind] = &[super::imp::KIND];

/// The provider of `target` from its kind in [`KINDS`], if this daemon has that kind.
pub fn build_remote(target: &Target, ctx: &BuildContext<'_>) -> Option<Arc<dyn ExecutionProvider>> {
    let kind = KINDS.iter().find(|k| k.name == target.provider)?;
    (kind.build)(target, ctx)
}

/// Providers by target id.
#[derive(Clone, Default)]
pub struct Providers {
    by_target: HashMap<String, Arc<dyn ExecutionProvider>>,
}

impl Providers {
    /// Gives each target its provider: `local` for `local-pty` targets, `remote(target)` for
    /// any other kind (`None`: this daemon has no provider for it). Targets the config marks
    /// as unusable get none.
    pub fn build(
        targets: &Targets,
        local: Arc<dyn ExecutionProvider>,
        remote: impl Fn(&Target) -> Option<Arc<dyn ExecutionProvider>>,
    ) -> Providers {
        let mut by_target = HashMap::new();
        for t in targets.list() {
            if targets.has_problem(&t.id) || t.unavailable.is_some() {
                continue;
            }
            let provider = if t.provider == local.kind() {
                Some(local.clone())
            } else {
                remote(t)
            };
            if let Some(p) = provider {
                by_target.insert(t.id.clone(), p);
            }
        }
        Providers { by_target }
    }

    /// The provider of target `id`.
    pub fn get(&self, id: &str) -> Option<&Arc<dyn ExecutionProvider>> {
        self.by_target.get(id)
    }

    /// Every distinct provider, once each (for shutdown).
    pub fn distinct(&self) -> Vec<Arc<dyn ExecutionProvider>> {
        let mut out: Vec<Arc<dyn ExecutionProvider>> = Vec::new();
        for p in self.by_target.values() {
            if !out.iter().any(|q| Arc::ptr_eq(q, p)) {
                out.push(p.clone());
            }
        }
        out
    }
}
