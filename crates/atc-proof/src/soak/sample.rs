//! The soak's readings over time: every `--sample-secs` the daemon's RSS and open descriptors
//! (from its `/proc` entry), the size of SQLite's write-ahead log (`atc.db-wal` in the state
//! dir), the kernel's PTY count, and how many held sessions a listing shows alive; and what the
//! readings say about growth once the fleet is in its steady state.
//!
//! Growth is the slope of a least-squares line through the steady-state readings, times the
//! steady state's length: a leak shows as a slope however noisy single readings are, and one
//! reading caught mid-allocation does not pass for one.

use std::path::{Path, PathBuf};

use atc_bench::limits::PtyCount;
use atc_bench::rss::DaemonPid;

use crate::report::Series;

/// One reading.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Sample {
    /// Seconds since the hold began (negative: during the ramp).
    pub t_secs: f64,
    pub rss_kib: Option<u64>,
    pub fds: Option<u64>,
    /// 0 when there is no WAL file (SQLite removed or truncated it).
    pub wal_bytes: u64,
    /// `kernel.pty.nr` (machine-wide).
    pub pty_in_use: Option<u64>,
    /// Held sessions a listing showed alive.
    pub alive: usize,
    /// Held sessions (the fleet's count).
    pub held: usize,
}

/// Where the procfs readings come from.
pub struct Probe {
    pid: DaemonPid,
    wal: PathBuf,
}

impl Probe {
    /// Reads the daemon `pid` and the WAL in `state_dir`.
    pub fn new(pid: u32, state_dir: &Path) -> Probe {
        Probe {
            pid: DaemonPid(pid),
            wal: state_dir.join("atc.db-wal"),
        }
    }

    /// The daemon's pid.
    pub fn pid(&self) -> DaemonPid {
        self.pid
    }

    /// A reading, without the listing's figures.
    pub fn read(&self, t_secs: f64) -> Sample {
        Sample {
            t_secs,
            rss_kib: self.pid.rss_kib(),
            fds: self.pid.open_fds(),
            // A missing WAL is a WAL of 0 bytes: SQLite truncates it at a checkpoint.
            wal_bytes: std::fs::metadata(&self.wal).map(|m| m.len()).unwrap_or(0),
            pty_in_use: PtyCount::read().map(|p| p.in_use),
            alive: 0,
            held: 0,
        }
    }
}

/// The readings as the report's series.
pub fn series(samples: &[Sample]) -> Series {
    let opt = |v: Option<u64>| v.map_or(-1.0, |v| v as f64);
    Series {
        name: "samples".into(),
        columns: [
            "tSecs", "rssKib", "fds", "walBytes", "ptyInUse", "alive", "held",
        ]
        .map(String::from)
        .to_vec(),
        rows: samples
            .iter()
            .map(|s| {
                vec![
                    (s.t_secs * 10.0).round() / 10.0,
                    opt(s.rss_kib),
                    opt(s.fds),
                    s.wal_bytes as f64,
                    opt(s.pty_in_use),
                    s.alive as f64,
                    s.held as f64,
                ]
            })
            .collect(),
    }
}

/// A line through `(t, value)` points: what it starts at and how much it rises over the
/// points' span.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trend {
    /// The line's value at the first point.
    pub start: f64,
    /// The line's value at the last point.
    pub end: f64,
    /// `end - start`.
    pub growth: f64,
    /// `growth / start` in %, 0 when `start` is not positive.
    pub growth_pct: f64,
}

impl Trend {
    /// The least-squares line through `points`; `None` with fewer than two distinct times.
    pub fn fit(points: &[(f64, f64)]) -> Option<Trend> {
        if points.len() < 2 {
            return None;
        }
        let n = points.len() as f64;
        let mean_t = points.iter().map(|p| p.0).sum::<f64>() / n;
        let mean_v = points.iter().map(|p| p.1).sum::<f64>() / n;
        let stt: f64 = points.iter().map(|p| (p.0 - mean_t).powi(2)).sum();
        if stt <= 0.0 {
            return None;
        }
        let stv: f64 = points.iter().map(|p| (p.0 - mean_t) * (p.1 - mean_v)).sum();
        let slope = stv / stt;
        let first = points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let last = points.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
        let at = |t: f64| mean_v + slope * (t - mean_t);
        let (start, end) = (at(first), at(last));
        let growth = end - start;
        Some(Trend {
            start,
            end,
            growth,
            growth_pct: if start > 0.0 {
                growth / start * 100.0
            } else {
                0.0
            },
        })
    }
}

/// The readings from `from_secs` on (the steady state), as `(t, value)` points of `pick`.
pub fn points(
    samples: &[Sample],
    from_secs: f64,
    pick: impl Fn(&Sample) -> Option<u64>,
) -> Vec<(f64, f64)> {
    samples
        .iter()
        .filter(|s| s.t_secs >= from_secs)
        .filter_map(|s| pick(s).map(|v| (s.t_secs, v as f64)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flat_but_noisy_series_does_not_grow() {
        let points: Vec<(f64, f64)> = (0..60)
            .map(|i| {
                let noise = if i % 2 == 0 { 300.0 } else { -300.0 };
                (f64::from(i) * 10.0, 100_000.0 + noise)
            })
            .collect();
        let t = Trend::fit(&points).expect("fits");
        assert!(t.growth_pct.abs() < 0.1, "{t:?}");
    }

    #[test]
    fn a_leak_shows_as_growth_over_the_span() {
        // 100 MiB, leaking 10 KiB a second for 500 s: 5,000 KiB, about 4.9 %.
        let points: Vec<(f64, f64)> = (0..=50)
            .map(|i| (f64::from(i) * 10.0, 102_400.0 + f64::from(i) * 100.0))
            .collect();
        let t = Trend::fit(&points).expect("fits");
        assert!((t.growth - 5000.0).abs() < 1e-6, "{t:?}");
        assert!((t.growth_pct - 5000.0 / 102_400.0 * 100.0).abs() < 1e-9);
        assert_eq!(t.start, 102_400.0);
    }

    #[test]
    fn too_few_points_fit_nothing() {
        assert_eq!(Trend::fit(&[]), None);
        assert_eq!(Trend::fit(&[(1.0, 2.0)]), None);
        assert_eq!(Trend::fit(&[(1.0, 2.0), (1.0, 3.0)]), None);
    }

    #[test]
    fn only_the_steady_state_counts() {
        let samples: Vec<Sample> = [
            (-5.0, Some(10)),
            (0.0, Some(20)),
            (10.0, None),
            (20.0, Some(30)),
        ]
        .iter()
        .map(|&(t_secs, rss_kib)| Sample {
            t_secs,
            rss_kib,
            ..Sample::default()
        })
        .collect();
        assert_eq!(
            points(&samples, 0.0, |s| s.rss_kib),
            vec![(0.0, 20.0), (20.0, 30.0)]
        );
        let s = series(&samples);
        assert_eq!(s.rows.len(), 4);
        assert_eq!(s.rows[2][1], -1.0);
    }
}
