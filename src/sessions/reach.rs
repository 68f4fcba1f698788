//! What a principal reaches (spec §2.5): the targets granted to it, each at the identity the
//! target has now. A session is in reach only if every session of its tree (its top-level
//! session and that one's sub-sessions) runs on a granted target at the identity it was bound
//! to, so a sub-session spawned somewhere else takes its whole tree out of sight, and a target
//! whose options changed under a session takes that session out.
//!
//! The owner has no [`Reach`]: everything is in its reach, and its paths skip these checks.

use std::collections::HashMap;

use atc_protocol::{Descriptor, SessionId};

/// The granted targets of one principal, by id, each with its current identity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    targets: HashMap<String, String>,
}

impl Reach {
    /// A reach over `granted` target names, judged against `current` (target id, identity)
    /// pairs: a granted name that is not configured grants nothing.
    pub fn new<'a>(
        granted: impl IntoIterator<Item = &'a str>,
        current: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Reach {
        let current: HashMap<&str, &str> = current.into_iter().collect();
        let targets = granted
            .into_iter()
            .filter_map(|name| {
                let identity = current.get(name)?;
                Some((name.to_string(), identity.to_string()))
            })
            .collect();
        Reach { targets }
    }

    /// Whether a new session may go on the target `id`.
    pub fn grants(&self, id: &str) -> bool {
        self.targets.contains_key(id)
    }

    /// Whether `target` is granted and has the identity `identity` now.
    pub fn holds(&self, target: &str, identity: &str) -> bool {
        self.targets.get(target).is_some_and(|now| now == identity)
    }

    /// Whether `session` alone is in reach: on a granted target, at its bound identity.
    pub fn covers(&self, session: &Descriptor) -> bool {
        self.holds(&session.locator.target_id, &session.target_identity)
    }

    /// The targets both reach (an `X-Atc-As` on a principal's own token only narrows).
    pub fn narrowed(&self, other: &Reach) -> Reach {
        let targets = self
            .targets
            .iter()
            .filter(|(id, identity)| other.targets.get(*id) == Some(*identity))
            .map(|(id, identity)| (id.clone(), identity.clone()))
            .collect();
        Reach { targets }
    }

    /// The granted target ids, sorted.
    pub fn target_ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.targets.keys().map(String::as_str).collect();
        ids.sort_unstable();
        ids
    }
}

/// The top-level session of `session`'s tree: its parent, or itself.
pub fn top_of(session: &Descriptor) -> SessionId {
    session.parent.unwrap_or(session.id)
}

/// Which trees of a fleet are wholly in a reach: each top-level id, with whether every member
/// is covered.
#[derive(Debug, Default)]
pub struct TreesInReach(HashMap<SessionId, bool>);

impl TreesInReach {
    /// Whether `session`'s tree is wholly in reach.
    pub fn holds(&self, session: &Descriptor) -> bool {
        self.0.get(&top_of(session)) == Some(&true)
    }
}

/// The trees of `fleet` wholly in `reach`, judged in one pass over the fleet, so a listing at a
/// thousand sessions stays linear.
pub fn trees_in_reach<'a>(
    reach: &Reach,
    fleet: impl IntoIterator<Item = &'a Descriptor>,
) -> TreesInReach {
    let mut trees: HashMap<SessionId, bool> = HashMap::new();
    for d in fleet {
        let covered = reach.covers(d);
        trees
            .entry(top_of(d))
            .and_modify(|all| *all &= covered)
            .or_insert(covered);
    }
    TreesInReach(trees)
}

/// Whether `session` is in reach, given the fleet it is listed in (which holds its tree).
pub fn in_reach<'a>(
    reach: &Reach,
    session: &Descriptor,
    fleet: impl IntoIterator<Item = &'a Descriptor>,
) -> bool {
    let top = top_of(session);
    reach.covers(session)
        && fleet
            .into_iter()
            .filter(|d| top_of(d) == top)
            .all(|d| reach.covers(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(n: u128, target: &str, identity: &str, parent: Option<u128>) -> Descriptor {
        Descriptor {
            id: SessionId::from(uuid::Uuid::from_u128(n)),
            parent: parent.map(|p| SessionId::from(uuid::Uuid::from_u128(p))),
            locator: atc_protocol::Locator {
                target_id: target.into(),
                ..Default::default()
            },
            target_identity: identity.into(),
            ..Descriptor::default()
        }
    }

    fn reach(granted: &[&str]) -> Reach {
        Reach::new(
            granted.iter().copied(),
            [("local", "L1"), ("vm", "V1"), ("other", "O1")],
        )
    }

    #[test]
    fn a_grant_is_a_configured_target_at_its_current_identity() {
        let r = reach(&["local", "nowhere"]);
        assert!(r.grants("local"));
        assert!(!r.grants("nowhere"), "not configured: grants nothing");
        assert!(!r.grants("vm"));
        assert!(r.covers(&session(1, "local", "L1", None)));
        assert!(
            !r.covers(&session(1, "local", "L0", None)),
            "bound to an identity the target no longer has"
        );
        assert!(!r.covers(&session(1, "vm", "V1", None)));
        assert_eq!(r.target_ids(), vec!["local"]);
    }

    #[test]
    fn a_tree_is_in_reach_only_whole() {
        let r = reach(&["vm"]);
        let fleet = vec![
            session(1, "vm", "V1", None),
            session(2, "vm", "V1", Some(1)),
            session(3, "vm", "V1", None),
            session(4, "other", "O1", Some(3)),
        ];
        let trees = trees_in_reach(&r, &fleet);
        for (d, expected) in fleet.iter().zip([true, true, false, false]) {
            assert_eq!(trees.holds(d), expected, "{}", d.id);
            assert_eq!(in_reach(&r, d, &fleet), expected, "{}", d.id);
        }
    }

    #[test]
    fn narrowing_keeps_what_both_reach() {
        let a = reach(&["local", "vm"]);
        let b = reach(&["vm", "other"]);
        assert_eq!(a.narrowed(&b).target_ids(), vec!["vm"]);
        assert_eq!(
            a.narrowed(&Reach::default()).target_ids(),
            Vec::<&str>::new()
        );
    }
}
