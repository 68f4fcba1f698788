//! Which cgroup hierarchies this machine has for the daemon, found from `/proc/self/cgroup`
//! (where the daemon is in each) and `/proc/self/mountinfo` (where each is mounted).
//!
//! Sessions need three controllers, and a fourth for their CPU time: `memory` (the limit, the
//! usage and the out-of-memory kills), `pids` (the process limit, and the one list of every
//! process of a session), `cpu` (the quota, and the weight that puts the daemon first) and
//! `cpuacct` (CPU seconds). On a cgroup-v1 machine each is a hierarchy of its own, mounted
//! at `<root>/<name>` (or several together, `<root>/cpu,cpuacct`, with a link per name), and
//! the daemon's own place in each is the path `/proc/self/cgroup` gives for it. The daemon's
//! cgroups go below that place: they are its own, beside nothing another program manages.
//! Only mounts below the configured root count, so a root that holds no hierarchy (a test's
//! empty directory) finds none.

use std::path::{Path, PathBuf};

/// A controller sessions use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    /// Memory limit, usage, peak and out-of-memory kills.
    Memory,
    /// Process limit, and the list of a session's processes.
    Pids,
    /// CPU quota and weight.
    Cpu,
    /// CPU time used.
    Cpuacct,
}

impl Controller {
    /// Every controller sessions need, in the order they are joined.
    pub const ALL: [Controller; 4] = [
        Controller::Memory,
        Controller::Pids,
        Controller::Cpu,
        Controller::Cpuacct,
    ];

    /// Its name in `/proc/self/cgroup` and in a hierarchy's mount options.
    pub fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
            Controller::Cpu => "cpu",
            Controller::Cpuacct => "cpuacct",
        }
    }
}

/// One mounted v1 hierarchy and the daemon's place in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// The controllers it carries that sessions use (one, or several mounted together).
    pub controllers: Vec<Controller>,
    /// The daemon's own cgroup in it, as a directory: `<mount><path from /proc/self/cgroup>`.
    pub own: PathBuf,
}

impl Hierarchy {
    /// Whether it carries `c`.
    pub fn has(&self, c: Controller) -> bool {
        self.controllers.contains(&c)
    }
}

/// One line of `/proc/self/cgroup`: `id:controllers:path`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Line<'a> {
    controllers: Vec<&'a str>,
    path: &'a str,
}

fn lines(proc_cgroup: &str) -> impl Iterator<Item = Line<'_>> {
    proc_cgroup.lines().filter_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        Some(Line {
            controllers: controllers.split(',').filter(|c| !c.is_empty()).collect(),
            path,
        })
    })
}

/// A v1 cgroup mount in `/proc/self/mountinfo`: its controllers, the cgroup path it shows
/// (`/` unless only a subtree is mounted, as in a container), and where.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount<'a> {
    controllers: Vec<&'a str>,
    shown: &'a str,
    at: &'a str,
}

fn mounts(mountinfo: &str) -> impl Iterator<Item = Mount<'_>> {
    mountinfo.lines().filter_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let before: Vec<&str> = before.split(' ').collect();
        let mut after = after.split(' ');
        let (fstype, _source, options) = (after.next()?, after.next()?, after.next()?);
        (fstype == "cgroup").then(|| Mount {
            controllers: options.split(',').collect(),
            shown: before.get(3).copied().unwrap_or("/"),
            at: before.get(4).copied().unwrap_or(""),
        })
    })
}

/// The v1 hierarchies mounted under `root` that carry every controller sessions need, given
/// the text of `/proc/self/cgroup` and `/proc/self/mountinfo`; `Err` says what is missing.
pub fn find_v1(root: &Path, proc_cgroup: &str, mountinfo: &str) -> Result<Vec<Hierarchy>, String> {
    let mut found: Vec<Hierarchy> = Vec::new();
    for c in Controller::ALL {
        if found.iter().any(|h| h.has(c)) {
            continue;
        }
        let line = lines(proc_cgroup)
            .find(|l| l.controllers.contains(&c.name()))
            .ok_or_else(|| format!("this process is in no {} cgroup", c.name()))?;
        let mount = mounts(mountinfo)
            .find(|m| m.controllers.contains(&c.name()) && Path::new(m.at).starts_with(root))
            .ok_or_else(|| {
                format!(
                    "no {} hierarchy is mounted under {}",
                    c.name(),
                    root.display()
                )
            })?;
        // Where a subtree is mounted, the daemon's path is shown from the system's root:
        // below the mount, it is what follows the subtree's own path.
        let within = line
            .path
            .strip_prefix(mount.shown.trim_end_matches('/'))
            .ok_or_else(|| {
                format!(
                    "this process's {} cgroup is outside what is mounted at {}",
                    c.name(),
                    mount.at
                )
            })?;
        let controllers = Controller::ALL
            .into_iter()
            .filter(|other| mount.controllers.contains(&other.name()))
            .collect();
        let own = Path::new(mount.at).join(within.trim_start_matches('/'));
        found.push(Hierarchy { controllers, own });
    }
    Ok(found)
}

/// The daemon's own cgroup on a unified (v2) hierarchy mounted under `root`, given the text
/// of `/proc/self/cgroup` and `/proc/self/mountinfo`; `Err` says why there is none.
pub fn find_v2(root: &Path, proc_cgroup: &str, mountinfo: &str) -> Result<PathBuf, String> {
    let path = proc_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("this process is in no cgroup v2")?;
    let (shown, at) = mountinfo
        .lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let before: Vec<&str> = before.split(' ').collect();
            if after.split(' ').next()? != "cgroup2" {
                return None;
            }
            Some((*before.get(3)?, *before.get(4)?))
        })
        .find(|(_, at)| Path::new(at).starts_with(root))
        .ok_or_else(|| format!("no cgroup v2 is mounted under {}", root.display()))?;
    let within = path
        .strip_prefix(shown.trim_end_matches('/'))
        .ok_or_else(|| format!("this process's cgroup is outside what is mounted at {at}"))?;
    Ok(Path::new(at).join(within.trim_start_matches('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROC: &str = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n\
                        2:cpuacct:/\n1:cpu:/\n0::/\n";

    const MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn each_controller_is_found_at_the_daemons_own_place() {
        let found = find_v1(Path::new("/sys/fs/cgroup"), PROC, MOUNTS).unwrap();
        assert_eq!(found.len(), 4);
        assert_eq!(found[0].controllers, [Controller::Memory]);
        assert_eq!(
            found[0].own,
            Path::new("/sys/fs/cgroup/memory/process_api/abc")
        );
        assert_eq!(found[1].own, Path::new("/sys/fs/cgroup/pids"));
    }

    #[test]
    fn controllers_mounted_together_are_one_hierarchy_and_a_subtree_mount_is_followed() {
        let mounts = "\
1 0 0:1 / /cg/memory rw - cgroup cgroup rw,memory
2 0 0:2 /ctr /cg/pids rw - cgroup cgroup rw,pids
3 0 0:3 / /cg/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
";
        let proc = "8:pids:/ctr/a\n4:memory:/a\n2:cpu,cpuacct:/a\n";
        let found = find_v1(Path::new("/cg"), proc, mounts).unwrap();
        assert_eq!(found.len(), 3);
        assert_eq!(found[1].own, Path::new("/cg/pids/a"));
        assert_eq!(found[2].controllers, [Controller::Cpu, Controller::Cpuacct]);
        assert_eq!(found[2].own, Path::new("/cg/cpu,cpuacct/a"));
    }

    #[test]
    fn the_unified_hierarchy_is_found_at_the_daemons_own_place() {
        let own = find_v2(
            Path::new("/sys/fs/cgroup"),
            "0::/user.slice/atc.service\n",
            "1 0 0:1 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
        )
        .unwrap();
        assert_eq!(own, Path::new("/sys/fs/cgroup/user.slice/atc.service"));
        let own = find_v2(Path::new("/sys/fs/cgroup"), PROC, MOUNTS).unwrap();
        assert_eq!(own, Path::new("/sys/fs/cgroup/unified"));
        assert!(find_v2(Path::new("/elsewhere"), PROC, MOUNTS).is_err());
    }

    #[test]
    fn mounts_outside_the_root_and_v2_are_not_taken() {
        let err = find_v1(Path::new("/elsewhere"), PROC, MOUNTS).unwrap_err();
        assert!(err.contains("no memory hierarchy"), "{err}");
        let err = find_v1(Path::new("/sys/fs/cgroup"), "0::/\n", MOUNTS).unwrap_err();
        assert!(err.contains("no memory cgroup"), "{err}");
    }
}
