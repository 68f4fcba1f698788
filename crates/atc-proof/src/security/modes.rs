//! The state dir's modes: the dir 0700; the token, the database and its `-wal`/`-shm`,
//! `daemon.json` and the lock 0600; the reporter socket 0600 (or in a dir only we can enter).
//! Anything else in the dir must at least not be writable by others.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;

/// Files whose mode must be exactly 0600, when they exist.
const PRIVATE: &[&str] = &[
    "token",
    "atc.db",
    "atc.db-wal",
    "atc.db-shm",
    "daemon.json",
    "daemon.lock",
];

/// Every mode in `dir` that is not what it should be, described; and how many entries were
/// looked at.
pub fn violations(dir: &Path, socket: Option<&Path>) -> (u64, Vec<String>) {
    let mut checked = 0u64;
    let mut bad = Vec::new();
    let mode_of = |p: &Path| {
        std::fs::symlink_metadata(p)
            .map(|m| (m.permissions().mode() & 0o7777, m.file_type()))
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    match mode_of(dir) {
        Ok((0o700, _)) => {}
        Ok((m, _)) => bad.push(format!("{} is {m:04o}, not 0700", dir.display())),
        Err(e) => bad.push(e),
    }
    checked += 1;
    for name in PRIVATE {
        let p = dir.join(name);
        if !p.exists() {
            // The WAL's files come and go with checkpoints; the others are made at start.
            if !name.starts_with("atc.db-") {
                bad.push(format!("{name} is missing"));
            }
            continue;
        }
        checked += 1;
        match mode_of(&p) {
            Ok((0o600, _)) => {}
            Ok((m, _)) => bad.push(format!("{name} is {m:04o}, not 0600")),
            Err(e) => bad.push(e),
        }
    }
    if let Some(sock) = socket {
        checked += 1;
        match mode_of(sock) {
            Ok((m, t)) if t.is_socket() => {
                let parent_private = sock
                    .parent()
                    .and_then(|p| mode_of(p).ok())
                    .is_some_and(|(pm, _)| pm & 0o077 == 0);
                if m & 0o077 != 0 && !parent_private {
                    bad.push(format!(
                        "the reporter socket {} is {m:04o} in a dir others can enter",
                        sock.display()
                    ));
                } else if m != 0o600 {
                    bad.push(format!("the reporter socket is {m:04o}, not 0600"));
                }
            }
            Ok(_) => bad.push(format!("{} is not a socket", sock.display())),
            Err(e) => bad.push(e),
        }
    }
    // Whatever else the daemon made: nobody else may write it.
    for entry in walk(dir) {
        checked += 1;
        if let Ok((m, _)) = mode_of(&entry) {
            if m & 0o022 != 0 {
                bad.push(format!(
                    "{} is {m:04o}, writable by others",
                    entry.display()
                ));
            }
        }
    }
    (checked, bad)
}

/// Every path under `dir` (not `dir` itself), depth first.
pub fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}
