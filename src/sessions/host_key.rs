//! Which host a new session runs on (spec §4.5): its own, keyed by its own id, or its
//! parent's. A sub-session shares its parent's host only where that host is the same thing
//! for both: the same target under the same identity, on a provider whose hosts live on their
//! own (they sleep or are destroyed). Anywhere else "the same host" means nothing, and the
//! sub-session stands alone. The decision is a plain function; the manager feeds it.

use atc_protocol::SessionId;

/// Where a parent runs, as far as sharing its host goes.
#[derive(Debug, Clone, Copy)]
pub struct ParentHost<'a> {
    /// The parent's host key (its own id: a parent is never a sub-session).
    pub host_key: SessionId,
    /// The parent's target.
    pub target: &'a str,
    /// The identity the parent is bound to.
    pub target_identity: &'a str,
}

/// Where the new session was resolved to run.
#[derive(Debug, Clone, Copy)]
pub struct NewPlace<'a> {
    /// The new session's id.
    pub id: SessionId,
    /// Its resolved target (a spawn without one resolved to the default already).
    pub target: &'a str,
    /// That target's identity now.
    pub target_identity: &'a str,
    /// Whether that target's provider has a host lifecycle (`suspend` or `destroy`).
    pub host_lifecycle: bool,
}

/// The host key of a new session placed at `new`, under `parent` if it has one.
pub fn host_key(new: NewPlace<'_>, parent: Option<ParentHost<'_>>) -> SessionId {
    match parent {
        Some(p)
            if new.host_lifecycle
                && p.target == new.target
                && p.target_identity == new.target_identity =>
        {
            p.host_key
        }
        _ => new.id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> (SessionId, SessionId) {
        (
            SessionId::from(uuid::Uuid::from_u128(1)),
            SessionId::from(uuid::Uuid::from_u128(2)),
        )
    }

    fn place(id: SessionId, target: &'static str, identity: &'static str) -> NewPlace<'static> {
        NewPlace {
            id,
            target,
            target_identity: identity,
            host_lifecycle: true,
        }
    }

    fn parent(key: SessionId) -> ParentHost<'static> {
        ParentHost {
            host_key: key,
            target: "box",
            target_identity: "imp:a",
        }
    }

    #[test]
    fn a_sub_session_on_its_parents_target_and_identity_joins_its_host() {
        let (own, theirs) = ids();
        assert_eq!(
            host_key(place(own, "box", "imp:a"), Some(parent(theirs))),
            theirs
        );
    }

    #[test]
    fn a_top_level_session_has_its_own_host() {
        let (own, _) = ids();
        assert_eq!(host_key(place(own, "box", "imp:a"), None), own);
    }

    #[test]
    fn another_target_or_a_changed_identity_keeps_its_own_host() {
        let (own, theirs) = ids();
        assert_eq!(
            host_key(place(own, "other", "imp:a"), Some(parent(theirs))),
            own
        );
        assert_eq!(
            host_key(place(own, "box", "imp:b"), Some(parent(theirs))),
            own,
            "the same name bound elsewhere is another impd's host"
        );
    }

    #[test]
    fn a_target_without_a_host_lifecycle_shares_nothing() {
        let (own, theirs) = ids();
        let local = NewPlace {
            host_lifecycle: false,
            ..place(own, "box", "imp:a")
        };
        assert_eq!(host_key(local, Some(parent(theirs))), own);
    }
}
