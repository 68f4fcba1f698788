//! The trail's sweep: at start and then every `timings.trail_sweep` (an hour), the manager
//! deletes the trail rows older than `limits.trailMaxAgeDays` and those beyond
//! `limits.trailRows`. Appends keep each session within its own share as they come
//! (`store::events`); the sweep is what ages rows out of a trail nobody appends to.

use crate::config::Limits;
use crate::store::{StateStore, TrailKeep};

/// What the trail keeps under `limits`.
pub fn keep(limits: &Limits) -> TrailKeep {
    TrailKeep {
        per_session: limits.trail_per_session,
        rows: limits.trail_rows,
    }
}

/// Deletes what `limits` no longer keeps, as of `now_ms`; logs how many rows went.
pub async fn sweep(store: StateStore, limits: Limits, now_ms: i64) {
    let max_age_ms = i64::from(limits.trail_max_age_days) * 86_400_000;
    let cutoff = crate::clock::rfc3339_at(now_ms.saturating_sub(max_age_ms));
    match store.sweep_trail(keep(&limits), &cutoff).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(deleted = n, "old trail rows deleted"),
        Err(e) => tracing::error!(error = %e, "trail sweep failed"),
    }
}
