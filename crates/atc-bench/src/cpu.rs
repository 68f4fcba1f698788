//! Server CPU time, read from procfs: the daemon's (`/proc/<pid>/stat`, every thread of it) and
//! the floor's (`/proc/self/task/<tid>/stat` for each of its threads), as `utime + stime`.
//!
//! Like the RSS figures this needs the server on this machine with a readable `/proc`; otherwise
//! the figure is `None` and the report says "n/a". Procfs counts in clock ticks (`USER_HZ`,
//! 100 per second on Linux), so a figure is good to 10 ms per thread, which is fine for runs
//! that take seconds.

use std::time::Duration;

use super::rss::DaemonPid;

/// CPU time some set of threads has used, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ticks(pub u64);

impl Ticks {
    /// The time from `before` to `self`, or `None` if the counter went backwards (the process
    /// was replaced).
    pub fn since(self, before: Ticks) -> Option<Duration> {
        let ticks = self.0.checked_sub(before.0)?;
        let hz = rustix::param::clock_ticks_per_second();
        (hz > 0).then(|| Duration::from_secs_f64(ticks as f64 / hz as f64))
    }
}

/// `utime + stime` from the text of a `stat` file (fields 14 and 15 of proc(5)). The command
/// name in field 2 may hold spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_stat_ticks(stat: &str) -> Option<Ticks> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Ticks(utime + stime))
}

/// Reads the ticks of the `stat` file at `path`.
pub fn read_ticks(path: &str) -> Option<Ticks> {
    parse_stat_ticks(&std::fs::read_to_string(path).ok()?)
}

/// CPU per item in µs between two readings, over `count` items; `None` when either reading is
/// missing, the counter ran backwards, or there were no items.
pub fn per_item_us(before: Option<Ticks>, after: Option<Ticks>, count: u64) -> Option<f64> {
    let used = after?.since(before?)?;
    (count > 0).then(|| super::stats::round3(used.as_secs_f64() * 1e6 / count as f64))
}

/// CPU this process (every thread of it, not its children) has used so far.
pub fn own_ticks() -> Option<Ticks> {
    read_ticks("/proc/self/stat")
}

impl DaemonPid {
    /// CPU the whole daemon has used so far, or `None` when its `/proc` entry is unreadable.
    pub fn cpu_ticks(self) -> Option<Ticks> {
        read_ticks(&format!("/proc/{}/stat", self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utime_and_stime_are_found_past_an_awkward_command_name() {
        let stat = "4242 (atc (x) y) S 1 4242 4242 0 -1 4194560 500 0 0 0 731 219 0 0 20 0 9 0 1000 200000 3000";
        assert_eq!(parse_stat_ticks(stat), Some(Ticks(950)));
        assert_eq!(parse_stat_ticks("4242 (atc) S 1 2"), None);
        assert_eq!(parse_stat_ticks("garbage"), None);
    }

    #[test]
    fn ticks_become_time_and_never_run_backwards() {
        let hz = rustix::param::clock_ticks_per_second();
        assert_eq!(Ticks(hz * 3).since(Ticks(hz)), Some(Duration::from_secs(2)));
        assert_eq!(Ticks(1).since(Ticks(2)), None);
    }

    #[test]
    fn cpu_per_item_needs_both_readings_and_an_item() {
        let hz = rustix::param::clock_ticks_per_second();
        let (before, after) = (Some(Ticks(hz)), Some(Ticks(2 * hz)));
        assert_eq!(per_item_us(before, after, 1000), Some(1000.0));
        assert_eq!(per_item_us(None, after, 1000), None);
        assert_eq!(per_item_us(before, None, 1000), None);
        assert_eq!(per_item_us(after, before, 1000), None);
        assert_eq!(per_item_us(before, after, 0), None);
    }

    #[test]
    fn reads_its_own_cpu() {
        assert!(own_ticks().is_some());
        let me = DaemonPid(std::process::id());
        assert!(me.cpu_ticks().is_some());
    }
}
