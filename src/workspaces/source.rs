//! Where a workspace comes from and which commit it starts at: the request checked before
//! anything runs, the commit resolved, and the tree at that commit checked for what a copy
//! could not carry (submodules, Git LFS). Nothing here writes anything.

use std::path::{Path, PathBuf};

use super::error::{WorkspaceError, WorkspaceProblem};
use super::git::Git;
use super::phase::Phase;

/// Longest ref name taken; git's own limit is the file system's.
const MAX_REF: usize = 255;

/// The repository a workspace is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A repository on this machine: the workspace is a worktree of it.
    Path(PathBuf),
    /// A repository to clone.
    Url(String),
}

/// Which commit of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick {
    /// What `HEAD` is.
    Head,
    /// A branch, tag or other ref.
    Ref(String),
    /// A commit id (7–64 hex digits).
    Sha(String),
}

impl Pick {
    /// `ref` and `sha` as a request gives them; both at once is the caller's `bad_args`.
    pub fn from_fields(git_ref: Option<&str>, sha: Option<&str>) -> Result<Pick, &'static str> {
        match (git_ref, sha) {
            (Some(_), Some(_)) => Err("give 'ref' or 'sha', not both"),
            (Some(r), None) => {
                let bad = r.is_empty()
                    || r.len() > MAX_REF
                    || r.starts_with('-')
                    || r.chars().any(|c| c.is_control() || c == ' ');
                if bad {
                    return Err("'ref' must be a git ref name");
                }
                Ok(Pick::Ref(r.to_string()))
            }
            (None, Some(s)) => {
                if !(7..=64).contains(&s.len()) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err("'sha' must be 7 to 64 hex digits");
                }
                Ok(Pick::Sha(s.to_ascii_lowercase()))
            }
            (None, None) => Ok(Pick::Head),
        }
    }

    /// The ref a descriptor records, if one was asked for.
    pub fn git_ref(&self) -> Option<&str> {
        match self {
            Pick::Ref(r) => Some(r),
            _ => None,
        }
    }
}

/// A spawn's `workspace`, checked for its shape: where from, and which commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    /// The repository.
    pub source: Source,
    /// The commit.
    pub pick: Pick,
}

impl Ask {
    /// The ask as the idempotency payload hashes it (spec §7.3): what the request said.
    pub fn payload(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        match &self.source {
            Source::Path(p) => m.insert("path".into(), p.to_string_lossy().into()),
            Source::Url(u) => m.insert("url".into(), u.clone().into()),
        };
        match &self.pick {
            Pick::Head => None,
            Pick::Ref(r) => m.insert("ref".into(), r.clone().into()),
            Pick::Sha(s) => m.insert("sha".into(), s.clone().into()),
        };
        serde_json::Value::Object(m)
    }
}

/// Checks a clone URL before any git runs: a scheme git clones over (`https`, `http`, `ssh`,
/// `git`, `file`, or scp-like `user@host:path`), and no credential in it.
pub fn check_url(url: &str) -> Result<(), WorkspaceError> {
    let refuse = |p| Err(WorkspaceError::at(Phase::Resolving, p));
    let invalid = |d: &str| WorkspaceProblem::InvalidUrl(d.to_string());
    if url.is_empty() || url.len() > 2048 || url.starts_with('-') {
        return refuse(invalid("'url' must be a git URL"));
    }
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return refuse(invalid(
            "'url' must not contain spaces or control characters",
        ));
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        // scp-like: `[user@]host:path`, never a local path or a transport helper (`ext::`).
        let (user, host_path) = match url.split_once('@') {
            Some((user, rest)) if !user.contains('/') => (Some(user), rest),
            _ => (None, url),
        };
        if user.is_some_and(|u| u.contains(':')) {
            return refuse(WorkspaceProblem::CredentialInUrl);
        }
        return match host_path.split_once(':') {
            Some((host, path))
                if !host.is_empty()
                    && !path.is_empty()
                    && !host.contains('/')
                    && !path.starts_with(':') =>
            {
                Ok(())
            }
            _ => refuse(invalid(
                "'url' must be https://, http://, ssh://, git://, file:// or user@host:path",
            )),
        };
    };
    let authority = rest.split('/').next().unwrap_or("");
    let userinfo = authority.rsplit_once('@').map(|(u, _)| u);
    match scheme.to_ascii_lowercase().as_str() {
        // Any user part of an HTTP URL is a credential (a token as user, or user:password).
        "https" | "http" if userinfo.is_some() => refuse(WorkspaceProblem::CredentialInUrl),
        "https" | "http" | "git" => Ok(()),
        "ssh" if userinfo.is_some_and(|u| u.contains(':')) => {
            refuse(WorkspaceProblem::CredentialInUrl)
        }
        "ssh" => Ok(()),
        "file" if rest.starts_with('/') => Ok(()),
        _ => refuse(invalid(
            "'url' must be https://, http://, ssh://, git://, file:// or user@host:path",
        )),
    }
}

/// A commit, resolved in a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The full commit id.
    pub sha: String,
    /// The ref it was resolved from, if one was asked for.
    pub git_ref: Option<String>,
}

/// Resolves `pick` in the repository at `repo` (any directory inside a work tree, or a bare
/// repository).
pub fn resolve(git: &Git, repo: &Path, pick: &Pick) -> Result<Resolved, WorkspaceError> {
    let at = |p| WorkspaceError::at(Phase::Resolving, p);
    if !repo.is_dir() || git.run(repo, &["rev-parse", "--git-dir"]).is_err() {
        return Err(at(WorkspaceProblem::NotAGitRepo(
            repo.display().to_string(),
        )));
    }
    let has_commits = git
        .run(repo, &["rev-list", "-n", "1", "--all"])
        .map_err(|e| at(WorkspaceProblem::Git(e.to_string())))?;
    if has_commits.trim().is_empty() {
        return Err(at(WorkspaceProblem::NoCommits));
    }
    let (spec, named) = match pick {
        Pick::Head => ("HEAD^{commit}".to_string(), "HEAD"),
        Pick::Ref(r) => (format!("{r}^{{commit}}"), r.as_str()),
        Pick::Sha(s) => (format!("{s}^{{commit}}"), s.as_str()),
    };
    match git.run(
        repo,
        &["rev-parse", "--verify", "-q", "--end-of-options", &spec],
    ) {
        Ok(sha) => Ok(Resolved {
            sha: sha.trim().to_string(),
            git_ref: pick.git_ref().map(str::to_string),
        }),
        // A HEAD that names no commit in a repository with commits: an unborn branch.
        Err(_) if *pick == Pick::Head => Err(at(WorkspaceProblem::NoCommits)),
        Err(_) => Err(at(WorkspaceProblem::RefNotFound(named.to_string()))),
    }
}

/// Refuses a tree a copy could not carry whole: submodules (gitlinks) come out as empty
/// directories, and Git LFS files as pointer text.
pub fn check_complete(git: &Git, repo: &Path, sha: &str) -> Result<(), WorkspaceError> {
    let at = |p| WorkspaceError::at(Phase::Resolving, p);
    let tree = git
        .run(repo, &["ls-tree", "-r", "--full-tree", sha])
        .map_err(|e| at(WorkspaceProblem::Git(e.to_string())))?;
    // `<mode> <type> <object>\t<path>`; a gitlink is mode 160000, type commit.
    if let Some(line) = tree.lines().find(|l| l.starts_with("160000 ")) {
        let path = line.split_once('\t').map(|(_, p)| p).unwrap_or("");
        return Err(at(WorkspaceProblem::HasSubmodules(path.to_string())));
    }
    let lfs = git
        .ask(
            repo,
            &[
                "grep",
                "-q",
                "-F",
                "filter=lfs",
                sha,
                "--",
                ":(glob)**/.gitattributes",
            ],
        )
        .map_err(|e| at(WorkspaceProblem::Git(e.to_string())))?;
    if lfs {
        return Err(at(WorkspaceProblem::LfsUnsupported));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use atc_testkit::git_repo::TestRepo;

    fn problem(e: WorkspaceError) -> String {
        format!("{:?}", e.problem)
    }

    #[test]
    fn picks_are_checked_before_git_runs() {
        assert_eq!(Pick::from_fields(None, None), Ok(Pick::Head));
        assert_eq!(
            Pick::from_fields(Some("main"), None),
            Ok(Pick::Ref("main".into()))
        );
        assert!(Pick::from_fields(Some("a"), Some("abcdef0")).is_err());
        assert!(Pick::from_fields(Some("--upload-pack=x"), None).is_err());
        assert!(Pick::from_fields(Some("a b"), None).is_err());
        assert!(Pick::from_fields(None, Some("abc")).is_err());
        assert!(Pick::from_fields(None, Some("xyzxyzxyz")).is_err());
        assert_eq!(
            Pick::from_fields(None, Some("ABCDEF0")),
            Ok(Pick::Sha("abcdef0".into()))
        );
    }

    #[test]
    fn urls_with_credentials_or_odd_transports_are_refused() {
        for ok in [
            "https://github.com/o/r.git",
            "http://h/r",
            "ssh://git@h/r",
            "git://h/r",
            "file:///srv/r.git",
            "git@github.com:o/r.git",
        ] {
            assert!(check_url(ok).is_ok(), "{ok}");
        }
        for cred in [
            "https://ghp_token@github.com/o/r",
            "https://u:p@h/r",
            "ssh://u:p@h/r",
            "u:p@h:r",
        ] {
            let e = check_url(cred).unwrap_err();
            assert!(
                matches!(e.problem, WorkspaceProblem::CredentialInUrl),
                "{cred}"
            );
            assert!(!e.to_string().contains("token") && !e.to_string().contains(":p@"));
        }
        for bad in [
            "",
            "-u",
            "ext::sh -c x",
            "fd::3",
            "/srv/r",
            "file://r",
            "h r:x",
            "ftp://h/r",
        ] {
            let e = check_url(bad).unwrap_err();
            assert!(
                matches!(e.problem, WorkspaceProblem::InvalidUrl(_)),
                "{bad}: {e:?}"
            );
        }
    }

    #[test]
    fn resolving_names_each_problem() {
        let git = Git::default();
        let plain = tempfile::tempdir().unwrap();
        assert!(
            problem(resolve(&git, plain.path(), &Pick::Head).unwrap_err())
                .starts_with("NotAGitRepo")
        );
        let empty = TestRepo::empty();
        assert_eq!(
            problem(resolve(&git, empty.path(), &Pick::Head).unwrap_err()),
            "NoCommits"
        );
        let repo = TestRepo::with_files(3);
        let head = resolve(&git, repo.path(), &Pick::Head).unwrap();
        assert_eq!(head.sha.len(), 40);
        assert_eq!(head.git_ref, None);
        let main = resolve(&git, repo.path(), &Pick::Ref("main".into())).unwrap();
        assert_eq!(
            (main.sha.as_str(), main.git_ref.as_deref()),
            (head.sha.as_str(), Some("main"))
        );
        let short = resolve(&git, repo.path(), &Pick::Sha(head.sha[..10].into())).unwrap();
        assert_eq!(short.sha, head.sha);
        assert_eq!(
            problem(resolve(&git, repo.path(), &Pick::Ref("nope".into())).unwrap_err()),
            "RefNotFound(\"nope\")"
        );
        assert_eq!(
            problem(resolve(&git, repo.path(), &Pick::Sha("0123456789".into())).unwrap_err()),
            "RefNotFound(\"0123456789\")"
        );
    }

    #[test]
    fn submodules_and_lfs_are_refused() {
        let git = Git::default();
        let repo = TestRepo::with_files(2);
        let sha = resolve(&git, repo.path(), &Pick::Head).unwrap().sha;
        assert!(check_complete(&git, repo.path(), &sha).is_ok());

        repo.write(
            "sub/.gitattributes",
            "*.bin filter=lfs diff=lfs merge=lfs -text\n",
        );
        let lfs = repo.commit("lfs");
        assert_eq!(
            problem(check_complete(&git, repo.path(), &lfs).unwrap_err()),
            "LfsUnsupported"
        );

        let repo = TestRepo::with_files(1);
        let other = TestRepo::with_files(1);
        let gitlink = resolve(&git, other.path(), &Pick::Head).unwrap().sha;
        repo.git(&[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{gitlink},vendor/lib"),
        ]);
        // Committed as staged: `add -A` would drop a gitlink whose directory is missing.
        repo.git(&["commit", "-q", "-m", "submodule"]);
        let sub = repo.git(&["rev-parse", "HEAD"]).trim().to_string();
        assert_eq!(
            problem(check_complete(&git, repo.path(), &sub).unwrap_err()),
            "HasSubmodules(\"vendor/lib\")"
        );
    }
}
