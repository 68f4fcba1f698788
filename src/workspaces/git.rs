//! Running `git` for the daemon: one blocking call at a time, on a blocking thread, never
//! through a shell, and never able to ask anyone anything.
//!
//! git reads the user's own config (their name, their hooks path, `safe.directory`), since a
//! worktree is made in the user's repository on their behalf. It never prompts
//! (`GIT_TERMINAL_PROMPT=0`, no askpass), speaks C locale, and does not inherit the variables
//! the daemon withholds from every local process (target credentials).

use std::path::Path;
use std::process::{Command, Stdio};

/// The output of a git run that exited 0.
pub type Stdout = String;

/// How a git run failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitFailure {
    /// git could not be started (not installed, not on `PATH`).
    NotStarted(String),
    /// git exited unsuccessfully; its last line of stderr, bounded.
    Exited {
        /// Its exit code; `None` for a signal.
        code: Option<i32>,
        /// The last non-empty line of stderr, at most [`MAX_DETAIL`] bytes.
        stderr: String,
    },
}

/// Longest stderr detail kept: enough for git's one-line reason, never a flood.
pub const MAX_DETAIL: usize = 300;

impl std::fmt::Display for GitFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GitFailure::NotStarted(e) => write!(f, "git could not start: {e}"),
            GitFailure::Exited { code, stderr } => match code {
                Some(c) => write!(f, "git exited {c}: {stderr}"),
                None => write!(f, "git was killed: {stderr}"),
            },
        }
    }
}

/// A git runner: where it runs, and what it must not inherit.
#[derive(Debug, Clone, Default)]
pub struct Git {
    withheld: Vec<String>,
}

impl Git {
    /// A runner that removes `withheld` from git's environment.
    pub fn new(withheld: Vec<String>) -> Git {
        Git { withheld }
    }

    /// The variables git does not inherit.
    pub fn withheld(&self) -> &[String] {
        &self.withheld
    }

    /// Runs `git <args>` in `dir`; stdout on success, as text.
    pub fn run(&self, dir: &Path, args: &[&str]) -> Result<Stdout, GitFailure> {
        let out = self.run_bytes(dir, args)?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Runs `git <args>` in `dir`, answering whether it exited 0; for git's yes-or-no
    /// questions (`cat-file -e`, `grep -q`). Only a git that could not start is an error.
    pub fn ask(&self, dir: &Path, args: &[&str]) -> Result<bool, GitFailure> {
        let status = self
            .command(dir, args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| GitFailure::NotStarted(e.to_string()))?;
        Ok(status.success())
    }

    /// Runs `git <args>` in `dir`, its stdout in memory whole (an archive); stdout on success.
    pub fn run_bytes(&self, dir: &Path, args: &[&str]) -> Result<Vec<u8>, GitFailure> {
        let out = self
            .command(dir, args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| GitFailure::NotStarted(e.to_string()))?;
        if out.status.success() {
            return Ok(out.stdout);
        }
        Err(GitFailure::Exited {
            code: out.status.code(),
            stderr: last_line(&out.stderr),
        })
    }

    fn command(&self, dir: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new("git");
        cmd.current_dir(dir)
            .args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GCM_INTERACTIVE", "never")
            .env("LC_ALL", "C")
            .env_remove("GIT_ASKPASS")
            .env_remove("SSH_ASKPASS")
            // A daemon started from inside a repository's hook must not steer this git
            // at that repository.
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE");
        for name in &self.withheld {
            cmd.env_remove(name);
        }
        cmd
    }
}

/// The last non-empty line of `stderr`, bounded at a character boundary.
fn last_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let mut end = line.len().min(MAX_DETAIL);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_keeps_the_last_line_bounded() {
        assert_eq!(
            last_line(b"warning: x\nfatal: not a git repository\n\n"),
            "fatal: not a git repository"
        );
        let long = "é".repeat(MAX_DETAIL);
        assert!(last_line(long.as_bytes()).len() <= MAX_DETAIL);
    }

    #[test]
    fn git_runs_and_answers() {
        let dir = tempfile::tempdir().unwrap();
        let git = Git::default();
        assert!(git.run(dir.path(), &["init", "-q"]).is_ok());
        assert!(!git
            .ask(dir.path(), &["rev-parse", "--verify", "-q", "HEAD"])
            .unwrap());
        match git.run(dir.path(), &["rev-parse", "--verify", "HEAD"]) {
            Err(GitFailure::Exited {
                code: Some(128),
                stderr,
            }) => {
                assert!(stderr.starts_with("fatal:"), "{stderr}")
            }
            other => panic!("{other:?}"),
        }
    }
}
