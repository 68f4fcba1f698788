//! The `workspace_materialization` table (spec §10): one row per session workspace, its phase
//! written before the phase starts. Statements run straight on the store's connection and are
//! committed when they return, since each is the record an effect on disk is taken under;
//! one spawn at a time touches a row, so rows need no further locking.

use atc_protocol::SessionId;
use sqlx::sqlite::SqliteRow;
use sqlx::Row;

use super::{StateStore, StoreError};
use crate::workspaces::phase::Phase;
use crate::workspaces::record::{Materialization, SourceKind};

const COLUMNS: &str = "session_id, target, dir, source_kind, phase, repo_url, sha, ref, branch,
     host_key, error_code, started_at, updated_at, materialized_at, withheld_env";

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("workspace_materialization.{what}"))
}

fn row_of(r: &SqliteRow) -> Result<Materialization, StoreError> {
    let id: String = r.try_get("session_id")?;
    let kind: String = r.try_get("source_kind")?;
    let phase: String = r.try_get("phase")?;
    let withheld: String = r.try_get("withheld_env")?;
    Ok(Materialization {
        session_id: id.parse().map_err(|_| corrupt("session_id"))?,
        target: r.try_get("target")?,
        dir: r.try_get::<String, _>("dir")?.into(),
        source_kind: SourceKind::parse(&kind).ok_or_else(|| corrupt("source_kind"))?,
        phase: Phase::parse(&phase).ok_or_else(|| corrupt("phase"))?,
        repo_url: r.try_get("repo_url")?,
        sha: r.try_get("sha")?,
        git_ref: r.try_get("ref")?,
        branch: r.try_get("branch")?,
        host_key: r.try_get("host_key")?,
        error_code: r.try_get("error_code")?,
        started_at: r.try_get("started_at")?,
        updated_at: r.try_get("updated_at")?,
        materialized_at: r.try_get("materialized_at")?,
        withheld_env: serde_json::from_str(&withheld).map_err(|_| corrupt("withheld_env"))?,
    })
}

impl StateStore {
    /// Records a workspace about to be made, in its first phase. A row the session had
    /// already (a failed attempt) is replaced.
    pub async fn workspace_begin(&self, m: &Materialization) -> Result<(), StoreError> {
        let withheld =
            serde_json::to_string(&m.withheld_env).map_err(|_| corrupt("withheld_env"))?;
        let mut db = self.db.hold().await?;
        sqlx::query(&format!(
            "INSERT OR REPLACE INTO workspace_materialization ({COLUMNS})
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        ))
        .bind(m.session_id.to_string())
        .bind(&m.target)
        .bind(m.dir.to_string_lossy().into_owned())
        .bind(m.source_kind.as_str())
        .bind(m.phase.as_str())
        .bind(&m.repo_url)
        .bind(&m.sha)
        .bind(&m.git_ref)
        .bind(&m.branch)
        .bind(&m.host_key)
        .bind(&m.error_code)
        .bind(m.started_at)
        .bind(m.updated_at)
        .bind(m.materialized_at)
        .bind(withheld)
        .execute(&mut *db)
        .await?;
        Ok(())
    }

    /// Moves a workspace to `phase`, with the commit once it is known; `ready` also records
    /// when it became ready, and `failed` the code it failed with.
    pub async fn workspace_phase(
        &self,
        session_id: SessionId,
        phase: Phase,
        sha: Option<&str>,
        error_code: Option<&str>,
        now: i64,
    ) -> Result<(), StoreError> {
        let mut db = self.db.hold().await?;
        let done = sqlx::query(
            "UPDATE workspace_materialization
             SET phase = ?, sha = COALESCE(?, sha), error_code = COALESCE(?, error_code),
                 updated_at = ?,
                 materialized_at = CASE WHEN ? = 'ready' THEN ? ELSE materialized_at END
             WHERE session_id = ?",
        )
        .bind(phase.as_str())
        .bind(sha)
        .bind(error_code)
        .bind(now)
        .bind(phase.as_str())
        .bind(now)
        .bind(session_id.to_string())
        .execute(&mut *db)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Missing(format!("workspace of {session_id}")));
        }
        Ok(())
    }

    /// Records where a workspace's copy is, once its host said (a remote host's directory).
    pub async fn workspace_set_dir(
        &self,
        session_id: SessionId,
        dir: &std::path::Path,
    ) -> Result<(), StoreError> {
        let mut db = self.db.hold().await?;
        sqlx::query("UPDATE workspace_materialization SET dir = ? WHERE session_id = ?")
            .bind(dir.to_string_lossy().into_owned())
            .bind(session_id.to_string())
            .execute(&mut *db)
            .await?;
        Ok(())
    }

    /// The workspace of a session, if it has one.
    pub async fn workspace_get(
        &self,
        session_id: SessionId,
    ) -> Result<Option<Materialization>, StoreError> {
        let mut db = self.db.hold().await?;
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM workspace_materialization WHERE session_id = ?"
        ))
        .bind(session_id.to_string())
        .fetch_optional(&mut *db)
        .await?
        .as_ref()
        .map(row_of)
        .transpose()
    }

    /// Every workspace row, oldest first.
    pub async fn workspaces_all(&self) -> Result<Vec<Materialization>, StoreError> {
        let mut db = self.db.hold().await?;
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM workspace_materialization ORDER BY started_at, session_id"
        ))
        .fetch_all(&mut *db)
        .await?
        .iter()
        .map(row_of)
        .collect()
    }

    /// Forgets a session's workspace row (once its directory is gone).
    pub async fn workspace_delete(&self, session_id: SessionId) -> Result<(), StoreError> {
        let mut db = self.db.hold().await?;
        sqlx::query("DELETE FROM workspace_materialization WHERE session_id = ?")
            .bind(session_id.to_string())
            .execute(&mut *db)
            .await?;
        Ok(())
    }

    /// Spec §1.3 step 3: every row a stopped daemon left short of `ready` becomes `failed`
    /// with `workspace_interrupted`; the rows as they were, for their directories to go.
    pub async fn workspaces_interrupt(&self, now: i64) -> Result<Vec<Materialization>, StoreError> {
        let mut db = self.db.hold().await?;
        let unfinished: Vec<Materialization> = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM workspace_materialization
             WHERE phase NOT IN ('ready', 'failed') ORDER BY started_at, session_id"
        ))
        .fetch_all(&mut *db)
        .await?
        .iter()
        .map(row_of)
        .collect::<Result<_, _>>()?;
        sqlx::query(
            "UPDATE workspace_materialization
             SET phase = 'failed', error_code = 'workspace_interrupted', updated_at = ?
             WHERE phase NOT IN ('ready', 'failed')",
        )
        .bind(now)
        .execute(&mut *db)
        .await?;
        Ok(unfinished)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(phase: Phase) -> Materialization {
        Materialization {
            session_id: SessionId::new(),
            target: "local".into(),
            dir: "/w/app-1".into(),
            source_kind: SourceKind::Path,
            phase,
            repo_url: "/src/app".into(),
            sha: None,
            git_ref: Some("main".into()),
            branch: Some("atc/app-1".into()),
            host_key: None,
            error_code: None,
            started_at: 1,
            updated_at: 1,
            materialized_at: None,
            withheld_env: vec!["IMPD_TOKEN".into()],
        }
    }

    #[tokio::test]
    async fn a_row_moves_through_its_phases_and_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let store = StateStore::open(&path).await.unwrap();
        let m = row(Phase::Resolving);
        store.workspace_begin(&m).await.unwrap();
        store
            .workspace_phase(m.session_id, Phase::Cloning, Some("abc"), None, 2)
            .await
            .unwrap();
        store
            .workspace_phase(m.session_id, Phase::Ready, None, None, 3)
            .await
            .unwrap();
        store.close().await.unwrap();
        let store = StateStore::open(&path).await.unwrap();
        let got = store.workspace_get(m.session_id).await.unwrap().unwrap();
        assert_eq!(got.phase, Phase::Ready);
        assert_eq!(got.sha.as_deref(), Some("abc"));
        assert_eq!(got.materialized_at, Some(3));
        assert_eq!(got.withheld_env, ["IMPD_TOKEN"]);
        assert!(store
            .workspace_phase(SessionId::new(), Phase::Ready, None, None, 4)
            .await
            .is_err());
        store.workspace_delete(m.session_id).await.unwrap();
        assert!(store.workspace_get(m.session_id).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn unfinished_rows_become_interrupted_failures() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(&dir.path().join("s.db")).await.unwrap();
        let (ready, cloning) = (row(Phase::Ready), row(Phase::Cloning));
        store.workspace_begin(&ready).await.unwrap();
        store.workspace_begin(&cloning).await.unwrap();
        let interrupted = store.workspaces_interrupt(9).await.unwrap();
        assert_eq!(interrupted.len(), 1);
        assert_eq!(interrupted[0].session_id, cloning.session_id);
        assert_eq!(interrupted[0].phase, Phase::Cloning);
        let now = store
            .workspace_get(cloning.session_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(now.phase, Phase::Failed);
        assert_eq!(now.error_code.as_deref(), Some("workspace_interrupted"));
        assert_eq!(store.workspaces_all().await.unwrap().len(), 2);
        assert!(store.workspaces_interrupt(10).await.unwrap().is_empty());
    }
}
