//! How many sessions may have a running process at once: `limits.maxSessions`, or, when the
//! config leaves it `null`, a number worked out from the host once, at start.
//!
//! Without a cap one script could take every PTY of the machine (`kernel.pty.max`), or fill
//! the daemon's descriptor table until even its owner could not connect (issue 31). The
//! worked-out cap leaves both room:
//!
//! - descriptors: a local session holds two (its PTY and its pidfd), so sessions take at most
//!   half of the soft `RLIMIT_NOFILE`: a cap of a quarter of it. The HTTP server keeps
//!   connections without a token within another quarter; the rest is the owner's.
//! - PTYs: at most half of `kernel.pty.max`, so the machine's own terminals (and other
//!   users') still open.
//!
//! The smaller of the two is the cap. The limits are read at start only: a limit raised later
//! takes a restart (or an explicit `maxSessions`).

/// The cap when the host says nothing about either limit (no open-file limit, no readable
/// `kernel.pty.max`): half of the kernel's default `pty.max` of 4,096.
pub const FALLBACK: usize = 2048;

/// The cap the daemon works to, and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionCap {
    /// Sessions with a running process at most.
    pub sessions: usize,
    /// Where the number came from.
    pub from: CapSource,
}

/// Where a [`SessionCap`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapSource {
    /// `limits.maxSessions` in the config.
    Configured,
    /// Worked out from the host's limits as read at start (`None`: no such limit, or it could
    /// not be read).
    Host {
        /// The soft `RLIMIT_NOFILE`.
        open_files: Option<u64>,
        /// `kernel.pty.max`.
        pty_max: Option<u64>,
    },
}

impl SessionCap {
    /// The cap for a configured `limits.maxSessions` (`None`: work it out from `host`).
    pub fn resolve(configured: Option<usize>, host: HostLimits) -> SessionCap {
        if let Some(sessions) = configured {
            return SessionCap {
                sessions: sessions.max(1),
                from: CapSource::Configured,
            };
        }
        let by_files = host.open_files.map(|n| n / 4);
        let by_ptys = host.pty_max.map(|n| n / 2);
        let sessions = match (by_files, by_ptys) {
            (Some(f), Some(p)) => f.min(p),
            (Some(one), None) | (None, Some(one)) => one,
            (None, None) => FALLBACK as u64,
        };
        SessionCap {
            sessions: usize::try_from(sessions).unwrap_or(usize::MAX).max(1),
            from: CapSource::Host {
                open_files: host.open_files,
                pty_max: host.pty_max,
            },
        }
    }

    /// Logs the cap and where it came from, once at start.
    pub fn log(&self) {
        match self.from {
            CapSource::Configured => tracing::info!(
                max_sessions = self.sessions,
                "session cap from limits.maxSessions"
            ),
            CapSource::Host {
                open_files,
                pty_max,
            } => tracing::info!(
                max_sessions = self.sessions,
                open_files = ?open_files,
                pty_max = ?pty_max,
                "session cap worked out from the host: the smaller of a quarter of the open-file limit and half of kernel.pty.max (set limits.maxSessions to choose)"
            ),
        }
    }
}

/// The host's limits a worked-out cap is made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostLimits {
    /// The soft `RLIMIT_NOFILE` (`None`: unlimited).
    pub open_files: Option<u64>,
    /// `kernel.pty.max` (`None`: unreadable).
    pub pty_max: Option<u64>,
}

impl HostLimits {
    /// This process's limits now.
    pub fn read() -> HostLimits {
        let open_files = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        // Unreadable (no procfs, a sandbox): the open-file side decides alone.
        let pty_max = std::fs::read_to_string("/proc/sys/kernel/pty/max")
            .ok()
            .and_then(|t| t.trim().parse().ok());
        HostLimits {
            open_files,
            pty_max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(open_files: Option<u64>, pty_max: Option<u64>) -> HostLimits {
        HostLimits {
            open_files,
            pty_max,
        }
    }

    #[test]
    fn the_host_cap_is_the_smaller_of_a_quarter_of_the_files_and_half_the_ptys() {
        let cap = |h| SessionCap::resolve(None, h).sessions;
        // Issue 31's probe: 512 descriptors took 237 sessions before the table was full.
        assert_eq!(cap(host(Some(512), Some(4096))), 128);
        // A workstation with 16,384 descriptors no longer takes every PTY.
        assert_eq!(cap(host(Some(16_384), Some(4096))), 2048);
        assert_eq!(cap(host(Some(1024), None)), 256);
        assert_eq!(cap(host(None, Some(4096))), 2048);
        assert_eq!(cap(host(None, None)), FALLBACK);
        // Never zero: one session at least.
        assert_eq!(cap(host(Some(2), Some(1))), 1);
    }

    #[test]
    fn a_configured_cap_wins_and_says_so() {
        let c = SessionCap::resolve(Some(7), host(Some(512), Some(4096)));
        assert_eq!(
            c,
            SessionCap {
                sessions: 7,
                from: CapSource::Configured
            }
        );
        assert_eq!(
            SessionCap::resolve(None, host(Some(512), Some(4096))).from,
            CapSource::Host {
                open_files: Some(512),
                pty_max: Some(4096)
            }
        );
    }

    #[test]
    fn this_hosts_limits_are_read() {
        let h = HostLimits::read();
        assert_eq!(
            h.open_files,
            rustix::process::getrlimit(rustix::process::Resource::Nofile).current
        );
    }
}
