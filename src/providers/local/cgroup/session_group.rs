//! One session's cgroup: made with its limits before its process starts, entered by its
//! process from its first instruction, read for its usage, and emptied and removed when its
//! process ends.
//!
//! The child must be in the cgroup before its first instruction: a child moved in after its
//! start would run outside for a moment, long enough to fork out of reach. On v1,
//! `posix_spawn` (see `pty_spawn`) cannot name a cgroup, but a child starts in its parent
//! thread's cgroups, and v1 places threads one by one (a thread's id written to `tasks`). So
//! the starting thread joins the session's cgroups, starts the child, and goes back home
//! ([`SessionGroup::enter_thread`]); the thread is a launcher's, which does nothing else
//! meanwhile. On v2, which places whole processes only, the child is cloned straight into the
//! cgroup (`clone_into`).

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use atc_protocol::{SessionLimits, Usage};

use super::hierarchy::Controller;

/// The cgroup weight sessions run under on the CPU, against the 1024 of each of the daemon's
/// threads (see `SessionCgroups::detect`).
pub const SESSIONS_CPU_SHARES: u32 = 128;

/// The CFS period a CPU quota is a share of: the kernel's default, 100 ms.
const CPU_PERIOD_US: u64 = 100_000;

/// How long [`SessionGroup::kill_all`] keeps ending what is left before giving up.
const KILL_DEADLINE: Duration = Duration::from_secs(2);

/// A session's directory in one hierarchy, and the daemon's own there (where a thread that
/// joined goes back to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The controllers of the hierarchy.
    pub controllers: Vec<Controller>,
    /// The session's cgroup.
    pub dir: PathBuf,
    /// The daemon's own cgroup in the same hierarchy.
    pub home: PathBuf,
}

/// Which cgroup interface a group speaks: their files are named differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// A hierarchy per controller (or a few mounted together).
    V1,
    /// One unified hierarchy, every controller in one directory.
    V2,
}

/// A session's cgroup in each hierarchy. Plain paths: cheap to clone, and safe to hand to a
/// launcher thread (it holds no descriptor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionGroup {
    version: Version,
    places: Vec<Place>,
}

/// Why a session's cgroup could not be made or joined.
#[derive(Debug, thiserror::Error)]
#[error("cgroup {path}: {source}")]
pub struct CgroupError {
    /// The file or directory.
    pub path: String,
    /// What the kernel said.
    pub source: std::io::Error,
}

fn at(path: &Path) -> impl FnOnce(std::io::Error) -> CgroupError + '_ {
    move |source| CgroupError {
        path: path.display().to_string(),
        source,
    }
}

impl SessionGroup {
    /// The group at `places` (not made yet); on v2, one place with every controller.
    pub fn new(version: Version, places: Vec<Place>) -> SessionGroup {
        SessionGroup { version, places }
    }

    /// The interface it speaks.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Its directory in the hierarchy carrying `c`.
    pub fn dir(&self, c: Controller) -> Option<&Path> {
        self.places
            .iter()
            .find(|p| p.controllers.contains(&c))
            .map(|p| p.dir.as_path())
    }

    /// Makes the cgroup and sets `limits` (an absent one is no limit). One left by an earlier
    /// process of the session (its removal failed) is emptied and reused.
    pub fn create(&self, limits: &SessionLimits) -> Result<(), CgroupError> {
        let mut fresh = true;
        for place in &self.places {
            match std::fs::create_dir(&place.dir) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::AlreadyExists => fresh = false,
                Err(e) => return Err(at(&place.dir)(e)),
            }
        }
        let made = self.set(limits, fresh);
        if made.is_err() {
            // A half-limited cgroup must not be used; what removal leaves, a sweep finds.
            let _ = self.remove();
        }
        made
    }

    /// Writes `limits`. A `fresh` cgroup starts unlimited, so only the limits set are
    /// written: every write to a control file costs the spawn (each is a kernel call that
    /// takes the cgroup's locks), and a spawn without limits then writes none.
    fn set(&self, limits: &SessionLimits, fresh: bool) -> Result<(), CgroupError> {
        let put =
            |dir: &Path, file: &str, value: Option<String>, unlimited: &str| match (value, fresh) {
                (Some(v), _) => write(&dir.join(file), &v),
                (None, true) => Ok(()),
                (None, false) => write(&dir.join(file), unlimited),
            };
        let memory = limits.memory_mib.map(|m| (m * 1024 * 1024).to_string());
        let pids = limits.pids.map(|p| p.to_string());
        let quota = limits
            .cpu_percent
            .map(|p| (u64::from(p) * CPU_PERIOD_US / 100).to_string());
        match self.version {
            Version::V1 => {
                if let Some(dir) = self.dir(Controller::Memory) {
                    put(dir, "memory.limit_in_bytes", memory.clone(), "-1")?;
                    // With swap accounting, memory and swap together get the same limit: a
                    // session at its limit is killed rather than swapped out, which would
                    // slow the machine for everyone. Absent without swap accounting.
                    let memsw = dir.join("memory.memsw.limit_in_bytes");
                    if memsw.exists() {
                        put(dir, "memory.memsw.limit_in_bytes", memory, "-1")?;
                    }
                }
                if let Some(dir) = self.dir(Controller::Pids) {
                    put(dir, "pids.max", pids, "max")?;
                }
                if let Some(dir) = self.dir(Controller::Cpu) {
                    let period = quota.as_ref().map(|_| CPU_PERIOD_US.to_string());
                    put(dir, "cpu.cfs_period_us", period, &CPU_PERIOD_US.to_string())?;
                    put(dir, "cpu.cfs_quota_us", quota, "-1")?;
                }
            }
            Version::V2 => {
                let Some(dir) = self.places.first().map(|p| p.dir.as_path()) else {
                    return Ok(());
                };
                let swap_off = memory.as_ref().map(|_| "0".to_string());
                put(dir, "memory.max", memory, "max")?;
                // As on v1: at its limit a session is killed, not swapped out. Absent
                // without swap.
                if dir.join("memory.swap.max").exists() {
                    put(dir, "memory.swap.max", swap_off, "max")?;
                }
                put(dir, "pids.max", pids, "max")?;
                let cpu = quota.map(|q| format!("{q} {CPU_PERIOD_US}"));
                put(dir, "cpu.max", cpu, &format!("max {CPU_PERIOD_US}"))?;
            }
        }
        Ok(())
    }

    /// Moves the calling thread into the cgroup until the guard is dropped. Whatever the
    /// thread starts meanwhile starts inside.
    pub fn enter_thread(&self) -> Result<ThreadInside<'_>, CgroupError> {
        let tid = rustix::thread::gettid().as_raw_nonzero().get().to_string();
        let mut inside = ThreadInside {
            group: self,
            tid,
            entered: 0,
        };
        for place in &self.places {
            write(&place.dir.join("tasks"), &inside.tid)?;
            inside.entered += 1;
        }
        Ok(inside)
    }

    /// Raises the cgroup's CPU weight far above its siblings' until the guard is dropped.
    ///
    /// A start waits for the child's exec (and, on v1, for the launcher thread inside the
    /// cgroup to be scheduled again), and both run in the session's cgroup: among two hundred
    /// sessions burning their share in a spawn storm, each got a two-hundredth of it, and a
    /// spawn took 46 s at the median (docs/performance-log.md, "Sessions in cgroups"). The
    /// boost lasts the start only: the agent's own work runs at the weight of every session.
    pub fn boost_start(&self) -> StartBoost<'_> {
        let file = self.weight_file();
        let (high, _) = self.weights();
        if let Some(path) = &file {
            // A start without the boost is only slower.
            if let Err(e) = write(path, high) {
                tracing::debug!(error = %e, "a session's start could not be weighed up");
            }
        }
        StartBoost { group: self, file }
    }

    fn weight_file(&self) -> Option<PathBuf> {
        let name = match self.version {
            Version::V1 => "cpu.shares",
            Version::V2 => "cpu.weight",
        };
        Some(self.dir(Controller::Cpu)?.join(name))
    }

    /// The boosted and the usual weight, in the version's units (each the kernel's maximum
    /// and default).
    fn weights(&self) -> (&'static str, &'static str) {
        match self.version {
            Version::V1 => ("262144", "1024"),
            Version::V2 => ("10000", "100"),
        }
    }

    /// Out-of-memory kills the kernel made in it since it was made.
    pub fn oom_kills(&self) -> u64 {
        let file = match self.version {
            Version::V1 => "memory.oom_control",
            Version::V2 => "memory.events",
        };
        self.dir(Controller::Memory)
            .and_then(|dir| std::fs::read_to_string(dir.join(file)).ok())
            .and_then(|text| field(&text, "oom_kill"))
            .unwrap_or(0)
    }

    /// What its processes use now; `None` once it is gone.
    pub fn usage(&self) -> Option<Usage> {
        usage_at(
            self.version,
            self.dir(Controller::Memory)?,
            self.dir(Controller::Cpuacct)?,
            self.dir(Controller::Pids)?,
        )
    }

    /// CPU seconds its processes used so far, user and system (one file: the activity sweep
    /// reads it for every watched session); `None` once it is gone.
    pub fn cpu_seconds(&self) -> Option<f64> {
        cpu_seconds_at(self.version, self.dir(Controller::Cpuacct)?)
    }

    /// The processes in it now (never the daemon: a launcher thread inside for a start makes
    /// the daemon's pid show up here).
    pub fn processes(&self) -> Vec<i32> {
        self.dir(Controller::Pids)
            .map(processes_in)
            .unwrap_or_default()
    }

    /// SIGKILLs every process in it, again and again until none is left (one may fork while
    /// the others die) or a deadline passes; whether it is empty. The session's processes
    /// that left its process group (`setsid`, a daemonized helper) are in here all the same.
    pub fn kill_all(&self) -> bool {
        self.dir(Controller::Pids).is_none_or(kill_all_in)
    }

    /// Empties and removes it; a part already gone is fine.
    pub fn remove(&self) -> Result<(), CgroupError> {
        self.kill_all();
        for place in &self.places {
            remove_dir(&place.dir).map_err(at(&place.dir))?;
        }
        Ok(())
    }
}

/// A thread inside a [`SessionGroup`]; dropping it moves the thread back to the daemon's own
/// cgroups.
pub struct ThreadInside<'a> {
    group: &'a SessionGroup,
    tid: String,
    entered: usize,
}

/// A session's cgroup weighed up for its start; dropping it weighs it back.
pub struct StartBoost<'a> {
    group: &'a SessionGroup,
    file: Option<PathBuf>,
}

impl Drop for StartBoost<'_> {
    fn drop(&mut self) {
        let (_, usual) = self.group.weights();
        if let Some(path) = &self.file {
            if let Err(e) = write(path, usual) {
                // Left up, the session would take more than its share of the sessions' CPU.
                tracing::warn!(error = %e, "a session's cgroup kept its start's CPU weight");
            }
        }
    }
}

impl Drop for ThreadInside<'_> {
    fn drop(&mut self) {
        for place in &self.group.places[..self.entered] {
            if let Err(e) = write(&place.home.join("tasks"), &self.tid) {
                // Left inside, the thread's later starts would land in this session's cgroup;
                // nothing here can do better than say so loudly.
                tracing::error!(error = %e, "a launcher thread could not leave a session's cgroup");
            }
        }
    }
}

/// Usage read from a cgroup's memory, cpuacct and pids directories (a session's, or the
/// parent of them all for the fleet's totals; on v2 all three are the same); `None` when one
/// is unreadable.
pub fn usage_at(version: Version, memory: &Path, cpuacct: &Path, pids: &Path) -> Option<Usage> {
    let number =
        |path: PathBuf| -> Option<u64> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
    let (memory_bytes, memory_peak_bytes) = match version {
        Version::V1 => (
            number(memory.join("memory.usage_in_bytes"))?,
            number(memory.join("memory.max_usage_in_bytes"))?,
        ),
        Version::V2 => {
            let current = number(memory.join("memory.current"))?;
            // `memory.peak` came in Linux 5.19; before it, the best known is now.
            (
                current,
                number(memory.join("memory.peak")).unwrap_or(current),
            )
        }
    };
    Some(Usage {
        memory_bytes,
        memory_peak_bytes,
        cpu_seconds: cpu_seconds_at(version, cpuacct)?,
        pids: number(pids.join("pids.current"))?
            .try_into()
            .unwrap_or(u32::MAX),
    })
}

/// CPU seconds, user and system, from a cgroup's cpuacct directory (on v2 the cgroup's own);
/// `None` when unreadable.
fn cpu_seconds_at(version: Version, cpuacct: &Path) -> Option<f64> {
    match version {
        Version::V1 => {
            let nanos: u64 = std::fs::read_to_string(cpuacct.join("cpuacct.usage"))
                .ok()?
                .trim()
                .parse()
                .ok()?;
            Some(nanos as f64 / 1e9)
        }
        Version::V2 => {
            let stat = std::fs::read_to_string(cpuacct.join("cpu.stat")).ok()?;
            Some(field(&stat, "usage_usec")? as f64 / 1e6)
        }
    }
}

/// The value of `name` in a `name value` per line file (`memory.oom_control`).
fn field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(' ')?;
        (key == name).then(|| value.trim().parse().ok())?
    })
}

fn processes_in(dir: &Path) -> Vec<i32> {
    let own = std::process::id() as i32;
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse::<i32>().ok())
        .filter(|&pid| pid != own && pid > 0)
        .collect()
}

/// [`SessionGroup::kill_all`] on one cgroup directory (of a hierarchy listing every process).
pub fn kill_all_in(dir: &Path) -> bool {
    // v2 since Linux 5.14 kills a whole cgroup at once, forks in flight included; the loop
    // below then only waits for it to empty.
    let kill = dir.join("cgroup.kill");
    if kill.exists() {
        // A failure leaves the loop to do it by pid.
        let _ = std::fs::write(&kill, "1");
    }
    let deadline = Instant::now() + KILL_DEADLINE;
    loop {
        let pids = processes_in(dir);
        if pids.is_empty() {
            return true;
        }
        if Instant::now() >= deadline {
            tracing::warn!(cgroup = %dir.display(), left = pids.len(),
                "processes of a session's cgroup outlived their kill");
            return false;
        }
        for pid in pids {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                // Gone already is what this is for.
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        // A killed process leaves its cgroup as it exits, a moment after the signal.
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Removes a cgroup directory, waiting a little for killed processes to be gone from it.
pub fn remove_dir(dir: &Path) -> std::io::Result<()> {
    let deadline = Instant::now() + KILL_DEADLINE;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            // EBUSY: a process is still leaving.
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => {
                kill_all_in(dir);
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(e),
        }
    }
}

fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    std::fs::write(path, value).map_err(at(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oom_kill_count_is_read_by_name() {
        let text = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(field(text, "oom_kill"), Some(3));
        assert_eq!(field(text, "under_oom"), Some(0));
        assert_eq!(field(text, "oom"), None);
    }

    #[test]
    fn usage_reads_the_four_figures_and_none_when_gone() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::write(p.join("memory.usage_in_bytes"), "4096\n").unwrap();
        std::fs::write(p.join("memory.max_usage_in_bytes"), "8192\n").unwrap();
        std::fs::write(p.join("cpuacct.usage"), "1500000000\n").unwrap();
        std::fs::write(p.join("pids.current"), "3\n").unwrap();
        let u = usage_at(Version::V1, p, p, p).unwrap();
        assert_eq!(
            (u.memory_bytes, u.memory_peak_bytes, u.pids),
            (4096, 8192, 3)
        );
        assert!((u.cpu_seconds - 1.5).abs() < 1e-9);
        assert_eq!(usage_at(Version::V1, &p.join("gone"), p, p), None);
        std::fs::write(p.join("memory.current"), "100\n").unwrap();
        std::fs::write(p.join("cpu.stat"), "usage_usec 2500000\nuser_usec 1\n").unwrap();
        let u = usage_at(Version::V2, p, p, p).unwrap();
        assert_eq!((u.memory_bytes, u.memory_peak_bytes, u.pids), (100, 100, 3));
        assert!((u.cpu_seconds - 2.5).abs() < 1e-9);
    }

    #[test]
    fn a_start_is_weighed_up_and_back() {
        let d = tempfile::tempdir().unwrap();
        let group = SessionGroup::new(
            Version::V1,
            vec![Place {
                controllers: vec![Controller::Cpu],
                dir: d.path().to_path_buf(),
                home: d.path().to_path_buf(),
            }],
        );
        let shares = d.path().join("cpu.shares");
        {
            let _boost = group.boost_start();
            assert_eq!(std::fs::read_to_string(&shares).unwrap(), "262144");
        }
        assert_eq!(std::fs::read_to_string(&shares).unwrap(), "1024");
    }

    #[test]
    fn v2_limits_are_written_in_v2_files() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("s");
        let group = SessionGroup::new(
            Version::V2,
            vec![Place {
                controllers: Controller::ALL.to_vec(),
                dir: dir.clone(),
                home: d.path().to_path_buf(),
            }],
        );
        group
            .create(&SessionLimits {
                memory_mib: Some(2),
                pids: None,
                cpu_percent: Some(50),
            })
            .unwrap();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(read("memory.max"), (2u64 << 20).to_string());
        assert_eq!(read("cpu.max"), "50000 100000");
        assert!(
            !dir.join("pids.max").exists(),
            "a fresh cgroup is unlimited already"
        );
        // Made again over one left behind, every limit is written, unset ones as none.
        group.create(&SessionLimits::default()).unwrap();
        assert_eq!(read("memory.max"), "max");
        assert_eq!(read("pids.max"), "max");
        assert_eq!(read("cpu.max"), "max 100000");
        std::fs::write(dir.join("memory.events"), "oom 2\noom_kill 1\n").unwrap();
        assert_eq!(group.oom_kills(), 1);
    }

    #[test]
    fn the_daemons_own_pid_is_never_listed() {
        let d = tempfile::tempdir().unwrap();
        let own = std::process::id();
        std::fs::write(d.path().join("cgroup.procs"), format!("{own}\n77\n")).unwrap();
        assert_eq!(processes_in(d.path()), [77]);
    }
}
