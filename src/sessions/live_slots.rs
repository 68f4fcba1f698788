//! The cap on sessions with a running process (`limits.maxSessions`, see
//! `daemon::session_cap`): one [`LiveSlot`] per running harness, local or remote.
//!
//! A start takes its slot before anything is launched (a spawn on the manager's thread, before
//! its launch goes to a blocking thread; a revive or a restart's re-attach in its session),
//! and the slot goes back when it is dropped: when the process's exit is recorded, or with a
//! start that failed, or with the session actor. So the count cannot drift from the harnesses
//! that run, and spawns in flight are counted before they run, so a storm of them cannot get
//! past the cap between a check and a start.
//!
//! A remote (imp) session counts as well, though its PTY is on its host: it holds a
//! descriptor here (its connection to impd), a screen model and an output ring, and one cap
//! is what an owner can reason about. The count is a counter shared by the manager and every
//! session (all on the sessions' thread); like a semaphore's permits, it holds no domain state.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::session_error::SessionError;

/// The slots of one daemon.
#[derive(Debug, Clone)]
pub struct LiveSlots {
    taken: Arc<AtomicUsize>,
    cap: usize,
}

/// One running harness's place under the cap; dropping it gives the place back.
#[derive(Debug)]
pub struct LiveSlot {
    taken: Arc<AtomicUsize>,
}

impl LiveSlots {
    /// `cap` slots, none taken.
    pub fn new(cap: usize) -> LiveSlots {
        LiveSlots {
            taken: Arc::new(AtomicUsize::new(0)),
            cap,
        }
    }

    /// A slot, or `CapReached` when all are taken.
    pub fn take(&self) -> Result<LiveSlot, SessionError> {
        let cap = self.cap;
        self.taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < cap).then_some(n + 1)
            })
            .map(|_| LiveSlot {
                taken: self.taken.clone(),
            })
            .map_err(|live| SessionError::CapReached { cap, live })
    }

    /// Slots taken now.
    pub fn live(&self) -> usize {
        self.taken.load(Ordering::Acquire)
    }

    /// The cap.
    pub fn cap(&self) -> usize {
        self.cap
    }
}

impl Drop for LiveSlot {
    fn drop(&mut self) {
        self.taken.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_run_out_at_the_cap_and_come_back_when_dropped() {
        let slots = LiveSlots::new(2);
        let a = slots.take().unwrap();
        let b = slots.take().unwrap();
        assert!(matches!(
            slots.take().unwrap_err(),
            SessionError::CapReached { cap: 2, live: 2 }
        ));
        drop(a);
        assert_eq!(slots.live(), 1);
        let c = slots.take().unwrap();
        assert_eq!(slots.live(), 2);
        drop((b, c));
        assert_eq!(slots.live(), 0);
    }
}
