//! The machine's limits a local start can run into, named for the client.
//!
//! A spawn past one of them is not the daemon's fault, and a script driving a fleet must be
//! able to tell "this host is full, back off" from a bug. So such a refusal answers
//! `host_unavailable` with `data.problem` naming the limit, where it used to be `internal`.
//! Only the steps whose errno says which limit it was are named: opening the PTY, starting
//! the process, and taking the new PTY into the daemon's descriptor table. A file write's
//! `ENOSPC` is a full disk, not a PTY limit, so the record files are not looked at here.

/// A limit of this machine, or of the daemon's process, that a local start ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostLimit {
    /// No PTY left: `kernel.pty.max`, or a container's devpts instance.
    Ptys,
    /// The daemon's open-file limit (`RLIMIT_NOFILE`), or the system's.
    OpenFiles,
    /// No process could be made: `RLIMIT_NPROC`, `kernel.pid_max` or `kernel.threads-max`.
    Processes,
    /// The kernel could not allocate what the start needed.
    Memory,
}

impl HostLimit {
    /// The limit behind an error opening a PTY's master side, if it names one.
    pub fn opening_a_pty(e: &std::io::Error) -> Option<HostLimit> {
        match e.raw_os_error()? {
            // devpts refuses a PTY past its maximum with ENOSPC. `atc-proof soak --grow` saw
            // EAGAIN from /dev/ptmx at 4,095 of `kernel.pty.max` 4,096, and opening a PTY
            // allocates no process, so there EAGAIN is the PTY limit too.
            libc::ENOSPC | libc::EAGAIN => Some(HostLimit::Ptys),
            libc::EMFILE | libc::ENFILE => Some(HostLimit::OpenFiles),
            libc::ENOMEM => Some(HostLimit::Memory),
            _ => None,
        }
    }

    /// The limit behind an error opening any other descriptor (a child's pidfd), if it
    /// names one.
    pub fn opening_a_descriptor(e: &std::io::Error) -> Option<HostLimit> {
        match e.raw_os_error()? {
            libc::EMFILE | libc::ENFILE => Some(HostLimit::OpenFiles),
            _ => None,
        }
    }

    /// The limit behind `posix_spawn`'s refusal, if it names one. Its other errors are the
    /// exec's (a missing or non-executable program), which name none.
    pub fn starting_a_process(e: &std::io::Error) -> Option<HostLimit> {
        match e.raw_os_error()? {
            libc::EAGAIN => Some(HostLimit::Processes),
            libc::ENOMEM => Some(HostLimit::Memory),
            libc::EMFILE | libc::ENFILE => Some(HostLimit::OpenFiles),
            _ => None,
        }
    }

    /// The error's `data.problem` on the wire.
    pub fn problem(self) -> &'static str {
        match self {
            HostLimit::Ptys => "ptys_exhausted",
            HostLimit::OpenFiles => "open_files_exhausted",
            HostLimit::Processes => "processes_exhausted",
            HostLimit::Memory => "memory_exhausted",
        }
    }
}

impl std::fmt::Display for HostLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HostLimit::Ptys => {
                "no PTY is left on this machine; end sessions or raise kernel.pty.max"
            }
            HostLimit::OpenFiles => {
                "the daemon is at its open-file limit (two a session); end sessions or raise \
                 it (LimitNOFILE= in the unit)"
            }
            HostLimit::Processes => {
                "no process can be started; end sessions or raise the process limit \
                 (LimitNPROC=, kernel.pid_max, kernel.threads-max)"
            }
            HostLimit::Memory => "the machine is out of memory",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each step's errno, and the limit it names there (`None`: not a limit).
    #[test]
    fn each_step_names_only_the_limits_its_errno_means() {
        use HostLimit::*;
        type Step = fn(&std::io::Error) -> Option<HostLimit>;
        let pty: Step = HostLimit::opening_a_pty;
        let fd: Step = HostLimit::opening_a_descriptor;
        let start: Step = HostLimit::starting_a_process;
        let cases = [
            (pty, libc::ENOSPC, Some(Ptys)),
            (pty, libc::EAGAIN, Some(Ptys)),
            (pty, libc::EMFILE, Some(OpenFiles)),
            (pty, libc::ENOMEM, Some(Memory)),
            (pty, libc::EIO, None),
            (fd, libc::ENFILE, Some(OpenFiles)),
            (fd, libc::ENOSPC, None),
            (start, libc::EAGAIN, Some(Processes)),
            (start, libc::ENOMEM, Some(Memory)),
            (start, libc::EMFILE, Some(OpenFiles)),
            // The exec's own failures, and a PTY's word from a start, name no limit.
            (start, libc::ENOENT, None),
            (start, libc::EACCES, None),
            (start, libc::ENOSPC, None),
        ];
        for (i, (named, errno, want)) in cases.into_iter().enumerate() {
            let e = std::io::Error::from_raw_os_error(errno);
            assert_eq!(named(&e), want, "case {i}: {e}");
        }
        let no_errno = std::io::Error::other("no errno");
        assert_eq!(pty(&no_errno), None);
    }

    #[test]
    fn each_limit_has_its_own_problem_word() {
        let all = [
            HostLimit::Ptys,
            HostLimit::OpenFiles,
            HostLimit::Processes,
            HostLimit::Memory,
        ];
        let words: std::collections::HashSet<_> = all.iter().map(|l| l.problem()).collect();
        assert_eq!(words.len(), all.len());
    }
}
