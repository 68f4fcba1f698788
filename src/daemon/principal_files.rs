//! The principals' token files: `<state dir>/principals/<id>`, one for each principal in
//! config, made and kept like the owner's token file (`state_dir.rs`) and read under the same
//! rules ([`token_file::read`]).
//!
//! The difference is what a bad file costs. The owner's file that cannot be used stops the
//! start (and fails everything closed at a reload); a principal's costs only that principal:
//! its tokens are accepted nowhere until a good file is read, and the log says why, never
//! what the file holds. The owner and the other principals are untouched.
//!
//! A missing or empty file is minted at start (a fresh random token, mode 0600) in a dir of
//! mode 0700; a reload never mints, so deleting a principal's file and sending SIGHUP takes
//! its access away. Files of principals no longer in config are left where they are and
//! never read: only configured ids are looked up.

use std::collections::BTreeMap;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::state_dir::{existing_dir_problem, mint};
use super::token_file;
use crate::server::tokens::{TokenFileError, TokenSet};

/// Each configured principal's token set, or why its file cannot be used, by id.
pub type PrincipalSets = BTreeMap<String, Result<TokenSet, TokenFileError>>;

/// The dir of the principals' token files in `state_dir`.
pub fn dir_of(state_dir: &Path) -> PathBuf {
    state_dir.join("principals")
}

/// The token file of principal `id` (a checked config id, so a plain file name).
pub fn file_of(state_dir: &Path, id: &str) -> PathBuf {
    dir_of(state_dir).join(id)
}

/// At start: makes the dir when it is missing, mints the file of each principal in `ids` that
/// has none (or an empty one), and reads the others.
pub fn prepare<'a>(state_dir: &Path, ids: impl IntoIterator<Item = &'a str>) -> PrincipalSets {
    let ids: Vec<&str> = ids.into_iter().collect();
    if ids.is_empty() {
        // No principals: no dir either, so a daemon without them leaves the state dir as it was.
        return PrincipalSets::new();
    }
    let dir = make_dir(state_dir);
    ids.into_iter()
        .map(|id| {
            let set = dir.clone().and_then(|dir| {
                let path = dir.join(id);
                match token_file::read(&dir, &path) {
                    Ok(Some(set)) => Ok(set),
                    Ok(None) | Err(TokenFileError::Empty) => {
                        mint(&path).map_err(|e| TokenFileError::Unreadable {
                            reason: format!("could not write a fresh token file: {e}"),
                        })
                    }
                    Err(problem) => Err(problem),
                }
            });
            (id.to_string(), set)
        })
        .collect()
}

/// At a reload (SIGHUP): reads the file of each principal in `ids`, never minting: a
/// missing or empty file leaves that principal without a token until the next good read.
pub fn reread(state_dir: &Path, ids: &[String]) -> PrincipalSets {
    let dir = checked_dir(&dir_of(state_dir));
    ids.iter()
        .map(|id| {
            let set = dir.clone().and_then(|dir| {
                token_file::read(&dir, &dir.join(id))?.ok_or_else(|| TokenFileError::Unreadable {
                    reason: "there is no token file".into(),
                })
            });
            (id.clone(), set)
        })
        .collect()
}

/// Logs each principal whose file cannot be used, with why (never the content).
pub fn log_unusable(state_dir: &Path, sets: &PrincipalSets) {
    for (id, set) in sets {
        if let Err(problem) = set {
            tracing::error!(principal = %id, file = %file_of(state_dir, id).display(), %problem,
                "principal's token file unusable: its tokens are refused until a good file is in place and the daemon gets SIGHUP");
        }
    }
}

/// Makes the principals' dir (mode 0700) unless it exists, then checks it.
fn make_dir(state_dir: &Path) -> Result<PathBuf, TokenFileError> {
    let dir = dir_of(state_dir);
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        // Ours: exactly 0700, whatever the umask took off.
        Ok(()) => std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| unreadable_dir(&e.to_string()))?,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(unreadable_dir(&e.to_string())),
    }
    checked_dir(&dir)
}

/// `dir` if it is a directory itself (not a symlink to one) of the daemon's user that no one
/// else may write into: others could put their own token there otherwise.
fn checked_dir(dir: &Path) -> Result<PathBuf, TokenFileError> {
    let meta = std::fs::symlink_metadata(dir).map_err(|e| unreadable_dir(&e.to_string()))?;
    let owner = rustix::process::geteuid().as_raw();
    match existing_dir_problem(meta.is_dir(), meta.uid(), owner, meta.mode()) {
        None => Ok(dir.to_path_buf()),
        Some(problem) => Err(unreadable_dir(&problem.to_string())),
    }
}

fn unreadable_dir(reason: &str) -> TokenFileError {
    TokenFileError::Unreadable {
        reason: format!("the principals' dir: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef";

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    fn private(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    #[test]
    fn each_principal_gets_a_private_file_once() {
        let state = tempfile::tempdir().unwrap();
        let first = prepare(state.path(), ["ci", "bot"]);
        assert_eq!(mode(&dir_of(state.path())), 0o700);
        for id in ["ci", "bot"] {
            let set = first[id].as_ref().unwrap();
            assert_eq!(set.current().len(), 64);
            assert_eq!(mode(&file_of(state.path(), id)), 0o600);
        }
        assert_ne!(first["ci"], first["bot"]);
        // Kept across starts, and read back the same at a reload.
        assert_eq!(prepare(state.path(), ["ci", "bot"]), first);
        assert_eq!(reread(state.path(), &["ci".into(), "bot".into()]), first);
    }

    #[test]
    fn no_principals_make_no_dir() {
        let state = tempfile::tempdir().unwrap();
        assert!(prepare(state.path(), []).is_empty());
        assert!(!dir_of(state.path()).exists());
    }

    #[test]
    fn an_empty_file_is_minted_anew_at_start_but_not_at_a_reload() {
        let state = tempfile::tempdir().unwrap();
        prepare(state.path(), ["ci"]);
        private(&file_of(state.path(), "ci"), "\n");
        assert_eq!(
            reread(state.path(), &["ci".into()])["ci"],
            Err(TokenFileError::Empty)
        );
        std::fs::remove_file(file_of(state.path(), "ci")).unwrap();
        assert!(matches!(
            reread(state.path(), &["ci".into()])["ci"],
            Err(TokenFileError::Unreadable { .. })
        ));
        assert!(!file_of(state.path(), "ci").exists());
        assert!(prepare(state.path(), ["ci"])["ci"].is_ok());
    }

    #[test]
    fn a_bad_file_fails_only_its_principal_and_is_left_as_it_is() {
        let state = tempfile::tempdir().unwrap();
        prepare(state.path(), ["ci"]);
        let bad = file_of(state.path(), "bad");
        private(&bad, "short\n");
        let open = file_of(state.path(), "open");
        std::fs::write(&open, TOKEN).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
        let sets = prepare(state.path(), ["ci", "bad", "open"]);
        assert!(sets["ci"].is_ok());
        assert_eq!(
            sets["bad"],
            Err(TokenFileError::TooShort { line: 1, len: 5 })
        );
        assert_eq!(
            sets["open"],
            Err(TokenFileError::OpenToOthers { mode: 0o644 })
        );
        assert_eq!(std::fs::read_to_string(&bad).unwrap(), "short\n");
        assert_eq!(mode(&open), 0o644);
    }

    #[test]
    fn a_file_of_a_principal_no_longer_configured_is_neither_read_nor_removed() {
        let state = tempfile::tempdir().unwrap();
        prepare(state.path(), ["old", "ci"]);
        let sets = prepare(state.path(), ["ci"]);
        assert_eq!(sets.keys().collect::<Vec<_>>(), ["ci"]);
        assert!(file_of(state.path(), "old").exists());
    }

    #[test]
    fn a_dir_others_may_write_into_or_a_symlink_fails_every_principal_closed() {
        let state = tempfile::tempdir().unwrap();
        prepare(state.path(), ["ci"]);
        let dir = dir_of(state.path());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(
            &reread(state.path(), &["ci".into()])["ci"],
            Err(TokenFileError::Unreadable { reason }) if reason.contains("0777")
        ));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::rename(&dir, state.path().join("elsewhere")).unwrap();
        std::os::unix::fs::symlink("elsewhere", &dir).unwrap();
        assert!(prepare(state.path(), ["ci"])["ci"].is_err());
    }
}
