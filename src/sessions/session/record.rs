//! The part of a session that persists: [`SessionRecord`], its mapping to and from the
//! fleet row, A row whose process was alive belonged to
//! a daemon that stopped without recording the exit; it reads as exited (`daemon_stopped`),
//! and rows from before targets bind to the implicit local target (spec §4.2).

use crate::agents::agent_session_id::AgentSessionId;
use crate::store::FleetRow;
use atc_protocol::{ExitReason, NamedBy, SessionId, TermSize};

/// The parts of a session that persist, as loaded from or written to its row.
#[derive(Debug, Clone)]
pub struct SessionRecord {
    /// Session id.
    pub id: SessionId,
    /// Name.
    pub name: String,
    /// Who named it.
    pub named_by: NamedBy,
    /// Agent id.
    pub agent: String,
    /// argv after the program.
    pub args: Vec<String>,
    /// Working directory.
    pub cwd: String,
    /// Pinned.
    pub pinned: bool,
    /// Epoch ms.
    pub created_at: i64,
    /// Epoch ms.
    pub last_attached_at: Option<i64>,
    /// The target it runs on.
    pub target: String,
    /// That target's identity when the session was spawned.
    pub target_identity: String,
    /// The agent's own session id, once a hook reported it.
    pub agent_session_id: Option<AgentSessionId>,
    /// The agent's transcript, as its hooks last reported it.
    pub transcript_path: Option<String>,
    /// Where a remote process was when its harness last let go of it (or last attached).
    pub remote: Option<crate::providers::RemotePosition>,
    /// The model override (already in `args`; kept to list and hash it).
    pub model: Option<String>,
    /// The effort override (already in `args`).
    pub effort: Option<String>,
    /// Last size.
    pub size: TermSize,
    /// Exit of the last process, when there is none now.
    pub exit: Option<ExitInfo>,
    /// The group leader of the local process running now (kept on the row so the next daemon
    /// can end it after a `kill -9` of this one, see `daemon::survivors`).
    pub leader: Option<crate::providers::local::group_leader::GroupLeader>,
    /// The copy of a repository it works in (kept in its own table, joined at load).
    pub workspace: Option<atc_protocol::workspace::WorkspaceInfo>,
    /// The limits its processes run under (empty: none, or a provider without cgroups).
    pub limits: atc_protocol::SessionLimits,
    /// The session it is a sub-session of (never itself a sub-session).
    pub parent: Option<SessionId>,
    /// The host it runs on: its own id, or its parent's when it joined the parent's host
    /// (spec §4.5). Never changes after the spawn.
    pub host_key: SessionId,
}

/// How the last process ended.
#[derive(Debug, Clone, Copy)]
pub struct ExitInfo {
    /// Exit status.
    pub code: Option<i32>,
    /// Signal.
    pub signal: Option<i32>,
    /// Why.
    pub reason: ExitReason,
}

impl SessionRecord {
    /// Whether it runs on another session's host (a sub-session that joined its parent's).
    pub fn on_parents_host(&self) -> bool {
        self.host_key != self.id
    }

    /// Reads a fleet row. A row whose process was alive belonged to a daemon that stopped
    /// without recording the exit: it reads as exited with reason `daemon_stopped`.
    pub fn from_row(row: FleetRow) -> SessionRecord {
        let exit = if row.exited {
            ExitInfo {
                code: row.exit_code,
                signal: row.exit_signal,
                reason: row
                    .exit_reason
                    .as_deref()
                    .map(ExitReason::parse)
                    .unwrap_or(ExitReason::Exited),
            }
        } else {
            ExitInfo {
                code: None,
                signal: None,
                reason: ExitReason::DaemonStopped,
            }
        };
        let limits = row.limits();
        SessionRecord {
            id: row.session_id,
            name: row.name,
            named_by: match row.named_by.as_str() {
                "user" => NamedBy::User,
                "agent" => NamedBy::Agent,
                _ => NamedBy::Auto,
            },
            agent: row.agent,
            args: row.args,
            cwd: row.cwd,
            pinned: row.pinned,
            created_at: row.created_at,
            last_attached_at: row.last_attached,
            // Rows from before targets bind to the implicit local target (spec §4.2).
            target: row.target.unwrap_or_else(|| "local".into()),
            target_identity: row
                .target_identity
                .unwrap_or_else(|| crate::providers::targets::IMPLICIT_LOCAL_IDENTITY.into()),
            agent_session_id: row.agent_session_id.and_then(|raw| {
                // Rows written before ids were checked may hold anything a report sent: such
                // an id is dropped (the next revive starts the agent afresh), never resumed.
                AgentSessionId::parse(&raw)
                    .inspect_err(|e| {
                        tracing::warn!(session = %row.session_id, error = %e,
                            "stored agent session id dropped")
                    })
                    .ok()
            }),
            transcript_path: row.transcript_path,
            remote: match (row.remote_boot_id, row.remote_generation) {
                (Some(boot_id), Some(generation)) => Some(crate::providers::RemotePosition {
                    boot_id,
                    generation,
                    offset: row.remote_offset.unwrap_or(0).max(0) as u64,
                }),
                _ => None,
            },
            model: row.model,
            effort: row.effort,
            size: TermSize {
                cols: row.cols.clamp(1, 4096),
                rows: row.rows.clamp(1, 4096),
            },
            exit: Some(exit),
            // A loaded row's process was the last daemon's: ended by now, or not ours.
            leader: None,
            workspace: None,
            limits,
            parent: row.parent_session_id,
            host_key: row.host_key.unwrap_or(row.session_id),
        }
    }

    /// The row this record writes.
    pub fn to_row(&self) -> FleetRow {
        FleetRow {
            session_id: self.id,
            name: self.name.clone(),
            named_by: match self.named_by {
                NamedBy::Auto => "auto".into(),
                NamedBy::User => "user".into(),
                NamedBy::Agent => "agent".into(),
            },
            cwd: self.cwd.clone(),
            pinned: self.pinned,
            last_attached: self.last_attached_at,
            agent: self.agent.clone(),
            args: self.args.clone(),
            exited: self.exit.is_some(),
            exit_code: self.exit.and_then(|e| e.code),
            exit_signal: self.exit.and_then(|e| e.signal),
            exit_reason: self.exit.map(|e| e.reason.as_str().to_string()),
            cols: self.size.cols,
            rows: self.size.rows,
            created_at: self.created_at,
            target: Some(self.target.clone()),
            target_identity: Some(self.target_identity.clone()),
            agent_session_id: self.agent_session_id.as_ref().map(ToString::to_string),
            model: self.model.clone(),
            effort: self.effort.clone(),
            transcript_path: self.transcript_path.clone(),
            remote_boot_id: self.remote.as_ref().map(|p| p.boot_id.clone()),
            remote_generation: self.remote.as_ref().map(|p| p.generation.clone()),
            remote_offset: self.remote.as_ref().map(|p| p.offset as i64),
            result: None,
            leader_pid: self.leader.as_ref().map(|l| l.pid),
            leader_start_ticks: self
                .leader
                .as_ref()
                .map(|l| i64::try_from(l.start_ticks).unwrap_or(i64::MAX)),
            leader_boot_id: self.leader.as_ref().map(|l| l.boot_id.clone()),
            limit_memory_mib: self.limits.memory_mib.map(|v| v as i64),
            limit_pids: self.limits.pids.map(i64::from),
            limit_cpu_percent: self.limits.cpu_percent.map(i64::from),
            parent_session_id: self.parent,
            // Spec §3.10: only a key that is not the session's own id is stored.
            host_key: self.on_parents_host().then_some(self.host_key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> FleetRow {
        FleetRow {
            session_id: SessionId::from(uuid::Uuid::from_u128(7)),
            name: "proj".into(),
            named_by: "agent".into(),
            cwd: "/tmp/proj".into(),
            pinned: true,
            last_attached: Some(5),
            agent: "claude".into(),
            args: vec!["--model".into(), "m".into()],
            exited: true,
            exit_code: None,
            exit_signal: Some(9),
            exit_reason: Some("killed".into()),
            cols: 100,
            rows: 30,
            created_at: 3,
            target: Some("box".into()),
            target_identity: Some("imp:abc".into()),
            agent_session_id: Some("agent-1".into()),
            model: Some("m".into()),
            effort: None,
            transcript_path: Some("/t.jsonl".into()),
            result: None,
            remote_boot_id: Some("boot".into()),
            remote_generation: Some("g1".into()),
            remote_offset: Some(42),
            leader_pid: None,
            leader_start_ticks: None,
            leader_boot_id: None,
            limit_memory_mib: Some(512),
            limit_pids: None,
            limit_cpu_percent: Some(50),
            parent_session_id: None,
            host_key: None,
        }
    }

    #[test]
    fn a_record_writes_back_the_row_it_was_read_from() {
        let record = SessionRecord::from_row(row());
        assert_eq!(record.named_by, NamedBy::Agent);
        assert_eq!(record.exit.map(|e| e.reason), Some(ExitReason::Killed));
        assert_eq!(record.remote.as_ref().map(|p| p.offset), Some(42));
        assert_eq!(record.to_row(), row());
    }

    #[test]
    fn a_sub_session_keeps_its_parent_and_stores_only_a_host_key_not_its_own() {
        let parent = SessionId::from(uuid::Uuid::from_u128(9));
        let joined = SessionRecord::from_row(FleetRow {
            parent_session_id: Some(parent),
            host_key: Some(parent),
            ..row()
        });
        assert_eq!((joined.parent, joined.host_key), (Some(parent), parent));
        assert_eq!(joined.to_row().host_key, Some(parent));
        let alone = SessionRecord::from_row(row());
        assert_eq!(alone.host_key, alone.id, "no stored key: its own id");
        assert_eq!(alone.to_row().host_key, None, "its own id is not stored");
    }

    #[test]
    fn a_stored_agent_session_id_that_could_be_a_flag_is_dropped() {
        let record = SessionRecord::from_row(FleetRow {
            agent_session_id: Some("--dangerously-skip-permissions".into()),
            ..row()
        });
        assert_eq!(record.agent_session_id, None);
        assert_eq!(record.to_row().agent_session_id, None);
    }

    #[test]
    fn a_row_left_alive_reads_as_stopped_with_the_daemon() {
        let record = SessionRecord::from_row(FleetRow {
            exited: false,
            exit_code: Some(1),
            exit_reason: None,
            ..row()
        });
        let exit = record.exit.expect("a loaded record has no process");
        assert_eq!((exit.reason, exit.code), (ExitReason::DaemonStopped, None));
        assert!(record.to_row().exited, "it is rewritten as exited");
    }

    #[test]
    fn old_rows_bind_to_the_implicit_local_target_and_sizes_are_clamped() {
        let record = SessionRecord::from_row(FleetRow {
            target: None,
            target_identity: None,
            named_by: "something else".into(),
            remote_generation: None,
            cols: 0,
            rows: 9000,
            ..row()
        });
        assert_eq!(record.target, "local");
        assert_eq!(
            record.target_identity,
            crate::providers::targets::IMPLICIT_LOCAL_IDENTITY
        );
        assert_eq!(record.named_by, NamedBy::Auto);
        assert!(record.remote.is_none(), "half a position is none");
        assert_eq!((record.size.cols, record.size.rows), (1, 4096));
    }
}
