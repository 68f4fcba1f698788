//! A session on a host it may share (spec §3.7, §4.5): the owner's host is keyed by its own
//! id, and a sub-session that joined it carries the owner's key. What happens to the host
//! follows its owner: the owner tells the manager what it did (see
//! [`crate::sessions::host_messages`]), and the manager tells the others, which answer here.
//! A sub-session never sleeps or destroys the host itself, and outlives its parent as a
//! top-level session.

use actix::prelude::*;

use super::Session;
use crate::sessions::host_messages::{GoWithHost, SleepWithHost};
use crate::sessions::messages::ParentGone;
use crate::sessions::session_error::SessionError;
use atc_protocol::ExitReason;

impl Session {
    /// A sub-session asleep in its parent's host cannot be forgotten alone: its process is
    /// inside a host that only its owner wakes or destroys (`host_asleep`).
    pub(super) fn refuse_if_asleep_in_parents_host(&self) -> Result<(), SessionError> {
        let asleep = self.harness.is_none()
            && self.record.exit.map(|e| e.reason) == Some(ExitReason::Suspended);
        if self.record.on_parents_host() && asleep {
            return Err(SessionError::HostAsleep { id: self.record.id });
        }
        Ok(())
    }
}

impl Handler<SleepWithHost> for Session {
    type Result = ResponseFuture<()>;

    /// The owner put the host to sleep: the harness is let go as suspended, like the owner's.
    fn handle(&mut self, _: SleepWithHost, _: &mut Self::Context) -> Self::Result {
        let done = self.let_harness_go(true);
        Box::pin(async move {
            if let Some(rx) = done {
                // Its sender goes only with the actor; then there is nothing left to mark.
                let _ = rx.await;
            }
        })
    }
}

impl Handler<GoWithHost> for Session {
    type Result = ResponseActFuture<Self, ()>;

    /// The owner destroyed the host: the process went with it, and so does the session.
    fn handle(&mut self, _: GoWithHost, _: &mut Self::Context) -> Self::Result {
        // Let go at once rather than have the harness retry a host that cannot come back.
        let gone = self.let_harness_go(false);
        Box::pin(
            async move {
                if let Some(rx) = gone {
                    // Its sender goes only with the actor; the forget below ends it anyway.
                    let _ = rx.await;
                }
            }
            .into_actor(self)
            .then(|(), act, _| act.forget(true))
            .map(|res, act, _| {
                if let Err(e) = res {
                    tracing::error!(session = %act.record.id, error = %e,
                        "a session on a destroyed host could not be forgotten");
                }
            }),
        )
    }
}

impl Handler<ParentGone> for Session {
    type Result = ();

    /// The parent was removed: this session is top-level from now on, and its row says so.
    fn handle(&mut self, _: ParentGone, _: &mut Self::Context) {
        if self.record.parent.take().is_some() {
            self.persist();
            self.notify_state();
        }
    }
}
