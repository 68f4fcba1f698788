//! The `fleet` table: one row per session, the columns of spec §10 that apply to local
//! sessions. Columns for later issues (model, effort, target, ...) exist in the schema and are
//! left at their defaults until those issues write them.

use sqlx::sqlite::SqliteExecutor;
use sqlx::Row;
use sqlx::SqliteConnection;

use super::StoreError;
use atc_protocol::SessionId;

/// One persisted session.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetRow {
    /// Session id.
    pub session_id: SessionId,
    /// Display name.
    pub name: String,
    /// `auto`, `user` or `agent`.
    pub named_by: String,
    /// Working directory.
    pub cwd: String,
    /// Pinned flag.
    pub pinned: bool,
    /// Epoch ms of the last attach.
    pub last_attached: Option<i64>,
    /// Agent id.
    pub agent: String,
    /// argv after the program, as spawned.
    pub args: Vec<String>,
    /// The process is gone.
    pub exited: bool,
    /// Its exit status.
    pub exit_code: Option<i32>,
    /// The signal that ended it.
    pub exit_signal: Option<i32>,
    /// Why it is gone (`exited`, `killed`, `daemon_stopped`, `spawn_failed`).
    pub exit_reason: Option<String>,
    /// Last size.
    pub cols: u16,
    /// Last size.
    pub rows: u16,
    /// Epoch ms.
    pub created_at: i64,
    /// The target it runs on (NULL in rows older than targets: `local`).
    pub target: Option<String>,
    /// The target's identity when it was spawned.
    pub target_identity: Option<String>,
    /// The agent's own session id, once a hook reported it.
    pub agent_session_id: Option<String>,
    /// The model override it was spawned with.
    pub model: Option<String>,
    /// The effort override it was spawned with.
    pub effort: Option<String>,
    /// The agent's transcript, as its hooks last reported it.
    pub transcript_path: Option<String>,
    /// The last turn's result (≤16 KiB). Written only by its own single-row update; a full
    /// row write leaves it as it is.
    pub result: Option<String>,
    /// A remote session's process position: guest boot, generation, offset (migration 0004).
    pub remote_boot_id: Option<String>,
    /// See `remote_boot_id`.
    pub remote_generation: Option<String>,
    /// See `remote_boot_id`.
    pub remote_offset: Option<i64>,
    /// The running local process's group leader: pid (migration 0008).
    pub leader_pid: Option<i32>,
    /// See `leader_pid`: its start time in clock ticks since boot.
    pub leader_start_ticks: Option<i64>,
    /// See `leader_pid`: the boot it started in.
    pub leader_boot_id: Option<String>,
    /// Its memory limit in MiB (migration 0010); `None`: no limit.
    pub limit_memory_mib: Option<i64>,
    /// Its process limit.
    pub limit_pids: Option<i64>,
    /// Its CPU limit, in percent of one core.
    pub limit_cpu_percent: Option<i64>,
    /// The session it is a sub-session of (spec §3.2: one level deep).
    pub parent_session_id: Option<SessionId>,
    /// The host key, stored only when it is not the session's own id (spec §3.10): a
    /// sub-session on its parent's host.
    pub host_key: Option<SessionId>,
}

/// The row as `GET /v1/fleet` lists it: everything but where the process was (its remote
/// position and its local group leader), which only this daemon's restore reads.
impl From<FleetRow> for atc_protocol::responses::FleetEntry {
    fn from(r: FleetRow) -> Self {
        atc_protocol::responses::FleetEntry {
            session_id: r.session_id,
            name: r.name,
            named_by: r.named_by,
            cwd: r.cwd,
            pinned: r.pinned,
            last_attached: r.last_attached,
            agent: r.agent,
            args: r.args,
            exited: r.exited,
            exit_code: r.exit_code,
            exit_signal: r.exit_signal,
            exit_reason: r.exit_reason,
            cols: r.cols,
            rows: r.rows,
            created_at: r.created_at,
            target: r.target,
            target_identity: r.target_identity,
            agent_session_id: r.agent_session_id,
            transcript_path: r.transcript_path,
            result: r.result,
            model: r.model,
            effort: r.effort,
        }
    }
}

impl FleetRow {
    /// The group leader of the local process that ran when the row was written last, if one
    /// did (see [`crate::providers::local::group_leader`]).
    pub fn leader(&self) -> Option<crate::providers::local::group_leader::GroupLeader> {
        match (
            self.leader_pid,
            self.leader_start_ticks,
            &self.leader_boot_id,
        ) {
            (Some(pid), Some(ticks), Some(boot)) if pid > 0 && ticks >= 0 => {
                Some(crate::providers::local::group_leader::GroupLeader {
                    pid,
                    start_ticks: ticks as u64,
                    boot_id: boot.clone(),
                })
            }
            _ => None,
        }
    }

    /// The limits the row's session runs under; a stored value out of range (written by
    /// hand, or by a newer daemon) reads as no limit rather than a wrong one.
    pub fn limits(&self) -> atc_protocol::SessionLimits {
        let limits = atc_protocol::SessionLimits {
            memory_mib: self.limit_memory_mib.and_then(|v| u64::try_from(v).ok()),
            pids: self.limit_pids.and_then(|v| u32::try_from(v).ok()),
            cpu_percent: self.limit_cpu_percent.and_then(|v| u32::try_from(v).ok()),
        };
        match limits.out_of_bounds() {
            None => limits,
            Some(_) => atc_protocol::SessionLimits::default(),
        }
    }

    /// The host key the row's session uses on a remote host its process has run on: its own
    /// id (sessions joining a parent's host are not stored yet, spec §4.5). `None` when no
    /// process of it ever ran there (no remote position is recorded): the row is then a spawn
    /// the daemon died before starting, which owns nothing on the host yet, and had the daemon
    /// lived the spawn would have been refused and the row removed.
    pub fn host_in_use(&self) -> Option<String> {
        let ran = self.remote_boot_id.is_some() || self.remote_generation.is_some();
        ran.then(|| self.host_key.unwrap_or(self.session_id).to_string())
    }
}

pub(super) async fn upsert<'e>(
    db: impl SqliteExecutor<'e>,
    row: &FleetRow,
) -> Result<(), StoreError> {
    let args = serde_json::to_string(&row.args).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    sqlx::query(
        "INSERT INTO fleet (session_id, name, named_by, cwd, pinned, last_attached, agent, args,
                            exited, exit_code, exit_signal, exit_reason, cols, rows, created_at,
                            target, target_identity, agent_session_id, model, effort,
                            transcript_path, remote_boot_id, remote_generation, remote_offset,
                            leader_pid, leader_start_ticks, leader_boot_id,
                            limit_memory_mib, limit_pids, limit_cpu_percent,
                            parent_session_id, host_key)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
                 ?, ?, ?, ?, ?)
         ON CONFLICT (session_id) DO UPDATE SET
            name = excluded.name, named_by = excluded.named_by, cwd = excluded.cwd,
            pinned = excluded.pinned, last_attached = excluded.last_attached,
            agent = excluded.agent, args = excluded.args, exited = excluded.exited,
            exit_code = excluded.exit_code, exit_signal = excluded.exit_signal,
            exit_reason = excluded.exit_reason, cols = excluded.cols, rows = excluded.rows,
            target = excluded.target, target_identity = excluded.target_identity,
            agent_session_id = excluded.agent_session_id, model = excluded.model,
            effort = excluded.effort, transcript_path = excluded.transcript_path,
            remote_boot_id = excluded.remote_boot_id,
            remote_generation = excluded.remote_generation,
            remote_offset = excluded.remote_offset,
            leader_pid = excluded.leader_pid,
            leader_start_ticks = excluded.leader_start_ticks,
            leader_boot_id = excluded.leader_boot_id,
            limit_memory_mib = excluded.limit_memory_mib, limit_pids = excluded.limit_pids,
            limit_cpu_percent = excluded.limit_cpu_percent,
            parent_session_id = excluded.parent_session_id, host_key = excluded.host_key",
    )
    .bind(row.session_id.to_string())
    .bind(&row.name)
    .bind(&row.named_by)
    .bind(&row.cwd)
    .bind(row.pinned)
    .bind(row.last_attached)
    .bind(&row.agent)
    .bind(args)
    .bind(row.exited)
    .bind(row.exit_code)
    .bind(row.exit_signal)
    .bind(&row.exit_reason)
    .bind(row.cols)
    .bind(row.rows)
    .bind(row.created_at)
    .bind(&row.target)
    .bind(&row.target_identity)
    .bind(&row.agent_session_id)
    .bind(&row.model)
    .bind(&row.effort)
    .bind(&row.transcript_path)
    .bind(&row.remote_boot_id)
    .bind(&row.remote_generation)
    .bind(row.remote_offset)
    .bind(row.leader_pid)
    .bind(row.leader_start_ticks)
    .bind(&row.leader_boot_id)
    .bind(row.limit_memory_mib)
    .bind(row.limit_pids)
    .bind(row.limit_cpu_percent)
    .bind(row.parent_session_id.map(|p| p.to_string()))
    .bind(row.host_key.map(|k| k.to_string()))
    .execute(db)
    .await?;
    Ok(())
}

/// The single-row update of spec §3.10 for a turn-done result.
pub(super) async fn set_result<'e>(
    db: impl SqliteExecutor<'e>,
    id: SessionId,
    result: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE fleet SET result = ? WHERE session_id = ?")
        .bind(result)
        .bind(id.to_string())
        .execute(db)
        .await?;
    Ok(())
}

/// The single-row update of spec §3.10 for a transcript path change.
pub(super) async fn set_transcript_path<'e>(
    db: impl SqliteExecutor<'e>,
    id: SessionId,
    path: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE fleet SET transcript_path = ? WHERE session_id = ?")
        .bind(path)
        .bind(id.to_string())
        .execute(db)
        .await?;
    Ok(())
}

pub(super) async fn load_all(db: &mut SqliteConnection) -> Result<Vec<FleetRow>, StoreError> {
    let rows = sqlx::query(
        "SELECT session_id, name, named_by, cwd, pinned, last_attached, agent, args, exited,
                exit_code, exit_signal, exit_reason, cols, rows, created_at, target, target_identity,
                agent_session_id, model, effort, transcript_path, result,
                remote_boot_id, remote_generation, remote_offset,
                leader_pid, leader_start_ticks, leader_boot_id,
                limit_memory_mib, limit_pids, limit_cpu_percent, parent_session_id, host_key
         FROM fleet ORDER BY created_at, session_id",
    )
    .fetch_all(&mut *db)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let id: String = r.try_get("session_id")?;
        let Ok(session_id) = id.parse::<SessionId>() else {
            tracing::warn!(row = %id, "skipping fleet row with a malformed session id");
            continue;
        };
        let args: String = r.try_get("args")?;
        // A malformed link reads as none: the session stands alone on its own host.
        let id_in = |column: &str| -> Result<Option<SessionId>, StoreError> {
            let raw: Option<String> = r.try_get(column)?;
            Ok(raw.and_then(|v| v.parse::<SessionId>().ok()))
        };
        out.push(FleetRow {
            session_id,
            name: r.try_get("name")?,
            named_by: r.try_get("named_by")?,
            cwd: r.try_get("cwd")?,
            pinned: r.try_get("pinned")?,
            last_attached: r.try_get("last_attached")?,
            agent: r.try_get("agent")?,
            args: serde_json::from_str(&args).unwrap_or_default(),
            exited: r.try_get("exited")?,
            exit_code: r.try_get("exit_code")?,
            exit_signal: r.try_get("exit_signal")?,
            exit_reason: r.try_get("exit_reason")?,
            cols: r.try_get("cols")?,
            rows: r.try_get("rows")?,
            created_at: r.try_get("created_at")?,
            target: r.try_get("target")?,
            target_identity: r.try_get("target_identity")?,
            agent_session_id: r.try_get("agent_session_id")?,
            model: r.try_get("model")?,
            effort: r.try_get("effort")?,
            transcript_path: r.try_get("transcript_path")?,
            result: r.try_get("result")?,
            remote_boot_id: r.try_get("remote_boot_id")?,
            remote_generation: r.try_get("remote_generation")?,
            remote_offset: r.try_get("remote_offset")?,
            leader_pid: r.try_get("leader_pid")?,
            leader_start_ticks: r.try_get("leader_start_ticks")?,
            leader_boot_id: r.try_get("leader_boot_id")?,
            limit_memory_mib: r.try_get("limit_memory_mib")?,
            limit_pids: r.try_get("limit_pids")?,
            limit_cpu_percent: r.try_get("limit_cpu_percent")?,
            parent_session_id: id_in("parent_session_id")?,
            host_key: id_in("host_key")?,
        });
    }
    Ok(out)
}
