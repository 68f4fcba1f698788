//! `StateStore`: the daemon's SQLite file, through sqlx. All SQL lives here.
//!
//! The store has one connection (spec §1.1: single connection, all writes serialized), which
//! its users take turns on ([`connection`]). Reads go straight to it. Writes go through one
//! queue drained by a single task ([`writer`]), so writes issued by one actor land in the
//! order it issued them. A caller that must know its write is durable (kill, forget) awaits
//! the returned receiver; others let it run in the background and the writer logs failures.
//! The idempotency claims and the broker bindings are written straight on the connection
//! instead and are committed when their call returns, because each is recorded before the
//! effect it guards is taken; their own per-key and per-host actors keep those writes in
//! order.

mod bindings;
mod connection;
mod events;
mod fleet;
pub mod idempotency;
mod workspaces;
mod writer;

use std::path::Path;
use std::str::FromStr;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use atc_protocol::responses::TrailEntry;
use atc_protocol::SessionId;
use connection::Db;
use writer::{Queued, WriteOp, Writer};

pub use events::TrailKeep;
pub use fleet::FleetRow;
pub use idempotency::{Claim, KeyId, KeyRow, KeyState};

/// Failures of the store. None reach a client as text: they map to `internal`.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// sqlx or SQLite failed.
    #[error("database error: {0}")]
    Sqlx(#[from] sqlx::Error),
    /// A migration failed to apply.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The writer task is gone (the store was closed).
    #[error("the store is closed")]
    Closed,
    /// A stored value did not parse.
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// A write named a row that is not there (a binding's state before its record, a grant
    /// before its binding).
    #[error("no {0}")]
    Missing(String),
    /// The database file could not be made private (created or narrowed to 0600).
    #[error("could not make the database file private: {0}")]
    Private(std::io::Error),
    /// The transaction that carried this write failed, so the write did not land.
    #[error("the write's transaction failed: {0}")]
    NotCommitted(String),
}

/// Handle to the store; cheap to clone, shared by the actors that persist things.
#[derive(Clone)]
pub struct StateStore {
    db: std::sync::Arc<Db>,
    /// The id of the newest trail row; long-polling readers wait on it.
    newest_event: std::sync::Arc<tokio::sync::watch::Sender<i64>>,
    writes: mpsc::UnboundedSender<Queued>,
}

/// Creates the database file 0600 if it is missing, and narrows it and its `-wal` and `-shm`
/// to 0600 if they exist. SQLite would create the file 0644 (less the umask), and it gives
/// the WAL files the database file's mode, so the one file made here decides all three; an
/// older state dir's files, made before this, are narrowed too. The umask is left alone: the
/// sessions' processes inherit it, and their files are the user's business.
fn make_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)?;
    let private = std::fs::Permissions::from_mode(0o600);
    std::fs::set_permissions(path, private.clone())?;
    for suffix in ["-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        match std::fs::set_permissions(std::path::PathBuf::from(name), private.clone()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

impl StateStore {
    /// Opens (creating if needed) the database at `path`, applies the embedded migrations and
    /// starts the writer task on the current runtime; its write times go to a set of metrics
    /// nobody reads (see [`StateStore::open_counted`]).
    pub async fn open(path: &Path) -> Result<StateStore, StoreError> {
        StateStore::open_counted(path, crate::metrics::Metrics::new()).await
    }

    /// [`StateStore::open`], timing each queued write into `metrics`.
    pub async fn open_counted(
        path: &Path,
        metrics: crate::metrics::Metrics,
    ) -> Result<StateStore, StoreError> {
        make_private(path).map_err(StoreError::Private)?;
        let options = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // WAL with NORMAL: a commit survives the daemon crashing (what a restart needs)
            // without an fsync per write, which would cap spawns at the disk's sync rate.
            // Only a power loss can take back the last few commits.
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(std::time::Duration::from_secs(5));
        let db = std::sync::Arc::new(Db::open(&options).await?);
        let newest: i64 = {
            let mut held = db.hold().await?;
            sqlx::migrate!("./migrations").run(&mut *held).await?;
            sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) FROM events")
                .fetch_one(&mut *held)
                .await?
        };
        let newest_event = std::sync::Arc::new(tokio::sync::watch::channel(newest).0);
        let (tx, rx) = mpsc::unbounded_channel();
        let writer = Writer {
            db: db.clone(),
            rx,
            newest_event: newest_event.clone(),
            metrics,
        };
        tokio::spawn(writer.run());
        Ok(StateStore {
            db,
            writes: tx,
            newest_event,
        })
    }

    fn enqueue(&self, op: WriteOp) -> oneshot::Receiver<Result<(), StoreError>> {
        let (tx, rx) = oneshot::channel();
        if let Err(mpsc::error::SendError((_, tx))) = self.writes.send((op, tx)) {
            // The writer is gone; answer the caller ourselves.
            let _ = tx.send(Err(StoreError::Closed));
        }
        rx
    }

    /// The daemon id, minted once as a UUID and stable forever after.
    pub async fn daemon_id(&self) -> Result<Uuid, StoreError> {
        if let Some(v) = self.pref("daemon_id").await? {
            return Uuid::parse_str(&v).map_err(|_| StoreError::Corrupt("prefs.daemon_id".into()));
        }
        let id = Uuid::new_v4();
        sqlx::query("INSERT OR IGNORE INTO prefs (key, value) VALUES ('daemon_id', ?)")
            .bind(id.to_string())
            .execute(&mut *self.db.hold().await?)
            .await?;
        // Read back: a concurrent first start could have won the insert.
        let v = self.pref("daemon_id").await?.unwrap_or_default();
        Uuid::parse_str(&v).map_err(|_| StoreError::Corrupt("prefs.daemon_id".into()))
    }

    /// One preference value.
    pub async fn pref(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar("SELECT value FROM prefs WHERE key = ?")
            .bind(key)
            .fetch_optional(&mut *self.db.hold().await?)
            .await?)
    }

    /// Queues a preference write.
    pub fn set_pref(&self, key: &str, value: &str) -> oneshot::Receiver<Result<(), StoreError>> {
        self.enqueue(WriteOp::SetPref {
            key: key.to_string(),
            value: value.to_string(),
        })
    }

    /// Queues a full write of one fleet row.
    pub fn upsert_session(&self, row: FleetRow) -> oneshot::Receiver<Result<(), StoreError>> {
        self.enqueue(WriteOp::UpsertSession(Box::new(row)))
    }

    /// Queues the update of one row's transcript path (the rest of the row is left alone).
    pub fn set_transcript_path(
        &self,
        id: SessionId,
        path: &str,
    ) -> oneshot::Receiver<Result<(), StoreError>> {
        self.enqueue(WriteOp::TranscriptPath {
            id,
            path: path.to_string(),
        })
    }

    /// Queues the update of one row's last turn result (the rest of the row is left alone).
    pub fn set_result(
        &self,
        id: SessionId,
        result: &str,
    ) -> oneshot::Receiver<Result<(), StoreError>> {
        self.enqueue(WriteOp::TurnResult {
            id,
            result: result.to_string(),
        })
    }

    /// Queues the deletion of one fleet row.
    pub fn delete_session(&self, id: SessionId) -> oneshot::Receiver<Result<(), StoreError>> {
        self.enqueue(WriteOp::DeleteSession(id))
    }

    /// Waits until every write queued so far has landed, so a read that follows sees them
    /// (and a caller that must know its earlier writes are durable can say so).
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.enqueue(WriteOp::Barrier)
            .await
            .map_err(|_| StoreError::Closed)?
    }

    /// Every fleet row, oldest first, including writes queued before this call.
    pub async fn load_fleet(&self) -> Result<Vec<FleetRow>, StoreError> {
        self.flush().await?;
        fleet::load_all(&mut *self.db.hold().await?).await
    }

    /// Recent spawn directories, most recent first, including writes queued before this call.
    /// A directory enters the history when a session's fleet row is first written there, by
    /// a trigger (`migrations/0006_spawn_history_from_fleet.sql`), with the session's
    /// creation time.
    pub async fn recent_dirs(&self, limit: u32) -> Result<Vec<String>, StoreError> {
        self.flush().await?;
        Ok(
            sqlx::query_scalar("SELECT cwd FROM spawn_history ORDER BY last_spawn DESC LIMIT ?")
                .bind(limit)
                .fetch_all(&mut *self.db.hold().await?)
                .await?,
        )
    }

    /// The most recent spawn directories with the target and identity each was last spawned
    /// on (`None` in rows older than targets), most recent first.
    pub async fn recent_dirs_placed(
        &self,
        limit: u32,
    ) -> Result<Vec<(String, Option<String>, Option<String>)>, StoreError> {
        self.flush().await?;
        Ok(sqlx::query_as(
            "SELECT cwd, target, target_identity FROM spawn_history \
             ORDER BY last_spawn DESC LIMIT ?",
        )
        .bind(limit)
        .fetch_all(&mut *self.db.hold().await?)
        .await?)
    }

    /// The key's row, if held.
    pub async fn idempotency_get(&self, id: &KeyId) -> Result<Option<KeyRow>, StoreError> {
        idempotency::get(&mut *self.db.hold().await?, id).await
    }

    /// Inserts an in-progress claim unless the key is held; answers which.
    pub async fn idempotency_claim(
        &self,
        id: &KeyId,
        payload_hash: &str,
        effect_ref: &str,
        now: i64,
    ) -> Result<Claim, StoreError> {
        idempotency::claim(
            &mut *self.db.hold().await?,
            id,
            payload_hash,
            effect_ref,
            now,
        )
        .await
    }

    /// Marks a claim completed (with its result and effect target) or outcome_unknown.
    pub async fn idempotency_finish(
        &self,
        id: &KeyId,
        state: KeyState,
        result: Option<&str>,
        effect_target: Option<(&str, &str)>,
        now: i64,
    ) -> Result<(), StoreError> {
        idempotency::finish(
            &mut *self.db.hold().await?,
            id,
            state,
            result,
            effect_target,
            now,
        )
        .await
    }

    /// Drops a claim whose effect failed cleanly, so a retry runs fresh.
    pub async fn idempotency_release(&self, id: &KeyId) -> Result<(), StoreError> {
        idempotency::release(&mut *self.db.hold().await?, id).await
    }

    /// Start-up reconciliation; answers (made outcome_unknown, then completed).
    pub async fn idempotency_reconcile(&self, now: i64) -> Result<(u64, u64), StoreError> {
        self.flush().await?;
        idempotency::reconcile(&mut *self.db.hold().await?, now).await
    }

    /// Deletes completed keys older than `cutoff`; answers how many.
    pub async fn idempotency_sweep(&self, cutoff: i64) -> Result<u64, StoreError> {
        idempotency::sweep(&mut *self.db.hold().await?, cutoff).await
    }

    /// Queues a trail row, to be kept as `keep` says (see [`events`]).
    pub fn append_event(
        &self,
        event: TrailEntry,
        keep: TrailKeep,
    ) -> oneshot::Receiver<Result<(), StoreError>> {
        self.enqueue(WriteOp::AppendEvent(Box::new(event), keep))
    }

    /// Deletes trail rows beyond the newest `keep.rows` and those stamped before `cutoff`
    /// (RFC 3339 UTC), after the writes queued before this call; answers how many went.
    pub async fn sweep_trail(&self, keep: TrailKeep, cutoff: &str) -> Result<u64, StoreError> {
        self.flush().await?;
        let mut held = self.db.hold().await?;
        let old = events::drop_before(&mut *held, cutoff).await?;
        Ok(old + events::keep_newest(&mut *held, keep.rows).await?)
    }

    /// Trail rows after `after` (at most `limit`), waiting up to `wait` for one to arrive when
    /// there are none yet.
    pub async fn trail_after(
        &self,
        after: i64,
        limit: u32,
        wait: std::time::Duration,
    ) -> Result<Vec<TrailEntry>, StoreError> {
        let mut newest = self.newest_event.subscribe();
        if *newest.borrow_and_update() <= after && !wait.is_zero() {
            // Either a newer row arrives or the wait runs out; both end in a read.
            let _ = tokio::time::timeout(wait, async {
                while *newest.borrow_and_update() <= after {
                    if newest.changed().await.is_err() {
                        break;
                    }
                }
            })
            .await;
        }
        self.flush().await?;
        events::after(&mut *self.db.hold().await?, after, limit).await
    }

    /// The newest `limit` trail rows, oldest first.
    pub async fn trail_latest(&self, limit: u32) -> Result<Vec<TrailEntry>, StoreError> {
        self.flush().await?;
        events::latest(&mut *self.db.hold().await?, limit).await
    }

    /// Writes everything queued, then closes the connection.
    pub async fn close(&self) -> Result<(), StoreError> {
        let done = self.enqueue(WriteOp::Close);
        done.await.map_err(|_| StoreError::Closed)?
    }

    /// Writes everything queued, then drains the queue from a task on `to`'s thread; answers
    /// once the move is made. Where that thread no longer runs, the writer stays where it is.
    ///
    /// The daemon moves it to the sessions' thread, whose actors make nearly every write: a
    /// write then crosses to sqlx's worker thread and back, and no longer also to the thread
    /// the store was opened on and back. That was two of the sixteen or so wake-ups a spawn and
    /// its cleanup cost (docs/performance-log.md, "Spawn stalls").
    pub fn move_writer(
        &self,
        to: &actix::ArbiterHandle,
    ) -> impl std::future::Future<Output = Result<(), StoreError>> + 'static {
        // Queued now, not when first polled, so it keeps its place among the writes.
        let done = self.enqueue(WriteOp::MoveWriter(to.clone()));
        async move { done.await.map_err(|_| StoreError::Closed)? }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: SessionId, name: &str) -> FleetRow {
        FleetRow {
            session_id: id,
            name: name.into(),
            named_by: "auto".into(),
            cwd: "/tmp".into(),
            pinned: false,
            last_attached: None,
            agent: "shell".into(),
            args: vec!["-i".into()],
            exited: false,
            exit_code: None,
            exit_signal: None,
            exit_reason: None,
            cols: 80,
            rows: 24,
            created_at: 1,
            target: Some("local".into()),
            target_identity: Some("local-pty:44136fa355b3678a".into()),
            agent_session_id: None,
            model: None,
            effort: None,
            transcript_path: None,
            result: None,
            remote_boot_id: None,
            remote_generation: None,
            remote_offset: None,
            leader_pid: None,
            leader_start_ticks: None,
            leader_boot_id: None,
            limit_memory_mib: None,
            limit_pids: None,
            limit_cpu_percent: None,
            parent_session_id: None,
            host_key: None,
        }
    }

    #[test]
    fn a_row_uses_its_host_only_once_a_process_ran_there() {
        let id = SessionId::new();
        let mut r = row(id, "s");
        assert_eq!(r.host_in_use(), None, "a spawn that never started");
        r.remote_boot_id = Some("boot-1".into());
        r.remote_generation = Some("gen-1".into());
        assert_eq!(r.host_in_use(), Some(id.to_string()));
        // A sub-session on its parent's host uses the parent's.
        let parent = SessionId::new();
        r.host_key = Some(parent);
        assert_eq!(r.host_in_use(), Some(parent.to_string()));
    }

    #[tokio::test]
    async fn rows_round_trip_and_writes_keep_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(&dir.path().join("atc.db")).await.unwrap();
        let id = SessionId::new();
        store.upsert_session(row(id, "first"));
        let mut second = row(id, "second");
        second.exited = true;
        second.exit_code = Some(3);
        second.exit_reason = Some("exited".into());
        store.upsert_session(second.clone()).await.unwrap().unwrap();
        let rows = store.load_fleet().await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].name, "second");
        assert_eq!(rows[0].exit_code, Some(3));
        assert_eq!(rows[0].args, vec!["-i".to_string()]);
        assert_eq!(rows[0].leader(), None);
        assert_eq!((rows[0].parent_session_id, rows[0].host_key), (None, None));
        let mut running = row(id, "running");
        running.leader_pid = Some(4242);
        running.leader_start_ticks = Some(987_654);
        running.leader_boot_id = Some("boot".into());
        store.upsert_session(running).await.unwrap().unwrap();
        let rows = store.load_fleet().await.unwrap();
        assert_eq!(
            rows[0].leader(),
            Some(crate::providers::local::group_leader::GroupLeader {
                pid: 4242,
                start_ticks: 987_654,
                boot_id: "boot".into()
            })
        );
        // The exit written clears it.
        store.upsert_session(second).await.unwrap().unwrap();
        assert_eq!(store.load_fleet().await.unwrap()[0].leader(), None);
        store.delete_session(id).await.unwrap().unwrap();
        assert!(store.load_fleet().await.unwrap().is_empty());
        // A sub-session's links are stored and read back.
        let parent = SessionId::new();
        let mut sub = row(SessionId::new(), "sub");
        sub.parent_session_id = Some(parent);
        sub.host_key = Some(parent);
        store.upsert_session(sub.clone()).await.unwrap().unwrap();
        assert_eq!(store.load_fleet().await.unwrap(), [sub]);
    }

    /// Writes queued faster than the writer drains them share transactions; each is still
    /// answered, in order, and the last of each row wins. Writes queued after the close are
    /// not written, and what came before it is on disk for the next open.
    #[tokio::test]
    async fn writes_queued_together_land_in_order_and_a_close_ends_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("atc.db");
        let store = StateStore::open(&path).await.unwrap();
        let ids: Vec<SessionId> = (0..10).map(|_| SessionId::new()).collect();
        let mut answers = Vec::new();
        for round in 0..20 {
            for (i, id) in ids.iter().enumerate() {
                answers.push(store.upsert_session(row(*id, &format!("r{round}"))));
                if round == 19 && i % 2 == 0 {
                    answers.push(store.delete_session(*id));
                }
            }
        }
        let closed = store.enqueue(WriteOp::Close);
        let after = store.upsert_session(row(SessionId::new(), "after the close"));
        for answer in answers {
            answer.await.unwrap().unwrap();
        }
        closed.await.unwrap().unwrap();
        assert!(after.await.is_err(), "a write after the close is dropped");
        let store = StateStore::open(&path).await.unwrap();
        let rows = store.load_fleet().await.unwrap();
        let mut names: Vec<_> = rows
            .iter()
            .map(|r| (r.session_id, r.name.clone()))
            .collect();
        names.sort();
        let mut want: Vec<_> = ids
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == 1)
            .map(|(_, id)| (*id, "r19".to_string()))
            .collect();
        want.sort();
        assert_eq!(names, want);
    }

    /// A moved writer drains the queue on the other thread, in order with what was queued
    /// around the move, and stops with that thread; one moved to a thread that is gone stays.
    #[actix_rt::test]
    async fn a_moved_writer_writes_from_its_new_thread_and_stops_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(&dir.path().join("atc.db")).await.unwrap();
        let gone = actix::Arbiter::new();
        let gone_handle = gone.handle();
        gone.stop();
        gone.join().unwrap();
        store.move_writer(&gone_handle).await.unwrap();
        let (a, b) = (SessionId::new(), SessionId::new());
        store
            .upsert_session(row(a, "stayed"))
            .await
            .unwrap()
            .unwrap();

        let there = actix::Arbiter::new();
        let before = store.upsert_session(row(b, "before the move"));
        let there_handle = there.handle();
        let moved = store.move_writer(&there_handle);
        let after = store.upsert_session(row(b, "after the move"));
        before.await.unwrap().unwrap();
        moved.await.unwrap();
        after.await.unwrap().unwrap();
        let mut names: Vec<_> = (store.load_fleet().await.unwrap().into_iter())
            .map(|r| r.name)
            .collect();
        names.sort();
        assert_eq!(names, ["after the move", "stayed"]);

        // With the writer's thread stopped, nothing drains the queue any more.
        there.stop();
        there.join().unwrap();
        let lost = store.upsert_session(row(SessionId::new(), "nobody writes this"));
        assert!(
            matches!(lost.await, Err(_) | Ok(Err(StoreError::Closed))),
            "the writer went with its thread"
        );
    }

    /// A close and a move queued together: the close wins, the writes between them land, and
    /// of two moves the last is the one made.
    #[actix_rt::test]
    async fn a_close_wins_over_a_move_and_the_last_of_two_moves_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("atc.db");
        let store = StateStore::open(&path).await.unwrap();
        let (first, last) = (actix::Arbiter::new(), actix::Arbiter::new());
        let (first_handle, last_handle) = (first.handle(), last.handle());
        let id = SessionId::new();
        let moves = (
            store.move_writer(&first_handle),
            store.move_writer(&last_handle),
        );
        let written = store.upsert_session(row(id, "between the moves"));
        moves.0.await.unwrap();
        moves.1.await.unwrap();
        written.await.unwrap().unwrap();
        // The writer left `first` for `last`: stopping `first` leaves it draining.
        first.stop();
        first.join().unwrap();
        store
            .upsert_session(row(id, "after the moves"))
            .await
            .unwrap()
            .unwrap();

        let moved = store.move_writer(&first_handle);
        let closed = store.enqueue(WriteOp::Close);
        moved.await.unwrap();
        closed.await.unwrap().unwrap();
        let store = StateStore::open(&path).await.unwrap();
        let rows = store.load_fleet().await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].name, "after the moves");
        last.stop();
        last.join().unwrap();
    }

    #[tokio::test]
    async fn a_transcript_path_update_touches_that_column_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(&dir.path().join("atc.db")).await.unwrap();
        let id = SessionId::new();
        store.upsert_session(row(id, "named"));
        store.set_transcript_path(id, "/t/one.jsonl");
        let rows = store.load_fleet().await.unwrap();
        assert_eq!(rows[0].transcript_path.as_deref(), Some("/t/one.jsonl"));
        assert_eq!(rows[0].name, "named");
        // A full write carries the path it holds.
        let mut full = row(id, "named");
        full.transcript_path = Some("/t/two.jsonl".into());
        store.upsert_session(full);
        let rows = store.load_fleet().await.unwrap();
        assert_eq!(rows[0].transcript_path.as_deref(), Some("/t/two.jsonl"));
    }

    fn trail_row(atc_id: SessionId, ts: &str, message: &str) -> TrailEntry {
        TrailEntry {
            id: 0,
            ts: ts.into(),
            atc_id,
            event: "Notification".into(),
            message: Some(message.into()),
            session_id: None,
            kind: None,
            detail: None,
        }
    }

    fn messages(rows: &[TrailEntry]) -> Vec<&str> {
        rows.iter().filter_map(|r| r.message.as_deref()).collect()
    }

    #[tokio::test]
    async fn the_trail_keeps_each_sessions_share_and_a_sweep_its_age_and_total() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(&dir.path().join("atc.db")).await.unwrap();
        let keep = TrailKeep {
            per_session: 2,
            rows: 100,
        };
        let (a, b) = (SessionId::new(), SessionId::new());
        for (n, ts) in ["2026-01-01", "2026-02-01", "2026-03-01"]
            .iter()
            .enumerate()
        {
            let ts = format!("{ts}T00:00:00.000Z");
            store.append_event(trail_row(a, &ts, &format!("a{n}")), keep);
            store.append_event(trail_row(b, &ts, &format!("b{n}")), keep);
        }
        let rows = store.trail_latest(100).await.unwrap();
        assert_eq!(messages(&rows), ["a1", "b1", "a2", "b2"]);
        // Rows stamped before the cutoff go; then all but the newest `rows`.
        let keep = TrailKeep {
            per_session: 2,
            rows: 1,
        };
        let gone = store
            .sweep_trail(keep, "2026-03-01T00:00:00.000Z")
            .await
            .unwrap();
        assert_eq!(gone, 3);
        assert_eq!(messages(&store.trail_latest(100).await.unwrap()), ["b2"]);
    }

    #[tokio::test]
    async fn every_1024th_append_cuts_the_trail_to_its_total() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(&dir.path().join("atc.db")).await.unwrap();
        let keep = TrailKeep {
            per_session: 10_000,
            rows: 10,
        };
        let ts = "2026-01-01T00:00:00.000Z";
        let a = SessionId::new();
        for n in 1..events::PRUNE_EVERY {
            store.append_event(trail_row(a, ts, &n.to_string()), keep);
        }
        assert_eq!(
            store.trail_latest(2000).await.unwrap().len() as i64,
            events::PRUNE_EVERY - 1
        );
        store.append_event(trail_row(a, ts, "last"), keep);
        let rows = store.trail_latest(2000).await.unwrap();
        assert_eq!(rows.len(), 10);
        assert_eq!(rows.last().and_then(|r| r.message.as_deref()), Some("last"));
    }

    #[tokio::test]
    async fn forgetting_a_session_deletes_its_trail() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(&dir.path().join("atc.db")).await.unwrap();
        let (gone, kept) = (SessionId::new(), SessionId::new());
        let keep = TrailKeep {
            per_session: 10,
            rows: 10,
        };
        for id in [gone, kept] {
            store.upsert_session(row(id, "s"));
            store.append_event(trail_row(id, "2026-01-01T00:00:00.000Z", "m"), keep);
        }
        store.delete_session(gone).await.unwrap().unwrap();
        let rows = store.trail_latest(10).await.unwrap();
        let owners: Vec<SessionId> = rows.iter().map(|r| r.atc_id).collect();
        assert_eq!(owners, [kept]);
    }

    #[tokio::test]
    async fn daemon_id_is_minted_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("atc.db");
        let first = {
            let store = StateStore::open(&path).await.unwrap();
            let id = store.daemon_id().await.unwrap();
            store.close().await.unwrap();
            id
        };
        let store = StateStore::open(&path).await.unwrap();
        assert_eq!(store.daemon_id().await.unwrap(), first);
    }

    /// A fleet row in `cwd` created at `created_at`.
    fn spawned_in(cwd: &str, created_at: i64) -> FleetRow {
        FleetRow {
            cwd: cwd.into(),
            created_at,
            ..row(SessionId::new(), "s")
        }
    }

    #[tokio::test]
    async fn spawn_dirs_come_from_new_rows_deduped_most_recent_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(&dir.path().join("atc.db")).await.unwrap();
        store.upsert_session(spawned_in("/a", 1));
        store.upsert_session(spawned_in("/b", 2));
        assert_eq!(store.recent_dirs(10).await.unwrap(), vec!["/b", "/a"]);
        let again = spawned_in("/a", 3);
        store.upsert_session(again.clone());
        assert_eq!(store.recent_dirs(10).await.unwrap(), vec!["/a", "/b"]);

        // A later write of a row that exists is not a spawn: it leaves the history alone,
        // even where it names another directory.
        store.upsert_session(spawned_in("/b", 4));
        store.upsert_session(FleetRow {
            cwd: "/c".into(),
            name: "renamed".into(),
            ..again
        });
        assert_eq!(store.recent_dirs(10).await.unwrap(), vec!["/b", "/a"]);
    }
}
