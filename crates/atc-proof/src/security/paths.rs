//! Hostile session names and cwds: `..`, `/`, NUL, control characters and names of thousands
//! of bytes, given at spawn and at rename. Then every file that appeared under the suite's
//! work dir and the temp dir is listed: each must be inside the state dir under a name the
//! daemon owns (records and settings by session id), or inside the imp's guest dir, and no
//! path anywhere may carry a piece of a hostile name.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::Report;

/// Every hostile value carries this, so a file named after one is found by it.
const MARK: &str = "escape";

/// The files present under some roots.
pub struct Snapshot(BTreeSet<PathBuf>);

impl Snapshot {
    /// Everything under each of `roots` (the temp dir only one level down: other programs
    /// use it too, and a name that escaped into it lands at its top).
    pub fn take(roots: &[&Path]) -> Snapshot {
        let mut all = BTreeSet::new();
        for (i, root) in roots.iter().enumerate() {
            if i == 0 {
                all.extend(super::modes::walk(root));
            } else if let Ok(rd) = std::fs::read_dir(root) {
                all.extend(rd.flatten().map(|e| e.path()));
            }
        }
        Snapshot(all)
    }
}

/// Names and cwds a hostile client sends.
fn hostile() -> Vec<(String, String)> {
    let long = "x".repeat(5000);
    vec![
        (format!("../../{MARK}-dotdot"), "/tmp".into()),
        (format!("a/b/{MARK}-slash"), "/tmp".into()),
        (format!("/{MARK}-absolute"), "/tmp".into()),
        (format!("nul\u{0}{MARK}-nul"), "/tmp".into()),
        (format!("{MARK}-long-{long}"), "/tmp".into()),
        (format!("\u{1b}[31m{MARK}-ctl\u{7}\r\n"), "/tmp".into()),
        (
            format!("{MARK}-cwd-dotdot"),
            format!("/tmp/../../tmp/../{MARK}-dir"),
        ),
        (format!("{MARK}-cwd-nul"), format!("/tmp/{MARK}\u{0}x")),
        (format!("{MARK}-cwd-relative"), format!("../../{MARK}-rel")),
        (format!("{MARK}-cwd-long"), format!("/tmp/{MARK}-{long}")),
        (
            format!("{MARK}-cwd-ctl"),
            format!("/tmp/\u{1b}]0;{MARK}\u{7}"),
        ),
        (String::new(), format!("/tmp/../{MARK}-basename/..")),
    ]
}

/// Spawns each hostile (name, cwd) with a plain and a Claude-kind agent (whose settings file
/// the daemon writes), renames one session to each hostile name, and returns how many calls
/// were made. Refusals are fine; what matters is the files.
pub async fn spawn_hostile(client: &atc_client::DaemonClient, report: &mut Report) -> u64 {
    let mut calls = 0;
    let mut accepted = 0;
    let mut renamed = None;
    for agent in ["cat", "claudeish"] {
        for (name, cwd) in hostile() {
            calls += 1;
            let body = json!({"agent": agent, "cwd": cwd, "name": name});
            if let Ok(d) = client.spawn(&body).await {
                accepted += 1;
                renamed.get_or_insert(d.id.to_string());
            }
        }
    }
    if let Some(id) = renamed {
        for (name, _) in hostile() {
            calls += 1;
            // A refused rename is as good as an accepted one here.
            let _ = client
                .patch_json(&format!("/v1/sessions/{id}"), &json!({"name": name}))
                .await;
        }
    }
    report.info("hostileSpawnsAccepted", accepted as f64, "count");
    calls
}

/// Whether `rel` (a path inside the state dir) is a file the daemon owns.
fn owned_by_daemon(rel: &Path) -> bool {
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    let is_id = |s: &str| uuid_like(s);
    match parts.as_slice() {
        [one] => matches!(
            one.as_str(),
            "token"
                | "atc.db"
                | "atc.db-wal"
                | "atc.db-shm"
                | "atc.db-journal"
                | "daemon.json"
                | "daemon.json.tmp"
                | "daemon.lock"
                | "atc.sock"
                | "status.json"
                | "status.json.tmp"
                | "claude"
                | "records"
        ),
        [dir, file] if dir == "records" || dir == "claude" => {
            let f = file.trim_start_matches('.');
            let stem = f
                .strip_suffix(".json")
                .or_else(|| f.strip_suffix(".json.tmp"));
            stem.is_some_and(is_id)
        }
        _ => false,
    }
}

fn uuid_like(s: &str) -> bool {
    s.len() == 36
        && s.chars().enumerate().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

/// Every new path that is not where it belongs, described.
pub fn strays(
    before: &Snapshot,
    after: &Snapshot,
    state: &Path,
    guest: &Path,
    work: &Path,
) -> Vec<String> {
    let mut out = Vec::new();
    for p in after.0.difference(&before.0) {
        let text = p.to_string_lossy();
        if text.contains(MARK) {
            out.push(format!("{} carries a hostile name", text.escape_debug()));
            continue;
        }
        if let Ok(rel) = p.strip_prefix(state) {
            if !rel.as_os_str().is_empty() && !owned_by_daemon(rel) {
                out.push(format!(
                    "{} is no file the daemon owns",
                    text.escape_debug()
                ));
            }
        } else if p.starts_with(guest) || p.starts_with(work) {
            // The guest dir is the imp's disk; the work dir holds the suite's own files.
        } else {
            // Something new in the temp dir: another program's, unless it is the daemon's.
            // Only a hostile name there counts, which the check above caught.
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemon_owns_its_files_by_session_id_only() {
        let id = "3f2504e0-4f89-41d3-9a0c-0305e82c3301";
        assert!(owned_by_daemon(Path::new("atc.db-wal")));
        assert!(owned_by_daemon(Path::new(&format!("records/{id}.json"))));
        assert!(owned_by_daemon(Path::new(&format!(
            "claude/.{id}.json.tmp"
        ))));
        assert!(!owned_by_daemon(Path::new("records/evil.json")));
        assert!(!owned_by_daemon(Path::new(&format!("records/x/{id}.json"))));
        assert!(!owned_by_daemon(Path::new("elsewhere")));
    }
}
