//! [`LaunchSplit`]: where the daemon says a spawn batch's time went, from its own metrics.
//!
//! Nearly all of a spawn's time in a storm is the start of its process: waiting for one of
//! the daemon's launcher threads, then the launcher's work (the PTY, and the fork, which waits
//! for the child's exec). The daemon keeps both as histograms (`atc_launch_wait_seconds`,
//! `atc_launch_duration_seconds`); the spawn phase reads `GET /metrics` before and after its
//! batch, and the difference of each histogram's sum over the difference of its count is that
//! part's mean over the batch's spawns. A daemon without those families (an older one) gives
//! no split, and the report leaves the row out.

use serde::Serialize;

/// The batch's launches and their mean split.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LaunchSplit {
    /// Processes the daemon launched over the batch.
    pub launches: u64,
    /// Mean wait for a free launcher thread.
    pub wait_mean_ms: f64,
    /// Mean time a launcher took.
    pub launch_mean_ms: f64,
}

/// One reading of the two histograms' sums (seconds) and counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LaunchTotals {
    wait_sum: f64,
    launch_sum: f64,
    count: f64,
}

const WAIT: &str = "atc_launch_wait_seconds";
const LAUNCH: &str = "atc_launch_duration_seconds";

impl LaunchTotals {
    /// The totals in a `/metrics` text; `None` when either family is missing.
    pub fn read(metrics: &str) -> Option<LaunchTotals> {
        Some(LaunchTotals {
            wait_sum: sample(metrics, &format!("{WAIT}_sum"))?,
            launch_sum: sample(metrics, &format!("{LAUNCH}_sum"))?,
            count: sample(metrics, &format!("{LAUNCH}_count"))?,
        })
    }

    /// The split of the launches made between `before` and this reading; `None` when there
    /// were none.
    pub fn since(&self, before: &LaunchTotals) -> Option<LaunchSplit> {
        let count = self.count - before.count;
        if count < 1.0 {
            return None;
        }
        let mean_ms = |after: f64, before: f64| (after - before) / count * 1e3;
        Some(LaunchSplit {
            launches: count as u64,
            wait_mean_ms: mean_ms(self.wait_sum, before.wait_sum),
            launch_mean_ms: mean_ms(self.launch_sum, before.launch_sum),
        })
    }
}

/// The value of the unlabelled sample `name`.
fn sample(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let (key, value) = line.rsplit_once(' ')?;
        (key == name).then(|| value.parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(wait_sum: f64, launch_sum: f64, count: u64) -> String {
        format!(
            "# TYPE atc_launch_wait_seconds histogram\n\
             atc_launch_wait_seconds_sum {wait_sum}\n\
             atc_launch_wait_seconds_count {count}\n\
             atc_launch_wait_seconds_bucket{{le=\"0.0001\"}} 0\n\
             # TYPE atc_launch_duration_seconds histogram\n\
             atc_launch_duration_seconds_sum {launch_sum}\n\
             atc_launch_duration_seconds_count {count}\n\
             # EOF\n"
        )
    }

    #[test]
    fn the_split_is_the_batchs_share_of_each_sum_over_its_launches() {
        let before = LaunchTotals::read(&metrics(0.5, 0.25, 10)).expect("before");
        let after = LaunchTotals::read(&metrics(8.5, 1.75, 1010)).expect("after");
        let split = after.since(&before).expect("a split");
        assert_eq!(split.launches, 1000);
        assert!((split.wait_mean_ms - 8.0).abs() < 1e-9, "{split:?}");
        assert!((split.launch_mean_ms - 1.5).abs() < 1e-9, "{split:?}");
    }

    #[test]
    fn no_launch_or_no_family_gives_no_split() {
        let once = LaunchTotals::read(&metrics(1.0, 1.0, 3)).expect("read");
        assert_eq!(once.since(&once), None);
        assert_eq!(LaunchTotals::read("atc_spawns_total 3\n# EOF\n"), None);
        // A labelled sample or another family's with the same prefix is not the one asked.
        let text = "atc_launch_wait_seconds_sum_other 4\natc_launch_wait_seconds_sum{a=\"b\"} 4\n";
        assert_eq!(sample(text, "atc_launch_wait_seconds_sum"), None);
    }
}
