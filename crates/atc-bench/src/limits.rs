//! The limits a scale run must stay under, read from procfs: the kernel's PTY count
//! (`/proc/sys/kernel/pty/{max,nr,reserve}`), the daemon's open-file limit (`Max open files` in
//! `/proc/<pid>/limits`, its `RLIMIT_NOFILE`), and how many descriptors the daemon has open
//! (the entries of `/proc/<pid>/fd`).
//!
//! Like [`rss`](super::rss) this needs the daemon on this machine and its `/proc` entry readable
//! (the same user); the PTY figures are machine-wide, so they say nothing about a daemon
//! elsewhere. Deciding what a step may ask for is the scale phase's; this module only reads.

use serde::Serialize;

use super::rss::DaemonPid;

/// The kernel's PTY accounting, machine-wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PtyCount {
    /// `kernel.pty.max`: PTYs the kernel hands out in all.
    pub max: u64,
    /// `kernel.pty.nr`: PTYs open right now, by anyone.
    pub in_use: u64,
    /// `kernel.pty.reserve`: of `max`, how many only the initial devpts instance may take; a
    /// daemon in a container with its own devpts instance may hit its ceiling that much sooner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserve: Option<u64>,
}

impl PtyCount {
    /// Reads the three files; `None` when `max` or `nr` is unreadable (not Linux, no procfs).
    pub fn read() -> Option<PtyCount> {
        let read = |name: &str| {
            std::fs::read_to_string(format!("/proc/sys/kernel/pty/{name}"))
                .ok()
                .and_then(|text| parse_count(&text))
        };
        Some(PtyCount {
            max: read("max")?,
            in_use: read("nr")?,
            reserve: read("reserve"),
        })
    }

    /// PTYs still free: `max - in_use`.
    pub fn free(&self) -> u64 {
        self.max.saturating_sub(self.in_use)
    }
}

/// A single number, as a `/proc/sys` file holds it (with a trailing newline).
pub fn parse_count(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// One side (soft or hard) of a resource limit; serialized as the number or `"unlimited"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// At most this many.
    Count(u64),
    /// `unlimited`.
    Unlimited,
}

impl Serialize for Limit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Limit::Count(n) => s.serialize_u64(*n),
            Limit::Unlimited => s.serialize_str("unlimited"),
        }
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Count(n) => write!(f, "{n}"),
            Limit::Unlimited => f.write_str("unlimited"),
        }
    }
}

/// A process's `RLIMIT_NOFILE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenFileLimit {
    /// What the process may open now (it can raise this up to `hard` itself).
    pub soft: Limit,
    /// The ceiling of `soft`.
    pub hard: Limit,
}

/// The `Max open files` line of a `/proc/<pid>/limits` text:
/// `Max open files            1024                 524288               files`.
pub fn parse_open_file_limit(limits: &str) -> Option<OpenFileLimit> {
    let rest = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?;
    let mut words = rest.split_whitespace();
    let side = |w: Option<&str>| match w? {
        "unlimited" => Some(Limit::Unlimited),
        n => n.parse().ok().map(Limit::Count),
    };
    let soft = side(words.next())?;
    let hard = side(words.next())?;
    Some(OpenFileLimit { soft, hard })
}

impl DaemonPid {
    /// The daemon's `RLIMIT_NOFILE`, or `None` when its `/proc` entry is unreadable.
    pub fn open_file_limit(self) -> Option<OpenFileLimit> {
        let text = std::fs::read_to_string(format!("/proc/{}/limits", self.0)).ok()?;
        parse_open_file_limit(&text)
    }

    /// Descriptors the daemon has open, or `None` when `/proc/<pid>/fd` is unreadable (another
    /// user's process).
    pub fn open_fds(self) -> Option<u64> {
        let dir = std::fs::read_dir(format!("/proc/{}/fd", self.0)).ok()?;
        Some(dir.count() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: &str = "\
Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max processes             95616                95616                processes 
Max open files            1024                 524288               files     
Max locked memory         8388608              8388608              bytes     
";

    #[test]
    fn open_file_limit_is_read_from_its_line() {
        assert_eq!(
            parse_open_file_limit(LIMITS),
            Some(OpenFileLimit {
                soft: Limit::Count(1024),
                hard: Limit::Count(524288)
            })
        );
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(
            parse_open_file_limit(unlimited),
            Some(OpenFileLimit {
                soft: Limit::Unlimited,
                hard: Limit::Unlimited
            })
        );
        assert_eq!(parse_open_file_limit("Max processes 1 1 processes\n"), None);
        assert_eq!(
            parse_open_file_limit("Max open files  lots  1 files\n"),
            None
        );
    }

    #[test]
    fn a_sysctl_file_is_one_number() {
        assert_eq!(parse_count("4096\n"), Some(4096));
        assert_eq!(parse_count(" 0 \n"), Some(0));
        assert_eq!(parse_count(""), None);
        assert_eq!(parse_count("4096 1\n"), None);
    }

    #[test]
    fn limits_serialize_as_a_number_or_unlimited() {
        let l = OpenFileLimit {
            soft: Limit::Count(20000),
            hard: Limit::Unlimited,
        };
        assert_eq!(
            serde_json::to_value(l).expect("serializes"),
            serde_json::json!({"soft": 20000, "hard": "unlimited"})
        );
    }

    #[test]
    fn reads_its_own_limits_and_fds() {
        let me = DaemonPid(std::process::id());
        assert!(me.open_file_limit().is_some());
        assert!(me.open_fds().is_some_and(|n| n > 0));
        let pty = PtyCount::read().expect("procfs has kernel.pty");
        assert!(pty.max > 0 && pty.free() <= pty.max);
    }
}
