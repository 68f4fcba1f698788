//! What a session uses, as `atc ls` and `atc top` show it (issue 35): memory in short binary
//! units against its limit, CPU as seconds used or as a share of a core between two looks,
//! and the orders `--sort mem` and `--sort cpu` list sessions in. Pure functions of the
//! descriptors; asking the daemon is the commands' part.
//!
//! A session without `usage` (remote, exited, or on a daemon without cgroups) shows `-` and
//! sorts after every session that has a figure, whichever way the list is sorted.

use std::cmp::Ordering;
use std::time::Duration;

use clap::ValueEnum;

use atc_client::Descriptor;

/// The figure a list is sorted by, most first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SortBy {
    /// Memory charged to the session now.
    Mem,
    /// CPU: `atc ls` sorts by seconds used so far, `atc top` by its share since the last
    /// refresh.
    Cpu,
}

const KIB: f64 = 1024.0;

/// A byte count in binary units with one letter, as `top` and `ls -h` write them: `512B`,
/// `9.5K`, `312M`, `1.2G`. One decimal below ten, none above, so a cell stays at most four
/// characters and the table narrow.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["K", "M", "G", "T", "P", "E"];
    if n < 1024 {
        return format!("{n}B");
    }
    // f64 is exact to 2^53 bytes, and past that a rounded figure is all that is shown.
    let mut value = n as f64 / KIB;
    for (i, unit) in UNITS.iter().enumerate() {
        let next_unit = i + 1 < UNITS.len();
        // Decide on the figure as it will be printed: 1023.7 prints as 1024, which reads
        // better as 1.0 of the next unit.
        if value < 9.95 {
            return format!("{value:.1}{unit}");
        }
        if value.round() < 1024.0 || !next_unit {
            return format!("{value:.0}{unit}");
        }
        value /= KIB;
    }
    unreachable!("the last unit returns")
}

/// Bytes in a MiB, the unit `limits.memoryMiB` is given in.
const MIB: u64 = 1024 * 1024;

/// The memory cell: what the session uses, then its limit when it has one (`312M/512M`,
/// `-/512M` while no figure is known, `-` for neither).
pub fn memory_cell(s: &Descriptor) -> String {
    let used = s
        .usage
        .map_or_else(|| "-".to_string(), |u| bytes(u.memory_bytes));
    match s.limits.and_then(|l| l.memory_mib) {
        Some(mib) => format!("{used}/{}", bytes(mib.saturating_mul(MIB))),
        None => used,
    }
}

/// CPU seconds used, coarse like an age: `0.4s`, `12s`, `3m05s`, `2h10m`.
pub fn cpu_time(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return "-".into();
    }
    if seconds < 10.0 {
        return format!("{seconds:.1}s");
    }
    // Truncation is the point: whole seconds, and far below u64's range for any real session.
    let whole = seconds as u64;
    match whole {
        0..60 => format!("{whole}s"),
        60..3600 => format!("{}m{:02}s", whole / 60, whole % 60),
        _ => format!("{}h{:02}m", whole / 3600, whole % 3600 / 60),
    }
}

/// The share of one core a session used between two looks, in percent (200 is two cores'
/// worth): the CPU seconds it gained over the wall-clock time between them. `None` when
/// there is no earlier look, no time passed, or the counter went backwards (a revive starts
/// the session's process, and its count, again).
pub fn cpu_percent(before: Option<f64>, now: f64, elapsed: Duration) -> Option<f64> {
    let before = before?;
    let wall = elapsed.as_secs_f64();
    if wall <= 0.0 || now < before || !now.is_finite() || !before.is_finite() {
        return None;
    }
    Some((now - before) / wall * 100.0)
}

/// A percentage as `top` writes it: one decimal.
pub fn percent(p: Option<f64>) -> String {
    p.map_or_else(|| "-".into(), |p| format!("{p:.1}"))
}

/// Sorts `list` by `key`, most first, those without a figure last; a stable sort, so equal
/// figures (and sessions without one) keep the order they came in.
pub fn sort_most_first<T>(list: &mut [T], key: impl Fn(&T) -> Option<f64>) {
    list.sort_by(|a, b| match (key(a), key(b)) {
        (Some(a), Some(b)) => b.partial_cmp(&a).unwrap_or(Ordering::Equal),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    });
}

/// The figure `atc ls --sort` orders by: memory in bytes, or CPU seconds used so far.
pub fn figure(s: &Descriptor, by: SortBy) -> Option<f64> {
    let usage = s.usage?;
    Some(match by {
        // Precision past 2^53 bytes does not change an order anyone reads.
        SortBy::Mem => usage.memory_bytes as f64,
        SortBy::Cpu => usage.cpu_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use atc_client::atc_protocol::limits::{SessionLimits, Usage};

    #[test]
    fn bytes_are_short_and_round_up_into_the_next_unit() {
        assert_eq!(bytes(0), "0B");
        assert_eq!(bytes(1023), "1023B");
        assert_eq!(bytes(1024), "1.0K");
        assert_eq!(bytes(312 * MIB), "312M");
        assert_eq!(bytes(9 * MIB + MIB / 2), "9.5M");
        assert_eq!(bytes(1288 * MIB), "1.3G");
        assert_eq!(bytes(1024 * MIB - 1), "1.0G");
        assert_eq!(bytes(10 * MIB - 1), "10M");
        assert_eq!(bytes(u64::MAX), "16E");
    }

    fn with(usage: Option<u64>, limit: Option<u64>) -> Descriptor {
        Descriptor {
            usage: usage.map(|m| Usage {
                memory_bytes: m,
                ..Usage::default()
            }),
            limits: limit.map(|mib| SessionLimits {
                memory_mib: Some(mib),
                ..SessionLimits::default()
            }),
            ..Descriptor::default()
        }
    }

    #[test]
    fn the_memory_cell_shows_use_and_limit_when_known() {
        assert_eq!(memory_cell(&with(None, None)), "-");
        assert_eq!(memory_cell(&with(Some(312 * MIB), None)), "312M");
        assert_eq!(memory_cell(&with(Some(312 * MIB), Some(512))), "312M/512M");
        assert_eq!(memory_cell(&with(None, Some(2048))), "-/2.0G");
        // Limits on processes alone say nothing about memory.
        let pids_only = Descriptor {
            limits: Some(SessionLimits {
                pids: Some(64),
                ..SessionLimits::default()
            }),
            ..with(Some(MIB), None)
        };
        assert_eq!(memory_cell(&pids_only), "1.0M");
    }

    #[test]
    fn cpu_percent_is_the_seconds_gained_over_the_wall_time() {
        let two = Duration::from_secs(2);
        assert_eq!(cpu_percent(Some(10.0), 11.0, two), Some(50.0));
        assert_eq!(cpu_percent(Some(10.0), 14.0, two), Some(200.0));
        assert_eq!(cpu_percent(Some(10.0), 10.0, two), Some(0.0));
        assert_eq!(cpu_percent(None, 10.0, two), None);
        assert_eq!(cpu_percent(Some(10.0), 11.0, Duration::ZERO), None);
        // A revived session counts from zero again.
        assert_eq!(cpu_percent(Some(10.0), 0.5, two), None);
        assert_eq!(percent(Some(12.345)), "12.3");
        assert_eq!(percent(None), "-");
    }

    #[test]
    fn cpu_time_is_coarse() {
        assert_eq!(cpu_time(0.42), "0.4s");
        assert_eq!(cpu_time(12.9), "12s");
        assert_eq!(cpu_time(185.0), "3m05s");
        assert_eq!(cpu_time(7800.0), "2h10m");
        assert_eq!(cpu_time(f64::NAN), "-");
    }

    #[test]
    fn most_first_puts_sessions_without_a_figure_last_in_their_order() {
        let mut list = vec![("a", None), ("b", Some(1.0)), ("c", None), ("d", Some(3.0))];
        sort_most_first(&mut list, |(_, f)| *f);
        let names: Vec<&str> = list.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["d", "b", "a", "c"]);
    }
}
