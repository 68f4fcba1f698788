//! Workspace directories no session owns (`atc workspaces prune`): under the workspaces' root,
//! a copy whose session was forgotten while its removal failed, or whose spawn died between
//! the copy and the session. Each is weighed by what it is on disk, since its row may be gone:
//! a worktree (`.git` is a file naming its repository) keeps its branch there, so only work on
//! no branch is lost; a clone (`.git` is a directory) loses whatever was not pushed; anything
//! else is a directory git never finished, lost whole unless empty.

use std::path::{Path, PathBuf};

use super::error::{WorkspaceError, WorkspaceProblem};
use super::git::Git;
use super::loss::Loss;
use super::phase::Phase;

/// What a directory under the root is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A git worktree of a repository elsewhere.
    Worktree,
    /// A repository of its own (a clone).
    Clone,
    /// Neither: a copy git never finished.
    Unfinished,
}

/// What the directory `dir` is.
pub fn shape(dir: &Path) -> Shape {
    let dot_git = dir.join(".git");
    if dot_git.is_file() {
        Shape::Worktree
    } else if dot_git.is_dir() {
        Shape::Clone
    } else {
        Shape::Unfinished
    }
}

/// Every directory directly under `root` (none when it does not exist yet).
pub fn dirs_under(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// What removing the copy at `dir` would lose, by what it is on disk (an orphan's row may be
/// gone; a listed session's copy is weighed the same way).
pub fn weigh(git: &Git, dir: &Path) -> Result<Loss, WorkspaceError> {
    match shape(dir) {
        Shape::Worktree => super::worktree::Worktree::loss(git, dir),
        Shape::Clone => super::clone::loss(git, dir),
        Shape::Unfinished => {
            let files = std::fs::read_dir(dir).map(|r| r.count()).unwrap_or(0);
            Ok(Loss {
                changed_files: files,
                unkept_commits: 0,
            })
        }
    }
}

/// Removes the directory `dir` whatever it holds; a worktree's repository is told, and its
/// branch stays there.
pub fn remove(git: &Git, dir: &Path) -> Result<(), WorkspaceError> {
    // A worktree's repository, read before the directory goes: `git worktree prune` there
    // then forgets it.
    let common = (shape(dir) == Shape::Worktree)
        .then(|| {
            git.run(
                dir,
                &["rev-parse", "--path-format=absolute", "--git-common-dir"],
            )
            .ok()
        })
        .flatten()
        .map(|c| PathBuf::from(c.trim()));
    std::fs::remove_dir_all(dir).map_err(|e| {
        WorkspaceError::at(
            Phase::Ready,
            WorkspaceProblem::Git(format!("cannot remove {}: {e}", dir.display())),
        )
    })?;
    if let Some(common) = common {
        // A failure leaves a stale entry git prunes by itself later.
        let _ = git.run(&common, &["worktree", "prune"]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use atc_testkit::git_repo::{git_in, TestRepo};

    #[test]
    fn each_shape_is_weighed_and_removed_for_what_it_is() {
        let (git, repo, root) = (
            Git::default(),
            TestRepo::with_files(1),
            tempfile::tempdir().unwrap(),
        );
        let wt = root.path().join("wt");
        repo.git(&[
            "worktree",
            "add",
            "-q",
            "-b",
            "atc/x",
            &wt.display().to_string(),
        ]);
        let cl = root.path().join("cl");
        git_in(
            root.path(),
            &["clone", "-q", &repo.path().display().to_string(), "cl"],
        );
        let half = root.path().join("half");
        std::fs::create_dir(&half).unwrap();
        std::fs::write(root.path().join("a-file"), "not a dir").unwrap();
        assert_eq!(
            dirs_under(root.path()),
            [cl.clone(), half.clone(), wt.clone()]
        );
        assert_eq!(
            (shape(&wt), shape(&cl), shape(&half)),
            (Shape::Worktree, Shape::Clone, Shape::Unfinished)
        );

        git_in(
            &wt,
            &["commit", "-q", "--allow-empty", "-m", "on its branch"],
        );
        assert!(weigh(&git, &wt).unwrap().is_empty(), "its branch stays");
        git_in(&cl, &["commit", "-q", "--allow-empty", "-m", "unpushed"]);
        assert_eq!(weigh(&git, &cl).unwrap().unkept_commits, 1);
        assert!(weigh(&git, &half).unwrap().is_empty());
        std::fs::write(half.join("x"), "y").unwrap();
        assert_eq!(weigh(&git, &half).unwrap().changed_files, 1);

        for dir in [&wt, &cl, &half] {
            remove(&git, dir).unwrap();
            assert!(!dir.exists());
        }
        assert!(!repo.git(&["worktree", "list"]).contains("wt"));
        assert!(!repo.git(&["branch", "--list", "atc/x"]).trim().is_empty());
    }
}
