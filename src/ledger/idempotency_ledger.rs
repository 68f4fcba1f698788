//! `IdempotencyLedger`: hands out the `KeyLock` of each live key and sweeps old keys.
//!
//! A lock lives while requests hold it: [`Acquire`] counts a holder in, [`ReleaseKey`] (sent by
//! [`KeyGuard`] when the request ends, however it ends) counts it out, and the last one out
//! drops the lock. Completed keys older than the retention are deleted on the sweep interval;
//! outcome_unknown keys are kept for an operator.

use std::collections::HashMap;
use std::time::Duration;

use actix::prelude::*;

use super::key_lock::KeyLock;
use super::key_lock::SpawnRunner;
use crate::clock::now_ms;
use crate::store::{KeyId, StateStore};

/// Hold the lock of a key. Answers the lock's address.
#[derive(Message)]
#[rtype(result = "Addr<KeyLock>")]
pub struct Acquire(pub KeyId);

/// A request under this key ended.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ReleaseKey(pub KeyId);

/// Releases a key when dropped, so a client that disconnects mid-request still lets go.
pub struct KeyGuard {
    ledger: Addr<IdempotencyLedger>,
    key: Option<KeyId>,
}

impl KeyGuard {
    /// Guards `key` on `ledger`.
    pub fn new(ledger: Addr<IdempotencyLedger>, key: KeyId) -> KeyGuard {
        KeyGuard {
            ledger,
            key: Some(key),
        }
    }
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.ledger.do_send(ReleaseKey(key));
        }
    }
}

/// The ledger.
pub struct IdempotencyLedger {
    locks: HashMap<KeyId, (Addr<KeyLock>, usize)>,
    sessions: SpawnRunner,
    store: StateStore,
    retention: Duration,
    sweep_every: Duration,
}

impl IdempotencyLedger {
    /// A ledger over `store`, spawning through `sessions`.
    pub fn new(
        sessions: SpawnRunner,
        store: StateStore,
        retention: Duration,
        sweep_every: Duration,
    ) -> IdempotencyLedger {
        IdempotencyLedger {
            locks: HashMap::new(),
            sessions,
            store,
            retention,
            sweep_every,
        }
    }
}

/// Deletes completed keys older than `retention`; logs how many.
pub async fn sweep(store: &StateStore, retention: Duration) {
    let cutoff = now_ms() - retention.as_millis() as i64;
    match store.idempotency_sweep(cutoff).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(swept = n, "old completed idempotency keys deleted"),
        Err(e) => tracing::error!(error = %e, "idempotency sweep failed"),
    }
}

impl Actor for IdempotencyLedger {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_interval(self.sweep_every, |act, ctx| {
            let (store, retention) = (act.store.clone(), act.retention);
            ctx.spawn(async move { sweep(&store, retention).await }.into_actor(act));
        });
    }
}

impl Handler<Acquire> for IdempotencyLedger {
    type Result = MessageResult<Acquire>;

    fn handle(&mut self, msg: Acquire, _: &mut Self::Context) -> Self::Result {
        let (sessions, store) = (self.sessions.clone(), self.store.clone());
        let entry = self
            .locks
            .entry(msg.0)
            .or_insert_with(|| (KeyLock::new(sessions, store).start(), 0));
        entry.1 += 1;
        MessageResult(entry.0.clone())
    }
}

impl Handler<ReleaseKey> for IdempotencyLedger {
    type Result = ();

    fn handle(&mut self, msg: ReleaseKey, _: &mut Self::Context) {
        if let Some(entry) = self.locks.get_mut(&msg.0) {
            entry.1 = entry.1.saturating_sub(1);
            if entry.1 == 0 {
                // Dropping the last address stops the lock once its mailbox is empty.
                self.locks.remove(&msg.0);
            }
        }
    }
}
