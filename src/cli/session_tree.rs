//! Sub-sessions shown under their parent (spec §3.2: one level deep). A listing already in
//! the order it wants (by state, by usage) becomes a tree: each top-level session keeps its
//! place, and its sub-sessions follow it right away, in their own order from that listing. A
//! sub-session whose parent is not in the listing stands where it is, as a top-level one.

use std::collections::{HashMap, HashSet};

use atc_client::atc_protocol::SessionId;
use atc_client::Descriptor;

/// Where a session sits in the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// A session of its own (or one whose parent is not listed).
    Top,
    /// Right under its parent.
    Sub,
}

/// The prefix of a sub-session's name in a table.
pub const SUB_MARK: &str = "└ ";

/// `list` as a tree: each top-level session followed by its sub-sessions.
pub fn tree<'a>(list: &[&'a Descriptor]) -> Vec<(&'a Descriptor, Level)> {
    let listed: HashSet<SessionId> = list.iter().map(|d| d.id).collect();
    let parent_listed = |d: &Descriptor| d.parent.filter(|p| *p != d.id && listed.contains(p));
    let mut children: HashMap<SessionId, Vec<&'a Descriptor>> = HashMap::new();
    for d in list {
        if let Some(p) = parent_listed(d) {
            children.entry(p).or_default().push(d);
        }
    }
    let mut out = Vec::with_capacity(list.len());
    for d in list.iter().filter(|d| parent_listed(d).is_none()) {
        out.push((*d, Level::Top));
        for c in children.remove(&d.id).unwrap_or_default() {
            out.push((c, Level::Sub));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(n: u128, parent: Option<u128>) -> Descriptor {
        Descriptor {
            id: SessionId::from(uuid::Uuid::from_u128(n)),
            parent: parent.map(|p| SessionId::from(uuid::Uuid::from_u128(p))),
            ..Descriptor::default()
        }
    }

    fn shape(list: &[&Descriptor]) -> Vec<(u128, Level)> {
        tree(list)
            .into_iter()
            .map(|(d, level)| (d.id.as_uuid().as_u128(), level))
            .collect()
    }

    #[test]
    fn sub_sessions_follow_their_parent_in_the_listings_order() {
        let (a, b) = (session(1, None), session(2, None));
        let (b1, a1, b2) = (
            session(3, Some(2)),
            session(4, Some(1)),
            session(5, Some(2)),
        );
        // As a listing by state might have them: children before and between parents.
        let list = [&b1, &a, &a1, &b2, &b];
        use Level::*;
        assert_eq!(
            shape(&list),
            [(1, Top), (4, Sub), (2, Top), (3, Sub), (5, Sub)]
        );
    }

    #[test]
    fn a_sub_session_whose_parent_is_not_listed_stands_alone() {
        let orphan = session(7, Some(99));
        let top = session(1, None);
        assert_eq!(shape(&[&orphan, &top]), [(7, Level::Top), (1, Level::Top)]);
    }
}
