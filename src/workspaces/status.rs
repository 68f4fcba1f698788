//! Where a workspace stands against what it was made from (`GET /v1/sessions/{id}/workspace`):
//! its branch and commit, commits ahead of its base and behind its ref, the files changed and
//! not committed, and a diff stat. Read-only: git is asked with `--no-optional-locks`, so a
//! look never takes the index lock from the agent working there.

use std::path::Path;

use atc_protocol::workspace::{ChangedFile, DiffStat, WorkspaceStatus};

use super::error::{WorkspaceError, WorkspaceProblem};
use super::git::Git;
use super::phase::Phase;

/// Most changed files listed.
pub const MAX_CHANGED: usize = 1000;

/// The status of the copy at `dir`, made at `base` from `git_ref` (if one was asked for).
pub fn status(
    git: &Git,
    dir: &Path,
    base: &str,
    git_ref: Option<&str>,
) -> Result<WorkspaceStatus, WorkspaceError> {
    let ask = |args: &[&str]| {
        let mut all = vec!["--no-optional-locks"];
        all.extend_from_slice(args);
        git.run(dir, &all)
            .map_err(|e| WorkspaceError::at(Phase::Ready, WorkspaceProblem::Git(e.to_string())))
    };
    let count = |text: String| text.trim().parse::<u64>().unwrap_or(0);
    let branch = ask(&["branch", "--show-current"])?.trim().to_string();
    let head = ask(&["rev-parse", "HEAD"])?.trim().to_string();
    let ahead = count(ask(&["rev-list", "--count", &format!("{base}..HEAD")])?);
    // A ref that no longer resolves (deleted since) has nothing to be behind.
    let behind = match git_ref {
        Some(r) => ask(&["rev-list", "--count", &format!("HEAD..{r}"), "--"])
            .map(count)
            .unwrap_or(0),
        None => 0,
    };
    let porcelain = ask(&["status", "--porcelain=v1", "-z", "--untracked-files=all"])?;
    let (changed, changed_truncated) = changed_files(&porcelain);
    let diff_stat = shortstat(&ask(&["diff", "--shortstat", base])?);
    Ok(WorkspaceStatus {
        dir: dir.display().to_string(),
        branch: (!branch.is_empty()).then_some(branch),
        base: base.to_string(),
        git_ref: git_ref.map(str::to_string),
        head,
        ahead,
        behind,
        changed,
        changed_truncated,
        diff_stat,
    })
}

/// Reads `git status --porcelain=v1 -z`: `XY path\0`, a rename or copy followed by its
/// origin as one more `\0`-ended field. At most [`MAX_CHANGED`], and whether there were more.
fn changed_files(porcelain: &str) -> (Vec<ChangedFile>, bool) {
    let mut fields = porcelain.split('\0').filter(|f| !f.is_empty());
    let mut out = Vec::new();
    while let Some(entry) = fields.next() {
        let (Some(status), Some(path)) = (entry.get(..2), entry.get(3..)) else {
            continue;
        };
        if status.starts_with('R') || status.starts_with('C') {
            // The origin of a rename or copy.
            fields.next();
        }
        if out.len() == MAX_CHANGED {
            return (out, true);
        }
        out.push(ChangedFile {
            path: path.to_string(),
            status: status.to_string(),
        });
    }
    (out, false)
}

/// Reads `git diff --shortstat`: ` 3 files changed, 10 insertions(+), 2 deletions(-)`, any
/// part of which may be missing.
fn shortstat(text: &str) -> DiffStat {
    let mut stat = DiffStat::default();
    for part in text.split(',') {
        let mut words = part.split_whitespace();
        let (Some(n), Some(what)) = (words.next(), words.next()) else {
            continue;
        };
        let n = n.parse().unwrap_or(0);
        match what {
            w if w.starts_with("file") => stat.files = n,
            w if w.starts_with("insertion") => stat.insertions = n,
            w if w.starts_with("deletion") => stat.deletions = n,
            _ => {}
        }
    }
    stat
}

#[cfg(test)]
mod tests {
    use super::*;
    use atc_testkit::git_repo::{git_in, TestRepo};

    #[test]
    fn porcelain_and_shortstat_are_read_whole() {
        let (files, more) = changed_files(" M a.txt\0R  new.txt\0old.txt\0?? dir/b c.txt\0");
        let got: Vec<_> = files
            .iter()
            .map(|f| (f.status.as_str(), f.path.as_str()))
            .collect();
        assert_eq!(
            got,
            [(" M", "a.txt"), ("R ", "new.txt"), ("??", "dir/b c.txt")]
        );
        assert!(!more);
        let many: String = (0..MAX_CHANGED + 1).map(|i| format!("?? f{i}\0")).collect();
        let (files, more) = changed_files(&many);
        assert_eq!((files.len(), more), (MAX_CHANGED, true));
        assert_eq!(
            shortstat(" 3 files changed, 10 insertions(+), 2 deletions(-)\n"),
            DiffStat {
                files: 3,
                insertions: 10,
                deletions: 2
            }
        );
        assert_eq!(
            shortstat(" 1 file changed, 1 deletion(-)"),
            DiffStat {
                files: 1,
                insertions: 0,
                deletions: 1
            }
        );
        assert_eq!(shortstat(""), DiffStat::default());
    }

    #[test]
    fn a_copy_reports_its_commits_changes_and_the_ref_moving_on() {
        let repo = TestRepo::with_files(2);
        let base = repo.git(&["rev-parse", "HEAD"]).trim().to_string();
        let copy = tempfile::tempdir().unwrap();
        let dir = copy.path().join("wt");
        repo.git(&[
            "worktree",
            "add",
            "-q",
            "-b",
            "atc/t",
            &dir.display().to_string(),
            &base,
        ]);
        let git = Git::default();
        let fresh = status(&git, &dir, &base, Some("main")).unwrap();
        assert_eq!((fresh.ahead, fresh.behind, fresh.changed.len()), (0, 0, 0));
        assert_eq!(fresh.branch.as_deref(), Some("atc/t"));

        std::fs::write(dir.join("src/f0.txt"), "one\ntwo\n").unwrap();
        git_in(&dir, &["commit", "-qam", "agent work"]);
        std::fs::write(dir.join("untracked.txt"), "x").unwrap();
        std::fs::write(dir.join("src/f1.txt"), "changed\n").unwrap();
        repo.write("main-only.txt", "y");
        repo.commit("main moves on");
        let now = status(&git, &dir, &base, Some("main")).unwrap();
        assert_eq!((now.ahead, now.behind), (1, 1));
        let changed: Vec<_> = now.changed.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(changed, ["src/f1.txt", "untracked.txt"]);
        assert_eq!(now.diff_stat.files, 2);
        assert_ne!(now.head, base);
        // Made at a commit, there is no ref to be behind.
        assert_eq!(status(&git, &dir, &base, None).unwrap().behind, 0);
    }
}
