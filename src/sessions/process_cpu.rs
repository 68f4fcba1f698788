//! CPU seconds a session's processes have used, for the activity rule (issue 38): from the
//! session's cgroup where it has one (every process it ever started, `setsid` helpers too),
//! else summed over its process tree in `/proc`.
//!
//! The tree is read once per sweep for every watched session together ([`ProcTable`]): one
//! pass over `/proc`, whatever the number of sessions. Each process counts its own time and
//! the time of the children it reaped (`cutime`, `cstime`), so a child that ran and ended
//! between two sweeps still shows in its parent's figure. Blocking reads: the sweep runs
//! them off the sessions' thread.

use std::collections::HashMap;
use std::path::Path;

use crate::providers::local::proc_stat::Stat;

/// Every process in `/proc` at one moment: its parent and its CPU ticks.
#[derive(Debug, Default)]
pub struct ProcTable {
    children: HashMap<i32, Vec<i32>>,
    ticks: HashMap<i32, u64>,
    ticks_per_second: f64,
}

impl ProcTable {
    /// Reads `/proc` now.
    pub fn read() -> ProcTable {
        Self::read_from(Path::new("/proc"), clock_ticks_per_second())
    }

    fn read_from(proc_dir: &Path, ticks_per_second: f64) -> ProcTable {
        let mut table = ProcTable {
            ticks_per_second,
            ..ProcTable::default()
        };
        let Ok(dir) = std::fs::read_dir(proc_dir) else {
            return table;
        };
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            // A process that ended since the listing has no stat to read: it is simply gone.
            let Some(stat) = std::fs::read_to_string(entry.path().join("stat"))
                .ok()
                .and_then(|l| Stat::parse(&l))
            else {
                continue;
            };
            table.insert(pid, stat);
        }
        table
    }

    fn insert(&mut self, pid: i32, stat: Stat) {
        self.children.entry(stat.ppid).or_default().push(pid);
        self.ticks.insert(pid, stat.cpu_ticks);
    }

    /// CPU seconds of `root` and every process below it; `None` when `root` is gone.
    pub fn tree_seconds(&self, root: i32) -> Option<f64> {
        self.ticks.get(&root)?;
        let mut total = 0u64;
        let mut stack = vec![root];
        // A parent loop cannot happen in a real table; the bound keeps a torn read finite.
        let mut left = self.ticks.len();
        while let Some(pid) = stack.pop() {
            if left == 0 {
                break;
            }
            left -= 1;
            total = total.saturating_add(self.ticks.get(&pid).copied().unwrap_or(0));
            if let Some(kids) = self.children.get(&pid) {
                stack.extend(kids.iter().copied().filter(|k| *k != pid));
            }
        }
        Some(total as f64 / self.ticks_per_second)
    }
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_sums_its_descendants_and_nothing_else() {
        let mut t = ProcTable {
            ticks_per_second: 100.0,
            ..ProcTable::default()
        };
        for (pid, ppid, ticks) in [(10, 1, 100), (11, 10, 50), (12, 11, 25), (20, 1, 1000)] {
            t.insert(
                pid,
                Stat {
                    ppid,
                    session: 1,
                    cpu_ticks: ticks,
                    start_ticks: 0,
                },
            );
        }
        assert_eq!(t.tree_seconds(10), Some(1.75));
        assert_eq!(t.tree_seconds(12), Some(0.25));
        assert_eq!(t.tree_seconds(99), None);
    }

    #[test]
    fn this_process_is_found_in_the_real_proc() {
        let t = ProcTable::read();
        let me = std::process::id() as i32;
        assert!(t.tree_seconds(me).is_some_and(|s| s >= 0.0));
    }
}
