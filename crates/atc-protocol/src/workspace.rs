//! A session's workspace on the wire: what a spawn asks for (`workspace` of
//! `POST /v1/sessions`) and what a descriptor says it got (spec §2.6, §3.2).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `workspace` of a spawn: the session works in a copy of its own of a repository at a commit.
/// Exactly one of `path` (a repository on the daemon's machine, copied as a git worktree on a
/// branch of its own) and `url` (a repository to clone); at most one of `ref` and `sha`
/// (`HEAD` when neither).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceRequest {
    /// Absolute path of a local repository (any directory inside it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A repository to clone: https, http, ssh, git, file or `user@host:path`, never with a
    /// credential in it (`credential_in_url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A branch, tag or other ref to start at.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub git_ref: Option<String>,
    /// A commit id (7–64 hex digits) to start at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha: Option<String>,
}

/// A session's workspace, as its descriptor carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceInfo {
    /// The repository it was made from: a local path, or a URL without any credential.
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// The commit it started at.
    pub sha: String,
    /// The ref asked for, if one was.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub git_ref: Option<String>,
    /// Where the copy is, on the session's host; the session's `cwd`.
    pub dir: String,
    /// Its branch in the user's repository (a worktree of a local repository).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Epoch milliseconds when it became ready.
    pub materialized_at: i64,
}

/// `GET /v1/sessions/{id}/workspace`: where the session's copy stands against what it was
/// made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceStatus {
    /// Where the copy is.
    pub dir: String,
    /// The branch checked out in it; absent on a detached `HEAD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The commit it was made at.
    pub base: String,
    /// The ref it was made from, if one was asked for.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub git_ref: Option<String>,
    /// The commit checked out now.
    pub head: String,
    /// Commits on `head` that are not on `base`.
    pub ahead: u64,
    /// Commits on `ref` now that are not on `head` (0 when made at a commit or at `HEAD`).
    pub behind: u64,
    /// Files changed in the copy and not committed, untracked ones included (at most 1,000).
    pub changed: Vec<ChangedFile>,
    /// More files changed than `changed` lists.
    pub changed_truncated: bool,
    /// The copy's tracked files against `base`, committed or not.
    pub diff_stat: DiffStat,
}

/// One file changed and not committed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ChangedFile {
    /// Its path in the copy.
    pub path: String,
    /// git's two-letter status (`git status --porcelain`): index then work tree, e.g. ` M`,
    /// `A `, `??` for untracked.
    pub status: String,
}

/// `git diff --shortstat` of the copy against its base.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DiffStat {
    /// Files changed.
    pub files: u64,
    /// Lines added.
    pub insertions: u64,
    /// Lines removed.
    pub deletions: u64,
}

/// A workspace directory no session owns (`GET /v1/workspaces/orphans`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Orphan {
    /// Where it is.
    pub dir: String,
    /// The session it was made for, when its record is left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<uuid::Uuid>)]
    pub session: Option<crate::SessionId>,
    /// What it was made from, when its record is left.
    #[serde(default, rename = "repoURL", skip_serializing_if = "Option::is_none")]
    pub repo_url: Option<String>,
    /// Files changed and not committed (for a directory git never finished: every entry).
    pub changed_files: u64,
    /// Commits that would be lost with it.
    pub unkept_commits: u64,
}

/// `GET /v1/workspaces/orphans`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OrphanList {
    /// Oldest directory name first.
    pub orphans: Vec<Orphan>,
}

/// `POST /v1/workspaces/prune`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PruneRequest {
    /// Remove orphans that hold work too (uncommitted files, commits that would be lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
}

impl crate::requests::RequestBody for PruneRequest {}

/// What a prune did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PruneAnswer {
    /// The directories removed.
    pub removed: Vec<String>,
    /// The orphans kept because they hold work (prune again with `force` to remove them).
    pub kept: Vec<Orphan>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_request_is_closed_and_names_ref_as_the_spec_does() {
        let r: WorkspaceRequest =
            serde_json::from_value(json!({"url": "https://h/r", "ref": "main"})).unwrap();
        assert_eq!(r.git_ref.as_deref(), Some("main"));
        assert!(
            serde_json::from_value::<WorkspaceRequest>(json!({"path": "/r", "depth": 1})).is_err()
        );
    }

    #[test]
    fn the_descriptor_form_uses_the_spec_names() {
        let info = WorkspaceInfo {
            repo_url: "/src/app".into(),
            sha: "abc".into(),
            git_ref: None,
            dir: "/w/app-1".into(),
            branch: Some("atc/app-1".into()),
            materialized_at: 5,
        };
        assert_eq!(
            serde_json::to_value(&info).unwrap(),
            json!({"repoURL": "/src/app", "sha": "abc", "dir": "/w/app-1",
                   "branch": "atc/app-1", "materializedAt": 5})
        );
    }
}
