//! The store's one SQLite connection, shared by the write queue and every direct read or write.
//!
//! The spec asks for a single connection (§1.1). It used to be a sqlx pool of one, and a pool
//! pings each connection given back to it (`return_to_pool` in sqlx-core 0.8.6), from a task it
//! spawns: one more round trip to the connection's worker thread on every use, whatever the use
//! was. A spawn's row is a lone write, so half the worker's wake-ups in a spawn storm were
//! those pings (docs/performance-log.md, "The store's one connection"). A fair mutex gives what
//! the pool gave, one user at a time in the order they asked, without them.

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions as _, Connection as _, SqliteConnection};
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};

use super::StoreError;

/// The connection, until the store is closed.
pub(super) struct Db {
    conn: Mutex<Option<SqliteConnection>>,
}

/// The connection, held: nobody else uses it until this is dropped.
pub(super) type Held<'a> = MappedMutexGuard<'a, SqliteConnection>;

impl Db {
    /// Opens the connection.
    pub(super) async fn open(options: &SqliteConnectOptions) -> Result<Db, StoreError> {
        Ok(Db {
            conn: Mutex::new(Some(options.connect().await?)),
        })
    }

    /// Waits for the connection (tokio's mutex is fair, so in the order asked) and holds it;
    /// `Closed` once the store has closed it.
    pub(super) async fn hold(&self) -> Result<Held<'_>, StoreError> {
        MutexGuard::try_map(self.conn.lock().await, Option::as_mut).map_err(|_| StoreError::Closed)
    }

    /// Closes the connection once its current user is done; later holds answer `Closed`.
    pub(super) async fn close(&self) {
        let taken = self.conn.lock().await.take();
        if let Some(conn) = taken {
            if let Err(e) = conn.close().await {
                // Every write was answered before this; what is left to lose is SQLite's
                // own tidying (the WAL checkpoint), which the next open redoes.
                tracing::warn!(error = %e, "closing the store's connection failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    async fn open() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteConnectOptions::from_str("sqlite://")
            .unwrap()
            .filename(dir.path().join("t.db"))
            .create_if_missing(true);
        let db = Db::open(&options).await.unwrap();
        (dir, db)
    }

    /// One holder at a time: a second waits until the first lets go, then gets the same
    /// connection (a temporary table lives on one connection only).
    #[tokio::test]
    async fn holders_take_turns_on_one_connection() {
        let (_dir, db) = open().await;
        let db = std::sync::Arc::new(db);
        let mut first = db.hold().await.unwrap();
        sqlx::query("CREATE TEMP TABLE mine (x INTEGER)")
            .execute(&mut *first)
            .await
            .unwrap();
        let second = tokio::spawn({
            let db = db.clone();
            async move {
                let mut held = db.hold().await.unwrap();
                sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM mine")
                    .fetch_one(&mut *held)
                    .await
                    .unwrap()
            }
        });
        sqlx::query("INSERT INTO mine VALUES (1)")
            .execute(&mut *first)
            .await
            .unwrap();
        drop(first);
        assert_eq!(
            second.await.unwrap(),
            1,
            "the same connection, after the first"
        );
    }

    #[tokio::test]
    async fn a_closed_connection_is_held_by_nobody() {
        let (_dir, db) = open().await;
        db.close().await;
        assert!(matches!(db.hold().await, Err(StoreError::Closed)));
        // Closing twice is no error.
        db.close().await;
    }
}
