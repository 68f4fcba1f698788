//! A session's name: a client's rename, the name its agent keeps (spec §3.4 "name source",
//! §9.5 Names), both held to `session_name`'s rule with the manager saying which ids a name
//! would shadow; and what a report's `started` writes beyond the session (`last_used_agent`).
//! The agent's files are read on the blocking pool, one read at a time per session; the result
//! comes back to the actor, which alone changes the name.

use actix::prelude::*;

use super::Session;
use crate::agents::names::{self, FoundName, NameSource};
use crate::sessions::messages::{ShadowedId, Update};
use crate::sessions::session_error::SessionError;
use crate::sessions::session_name::{self, NameProblem};
use atc_protocol::{Descriptor, FleetEvent, NamedBy, SessionId};

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
                        act.take_found_name(found, ctx);
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

    /// A client's rename and/or pin (`PATCH`). A name is checked as `session_name` says, the
    /// fleet's ids by the manager; nothing changes unless all of it holds.
    pub(super) fn update(
        &mut self,
        msg: Update,
    ) -> ResponseActFuture<Self, Result<Descriptor, SessionError>> {
        let name = msg.name.map(|n| n.trim().to_string());
        if let Some(Err(problem)) = name.as_deref().map(session_name::check) {
            return Box::pin(fut::ready(Err(SessionError::BadName(problem))));
        }
        let ask = name
            .clone()
            .filter(|n| *n != self.record.name)
            .map(|name| self.ask_shadowed(name));
        let id = self.record.id;
        Box::pin(
            async move {
                match ask {
                    Some(asked) => asked.await,
                    None => Ok(None),
                }
            }
            .into_actor(self)
            .map(move |shadowed, act, _| {
                let shadowed = shadowed.map_err(|e| {
                    tracing::error!(session = %id, error = %e, "the manager did not answer a name check");
                    SessionError::Internal
                })?;
                if shadowed.is_some() {
                    return Err(SessionError::BadName(NameProblem::ShadowsId));
                }
                if let Some(name) = name.filter(|n| *n != act.record.name) {
                    act.set_name(name, NamedBy::User);
                }
                if let Some(pinned) = msg.pinned {
                    act.record.pinned = pinned;
                }
                act.persist();
                act.notify_state();
                Ok(act.descriptor())
            }),
        )
    }

    /// Asks the manager which other session's id `name` would shadow.
    fn ask_shadowed(
        &self,
        name: String,
    ) -> impl std::future::Future<Output = Result<Option<SessionId>, MailboxError>> + 'static {
        self.deps.names.send(ShadowedId {
            name,
            own: self.record.id,
        })
    }

    /// Applies a name found in the agent's files, if it is new and strong enough, and a name
    /// a client could give (`session_name`): one the rule refuses is logged and not applied.
    fn take_found_name(&mut self, found: FoundName, ctx: &mut Context<Self>) {
        if self.names.seen.as_ref() == Some(&found) {
            return;
        }
        self.names.seen = Some(found.clone());
        if !self.may_take(&found) {
            return;
        }
        let id = self.record.id;
        if let Err(problem) = session_name::check(&found.name) {
            tracing::warn!(session = %id, problem = problem.as_str(),
                "the agent's name for the session is not applied: {}", problem.what());
            return;
        }
        let asked = self.ask_shadowed(found.name.clone());
        ctx.spawn(asked.into_actor(self).map(move |shadowed, act, _| {
            match shadowed {
                Ok(None) => {}
                Ok(Some(other)) => {
                    tracing::warn!(session = %id, shadows = %other,
                        "the agent's name for the session is not applied: it is another session's id");
                    return;
                }
                Err(e) => {
                    tracing::error!(session = %id, error = %e, "the manager did not answer a name check");
                    return;
                }
            }
            // A client may have renamed it meanwhile.
            if !act.may_take(&found) {
                return;
            }
            tracing::debug!(session = %id, named_by = ?found.named_by, "name taken from the agent");
            act.set_name(found.name, found.named_by);
            act.persist();
            act.notify_state();
        }));
    }

    /// Whether `found` would change the name and is strong enough to.
    fn may_take(&self, found: &FoundName) -> bool {
        let unchanged = found.name == self.record.name && found.named_by == self.record.named_by;
        !unchanged && names::may_replace(self.record.named_by, found.named_by)
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
