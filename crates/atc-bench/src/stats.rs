//! Turning raw measurements into the figures a report shows: latency percentiles from a list of
//! samples, and rates (per second, MiB per second) from a count and an elapsed time.
//!
//! Samples are few enough (thousands) that sorting a `Vec` is exact and cheap; a histogram would
//! only add an approximation. Nothing here measures anything itself: the phases time their own
//! operations and hand the durations over.

use std::time::Duration;

use serde::Serialize;

/// Bytes in one MiB, the unit every throughput figure is given in.
pub const MIB: f64 = 1024.0 * 1024.0;

/// Latency figures over one set of samples, in microseconds (fractional, so sub-microsecond
/// bare-PTY figures keep their precision).
///
/// Percentiles use the nearest-rank method: `pN` is the smallest sample that at least N % of the
/// samples do not exceed, so it is always a latency that was actually observed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    /// How many samples the figures summarise.
    pub count: usize,
    /// The fastest sample.
    pub min_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// The slowest sample.
    pub max_us: f64,
    /// Arithmetic mean.
    pub mean_us: f64,
}

impl Latency {
    /// Summarises `samples` (sorted in place); `None` when there are none, so that a phase that
    /// measured nothing reports no figure rather than zeros that look like a result.
    pub fn from_samples(samples: &mut [Duration]) -> Option<Latency> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let total: Duration = samples.iter().sum();
        let us = |d: Duration| round3(d.as_secs_f64() * 1e6);
        Some(Latency {
            count: samples.len(),
            min_us: us(samples[0]),
            p50_us: us(percentile(samples, 50.0)),
            p90_us: us(percentile(samples, 90.0)),
            p99_us: us(percentile(samples, 99.0)),
            max_us: us(samples[samples.len() - 1]),
            mean_us: us(total.div_f64(samples.len() as f64)),
        })
    }
}

/// Nearest-rank percentile of an ascending, non-empty slice.
///
/// Panics on an empty slice: callers check emptiness first (it is an invariant of
/// [`Latency::from_samples`], not something a daemon can cause).
fn percentile(sorted: &[Duration], pct: f64) -> Duration {
    debug_assert!(
        sorted.windows(2).all(|w| w[0] <= w[1]),
        "samples must be sorted"
    );
    let n = sorted.len();
    let rank = ((pct / 100.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

/// Events per second; 0 when no time passed (a phase that did nothing).
pub fn per_second(count: u64, elapsed: Duration) -> f64 {
    round3(raw_per_second(count as f64, elapsed))
}

/// MiB per second; 0 when no time passed.
pub fn mib_per_second(bytes: u64, elapsed: Duration) -> f64 {
    round3(raw_per_second(bytes as f64 / MIB, elapsed))
}

/// A duration in milliseconds, to the microsecond.
pub fn millis(elapsed: Duration) -> f64 {
    round3(elapsed.as_secs_f64() * 1e3)
}

/// Rounds to three decimals. Every fractional figure goes through it, so the JSON report shows
/// figures to the precision they have instead of binary floating-point noise.
pub fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

fn raw_per_second(amount: f64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        amount / secs
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn no_samples_give_no_figures() {
        assert_eq!(Latency::from_samples(&mut []), None);
    }

    #[test]
    fn one_sample_is_every_percentile() {
        let l = Latency::from_samples(&mut ms(&[7])).expect("one sample");
        assert_eq!(l.count, 1);
        assert_eq!(
            (l.min_us, l.p50_us, l.p99_us, l.max_us),
            (7e3, 7e3, 7e3, 7e3)
        );
    }

    #[test]
    fn percentiles_use_nearest_rank_on_unsorted_input() {
        // 1..=100 ms shuffled: pN is exactly N ms under nearest rank.
        let mut v: Vec<u64> = (1..=100).collect();
        v.reverse();
        v.swap(3, 70);
        let l = Latency::from_samples(&mut ms(&v)).expect("samples");
        assert_eq!(l.p50_us, 50e3);
        assert_eq!(l.p90_us, 90e3);
        assert_eq!(l.p99_us, 99e3);
        assert_eq!(l.min_us, 1e3);
        assert_eq!(l.max_us, 100e3);
        assert!((l.mean_us - 50.5e3).abs() < 1e-6);
    }

    #[test]
    fn small_sets_round_the_rank_up() {
        // Four samples: p50 is the 2nd, p90 and p99 the 4th.
        let l = Latency::from_samples(&mut ms(&[40, 10, 30, 20])).expect("samples");
        assert_eq!(l.p50_us, 20e3);
        assert_eq!(l.p90_us, 40e3);
        assert_eq!(l.p99_us, 40e3);
    }

    #[test]
    fn rates_handle_zero_time() {
        assert_eq!(per_second(10, Duration::ZERO), 0.0);
        assert_eq!(per_second(10, Duration::from_millis(500)), 20.0);
        assert_eq!(mib_per_second(256 << 20, Duration::from_secs(2)), 128.0);
        assert_eq!(per_second(1, Duration::from_secs(3)), 0.333);
        assert_eq!(millis(Duration::from_nanos(62_323_456)), 62.323);
        // Microsecond figures from nanosecond durations carry no float noise.
        let l = Latency::from_samples(&mut [Duration::from_nanos(62_323)]).expect("one sample");
        assert_eq!(l.p50_us.to_string(), "62.323");
    }
}
