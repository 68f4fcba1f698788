//! A workspace from a URL: a clone of its own, checked out on a branch of its own. Nothing of
//! it outlives the workspace but what was pushed, so its weighing counts commits on no
//! remote-tracking branch as work that would be lost.
//!
//! The URL was checked before (`source::check_url`: a transport git clones over, no credential
//! in it). git asks the user's credential helpers, never a person (`GIT_TERMINAL_PROMPT=0`).

use std::path::{Path, PathBuf};

use super::error::{WorkspaceError, WorkspaceProblem};
use super::git::{Git, GitFailure};
use super::loss::Loss;
use super::phase::Phase;
use super::source::{check_complete, Pick, Resolved};

/// A clone to make.
#[derive(Debug, Clone)]
pub struct Clone {
    /// Where from (checked, without a credential).
    pub url: String,
    /// Where to, which must not exist yet.
    pub dir: PathBuf,
    /// The branch made for the session.
    pub branch: String,
    /// Which commit.
    pub pick: Pick,
}

/// git's failure in a phase, in the spec's words: `clone_failed` with git's last line. The
/// URL asked for has no credential, but git may name another (an `insteadOf` rewrite from the
/// user's config): any `user@` part of a URL in the line is cut.
fn failed(phase: Phase, e: GitFailure) -> WorkspaceError {
    WorkspaceError::at(
        phase,
        WorkspaceProblem::CloneFailed(without_userinfo(&e.to_string())),
    )
}

/// `text` with the user part of every `scheme://user@host` in it removed.
fn without_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| c == '/' || c.is_whitespace() || c == '\'')
            .unwrap_or(tail.len());
        match tail[..authority_end].rfind('@') {
            Some(user_end) => rest = &tail[user_end + 1..],
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

impl Clone {
    /// Phase `resolving`: asks the remote whether the ref exists before anything is fetched
    /// (`ref_not_found` costs no clone). A sha can only be looked for once fetched.
    pub fn check_remote(&self, git: &Git, cwd: &Path) -> Result<(), WorkspaceError> {
        let pattern = match &self.pick {
            Pick::Ref(r) => r.as_str(),
            Pick::Head | Pick::Sha(_) => "HEAD",
        };
        let listed = git
            .run(cwd, &["ls-remote", "--", &self.url, pattern])
            .map_err(|e| failed(Phase::Resolving, e))?;
        if listed.trim().is_empty() {
            return Err(WorkspaceError::at(
                Phase::Resolving,
                match &self.pick {
                    Pick::Ref(r) => WorkspaceProblem::RefNotFound(r.clone()),
                    _ => WorkspaceProblem::NoCommits,
                },
            ));
        }
        Ok(())
    }

    /// Phase `cloning`: clones without a checkout, resolves the commit in the clone, refuses a
    /// tree a copy could not carry, then checks out the session's branch there. Anything
    /// refused or failed removes the clone.
    pub fn make(&self, git: &Git, cwd: &Path) -> Result<Resolved, WorkspaceError> {
        if self.dir.exists() {
            return Err(WorkspaceError::at(
                Phase::Cloning,
                WorkspaceProblem::Exists(self.dir.display().to_string()),
            ));
        }
        if let Some(parent) = self.dir.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                WorkspaceError::at(
                    Phase::Cloning,
                    WorkspaceProblem::Git(format!("cannot make {}: {e}", parent.display())),
                )
            })?;
        }
        let dir = self.dir.to_string_lossy().into_owned();
        let made = git
            .run(
                cwd,
                &["clone", "--quiet", "--no-checkout", "--", &self.url, &dir],
            )
            .map_err(|e| failed(Phase::Cloning, e))
            .and_then(|_| self.check_out(git));
        if made.is_err() {
            // Best effort: a failed clone may have left a partial directory.
            let _ = remove(&self.dir);
        }
        made
    }

    fn check_out(&self, git: &Git) -> Result<Resolved, WorkspaceError> {
        let candidates: Vec<String> = match &self.pick {
            Pick::Head => vec!["HEAD".into()],
            // A branch is `origin/<ref>` in a fresh clone; a tag or any other ref by itself.
            Pick::Ref(r) => vec![format!("refs/remotes/origin/{r}"), r.clone()],
            Pick::Sha(s) => vec![s.clone()],
        };
        let sha = candidates
            .iter()
            .find_map(|c| {
                git.run(
                    &self.dir,
                    &[
                        "rev-parse",
                        "--verify",
                        "-q",
                        "--end-of-options",
                        &format!("{c}^{{commit}}"),
                    ],
                )
                .ok()
            })
            .map(|s| s.trim().to_string())
            .ok_or_else(|| {
                let named = match &self.pick {
                    Pick::Head => return WorkspaceProblem::NoCommits,
                    Pick::Ref(r) | Pick::Sha(r) => r.clone(),
                };
                WorkspaceProblem::RefNotFound(named)
            })
            .map_err(|p| WorkspaceError::at(Phase::Cloning, p))?;
        check_complete(git, &self.dir, &sha)
            .map_err(|e| WorkspaceError::at(Phase::Cloning, e.problem))?;
        git.run(
            &self.dir,
            &[
                "checkout",
                "--quiet",
                "--no-track",
                "-b",
                &self.branch,
                &sha,
            ],
        )
        .map_err(|e| failed(Phase::Cloning, e))?;
        Ok(Resolved {
            sha,
            git_ref: self.pick.git_ref().map(str::to_string),
        })
    }
}

/// What removing the clone at `dir` would lose: uncommitted files, and commits on no
/// remote-tracking branch (the clone and its branches go with it).
pub fn loss(git: &Git, dir: &Path) -> Result<Loss, WorkspaceError> {
    Loss::of_repo(git, dir, &["HEAD", "--branches", "--not", "--remotes"])
}

/// Removes the clone at `dir`, whatever it holds (callers weigh it first).
pub fn remove(dir: &Path) -> Result<(), WorkspaceError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(WorkspaceError::at(
            Phase::Ready,
            WorkspaceProblem::Git(format!("cannot remove {}: {e}", dir.display())),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atc_testkit::git_repo::{git_in, TestRepo};

    fn clone_of(repo: &TestRepo, root: &Path, pick: Pick) -> Clone {
        Clone {
            url: format!("file://{}", repo.path().display()),
            dir: root.join("c"),
            branch: "atc/s-1".into(),
            pick,
        }
    }

    #[test]
    fn a_clone_checks_out_its_own_branch_at_the_ref_and_weighs_unpushed_work() {
        let (git, repo, root) = (
            Git::default(),
            TestRepo::with_files(2),
            tempfile::tempdir().unwrap(),
        );
        repo.git(&["branch", "feature"]);
        let head = repo.git(&["rev-parse", "HEAD"]).trim().to_string();
        let c = clone_of(&repo, root.path(), Pick::Ref("feature".into()));
        c.check_remote(&git, root.path()).unwrap();
        let resolved = c.make(&git, root.path()).unwrap();
        assert_eq!(
            (resolved.sha.as_str(), resolved.git_ref.as_deref()),
            (head.as_str(), Some("feature"))
        );
        assert_eq!(
            git_in(&c.dir, &["branch", "--show-current"]).trim(),
            "atc/s-1"
        );
        assert!(c.dir.join("src/f1.txt").is_file());
        assert!(loss(&git, &c.dir).unwrap().is_empty());
        git_in(&c.dir, &["commit", "-q", "--allow-empty", "-m", "unpushed"]);
        std::fs::write(c.dir.join("new.txt"), "x").unwrap();
        assert_eq!(
            loss(&git, &c.dir).unwrap(),
            Loss {
                changed_files: 1,
                unkept_commits: 1
            }
        );
        remove(&c.dir).unwrap();
        assert!(!c.dir.exists());
        remove(&c.dir).unwrap();
    }

    #[test]
    fn credentials_git_names_are_cut_from_its_failures() {
        assert_eq!(
            without_userinfo("fatal: unable to access 'https://tok:x@h/r/': no"),
            "fatal: unable to access 'https://h/r/': no"
        );
        assert_eq!(without_userinfo("no url here"), "no url here");
        assert_eq!(
            without_userinfo("a file:///r and ssh://git@h/r"),
            "a file:///r and ssh://h/r"
        );
    }

    #[test]
    fn a_missing_ref_or_sha_or_repository_leaves_nothing() {
        let (git, repo, root) = (
            Git::default(),
            TestRepo::with_files(1),
            tempfile::tempdir().unwrap(),
        );
        let c = clone_of(&repo, root.path(), Pick::Ref("nope".into()));
        let e = c.check_remote(&git, root.path()).unwrap_err();
        assert!(
            matches!(e.problem, WorkspaceProblem::RefNotFound(_)),
            "{e:?}"
        );
        let c = clone_of(&repo, root.path(), Pick::Sha("0123456789abcdef".into()));
        let e = c.make(&git, root.path()).unwrap_err();
        assert!(
            matches!(e.problem, WorkspaceProblem::RefNotFound(_)),
            "{e:?}"
        );
        assert!(!c.dir.exists());
        let gone = Clone {
            url: "file:///nowhere/at/all".into(),
            ..c
        };
        let e = gone.check_remote(&git, root.path()).unwrap_err();
        assert!(
            matches!(e.problem, WorkspaceProblem::CloneFailed(_)),
            "{e:?}"
        );
    }
}
