//! `RestoreFleet`: after a restart, every session that died with the old daemon is revived,
//! one at a time, in the order spec §3.9 gives: top-level sessions before sub-sessions (a
//! sub-session's host is its parent's, which the parent's revive readies), newest first
//! within each. The order is a plain key with a unit test.

use actix::prelude::*;

use super::SessionManager;
use crate::providers::refusal::Operation;
use crate::sessions::messages::{RestoreFleet, ReviveOnRestore};
use crate::sessions::session::Session;
use crate::sessions::session_error::SessionError;
use atc_protocol::{ExitReason, SessionId};

/// Where a session comes in the restore queue: smaller first.
type RestoreOrder = (bool, std::cmp::Reverse<i64>);

/// The restore key of a session created at `created_at` (epoch ms): top-level before
/// sub-sessions, then newest first.
fn order(is_sub_session: bool, created_at: i64) -> RestoreOrder {
    (is_sub_session, std::cmp::Reverse(created_at))
}

impl Handler<RestoreFleet> for SessionManager {
    type Result = ResponseActFuture<Self, Result<usize, SessionError>>;

    fn handle(&mut self, _: RestoreFleet, _: &mut Self::Context) -> Self::Result {
        if self.restoring {
            return Box::pin(fut::ready(Err(SessionError::RestoreRunning)));
        }
        let refusal = self.deps.refusal.clone();
        let mut queue: Vec<(RestoreOrder, SessionId, Addr<Session>)> = self
            .sessions
            .entries()
            .filter(|e| {
                let d = e.descriptor();
                !d.alive && d.exit_reason == Some(ExitReason::DaemonStopped)
            })
            // A session whose target refuses stays listed without a process (spec §3.9).
            .filter(|e| {
                let refused = refusal.check(
                    Operation::Restore,
                    &e.descriptor().locator.target_id,
                    &e.descriptor().target_identity,
                );
                match refused {
                    Ok(_) => true,
                    Err(err) => {
                        tracing::warn!(session = %e.descriptor().id, error = %err,
                            "restore: target refuses; left without a process");
                        false
                    }
                }
            })
            .map(|e| {
                let d = e.descriptor();
                (
                    order(d.parent.is_some(), d.created_at),
                    d.id,
                    e.addr.clone(),
                )
            })
            .collect();
        queue.sort_by_key(|(key, _, _)| *key);
        self.restoring = true;
        Box::pin(
            async move {
                let mut restored = 0;
                // One at a time: each revive is awaited before the next starts.
                for (_, id, addr) in queue {
                    match addr.send(ReviveOnRestore).await {
                        Ok(Ok(_)) => restored += 1,
                        Ok(Err(e)) => {
                            tracing::warn!(session = %id, error = %e, "restore: revive refused")
                        }
                        Err(e) => {
                            tracing::warn!(session = %id, error = %e, "restore: session gone")
                        }
                    }
                }
                restored
            }
            .into_actor(self)
            .map(|n, act, _| {
                act.restoring = false;
                tracing::info!(restored = n, "fleet restored");
                Ok(n)
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_level_sessions_come_first_then_the_newest() {
        let mut queue = [
            ("old sub", order(true, 1)),
            ("new sub", order(true, 9)),
            ("old top", order(false, 2)),
            ("new top", order(false, 8)),
        ];
        queue.sort_by_key(|(_, key)| *key);
        let names: Vec<&str> = queue.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["new top", "old top", "new sub", "old sub"]);
    }
}
