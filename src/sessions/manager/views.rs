//! What each asker sees of the fleet: a lookup and a listing among the sessions in a
//! principal's reach (all of them for the owner), the ids in a reach, and telling a tree's
//! sessions when the tree changed, so principals' sockets it left the reach of close.

use std::collections::HashMap;

use actix::prelude::*;

use super::super::blocking_threads;
use super::super::fleet::{Entry, Fleet};
use super::super::messages::*;
use super::super::session::Session;
use super::super::session_error::SessionError;
use super::SessionManager;
use atc_protocol::{Descriptor, FleetEvent, SessionId};

impl SessionManager {
    /// The session `key` names among those in `reach` (every one for `None`). One out of
    /// reach is missing, and a name it shares with one in reach is not ambiguous.
    pub(super) fn lookup(
        &self,
        key: &str,
        reach: Option<&super::super::reach::Reach>,
    ) -> Result<&Entry<Addr<Session>>, SessionError> {
        let visible = |e: &&Entry<Addr<Session>>| match reach {
            None => true,
            Some(r) => super::super::reach::in_reach(
                r,
                e.descriptor(),
                self.sessions.entries().map(Entry::descriptor),
            ),
        };
        if let Ok(id) = key.parse::<SessionId>() {
            if let Some(e) = self.sessions.get(&id).filter(visible) {
                return Ok(e);
            }
        }
        let mut named = self
            .sessions
            .entries()
            .filter(|e| e.descriptor().name == key)
            .filter(visible);
        match (named.next(), named.next()) {
            (Some(e), None) => Ok(e),
            (Some(_), Some(_)) => Err(SessionError::AmbiguousName {
                name: key.to_string(),
            }),
            _ => Err(SessionError::NoSuch {
                key: key.to_string(),
            }),
        }
    }
}

impl SessionManager {
    /// When `event` changed which sessions a tree holds (a sub-session came, went or moved;
    /// `former_parent`: the session's parent before it), every session of the trees it
    /// touched hears the tree as it is now, to close principals' sockets it left the reach of.
    pub(super) fn tell_changed_trees(
        &self,
        event: &FleetEvent,
        former_parent: Option<Option<SessionId>>,
    ) {
        let now_parent = match event {
            FleetEvent::Added { session } | FleetEvent::State { session } => session.parent,
            _ => None,
        };
        let moved = match event {
            FleetEvent::Added { .. } => now_parent.is_some(),
            FleetEvent::Removed { .. } => former_parent.flatten().is_some(),
            FleetEvent::State { .. } => former_parent.is_some_and(|p| p != now_parent),
            _ => false,
        };
        if !moved {
            return;
        }
        let mut tops: Vec<SessionId> = former_parent.flatten().into_iter().collect();
        tops.extend(now_parent);
        if let Some(s) = super::super::fleet_event_session(event) {
            tops.push(s);
        }
        tops.dedup();
        for top in tops {
            let members: Vec<&Entry<Addr<Session>>> = self
                .sessions
                .entries()
                .filter(|e| super::super::reach::top_of(e.descriptor()) == top)
                .collect();
            let tree: Vec<Descriptor> = members.iter().map(|e| e.descriptor().clone()).collect();
            for e in members {
                e.addr.do_send(TreeChanged { tree: tree.clone() });
            }
        }
    }
}

impl Handler<Lookup> for SessionManager {
    type Result = Result<Found, SessionError>;

    fn handle(&mut self, msg: Lookup, _: &mut Self::Context) -> Self::Result {
        let e = self.lookup(&msg.key, msg.reach.as_deref())?;
        Ok(Found {
            addr: e.addr.clone(),
            descriptor: e.descriptor().clone(),
        })
    }
}

impl Handler<ListSessions> for SessionManager {
    type Result = ResponseActFuture<Self, bytes::Bytes>;

    /// The listing, with each live session's usage read from its cgroup on a blocking thread
    /// (see [`super::super::usage`]); the cached body when none has a cgroup and the owner asks.
    fn handle(&mut self, msg: ListSessions, _: &mut Self::Context) -> Self::Result {
        let providers = &self.deps.providers;
        // A principal's view: the trees wholly in its reach, judged once per tree.
        let trees = msg.reach.as_deref().map(|r| {
            super::super::reach::trees_in_reach(r, self.sessions.entries().map(Entry::descriptor))
        });
        // The owner's is the cached body (with usage spliced in when there is some).
        let body = move |fleet: &mut Fleet<Addr<Session>>, usage: &HashMap<_, _>| match &trees {
            None => fleet.listing_with(usage),
            Some(t) => fleet.listing_of(usage, |d| t.holds(d)),
        };
        let in_cgroups: Vec<_> = self
            .sessions
            .entries()
            .filter_map(|e| {
                let d = e.descriptor();
                Some((d.id, super::super::usage::cgroups_of(d, providers)?))
            })
            .collect();
        if in_cgroups.is_empty() {
            return Box::pin(fut::ready(body(&mut self.sessions, &HashMap::new())));
        }
        Box::pin(
            blocking_threads::run(move || super::super::usage::read(in_cgroups))
                .into_actor(self)
                // A lost job panicked; the listing goes out without usage.
                .map(move |usage, act, _| body(&mut act.sessions, &usage.unwrap_or_default())),
        )
    }
}

impl Handler<InReach> for SessionManager {
    type Result = MessageResult<InReach>;

    fn handle(&mut self, msg: InReach, _: &mut Self::Context) -> Self::Result {
        let fleet = || self.sessions.entries().map(Entry::descriptor);
        let trees = super::super::reach::trees_in_reach(&msg.0, fleet());
        let ids = fleet().filter(|d| trees.holds(d)).map(|d| d.id).collect();
        MessageResult(ids)
    }
}
