//! The daemon's descriptor table, sized once at start for the sessions it may hold.
//!
//! Linux grows a process's descriptor table by doubling it when a new descriptor does not fit
//! (64, 128, 256, …). In a process with more than one thread the kernel then waits out an RCU
//! grace period (`synchronize_rcu` in `expand_fdtable`) before the new table is used, and every
//! thread opening a descriptor meanwhile waits with it. On the 2-core machine README's figures
//! come from that wait was 10–25 ms, at each doubling, with the daemon's two descriptors a
//! session: in a spawn storm every spawn in flight stalled at about 100, 230, 480 and 1,000
//! sessions, and those stalls were the whole of the spawn p99 over 20 ms
//! (docs/performance-log.md, "Spawn stalls").
//!
//! So the daemon's start, while it is still one thread, makes the table as large as it will
//! need: it duplicates a descriptor onto the highest slot wanted and closes it. A table never
//! shrinks, so later opens never grow it. The cost is the table itself in kernel memory,
//! 8 bytes and 3 bits a slot (about 130 KiB for [`MAX_SLOTS`]); a child does not copy it
//! (a fork copies only up to the highest open descriptor).

use std::os::fd::AsFd;

use rustix::fs::{Mode, OFlags};
use rustix::process::{getrlimit, Resource};

/// The most slots reserved: two descriptors for each of 4,000 sessions (near the kernel's
/// default `pty.max` of 4,096), and as many again for clients' sockets and the rest.
pub const MAX_SLOTS: u64 = 16_384;

/// Slots to reserve under a soft `RLIMIT_NOFILE` of `soft` (`None`: unlimited): as many as
/// the process may open, up to [`MAX_SLOTS`]. Beyond the limit no descriptor can be opened,
/// so a table that size never grows.
pub fn slots_for(soft: Option<u64>) -> u64 {
    soft.map_or(MAX_SLOTS, |soft| soft.min(MAX_SLOTS))
}

/// Grows this process's descriptor table to [`slots_for`] its soft limit, and answers the
/// slots reserved. Best called while the process has one thread, where growing costs no
/// grace period.
pub fn reserve() -> std::io::Result<u64> {
    let slots = slots_for(getrlimit(Resource::Nofile).current);
    // A table of 64 (the smallest) needs nothing done.
    if slots <= 64 {
        return Ok(slots);
    }
    let highest = i32::try_from(slots - 1).map_err(std::io::Error::other)?;
    let null = rustix::fs::open("/dev/null", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    // The lowest free slot at or above `highest` is `highest` itself in a table that has
    // not reached it; the kernel grows the table to hold it. Both copies close on drop.
    let high = rustix::io::fcntl_dupfd_cloexec(null.as_fd(), highest)?;
    drop(high);
    Ok(slots)
}

/// The slots this process's descriptor table has now (`FDSize` in `/proc/self/status`).
pub fn current_slots() -> std::io::Result<u64> {
    slots_in(&std::fs::read_to_string("/proc/self/status")?)
        .ok_or_else(|| std::io::Error::other("no FDSize line in /proc/self/status"))
}

/// The `FDSize` of a `/proc/<pid>/status` text.
pub fn slots_in(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("FDSize:"))
        .and_then(|n| n.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_soft_limit_up_to_the_cap() {
        assert_eq!(slots_for(Some(1024)), 1024);
        assert_eq!(slots_for(Some(20_000)), MAX_SLOTS);
        assert_eq!(slots_for(None), MAX_SLOTS);
        assert_eq!(slots_for(Some(0)), 0);
    }

    #[test]
    fn fd_size_is_read_from_a_status_text() {
        let status = "Name:\tatc\nFDSize:\t256\nGroups:\t\n";
        assert_eq!(slots_in(status), Some(256));
        assert_eq!(slots_in("Name:\tatc\n"), None);
    }

    #[test]
    fn reserving_grows_the_table_to_the_slots_answered() {
        let reserved = reserve().expect("reserve");
        let now = current_slots().expect("FDSize");
        assert!(
            now >= reserved,
            "the table has {now} slots after reserving {reserved}"
        );
        // Reserved on a table already that large, nothing changes.
        assert_eq!(reserve().expect("reserve again"), reserved);
        assert_eq!(current_slots().expect("FDSize"), now);
    }
}
