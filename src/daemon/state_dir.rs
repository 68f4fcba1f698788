//! The state directory: where it is, the lock that makes one daemon its owner, the token file,
//! and `daemon.json`, which tells clients where the daemon listens.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::token_file;
use crate::server::tokens::{TokenFileError, TokenSet};

/// The default state dir: `$XDG_STATE_HOME/atc`, else `~/.local/state/atc`.
pub fn default_state_dir() -> Option<PathBuf> {
    state_dir_from_env(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME"))
}

use atc_protocol::state_dir::state_dir_from_env;
/// What `daemon.json` holds (the shape clients read is `atc_protocol`'s).
pub use atc_protocol::state_dir::DaemonFile as DaemonInfo;

/// Why the state dir could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum StateDirError {
    /// Another daemon holds the lock.
    #[error("another atc daemon (pid {pid}) already runs on state dir {dir}; stop it first or pass --state-dir")]
    Locked {
        /// Its pid, from daemon.json (0 when unknown).
        pid: u32,
        /// The dir.
        dir: String,
    },
    /// The token file holds something that is not a usable token set.
    #[error("token file {path}: {problem}; fix or remove it (a missing file is minted anew)")]
    Token {
        /// The file.
        path: String,
        /// What is wrong (never the content).
        problem: TokenFileError,
    },
    /// An existing dir the daemon will not use as its own (it is left as it is).
    #[error("state dir {dir}: {problem}")]
    Unsafe {
        /// The dir.
        dir: String,
        /// Why.
        problem: DirProblem,
    },
    /// Filesystem trouble.
    #[error("state dir {dir}: {source}")]
    Io {
        /// The path involved.
        dir: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// Why an existing directory cannot be the state dir. The daemon keeps its token, its lock
/// and its sockets there: a dir others can write to would let them put their own in place
/// (or take the lock), so it is refused rather than changed. Changing the mode of a dir the
/// daemon did not make would break whatever else uses it (`--state-dir /tmp`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirProblem {
    /// Something other than a directory is there.
    #[error("it is not a directory")]
    NotADirectory,
    /// It belongs to another user.
    #[error("it belongs to uid {uid}, not to the daemon's user (uid {owner}); pass a --state-dir of your own")]
    NotOwned {
        /// The dir's owner.
        uid: u32,
        /// The daemon's effective uid.
        owner: u32,
    },
    /// Group or others may write into it.
    #[error("its mode {mode:04o} lets others write into it; pass a --state-dir only you can write to (the daemon makes one with mode 0700 when the path does not exist)")]
    WritableByOthers {
        /// The dir's permission bits.
        mode: u32,
    },
}

/// Makes `dir` ready to be the state dir: a missing one is created with mode 0700 (its
/// parents as the umask says); an existing one is used as it is if it is a directory of the
/// daemon's user that no one else can write to, and refused otherwise ([`DirProblem`]).
pub fn prepare(dir: &Path) -> Result<(), StateDirError> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io(dir))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        // Ours: exactly 0700, whatever the umask took off.
        Ok(()) => {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let meta = std::fs::metadata(dir).map_err(io(dir))?;
            let owner = rustix::process::geteuid().as_raw();
            existing_dir_problem(meta.is_dir(), meta.uid(), owner, meta.mode()).map_or(
                Ok(()),
                |problem| {
                    Err(StateDirError::Unsafe {
                        dir: dir.display().to_string(),
                        problem,
                    })
                },
            )
        }
        Err(e) => Err(io(dir)(e)),
    }
}

/// What keeps an existing path from being the state dir, from its type, owner and mode.
pub(super) fn existing_dir_problem(
    is_dir: bool,
    uid: u32,
    owner: u32,
    mode: u32,
) -> Option<DirProblem> {
    if !is_dir {
        return Some(DirProblem::NotADirectory);
    }
    if uid != owner {
        return Some(DirProblem::NotOwned { uid, owner });
    }
    let mode = mode & 0o7777;
    (mode & 0o022 != 0).then_some(DirProblem::WritableByOthers { mode })
}

fn io(dir: &Path) -> impl FnOnce(std::io::Error) -> StateDirError + '_ {
    move |source| StateDirError::Io {
        dir: dir.display().to_string(),
        source,
    }
}

/// An owned state dir: holding this value holds the lock.
pub struct StateDir {
    dir: PathBuf,
    /// Keeps the flock; never deleted from disk (spec §1.1).
    _lock: File,
}

impl StateDir {
    /// Makes the dir ready ([`prepare`]) and takes the exclusive lock, waiting up to `wait`
    /// for a daemon that is stopping.
    pub fn take(dir: &Path, wait: Duration) -> Result<StateDir, StateDirError> {
        prepare(dir)?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(dir.join("daemon.lock"))
            .map_err(io(dir))?;
        let deadline = Instant::now() + wait;
        loop {
            match rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => break,
                Err(rustix::io::Errno::WOULDBLOCK) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(rustix::io::Errno::WOULDBLOCK) => {
                    let pid = read_info(dir).map(|i| i.pid).unwrap_or(0);
                    return Err(StateDirError::Locked {
                        pid,
                        dir: dir.display().to_string(),
                    });
                }
                Err(e) => return Err(io(dir)(e.into())),
            }
        }
        Ok(StateDir {
            dir: dir.to_path_buf(),
            _lock: lock,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The SQLite file.
    pub fn db_path(&self) -> PathBuf {
        self.dir.join("atc.db")
    }

    /// The token file's path.
    pub fn token_path(&self) -> PathBuf {
        self.dir.join("token")
    }

    /// Reads the token file ([`token_file::read`]), creating it (one token of 32 random bytes
    /// as hex, mode 0600) on first start, or when it holds nothing but whitespace. A file that
    /// holds something it cannot use, or that is not a private regular file of this user in
    /// this dir, is an error: the daemon does not start on a token it would refuse.
    pub fn tokens(&self) -> Result<TokenSet, StateDirError> {
        let path = self.token_path();
        match token_file::read(&self.dir, &path) {
            Ok(Some(set)) => return Ok(set),
            Ok(None) | Err(TokenFileError::Empty) => {}
            Err(problem) => {
                return Err(StateDirError::Token {
                    path: path.display().to_string(),
                    problem,
                })
            }
        }
        mint(&path).map_err(io(&self.dir))
    }

    /// Writes `daemon.json` atomically (temp file, then rename), 0600 like everything else
    /// the daemon keeps here: it only tells the user's own clients where to connect.
    pub fn write_info(&self, info: &DaemonInfo) -> Result<(), StateDirError> {
        let tmp = self.dir.join("daemon.json.tmp");
        let text = serde_json::to_vec_pretty(info)
            .map_err(|e| io(&self.dir)(std::io::Error::other(e.to_string())))?;
        // A temp file a crash left behind may have another mode; it is replaced whole.
        match std::fs::remove_file(&tmp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&self.dir)(e)),
            _ => {}
        }
        OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&text))
            .map_err(io(&self.dir))?;
        std::fs::rename(&tmp, self.dir.join("daemon.json")).map_err(io(&self.dir))
    }

    /// Removes `daemon.json` on a clean stop.
    pub fn remove_info(&self) {
        // Already gone is fine.
        let _ = std::fs::remove_file(self.dir.join("daemon.json"));
    }
}

/// Writes a fresh token file at `path`: one token of 32 random bytes as hex, mode 0600, never
/// through a symlink (only a file in the dir is written). Used for the owner's file and for
/// each principal's.
pub fn mint(path: &Path) -> std::io::Result<TokenSet> {
    let mut raw = [0u8; 32];
    getrandom::fill(&mut raw).map_err(|e| std::io::Error::other(e.to_string()))?;
    let token: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    f.write_all(format!("{token}\n").as_bytes())?;
    // An existing file keeps its mode through `open`: make it private whatever it was.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(TokenSet::single(token))
}

/// Re-reads the token file `path` of the state dir `dir` (on SIGHUP), under the rules of
/// [`token_file`]. Unlike [`StateDir::tokens`] it never mints: a missing or empty file is an
/// error, and the caller fails closed on it.
pub fn read_tokens(dir: &Path, path: &Path) -> Result<TokenSet, TokenFileError> {
    token_file::read(dir, path)?.ok_or_else(|| TokenFileError::Unreadable {
        reason: "there is no token file".into(),
    })
}

/// Reads `daemon.json` from a state dir.
pub fn read_info(dir: &Path) -> Option<DaemonInfo> {
    let text = std::fs::read(dir.join("daemon.json")).ok()?;
    serde_json::from_slice(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_is_minted_once_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let sd = StateDir::take(dir.path(), Duration::ZERO).unwrap();
        let set = sd.tokens().unwrap();
        assert_eq!(set.len(), 1);
        let t = set.current();
        assert_eq!(t.len(), 64);
        assert!(t.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(sd.tokens().unwrap(), set);
        let mode = std::fs::metadata(sd.token_path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_token_file_it_cannot_use_stops_the_start_and_a_reload_never_mints() {
        let dir = tempfile::tempdir().unwrap();
        let sd = StateDir::take(dir.path(), Duration::ZERO).unwrap();
        std::fs::write(sd.token_path(), "short\n").unwrap();
        std::fs::set_permissions(sd.token_path(), std::fs::Permissions::from_mode(0o600)).unwrap();
        match sd.tokens() {
            Err(StateDirError::Token { problem, .. }) => {
                assert_eq!(problem, TokenFileError::TooShort { line: 1, len: 5 })
            }
            other => panic!("expected a token problem, got {other:?}"),
        }
        // Left as it was for the operator to fix.
        assert_eq!(std::fs::read_to_string(sd.token_path()).unwrap(), "short\n");
        std::fs::write(sd.token_path(), "").unwrap();
        assert_eq!(
            read_tokens(sd.path(), &sd.token_path()),
            Err(TokenFileError::Empty)
        );
        std::fs::remove_file(sd.token_path()).unwrap();
        assert!(matches!(
            read_tokens(sd.path(), &sd.token_path()),
            Err(TokenFileError::Unreadable { .. })
        ));
        assert!(!sd.token_path().exists());
    }

    #[test]
    fn an_existing_dir_is_used_as_it_is_unless_others_can_write_to_it() {
        let root = tempfile::tempdir().unwrap();
        let made = root.path().join("a").join("state");
        StateDir::take(&made, Duration::ZERO).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&made), 0o700, "a dir the daemon made is private");
        // An existing readable dir keeps its mode.
        let open = root.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        StateDir::take(&open, Duration::ZERO).unwrap();
        assert_eq!(mode(&open), 0o755);
        // One others can write to is refused, and left as it was.
        for shared in [0o1777, 0o775, 0o757] {
            std::fs::set_permissions(&open, std::fs::Permissions::from_mode(shared)).unwrap();
            match StateDir::take(&open, Duration::ZERO) {
                Err(StateDirError::Unsafe { problem, .. }) => {
                    assert_eq!(problem, DirProblem::WritableByOthers { mode: shared })
                }
                other => panic!("expected Unsafe, got {:?}", other.err()),
            }
            assert_eq!(mode(&open), shared);
        }
        let file = root.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(matches!(
            StateDir::take(&file, Duration::ZERO),
            Err(StateDirError::Unsafe {
                problem: DirProblem::NotADirectory,
                ..
            })
        ));
    }

    #[test]
    fn a_dir_of_another_user_is_refused() {
        assert_eq!(
            existing_dir_problem(true, 0, 1000, 0o700),
            Some(DirProblem::NotOwned {
                uid: 0,
                owner: 1000
            })
        );
        assert_eq!(existing_dir_problem(true, 1000, 1000, 0o40700), None);
        assert_eq!(
            existing_dir_problem(true, 0, 0, 0o41777),
            Some(DirProblem::WritableByOthers { mode: 0o1777 })
        );
    }

    #[test]
    fn a_second_owner_is_refused_with_the_first_pid() {
        let dir = tempfile::tempdir().unwrap();
        let first = StateDir::take(dir.path(), Duration::ZERO).unwrap();
        first
            .write_info(&DaemonInfo {
                pid: 4242,
                listen: "127.0.0.1:1".into(),
                url: "http://127.0.0.1:1".into(),
                version: "x".into(),
                tls_cert: None,
            })
            .unwrap();
        match StateDir::take(dir.path(), Duration::from_millis(100)) {
            Err(StateDirError::Locked { pid, .. }) => assert_eq!(pid, 4242),
            other => panic!("expected Locked, got {:?}", other.err()),
        }
        drop(first);
        assert!(StateDir::take(dir.path(), Duration::ZERO).is_ok());
    }
}
