//! A workspace from a repository on this machine: a git worktree on a branch of its own, so
//! the agent's commits land in the user's repository and outlive the workspace. Making one
//! is `git worktree add`, which shares the repository's objects: the copy costs the checkout
//! and nothing more. Removing one keeps its branch, and refuses while it holds work that
//! would be lost.

use std::path::{Path, PathBuf};

use super::error::{WorkspaceError, WorkspaceProblem};
use super::git::Git;
use super::loss::Loss;
use super::phase::Phase;

/// Longest part of a branch name taken from a session's name.
const MAX_SLUG: usize = 40;

/// The branch of a session's worktree: `atc/<name as a slug>-<8 hex of its id>`, so a user
/// reading `git branch` sees which session it was, and two sessions of one name differ.
pub fn branch_name(session_name: &str, session_id: &str) -> String {
    let mut slug = String::new();
    for c in session_name.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
        if slug.len() >= MAX_SLUG {
            break;
        }
    }
    let slug = slug.trim_end_matches('-');
    let short: String = session_id
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(8)
        .collect();
    if slug.is_empty() {
        format!("atc/{short}")
    } else {
        format!("atc/{slug}-{short}")
    }
}

/// Where a session's workspace lives: `<root>/<repository's directory name>-<8 hex of id>`.
pub fn dir_for(root: &Path, repo: &Path, session_id: &str) -> PathBuf {
    let name = repo
        .file_name()
        .and_then(|n| n.to_str())
        .map(|n| n.trim_end_matches(".git"))
        .filter(|n| !n.is_empty())
        .unwrap_or("repo");
    let short: String = session_id
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(8)
        .collect();
    root.join(format!("{name}-{short}"))
}

/// A worktree to make.
#[derive(Debug, Clone)]
pub struct Worktree {
    /// The repository (any directory of it).
    pub repo: PathBuf,
    /// The worktree's directory, which must not exist yet.
    pub dir: PathBuf,
    /// The branch made for it, which must not exist yet.
    pub branch: String,
    /// The commit it starts at.
    pub sha: String,
}

impl Worktree {
    /// Makes the worktree. Refused, with nothing left behind, when its directory or branch
    /// exists already.
    pub fn add(&self, git: &Git) -> Result<(), WorkspaceError> {
        let at = |p| WorkspaceError::at(Phase::Cloning, p);
        if self.dir.exists() {
            return Err(at(WorkspaceProblem::Exists(self.dir.display().to_string())));
        }
        let branch_ref = format!("refs/heads/{}", self.branch);
        let taken = git
            .ask(&self.repo, &["show-ref", "--verify", "-q", &branch_ref])
            .map_err(|e| at(WorkspaceProblem::Git(e.to_string())))?;
        if taken {
            return Err(at(WorkspaceProblem::Exists(format!(
                "branch {}",
                self.branch
            ))));
        }
        if let Some(parent) = self.dir.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                at(WorkspaceProblem::Git(format!(
                    "cannot make {}: {e}",
                    parent.display()
                )))
            })?;
        }
        let dir = self.dir.to_string_lossy();
        let added = git.run(
            &self.repo,
            &[
                "worktree",
                "add",
                "--quiet",
                "--no-track",
                "-b",
                &self.branch,
                &dir,
                &self.sha,
            ],
        );
        if let Err(e) = added {
            // git removes what it made when a checkout fails; what it could not is removed
            // here, so a refusal leaves nothing behind.
            self.discard(git);
            return Err(at(WorkspaceProblem::Git(e.to_string())));
        }
        Ok(())
    }

    /// What removing the worktree at `dir` would lose: uncommitted files, and commits on no
    /// branch (its own branch stays in the repository, so commits on it are kept).
    pub fn loss(git: &Git, dir: &Path) -> Result<Loss, WorkspaceError> {
        Loss::of_repo(git, dir, &["HEAD", "--not", "--branches"])
    }

    /// Removes the worktree at `dir` of `repo`, keeping its branch. Without `force`, refused
    /// with `workspace_dirty` while it holds work that would be lost. A directory already
    /// gone, or a repository that no longer knows it, is removed as far as it exists.
    pub fn remove(git: &Git, repo: &Path, dir: &Path, force: bool) -> Result<(), WorkspaceError> {
        if dir.is_dir() && !force {
            let loss = Worktree::loss(git, dir)?;
            if !loss.is_empty() {
                return Err(WorkspaceError::at(
                    Phase::Ready,
                    WorkspaceProblem::Dirty(loss),
                ));
            }
        }
        let path = dir.to_string_lossy();
        // `--force` here only lets git remove untracked files the check above allowed (or the
        // caller forced); a repository that is gone or no longer lists the worktree leaves
        // the directory to remove by hand below.
        let _ = git.run(repo, &["worktree", "remove", "--force", &path]);
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(|e| {
                WorkspaceError::at(
                    Phase::Ready,
                    WorkspaceProblem::Git(format!("cannot remove {}: {e}", dir.display())),
                )
            })?;
        }
        // The repository forgets a worktree whose directory is gone; a failure leaves only
        // a stale entry git prunes by itself later.
        let _ = git.run(repo, &["worktree", "prune"]);
        Ok(())
    }

    /// Undoes a failed [`Worktree::add`]: the directory and the branch, if they were made.
    fn discard(&self, git: &Git) {
        // Each step is best effort: whatever was not made has nothing to undo.
        let _ = Worktree::remove(git, &self.repo, &self.dir, true);
        let _ = git.run(
            &self.repo,
            &["branch", "-D", "--end-of-options", &self.branch],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atc_testkit::git_repo::{git_in, TestRepo};

    const ID: &str = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";

    #[test]
    fn names_come_from_the_session() {
        assert_eq!(
            branch_name("Fix the parser!", ID),
            "atc/fix-the-parser-0f1e2d3c"
        );
        assert_eq!(branch_name("日本", ID), "atc/0f1e2d3c");
        assert!(branch_name(&"x".repeat(300), ID).len() < 60);
        let root = Path::new("/w");
        assert_eq!(
            dir_for(root, Path::new("/src/app.git"), ID),
            Path::new("/w/app-0f1e2d3c")
        );
        assert_eq!(
            dir_for(root, Path::new("/"), ID),
            Path::new("/w/repo-0f1e2d3c")
        );
    }

    fn worktree(repo: &TestRepo, root: &Path) -> Worktree {
        Worktree {
            repo: repo.path().to_path_buf(),
            dir: dir_for(root, repo.path(), ID),
            branch: branch_name("agent", ID),
            sha: repo.git(&["rev-parse", "HEAD"]).trim().to_string(),
        }
    }

    #[test]
    fn a_worktree_is_made_on_its_own_branch_and_its_commits_outlive_it() {
        let (git, repo, root) = (
            Git::default(),
            TestRepo::with_files(3),
            tempfile::tempdir().unwrap(),
        );
        let wt = worktree(&repo, root.path());
        wt.add(&git).unwrap();
        assert!(wt.dir.join("src/f2.txt").is_file());
        assert_eq!(
            git_in(&wt.dir, &["branch", "--show-current"]).trim(),
            wt.branch
        );
        assert!(Worktree::loss(&git, &wt.dir).unwrap().is_empty());

        // Uncommitted work refuses the removal.
        std::fs::write(wt.dir.join("new.txt"), "x").unwrap();
        let dirty = Worktree::remove(&git, repo.path(), &wt.dir, false).unwrap_err();
        assert!(matches!(
            dirty.problem,
            WorkspaceProblem::Dirty(Loss {
                changed_files: 1,
                unkept_commits: 0
            })
        ));
        assert!(wt.dir.exists());

        // Committed on its branch, nothing is lost: the branch stays.
        git_in(&wt.dir, &["add", "-A"]);
        git_in(
            &wt.dir,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "work",
            ],
        );
        let work = git_in(&wt.dir, &["rev-parse", "HEAD"]);
        Worktree::remove(&git, repo.path(), &wt.dir, false).unwrap();
        assert!(!wt.dir.exists());
        assert_eq!(repo.git(&["rev-parse", &wt.branch]), work);
        assert!(!repo
            .git(&["worktree", "list"])
            .contains(&wt.dir.display().to_string()));
    }

    #[test]
    fn a_detached_commit_counts_as_lost_and_force_removes_anyway() {
        let (git, repo, root) = (
            Git::default(),
            TestRepo::with_files(1),
            tempfile::tempdir().unwrap(),
        );
        let wt = worktree(&repo, root.path());
        wt.add(&git).unwrap();
        git_in(&wt.dir, &["checkout", "-q", "--detach"]);
        git_in(
            &wt.dir,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "stray",
            ],
        );
        let loss = Worktree::loss(&git, &wt.dir).unwrap();
        assert_eq!(
            loss,
            Loss {
                changed_files: 0,
                unkept_commits: 1
            }
        );
        assert!(Worktree::remove(&git, repo.path(), &wt.dir, false).is_err());
        Worktree::remove(&git, repo.path(), &wt.dir, true).unwrap();
        assert!(!wt.dir.exists());
    }

    #[test]
    fn an_existing_directory_or_branch_is_refused_and_nothing_is_left() {
        let (git, repo, root) = (
            Git::default(),
            TestRepo::with_files(1),
            tempfile::tempdir().unwrap(),
        );
        let wt = worktree(&repo, root.path());
        std::fs::create_dir_all(&wt.dir).unwrap();
        assert!(matches!(
            wt.add(&git).unwrap_err().problem,
            WorkspaceProblem::Exists(_)
        ));
        std::fs::remove_dir(&wt.dir).unwrap();
        repo.git(&["branch", &wt.branch]);
        assert!(matches!(
            wt.add(&git).unwrap_err().problem,
            WorkspaceProblem::Exists(_)
        ));
        assert!(!wt.dir.exists());
        // A start that names no commit fails in git, and leaves neither directory nor branch.
        repo.git(&["branch", "-D", &wt.branch]);
        let broken = Worktree {
            sha: "0".repeat(40),
            ..wt.clone()
        };
        assert!(broken.add(&git).is_err());
        assert!(!wt.dir.exists());
        assert!(!git
            .ask(
                repo.path(),
                &[
                    "show-ref",
                    "--verify",
                    "-q",
                    &format!("refs/heads/{}", wt.branch)
                ]
            )
            .unwrap());
    }

    #[test]
    fn removing_what_is_already_gone_succeeds() {
        let (git, repo, root) = (
            Git::default(),
            TestRepo::with_files(1),
            tempfile::tempdir().unwrap(),
        );
        let wt = worktree(&repo, root.path());
        wt.add(&git).unwrap();
        std::fs::remove_dir_all(&wt.dir).unwrap();
        Worktree::remove(&git, repo.path(), &wt.dir, false).unwrap();
        assert!(!repo
            .git(&["worktree", "list"])
            .contains(&wt.dir.display().to_string()));
    }
}
