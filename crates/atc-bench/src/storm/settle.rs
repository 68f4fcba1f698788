//! When a storm is over: not when the last spawn is answered (a spawn answers once its process
//! runs, and the start-up it burns comes after), but when the daemon's child processes, the
//! sessions' shells, have stopped running.
//!
//! The daemon's children are listed from `/proc/<pid>/task/<tid>/children` and each one's state
//! read from its `stat`; those in state `R` are the start-ups still burning (a throttled one is
//! still `R`, so a CPU cap does not end the storm early). The storm is over once at most one has
//! been running for a second, the echo session's `cat` being allowed its moment. Without the
//! daemon's `/proc` (another machine, a kernel without the `children` file) the window is a
//! fixed hold after the last answer instead, and the report says so.

use std::cell::Cell;
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::phase::Deadline;
use crate::rss::DaemonPid;

/// How often the children are counted.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// How long the children must have been quiet.
const QUIET_FOR: Duration = Duration::from_secs(1);

/// Running children that still count as quiet.
const QUIET_MAX: u32 = 1;

/// The window after the last answer when the children cannot be read.
const FIXED_HOLD: Duration = Duration::from_secs(10);

/// How the probing window closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Ended {
    /// The sessions' start-ups were over.
    Quiet,
    /// The children could not be read; the window held a fixed time after the last answer.
    FixedHold,
    /// The deadline came first: the storm was still burning.
    Deadline,
}

/// What watching the children found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    pub ended: Ended,
    /// The most children seen running at once.
    pub peak_running: Option<u32>,
}

/// Watches `pid`'s children from now until the storm is over: once `spawned` is set (every
/// spawn answered or given up) and they are quiet, or at `deadline`.
pub async fn watch(pid: Option<DaemonPid>, spawned: &Cell<bool>, deadline: Deadline) -> Settled {
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    let mut peak_running = None;
    let mut quiet_since: Option<Instant> = None;
    let mut done_at: Option<Instant> = None;
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(deadline.instant()) => {
                return Settled { ended: Ended::Deadline, peak_running };
            }
            _ = tick.tick() => {}
        }
        let running = pid.and_then(running_children);
        if let Some(n) = running {
            peak_running = Some(peak_running.map_or(n, |p: u32| p.max(n)));
        }
        if !spawned.get() {
            continue;
        }
        let now = Instant::now();
        let done_at = *done_at.get_or_insert(now);
        let Some(n) = running else {
            if now - done_at >= FIXED_HOLD {
                return Settled {
                    ended: Ended::FixedHold,
                    peak_running,
                };
            }
            continue;
        };
        if n > QUIET_MAX {
            quiet_since = None;
        } else if now - *quiet_since.get_or_insert(now) >= QUIET_FOR {
            return Settled {
                ended: Ended::Quiet,
                peak_running,
            };
        }
    }
}

/// How many of `pid`'s children are running now; `None` when its threads' `children` files
/// cannot be read. A child gone between the listing and its `stat` is not running.
fn running_children(pid: DaemonPid) -> Option<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{}/task", pid.0)).ok()?;
    let mut read_any = false;
    let mut running = 0;
    for task in tasks.flatten() {
        let Ok(list) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        read_any = true;
        for child in children(&list) {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat"));
            if stat.ok().as_deref().and_then(state) == Some('R') {
                running += 1;
            }
        }
    }
    read_any.then_some(running)
}

/// The pids in a `children` file: numbers separated by spaces.
fn children(list: &str) -> impl Iterator<Item = u32> + '_ {
    list.split_whitespace().filter_map(|p| p.parse().ok())
}

/// The state letter of a `stat` line (field 3 of proc(5)), read after the command's last `)`
/// since the command may hold spaces and parentheses.
fn state(stat: &str) -> Option<char> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().next()?.chars().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_state_after_the_command() {
        assert_eq!(state("42 (sh) R 1 42 42 0 -1"), Some('R'));
        assert_eq!(state("43 (a (b) c) S 1 43"), Some('S'));
        assert_eq!(state("garbage"), None);
        assert_eq!(state("44 (x)"), None);
    }

    #[test]
    fn reads_the_children_list() {
        assert_eq!(
            children("12 345 6 \n").collect::<Vec<_>>(),
            vec![12, 345, 6]
        );
        assert_eq!(children("").count(), 0);
    }

    #[test]
    fn counts_its_own_children() {
        let me = DaemonPid(std::process::id());
        // The children files exist on the kernels this runs on; none of the test's children
        // is running a busy loop.
        if let Some(n) = running_children(me) {
            assert!(n <= 1, "{n}");
        }
    }

    #[actix_rt::test]
    async fn without_the_children_the_window_is_a_fixed_hold() {
        tokio::time::pause();
        let spawned = Cell::new(true);
        let deadline = Deadline::after(Duration::from_secs(60));
        let started = Instant::now();
        let settled = watch(None, &spawned, deadline).await;
        assert_eq!(settled.ended, Ended::FixedHold);
        assert!(started.elapsed() >= FIXED_HOLD && started.elapsed() < FIXED_HOLD * 2);
    }

    #[actix_rt::test]
    async fn the_deadline_closes_a_window_that_never_settles() {
        tokio::time::pause();
        let spawned = Cell::new(false);
        let settled = watch(None, &spawned, Deadline::after(Duration::from_secs(3))).await;
        assert_eq!(settled.ended, Ended::Deadline);
    }
}
