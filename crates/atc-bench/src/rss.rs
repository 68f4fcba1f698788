//! The daemon's resident memory, read from `/proc/<pid>/status` (`VmRSS`), once or sampled for
//! its peak while a phase runs.
//!
//! This only works when the daemon runs on the same machine and its `/proc` entry is readable;
//! otherwise every figure here is `None` and the report says "n/a" rather than failing the phase.
//! Reading a small procfs file is a syscall that does not block on anything, so it is done inline
//! on the bench's own thread (the bench is a client, not an actor that must stay responsive).

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// How often [`PeakSampler`] looks. Fine enough to catch a queue that balloons for a fraction of
/// a second, coarse enough that reading procfs costs nothing measurable.
const SAMPLE_EVERY: Duration = Duration::from_millis(20);

/// The process whose memory the report follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DaemonPid(pub u32);

impl DaemonPid {
    /// Current resident set in KiB, or `None` when `/proc/<pid>/status` is unreadable or has no
    /// `VmRSS` line (another machine, another user, a kernel thread).
    pub fn rss_kib(self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.0)).ok()?;
        parse_vm_rss(&status)
    }
}

/// Extracts `VmRSS` (in kB, which procfs means as KiB) from the text of `/proc/<pid>/status`.
pub fn parse_vm_rss(status: &str) -> Option<u64> {
    let rest = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let mut words = rest.split_whitespace();
    let value = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") | None => Some(value),
        Some(_) => None,
    }
}

/// Samples a daemon's RSS in the background and keeps the highest value seen, until dropped.
///
/// The sampling task runs on the current (actix) arbiter; dropping the sampler aborts it.
pub struct PeakSampler {
    peak: Rc<Cell<Option<u64>>>,
    task: actix_rt::task::JoinHandle<()>,
}

impl PeakSampler {
    /// Starts sampling `pid` now (the first sample is taken immediately).
    pub fn start(pid: DaemonPid) -> PeakSampler {
        let peak = Rc::new(Cell::new(pid.rss_kib()));
        let shared = Rc::clone(&peak);
        let task = actix_rt::spawn(async move {
            let mut tick = tokio::time::interval(SAMPLE_EVERY);
            loop {
                tick.tick().await;
                if let Some(now) = pid.rss_kib() {
                    shared.set(Some(shared.get().map_or(now, |p| p.max(now))));
                }
            }
        });
        PeakSampler { peak, task }
    }

    /// The highest RSS seen so far, in KiB.
    pub fn peak_kib(&self) -> Option<u64> {
        self.peak.get()
    }
}

impl Drop for PeakSampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_vm_rss_in_kib() {
        let status = "Name:\tatc\nVmPeak:\t  200 kB\nVmRSS:\t   12345 kB\nThreads:\t3\n";
        assert_eq!(parse_vm_rss(status), Some(12345));
        assert_eq!(parse_vm_rss("Name:\tkthreadd\n"), None);
        assert_eq!(parse_vm_rss("VmRSS:\tlots kB\n"), None);
        assert_eq!(parse_vm_rss("VmRSS:\t5 MB\n"), None);
    }

    #[test]
    fn reads_its_own_rss() {
        let me = DaemonPid(std::process::id());
        assert!(me.rss_kib().is_some_and(|kib| kib > 0));
    }
}
