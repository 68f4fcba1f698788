//! The `broker_bindings` and `broker_grants` tables (spec §6.3): each host's binding record
//! and its grant rows, as `broker::binding` defines them, kept for the broker's
//! [`BindingStore`]. Every statement runs straight on the
//! store's connection, outside the write queue, and is committed when it returns, because the
//! binder records each step before it takes it; the binder's one actor per host makes sure two
//! operations on one host never interleave, so the rows need no further locking. Names, rules
//! and states only: the schema has no column a credential value could go in.

use sqlx::sqlite::SqliteRow;
use sqlx::Row;
use sqlx::SqliteConnection;
use uuid::Uuid;

use super::{StateStore, StoreError};
use crate::providers::imp::broker::binding::{
    binding_state, grant_state, Binding, BoundSecret, Grant, PendingRebind,
};
use crate::providers::imp::broker::binding_store::{BindingStore, Stored};
use atc_protocol::responses::{AuthBindingState, AuthGrantState};

fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {e}"))
}

fn uuid_of(r: &SqliteRow, column: &str) -> Result<Uuid, StoreError> {
    let s: String = r.try_get(column)?;
    Uuid::parse_str(&s).map_err(|e| corrupt(column, e))
}

fn revision_of(v: i64, column: &str) -> Result<u32, StoreError> {
    u32::try_from(v).map_err(|e| corrupt(column, e))
}

fn secrets_of(json: &str, column: &str) -> Result<Vec<BoundSecret>, StoreError> {
    serde_json::from_str(json).map_err(|e| corrupt(column, e))
}

fn secrets_json(secrets: &[BoundSecret]) -> Result<String, StoreError> {
    serde_json::to_string(secrets).map_err(|e| corrupt("binding_json", e))
}

fn binding_of(r: &SqliteRow) -> Result<Binding, StoreError> {
    let pending = match (
        r.try_get::<Option<i64>, _>("pending_revision")?,
        r.try_get::<Option<String>, _>("pending_hash")?,
        r.try_get::<Option<String>, _>("pending_json")?,
        r.try_get::<Option<String>, _>("pending_attempt_id")?,
    ) {
        (None, None, None, None) => None,
        (Some(revision), Some(hash), Some(json), Some(attempt)) => Some(PendingRebind {
            revision: revision_of(revision, "pending_revision")?,
            hash,
            secrets: secrets_of(&json, "pending_json")?,
            attempt_id: Uuid::parse_str(&attempt).map_err(|e| corrupt("pending_attempt_id", e))?,
        }),
        _ => return Err(StoreError::Corrupt("a partial pending rebind".into())),
    };
    Ok(Binding {
        host_key: r.try_get("host_key")?,
        target: r.try_get("target")?,
        target_identity: r.try_get("target_identity")?,
        imp_name: r.try_get("imp_name")?,
        imp_id: r.try_get("imp_id")?,
        revision: revision_of(r.try_get("revision")?, "revision")?,
        hash: r.try_get("hash")?,
        secrets: secrets_of(&r.try_get::<String, _>("binding_json")?, "binding_json")?,
        state: binding_state(&r.try_get::<String, _>("state")?)
            .map_err(|e| corrupt("broker_bindings.state", e))?,
        attempt_id: uuid_of(r, "attempt_id")?,
        created_imp: r.try_get("created_imp")?,
        pending_rebind: pending,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn grant_of(r: &SqliteRow) -> Result<Grant, StoreError> {
    Ok(Grant {
        host_key: r.try_get("host_key")?,
        secret: r.try_get("secret")?,
        state: grant_state(&r.try_get::<String, _>("state")?)
            .map_err(|e| corrupt("broker_grants.state", e))?,
        preexisted: r.try_get("preexisted")?,
        attempt_id: uuid_of(r, "attempt_id")?,
    })
}

const BINDING_COLUMNS: &str = "host_key, target, target_identity, imp_name, imp_id, revision, hash,
     binding_json, state, attempt_id, created_imp, pending_revision, pending_hash, pending_json,
     pending_attempt_id, created_at, updated_at";

pub(super) async fn get(
    db: &mut SqliteConnection,
    host_key: &str,
) -> Result<Option<Binding>, StoreError> {
    sqlx::query(&format!(
        "SELECT {BINDING_COLUMNS} FROM broker_bindings WHERE host_key = ?"
    ))
    .bind(host_key)
    .fetch_optional(&mut *db)
    .await?
    .as_ref()
    .map(binding_of)
    .transpose()
}

pub(super) async fn all(db: &mut SqliteConnection) -> Result<Vec<Binding>, StoreError> {
    sqlx::query(&format!(
        "SELECT {BINDING_COLUMNS} FROM broker_bindings ORDER BY created_at, host_key"
    ))
    .fetch_all(&mut *db)
    .await?
    .iter()
    .map(binding_of)
    .collect()
}

/// Inserts or replaces the record. An upsert, not `INSERT OR REPLACE`: a replace deletes the
/// old row first, and that delete would cascade to the binding's grant rows.
pub(super) async fn put(db: &mut SqliteConnection, b: &Binding) -> Result<(), StoreError> {
    let pending = b.pending_rebind.as_ref();
    let pending_json = pending.map(|p| secrets_json(&p.secrets)).transpose()?;
    sqlx::query(&format!(
        "INSERT INTO broker_bindings ({BINDING_COLUMNS})
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (host_key) DO UPDATE SET
            target = excluded.target, target_identity = excluded.target_identity,
            imp_name = excluded.imp_name, imp_id = excluded.imp_id,
            revision = excluded.revision, hash = excluded.hash,
            binding_json = excluded.binding_json, state = excluded.state,
            attempt_id = excluded.attempt_id, created_imp = excluded.created_imp,
            pending_revision = excluded.pending_revision, pending_hash = excluded.pending_hash,
            pending_json = excluded.pending_json,
            pending_attempt_id = excluded.pending_attempt_id,
            created_at = excluded.created_at, updated_at = excluded.updated_at"
    ))
    .bind(&b.host_key)
    .bind(&b.target)
    .bind(&b.target_identity)
    .bind(&b.imp_name)
    .bind(&b.imp_id)
    .bind(i64::from(b.revision))
    .bind(&b.hash)
    .bind(secrets_json(&b.secrets)?)
    .bind(b.state.as_str())
    .bind(b.attempt_id.to_string())
    .bind(b.created_imp)
    .bind(pending.map(|p| i64::from(p.revision)))
    .bind(pending.map(|p| p.hash.as_str()))
    .bind(pending_json)
    .bind(pending.map(|p| p.attempt_id.to_string()))
    .bind(b.created_at)
    .bind(b.updated_at)
    .execute(&mut *db)
    .await?;
    Ok(())
}

pub(super) async fn set_state(
    db: &mut SqliteConnection,
    host_key: &str,
    state: AuthBindingState,
    now: i64,
) -> Result<(), StoreError> {
    let changed =
        sqlx::query("UPDATE broker_bindings SET state = ?, updated_at = ? WHERE host_key = ?")
            .bind(state.as_str())
            .bind(now)
            .bind(host_key)
            .execute(&mut *db)
            .await?
            .rows_affected();
    if changed == 0 {
        return Err(StoreError::Missing(format!(
            "binding for host '{host_key}'"
        )));
    }
    Ok(())
}

/// Drops the record and, by the foreign key, its grant rows. An absent record is no error.
pub(super) async fn delete(db: &mut SqliteConnection, host_key: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM broker_bindings WHERE host_key = ?")
        .bind(host_key)
        .execute(&mut *db)
        .await?;
    Ok(())
}

/// Inserts or replaces a grant row. Its binding must be recorded first (the foreign key).
pub(super) async fn grant_put(db: &mut SqliteConnection, g: &Grant) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO broker_grants (host_key, secret, state, preexisted, attempt_id)
         VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (host_key, secret) DO UPDATE SET
            state = excluded.state, preexisted = excluded.preexisted,
            attempt_id = excluded.attempt_id",
    )
    .bind(&g.host_key)
    .bind(&g.secret)
    .bind(g.state.as_str())
    .bind(g.preexisted)
    .bind(g.attempt_id.to_string())
    .execute(&mut *db)
    .await
    .map_err(|e| match &e {
        sqlx::Error::Database(d) if d.kind() == sqlx::error::ErrorKind::ForeignKeyViolation => {
            StoreError::Missing(format!("binding for host '{}'", g.host_key))
        }
        _ => StoreError::Sqlx(e),
    })?;
    Ok(())
}

pub(super) async fn grant_set_state(
    db: &mut SqliteConnection,
    host_key: &str,
    secret: &str,
    state: AuthGrantState,
) -> Result<(), StoreError> {
    let changed =
        sqlx::query("UPDATE broker_grants SET state = ? WHERE host_key = ? AND secret = ?")
            .bind(state.as_str())
            .bind(host_key)
            .bind(secret)
            .execute(&mut *db)
            .await?
            .rows_affected();
    if changed == 0 {
        return Err(StoreError::Missing(format!(
            "grant of '{secret}' on host '{host_key}'"
        )));
    }
    Ok(())
}

pub(super) async fn grants_of(
    db: &mut SqliteConnection,
    host_key: &str,
) -> Result<Vec<Grant>, StoreError> {
    sqlx::query(
        "SELECT host_key, secret, state, preexisted, attempt_id FROM broker_grants
         WHERE host_key = ? ORDER BY secret",
    )
    .bind(host_key)
    .fetch_all(&mut *db)
    .await?
    .iter()
    .map(grant_of)
    .collect()
}

/// Drops one grant row. An absent row is no error.
pub(super) async fn grant_delete(
    db: &mut SqliteConnection,
    host_key: &str,
    secret: &str,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM broker_grants WHERE host_key = ? AND secret = ?")
        .bind(host_key)
        .bind(secret)
        .execute(&mut *db)
        .await?;
    Ok(())
}

/// The broker's records live here; each operation holds the connection for one statement.
impl BindingStore for StateStore {
    fn binding_get<'a>(&'a self, host_key: &'a str) -> Stored<'a, Option<Binding>> {
        Box::pin(async move { Ok(get(&mut *self.db.hold().await?, host_key).await?) })
    }

    fn bindings_all(&self) -> Stored<'_, Vec<Binding>> {
        Box::pin(async move { Ok(all(&mut *self.db.hold().await?).await?) })
    }

    fn binding_put<'a>(&'a self, binding: &'a Binding) -> Stored<'a, ()> {
        Box::pin(async move { Ok(put(&mut *self.db.hold().await?, binding).await?) })
    }

    fn binding_set_state<'a>(
        &'a self,
        host_key: &'a str,
        state: AuthBindingState,
        now: i64,
    ) -> Stored<'a, ()> {
        Box::pin(
            async move { Ok(set_state(&mut *self.db.hold().await?, host_key, state, now).await?) },
        )
    }

    fn binding_delete<'a>(&'a self, host_key: &'a str) -> Stored<'a, ()> {
        Box::pin(async move { Ok(delete(&mut *self.db.hold().await?, host_key).await?) })
    }

    fn grant_put<'a>(&'a self, grant: &'a Grant) -> Stored<'a, ()> {
        Box::pin(async move { Ok(grant_put(&mut *self.db.hold().await?, grant).await?) })
    }

    fn grant_set_state<'a>(
        &'a self,
        host_key: &'a str,
        secret: &'a str,
        state: AuthGrantState,
    ) -> Stored<'a, ()> {
        Box::pin(async move {
            Ok(grant_set_state(&mut *self.db.hold().await?, host_key, secret, state).await?)
        })
    }

    fn grants_of<'a>(&'a self, host_key: &'a str) -> Stored<'a, Vec<Grant>> {
        Box::pin(async move { Ok(grants_of(&mut *self.db.hold().await?, host_key).await?) })
    }

    fn grant_delete<'a>(&'a self, host_key: &'a str, secret: &'a str) -> Stored<'a, ()> {
        Box::pin(
            async move { Ok(grant_delete(&mut *self.db.hold().await?, host_key, secret).await?) },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::StateStore;
    use super::*;
    use crate::providers::imp::broker::binding::BoundRule;

    /// Whether a write failed because the row it names is not there.
    fn missing(r: Result<(), crate::providers::imp::broker::binding_store::StoreFailure>) -> bool {
        matches!(
            r.map_err(|e| e.downcast::<StoreError>()),
            Err(Ok(e)) if matches!(*e, StoreError::Missing(_))
        )
    }

    /// Looks like a credential; the test keeps it and never hands it to the store.
    const VALUE: &str = "ghp_Zk7QvT3xW9mN2pL8rY4sB6cH1dF5gJ0aKeU";

    fn secrets() -> Vec<BoundSecret> {
        vec![
            BoundSecret {
                name: "claude-oauth".into(),
                kind: "custom".into(),
                rules: vec![BoundRule {
                    host: "api.anthropic.com".into(),
                    header: "authorization".into(),
                    scheme: "bearer".into(),
                    user: None,
                }],
            },
            BoundSecret {
                name: "git-basic".into(),
                kind: "github".into(),
                rules: vec![BoundRule {
                    host: "git.example".into(),
                    header: "authorization".into(),
                    scheme: "basic".into(),
                    user: Some("x-access".into()),
                }],
            },
        ]
    }

    fn binding(host_key: &str) -> Binding {
        let mut b = Binding::provisioning(host_key, "imp", "imp:0f1e", "atc-h", secrets(), 100);
        b.imp_id = Some("imp_123".into());
        b.created_imp = true;
        b
    }

    fn grant(host_key: &str, secret: &str, attempt: Uuid) -> Grant {
        Grant {
            host_key: host_key.into(),
            secret: secret.into(),
            state: AuthGrantState::Granting,
            preexisted: false,
            attempt_id: attempt,
        }
    }

    async fn open() -> (tempfile::TempDir, StateStore) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = StateStore::open(&dir.path().join("atc.db"))
            .await
            .expect("open");
        (dir, store)
    }

    #[tokio::test]
    async fn a_binding_round_trips_every_field_and_state() {
        let (_dir, store) = open().await;
        assert_eq!(store.binding_get("h").await.unwrap(), None);
        let mut b = binding("h");
        store.binding_put(&b).await.unwrap();
        assert_eq!(store.binding_get("h").await.unwrap().as_ref(), Some(&b));
        // Every state, through the full write and through the state-only write.
        for s in AuthBindingState::ALL {
            b.state = s;
            b.updated_at += 1;
            store.binding_put(&b).await.unwrap();
            assert_eq!(store.binding_get("h").await.unwrap().as_ref(), Some(&b));
            store
                .binding_set_state("h", AuthBindingState::Ready, 7)
                .await
                .unwrap();
            let got = store.binding_get("h").await.unwrap().unwrap();
            assert_eq!((got.state, got.updated_at), (AuthBindingState::Ready, 7));
            store.binding_set_state("h", s, 8).await.unwrap();
            assert_eq!(store.binding_get("h").await.unwrap().unwrap().state, s);
        }
        // A rebind in flight, then committed.
        b.state = AuthBindingState::Ready;
        let mut next = secrets();
        next.pop();
        b.begin_rebind(next, 200).unwrap();
        store.binding_put(&b).await.unwrap();
        let got = store.binding_get("h").await.unwrap().unwrap();
        assert_eq!(got, b);
        assert_eq!(got.pending_rebind.as_ref().map(|p| p.revision), Some(2));
        b.commit_rebind(300);
        store.binding_put(&b).await.unwrap();
        assert_eq!(store.binding_get("h").await.unwrap().as_ref(), Some(&b));
        // No imp yet, not created by this attempt.
        let mut fresh = Binding::provisioning("h2", "imp", "imp:0f1e", "atc-h2", vec![], 400);
        fresh.secrets = vec![];
        store.binding_put(&fresh).await.unwrap();
        assert_eq!(
            store.binding_get("h2").await.unwrap().as_ref(),
            Some(&fresh)
        );
        assert_eq!(store.bindings_all().await.unwrap(), vec![b, fresh]);
    }

    #[tokio::test]
    async fn grants_round_trip_every_state_and_belong_to_their_binding() {
        let (_dir, store) = open().await;
        let b = binding("h");
        // A grant is recorded after its binding, never before.
        assert!(missing(
            store
                .grant_put(&grant("h", "git-basic", b.attempt_id))
                .await
        ));
        store.binding_put(&b).await.unwrap();
        let mut g = grant("h", "git-basic", b.attempt_id);
        let mut other = grant("h", "claude-oauth", Uuid::new_v4());
        other.preexisted = true;
        other.state = AuthGrantState::Granted;
        store.grant_put(&g).await.unwrap();
        store.grant_put(&other).await.unwrap();
        for s in AuthGrantState::ALL {
            g.state = s;
            store.grant_put(&g).await.unwrap();
            assert_eq!(
                store.grants_of("h").await.unwrap(),
                vec![other.clone(), g.clone()]
            );
            store
                .grant_set_state("h", "git-basic", AuthGrantState::Uncertain)
                .await
                .unwrap();
            store.grant_set_state("h", "git-basic", s).await.unwrap();
            assert_eq!(store.grants_of("h").await.unwrap()[1].state, s);
        }
        assert!(missing(
            store
                .grant_set_state("h", "nope", AuthGrantState::Granted)
                .await
        ));
        // Rewriting the binding keeps its grants; deleting it drops them.
        store.binding_put(&b).await.unwrap();
        assert_eq!(store.grants_of("h").await.unwrap().len(), 2);
        store.grant_delete("h", "git-basic").await.unwrap();
        assert_eq!(store.grants_of("h").await.unwrap(), vec![other]);
        store.binding_delete("h").await.unwrap();
        assert_eq!(store.binding_get("h").await.unwrap(), None);
        assert!(store.grants_of("h").await.unwrap().is_empty());
        assert!(missing(
            store
                .binding_set_state("h", AuthBindingState::Ready, 1)
                .await
        ));
        // Deleting what is gone is no error.
        store.binding_delete("h").await.unwrap();
        store.grant_delete("h", "git-basic").await.unwrap();
    }

    #[tokio::test]
    async fn the_schema_refuses_an_unknown_state_word() {
        let (_dir, store) = open().await;
        store.binding_put(&binding("h")).await.unwrap();
        let refused = |r: Result<sqlx::sqlite::SqliteQueryResult, sqlx::Error>| match r {
            Err(sqlx::Error::Database(d)) => d.kind() == sqlx::error::ErrorKind::CheckViolation,
            _ => false,
        };
        assert!(refused(
            sqlx::query("UPDATE broker_bindings SET state = 'active' WHERE host_key = 'h'")
                .execute(&mut *store.db.hold().await.unwrap())
                .await
        ));
        assert!(refused(
            sqlx::query(
                "INSERT INTO broker_grants (host_key, secret, state, preexisted, attempt_id)
                 VALUES ('h', 's', 'pending', 0, 'a')"
            )
            .execute(&mut *store.db.hold().await.unwrap())
            .await
        ));
        // The word a grant takes is not one a binding takes, and the other way round.
        assert!(refused(
            sqlx::query("UPDATE broker_bindings SET state = 'granted' WHERE host_key = 'h'")
                .execute(&mut *store.db.hold().await.unwrap())
                .await
        ));
        assert!(refused(
            sqlx::query(
                "INSERT INTO broker_grants (host_key, secret, state, preexisted, attempt_id)
                 VALUES ('h', 's', 'ready', 0, 'a')"
            )
            .execute(&mut *store.db.hold().await.unwrap())
            .await
        ));
        // A half-recorded rebind is refused too.
        assert!(refused(
            sqlx::query("UPDATE broker_bindings SET pending_revision = 2 WHERE host_key = 'h'")
                .execute(&mut *store.db.hold().await.unwrap())
                .await
        ));
        // And every known word is accepted.
        for s in AuthBindingState::ALL {
            sqlx::query("UPDATE broker_bindings SET state = ? WHERE host_key = 'h'")
                .bind(s.as_str())
                .execute(&mut *store.db.hold().await.unwrap())
                .await
                .unwrap();
        }
    }

    #[tokio::test]
    async fn the_schema_has_no_column_for_a_value() {
        let (_dir, store) = open().await;
        let columns = |table: &'static str| {
            let db = store.db.clone();
            async move {
                let rows = sqlx::query(&format!("PRAGMA table_info({table})"))
                    .fetch_all(&mut *db.hold().await.unwrap())
                    .await
                    .unwrap();
                rows.iter()
                    .map(|r| r.try_get::<String, _>("name").unwrap())
                    .collect::<Vec<_>>()
            }
        };
        // A new column here is a schema change that must argue it cannot hold a value.
        assert_eq!(
            columns("broker_bindings").await,
            [
                "host_key",
                "target",
                "target_identity",
                "imp_name",
                "imp_id",
                "revision",
                "hash",
                "binding_json",
                "state",
                "attempt_id",
                "created_imp",
                "pending_revision",
                "pending_hash",
                "pending_json",
                "pending_attempt_id",
                "created_at",
                "updated_at"
            ]
        );
        assert_eq!(
            columns("broker_grants").await,
            ["host_key", "secret", "state", "preexisted", "attempt_id"]
        );
    }

    #[tokio::test]
    async fn the_database_files_hold_the_names_and_never_the_value() {
        let (dir, store) = open().await;
        let mut b = binding("h");
        store.binding_put(&b).await.unwrap();
        b.state = AuthBindingState::Ready;
        b.begin_rebind(secrets(), 150).unwrap();
        store.binding_put(&b).await.unwrap();
        for s in secrets() {
            store
                .grant_put(&grant("h", &s.name, b.attempt_id))
                .await
                .unwrap();
        }
        store.close().await.unwrap();
        // Every file SQLite keeps (the db, its WAL and shared memory), as bytes.
        let mut bytes = Vec::new();
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            bytes.extend(std::fs::read(entry.unwrap().path()).unwrap());
        }
        let holds = |needle: &str| bytes.windows(needle.len()).any(|w| w == needle.as_bytes());
        // The grep finds what was stored, so its silence about the value means something.
        assert!(holds("claude-oauth"), "the secret's name is stored");
        assert!(holds("api.anthropic.com"), "its rule is stored");
        assert!(!holds(VALUE), "a credential value reached the database");
        assert!(
            !holds(&VALUE[4..20]),
            "part of a credential value reached it"
        );
    }
}
