//! A session's workspace over its life: made at spawn step 9 (spec §3.5) before the process
//! starts, each phase written to the store before the phase begins; weighed and removed when
//! the session is forgotten, never losing work unless told to; and, at start-up, what a
//! stopped daemon left half made is failed as `workspace_interrupted` and removed (§1.3).
//!
//! git runs on the daemon's blocking threads, never on the sessions' thread. The workspaces of
//! local repositories live under `<state dir>/workspaces/`.

use std::path::{Path, PathBuf};

use atc_protocol::workspace::{Orphan, PruneAnswer, WorkspaceInfo};
use atc_protocol::SessionId;

use super::blocking_threads;
use super::session_error::SessionError;
use crate::clock::now_ms;
use crate::store::StateStore;
use crate::workspaces::git::Git;
use crate::workspaces::record::{Materialization, SourceKind};
use crate::workspaces::source::{self, Ask, Source};
use crate::workspaces::worktree::{self, Worktree};
use crate::workspaces::{clone, orphan};
use crate::workspaces::{Phase, WorkspaceError, WorkspaceProblem};

/// Where the daemon makes workspaces on its own machine.
pub fn root(state_dir: &Path) -> PathBuf {
    state_dir.join("workspaces")
}

/// What the store and git of workspace work are.
#[derive(Clone)]
pub struct Workspaces {
    /// Where phases are recorded.
    pub store: StateStore,
    /// How git runs.
    pub git: Git,
    /// Where workspaces are made.
    pub root: PathBuf,
}

/// A workspace made for a spawn.
#[derive(Debug, Clone)]
pub struct Made {
    /// As the descriptor shows it.
    pub info: WorkspaceInfo,
    /// Where the session starts: the spawn's `cwd` mapped into the copy.
    pub cwd: String,
}

/// Runs `job` on a blocking thread; a lost job is an internal error.
pub(super) async fn blocking<T: Send + 'static>(
    job: impl FnOnce() -> Result<T, WorkspaceError> + Send + 'static,
) -> Result<T, SessionError> {
    match blocking_threads::run(job).await {
        Ok(answer) => answer.map_err(surfaced),
        Err(e) => {
            tracing::error!(error = %e, "a workspace's git work did not finish");
            Err(SessionError::Internal)
        }
    }
}

/// A workspace error as the client gets it: git's own failures are logged and answered as
/// `internal` (their text names paths of this machine); the rest carry their spec code.
fn surfaced(e: WorkspaceError) -> SessionError {
    match &e.problem {
        WorkspaceProblem::Git(detail) => {
            tracing::error!(phase = e.phase.as_str(), detail = %detail, "workspace git failure");
            SessionError::Internal
        }
        _ => SessionError::Workspace(e),
    }
}

pub(super) fn stored<T>(
    res: Result<T, crate::store::StoreError>,
    what: &str,
) -> Result<T, SessionError> {
    res.map_err(|e| {
        tracing::error!(error = %e, "{what}");
        SessionError::Internal
    })
}

impl Workspaces {
    /// The directory on this machine session `id`'s workspace of `source` gets, named after
    /// the repository's last path segment (a URL's as a path's).
    pub fn dir_of(&self, source: &Source, id: SessionId) -> PathBuf {
        let named_after = match source {
            Source::Path(repo) => repo.clone(),
            Source::Url(url) => PathBuf::from(url),
        };
        worktree::dir_for(&self.root, &named_after, &id.to_string())
    }

    /// Makes the workspace `ask` names for session `id` (named `name`), recording each
    /// phase first. A refusal or failure leaves nothing behind: no directory, no branch, no
    /// row.
    pub async fn materialize(
        &self,
        id: SessionId,
        target: &str,
        name: &str,
        ask: Ask,
        cwd: &str,
        remote: Option<std::sync::Arc<dyn crate::providers::ExecutionProvider>>,
    ) -> Result<Made, SessionError> {
        let (kind, repo_url) = match &ask.source {
            Source::Path(repo) => (SourceKind::Path, repo.display().to_string()),
            Source::Url(url) => (SourceKind::Git, url.clone()),
        };
        let dir = self.dir_of(&ask.source, id);
        let branch = worktree::branch_name(name, &id.to_string());
        let began = now_ms();
        let row = Materialization {
            session_id: id,
            target: target.to_string(),
            dir: dir.clone(),
            source_kind: kind,
            phase: Phase::Resolving,
            repo_url,
            sha: None,
            git_ref: ask.pick.git_ref().map(str::to_string),
            // A copy sent into a remote host carries no history, so no branch.
            branch: remote.is_none().then(|| branch.clone()),
            host_key: remote.is_some().then(|| id.to_string()),
            error_code: None,
            started_at: began,
            updated_at: began,
            materialized_at: None,
            withheld_env: self.git.withheld().to_vec(),
        };
        stored(
            self.store.workspace_begin(&row).await,
            "recording a workspace",
        )?;
        let made = match remote {
            Some(provider) => self.send_in(&row, ask, provider).await,
            None => self.make(&row, ask, cwd).await,
        };
        if made.is_err() {
            // Nothing was left on disk (each step undoes its own); the row goes too.
            if let Err(e) = self.store.workspace_delete(id).await {
                tracing::error!(session = %id, error = %e, "a refused workspace's row stays");
            }
        }
        made
    }

    async fn make(&self, row: &Materialization, ask: Ask, cwd: &str) -> Result<Made, SessionError> {
        let id = row.session_id;
        let (dir, branch) = (row.dir.clone(), row.branch.clone().unwrap_or_default());
        let git = self.git.clone();
        let (resolved, top) = match ask.source {
            Source::Path(repo) => {
                let (pick, at) = (ask.pick.clone(), repo.clone());
                let (resolved, top) = blocking(move || {
                    let resolved = source::resolve(&git, &at, &pick)?;
                    source::check_complete(&git, &at, &resolved.sha)?;
                    // A bare repository has no top level; a cwd cannot be inside it.
                    let top = git
                        .run(&at, &["rev-parse", "--show-toplevel"])
                        .ok()
                        .map(|t| PathBuf::from(t.trim()));
                    Ok((resolved, top))
                })
                .await?;
                self.phase(id, Phase::Cloning, Some(&resolved.sha)).await?;
                let tree = Worktree {
                    repo,
                    dir: dir.clone(),
                    branch: branch.clone(),
                    sha: resolved.sha.clone(),
                };
                let git = self.git.clone();
                blocking(move || tree.add(&git)).await?;
                (resolved, top)
            }
            Source::Url(url) => {
                let job = clone::Clone {
                    url,
                    dir: dir.clone(),
                    branch: branch.clone(),
                    pick: ask.pick,
                };
                self.check_remote(&job).await?;
                self.phase(id, Phase::Cloning, None).await?;
                let (git, root) = (self.git.clone(), self.root.clone());
                let resolved = blocking(move || job.make(&git, &root)).await?;
                // The spawn's cwd cannot be inside a repository that is only a URL here.
                (resolved, None)
            }
        };
        let ready_at = now_ms();
        if let Err(e) = self
            .store
            .workspace_phase(id, Phase::Ready, Some(&resolved.sha), None, ready_at)
            .await
        {
            tracing::error!(session = %id, error = %e, "recording a workspace ready");
            let (git, row) = (self.git.clone(), row.clone());
            // Best effort: what is left is an orphan `prune` finds.
            let _ = blocking(move || remove_made(&git, &row)).await;
            return Err(SessionError::Internal);
        }
        Ok(Made {
            cwd: mapped_cwd(cwd, top.as_deref(), &dir),
            info: WorkspaceInfo {
                repo_url: row.repo_url.clone(),
                sha: resolved.sha,
                git_ref: resolved.git_ref,
                dir: dir.display().to_string(),
                branch: Some(branch),
                materialized_at: ready_at,
            },
        })
    }

    /// Phase `resolving` of a clone: the remote asked for the ref. git runs from the
    /// workspaces' root, so no repository the daemon happens to run in is ever in play.
    pub(super) async fn check_remote(&self, job: &clone::Clone) -> Result<(), SessionError> {
        let (checking, git, root) = (job.clone(), self.git.clone(), self.root.clone());
        blocking(move || {
            std::fs::create_dir_all(&root).map_err(|e| {
                WorkspaceError::at(Phase::Resolving, WorkspaceProblem::Git(e.to_string()))
            })?;
            checking.check_remote(&git, &root)
        })
        .await
    }

    /// Records that session `id`'s workspace enters `phase`.
    pub(super) async fn phase(
        &self,
        id: SessionId,
        phase: Phase,
        sha: Option<&str>,
    ) -> Result<(), SessionError> {
        stored(
            self.store
                .workspace_phase(id, phase, sha, None, now_ms())
                .await,
            "recording a workspace's phase",
        )
    }

    /// Where session `id`'s workspace stands (`GET /v1/sessions/{id}/workspace`).
    pub async fn status(
        &self,
        id: SessionId,
    ) -> Result<atc_protocol::workspace::WorkspaceStatus, SessionError> {
        let row = stored(self.store.workspace_get(id).await, "reading a workspace")?
            .filter(|r| r.phase == Phase::Ready)
            .ok_or(SessionError::NoWorkspace { id })?;
        if row.host_key.is_some() {
            return Err(SessionError::RemoteWorkspace { id });
        }
        let git = self.git.clone();
        let base = row.sha.clone().unwrap_or_default();
        blocking(move || {
            crate::workspaces::status::status(&git, &row.dir, &base, row.git_ref.as_deref())
        })
        .await
    }

    /// Refuses with `workspace_dirty` when removing session `id`'s workspace would lose work.
    pub async fn check_loss(&self, id: SessionId) -> Result<(), SessionError> {
        let Some(row) = stored(self.store.workspace_get(id).await, "reading a workspace")? else {
            return Ok(());
        };
        // A copy on a remote host goes with its host, behind the destroy's own confirmation.
        if row.host_key.is_some() || !row.dir.is_dir() {
            return Ok(());
        }
        let git = self.git.clone();
        blocking(move || {
            // Weighed by what the copy is on disk, as an orphan is: a worktree or a clone.
            let loss = orphan::weigh(&git, &row.dir)?;
            match loss.is_empty() {
                true => Ok(()),
                false => Err(WorkspaceError::at(
                    Phase::Ready,
                    WorkspaceProblem::Dirty(loss),
                )),
            }
        })
        .await
    }

    /// Removes session `id`'s workspace, whatever it holds (callers weigh it first), and its
    /// row; its branch stays in the repository.
    pub async fn remove(&self, id: SessionId) -> Result<(), SessionError> {
        let Some(row) = stored(self.store.workspace_get(id).await, "reading a workspace")? else {
            return Ok(());
        };
        if row.host_key.is_none() {
            let git = self.git.clone();
            blocking(move || remove_made(&git, &row)).await?;
        }
        stored(
            self.store.workspace_delete(id).await,
            "forgetting a workspace",
        )
    }

    /// Spec §1.3 step 3, before anything is served: every workspace a stopped daemon left short
    /// of `ready` is failed as `workspace_interrupted`, and what it made is removed: its
    /// directory, and its branch while the branch still points where it was made (nothing was
    /// committed on it); for a copy sent into a remote host, the host the spawn readied for
    /// itself (keyed by a session that was never listed). The number of workspaces
    /// interrupted.
    pub async fn sweep_interrupted(
        &self,
        providers: &crate::providers::registry::Providers,
    ) -> Result<usize, crate::store::StoreError> {
        let rows = self.store.workspaces_interrupt(now_ms()).await?;
        for row in &rows {
            tracing::warn!(session = %row.session_id, phase = row.phase.as_str(),
                "a workspace was interrupted by a daemon stop; removing what it made");
            if let Some(host_key) = &row.host_key {
                let hosts = providers.get(&row.target).and_then(|p| p.hosts());
                let destroyed = match hosts {
                    Some(hosts) => hosts.destroy_host(host_key).await,
                    None => Ok(()),
                };
                if let Err(e) = destroyed {
                    tracing::error!(session = %row.session_id, error = %e,
                        "an interrupted workspace's host stays");
                }
                continue;
            }
            let git = self.git.clone();
            let row = row.clone();
            let done = blocking_threads::run(move || discard_interrupted(&git, &row)).await;
            if done.is_err() {
                tracing::error!("removing an interrupted workspace did not finish");
            }
        }
        Ok(rows.len())
    }
}

impl Workspaces {
    /// Every ready workspace, by session, as descriptors show them (joined to the sessions
    /// loaded at start).
    pub async fn ready_infos(
        &self,
    ) -> Result<std::collections::HashMap<SessionId, WorkspaceInfo>, crate::store::StoreError> {
        let rows = self.store.workspaces_all().await?;
        Ok(rows
            .into_iter()
            .filter(|r| r.phase == Phase::Ready)
            .map(|r| {
                let info = WorkspaceInfo {
                    repo_url: r.repo_url,
                    sha: r.sha.unwrap_or_default(),
                    git_ref: r.git_ref,
                    dir: r.dir.display().to_string(),
                    branch: r.branch,
                    materialized_at: r.materialized_at.unwrap_or(r.updated_at),
                };
                (r.session_id, info)
            })
            .collect())
    }
}

/// How long a workspace row is left alone by a prune after its last change: its spawn may
/// still be on the way to listing its session.
const IN_FLIGHT: i64 = 60_000;

impl Workspaces {
    /// Every workspace directory no listed session owns, weighed: directories under the root
    /// without a row, and rows whose session is not `listed` (those changed in the last
    /// minute excepted: a spawn may be listing its session).
    pub async fn orphans(
        &self,
        listed: std::collections::HashSet<SessionId>,
    ) -> Result<Vec<(Orphan, Option<Materialization>)>, SessionError> {
        let rows = stored(self.store.workspaces_all().await, "reading workspaces")?;
        let (git, root, now) = (self.git.clone(), self.root.clone(), now_ms());
        blocking(move || {
            let mut found = Vec::new();
            for dir in orphan::dirs_under(&root) {
                let row = rows.iter().find(|r| r.dir == dir);
                let owned = row.is_some_and(|r| {
                    listed.contains(&r.session_id) || now - r.updated_at < IN_FLIGHT
                });
                if owned {
                    continue;
                }
                let loss = orphan::weigh(&git, &dir)?;
                let info = Orphan {
                    dir: dir.display().to_string(),
                    session: row.map(|r| r.session_id),
                    repo_url: row.map(|r| r.repo_url.clone()),
                    changed_files: loss.changed_files as u64,
                    unkept_commits: loss.unkept_commits as u64,
                };
                found.push((info, row.cloned()));
            }
            Ok(found)
        })
        .await
    }

    /// Removes the orphans that hold no work (all of them with `force`), and their rows.
    pub async fn prune(
        &self,
        listed: std::collections::HashSet<SessionId>,
        force: bool,
    ) -> Result<PruneAnswer, SessionError> {
        let mut answer = PruneAnswer {
            removed: Vec::new(),
            kept: Vec::new(),
        };
        for (found, row) in self.orphans(listed).await? {
            if !force && (found.changed_files > 0 || found.unkept_commits > 0) {
                answer.kept.push(found);
                continue;
            }
            let (git, dir) = (self.git.clone(), PathBuf::from(&found.dir));
            blocking(move || orphan::remove(&git, &dir)).await?;
            if let Some(row) = row {
                stored(
                    self.store.workspace_delete(row.session_id).await,
                    "forgetting a pruned workspace",
                )?;
            }
            tracing::info!(dir = %found.dir, "pruned an orphaned workspace");
            answer.removed.push(found.dir);
        }
        Ok(answer)
    }
}

/// Removes a workspace's copy whatever it holds; a worktree's branch stays.
fn remove_made(git: &Git, row: &Materialization) -> Result<(), WorkspaceError> {
    match row.source_kind {
        SourceKind::Path => Worktree::remove(git, Path::new(&row.repo_url), &row.dir, true),
        SourceKind::Git => clone::remove(&row.dir),
    }
}

/// Removes what an interrupted materialization made.
fn discard_interrupted(git: &Git, row: &Materialization) {
    if let Err(e) = remove_made(git, row) {
        tracing::error!(dir = %row.dir.display(), error = %e, "an interrupted workspace stays");
    }
    let repo = PathBuf::from(&row.repo_url);
    let (SourceKind::Path, Some(branch), Some(sha)) = (row.source_kind, &row.branch, &row.sha)
    else {
        return;
    };
    let tip = git.run(
        &repo,
        &[
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ],
    );
    if tip.is_ok_and(|t| t.trim() == sha) {
        // Made by us and never moved: nothing on it to keep.
        let _ = git.run(&repo, &["branch", "-D", "--end-of-options", branch]);
    }
}

/// Spec §3.5 step 7 on this machine: a new session's directory may not overlap a workspace.
/// A plain `cwd` inside another session's workspace, or a new workspace `dir` holding another
/// session's `cwd`, is refused as `workspace_overlap`. `others` are the sessions already on
/// this machine, exited ones included: a workspace is its session's until it is forgotten.
pub fn check_overlap<'a>(
    others: impl Iterator<Item = &'a atc_protocol::Descriptor>,
    cwd: &Path,
    new_workspace: Option<&Path>,
) -> Result<(), WorkspaceError> {
    for other in others {
        let inside_theirs = other
            .workspace
            .as_ref()
            .is_some_and(|w| new_workspace.is_none() && cwd.starts_with(&w.dir));
        let holds_theirs = new_workspace.is_some_and(|dir| Path::new(&other.cwd).starts_with(dir));
        if inside_theirs || holds_theirs {
            return Err(WorkspaceError::at(
                Phase::Resolving,
                WorkspaceProblem::Overlap(format!(
                    "the directory overlaps the workspace of session {}",
                    other.id
                )),
            ));
        }
    }
    Ok(())
}

/// The spawn's `cwd` inside the copy: the same place relative to the repository's top level
/// when it is inside the repository and exists in the copy, else the copy's root.
fn mapped_cwd(cwd: &str, top: Option<&Path>, dir: &Path) -> String {
    let inside = top
        .and_then(|top| Path::new(cwd).strip_prefix(top).ok())
        .map(|rel| match rel.as_os_str().is_empty() {
            true => dir.to_path_buf(),
            false => dir.join(rel),
        })
        .filter(|p| p.is_dir());
    inside
        .unwrap_or_else(|| dir.to_path_buf())
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use atc_protocol::Descriptor;

    fn session(cwd: &str, workspace: Option<&str>) -> Descriptor {
        Descriptor {
            id: SessionId::new(),
            cwd: cwd.into(),
            workspace: workspace.map(|dir| WorkspaceInfo {
                repo_url: "/src/app".into(),
                sha: "abc".into(),
                git_ref: None,
                dir: dir.into(),
                branch: None,
                materialized_at: 1,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn directories_may_not_overlap_a_workspace() {
        let fleet = [
            session("/w/app-1/src", Some("/w/app-1")),
            session("/home/u/plain", None),
        ];
        let check = |cwd: &str, new: Option<&str>| {
            check_overlap(fleet.iter(), Path::new(cwd), new.map(Path::new)).is_ok()
        };
        assert!(!check("/w/app-1", None));
        assert!(!check("/w/app-1/src/deep", None));
        assert!(
            check("/w/app-10", None),
            "a sibling with a longer name is apart"
        );
        assert!(
            check("/home/u/plain", None),
            "two plain sessions may share a directory"
        );
        // A new workspace holding another session's cwd.
        assert!(!check("/w/x", Some("/home/u")));
        assert!(check("/w/app-2", Some("/w/app-2")));
    }

    #[test]
    fn a_cwd_inside_the_repository_maps_into_the_copy() {
        let copy = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(copy.path().join("src/lib")).unwrap();
        let top = Path::new("/home/u/app");
        let at = |cwd: &str| mapped_cwd(cwd, Some(top), copy.path());
        let root = copy.path().display().to_string();
        assert_eq!(
            at("/home/u/app/src/lib"),
            copy.path().join("src/lib").display().to_string()
        );
        assert_eq!(at("/home/u/app"), root);
        assert_eq!(at("/home/u/app/"), root);
        // Outside the repository, or a directory the copy lacks (untracked), or no top level.
        assert_eq!(at("/tmp"), root);
        assert_eq!(at("/home/u/app/build"), root);
        assert_eq!(mapped_cwd("/home/u/app/src", None, copy.path()), root);
    }
}
