//! Real git repositories for the workspace tests (the daemon's unit tests and `tests/it`),
//! made in a temporary directory with a fixed identity so commits work on any machine.

use std::path::Path;
use std::process::Command;

/// A repository in a temporary directory, removed on drop.
pub struct TestRepo {
    dir: tempfile::TempDir,
}

impl TestRepo {
    /// A repository with no commits, on branch `main`.
    pub fn empty() -> TestRepo {
        let repo = TestRepo {
            dir: tempfile::tempdir().expect("a temporary directory"),
        };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    /// A repository on `main` with one commit of `files` small files.
    pub fn with_files(files: usize) -> TestRepo {
        let repo = TestRepo::empty();
        for i in 0..files {
            repo.write(&format!("src/f{i}.txt"), &format!("file {i}\n"));
        }
        repo.commit("initial");
        repo
    }

    /// Its work tree.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `text` at `rel`, making its directories.
    pub fn write(&self, rel: &str, text: &str) {
        let path = self.path().join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("directories");
        }
        std::fs::write(path, text).expect("a file");
    }

    /// Stages everything and commits; the new commit's id.
    pub fn commit(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.git(&["rev-parse", "HEAD"]).trim().to_string()
    }

    /// Runs git here with a fixed identity; its stdout. Panics on failure (a test setup).
    pub fn git(&self, args: &[&str]) -> String {
        git_in(self.path(), args)
    }
}

/// Runs git in `dir` with a fixed identity; its stdout. Panics on failure (a test setup).
pub fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=atc test",
            "-c",
            "user.email=test@atc.invalid",
        ])
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
