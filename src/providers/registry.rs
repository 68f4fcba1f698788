//! Which provider serves each target. Built once at start from the configured targets: every
//! `local-pty` target shares the one local provider, and each usable `imp` target gets a
//! provider of its own (its own impd, token and host leases). A target without an entry here
//! is one this daemon cannot serve; the refusal chain answers `target_unavailable` for it.

use std::collections::HashMap;
use std::sync::Arc;

use super::ExecutionProvider;
use crate::config::targets::{Target, Targets};

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
