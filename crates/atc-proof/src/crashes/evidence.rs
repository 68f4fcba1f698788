//! What the suite counts from outside the daemon: the state database read through a
//! read-only SQLite connection of its own (never the daemon's word over HTTP), and the files
//! the spawned programs leave in their keys' dirs.
//!
//! The integrity check runs between the kill and the restart, on the database exactly as the
//! dead daemon left it. The idempotency and fleet tables are read after the restart, once the
//! new daemon answers and before any load of the new life, through a second connection beside
//! the daemon's (WAL lets a reader in while it runs).

use std::collections::BTreeSet;
use std::path::Path;
use std::str::FromStr;

use anyhow::Context as _;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, SqliteConnection};

/// The file each spawned program appends `<pid> <ATC_SESSION_ID>` to, in its cwd.
pub const EFFECT_FILE: &str = "spawned";

async fn open_read_only(db: &Path) -> anyhow::Result<SqliteConnection> {
    SqliteConnectOptions::from_str("sqlite://")
        .context("sqlite options")?
        .filename(db)
        .read_only(true)
        .connect()
        .await
        .with_context(|| format!("opening {} read-only", db.display()))
}

/// `PRAGMA integrity_check`: `Ok(None)` when it says `ok`, else what it said.
pub async fn integrity_check(db: &Path) -> anyhow::Result<Option<String>> {
    let mut conn = open_read_only(db).await?;
    let lines: Vec<String> = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_all(&mut conn)
        .await
        .context("PRAGMA integrity_check")?;
    // Closing a read-only connection has nothing to flush; an error here changes nothing.
    let _ = conn.close().await;
    if lines.len() == 1 && lines[0] == "ok" {
        Ok(None)
    } else {
        Ok(Some(lines.join("; ")))
    }
}

/// A spawn key's row in the idempotency table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRow {
    pub key: String,
    pub state: String,
    pub effect_ref: String,
}

/// The spawn keys and fleet rows the database holds now.
#[derive(Debug, Default)]
pub struct Ledger {
    pub keys: Vec<KeyRow>,
    pub fleet: BTreeSet<String>,
}

impl Ledger {
    pub fn in_state<'a>(&'a self, state: &'a str) -> impl Iterator<Item = &'a KeyRow> + 'a {
        self.keys.iter().filter(move |k| k.state == state)
    }
}

/// Reads the idempotency keys of `session.spawn` and the fleet's session ids.
pub async fn read_ledger(db: &Path) -> anyhow::Result<Ledger> {
    let mut conn = open_read_only(db).await?;
    let keys: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT key, state, effect_ref FROM idempotency WHERE operation = 'session.spawn'",
    )
    .fetch_all(&mut conn)
    .await
    .context("reading the idempotency table")?;
    let fleet: Vec<String> = sqlx::query_scalar("SELECT session_id FROM fleet")
        .fetch_all(&mut conn)
        .await
        .context("reading the fleet table")?;
    // As above: nothing to flush.
    let _ = conn.close().await;
    Ok(Ledger {
        keys: keys
            .into_iter()
            .map(|(key, state, effect_ref)| KeyRow {
                key,
                state,
                effect_ref,
            })
            .collect(),
        fleet: fleet.into_iter().collect(),
    })
}

/// One run of a key's program: its pid and the session id the daemon gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    pub pid: String,
    pub session: String,
}

/// The runs a key's program left in `dir` (none when it never ran).
pub fn effects(dir: &Path) -> Vec<Effect> {
    let text = std::fs::read_to_string(dir.join(EFFECT_FILE)).unwrap_or_default();
    parse_effects(&text)
}

fn parse_effects(text: &str) -> Vec<Effect> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut words = l.split_whitespace();
            Effect {
                pid: words.next().unwrap_or("").to_string(),
                session: words.next().unwrap_or("").to_string(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_line_is_one_run() {
        let runs = parse_effects("12 aaa\n\n13 bbb\n14\n");
        assert_eq!(runs.len(), 3);
        assert_eq!(runs[1].session, "bbb");
        assert_eq!(runs[2].session, "");
    }

    #[actix_rt::test]
    async fn a_fresh_database_checks_ok_and_reads_its_keys() {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("atc.db");
        let mut conn = SqliteConnectOptions::from_str("sqlite://")
            .expect("options")
            .filename(&db)
            .create_if_missing(true)
            .connect()
            .await
            .expect("create");
        for sql in [
            "CREATE TABLE idempotency (principal TEXT, operation TEXT, key TEXT, \
             payload_hash TEXT, state TEXT, effect_ref TEXT)",
            "CREATE TABLE fleet (session_id TEXT PRIMARY KEY)",
            "INSERT INTO idempotency VALUES ('local', 'session.spawn', 'k', 'h', 'in_progress', 'e')",
            "INSERT INTO idempotency VALUES ('local', 'session.message', 'm', 'h', 'completed', 'x')",
            "INSERT INTO fleet VALUES ('e')",
        ] {
            sqlx::query(sql).execute(&mut conn).await.expect(sql);
        }
        conn.close().await.expect("close");
        assert_eq!(integrity_check(&db).await.expect("check"), None);
        let ledger = read_ledger(&db).await.expect("read");
        assert_eq!(ledger.keys.len(), 1, "{ledger:?}");
        assert_eq!(ledger.in_state("in_progress").count(), 1);
        assert!(ledger.fleet.contains("e"));
    }
}
