//! The session record file (spec §3.11): a read-only JSON copy of what a session is, written
//! to `<state>/records/<id>.json` before each harness start and handed to the process as
//! `ATC_SESSION_RECORD`, so tools inside a session can learn about it without speaking the
//! API. Replaced atomically (write a temp file, then rename); removed on forget.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// The record's `format` field.
pub const FORMAT: &str = "atc.session-record";

/// Where a session's record lives.
pub fn path_for(state_dir: &Path, session: &uuid::Uuid) -> PathBuf {
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
pub fn write(state_dir: &Path, session: &uuid::Uuid, record: &Value) -> std::io::Result<PathBuf> {
    let dir = state_dir.join("records");
    std::fs::create_dir_all(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    let path = path_for(state_dir, session);
    let tmp = dir.join(format!("{session}.json.tmp"));
    // A temp file left by a crash is read-only too; clear it before writing anew.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut f = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o444)
        .open(&tmp)?;
    // No fsync: the record only informs tools inside the session and is rewritten at every
    // start; a sync per spawn would cap spawns at the disk's sync rate.
    f.write_all(&serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?)?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Removes a session's record; a missing one is fine.
pub fn remove(state_dir: &Path, session: &uuid::Uuid) {
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
        let id = uuid::Uuid::new_v4();
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
}
