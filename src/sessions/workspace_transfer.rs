//! A workspace sent into a remote host (spec §3.5 step 9 on an imp): the commit resolved and
//! archived on this machine (a `url` cloned here first, into a staging clone that goes right
//! after), the host readied, the archive unpacked into `<guestDir>/sessions/<id>/workspace`
//! through the provider's `transferArchive`, and the copy verified through its `runCommand`.
//!
//! What goes in is the tree at the commit and nothing else: `git archive` carries no `.git`,
//! so no history, no remote configuration and no credential a `.git/config` might hold. The
//! unpacking runs with impd's environment, not the daemon's, so no withheld variable goes
//! either. A copy on a remote host has no history, so there is nothing for a forget to weigh:
//! forgetting an imp session destroys its host, behind its own confirmation.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use bytes::Bytes;

use super::session_error::SessionError;
use super::workspace_step::{blocking, stored, Made, Workspaces};
use crate::clock::now_ms;
use crate::providers::{ExecutionProvider, RunRequest};
use crate::workspaces::git::Git;
use crate::workspaces::record::Materialization;
use crate::workspaces::source::{self, Ask, Resolved, Source};
use crate::workspaces::{clone, Phase, WorkspaceError, WorkspaceProblem};
use atc_protocol::workspace::WorkspaceInfo;
use atc_protocol::SessionId;

/// The tree at a commit, as sent.
struct Tree {
    resolved: Resolved,
    archive: Bytes,
    /// Entries that are not directories: what the verify counts on the host.
    files: usize,
}

/// The tar of the tree at `resolved.sha` in the repository at `repo`, and how many of its
/// entries are not directories (read back from the tar itself, so files an attribute keeps
/// out of archives are not expected on the host).
fn archive(git: &Git, repo: &Path, resolved: Resolved) -> Result<Tree, WorkspaceError> {
    let failed = |e: String| WorkspaceError::at(Phase::Resolving, WorkspaceProblem::Git(e));
    let archive = git
        .run_bytes(repo, &["archive", "--format=tar", &resolved.sha])
        .map_err(|e| failed(e.to_string()))?;
    let mut tar = Command::new("tar")
        .args(["-t", "-f", "-"])
        .env_remove("TAR_OPTIONS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| failed(format!("tar could not start: {e}")))?;
    let mut stdin = tar
        .stdin
        .take()
        .ok_or_else(|| failed("tar took no input".into()))?;
    let bytes = archive.clone();
    // Fed from a thread of its own: tar lists while it reads, and a full pipe both ways would
    // hold both sides.
    let feeder = std::thread::spawn(move || stdin.write_all(&bytes));
    let listed = tar
        .wait_with_output()
        .map_err(|e| failed(format!("tar failed: {e}")))?;
    let fed = feeder.join().map(|r| r.is_ok()).unwrap_or(false);
    if !listed.status.success() || !fed {
        return Err(failed("tar could not read the archive".into()));
    }
    let files = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter(|l| !l.is_empty() && !l.ends_with('/'))
        .count();
    Ok(Tree {
        resolved,
        archive: archive.into(),
        files,
    })
}

impl Workspaces {
    /// Makes `row`'s workspace on the remote host of `provider` (the host keyed by the
    /// session's id), recording each phase first. On a failure once the host was readied,
    /// the host made for this spawn is taken back.
    pub(super) async fn send_in(
        &self,
        row: &Materialization,
        ask: Ask,
        provider: Arc<dyn ExecutionProvider>,
    ) -> Result<Made, SessionError> {
        let id = row.session_id;
        let tree = self.tree(id, ask).await?;
        self.phase(id, Phase::Transferring, Some(&tree.resolved.sha))
            .await?;
        let Some(hosts) = provider.hosts() else {
            tracing::error!(session = %id, "a remote provider without hosts took a workspace");
            return Err(SessionError::Internal);
        };
        let session_dir = hosts.prepare_host(&id.to_string()).await?;
        let dir = session_dir.join("workspace");
        let checked = self.unpack_and_verify(id, &provider, &dir, &tree).await;
        if let Err(e) = checked {
            take_back_host(provider.as_ref(), id).await;
            return Err(e);
        }
        let ready_at = now_ms();
        if let Err(e) = self
            .store
            .workspace_phase(id, Phase::Ready, None, None, ready_at)
            .await
        {
            tracing::error!(session = %id, error = %e, "recording a workspace ready");
            take_back_host(provider.as_ref(), id).await;
            return Err(SessionError::Internal);
        }
        Ok(Made {
            cwd: dir.display().to_string(),
            info: WorkspaceInfo {
                repo_url: row.repo_url.clone(),
                sha: tree.resolved.sha,
                git_ref: tree.resolved.git_ref,
                dir: dir.display().to_string(),
                branch: None,
                materialized_at: ready_at,
            },
        })
    }

    /// The tree to send: resolved in a local repository, or in a staging clone of a URL made
    /// under the workspaces' root and removed once archived.
    async fn tree(&self, id: SessionId, ask: Ask) -> Result<Tree, SessionError> {
        let git = self.git.clone();
        match ask.source {
            Source::Path(repo) => {
                let pick = ask.pick;
                blocking(move || {
                    let resolved = source::resolve(&git, &repo, &pick)?;
                    source::check_complete(&git, &repo, &resolved.sha)?;
                    archive(&git, &repo, resolved)
                })
                .await
            }
            Source::Url(url) => {
                let job = clone::Clone {
                    url,
                    dir: self.root.join(format!(".staging-{id}")),
                    branch: format!("atc/staging-{id}"),
                    pick: ask.pick,
                };
                self.check_remote(&job).await?;
                self.phase(id, Phase::Cloning, None).await?;
                let (git, root) = (self.git.clone(), self.root.clone());
                blocking(move || {
                    let made = job
                        .make(&git, &root)
                        .and_then(|resolved| archive(&git, &job.dir, resolved));
                    // The staging clone goes whatever happened; a removal that fails leaves
                    // an orphan `prune` finds.
                    let _ = clone::remove(&job.dir);
                    made
                })
                .await
            }
        }
    }

    /// Phases `transferring` (the dir recorded, the archive unpacked) and `verifying` (as
    /// many files found there as were sent).
    async fn unpack_and_verify(
        &self,
        id: SessionId,
        provider: &Arc<dyn ExecutionProvider>,
        dir: &Path,
        tree: &Tree,
    ) -> Result<(), SessionError> {
        stored(
            self.store.workspace_set_dir(id, dir).await,
            "recording a workspace's directory",
        )?;
        let at = |phase, problem| SessionError::Workspace(WorkspaceError::at(phase, problem));
        provider
            .transfer_archive(
                tree.archive.clone(),
                dir.to_path_buf(),
                Some(id.to_string()),
            )
            .await
            .map_err(|e| {
                at(
                    Phase::Transferring,
                    WorkspaceProblem::TransferFailed(e.to_string()),
                )
            })?;
        self.phase(id, Phase::Verifying, None).await?;
        let counted = provider
            .run_command(RunRequest {
                argv: ["sh", "-c", "find . ! -type d | wc -l"]
                    .map(String::from)
                    .to_vec(),
                cwd: PathBuf::from(dir),
                stdin: Bytes::new(),
                host_key: Some(id.to_string()),
            })
            .await
            .map_err(|e| {
                at(
                    Phase::Verifying,
                    WorkspaceProblem::TransferFailed(e.to_string()),
                )
            })?;
        let found = String::from_utf8_lossy(&counted.stdout)
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|_| counted.success());
        if found != Some(tree.files) {
            let found = found.map_or("no count".to_string(), |n| n.to_string());
            return Err(at(
                Phase::Verifying,
                WorkspaceProblem::Mismatch(format!(
                    "{} files sent, {found} on the host",
                    tree.files
                )),
            ));
        }
        Ok(())
    }
}

/// Destroys the host a failed spawn readied for itself (its key is the new session's id, so
/// no one else's host); a failure is logged, and the host is an orphan impd still lists.
async fn take_back_host(provider: &dyn ExecutionProvider, id: SessionId) {
    let Some(hosts) = provider.hosts() else {
        return;
    };
    if let Err(e) = hosts.destroy_host(&id.to_string()).await {
        tracing::error!(session = %id, error = %e, "a failed workspace's host stays");
    }
}
