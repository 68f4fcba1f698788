//! The write queue: one task drains every queued write onto the store's connection, so writes
//! issued by one actor land in the order it issued them, and writes waiting together share a
//! transaction.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};

use super::connection::Db;
use super::events::TrailKeep;
use super::{events, fleet, FleetRow, StoreError};
use atc_protocol::responses::TrailEntry;
use atc_protocol::SessionId;

/// One queued write.
pub(super) enum WriteOp {
    UpsertSession(Box<FleetRow>),
    DeleteSession(SessionId),
    TranscriptPath {
        id: SessionId,
        path: String,
    },
    TurnResult {
        id: SessionId,
        result: String,
    },
    SetPref {
        key: String,
        value: String,
    },
    AppendEvent(Box<TrailEntry>, TrailKeep),
    /// Everything queued before it is written; nothing else happens.
    Barrier,
    /// Everything queued before it is written; then the connection closes.
    Close,
    /// Everything queued before it is written; then the writer goes on on this arbiter's
    /// thread (see [`StateStore::move_writer`]).
    MoveWriter(actix::ArbiterHandle),
}

/// Most queued writes one transaction carries.
const MAX_BATCH: usize = 64;

/// A queued write and who hears how it went.
pub(super) type Queued = (WriteOp, oneshot::Sender<Result<(), StoreError>>);

/// The task that drains the write queue, and what it drains it into.
pub(super) struct Writer {
    pub(super) db: Arc<Db>,
    pub(super) rx: mpsc::UnboundedReceiver<Queued>,
    pub(super) newest_event: Arc<watch::Sender<i64>>,
    pub(super) metrics: crate::metrics::Metrics,
}

/// What a batch asked of the writer once its writes are made.
enum Then {
    GoOn,
    /// Close the connection, then answer.
    Close(oneshot::Sender<Result<(), StoreError>>),
    /// Go on on this arbiter's thread, then answer.
    Move(
        actix::ArbiterHandle,
        oneshot::Sender<Result<(), StoreError>>,
    ),
}

impl Writer {
    /// Drains the write queue. The writes waiting when the writer comes round go in one
    /// transaction (group commit): a spawn storm queues a row or two per spawn, and each commit
    /// of its own cost a WAL append and a round trip to sqlx's worker thread for the `BEGIN` and
    /// `COMMIT` it implies. Order is kept, and each caller hears only once its transaction is
    /// committed, so a durable answer means what it did when every write was its own.
    ///
    /// Boxed, because a moved writer runs itself again on the other thread.
    pub(super) fn run(mut self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(async move {
            let mut batch = Vec::new();
            while let Some(first) = self.rx.recv().await {
                batch.push(first);
                while batch.len() < MAX_BATCH {
                    match self.rx.try_recv() {
                        Ok(next) => batch.push(next),
                        Err(_) => break,
                    }
                }
                let then = take_then(&mut batch);
                write_batch(
                    &self.db,
                    std::mem::take(&mut batch),
                    &self.newest_event,
                    &self.metrics,
                )
                .await;
                match then {
                    Then::GoOn => {}
                    Then::Close(done) => {
                        self.db.close().await;
                        // The caller may have stopped waiting; the connection is closed
                        // either way.
                        let _ = done.send(Ok(()));
                        return;
                    }
                    Then::Move(to, done) => {
                        let moved = self.move_to(&to);
                        // The caller may have stopped waiting; the writer is where it is
                        // either way.
                        let _ = done.send(Ok(()));
                        match moved {
                            Ok(()) => return,
                            Err(stays) => {
                                tracing::warn!(
                                    "the store's writer could not move; it stays where it was"
                                );
                                self = *stays;
                            }
                        }
                    }
                }
            }
        })
    }

    /// Starts this writer again in a task on `to`'s thread; hands it back where that thread
    /// no longer runs.
    fn move_to(self, to: &actix::ArbiterHandle) -> Result<(), Box<Writer>> {
        let (hand, take) = oneshot::channel::<Writer>();
        let started = to.spawn(async move {
            if let Ok(writer) = take.await {
                writer.run().await;
            }
        });
        if !started {
            return Err(Box::new(self));
        }
        // Refused only when the task on `to` was dropped unrun (its thread stopped meanwhile).
        hand.send(self).map_err(Box::new)
    }
}

/// Takes a close or a move out of `batch`, with what must follow it. After a close the writes
/// queued behind it are not written (their callers hear `Closed` as their senders drop), and
/// a close wins over any move in the batch. A move's are, in this batch: they were queued
/// after everything before the move. Of several moves the last is made, which is where the
/// earlier ones would have led; they are answered with the batch, as barriers are.
fn take_then(batch: &mut Vec<Queued>) -> Then {
    if let Some(at) = batch
        .iter()
        .position(|(op, _)| matches!(op, WriteOp::Close))
    {
        let (_, done) = batch.remove(at);
        batch.truncate(at);
        return Then::Close(done);
    }
    let last_move = batch
        .iter()
        .enumerate()
        .rev()
        .find_map(|(at, (op, _))| match op {
            WriteOp::MoveWriter(to) => Some((at, to.clone())),
            _ => None,
        });
    match last_move {
        Some((at, to)) => Then::Move(to, batch.remove(at).1),
        None => Then::GoOn,
    }
}

/// Writes `batch` in one transaction (a lone write in its own), then answers each caller
/// in order: with its own write's result, or with the commit's failure.
async fn write_batch(
    db: &Db,
    batch: Vec<Queued>,
    newest_event: &watch::Sender<i64>,
    metrics: &crate::metrics::Metrics,
) {
    let writes = batch
        .iter()
        .filter(|(op, _)| !matches!(op, WriteOp::Barrier))
        .count();
    if writes == 0 {
        for (_, done) in batch {
            // A barrier's caller may have stopped waiting.
            let _ = done.send(Ok(()));
        }
        return;
    }
    let began = std::time::Instant::now();
    let mut results = Vec::with_capacity(batch.len());
    let mut newest = None;
    let committed = async {
        let mut held = db.hold().await?;
        let mut sink = if writes > 1 {
            Sink::Transaction(sqlx::Connection::begin(&mut *held).await?)
        } else {
            Sink::Alone(&mut held)
        };
        for (op, _) in &batch {
            let conn = sink.conn();
            results.push(match op {
                WriteOp::AppendEvent(e, keep) => events::append(conn, e, *keep).await.map(|id| {
                    newest = Some(id);
                }),
                op => apply(conn, op).await,
            });
        }
        if let Sink::Transaction(tx) = sink {
            tx.commit().await?;
        }
        Ok::<(), StoreError>(())
    }
    .await;
    // Every write of the batch waited for the commit, so each took its time.
    for _ in 0..writes {
        metrics.store_wrote(began.elapsed());
    }
    let failed = committed.as_ref().err().map(ToString::to_string);
    if let Some(e) = &failed {
        tracing::error!(error = %e, writes, "store transaction failed");
    } else if let Some(id) = newest {
        // Trail rows also wake long-polling readers, once they are committed.
        newest_event.send_replace(id);
    }
    let mut results = results.into_iter();
    for (_, done) in batch {
        let result = match (&failed, results.next()) {
            (Some(e), _) => Err(StoreError::NotCommitted(e.clone())),
            (None, Some(result)) => result,
            // Only a failed transaction leaves writes without a result.
            (None, None) => Err(StoreError::NotCommitted("not written".into())),
        };
        if let Err(e) = &result {
            if failed.is_none() {
                tracing::error!(error = %e, "store write failed");
            }
        }
        // The caller may not be waiting (a background write); that is fine.
        let _ = done.send(result);
    }
}

/// Where a batch is written: a lone write autocommits, several share a transaction.
enum Sink<'c> {
    Alone(&'c mut sqlx::SqliteConnection),
    Transaction(sqlx::Transaction<'c, sqlx::Sqlite>),
}

impl Sink<'_> {
    fn conn(&mut self) -> &mut sqlx::SqliteConnection {
        match self {
            Sink::Alone(conn) => conn,
            Sink::Transaction(tx) => tx,
        }
    }
}

async fn apply(db: &mut sqlx::SqliteConnection, op: &WriteOp) -> Result<(), StoreError> {
    match op {
        WriteOp::UpsertSession(row) => fleet::upsert(db, row).await,
        WriteOp::DeleteSession(id) => {
            // The trail first: a failure between the two leaves the row, so the forget can
            // be made again, and never a trail without its session.
            events::forget(&mut *db, *id).await?;
            sqlx::query("DELETE FROM fleet WHERE session_id = ?")
                .bind(id.to_string())
                .execute(db)
                .await?;
            Ok(())
        }
        WriteOp::TranscriptPath { id, path } => fleet::set_transcript_path(db, *id, path).await,
        WriteOp::TurnResult { id, result } => fleet::set_result(db, *id, result).await,
        WriteOp::SetPref { key, value } => {
            sqlx::query(
                "INSERT INTO prefs (key, value) VALUES (?, ?)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )
            .bind(key)
            .bind(value)
            .execute(db)
            .await?;
            Ok(())
        }
        WriteOp::AppendEvent(e, keep) => events::append(db, e, *keep).await.map(|_| ()),
        // None writes anything; a close or a move is taken out of its batch before it is
        // written.
        WriteOp::Barrier | WriteOp::Close | WriteOp::MoveWriter(_) => Ok(()),
    }
}
