//! A local session's resource limits and what it uses (issue 35): the spawn's `limits` field,
//! the descriptor's effective `limits`, and its `usage`, read from its cgroup when asked.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Limits on a session's processes, all of them together, enforced by the kernel (a cgroup of
/// its own). Each is optional: an absent one is not limited. In a spawn it may only lower what
/// config allows; in a descriptor it is what the session runs under.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SessionLimits {
    /// Memory in MiB (RAM the kernel charges to the session: its processes' pages and page
    /// cache). Past it the kernel kills a process of the session, and a session whose own
    /// process dies so ends with `exitReason: memory_limit`.
    #[serde(rename = "memoryMiB", default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 16, maximum = 16777216)]
    pub memory_mib: Option<u64>,
    /// Processes and threads at once; a fork past it fails (`EAGAIN`) and nothing is killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 8, maximum = 4194304)]
    pub pids: Option<u32>,
    /// CPU time per wall-clock time, in percent of one core (200 is two cores' worth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 100000)]
    pub cpu_percent: Option<u32>,
}

/// The bounds each limit must lie in, and why.
pub mod bounds {
    /// Below this a shell cannot start: its own pages and a terminal's buffers need more.
    pub const MEMORY_MIB_MIN: u64 = 16;
    /// 16 TiB: past any machine's memory, and far from the kernel's byte counter's overflow.
    pub const MEMORY_MIB_MAX: u64 = 16 * 1024 * 1024;
    /// A shell and a command in a pipe need a few; fewer only makes a session that cannot
    /// run anything.
    pub const PIDS_MIN: u32 = 8;
    /// The kernel's own ceiling (`PID_MAX_LIMIT`).
    pub const PIDS_MAX: u32 = 4 * 1024 * 1024;
    /// One percent of a core.
    pub const CPU_PERCENT_MIN: u32 = 1;
    /// A thousand cores.
    pub const CPU_PERCENT_MAX: u32 = 100_000;
}

impl SessionLimits {
    /// No limit set at all.
    pub fn is_empty(&self) -> bool {
        self.memory_mib.is_none() && self.pids.is_none() && self.cpu_percent.is_none()
    }

    /// The first field outside its bounds, as `(wire name, lowest, highest)`.
    pub fn out_of_bounds(&self) -> Option<(&'static str, u64, u64)> {
        use bounds::*;
        let outside = |v: u64, lo: u64, hi: u64| v < lo || v > hi;
        if let Some(v) = self.memory_mib {
            if outside(v, MEMORY_MIB_MIN, MEMORY_MIB_MAX) {
                return Some(("memoryMiB", MEMORY_MIB_MIN, MEMORY_MIB_MAX));
            }
        }
        if let Some(v) = self.pids {
            if outside(v.into(), PIDS_MIN.into(), PIDS_MAX.into()) {
                return Some(("pids", PIDS_MIN.into(), PIDS_MAX.into()));
            }
        }
        if let Some(v) = self.cpu_percent {
            if outside(v.into(), CPU_PERCENT_MIN.into(), CPU_PERCENT_MAX.into()) {
                return Some(("cpuPercent", CPU_PERCENT_MIN.into(), CPU_PERCENT_MAX.into()));
            }
        }
        None
    }
}

/// What a session's processes use now, all of them together, read from its cgroup when a
/// client asks (no timer samples it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Memory charged to the session now, in bytes.
    pub memory_bytes: u64,
    /// The most it was charged at once since its process started, in bytes.
    pub memory_peak_bytes: u64,
    /// CPU time its processes used since its process started, user and system, in seconds.
    pub cpu_seconds: f64,
    /// Processes and threads in it now.
    pub pids: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_read_and_write_their_wire_names() {
        let l: SessionLimits =
            serde_json::from_str(r#"{"memoryMiB": 512, "pids": 256, "cpuPercent": 50}"#).unwrap();
        assert_eq!(
            l,
            SessionLimits {
                memory_mib: Some(512),
                pids: Some(256),
                cpu_percent: Some(50)
            }
        );
        assert_eq!(
            serde_json::to_value(SessionLimits {
                pids: Some(9),
                ..SessionLimits::default()
            })
            .unwrap(),
            serde_json::json!({"pids": 9})
        );
        assert!(serde_json::from_str::<SessionLimits>(r#"{"memoryMb": 5}"#).is_err());
    }

    #[test]
    fn each_bound_is_named() {
        let l = |m, p, c| SessionLimits {
            memory_mib: m,
            pids: p,
            cpu_percent: c,
        };
        assert_eq!(l(Some(16), Some(8), Some(1)).out_of_bounds(), None);
        assert_eq!(
            l(Some(15), None, None).out_of_bounds().unwrap().0,
            "memoryMiB"
        );
        assert_eq!(l(None, Some(7), None).out_of_bounds().unwrap().0, "pids");
        assert_eq!(
            l(None, None, Some(0)).out_of_bounds().unwrap().0,
            "cpuPercent"
        );
        assert_eq!(
            l(None, None, Some(100_001)).out_of_bounds().unwrap().0,
            "cpuPercent"
        );
        assert!(SessionLimits::default().is_empty());
    }
}
