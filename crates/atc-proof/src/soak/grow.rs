//! `atc-proof soak --grow`: the largest fleet the machine holds, and what stops it. Spawns
//! quiet `cat` sessions in steps until the daemon refuses one (or the count's cap or the time
//! limit comes first), then reads the limits at that moment and names the one that was hit:
//! PTYs (`kernel.pty.nr` against `kernel.pty.max`), descriptors (the daemon's against its
//! `RLIMIT_NOFILE`), memory (`MemAvailable`), processes, or the daemon's own session cap. The daemon's refusal is the
//! evidence; the limits only say which one it ran into. Then it checks that the daemon took
//! the refusal in its stride: it still answers, and every session it held is still alive.
//!
//! `--grow-fd-limit N` lowers the daemon's open-file limit to N first (prlimit), which finds
//! the descriptor ceiling without taking the machine's PTYs, for a test or a small machine.

use std::collections::HashMap;
use std::time::Duration;

use atc_bench::limits::{Limit, PtyCount};
use atc_protocol::SessionId;
use futures_util::StreamExt as _;
use tokio::time::Instant;

use super::fleet::{Fleet, Kind, SpawnRefused};
use super::sample::Probe;
use super::{start_daemon, SoakOptions};
use crate::report::{Report, Want};
use crate::Plan;

/// Sessions spawned between two readings of the limits.
const STEP: u64 = 100;

/// Spawns in flight at once: enough to keep the daemon busy, few enough that the refusal
/// lands within a handful of the limit.
const CONCURRENCY: usize = 4;

/// Default cap on the fleet: far past any limit this machine has, so the limit stops it.
pub const DEFAULT_CAP: u64 = 100_000;

/// What stopped the growth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The kernel had no PTY left.
    Ptys,
    /// The daemon reached its open-file limit.
    OpenFiles,
    /// The machine ran short of memory.
    Memory,
    /// No more processes could be made.
    Processes,
    /// The daemon's own cap on running sessions (`limits.maxSessions`).
    SessionCap,
    /// A refusal none of the limits explains.
    Other,
    /// The cap (`--count`) was reached with nothing refused.
    Cap,
    /// The time limit came first.
    Time,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Ptys => "PTYs",
            StopReason::OpenFiles => "open files",
            StopReason::Memory => "memory",
            StopReason::Processes => "processes",
            StopReason::SessionCap => "the daemon's session cap (limits.maxSessions)",
            StopReason::Other => "something else (see the refusal)",
            StopReason::Cap => "the cap (--count)",
            StopReason::Time => "the time limit (--seconds)",
        }
    }
}

/// The limits read when a spawn was refused.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AtRefusal {
    pub pty: Option<PtyCount>,
    pub fds: Option<u64>,
    pub fd_soft: Option<Limit>,
    pub mem_available_kib: Option<u64>,
}

/// Which limit a refusal with `problem` and `message` ran into, given the limits read just
/// after it. The daemon names the limit in `data.problem` (`host_unavailable`); a daemon from
/// before that is read by the OS error it passes on, and the readings decide otherwise (a
/// limit within a few of its ceiling).
pub fn classify(problem: Option<&str>, message: &str, at: &AtRefusal) -> StopReason {
    match problem {
        Some("ptys_exhausted") => return StopReason::Ptys,
        Some("open_files_exhausted") => return StopReason::OpenFiles,
        Some("processes_exhausted") => return StopReason::Processes,
        Some("memory_exhausted") => return StopReason::Memory,
        Some("session_cap") => return StopReason::SessionCap,
        _ => {}
    }
    let m = message.to_ascii_lowercase();
    if m.contains("too many open files") {
        return StopReason::OpenFiles;
    }
    if m.contains("cannot allocate memory") || m.contains("out of memory") {
        return StopReason::Memory;
    }
    // Opening /dev/ptmx past kernel.pty.max fails with ENOSPC.
    if m.contains("no space left on device") {
        return StopReason::Ptys;
    }
    // EAGAIN while opening the terminal is the PTY ceiling: the full run on this machine got
    // it from /dev/ptmx at 4,095 of kernel.pty.max 4,096. From the process start it is the
    // process limit.
    if m.contains("resource temporarily unavailable") {
        return if m.contains("could not open a terminal") {
            StopReason::Ptys
        } else {
            StopReason::Processes
        };
    }
    if let Some(p) = at.pty {
        // The reserve is kept for the initial devpts instance: a container's own instance
        // stops that much sooner.
        let ceiling = p.max.saturating_sub(p.reserve.unwrap_or(0));
        if p.in_use + 8 >= p.max || p.in_use >= ceiling {
            return StopReason::Ptys;
        }
    }
    if let (Some(fds), Some(Limit::Count(soft))) = (at.fds, at.fd_soft) {
        if fds + 16 >= soft {
            return StopReason::OpenFiles;
        }
    }
    if at.mem_available_kib.is_some_and(|kib| kib < 128 * 1024) {
        return StopReason::Memory;
    }
    StopReason::Other
}

/// How many child processes `pid` has, zombies included, from each of its threads'
/// `/proc/<pid>/task/<tid>/children`.
fn child_count(pid: u32) -> Option<u64> {
    let mut n = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let children = std::fs::read_to_string(task.ok()?.path().join("children")).ok()?;
        n += children.split_whitespace().count() as u64;
    }
    Some(n)
}

/// `MemAvailable` from `/proc/meminfo`, in KiB.
pub fn mem_available_kib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let rest = text.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?;
    rest.split_whitespace().next()?.parse().ok()
}

/// Runs the growth.
pub async fn run(plan: &Plan, opts: &SoakOptions) -> anyhow::Result<Report> {
    let mut report = Report::new(plan.suite, plan.seed);
    let started = Instant::now();
    let deadline = started + plan.limit;
    let cap = plan.count_or(DEFAULT_CAP);
    let before = PtyCount::read();
    // The daemon's own cap stays: past it, a limit of the machine is the one to find, and the
    // cap is the daemon's answer to it (`StopReason::SessionCap`).
    let daemon = start_daemon(plan, "grow", 4096, None).await?;
    let probe = Probe::new(daemon.pid(), daemon.state_dir());
    if let Some(n) = opts.grow_fd_limit {
        let pid = rustix::process::Pid::from_raw(daemon.pid() as i32)
            .ok_or_else(|| anyhow::anyhow!("the daemon's pid is not a pid"))?;
        let hard = rustix::process::prlimit(
            Some(pid),
            rustix::process::Resource::Nofile,
            rustix::process::Rlimit {
                current: Some(n),
                maximum: Some(n),
            },
        )?;
        report.note(format!(
            "the daemon's open-file limit was lowered to {n} (it was {:?}/{:?})",
            hard.current, hard.maximum
        ));
    }
    let fd_limit = probe.pid().open_file_limit();
    let base_rss = probe.pid().rss_kib();
    let client = daemon.client();
    let fleet = Fleet::new(plan.work_dir.display().to_string());

    let mut refused: Option<SpawnRefused> = None;
    let mut reason = StopReason::Cap;
    let mut spawn_latency = Vec::new();
    while (fleet.len() as u64) < cap && refused.is_none() {
        if Instant::now() >= deadline {
            reason = StopReason::Time;
            break;
        }
        let step = STEP.min(cap - fleet.len() as u64);
        let mut spawns = futures_util::stream::iter(0..step)
            .map(|_| fleet.spawn(&client, Kind::Quiet))
            .buffer_unordered(CONCURRENCY);
        while let Some(answer) = tokio::time::timeout_at(deadline, spawns.next())
            .await
            .ok()
            .flatten()
        {
            match answer {
                Ok((_, latency)) => spawn_latency.push(latency),
                Err(e) => {
                    refused.get_or_insert(e);
                }
            }
        }
    }
    let at = AtRefusal {
        pty: PtyCount::read(),
        fds: probe.pid().open_fds(),
        fd_soft: fd_limit.map(|l| l.soft),
        mem_available_kib: mem_available_kib(),
    };
    let held = fleet.len() as u64;
    // Read before anything ends: every held session has its one child, and a refused start
    // must have left none behind (a zombie included).
    let children = child_count(daemon.pid());
    if let Some(r) = &refused {
        reason = classify(r.problem.as_deref(), &r.message, &at);
        report.note(format!(
            "the first refused spawn, with {held} held: {} ({}, problem {})",
            r.message,
            r.code.as_deref().unwrap_or("no error code"),
            r.problem.as_deref().unwrap_or("none")
        ));
        let named = r.code.as_deref() == Some("host_unavailable") && r.problem.is_some();
        report.figure(
            "refusalNamesItsLimit",
            f64::from(u8::from(named)),
            "bool",
            Want::Equal(1.0),
        );
    }
    match children {
        Some(n) => report.zero("childrenBeyondSessions", n.saturating_sub(held), "count"),
        None => report.note("the daemon's children could not be counted".to_string()),
    }
    report.note(format!("stopped by {}", reason.as_str()));
    report.info("grownSessions", held as f64, "count");
    report.figure(
        "stoppedByALimit",
        f64::from(u8::from(!matches!(
            reason,
            StopReason::Other | StopReason::Time
        ))),
        "bool",
        Want::Equal(1.0),
    );
    if let Some(p) = before {
        report.info("ptyMax", p.max as f64, "count");
        report.info("ptyInUseBefore", p.in_use as f64, "count");
        if let Some(r) = p.reserve {
            report.info("ptyReserve", r as f64, "count");
        }
    }
    if let Some(p) = at.pty {
        report.info("ptyInUseAtStop", p.in_use as f64, "count");
    }
    if let Some(fds) = at.fds {
        report.info("daemonFdsAtStop", fds as f64, "count");
    }
    if let Some(Limit::Count(soft)) = at.fd_soft {
        report.info("daemonFdLimit", soft as f64, "count");
    }
    if let Some(rss) = probe.pid().rss_kib() {
        report.info("daemonRssAtStopKib", rss as f64, "KiB");
        if let (Some(base), true) = (base_rss, held > 0) {
            report.info(
                "rssPerSessionKib",
                (rss as f64 - base as f64) / held as f64,
                "KiB",
            );
        }
    }
    if let Some(kib) = at.mem_available_kib {
        report.info("memAvailableAtStopKib", kib as f64, "KiB");
    }
    report.latency("spawn", &mut spawn_latency);

    // The daemon must take the refusal in its stride.
    let lost = match client.list_sessions().await {
        Ok(listed) => {
            let alive: HashMap<SessionId, bool> = listed.iter().map(|d| (d.id, d.alive)).collect();
            fleet
                .members()
                .iter()
                .filter(|m| alive.get(&m.id) != Some(&true))
                .count() as u64
        }
        Err(e) => {
            report.note(format!(
                "the daemon did not list its sessions after the refusal: {e}"
            ));
            held
        }
    };
    report.zero("sessionsLostAtLimit", lost, "count");

    let ended = fleet
        .end_all(&client, 16, Duration::from_secs(30 + held / 20))
        .await;
    report.zero(
        "sessionsNotEnded",
        (ended.total - ended.ended) as u64,
        "count",
    );
    if let Some(e) = ended.first_error {
        report.note(format!("ending the fleet: {e}"));
    }
    // The stop's own answer only says whether it took the SIGKILL.
    daemon.stop_within(Duration::from_secs(30)).await;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pty(max: u64, in_use: u64) -> Option<PtyCount> {
        Some(PtyCount {
            max,
            in_use,
            reserve: Some(1024),
        })
    }

    #[test]
    fn the_os_error_names_the_limit() {
        let at = AtRefusal::default();
        let msg = |e: &str| format!("could not open a terminal: {e}; check the daemon's limits");
        assert_eq!(
            classify(None, &msg("Too many open files (os error 24)"), &at),
            StopReason::OpenFiles
        );
        assert_eq!(
            classify(None, &msg("No space left on device (os error 28)"), &at),
            StopReason::Ptys
        );
        assert_eq!(
            classify(None, &msg("Cannot allocate memory (os error 12)"), &at),
            StopReason::Memory
        );
        assert_eq!(
            classify(
                None,
                &msg("Resource temporarily unavailable (os error 11)"),
                &at
            ),
            StopReason::Ptys
        );
        assert_eq!(
            classify(
                None,
                "could not start the process: Resource temporarily unavailable (os error 11)",
                &at
            ),
            StopReason::Processes
        );
        assert_eq!(classify(None, "internal error", &at), StopReason::Other);
    }

    /// The daemon's own word for the limit wins over the message and the readings.
    #[test]
    fn the_problem_named_decides_first() {
        let roomy = AtRefusal::default();
        for (problem, want) in [
            ("ptys_exhausted", StopReason::Ptys),
            ("open_files_exhausted", StopReason::OpenFiles),
            ("processes_exhausted", StopReason::Processes),
            ("memory_exhausted", StopReason::Memory),
            ("session_cap", StopReason::SessionCap),
        ] {
            assert_eq!(classify(Some(problem), "internal error", &roomy), want);
        }
        assert_eq!(
            classify(Some("not_started"), "internal error", &roomy),
            StopReason::Other
        );
    }

    #[test]
    fn without_an_os_error_the_readings_decide() {
        let full = AtRefusal {
            pty: pty(4096, 4093),
            ..AtRefusal::default()
        };
        assert_eq!(classify(None, "internal error", &full), StopReason::Ptys);
        // A container's devpts instance stops at max - reserve.
        let container = AtRefusal {
            pty: pty(4096, 3072),
            ..AtRefusal::default()
        };
        assert_eq!(
            classify(None, "internal error", &container),
            StopReason::Ptys
        );
        let fds = AtRefusal {
            pty: pty(4096, 100),
            fds: Some(1020),
            fd_soft: Some(Limit::Count(1024)),
            mem_available_kib: Some(10 << 20),
        };
        assert_eq!(
            classify(None, "internal error", &fds),
            StopReason::OpenFiles
        );
        let mem = AtRefusal {
            mem_available_kib: Some(1000),
            ..AtRefusal::default()
        };
        assert_eq!(classify(None, "internal error", &mem), StopReason::Memory);
        let roomy = AtRefusal {
            pty: pty(4096, 100),
            fds: Some(300),
            fd_soft: Some(Limit::Count(1024)),
            mem_available_kib: Some(10 << 20),
        };
        assert_eq!(classify(None, "internal error", &roomy), StopReason::Other);
    }

    #[test]
    fn meminfo_has_mem_available() {
        assert!(mem_available_kib().is_some_and(|kib| kib > 0));
    }
}
