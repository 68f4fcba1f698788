//! The events sockets' subscriptions, held by the manager: each subscriber's bounded queue,
//! and for a principal's socket its [`ReachView`], which decides what it may hear. An owner's
//! socket hears every event, serialized once for all of them.

use std::collections::HashMap;
use std::sync::Arc;

use atc_protocol::{Descriptor, FleetEvent, SessionId};

use super::client_queue::{ClientQueue, Outgoing};
use super::messages::ClientId;
use super::reach::Reach;
use super::reach_view::ReachView;

/// One events socket.
struct Subscriber {
    queue: ClientQueue,
    /// `None` for the owner's socket, which sees everything.
    view: Option<ReachView>,
}

/// Every events socket.
pub struct Subscribers {
    map: HashMap<ClientId, Subscriber>,
    /// Backlog at which a subscriber is cut off (it reconnects for a fresh snapshot).
    cap: usize,
}

impl Subscribers {
    /// None yet; each cut off past `cap` bytes of backlog.
    pub fn new(cap: usize) -> Subscribers {
        Subscribers {
            map: HashMap::new(),
            cap,
        }
    }

    /// Adds a subscriber, queueing its snapshot of `fleet` (oldest first): every session for
    /// the owner, the trees in `reach` for a principal.
    pub fn subscribe(
        &mut self,
        client: ClientId,
        queue: ClientQueue,
        reach: Option<Arc<Reach>>,
        fleet: &[&Descriptor],
    ) {
        let mut view = reach.map(ReachView::new);
        let shown = match &mut view {
            None => fleet.to_vec(),
            Some(v) => v.snapshot(fleet),
        };
        for d in shown {
            let added = FleetEvent::Added {
                session: Box::new(d.clone()),
            };
            queue.push_text(added.to_text());
        }
        self.map.insert(client, Subscriber { queue, view });
    }

    /// Drops a subscriber.
    pub fn unsubscribe(&mut self, client: ClientId) {
        self.map.remove(&client);
    }

    /// Whether a principal's socket is subscribed (the manager then gathers the fleet for
    /// [`Subscribers::broadcast`]).
    pub fn has_views(&self) -> bool {
        self.map.values().any(|s| s.view.is_some())
    }

    /// Closes every subscriber (the daemon is stopping).
    pub fn close_all(&mut self) {
        for s in self.map.values() {
            s.queue.push(Outgoing::Close);
        }
        self.map.clear();
    }

    /// Sends `event` to whoever may hear it. `former_top`: the top of the tree the event's
    /// session was in before it (see [`ReachView::frames`]); `fleet`: the sessions after it,
    /// needed only by principals' views (empty when [`Subscribers::has_views`] is false).
    pub fn broadcast(
        &mut self,
        event: &FleetEvent,
        former_top: Option<SessionId>,
        fleet: &[&Descriptor],
    ) {
        // Nobody to tell: skip serializing the event (at scale, most changes have no events
        // socket watching).
        if self.map.is_empty() {
            return;
        }
        let mut text: Option<String> = None;
        let cap = self.cap;
        self.map.retain(|id, sub| {
            if sub.queue.is_closed() {
                return false;
            }
            let frames: Vec<String> = match &mut sub.view {
                None => vec![text.get_or_insert_with(|| event.to_text()).clone()],
                Some(view) => view
                    .frames(event, former_top, fleet)
                    .iter()
                    .map(FleetEvent::to_text)
                    .collect(),
            };
            for frame in frames {
                if sub.queue.backlog() + frame.len() > cap {
                    tracing::warn!(
                        subscriber = id.0,
                        "events subscriber fell behind; disconnecting it"
                    );
                    sub.queue.push(Outgoing::Close);
                    return false;
                }
                sub.queue.push_text(frame);
            }
            true
        });
    }
}
