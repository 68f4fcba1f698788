//! The sessions a phase created, and ending them (kill, then DELETE) when it is over.
//!
//! A phase records each id as soon as the daemon answers its spawn. A spawn whose answer never
//! arrived (the phase timed out mid-request) still created a session, so every bench session is
//! also named with the phase's prefix, and cleanup lists the daemon's sessions to find those too.
//! Cleanup has its own deadline and never fails the phase: it reports what it could not end.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use futures_util::StreamExt as _;
use serde::Serialize;
use tokio::time::Instant;

use super::api::{ApiError, DaemonApi, SessionId};
use super::phase::Deadline;
use super::rss::DaemonPid;
use super::stats::millis;

/// How ending a phase's sessions went.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CleanupReport {
    /// Sessions found to end (recorded, or listed under the phase's prefix).
    pub sessions: u64,
    /// Sessions forgotten (DELETE answered, or the daemon said the session was already gone).
    pub forgotten: u64,
    /// Sessions whose kill or forget failed with a real error.
    pub failed: u64,
    /// The first such error, for the report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Whether the cleanup deadline passed before every session was handled.
    pub timed_out: bool,
    /// Wall time of the cleanup.
    pub elapsed_ms: f64,
    /// The daemon's RSS once its sessions were gone, to see whether memory came back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_after_kib: Option<u64>,
}

/// The sessions one phase created. Lives outside the phase's bounded future, so a phase that is
/// dropped at its deadline leaves its ids behind for cleanup.
pub struct SessionLedger {
    /// `bench-<run>-<phase>-`; every session of the phase is named with it.
    prefix: String,
    ids: RefCell<Vec<SessionId>>,
    next: Cell<u64>,
}

impl SessionLedger {
    /// A ledger whose sessions are named `<prefix><n>`.
    pub fn new(prefix: String) -> SessionLedger {
        SessionLedger {
            prefix,
            ids: RefCell::new(Vec::new()),
            next: Cell::new(0),
        }
    }

    /// A fresh name for the next session of this phase.
    pub fn next_name(&self) -> String {
        let n = self.next.get();
        self.next.set(n + 1);
        format!("{}{n}", self.prefix)
    }

    /// Records a session the daemon confirmed.
    pub fn record(&self, id: SessionId) {
        self.ids.borrow_mut().push(id);
    }

    /// The sessions recorded so far.
    pub fn ids(&self) -> Vec<SessionId> {
        self.ids.borrow().clone()
    }

    /// Kills and forgets every session of the phase, `concurrency` at a time, before `limit`
    /// passes; then reads the daemon's RSS.
    pub async fn clean_up(
        &self,
        api: &DaemonApi,
        concurrency: usize,
        limit: Duration,
        pid: Option<DaemonPid>,
    ) -> CleanupReport {
        let started = Instant::now();
        let deadline = Deadline::after(limit);
        let mut ids: Vec<SessionId> = self.ids.borrow().clone();
        // A failed listing only means sessions with lost answers stay behind; the recorded ones
        // are still ended, and the count below shows what was found.
        if let Ok(Ok(listed)) = deadline.within("listing sessions", api.list()).await {
            for s in listed {
                if s.name.starts_with(&self.prefix) && !ids.contains(&s.id) {
                    ids.push(s.id);
                }
            }
        }
        let forgotten = Cell::new(0u64);
        let failed = Cell::new(0u64);
        let first_error: RefCell<Option<String>> = RefCell::new(None);
        let total = ids.len() as u64;
        let end_all = futures_util::stream::iter(ids)
            .map(|id| end_session(api, id))
            .buffer_unordered(concurrency.max(1))
            .for_each(|res| {
                match res {
                    Ok(()) => forgotten.set(forgotten.get() + 1),
                    Err(e) => {
                        failed.set(failed.get() + 1);
                        first_error
                            .borrow_mut()
                            .get_or_insert_with(|| e.to_string());
                    }
                }
                async {}
            });
        let timed_out = deadline.within("ending sessions", end_all).await.is_err();
        CleanupReport {
            sessions: total,
            forgotten: forgotten.get(),
            failed: failed.get(),
            first_error: first_error.into_inner(),
            timed_out,
            elapsed_ms: millis(started.elapsed()),
            rss_after_kib: pid.and_then(DaemonPid::rss_kib),
        }
    }
}

/// Kill then forget one session; "already gone" answers count as done.
async fn end_session(api: &DaemonApi, id: SessionId) -> Result<(), ApiError> {
    match api.kill(&id).await {
        Ok(()) => {}
        Err(e) if super::api::is_gone(&e) => {}
        Err(e) => return Err(e),
    }
    match api.forget(&id).await {
        Ok(()) => Ok(()),
        Err(e) if super::api::is_gone(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_prefix_and_count_up() {
        let l = SessionLedger::new("bench-ab12-spawn-".into());
        assert_eq!(l.next_name(), "bench-ab12-spawn-0");
        assert_eq!(l.next_name(), "bench-ab12-spawn-1");
    }
}
