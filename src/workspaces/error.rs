//! What can go wrong with a workspace, in the spec's words (§2.8, "workspace codes"). Every
//! error carries the phase it happened in; the server maps each problem to its wire code in
//! `server::error`, with `data.phase`.

use super::loss::Loss;
use super::phase::Phase;

/// A workspace problem and the phase it stopped.
#[derive(Debug, thiserror::Error)]
#[error("{problem} (while {})", phase.as_str())]
pub struct WorkspaceError {
    /// Where it stopped.
    pub phase: Phase,
    /// What went wrong.
    pub problem: WorkspaceProblem,
}

/// What went wrong. Details name what the user gave (a ref, a path), never a credential.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceProblem {
    /// The path is not inside a git repository.
    #[error("{0} is not a git repository")]
    NotAGitRepo(String),
    /// The repository has no commit to start from.
    #[error("the repository has no commits")]
    NoCommits,
    /// The ref or sha does not name a commit of the repository.
    #[error("{0} does not name a commit of the repository")]
    RefNotFound(String),
    /// The tree at the commit has submodules, which a copy would leave empty.
    #[error("the tree has submodules ({0}), which the workspace could not include")]
    HasSubmodules(String),
    /// The tree at the commit keeps files in Git LFS, which a copy would leave as pointers.
    #[error("the tree keeps files in Git LFS, which the workspace could not include")]
    LfsUnsupported,
    /// The workspace's directory or branch exists already.
    #[error("{0} exists already")]
    Exists(String),
    /// Removing the workspace would lose work.
    #[error("the workspace has {0}; forget with force to remove it anyway")]
    Dirty(Loss),
    /// The URL carries a credential (`user:password@`, a token as user).
    #[error("the URL carries a credential; give it through a credential helper instead")]
    CredentialInUrl,
    /// The URL is not one git can clone from here.
    #[error("{0}")]
    InvalidUrl(String),
    /// `git clone` failed.
    #[error("cloning failed: {0}")]
    CloneFailed(String),
    /// Sending the copy into its host failed.
    #[error("sending the workspace to its host failed: {0}")]
    TransferFailed(String),
    /// The copy on its host is not what was sent.
    #[error("the workspace on its host is not what was sent: {0}")]
    Mismatch(String),
    /// The claimed directory overlaps another session's.
    #[error("{0}")]
    Overlap(String),
    /// The daemon was stopped while the workspace was being made.
    #[error("the daemon stopped while the workspace was being made")]
    Interrupted,
    /// git itself failed in a way none of the above explains (not found, a crash).
    #[error("git failed: {0}")]
    Git(String),
}

impl WorkspaceError {
    /// `problem`, stopped in `phase`.
    pub fn at(phase: Phase, problem: WorkspaceProblem) -> WorkspaceError {
        WorkspaceError { phase, problem }
    }
}
