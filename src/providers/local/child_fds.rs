//! Which file descriptors a child process may get: its standard streams (the PTY, or the
//! pipes of a command) and nothing else.
//!
//! Everything Rust's std, tokio and sqlx open is close-on-exec already. What is not: the fds
//! the daemon inherited from whoever started it (a shell, a supervisor, a test), and any a
//! library opens without `O_CLOEXEC` (pty-process opens the PTY master plain and sets the flag
//! in a second call). So [`close_on_exec_beyond_stdio`] marks every fd above 2 close-on-exec,
//! once when the daemon starts and again right before each command it runs. Marking, not
//! closing: the daemon still uses those fds; only an `exec` drops them. Doing it in the parent
//! is what lets the `posix_spawn` path of commands stay free of `pre_exec` hooks (which would
//! force a full fork); the standard streams a child does get are `dup2`ed onto 0-2, which
//! clears the flag on the copies. An fd another thread opens without the flag between the
//! mark and the exec still leaks; nothing in the daemon does that today. Local-pty children
//! need none of this: `pty_spawn` closes everything above 2 in the child before the exec.

use std::os::fd::{BorrowedFd, RawFd};

/// Marks every fd above 2 close-on-exec.
pub fn close_on_exec_beyond_stdio() -> std::io::Result<()> {
    // One syscall where the kernel has it (Linux 5.11+); the glibc wrapper is newer than the
    // syscall, so it is called directly.
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets a flag on open fds; it closes
    // nothing and touches no memory.
    let marked = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if marked == 0 {
        return Ok(());
    }
    // ENOSYS (an older kernel) or EINVAL (one without the flag): walk the fd table instead.
    let fds: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: the fd is borrowed only for the two fcntl calls below; one that closed since
        // the listing (the directory's own fd, or another thread's) fails them with EBADF.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let Ok(flags) = rustix::io::fcntl_getfd(borrowed) else {
            continue;
        };
        if !flags.contains(rustix::io::FdFlags::CLOEXEC) {
            // EBADF only: the fd closed since it was listed, so there is nothing to leak.
            let _ = rustix::io::fcntl_setfd(borrowed, flags | rustix::io::FdFlags::CLOEXEC);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test, not two: it is the only one in this binary that opens fds without
    /// close-on-exec, so no other test's child can see them, and its own steps do not race.
    #[actix_rt::test]
    async fn fds_without_cloexec_are_marked_and_reach_no_command() {
        let file = std::fs::File::open("/dev/null").unwrap();
        // A plain dup has no close-on-exec flag, like an inherited fd.
        let plain = rustix::io::dup(&file).unwrap();
        let before = rustix::io::fcntl_getfd(&plain).unwrap();
        assert!(!before.contains(rustix::io::FdFlags::CLOEXEC));
        close_on_exec_beyond_stdio().unwrap();
        let after = rustix::io::fcntl_getfd(&plain).unwrap();
        assert!(after.contains(rustix::io::FdFlags::CLOEXEC));

        // `runCommand` is not reachable over the API yet, so its spawn path is checked here.
        let plain_again = rustix::io::dup(&file).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let out = super::super::command::run(
            crate::providers::RunRequest {
                // The shell lists its own fds; `ls` itself opens the directory it reads.
                argv: vec!["sh".into(), "-c".into(), "ls /proc/$$/fd".into()],
                cwd: dir.path().to_path_buf(),
                stdin: bytes::Bytes::new(),
                host_key: None,
            },
            Vec::new(),
        )
        .await
        .unwrap();
        drop((plain, plain_again));
        let text = String::from_utf8_lossy(&out.stdout);
        let fds: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(fds, ["0", "1", "2"], "{text}");
    }
}
