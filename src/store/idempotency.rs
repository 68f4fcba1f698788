//! The `idempotency` table: claims, completions and the start-up reconciliation of spec §7.
//! Every statement here runs straight on the store's connection, outside the write queue; the
//! ledger's `KeyLock` actors make sure two requests under one key never interleave, so the rows
//! need no further locking.

use sqlx::Row;
use sqlx::SqliteConnection;

use super::StoreError;

/// Where a key stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    /// The effect is running (or was, when a daemon died).
    InProgress,
    /// The effect happened and is durable.
    Completed,
    /// The effect may or may not have happened; never runs again.
    OutcomeUnknown,
}

impl KeyState {
    fn as_str(self) -> &'static str {
        match self {
            KeyState::InProgress => "in_progress",
            KeyState::Completed => "completed",
            KeyState::OutcomeUnknown => "outcome_unknown",
        }
    }

    fn parse(s: &str) -> Result<KeyState, StoreError> {
        match s {
            "in_progress" => Ok(KeyState::InProgress),
            "completed" => Ok(KeyState::Completed),
            "outcome_unknown" => Ok(KeyState::OutcomeUnknown),
            other => Err(StoreError::Corrupt(format!("idempotency.state '{other}'"))),
        }
    }
}

/// Identifies a key: who, for which operation, which key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyId {
    /// `local` for the owner.
    pub principal: String,
    /// `session.spawn`.
    pub operation: String,
    /// The client's key, 1–200 characters.
    pub key: String,
}

/// A held key.
#[derive(Debug, Clone)]
pub struct KeyRow {
    /// SHA-256 of the canonical payload.
    pub payload_hash: String,
    /// Its state.
    pub state: KeyState,
    /// The effect's id.
    pub effect_ref: String,
    /// The stored result, once completed.
    pub result: Option<String>,
    /// The target (id, identity) the effect landed on, once completed by a live daemon; keys
    /// reconciled at start have none.
    pub effect_target: Option<(String, String)>,
}

/// The outcome of a claim attempt.
#[derive(Debug)]
pub enum Claim {
    /// The key is ours; run the effect.
    Claimed,
    /// The key was already held.
    Held(KeyRow),
}

pub(super) async fn get(
    db: &mut SqliteConnection,
    id: &KeyId,
) -> Result<Option<KeyRow>, StoreError> {
    let row = sqlx::query(
        "SELECT payload_hash, state, effect_ref, result, effect_target, effect_target_identity
         FROM idempotency
         WHERE principal = ? AND operation = ? AND key = ?",
    )
    .bind(&id.principal)
    .bind(&id.operation)
    .bind(&id.key)
    .fetch_optional(&mut *db)
    .await?;
    row.map(|r| {
        Ok(KeyRow {
            payload_hash: r.try_get("payload_hash")?,
            state: KeyState::parse(&r.try_get::<String, _>("state")?)?,
            effect_ref: r.try_get("effect_ref")?,
            result: r.try_get("result")?,
            effect_target: r
                .try_get::<Option<String>, _>("effect_target")?
                .zip(r.try_get::<Option<String>, _>("effect_target_identity")?),
        })
    })
    .transpose()
}

pub(super) async fn claim(
    db: &mut SqliteConnection,
    id: &KeyId,
    payload_hash: &str,
    effect_ref: &str,
    now: i64,
) -> Result<Claim, StoreError> {
    let inserted = sqlx::query(
        "INSERT OR IGNORE INTO idempotency
            (principal, operation, key, payload_hash, state, effect_ref, created_at, updated_at)
         VALUES (?, ?, ?, ?, 'in_progress', ?, ?, ?)",
    )
    .bind(&id.principal)
    .bind(&id.operation)
    .bind(&id.key)
    .bind(payload_hash)
    .bind(effect_ref)
    .bind(now)
    .bind(now)
    .execute(&mut *db)
    .await?
    .rows_affected();
    if inserted == 1 {
        return Ok(Claim::Claimed);
    }
    match get(db, id).await? {
        Some(row) => Ok(Claim::Held(row)),
        None => Err(StoreError::Corrupt("a held key vanished".into())),
    }
}

pub(super) async fn finish(
    db: &mut SqliteConnection,
    id: &KeyId,
    state: KeyState,
    result: Option<&str>,
    effect_target: Option<(&str, &str)>,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE idempotency SET state = ?, result = ?, effect_target = ?,
                effect_target_identity = ?, updated_at = ?
         WHERE principal = ? AND operation = ? AND key = ?",
    )
    .bind(state.as_str())
    .bind(result)
    .bind(effect_target.map(|t| t.0))
    .bind(effect_target.map(|t| t.1))
    .bind(now)
    .bind(&id.principal)
    .bind(&id.operation)
    .bind(&id.key)
    .execute(&mut *db)
    .await?;
    Ok(())
}

pub(super) async fn release(db: &mut SqliteConnection, id: &KeyId) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM idempotency WHERE principal = ? AND operation = ? AND key = ?")
        .bind(&id.principal)
        .bind(&id.operation)
        .bind(&id.key)
        .execute(&mut *db)
        .await?;
    Ok(())
}

/// Spec §7.5, before serving: claims left in progress by a dead daemon become
/// outcome_unknown; those whose session row exists are completed after all.
pub(super) async fn reconcile(
    db: &mut SqliteConnection,
    now: i64,
) -> Result<(u64, u64), StoreError> {
    let unknown = sqlx::query(
        "UPDATE idempotency SET state = 'outcome_unknown', updated_at = ? WHERE state = 'in_progress'",
    )
    .bind(now)
    .execute(&mut *db)
    .await?
    .rows_affected();
    let completed = sqlx::query(
        "UPDATE idempotency SET state = 'completed', updated_at = ?
         WHERE state = 'outcome_unknown' AND operation = 'session.spawn'
           AND effect_ref IN (SELECT session_id FROM fleet)",
    )
    .bind(now)
    .execute(&mut *db)
    .await?
    .rows_affected();
    Ok((unknown, completed))
}

/// Deletes completed keys last touched before `cutoff`; outcome_unknown keys stay.
pub(super) async fn sweep(db: &mut SqliteConnection, cutoff: i64) -> Result<u64, StoreError> {
    Ok(
        sqlx::query("DELETE FROM idempotency WHERE state = 'completed' AND updated_at < ?")
            .bind(cutoff)
            .execute(&mut *db)
            .await?
            .rows_affected(),
    )
}
