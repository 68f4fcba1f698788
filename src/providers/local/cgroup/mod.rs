//! Local sessions in cgroups: limits the kernel enforces, usage read when asked, and a kill
//! that reaches every process a session made (issue 35).
//!
//! The daemon owns one cgroup, `atc-<tag>`, below its own in each hierarchy, and each local
//! session's process runs in a child of it named for the session's id:
//!
//! ```text
//! <root>/memory/<daemon's own>/atc-<tag>/<session id>   memory.limit_in_bytes, oom_control
//! <root>/pids/<daemon's own>/atc-<tag>/<session id>     pids.max, cgroup.procs
//! <root>/cpu/<daemon's own>/atc-<tag>/<session id>      cpu.cfs_quota_us
//! <root>/cpuacct/<daemon's own>/atc-<tag>/<session id>  cpuacct.usage
//! ```
//!
//! The daemon itself stays in its own cgroup, in none of these. `atc-<tag>` gets a CPU
//! weight of a [eighth](session_group::SESSIONS_CPU_SHARES) of one daemon thread's, so under
//! any load its sessions make, the daemon's threads run first; the weight only matters when
//! the CPU is contended, so sessions still get every cycle the daemon leaves. The tag comes
//! from the state dir, so a restarted daemon finds (and sweeps) what its predecessor left,
//! and daemons on other state dirs (tests run many) never touch each other's.
//!
//! - [`hierarchy`]: which hierarchies the machine has, and the daemon's place in each.
//! - [`session_group`]: one session's cgroup.
//!
//! Only cgroup v1 hierarchies are used so far. A machine with neither writable v1 hierarchies
//! nor (later) a delegated v2 tree runs sessions without cgroups, and a spawn asking for
//! limits there is refused (`no_cgroups`).

pub mod hierarchy;
pub mod session_group;

use std::path::{Path, PathBuf};

use atc_protocol::{SessionId, Usage};

use hierarchy::{Controller, Hierarchy};
use session_group::{Place, SessionGroup};

/// The daemon's cgroup for sessions, in each hierarchy.
#[derive(Debug)]
pub struct SessionCgroups {
    hierarchies: Vec<Hierarchy>,
    /// `atc-<tag>`.
    name: String,
}

/// Which mechanism the daemon has, for its start-up log and `GET /v1/daemon`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mechanism {
    /// cgroup v1 hierarchies, with the daemon's sessions' cgroup in the memory one here.
    V1 {
        /// The parent of the sessions' cgroups in the memory hierarchy.
        memory_parent: PathBuf,
    },
    /// None: why not.
    None(String),
}

impl SessionCgroups {
    /// Finds the hierarchies under `root` and makes the daemon's cgroup in each (tag: see the
    /// module doc); `Err` says why sessions must run without cgroups.
    pub fn detect(root: &Path, tag: &str) -> Result<SessionCgroups, String> {
        let read = |path: &str| {
            std::fs::read_to_string(path).map_err(|e| format!("{path} is unreadable: {e}"))
        };
        let hierarchies = hierarchy::find_v1(
            root,
            &read("/proc/self/cgroup")?,
            &read("/proc/self/mountinfo")?,
        )?;
        let cgroups = SessionCgroups {
            hierarchies,
            name: format!("atc-{tag}"),
        };
        for h in &cgroups.hierarchies {
            let parent = h.own.join(&cgroups.name);
            match std::fs::create_dir(&parent) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(format!("cannot make {}: {e}", parent.display())),
            }
            if h.has(Controller::Cpu) {
                std::fs::write(
                    parent.join("cpu.shares"),
                    session_group::SESSIONS_CPU_SHARES.to_string(),
                )
                .map_err(|e| format!("cannot weigh {}: {e}", parent.display()))?;
            }
        }
        Ok(cgroups)
    }

    /// What to log and list about it.
    pub fn mechanism(&self) -> Mechanism {
        Mechanism::V1 {
            memory_parent: self.parent(Controller::Memory).unwrap_or_default(),
        }
    }

    /// The parent of the sessions' cgroups in the hierarchy carrying `c`.
    pub fn parent(&self, c: Controller) -> Option<PathBuf> {
        self.hierarchies
            .iter()
            .find(|h| h.has(c))
            .map(|h| h.own.join(&self.name))
    }

    /// Session `id`'s cgroup (made by [`SessionGroup::create`]).
    pub fn group(&self, id: SessionId) -> SessionGroup {
        SessionGroup::new(
            self.hierarchies
                .iter()
                .map(|h| Place {
                    controllers: h.controllers.clone(),
                    dir: h.own.join(&self.name).join(id.to_string()),
                    home: h.own.clone(),
                })
                .collect(),
        )
    }

    /// What every session together uses now (the parent's own figures, which count its
    /// children); CPU seconds count every process the sessions ever ran under this parent.
    pub fn fleet_usage(&self) -> Option<Usage> {
        session_group::usage_at(
            &self.parent(Controller::Memory)?,
            &self.parent(Controller::Cpuacct)?,
            &self.parent(Controller::Pids)?,
        )
    }

    /// Ends and removes every session cgroup left in the parent (by a daemon that died, or
    /// one whose removal failed); how many there were. Run at start, before any restore, and
    /// at stop.
    pub fn sweep(&self) -> usize {
        let mut swept = 0;
        // The pids hierarchy first: it lists every process, and ending them empties the
        // others too.
        let mut order: Vec<&Hierarchy> = self.hierarchies.iter().collect();
        order.sort_by_key(|h| !h.has(Controller::Pids));
        for h in order {
            let parent = h.own.join(&self.name);
            let Ok(entries) = std::fs::read_dir(&parent) else {
                continue;
            };
            for entry in entries.flatten() {
                let dir = entry.path();
                // A child cgroup is a directory named for a session id; files are the
                // parent's own controls.
                let is_session = dir.is_dir()
                    && entry
                        .file_name()
                        .to_str()
                        .is_some_and(|n| n.parse::<SessionId>().is_ok());
                if !is_session {
                    continue;
                }
                if h.has(Controller::Pids) {
                    swept += 1;
                }
                if let Err(e) = session_group::remove_dir(&dir) {
                    tracing::warn!(cgroup = %dir.display(), error = %e,
                        "a session's cgroup could not be removed");
                }
            }
        }
        swept
    }
}

impl SessionCgroups {
    /// [`SessionCgroups::sweep`], then removes the daemon's own cgroups too (at a stop: a
    /// daemon that starts again makes them anew).
    pub fn release(&self) -> usize {
        let swept = self.sweep();
        for h in &self.hierarchies {
            let parent = h.own.join(&self.name);
            if let Err(e) = session_group::remove_dir(&parent) {
                tracing::warn!(cgroup = %parent.display(), error = %e,
                    "the daemon's cgroup for sessions could not be removed");
            }
        }
        swept
    }
}

/// The tag of the daemon's cgroup for a state dir: 12 hex digits of its path's hash, stable
/// across restarts and different for each state dir.
pub fn tag_for(state_dir: &Path) -> String {
    let canonical = state_dir
        .canonicalize()
        .unwrap_or_else(|_| state_dir.to_path_buf());
    let hash = crate::protocol::canonical::sha256_hex(&serde_json::Value::String(
        canonical.display().to_string(),
    ));
    hash[..12].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_dir_has_one_tag_and_another_another() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        assert_eq!(tag_for(a.path()), tag_for(a.path()));
        assert_ne!(tag_for(a.path()), tag_for(b.path()));
        assert_eq!(tag_for(a.path()).len(), 12);
    }

    #[test]
    fn a_root_without_hierarchies_says_why() {
        let root = tempfile::tempdir().unwrap();
        let err = SessionCgroups::detect(root.path(), "t").unwrap_err();
        assert!(err.contains("hierarchy") || err.contains("cgroup"), "{err}");
    }
}
