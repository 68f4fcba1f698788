//! Opening a file that a hook report named (a transcript, a summary beside it) or that an agent
//! keeps (Codex's session index). The path comes from inside a session, so it may name
//! anything the daemon's user can reach: a FIFO, whose open would block a thread until a
//! writer came, or a device, whose open can have effects of its own. Only regular files are
//! opened, and the open itself never waits: the path is checked before it is opened, opened
//! with `O_NONBLOCK` (which a regular file ignores, and which keeps a FIFO swapped in between
//! from blocking), then checked again on the open descriptor. How much is read stays the
//! caller's bound (`names` reads heads and tails).
//!
//! Paths reported from inside an imp are never opened at all: they name the guest's files, not
//! the host's, and the session never hands them here.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens `path` for reading when it is a regular file; any other kind of file is an
/// `InvalidInput` error and, when it was one before the open, is never opened.
pub fn open_regular(path: &Path) -> io::Result<File> {
    if !std::fs::metadata(path)?.is_file() {
        return Err(not_regular());
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    Ok(file)
}

fn not_regular() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "not a regular file")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn regular_files_open_and_fifos_and_devices_do_not_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.jsonl");
        std::fs::write(&file, "line\n").unwrap();
        let mut text = String::new();
        open_regular(&file)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "line\n");
        // No writer ever opens this FIFO: a blocking open would hang the test.
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        for path in [fifo.as_path(), Path::new("/dev/zero"), dir.path()] {
            let err = open_regular(path).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{path:?}");
        }
        // A symlink to a regular file is that file; one to a FIFO is refused.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        assert!(open_regular(&link).is_err());
    }
}
