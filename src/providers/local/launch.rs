//! The blocking half of a local start: a fresh PTY, sized, with the child started on it.
//!
//! `posix_spawn` returns only once the child has exec'd its program (glibc's spawn is a vfork,
//! and the parent waits while the child loads). Done on the sessions' thread, that wait held up
//! every session, socket and HTTP request of the daemon during a spawn storm; it was the
//! largest single cost of a spawn there (docs/performance-log.md, "Spawns, 2026-12-02"). So a
//! spawn runs [`launch`] on a blocking thread and hands what it made, plain descriptors and a
//! pid, to the harness, which registers them with the sessions' runtime. [`launch`] itself has
//! the work done on a launcher thread ([`super::launcher`]), whose small descriptor table is
//! what each child copies, and waits for it.
//!
//! The parent never opens the terminal's slave side: the child opens it by path
//! ([`super::pty_spawn`]), and a parent copy would only keep the PTY open after the child
//! exits, so its reader would never see the end.

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use atc_protocol::TermSize;
use rustix::fs::OFlags;
use rustix::pty::OpenptFlags;

use super::host_limit::HostLimit;
use super::pty_spawn::{Child, Plan, SpawnError};
use crate::providers::ProviderError;

/// A child running on a PTY whose master side is `master` (non-blocking, close-on-exec).
#[derive(Debug)]
pub struct Launched {
    /// The PTY's master side, which the harness reads and writes.
    pub master: OwnedFd,
    /// The child, to be waited for.
    pub child: Child,
    /// How long the start took, in its two parts.
    pub times: LaunchTimes,
    /// The child as the leader of its group, read by [`launch`] (`None` from
    /// [`launch_here`], or when it was gone before it could be read).
    pub leader: Option<super::group_leader::GroupLeader>,
    /// The cgroup the child started in, if it started in one.
    pub cgroup: Option<super::cgroup::session_group::SessionGroup>,
}

/// Where a start's time went: waiting for a free launcher thread, then the launcher's own work
/// (the PTY, and the fork, which waits for the child's exec). Counted in the daemon's metrics:
/// in a spawn storm nearly all of a spawn's time is these two, mostly the wait
/// (docs/performance-log.md, "Spawns, later on 2026-12-04").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchTimes {
    /// From the start being asked for to a launcher taking it; zero on the caller's thread.
    pub waited: Duration,
    /// From then to the child running its program.
    pub ran: Duration,
}

/// Opens a PTY of `size` and starts `plan` on it, on a launcher thread ([`super::launcher`]).
/// Blocks until the child has exec'd; any thread will do.
pub fn launch(plan: &Plan, size: TermSize) -> Result<Launched, ProviderError> {
    let mut launched = super::launcher::launch(plan, size)?;
    // Read here, off the sessions' thread: a few bytes of procfs, but a read all the same.
    launched.leader = super::group_leader::GroupLeader::of(launched.child.pid())
        .map_err(|e| {
            tracing::debug!(error = %e, "the new process's start time is unreadable; a kill -9 of the daemon would leave it unrecognised")
        })
        .ok();
    Ok(launched)
}

/// [`launch`] on the calling thread, whose descriptor table the child copies; public for
/// `examples/launch_cost.rs`, which measures the difference.
pub fn launch_here(plan: &Plan, size: TermSize) -> Result<Launched, ProviderError> {
    let began = Instant::now();
    // As pty-process's error, so a terminal that cannot be opened reads the same whichever
    // opened it ("could not open a terminal", which `atc-proof soak --grow` looks for).
    let master = open_master(size).map_err(|e| {
        let e = std::io::Error::from(e);
        match HostLimit::opening_a_pty(&e) {
            Some(limit) => ProviderError::LimitReached {
                limit,
                detail: format!("could not open a terminal: {e}"),
            },
            None => pty_process::Error::Io(e).into(),
        }
    })?;
    let tty = rustix::pty::ptsname(&master, Vec::new()).map_err(std::io::Error::from)?;
    let child = super::pty_spawn::spawn(plan, &tty).map_err(|e| {
        let limit = match &e {
            SpawnError::Exec { source, .. } => HostLimit::starting_a_process(source),
            // The pidfd: a descriptor the daemon could not open.
            SpawnError::Watch(source) => HostLimit::opening_a_descriptor(source),
            SpawnError::Nul(_) | SpawnError::Cgroup(_) => None,
        };
        match limit {
            Some(limit) => ProviderError::LimitReached {
                limit,
                detail: e.to_string(),
            },
            None => e.into(),
        }
    })?;
    Ok(Launched {
        master,
        child,
        times: LaunchTimes {
            waited: Duration::ZERO,
            ran: began.elapsed(),
        },
        leader: None,
        cgroup: plan.cgroup.clone(),
    })
}

/// What pty-process's `open` does, less its open of the slave side, and with the size set
/// before the child can read it.
fn open_master(size: TermSize) -> rustix::io::Result<OwnedFd> {
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    rustix::termios::tcsetwinsize(
        &master,
        rustix::termios::Winsize {
            ws_row: size.rows,
            ws_col: size.cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        },
    )?;
    let flags = rustix::fs::fcntl_getfl(&master)?;
    rustix::fs::fcntl_setfl(&master, flags | OFlags::NONBLOCK)?;
    Ok(master)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::io::Read;

    /// A plan to run `program` with `args` in `/`, with the test process's environment.
    pub(in crate::providers) fn plan(program: &str, args: &[&str]) -> Plan {
        Plan {
            program: program.into(),
            args: args.iter().map(Into::into).collect(),
            cwd: "/".into(),
            env: Vec::new(),
            withheld: Vec::new(),
            cgroup: None,
        }
    }

    /// Reads the master until `want` shows up or the child's side closes (EIO).
    pub(in crate::providers) fn read_until(master: OwnedFd, want: &str) -> String {
        let flags = rustix::fs::fcntl_getfl(&master).expect("flags");
        rustix::fs::fcntl_setfl(&master, flags - OFlags::NONBLOCK).expect("blocking");
        let mut file = std::fs::File::from(master);
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains(want) {
            match file.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&seen).into_owned()
    }

    #[test]
    fn the_child_runs_on_a_terminal_of_the_size_asked_for() {
        let size = TermSize { cols: 91, rows: 17 };
        let launched = launch(&plan("sh", &["-c", "stty size; tty"]), size).expect("launch");
        let flags = rustix::fs::fcntl_getfl(&launched.master).expect("flags");
        assert!(
            flags.contains(OFlags::NONBLOCK),
            "the harness reads it async"
        );
        let out = read_until(launched.master, "/dev/pts/");
        assert!(out.contains("17 91"), "{out:?}");
    }

    #[test]
    fn a_program_that_does_not_exist_is_an_error_and_no_child() {
        let err = launch(&plan("/no/such/program", &[]), TermSize::DEFAULT).expect_err("no such");
        assert!(matches!(err, ProviderError::Spawn(_)), "{err:?}");
    }
}
