//! The session record file (spec §3.11): a read-only JSON copy of what a session is, written
//! to `<state>/records/<id>.json` before each harness start and handed to the process as
//! `ATC_SESSION_RECORD`, so tools inside a session can learn about it without speaking the
//! API. Replaced atomically (write a temp file, then rename); removed on forget.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use atc_protocol::SessionId;
use serde_json::{json, Value};

/// The record's `format` field.
pub const FORMAT: &str = "atc.session-record";

/// Where a session's record lives.
pub fn path_for(state_dir: &Path, session: &SessionId) -> PathBuf {
    state_dir.join("records").join(format!("{session}.json"))
}

/// The record's JSON. `session` is the descriptor-like object the caller builds.
pub fn contents(session: Value, daemon_id: &uuid::Uuid, updated_at: i64) -> Value {
    json!({
        "format": FORMAT,
        "version": 1,
        "session": session,
        "daemonID": daemon_id,
        // Targets and their config revision arrive with the targets issue; every session
        // runs on the implicit local target until then.
        "target": "local",
        "revision": null,
        "updatedAt": updated_at,
        // Scope declaration is an open question in the spec (§15).
        "scope": null,
    })
}

/// Writes the record (dir 0700, file 0444) and returns its path.
///
/// A session's first record goes straight to its path: nothing can read it before the process
/// that learns the path starts, which is after this returns. Later ones (a revive) replace it
/// whole through a temp file and a rename. The records dir is made on the first write that
/// misses it rather than checked on every write, since a spawn storm pays each syscall a
/// thousand times.
pub fn write(state_dir: &Path, session: &SessionId, record: &Value) -> std::io::Result<PathBuf> {
    let body = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
    let dir = state_dir.join("records");
    let path = path_for(state_dir, session);
    match create_read_only(&dir, &path, &body) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        done => return done.map(|()| path),
    }
    let tmp = dir.join(format!("{session}.json.tmp"));
    // A temp file left by a crash is read-only too; clear it and write anew.
    if let Err(e) = create_read_only(&dir, &tmp, &body) {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(e);
        }
        std::fs::remove_file(&tmp)?;
        create_read_only(&dir, &tmp, &body)?;
    }
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Creates `path` (which must not exist) in `dir` with mode 0444 and writes `body` to it,
/// making `dir` (0700) first if it is missing.
fn create_read_only(dir: &Path, path: &Path, body: &[u8]) -> std::io::Result<()> {
    let open = || {
        std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o444)
            .open(path)
    };
    let mut f = match open() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
            open()?
        }
        opened => opened?,
    };
    // No fsync: the record only informs tools inside the session and is rewritten at every
    // start; a sync per spawn would cap spawns at the disk's sync rate.
    f.write_all(body)
}

/// Removes a session's record; a missing one is fine.
pub fn remove(state_dir: &Path, session: &SessionId) {
    if let Err(e) = std::fs::remove_file(path_for(state_dir, session)) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(session = %session, error = %e, "could not remove the session record");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_read_only_in_a_private_dir_and_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let id = SessionId::new();
        let daemon = uuid::Uuid::new_v4();
        let first = write(dir.path(), &id, &contents(json!({"name": "a"}), &daemon, 1)).unwrap();
        let second = write(dir.path(), &id, &contents(json!({"name": "b"}), &daemon, 2)).unwrap();
        assert_eq!(first, second);
        let mode = std::fs::metadata(&first).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o444);
        let dmode = std::fs::metadata(dir.path().join("records"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dmode & 0o777, 0o700);
        let v: Value = serde_json::from_slice(&std::fs::read(&first).unwrap()).unwrap();
        assert_eq!(v["format"], FORMAT);
        assert_eq!(v["session"]["name"], "b");
        assert_eq!(v["updatedAt"], 2);
        remove(dir.path(), &id);
        assert!(!first.exists());
    }

    #[test]
    fn a_rewrite_replaces_the_file_by_rename_past_a_stale_temp_file() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let id = SessionId::new();
        let daemon = uuid::Uuid::new_v4();
        let path = write(dir.path(), &id, &contents(json!({"name": "a"}), &daemon, 1)).unwrap();
        let first_inode = std::fs::metadata(&path).unwrap().ino();
        // What a crash between the temp file's write and its rename leaves behind.
        let tmp = dir.path().join("records").join(format!("{id}.json.tmp"));
        std::fs::write(&tmp, b"stale").unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o444)).unwrap();
        write(dir.path(), &id, &contents(json!({"name": "b"}), &daemon, 2)).unwrap();
        // A new inode: a reader holding the old file never sees a half-written one.
        assert_ne!(std::fs::metadata(&path).unwrap().ino(), first_inode);
        assert!(!tmp.exists());
        let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(v["session"]["name"], "b");
    }
}
