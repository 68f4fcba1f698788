//! A session's name as its agent keeps it (spec §3.4 "name source", §9.5 Names), and what a
//! report's `started` writes beyond the session (`last_used_agent`). The files are read on the
//! blocking pool, one read at a time per session; the result comes back to the actor, which
//! alone changes the name, through the same path a client rename takes.

use actix::prelude::*;

use super::Session;
use crate::agents::names::{self, FoundName, NameSource};
use atc_protocol::{FleetEvent, NamedBy};

/// The name refresh of one session.
#[derive(Debug, Default)]
pub(super) struct NameRefresh {
    /// A read is on the blocking pool; its answer has not come back.
    running: bool,
    /// The source of a report that arrived while a read ran; read next. Only the latest is
    /// kept: it names the agent's current files.
    next: Option<NameSource>,
    /// The last name a read found, taken or not. A found name is applied only when it differs,
    /// so a title the agent set long ago does not undo every later client rename (it would,
    /// being the stronger, if it were re-applied on each report). Kept in memory only: after a
    /// restart the agent's current name is taken once more.
    seen: Option<FoundName>,
    /// The stamp of the file read last: an unchanged file is not read again.
    read: Option<names::Stamp>,
}

impl Session {
    /// Renames the session and tells the fleet; the caller persists and sends the state.
    pub(super) fn set_name(&mut self, name: String, named_by: NamedBy) {
        self.record.name = name.clone();
        self.record.named_by = named_by;
        self.notify(FleetEvent::Renamed {
            s: self.record.id,
            name,
            named_by,
        });
    }

    /// Reads the name `source` holds, now or after the read in flight.
    pub(super) fn refresh_name(&mut self, source: NameSource, ctx: &mut Context<Self>) {
        if self.names.running {
            self.names.next = Some(source);
            return;
        }
        self.names.running = true;
        let label = source.label();
        let last = self.names.read.clone();
        let read = tokio::task::spawn_blocking(move || {
            let stamp = source.stamp()?;
            if last.as_ref() == Some(&stamp) {
                return Ok((stamp, None));
            }
            names::read(&source).map(|found| (stamp, Some(found)))
        });
        ctx.spawn(read.into_actor(self).map(move |res, act, ctx| {
            act.names.running = false;
            let id = act.record.id;
            match res {
                Ok(Ok((stamp, found))) => {
                    act.names.read = Some(stamp);
                    if let Some(Some(found)) = found {
                        act.take_found_name(found);
                    }
                }
                // A file the agent has not written yet, or moved: nothing to learn. The error's
                // kind only: the path is the user's, and contents are never logged.
                Ok(Err(e)) => {
                    tracing::debug!(session = %id, source = label, error = ?e.kind(),
                        "name source not readable")
                }
                Err(e) => {
                    tracing::error!(session = %id, source = label, error = %e, "name read failed")
                }
            }
            if let Some(next) = act.names.next.take() {
                act.refresh_name(next, ctx);
            }
        }));
    }

    /// Applies a name found in the agent's files, if it is new and strong enough.
    fn take_found_name(&mut self, found: FoundName) {
        if self.names.seen.as_ref() == Some(&found) {
            return;
        }
        self.names.seen = Some(found.clone());
        let unchanged = found.name == self.record.name && found.named_by == self.record.named_by;
        if unchanged || !names::may_replace(self.record.named_by, found.named_by) {
            return;
        }
        tracing::debug!(session = %self.record.id, named_by = ?found.named_by,
            "name taken from the agent");
        self.set_name(found.name, found.named_by);
        self.persist();
        self.notify_state();
    }

    /// Spec §3.4 `started`: the agent of a deliberate spawn or revive becomes the daemon's
    /// `last_used_agent`, once per start; a revive by a fleet restore does not count.
    pub(super) fn note_started(&mut self) {
        if std::mem::take(&mut self.deliberate_start) {
            self.deps
                .store
                .set_pref("last_used_agent", &self.record.agent);
        }
    }
}
