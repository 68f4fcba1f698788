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
use session_group::{Place, SessionGroup, Version};

/// The daemon's cgroup for sessions, in each hierarchy.
#[derive(Debug)]
pub struct SessionCgroups {
    version: Version,
    /// On v1 one per mounted hierarchy; on v2 one, with every controller.
    hierarchies: Vec<Hierarchy>,
    /// `atc-<tag>`.
    name: String,
}

/// Which mechanism the daemon has, for its start-up log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mechanism {
    /// cgroup v1 hierarchies; the parent of the sessions' cgroups in the memory one.
    V1(PathBuf),
    /// A delegated cgroup v2 subtree; the parent of the sessions' cgroups.
    V2(PathBuf),
}

/// The leaf the daemon moves itself into on v2: a cgroup whose children have controllers may
/// hold no process itself, so the daemon leaves its own cgroup for the sessions' parent's
/// sibling (what systemd's delegation expects of a service).
const V2_DAEMON_LEAF: &str = "daemon";

/// The controllers sessions use on v2.
const V2_CONTROLLERS: &str = "+memory +pids +cpu";

/// The sessions' parent's CPU weight on v2, against the default 100 of the daemon's leaf: the
/// same eighth as `cpu.shares` on v1.
const V2_SESSIONS_CPU_WEIGHT: u32 = 12;

impl SessionCgroups {
    /// Finds the hierarchies under `root` and makes the daemon's cgroup in each (tag: see the
    /// module doc): v1 where the machine has it, else a delegated v2 subtree. `Err` says why
    /// sessions must run without cgroups.
    pub fn detect(root: &Path, tag: &str) -> Result<SessionCgroups, String> {
        let read = |path: &str| {
            std::fs::read_to_string(path).map_err(|e| format!("{path} is unreadable: {e}"))
        };
        let (proc_cgroup, mountinfo) = (read("/proc/self/cgroup")?, read("/proc/self/mountinfo")?);
        let name = format!("atc-{tag}");
        let v1 = hierarchy::find_v1(root, &proc_cgroup, &mountinfo);
        let cgroups = match v1 {
            Ok(hierarchies) => SessionCgroups {
                version: Version::V1,
                hierarchies,
                name,
            },
            Err(no_v1) => {
                let own = hierarchy::find_v2(root, &proc_cgroup, &mountinfo)
                    .map_err(|no_v2| format!("{no_v1}; {no_v2}"))?;
                SessionCgroups {
                    version: Version::V2,
                    hierarchies: vec![Hierarchy {
                        controllers: Controller::ALL.to_vec(),
                        own,
                    }],
                    name,
                }
            }
        };
        match cgroups.version {
            Version::V1 => cgroups.make_v1()?,
            Version::V2 => cgroups.make_v2(std::process::id())?,
        }
        Ok(cgroups)
    }

    fn make_v1(&self) -> Result<(), String> {
        for h in &self.hierarchies {
            let parent = h.own.join(&self.name);
            make_dir(&parent)?;
            if h.has(Controller::Cpu) {
                std::fs::write(
                    parent.join("cpu.shares"),
                    session_group::SESSIONS_CPU_SHARES.to_string(),
                )
                .map_err(|e| format!("cannot weigh {}: {e}", parent.display()))?;
            }
        }
        Ok(())
    }

    /// On v2: checks the subtree has the controllers, moves process `pid` (the daemon) into
    /// its leaf, hands the controllers down to the sessions' parent, and weighs it.
    fn make_v2(&self, pid: u32) -> Result<(), String> {
        let Some(own) = self.hierarchies.first().map(|h| h.own.clone()) else {
            return Err("no cgroup v2 subtree".into());
        };
        let at = |path: &Path, e: std::io::Error| format!("{}: {e}", path.display());
        let available = std::fs::read_to_string(own.join("cgroup.controllers"))
            .map_err(|e| at(&own.join("cgroup.controllers"), e))?;
        let missing: Vec<&str> = ["memory", "pids", "cpu"]
            .into_iter()
            .filter(|c| !available.split_whitespace().any(|a| a == *c))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "the cgroup v2 subtree {} lacks the {} controller(s): delegate it to the \
                 daemon (Delegate=yes in its unit)",
                own.display(),
                missing.join(", ")
            ));
        }
        let leaf = own.join(V2_DAEMON_LEAF);
        make_dir(&leaf)?;
        std::fs::write(leaf.join("cgroup.procs"), pid.to_string())
            .map_err(|e| at(&leaf.join("cgroup.procs"), e))?;
        let parent = own.join(&self.name);
        for dir in [&own, &parent] {
            if dir == &parent {
                make_dir(&parent)?;
            }
            std::fs::write(dir.join("cgroup.subtree_control"), V2_CONTROLLERS)
                .map_err(|e| at(&dir.join("cgroup.subtree_control"), e))?;
        }
        std::fs::write(
            parent.join("cpu.weight"),
            V2_SESSIONS_CPU_WEIGHT.to_string(),
        )
        .map_err(|e| at(&parent.join("cpu.weight"), e))?;
        Ok(())
    }

    /// What to log about it.
    pub fn mechanism(&self) -> Mechanism {
        let parent = self.parent(Controller::Memory).unwrap_or_default();
        match self.version {
            Version::V1 => Mechanism::V1(parent),
            Version::V2 => Mechanism::V2(parent),
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
            self.version,
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
            self.version,
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

fn make_dir(dir: &Path) -> Result<(), String> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("cannot make {}: {e}", dir.display())),
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
    fn on_v2_the_daemon_moves_to_its_leaf_and_hands_the_controllers_down() {
        let own = tempfile::tempdir().unwrap();
        std::fs::write(
            own.path().join("cgroup.controllers"),
            "cpuset cpu io memory pids",
        )
        .unwrap();
        let cgroups = SessionCgroups {
            version: Version::V2,
            hierarchies: vec![Hierarchy {
                controllers: Controller::ALL.to_vec(),
                own: own.path().to_path_buf(),
            }],
            name: "atc-t".into(),
        };
        cgroups.make_v2(4242).unwrap();
        let read = |p: &str| std::fs::read_to_string(own.path().join(p)).unwrap();
        assert_eq!(read("daemon/cgroup.procs"), "4242");
        assert_eq!(read("cgroup.subtree_control"), V2_CONTROLLERS);
        assert_eq!(read("atc-t/cgroup.subtree_control"), V2_CONTROLLERS);
        assert_eq!(read("atc-t/cpu.weight"), "12");
        let group = cgroups.group(SessionId::new());
        assert_eq!(group.version(), Version::V2);
        assert!(group
            .dir(Controller::Pids)
            .unwrap()
            .starts_with(own.path().join("atc-t")));

        std::fs::write(own.path().join("cgroup.controllers"), "cpu io").unwrap();
        let err = cgroups.make_v2(4242).unwrap_err();
        assert!(
            err.contains("memory, pids") && err.contains("Delegate=yes"),
            "{err}"
        );
    }

    #[test]
    fn a_root_without_hierarchies_says_why() {
        let root = tempfile::tempdir().unwrap();
        let err = SessionCgroups::detect(root.path(), "t").unwrap_err();
        assert!(err.contains("hierarchy") || err.contains("cgroup"), "{err}");
    }
}
