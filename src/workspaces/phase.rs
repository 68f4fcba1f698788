//! The phases of a workspace's materialization (spec §10, `workspace_materialization.phase`).
//! Each is recorded before it starts, so a daemon that dies mid-way knows at its next start
//! how far the row got and what to clean up.

use serde::{Deserialize, Serialize};

/// Where a materialization is, or where it failed (every workspace error carries one as
/// `data.phase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Checking the request and resolving the commit.
    Resolving,
    /// Making the copy: a worktree of a local repository, or a clone of a URL.
    Cloning,
    /// Sending the tree into a remote host.
    Transferring,
    /// Checking the copy on its host.
    Verifying,
    /// Done; the session works in it.
    Ready,
    /// It failed, or was interrupted; nothing of it is left.
    Failed,
}

impl Phase {
    /// Every phase, in order.
    pub const ALL: [Phase; 6] = [
        Phase::Resolving,
        Phase::Cloning,
        Phase::Transferring,
        Phase::Verifying,
        Phase::Ready,
        Phase::Failed,
    ];

    /// The word stored and sent.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Resolving => "resolving",
            Phase::Cloning => "cloning",
            Phase::Transferring => "transferring",
            Phase::Verifying => "verifying",
            Phase::Ready => "ready",
            Phase::Failed => "failed",
        }
    }

    /// The phase a stored word names.
    pub fn parse(word: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.as_str() == word)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_match_serde() {
        for p in Phase::ALL {
            assert_eq!(Phase::parse(p.as_str()), Some(p));
            assert_eq!(serde_json::to_value(p).unwrap(), p.as_str());
        }
        assert_eq!(Phase::parse("done"), None);
    }
}
