//! The `events` table: the trail of hook reports, read by `GET /v1/events/trail`.
//!
//! The trail is kept under a retention rule ([`TrailKeep`]), since its rows come from inside
//! sessions: each append deletes what its session has beyond its share, every
//! [`PRUNE_EVERY`]th append (and the daemon's hourly sweep) what the trail has beyond its
//! whole, and the sweep also what is older than its age. Forgetting a session deletes its
//! rows. Cursors point at row ids, which only grow, so a deleted row never moves a cursor.

use sqlx::sqlite::SqliteExecutor;
use sqlx::Row;
use sqlx::SqliteConnection;

use super::StoreError;

// One trail row is the answer's own type: the table holds exactly what a client reads.
use atc_protocol::responses::TrailEntry;
use atc_protocol::SessionId;

/// How much of the trail is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrailKeep {
    /// Rows kept per session.
    pub per_session: u32,
    /// Rows kept in all.
    pub rows: u32,
}

/// Appends between two prunes of the whole trail down to [`TrailKeep::rows`]; a prune walks
/// the rows it keeps, so it is not made on every append.
pub const PRUNE_EVERY: i64 = 1024;

/// Appends `e`, then deletes its session's rows beyond `keep.per_session` and, on every
/// [`PRUNE_EVERY`]th row, the trail's beyond `keep.rows`. Answers the new row's id.
pub(super) async fn append(
    db: &mut SqliteConnection,
    e: &TrailEntry,
    keep: TrailKeep,
) -> Result<i64, StoreError> {
    let id = sqlx::query(
        "INSERT INTO events (ts, atc_id, event, message, session_id, kind, detail)
         VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&e.ts)
    .bind(e.atc_id.to_string())
    .bind(&e.event)
    .bind(&e.message)
    .bind(&e.session_id)
    .bind(&e.kind)
    .bind(&e.detail)
    .execute(&mut *db)
    .await?
    .last_insert_rowid();
    // The newest `per_session` rows of the session stay; the one after them and every older
    // one go (the index on (atc_id, id) makes this a walk of `per_session` entries).
    sqlx::query(
        "DELETE FROM events WHERE atc_id = ?1 AND id <= (
             SELECT id FROM events WHERE atc_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)",
    )
    .bind(e.atc_id.to_string())
    .bind(keep.per_session)
    .execute(&mut *db)
    .await?;
    if id % PRUNE_EVERY == 0 {
        keep_newest(db, keep.rows).await?;
    }
    Ok(id)
}

/// Deletes every row but the newest `rows`; answers how many went.
pub(super) async fn keep_newest(db: impl SqliteExecutor<'_>, rows: u32) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "DELETE FROM events WHERE id <= (SELECT id FROM events ORDER BY id DESC LIMIT 1 OFFSET ?)",
    )
    .bind(rows)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Deletes the rows stamped before `cutoff` (RFC 3339 UTC, as rows are stamped, so the text
/// order is the time order); answers how many went.
pub(super) async fn drop_before(
    db: impl SqliteExecutor<'_>,
    cutoff: &str,
) -> Result<u64, StoreError> {
    let done = sqlx::query("DELETE FROM events WHERE ts < ?")
        .bind(cutoff)
        .execute(db)
        .await?;
    Ok(done.rows_affected())
}

/// Deletes every row of session `atc_id` (it is being forgotten).
pub(super) async fn forget(
    db: impl SqliteExecutor<'_>,
    atc_id: SessionId,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM events WHERE atc_id = ?")
        .bind(atc_id.to_string())
        .execute(db)
        .await?;
    Ok(())
}

fn row(r: sqlx::sqlite::SqliteRow) -> Result<TrailEntry, StoreError> {
    let atc_id: String = r.try_get("atc_id")?;
    let atc_id = atc_id
        .parse::<SessionId>()
        .map_err(|e| StoreError::Corrupt(format!("events.atc_id: {e}")))?;
    Ok(TrailEntry {
        id: r.try_get("id")?,
        ts: r.try_get("ts")?,
        atc_id,
        event: r.try_get("event")?,
        message: r.try_get("message")?,
        session_id: r.try_get("session_id")?,
        kind: r.try_get("kind")?,
        detail: r.try_get("detail")?,
    })
}

/// Up to `limit` rows after `after`, oldest first.
pub(super) async fn after(
    db: &mut SqliteConnection,
    after: i64,
    limit: u32,
) -> Result<Vec<TrailEntry>, StoreError> {
    sqlx::query("SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?")
        .bind(after)
        .bind(limit)
        .fetch_all(&mut *db)
        .await?
        .into_iter()
        .map(row)
        .collect()
}

/// The newest `limit` rows, oldest first.
pub(super) async fn latest(
    db: &mut SqliteConnection,
    limit: u32,
) -> Result<Vec<TrailEntry>, StoreError> {
    let mut rows: Vec<TrailEntry> = sqlx::query("SELECT * FROM events ORDER BY id DESC LIMIT ?")
        .bind(limit)
        .fetch_all(&mut *db)
        .await?
        .into_iter()
        .map(row)
        .collect::<Result<_, _>>()?;
    rows.reverse();
    Ok(rows)
}
