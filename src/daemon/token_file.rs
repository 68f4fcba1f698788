//! Reading the token file without trusting what sits at its path.
//!
//! The file decides who may type into the user's shells, and anyone who can write into the
//! state dir's parent, or who tricks the user into a symlink, may have put something else
//! there. So, as ssh does for keys, a read refuses anything but a private regular file of
//! this user inside the state dir, and it never waits or grows on what it finds:
//!
//! - it opens with `O_NONBLOCK`, so a FIFO (which would block the open until a writer comes)
//!   opens at once and is refused by the `fstat` that follows: only a regular file is read;
//! - it reads at most [`MAX_TOKEN_FILE_BYTES`] (a symlink to `/dev/zero` is refused before a
//!   byte is read, and a huge regular file by its size);
//! - a symlink is followed only when it leads to a file inside the state dir;
//! - the file must belong to the daemon's user, with no permission for group or others.
//!
//! Each refusal is a [`TokenFileError`] naming the reason (never the content). The caller
//! decides what it means: at start the daemon does not start, at a reload it fails closed.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use crate::server::tokens::{TokenFileError, TokenSet};

/// The largest token file read: two tokens of a generous length with room to spare. A file
/// larger than this holds no token set the daemon would accept.
pub const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// Reads and parses the token file at `path`, which lives in the state dir `dir`, under the
/// rules in the module doc. `Ok(None)`: there is no file at `path`.
pub fn read(dir: &Path, path: &Path) -> Result<Option<TokenSet>, TokenFileError> {
    let Some(bytes) = read_bytes(dir, path)? else {
        return Ok(None);
    };
    TokenSet::parse(&bytes).map(Some)
}

/// The bytes of the token file at `path` (see [`read`]); `Ok(None)` when there is none.
pub fn read_bytes(dir: &Path, path: &Path) -> Result<Option<Vec<u8>>, TokenFileError> {
    let file = match open_private(path) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        // `O_NOFOLLOW` met a symlink: follow it only into the state dir.
        Err(rustix::io::Errno::LOOP) => {
            let inside = resolve_inside(dir, path)?;
            match open_private(&inside) {
                Ok(fd) => fd,
                Err(rustix::io::Errno::NOENT) => return Ok(None),
                Err(e) => return Err(unreadable(e)),
            }
        }
        Err(e) => return Err(unreadable(e)),
    };
    let stat = rustix::fs::fstat(&file).map_err(unreadable)?;
    let kind = FileType::from_raw_mode(stat.st_mode);
    if kind != FileType::RegularFile {
        return Err(TokenFileError::NotRegular {
            kind: file_kind(kind),
        });
    }
    let owner = rustix::process::geteuid().as_raw();
    if stat.st_uid != owner {
        return Err(TokenFileError::NotOwned {
            uid: stat.st_uid,
            owner,
        });
    }
    let mode = stat.st_mode & 0o7777;
    if mode & 0o077 != 0 {
        return Err(TokenFileError::OpenToOthers { mode });
    }
    let len = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
    if len > MAX_TOKEN_FILE_BYTES {
        return Err(TokenFileError::TooLarge {
            len,
            cap: MAX_TOKEN_FILE_BYTES,
        });
    }
    // The size may change under the read (a writer appending): read one byte past the cap to
    // tell, never more.
    let mut bytes = Vec::new();
    std::fs::File::from(file)
        .take(MAX_TOKEN_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| TokenFileError::Unreadable {
            reason: e.to_string(),
        })?;
    if bytes.len() as u64 > MAX_TOKEN_FILE_BYTES {
        return Err(TokenFileError::TooLarge {
            len: bytes.len() as u64,
            cap: MAX_TOKEN_FILE_BYTES,
        });
    }
    Ok(Some(bytes))
}

/// Opens `path` for reading without following a symlink at its last component and without
/// waiting (a FIFO opens at once; the caller's `fstat` refuses it).
fn open_private(path: &Path) -> rustix::io::Result<OwnedFd> {
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Where the symlink at `path` leads, if that is inside the state dir `dir`.
fn resolve_inside(dir: &Path, path: &Path) -> Result<PathBuf, TokenFileError> {
    let outside = || TokenFileError::LeadsOutside;
    let dir = std::fs::canonicalize(dir).map_err(|e| TokenFileError::Unreadable {
        reason: e.to_string(),
    })?;
    // A dangling link, or a loop, leads nowhere the daemon would read.
    let target = std::fs::canonicalize(path).map_err(|_| outside())?;
    if target.starts_with(&dir) && target != dir {
        Ok(target)
    } else {
        Err(outside())
    }
}

fn unreadable(e: rustix::io::Errno) -> TokenFileError {
    TokenFileError::Unreadable {
        reason: std::io::Error::from(e).to_string(),
    }
}

/// A word for what the path holds instead of a regular file.
fn file_kind(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symlink",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "not a regular file",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef";

    fn private(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    #[test]
    fn a_private_regular_file_is_read_and_a_missing_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        assert_eq!(read(dir.path(), &path), Ok(None));
        private(&path, &format!("{TOKEN}\n"));
        let set = read(dir.path(), &path).unwrap().unwrap();
        assert_eq!(set.current(), TOKEN);
    }

    #[test]
    fn group_or_other_permissions_are_refused_with_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        private(&path, TOKEN);
        for mode in [0o640, 0o604, 0o620, 0o644] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(
                read(dir.path(), &path),
                Err(TokenFileError::OpenToOthers { mode })
            );
        }
        let problem = TokenFileError::OpenToOthers { mode: 0o644 }.to_string();
        assert!(
            problem.contains("0644") && problem.contains("chmod 600"),
            "{problem}"
        );
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &path,
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        // Without O_NONBLOCK this open would never return: no writer ever comes.
        assert_eq!(
            read(dir.path(), &path),
            Err(TokenFileError::NotRegular { kind: "a FIFO" })
        );
    }

    #[test]
    fn a_large_file_is_refused_by_its_size_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        private(&path, TOKEN);
        // Sparse: a gigabyte that costs nothing on disk.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(1 << 30)
            .unwrap();
        assert_eq!(
            read(dir.path(), &path),
            Err(TokenFileError::TooLarge {
                len: 1 << 30,
                cap: MAX_TOKEN_FILE_BYTES
            })
        );
    }

    #[test]
    fn a_symlink_is_followed_only_into_the_state_dir() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("state");
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("token");
        // Inside: followed.
        private(&dir.join("token.real"), TOKEN);
        std::os::unix::fs::symlink("token.real", &path).unwrap();
        assert_eq!(read(&dir, &path).unwrap().unwrap().current(), TOKEN);
        // Out of the state dir, to a private file or to /dev/zero: refused.
        std::fs::remove_file(&path).unwrap();
        private(&root.path().join("elsewhere"), TOKEN);
        std::os::unix::fs::symlink(root.path().join("elsewhere"), &path).unwrap();
        assert_eq!(read(&dir, &path), Err(TokenFileError::LeadsOutside));
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        assert_eq!(read(&dir, &path), Err(TokenFileError::LeadsOutside));
        // Through `..` back out: refused as well.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("../elsewhere", &path).unwrap();
        assert_eq!(read(&dir, &path), Err(TokenFileError::LeadsOutside));
        // A dangling link leads nowhere.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("gone", &path).unwrap();
        assert_eq!(read(&dir, &path), Err(TokenFileError::LeadsOutside));
    }

    #[test]
    fn a_directory_or_a_device_is_not_a_token_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::create_dir(&path).unwrap();
        assert_eq!(
            read(dir.path(), &path),
            Err(TokenFileError::NotRegular {
                kind: "a directory"
            })
        );
    }
}
