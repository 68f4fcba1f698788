//! The credential grep: every place a secret could surface, read whole, and searched for
//! each credential's value. The places: the argv of the daemon and of every process below
//! this one (`/proc/<pid>/cmdline`), their environments (`/proc/<pid>/environ`) and what a
//! session printed of its own (`env` at its start), the daemon's log at trace level, every
//! row of every table of its database, every file of its state dir but the token file that
//! holds the daemon's token by design, and every answer the walks got.

use std::path::Path;

/// A place searched, and what it held.
pub struct Place {
    /// Where it is, for the report (`argv of pid 123 (atc-proof)`, `row of fleet`).
    pub name: String,
    pub bytes: Vec<u8>,
}

/// A credential to look for. `Debug` is left out on purpose: the value must not be printed.
pub struct Credential {
    /// What it is (`the daemon token`), for the report.
    pub what: String,
    pub value: String,
}

/// Each (credential, place) where the value was found.
pub fn find(credentials: &[Credential], places: &[Place]) -> Vec<String> {
    let mut found = Vec::new();
    for c in credentials {
        if c.value.len() < 8 {
            // Too short to search for without false alarms; a real credential is longer.
            found.push(format!("{} is too short to search for", c.what));
            continue;
        }
        for p in places {
            if contains(&p.bytes, c.value.as_bytes()) {
                found.push(format!("{} in {}", c.what, p.name));
            }
        }
    }
    found
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The argv of `root` and every process below it, and the environment of each but `given`
/// (the daemon, whose environment is what its operator gave it).
pub fn processes(root: u32, given: u32) -> Vec<Place> {
    let mut out = Vec::new();
    for pid in descendants(root) {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let comm = comm.trim();
        for (file, what) in [("cmdline", "argv"), ("environ", "environment")] {
            if pid == given && file == "environ" {
                continue;
            }
            // A process that exited meanwhile has nothing left to leak.
            if let Ok(bytes) = std::fs::read(format!("/proc/{pid}/{file}")) {
                out.push(Place {
                    name: format!("{what} of pid {pid} ({comm})"),
                    bytes,
                });
            }
        }
    }
    out
}

/// `root` and every process whose parent chain reaches it.
pub fn descendants(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // The command name is in parentheses and may hold spaces; the fields after the
            // last ')' are state, then ppid.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|s| s.parse::<u32>().ok());
            if let Some(ppid) = ppid {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        for (child, parent) in &parent_of {
            if *parent == p && !found.contains(child) {
                found.push(*child);
            }
        }
        i += 1;
    }
    found
}

/// Every file under `dir`, but those named in `skip` (relative to `dir`).
pub fn files(dir: &Path, skip: &[&str]) -> Vec<Place> {
    super::modes::walk(dir)
        .into_iter()
        .filter(|p| p.is_file())
        .filter(|p| {
            let rel = p.strip_prefix(dir).map(|r| r.to_string_lossy().to_string());
            !rel.is_ok_and(|r| skip.contains(&r.as_str()))
        })
        .filter_map(|p| {
            let bytes = std::fs::read(&p).ok()?;
            Some(Place {
                name: format!("file {}", p.display()),
                bytes,
            })
        })
        .collect()
}

/// Every row of every table of the SQLite file at `db`, one place per table.
pub async fn rows(db: &Path) -> Result<Vec<Place>, sqlx::Error> {
    use sqlx::sqlite::SqliteConnectOptions;
    use sqlx::{ConnectOptions, Row};
    let mut conn = SqliteConnectOptions::new()
        .filename(db)
        .read_only(true)
        .connect()
        .await?;
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table'")
            .fetch_all(&mut conn)
            .await?;
    let mut out = Vec::new();
    for table in tables {
        let quoted = table.replace('"', "\"\"");
        let cols: Vec<String> = sqlx::query(&format!("PRAGMA table_info(\"{quoted}\")"))
            .fetch_all(&mut conn)
            .await?
            .iter()
            .map(|r| r.get::<String, _>("name"))
            .collect();
        if cols.is_empty() {
            continue;
        }
        // quote() renders every value as text (a blob as X'..'), and a blob's hex would hide
        // a value, so each is also given as its own bytes; the row comes back as one blob,
        // since those bytes need not be UTF-8.
        let select = cols
            .iter()
            .map(|c| {
                let c = c.replace('"', "\"\"");
                format!("quote(\"{c}\") || '|' || coalesce(CAST(\"{c}\" AS BLOB), '')")
            })
            .collect::<Vec<_>>()
            .join(" || '|' || ");
        let lines: Vec<Vec<u8>> =
            sqlx::query_scalar(&format!("SELECT CAST({select} AS BLOB) FROM \"{quoted}\""))
                .fetch_all(&mut conn)
                .await?;
        out.push(Place {
            name: format!("rows of table {table} ({} rows)", lines.len()),
            bytes: lines.join(&b'\n'),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_found_where_it_is_and_nowhere_else() {
        let creds = [Credential {
            what: "the token".into(),
            value: "s3cr3t-value".into(),
        }];
        let places = [
            Place {
                name: "a".into(),
                bytes: b"x s3cr3t-value y".to_vec(),
            },
            Place {
                name: "b".into(),
                bytes: b"s3cr3t-valu".to_vec(),
            },
        ];
        assert_eq!(find(&creds, &places), vec!["the token in a".to_string()]);
    }

    #[test]
    fn this_process_is_its_own_first_descendant() {
        let me = std::process::id();
        assert_eq!(descendants(me)[0], me);
        assert!(processes(me, 0)
            .iter()
            .any(|p| p.name.starts_with(&format!("argv of pid {me}"))));
    }
}
