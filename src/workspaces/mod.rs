//! Workspaces: each agent in a copy of its own of a repository at a commit (spec §2.6, §3.5
//! step 9, §10). This module knows git and the copy; the session's spawn decides when to make
//! one, and the store records each materialization's phase before the phase starts.
//!
//! - [`source`]: the request checked and the commit resolved, before anything is written.
//! - [`status`]: where a copy stands against what it was made from.
//! - [`clone`]: a repository at a URL becomes a clone on a branch of its own.
//! - [`worktree`]: a repository on this machine becomes a worktree on a branch of its own.
//! - [`orphan`]: copies no session owns, weighed and removed for what they are on disk.
//! - [`git`]: how the daemon runs git (never prompting, without withheld variables).
//! - [`record`]: a workspace as the store keeps it.
//! - [`loss`]: what removing a copy would lose.
//! - [`phase`], [`error`]: where a materialization is, and what went wrong, in the spec's
//!   words.

pub mod clone;
pub mod error;
pub mod git;
pub mod loss;
pub mod orphan;
pub mod phase;
pub mod record;
pub mod source;
pub mod status;
pub mod worktree;

pub use error::{WorkspaceError, WorkspaceProblem};
pub use loss::Loss;
pub use phase::Phase;
