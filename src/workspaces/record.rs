//! A workspace's materialization as the store keeps it (spec §10, `workspace_materialization`):
//! what it was made from, where it lives, and how far it got.

use std::path::PathBuf;

use atc_protocol::SessionId;

use super::phase::Phase;

/// What a workspace was made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// A repository on this machine (a worktree of it).
    Path,
    /// A repository cloned from a URL.
    Git,
}

impl SourceKind {
    /// The word stored.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Path => "path",
            SourceKind::Git => "git",
        }
    }

    /// The kind a stored word names.
    pub fn parse(word: &str) -> Option<SourceKind> {
        match word {
            "path" => Some(SourceKind::Path),
            "git" => Some(SourceKind::Git),
            _ => None,
        }
    }
}

/// One session's workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Materialization {
    /// The session it belongs to.
    pub session_id: SessionId,
    /// The session's target.
    pub target: String,
    /// Where the copy lives on the session's host.
    pub dir: PathBuf,
    /// What it was made from.
    pub source_kind: SourceKind,
    /// How far it got.
    pub phase: Phase,
    /// The repository: its path, or its URL without a credential.
    pub repo_url: String,
    /// The commit, once resolved.
    pub sha: Option<String>,
    /// The ref asked for, if one was.
    pub git_ref: Option<String>,
    /// The session's branch in the copy (none in a copy sent to a remote host, which has no
    /// history).
    pub branch: Option<String>,
    /// The remote host the copy is on (its host key); `None`: this machine.
    pub host_key: Option<String>,
    /// The wire code it failed with, once failed.
    pub error_code: Option<String>,
    /// When materialization began (epoch ms).
    pub started_at: i64,
    /// When the row last changed (epoch ms).
    pub updated_at: i64,
    /// When it became ready (epoch ms).
    pub materialized_at: Option<i64>,
    /// Environment variable names kept from its commands.
    pub withheld_env: Vec<String>,
}
