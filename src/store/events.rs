//! The `events` table: the trail of hook reports, read by `GET /v1/events/trail`.

use serde::Serialize;
use sqlx::sqlite::SqliteExecutor;
use sqlx::Row;
use sqlx::SqliteConnection;

use super::StoreError;

/// One trail row.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TrailEvent {
    /// Row id; cursors point after it.
    pub id: i64,
    /// RFC 3339 UTC time.
    pub ts: String,
    /// The atc session id.
    pub atc_id: String,
    /// The hook's name.
    pub event: String,
    /// Its message, if any.
    pub message: Option<String>,
    /// The agent's own session id, if reported.
    pub session_id: Option<String>,
    /// Normalized kind.
    pub kind: Option<String>,
    /// Extra detail (a turn's result).
    pub detail: Option<String>,
}

pub(super) async fn append<'e>(
    db: impl SqliteExecutor<'e>,
    e: &TrailEvent,
) -> Result<i64, StoreError> {
    let id = sqlx::query(
        "INSERT INTO events (ts, atc_id, event, message, session_id, kind, detail)
         VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&e.ts)
    .bind(&e.atc_id)
    .bind(&e.event)
    .bind(&e.message)
    .bind(&e.session_id)
    .bind(&e.kind)
    .bind(&e.detail)
    .execute(db)
    .await?
    .last_insert_rowid();
    Ok(id)
}

fn row(r: sqlx::sqlite::SqliteRow) -> Result<TrailEvent, StoreError> {
    Ok(TrailEvent {
        id: r.try_get("id")?,
        ts: r.try_get("ts")?,
        atc_id: r.try_get("atc_id")?,
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
) -> Result<Vec<TrailEvent>, StoreError> {
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
) -> Result<Vec<TrailEvent>, StoreError> {
    let mut rows: Vec<TrailEvent> = sqlx::query("SELECT * FROM events ORDER BY id DESC LIMIT ?")
        .bind(limit)
        .fetch_all(&mut *db)
        .await?
        .into_iter()
        .map(row)
        .collect::<Result<_, _>>()?;
    rows.reverse();
    Ok(rows)
}
