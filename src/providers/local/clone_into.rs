//! Starting a process on a terminal directly inside a cgroup v2, for sessions with cgroups on
//! a unified hierarchy.
//!
//! cgroup v2 places whole processes, never single threads, so the trick `pty_spawn` uses on
//! v1 (the starting thread joins the session's cgroup for the spawn) is not open here, and
//! `posix_spawn` cannot name a cgroup in glibc before 2.41. The kernel's own way is
//! `clone3(CLONE_INTO_CGROUP)`: the child is created in the cgroup. This is a fork (the child
//! gets a copy-on-write copy of the daemon's address space, which `posix_spawn`'s vfork
//! avoids), so it costs more with a large daemon; it is only used where v1 is not there.
//!
//! The child does what `posix_spawn` did for `pty_spawn`, in the same order, with nothing but
//! system calls (the daemon has threads, so a forked child may not allocate or take a lock):
//! a new session, the terminal opened onto 0, 1 and 2 (which makes it the controlling one),
//! the working directory, every other descriptor closed, signals back to their defaults, and
//! the exec. An exec that fails sends its errno back over a close-on-exec pipe.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::process::Pid;

/// `clone3`'s argument block (`struct clone_args`, `CLONE_ARGS_SIZE_VER2`).
#[repr(C, align(8))]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// Not in the libc crate yet (Linux 5.7).
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// What the child needs, made before the clone so the child only reads it.
pub struct Prepared<'a> {
    /// The program, resolved to a path (the child cannot search `PATH`: that allocates).
    pub path: &'a CString,
    /// `argv`, null-terminated.
    pub argv: &'a [*mut libc::c_char],
    /// `envp`, null-terminated.
    pub envp: &'a [*mut libc::c_char],
    /// The terminal's path.
    pub tty: &'a std::ffi::CStr,
    /// The working directory.
    pub cwd: &'a CString,
}

/// Starts `p` in the cgroup whose directory is `cgroup`; the child's pid and pidfd.
pub fn spawn(p: &Prepared<'_>, cgroup: &Path) -> std::io::Result<(Pid, OwnedFd)> {
    let dir = rustix::fs::open(
        cgroup,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let (report_read, report_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let mut pidfd: libc::c_int = -1;
    let mut args = CloneArgs {
        flags: CLONE_INTO_CGROUP | libc::CLONE_PIDFD as u64,
        pidfd: std::ptr::addr_of_mut!(pidfd) as u64,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: dir.as_raw_fd() as u64,
        ..CloneArgs::default()
    };
    // SAFETY: a fork-style clone3 (no CLONE_VM, no stack given): the child runs on a copy of
    // this thread's stack and address space, and calls only async-signal-safe system calls
    // on data prepared above before it execs or exits.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            std::ptr::addr_of_mut!(args),
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: in the child; see `child`.
        unsafe { child(p, report_write.as_raw_fd()) }
    }
    drop(report_write);
    // SAFETY: the kernel wrote a new descriptor into `pidfd` for the child (CLONE_PIDFD).
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    let pid = Pid::from_raw(pid as i32).ok_or_else(|| std::io::Error::other("clone3: no pid"))?;
    let mut errno = [0u8; 4];
    let read = loop {
        match rustix::io::read(&report_read, &mut errno) {
            Err(rustix::io::Errno::INTR) => continue,
            other => break other,
        }
    };
    match read {
        // The pipe closed on the exec: the child runs its program.
        Ok(0) => Ok((pid, pidfd)),
        Ok(_) => {
            // It failed before or at its exec and exited: reap it.
            let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
            Err(std::io::Error::from_raw_os_error(i32::from_ne_bytes(errno)))
        }
        Err(e) => {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
            Err(e.into())
        }
    }
}

/// The child's side: never returns.
///
/// # Safety
/// Only in the child of a fork-style clone, with `p` and `report` as the parent left them.
unsafe fn child(p: &Prepared<'_>, report: libc::c_int) -> ! {
    if libc::setsid() < 0 {
        fail(report);
    }
    // Without O_NOCTTY: a session leader with no terminal takes the first it opens.
    let tty = libc::open(p.tty.as_ptr(), libc::O_RDWR);
    if tty < 0 {
        fail(report);
    }
    for target in 0..3 {
        if tty != target && libc::dup2(tty, target) < 0 {
            fail(report);
        }
    }
    if tty > 2 {
        libc::close(tty);
    }
    if libc::chdir(p.cwd.as_ptr()) < 0 {
        fail(report);
    }
    // Everything above 2 but the report pipe, which closes on the exec.
    if report > 3 {
        libc::syscall(libc::SYS_close_range, 3, report - 1, 0);
    }
    libc::syscall(libc::SYS_close_range, report + 1, libc::c_uint::MAX, 0);
    let mut empty: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut empty);
    libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    // Every signal Linux has (real-time ones included) back to its default, by the system
    // call itself: glibc's `signal` refuses the two it keeps for itself. A zeroed kernel
    // sigaction is SIG_DFL with no flags and an empty mask, whatever the architecture's
    // field order; SIGKILL and SIGSTOP refuse and stay as they are.
    let default = [0u64; 4];
    for signal in 1..=64 {
        libc::syscall(
            libc::SYS_rt_sigaction,
            signal,
            default.as_ptr(),
            std::ptr::null_mut::<u64>(),
            8,
        );
    }
    libc::execve(
        p.path.as_ptr(),
        p.argv.as_ptr().cast(),
        p.envp.as_ptr().cast(),
    );
    fail(report)
}

/// Sends the child's errno to the parent and exits.
///
/// # Safety
/// Only in the child, with `report` the write end of the report pipe.
unsafe fn fail(report: libc::c_int) -> ! {
    let errno = *libc::__errno_location();
    let bytes = errno.to_ne_bytes();
    libc::write(report, bytes.as_ptr().cast(), bytes.len());
    libc::_exit(127)
}

/// `program` as a path to exec: itself when it names a directory, else the first executable
/// of that name on the daemon's `PATH` (what `posix_spawnp` searches).
pub fn resolve(program: &Path) -> Option<PathBuf> {
    if program.as_os_str().as_bytes().contains(&b'/') {
        return Some(program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| rustix::fs::access(candidate, rustix::fs::Access::EXEC_OK).is_ok())
}
