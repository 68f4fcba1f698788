//! What a principal's events socket has been told (spec §2.5, §2.7): the sessions it sees
//! and the permission requests it was shown. The manager runs each fleet event through the
//! view of every principal subscriber, which turns it into the frames that subscriber gets:
//! nothing for a session out of reach, and a `session.removed` for each member of a tree that
//! leaves reach (a sub-session spawned on a target not granted, a target whose identity
//! changed), a `session.added` for each member of one that comes back.
//!
//! Plain state, so the rules have unit tests; the manager owns one per subscriber.

use std::collections::HashSet;
use std::sync::Arc;

use atc_protocol::{Descriptor, FleetEvent, SessionId};

use super::reach::{top_of, Reach};

/// One principal subscriber's view.
#[derive(Debug)]
pub struct ReachView {
    reach: Arc<Reach>,
    /// The sessions it has been told are listed and not told are gone.
    visible: HashSet<SessionId>,
    /// The permission requests it was shown and not told are resolved.
    requests: HashSet<String>,
}

impl ReachView {
    /// A view for `reach`, seeing nothing yet.
    pub fn new(reach: Arc<Reach>) -> ReachView {
        ReachView {
            reach,
            visible: HashSet::new(),
            requests: HashSet::new(),
        }
    }

    /// The snapshot a new subscriber starts with: `session.added` for each session of a tree
    /// wholly in reach, in `fleet`'s order.
    pub fn snapshot<'a>(&mut self, fleet: &[&'a Descriptor]) -> Vec<&'a Descriptor> {
        let trees = super::reach::trees_in_reach(&self.reach, fleet.iter().copied());
        let shown: Vec<&Descriptor> = fleet.iter().copied().filter(|d| trees.holds(d)).collect();
        self.visible.extend(shown.iter().map(|d| d.id));
        shown
    }

    /// The frames for `event`, given the fleet as it is after the event, and `former_top`:
    /// the top of the tree a removed session was in (its tree may come back into reach).
    pub fn frames(
        &mut self,
        event: &FleetEvent,
        former_top: Option<SessionId>,
        fleet: &[&Descriptor],
    ) -> Vec<FleetEvent> {
        let mut out = Vec::new();
        match event {
            FleetEvent::PermissionRequested { request, s, .. } => {
                if self.visible.contains(s) {
                    self.requests.insert(request.clone());
                    out.push(event.clone());
                }
                return out;
            }
            FleetEvent::PermissionResolved { request, .. } => {
                if self.requests.remove(request) {
                    out.push(event.clone());
                }
                return out;
            }
            _ => {}
        }
        let Some(s) = super::fleet_event_session(event) else {
            return out;
        };
        let was_visible = self.visible.contains(&s);
        if let FleetEvent::Removed { .. } = event {
            if self.visible.remove(&s) {
                out.push(event.clone());
            }
        }
        // The trees the event touched, as they are now.
        let mut tops: Vec<SessionId> = former_top.into_iter().collect();
        if let Some(d) = fleet.iter().find(|d| d.id == s) {
            tops.push(top_of(d));
        }
        tops.dedup();
        for top in tops {
            self.reconcile(top, fleet, &mut out);
        }
        // A change to a session seen before and after goes out as it is; one that just came
        // into sight was announced whole by its `session.added`.
        let forward = !matches!(event, FleetEvent::Added { .. } | FleetEvent::Removed { .. })
            && was_visible
            && self.visible.contains(&s);
        if forward {
            out.push(event.clone());
        }
        out
    }

    /// Tells the subscriber of each member of the tree `top` that came into or left reach.
    fn reconcile(&mut self, top: SessionId, fleet: &[&Descriptor], out: &mut Vec<FleetEvent>) {
        let members: Vec<&Descriptor> =
            fleet.iter().copied().filter(|d| top_of(d) == top).collect();
        let whole = members.iter().all(|d| self.reach.covers(d));
        for d in members {
            match (whole, self.visible.contains(&d.id)) {
                (true, false) => {
                    self.visible.insert(d.id);
                    out.push(FleetEvent::Added {
                        session: Box::new(d.clone()),
                    });
                }
                (false, true) => {
                    self.visible.remove(&d.id);
                    out.push(FleetEvent::Removed { s: d.id });
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> SessionId {
        SessionId::from(uuid::Uuid::from_u128(n))
    }

    fn session(n: u128, target: &str, parent: Option<u128>) -> Descriptor {
        Descriptor {
            id: id(n),
            parent: parent.map(id),
            locator: atc_protocol::Locator {
                target_id: target.into(),
                ..Default::default()
            },
            target_identity: format!("{target}-identity"),
            ..Descriptor::default()
        }
    }

    fn view() -> ReachView {
        let reach = Reach::new(["vm"], [("vm", "vm-identity"), ("local", "local-identity")]);
        ReachView::new(Arc::new(reach))
    }

    /// Each frame as its type and session, for short assertions.
    fn shape(frames: &[FleetEvent]) -> Vec<(&'static str, SessionId)> {
        frames
            .iter()
            .map(|f| match f {
                FleetEvent::Added { session } => ("added", session.id),
                FleetEvent::Removed { s } => ("removed", *s),
                FleetEvent::State { session } => ("state", session.id),
                FleetEvent::Renamed { s, .. } => ("renamed", *s),
                FleetEvent::Resized { s, .. } => ("resized", *s),
                FleetEvent::PermissionRequested { s, .. } => ("requested", *s),
                FleetEvent::PermissionResolved { .. } => ("resolved", SessionId::default()),
            })
            .collect()
    }

    fn added(d: &Descriptor) -> FleetEvent {
        FleetEvent::Added {
            session: Box::new(d.clone()),
        }
    }

    #[test]
    fn sessions_out_of_reach_are_never_heard_of() {
        let mut v = view();
        let (a, b) = (session(1, "vm", None), session(2, "local", None));
        assert_eq!(v.snapshot(&[&a, &b]).len(), 1);
        let fleet = [&a, &b];
        let renamed = FleetEvent::Renamed {
            s: b.id,
            name: "x".into(),
            named_by: atc_protocol::NamedBy::User,
        };
        assert!(v.frames(&renamed, None, &fleet).is_empty());
        assert!(v
            .frames(&FleetEvent::Removed { s: b.id }, None, &[&a])
            .is_empty());
        let state = FleetEvent::State {
            session: Box::new(a.clone()),
        };
        assert_eq!(shape(&v.frames(&state, None, &[&a])), vec![("state", a.id)]);
    }

    #[test]
    fn a_tree_leaves_reach_with_a_foreign_sub_session_and_comes_back_without_it() {
        let mut v = view();
        let top = session(1, "vm", None);
        let sub = session(2, "vm", Some(1));
        let foreign = session(3, "local", Some(1));
        assert_eq!(
            shape(&v.frames(&added(&top), None, &[&top])),
            vec![("added", top.id)]
        );
        assert_eq!(
            shape(&v.frames(&added(&sub), None, &[&top, &sub])),
            vec![("added", sub.id)]
        );
        let all = [&top, &sub, &foreign];
        assert_eq!(
            shape(&v.frames(&added(&foreign), None, &all)),
            vec![("removed", top.id), ("removed", sub.id)]
        );
        let gone = FleetEvent::Removed { s: foreign.id };
        assert_eq!(
            shape(&v.frames(&gone, Some(top.id), &[&top, &sub])),
            vec![("added", top.id), ("added", sub.id)]
        );
    }

    #[test]
    fn a_permission_is_resolved_only_to_whoever_saw_it_asked() {
        let mut v = view();
        let (a, b) = (session(1, "vm", None), session(2, "local", None));
        v.snapshot(&[&a, &b]);
        let ask = |s: SessionId, r: &str| FleetEvent::PermissionRequested {
            request: r.into(),
            s,
            message: String::new(),
            respondable: true,
        };
        let resolve = |r: &str| FleetEvent::PermissionResolved {
            request: r.into(),
            decision: "allow".into(),
        };
        let fleet = [&a, &b];
        assert_eq!(v.frames(&ask(a.id, "p1"), None, &fleet).len(), 1);
        assert!(v.frames(&ask(b.id, "p2"), None, &fleet).is_empty());
        assert!(v.frames(&resolve("p2"), None, &fleet).is_empty());
        assert_eq!(v.frames(&resolve("p1"), None, &fleet).len(), 1);
        assert!(v.frames(&resolve("p1"), None, &fleet).is_empty(), "once");
    }
}
