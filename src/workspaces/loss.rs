//! What removing a workspace would lose, and how a copy that is a git repository is weighed:
//! its uncommitted files (untracked ones included, ignored ones not), and its commits that
//! nothing outliving the copy holds. What outlives it depends on the copy: a worktree's
//! branches stay in the user's repository, a clone keeps nothing but what was pushed.

use std::path::Path;

use super::error::{WorkspaceError, WorkspaceProblem};
use super::git::Git;
use super::phase::Phase;

/// What removing a workspace would lose.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loss {
    /// Files changed, added or deleted and not committed (untracked files count, ignored ones
    /// do not).
    pub changed_files: usize,
    /// Commits on no branch that outlives the workspace.
    pub unkept_commits: usize,
}

impl Loss {
    /// Whether there is nothing to lose.
    pub fn is_empty(&self) -> bool {
        self.changed_files == 0 && self.unkept_commits == 0
    }

    /// Weighs the repository at `dir`: its uncommitted files, and the commits `unkept` selects
    /// (`git rev-list` arguments naming what the copy holds and what outlives it).
    pub fn of_repo(git: &Git, dir: &Path, unkept: &[&str]) -> Result<Loss, WorkspaceError> {
        let at = |e: super::git::GitFailure| {
            WorkspaceError::at(Phase::Ready, WorkspaceProblem::Git(e.to_string()))
        };
        let status = git
            .run(dir, &["status", "--porcelain", "--untracked-files=all"])
            .map_err(at)?;
        let mut count = vec!["rev-list", "--count"];
        count.extend_from_slice(unkept);
        let commits = git.run(dir, &count).map_err(at)?;
        Ok(Loss {
            changed_files: status.lines().filter(|l| !l.is_empty()).count(),
            unkept_commits: commits.trim().parse().unwrap_or(0),
        })
    }
}

impl std::fmt::Display for Loss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        match (self.changed_files, self.unkept_commits) {
            (0, 0) => write!(f, "nothing to lose"),
            (files, 0) => write!(f, "{files} uncommitted file{}", plural(files)),
            (0, commits) => write!(f, "{commits} commit{} on no other branch", plural(commits)),
            (files, commits) => write!(
                f,
                "{files} uncommitted file{} and {commits} commit{} on no other branch",
                plural(files),
                plural(commits)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loss_says_what_would_go() {
        let loss = |changed_files, unkept_commits| Loss {
            changed_files,
            unkept_commits,
        };
        assert!(loss(0, 0).is_empty());
        assert_eq!(loss(1, 0).to_string(), "1 uncommitted file");
        assert_eq!(loss(0, 2).to_string(), "2 commits on no other branch");
        assert_eq!(
            loss(3, 1).to_string(),
            "3 uncommitted files and 1 commit on no other branch"
        );
    }
}
