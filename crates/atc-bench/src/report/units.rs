//! How the table writes each figure: rates, latencies, sizes and ratios, with their units.

use crate::api::SessionLimits;
use crate::delivery::{ClientFigures, Ending};
use crate::stats::{Latency, MIB};

pub(super) fn client_rate(c: &ClientFigures) -> String {
    match &c.ending {
        Ending::Complete => format!("{:.1} MiB/s", c.mib_per_sec),
        Ending::Stopped => format!("{:.1} MiB/s (stopped)", c.mib_per_sec),
        Ending::TimedOut => format!("{:.1} MiB/s (timed out)", c.mib_per_sec),
        Ending::Closed(_) | Ending::Failed(_) => {
            format!("{:.1} MiB/s (ended early)", c.mib_per_sec)
        }
    }
}

/// A rate or size already named by its row, to one decimal.
pub(super) fn one_decimal(v: f64) -> String {
    format!("{v:.1}")
}

/// A ratio atc / floor as a cell, empty when there is none.
pub(super) fn times(r: Option<f64>) -> String {
    r.map_or_else(String::new, |r| format!("×{r:.2}"))
}

/// A CPU time in milliseconds, or "n/a" when procfs could not be read.
pub(super) fn cpu(ms: Option<f64>) -> String {
    ms.map_or_else(|| "n/a".into(), millis)
}

pub(super) fn lost(c: &ClientFigures) -> String {
    c.lost_bytes.map_or_else(|| "unknown".into(), bytes)
}

pub(super) fn latency2(l: Option<&Latency>) -> String {
    l.map_or_else(
        || "n/a".into(),
        |l| format!("{} / {}", micros(l.p50_us), micros(l.p99_us)),
    )
}

pub(super) fn latency3(l: Option<&Latency>) -> String {
    l.map_or_else(
        || "n/a".into(),
        |l| {
            format!(
                "{} / {} / {}",
                micros(l.p50_us),
                micros(l.p90_us),
                micros(l.p99_us)
            )
        },
    )
}

/// A duration given in microseconds, in the unit that keeps it readable.
pub(super) fn micros(us: f64) -> String {
    if us < 1e3 {
        format!("{us:.0} µs")
    } else {
        millis(us / 1e3)
    }
}

/// A duration given in milliseconds, in the unit that keeps it readable.
pub(super) fn millis(ms: f64) -> String {
    if ms < 1e3 {
        format!("{ms:.2} ms")
    } else {
        format!("{:.2} s", ms / 1e3)
    }
}

/// The daemon's RSS at two points, "before → after".
pub(super) fn rss_change(before: Option<u64>, after: Option<u64>) -> String {
    format!("{} → {}", kib(before), kib(after))
}

pub(super) fn kib(k: Option<u64>) -> String {
    k.map_or_else(|| "n/a".into(), |k| kib_f(k as f64))
}

pub(super) fn kib_f(k: f64) -> String {
    if k.abs() < 1024.0 {
        format!("{k:.0} KiB")
    } else {
        format!("{:.1} MiB", k / 1024.0)
    }
}

pub(super) fn bytes(b: u64) -> String {
    if b < 1024 {
        format!("{b} B")
    } else if (b as f64) < MIB {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", b as f64 / MIB)
    }
}

/// A spawn's limits as they were asked for, `memoryMiB=512, pids=256, cpuPercent=100`.
pub(super) fn limits(l: &SessionLimits) -> String {
    let mut parts = Vec::new();
    if let Some(v) = l.memory_mib {
        parts.push(format!("memoryMiB={v}"));
    }
    if let Some(v) = l.pids {
        parts.push(format!("pids={v}"));
    }
    if let Some(v) = l.cpu_percent {
        parts.push(format!("cpuPercent={v}"));
    }
    parts.join(", ")
}
