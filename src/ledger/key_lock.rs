//! `KeyLock`: one per live (principal, operation, key). It runs the requests under its key
//! one at a time (each handler is an `AtomicResponse`, so the next request waits until the
//! previous one has claimed, spawned, settled and completed), which is what makes two
//! concurrent retries start exactly one session.

use actix::prelude::*;
use atc_protocol::{Descriptor, SessionId};

use crate::clock::now_ms;
use crate::providers::refusal::TargetError;
use crate::sessions::messages::{Lookup, Spawn};
use crate::sessions::session_error::SessionError;
use crate::store::{Claim, KeyId, KeyRow, KeyState, StateStore};

/// Run a keyed spawn. Sent by the spawn route through the key's lock.
#[derive(Message)]
#[rtype(result = "Result<KeyedAnswer, LedgerError>")]
pub struct RunSpawn {
    /// The key.
    pub key: KeyId,
    /// SHA-256 of the canonical payload.
    pub payload_hash: String,
    /// Answer only from the ledger; never run the effect.
    pub replay_only: bool,
    /// Why a fresh spawn may not run (`Refused`: the target refusal chain said no; `Spawn`:
    /// its parent is not there); a held key still answers from the ledger.
    pub refusal: Option<LedgerError>,
    /// The spawn to run (its `id` is minted here).
    pub spawn: Spawn,
}

/// What a keyed request answers.
#[derive(Debug)]
pub struct KeyedAnswer {
    /// The session: its current descriptor on a replay (the one the key's effect answered,
    /// when the session is gone), else the new one.
    pub session: Descriptor,
    /// Whether this answer replays an earlier effect.
    pub replayed: bool,
}

/// Where keyed spawns run, and where a replay looks its session up: the session manager,
/// known to the ledger only as the two messages it takes.
#[derive(Clone)]
pub struct SpawnRunner {
    /// Runs a spawn.
    pub spawn: Recipient<Spawn>,
    /// Finds a session by id.
    pub lookup: Recipient<Lookup>,
}

/// Serializes the requests of one key.
pub struct KeyLock {
    sessions: SpawnRunner,
    store: StateStore,
}

impl KeyLock {
    /// A lock for one key.
    pub fn new(sessions: SpawnRunner, store: StateStore) -> KeyLock {
        KeyLock { sessions, store }
    }
}

impl Actor for KeyLock {
    type Context = Context<Self>;
}

/// A keyed request the ledger answers with a refusal of its own (spec §7.4), or the refusal
/// or failure of the spawn it ran.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The key's earlier effect may or may not stand.
    #[error(
        "an earlier request under this key may or may not have spawned its session; check \
         data.effectRef (GET /v1/sessions/{{id}}) and retry with a new key if it is not there"
    )]
    OutcomeUnknown {
        /// The session id the earlier request minted.
        effect_ref: String,
    },
    /// The key was used for another payload.
    #[error("this idempotency key was used for a different request; use a new key")]
    Conflict,
    /// The key's session is neither listed nor recorded in the ledger row.
    #[error(
        "the session this key spawned is not listed; restore the fleet (POST /v1/fleet/restore)"
    )]
    SessionNotListed {
        /// The session id the key spawned.
        effect_ref: String,
    },
    /// A replay-only request for a key the ledger does not hold.
    #[error(
        "this daemon holds no such idempotency key (never used, or swept after 24 h); send \
         the request without Idempotency-Replay-Only"
    )]
    KeyUnknown,
    /// A fresh spawn the refusal chain refused (a held key answers from the ledger instead).
    #[error(transparent)]
    Refused(TargetError),
    /// The spawn itself was refused or failed; nothing of it stands.
    #[error(transparent)]
    Spawn(SessionError),
    /// A ledger step failed; the log has the cause.
    #[error("internal error; the daemon log has details under this request id")]
    Internal,
}

/// Which of the ledger's answers (spec §7.4) a keyed request got, for the metrics; `None` for
/// an answer that is none of them (a refusal or failure of the spawn itself, an unknown key
/// on a replay-only request, a key whose session is not listed).
pub fn answer_kind(
    answer: &Result<KeyedAnswer, LedgerError>,
) -> Option<crate::metrics::LedgerAnswer> {
    use crate::metrics::LedgerAnswer as A;
    match answer {
        Ok(KeyedAnswer { replayed: true, .. }) => Some(A::Replayed),
        Ok(KeyedAnswer {
            replayed: false, ..
        }) => Some(A::Created),
        Err(LedgerError::Conflict) => Some(A::Conflict),
        Err(LedgerError::OutcomeUnknown { .. }) => Some(A::OutcomeUnknown),
        Err(_) => None,
    }
}

fn internal(step: &str, key: &KeyId, e: impl std::fmt::Display) -> LedgerError {
    // Never the payload: operation, key and step are enough to find the row.
    tracing::error!(operation = %key.operation, key = %key.key, step, error = %e, "ledger step failed");
    LedgerError::Internal
}

fn outcome_unknown(effect_ref: &str) -> LedgerError {
    LedgerError::OutcomeUnknown {
        effect_ref: effect_ref.to_string(),
    }
}

/// Answers a request for a key that is already held (spec §7.4 step 3).
async fn answer_held(
    lookup: &Recipient<Lookup>,
    row: KeyRow,
    payload_hash: &str,
) -> Result<KeyedAnswer, LedgerError> {
    if row.payload_hash != payload_hash {
        return Err(LedgerError::Conflict);
    }
    if row.state != KeyState::Completed {
        return Err(outcome_unknown(&row.effect_ref));
    }
    if let Ok(Ok(found)) = lookup.send(Lookup::any(row.effect_ref.clone())).await {
        return Ok(KeyedAnswer {
            session: found.descriptor,
            replayed: true,
        });
    }
    if let Some(result) = row
        .result
        .as_deref()
        .and_then(|r| serde_json::from_str::<Descriptor>(r).ok())
    {
        return Ok(KeyedAnswer {
            session: result,
            replayed: true,
        });
    }
    Err(LedgerError::SessionNotListed {
        effect_ref: row.effect_ref,
    })
}

impl Handler<RunSpawn> for KeyLock {
    type Result = AtomicResponse<Self, Result<KeyedAnswer, LedgerError>>;

    fn handle(&mut self, msg: RunSpawn, _: &mut Self::Context) -> Self::Result {
        let (sessions, store) = (self.sessions.clone(), self.store.clone());
        AtomicResponse::new(Box::pin(
            async move {
                let RunSpawn {
                    key,
                    payload_hash,
                    replay_only,
                    refusal,
                    mut spawn,
                } = msg;
                if replay_only {
                    return match store.idempotency_get(&key).await {
                        Ok(Some(row)) => answer_held(&sessions.lookup, row, &payload_hash).await,
                        Ok(None) => Err(LedgerError::KeyUnknown),
                        Err(e) => Err(internal("lookup", &key, e)),
                    };
                }
                if let Some(refusal) = refusal {
                    return match store.idempotency_get(&key).await {
                        Ok(Some(row)) => answer_held(&sessions.lookup, row, &payload_hash).await,
                        Ok(None) => Err(refusal),
                        Err(e) => Err(internal("lookup", &key, e)),
                    };
                }
                let session_id = SessionId::new();
                let effect_ref = session_id.to_string();
                match store
                    .idempotency_claim(&key, &payload_hash, &effect_ref, now_ms())
                    .await
                {
                    Ok(Claim::Claimed) => {}
                    Ok(Claim::Held(row)) => return answer_held(&sessions.lookup, row, &payload_hash).await,
                    Err(e) => return Err(internal("claim", &key, e)),
                }
                spawn.id = Some(session_id);
                let outcome = match sessions.spawn.send(spawn).await {
                    Ok(outcome) => outcome,
                    Err(e) => return Err(internal("spawn", &key, e)),
                };
                let spawned = match outcome {
                    Ok(descriptor) => descriptor,
                    // The effect may stand (an undo failed): the key must never run again.
                    Err(err) if err.effect_remains() => {
                        tracing::warn!(key = %key.key, effect = %effect_ref,
                            "keyed spawn failed leaving its effect standing; key kept as outcome_unknown");
                        if let Err(e) = store
                            .idempotency_finish(&key, KeyState::OutcomeUnknown, None, None, now_ms())
                            .await
                        {
                            internal("mark outcome_unknown", &key, e);
                        }
                        return Err(outcome_unknown(&effect_ref));
                    }
                    // Nothing started: drop the claim so a retry runs fresh.
                    Err(err) => {
                        if let Err(e) = store.idempotency_release(&key).await {
                            internal("release", &key, e);
                        }
                        return Err(LedgerError::Spawn(err));
                    }
                };
                // Settle: the session's row must be durable before the key says completed.
                // A descriptor always serializes; without the text a replay after a forget
                // answers session_not_listed rather than a wrong descriptor.
                let result = serde_json::to_string(&spawned).ok();
                let settled = match store.flush().await {
                    Ok(()) => {
                        store
                            .idempotency_finish(
                                &key,
                                KeyState::Completed,
                                result.as_deref(),
                                // The effect's target, so a later replay can be checked against
                                // the target the session actually landed on (spec §7.4).
                                Some((&spawned.locator.target_id, &spawned.target_identity)),
                                now_ms(),
                            )
                            .await
                    }
                    Err(e) => Err(e),
                };
                if let Err(e) = settled {
                    internal("settle", &key, e);
                    // The session may stand; the key must never run again.
                    if let Err(e) = store
                        .idempotency_finish(&key, KeyState::OutcomeUnknown, None, None, now_ms())
                        .await
                    {
                        // The claim stays in progress until start-up reconciliation settles it.
                        tracing::error!(operation = %key.operation, key = %key.key, error = %e,
                            "could not mark the key outcome_unknown");
                    }
                    return Err(outcome_unknown(&effect_ref));
                }
                Ok(KeyedAnswer {
                    session: spawned,
                    replayed: false,
                })
            }
            .into_actor(self),
        ))
    }
}
