//! Starting a process on a terminal without forking the daemon, and reaping it.
//!
//! A child on a PTY must be a session leader whose controlling terminal is that PTY. The usual
//! way (a `pre_exec` hook calling `setsid` and `TIOCSCTTY`, as pty-process does) forces a full
//! `fork`, and with a thousand sessions the daemon's memory made every fork cost milliseconds
//! (measured: page-table copy and teardown were ~70% of the daemon's CPU during a spawn storm).
//! So [`spawn`] uses glibc's `posix_spawn` (a vfork-style clone that shares the daemon's memory
//! until the exec) with:
//!
//! - `POSIX_SPAWN_SETSID`, which glibc applies before the file actions, so the child is a new
//!   session leader without a controlling terminal when it opens the terminal;
//! - an open of the terminal's path onto fd 0 without `O_NOCTTY`, which makes that terminal the
//!   new session's controlling terminal (a session leader with none acquires the first
//!   terminal it opens that no other session holds), and dups of it onto 1 and 2;
//! - a `chdir` to the working directory and a `closefrom(3)`, so no descriptor of the daemon's
//!   reaches the child whether or not it was marked close-on-exec;
//! - an empty signal mask and every signal back to its default (the runtime ignores
//!   `SIGPIPE`, whoever started the daemon may have ignored others, and an ignored signal
//!   stays ignored across an exec).
//!
//! glibc reports a failed exec (a missing program, a bad cwd) as `posix_spawn`'s result, so a
//! spawn that returns `Ok` has a child running the program. Needs glibc 2.34
//! (`addclosefrom_np`) and Linux 5.4 (`waitid` on a pidfd).
//!
//! Reaping: tokio's `Child` cannot adopt a pid, so [`Child`] holds a pidfd, which becomes
//! readable once the process has exited, and waits on it through the runtime's reactor; the
//! `waitid` that follows never blocks. Nothing else in the daemon reaps with `waitpid(-1)`,
//! so the child stays a zombie (its pid reserved) until [`Child::wait`] collects it.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use rustix::process::{Pid, WaitId, WaitIdOptions};

/// What to start: a program, its arguments, its directory, and the variables it gets on top
/// of the daemon's environment.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The program; searched on the daemon's `PATH` when it has no `/`.
    pub program: PathBuf,
    /// Arguments after the program (`argv[0]` is the program as given).
    pub args: Vec<OsString>,
    /// Working directory.
    pub cwd: PathBuf,
    /// Variables set (or replaced) on top of the daemon's environment; later entries win.
    pub env: Vec<(OsString, OsString)>,
    /// Variables of the daemon's environment the child must not get (those holding
    /// credentials, such as an imp target's `tokenEnv`); `env` may still set them.
    pub withheld: Vec<OsString>,
    /// The cgroup the child starts in (made already), if the daemon has cgroups.
    pub cgroup: Option<super::cgroup::session_group::SessionGroup>,
}

/// Why a process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// A program path, argument, variable or directory holds a NUL byte, which no C string
    /// can carry.
    #[error("the {0} contains a NUL byte")]
    Nul(&'static str),
    /// `posix_spawn` refused or the exec failed (a missing program or directory, a program
    /// that is not executable, no processes left).
    #[error("could not start {program} in {cwd}: {source}")]
    Exec {
        /// The program as given.
        program: String,
        /// The working directory.
        cwd: String,
        /// What the kernel said.
        source: std::io::Error,
    },
    /// The starting thread could not join the session's cgroup, so nothing was started.
    #[error("could not start the process in its cgroup: {0}")]
    Cgroup(#[from] super::cgroup::session_group::CgroupError),
    /// The child started but no pidfd could be opened for it, so it could not be waited for;
    /// it was killed and reaped.
    #[error("could not watch the started process: {0}")]
    Watch(std::io::Error),
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// It exited with this code.
    Exited(i32),
    /// This signal ended it.
    Signaled(i32),
}

impl ExitStatus {
    /// The exit code, if it exited.
    pub fn code(self) -> Option<i32> {
        match self {
            ExitStatus::Exited(c) => Some(c),
            ExitStatus::Signaled(_) => None,
        }
    }

    /// The signal that ended it, if one did.
    pub fn signal(self) -> Option<i32> {
        match self {
            ExitStatus::Exited(_) => None,
            ExitStatus::Signaled(s) => Some(s),
        }
    }
}

/// A started process. Dropping it without [`Child::wait`] leaves a zombie until the daemon
/// exits; the harness always waits.
#[derive(Debug)]
pub struct Child {
    pid: Pid,
    pidfd: Option<OwnedFd>,
    status: Option<ExitStatus>,
}

impl Child {
    /// The process id (also its session and process-group id).
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// A child started elsewhere (a launcher thread) whose pidfd was handed over.
    pub(super) fn adopt(pid: Pid, pidfd: OwnedFd) -> Child {
        Child {
            pid,
            pidfd: Some(pidfd),
            status: None,
        }
    }

    /// The pid and pidfd of a child not yet waited for, to hand over; `None` once it was
    /// waited for (its pidfd is spent).
    pub(super) fn into_parts(self) -> Option<(Pid, OwnedFd)> {
        Some((self.pid, self.pidfd?))
    }

    /// Waits for the process to end and reaps it. Needs a tokio runtime with I/O enabled (the
    /// actix one has it). Once it has answered, it answers the same again.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let Some(pidfd) = self.pidfd.take() else {
            return Err(std::io::Error::other("the process was already reaped"));
        };
        // SAFETY: the registration's requirement is that the fd stays open and the same for
        // the AsyncFd's life; it owns the OwnedFd, which nothing else can close.
        let pidfd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE)
        }
        .map_err(|e| e.into_parts().1)?;
        loop {
            let mut ready = pidfd.readable().await?;
            match rustix::process::waitid(
                WaitId::PidFd(pidfd.get_ref().as_fd()),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
            ) {
                Ok(Some(status)) => {
                    let status = exit_status(status)?;
                    self.status = Some(status);
                    return Ok(status);
                }
                // Readable but nothing to collect: a spurious wake-up.
                Ok(None) => ready.clear_ready(),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

fn exit_status(status: rustix::process::WaitIdStatus) -> std::io::Result<ExitStatus> {
    if let Some(code) = status.exit_status() {
        return Ok(ExitStatus::Exited(code));
    }
    if let Some(signal) = status.terminating_signal() {
        return Ok(ExitStatus::Signaled(signal));
    }
    // Only WEXITED was asked for, so a stop or continue cannot be reported.
    Err(std::io::Error::other(
        "waitid reported neither an exit nor a signal",
    ))
}

/// Starts `plan` as a session leader on the terminal at `tty` (a PTY's slave path, e.g. from
/// `ptsname`), with the terminal as its stdin, stdout, stderr and controlling terminal.
pub fn spawn(plan: &Plan, tty: &CStr) -> Result<Child, SpawnError> {
    let program = c_string(plan.program.as_os_str(), "program path")?;
    let cwd = c_string(plan.cwd.as_os_str(), "working directory")?;
    let args = std::iter::once(Ok(program.clone()))
        .chain(plan.args.iter().map(|a| c_string(a, "argument")))
        .collect::<Result<Vec<_>, _>>()?;
    let inherited = std::env::vars_os().filter(|(k, _)| !plan.withheld.contains(k));
    let env = environment(inherited, &plan.env)
        .iter()
        .map(|entry| c_string(entry, "environment"))
        .collect::<Result<Vec<_>, _>>()?;
    let argv = null_terminated(&args);
    let envp = null_terminated(&env);
    let exec_error = |source: std::io::Error| SpawnError::Exec {
        program: plan.program.display().to_string(),
        cwd: plan.cwd.display().to_string(),
        source,
    };

    if let Some(group) = plan.cgroup.as_ref() {
        if group.version() == super::cgroup::session_group::Version::V2 {
            return spawn_into_v2(plan, tty, group, &argv, &envp, &cwd).map_err(exec_error);
        }
    }

    let mut attr = MaybeUninit::<libc::posix_spawnattr_t>::uninit();
    // SAFETY: init writes a valid attribute object into the storage it is given.
    errno(unsafe { libc::posix_spawnattr_init(attr.as_mut_ptr()) }).map_err(exec_error)?;
    let attr = SpawnAttr(&mut attr);
    let mut actions = MaybeUninit::<libc::posix_spawn_file_actions_t>::uninit();
    // SAFETY: as above, for the file-actions object.
    errno(unsafe { libc::posix_spawn_file_actions_init(actions.as_mut_ptr()) })
        .map_err(exec_error)?;
    let actions = FileActions(&mut actions);

    // SAFETY (this block): every pointer handed over is either an initialised object owned by a
    // guard above, which outlives the calls, or a C string that outlives `posix_spawnp`
    // (glibc copies the paths of the open and chdir actions when they are added). The fds
    // named (0, 1, 2, 3) are the child's, not ours: no action touches the daemon's table.
    let pid = unsafe {
        let mut empty = MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(empty.as_mut_ptr());
        let empty = empty.assume_init();
        // Every signal back to its default, as tmux does for its panes: an ignored signal
        // stays ignored across an exec, and a daemon started under `nohup`, or as a
        // background job of a script (SIGINT and SIGQUIT ignored), would hand that on to
        // every session, whose Ctrl-C would then do nothing. glibc skips the two signals
        // that cannot be changed (SIGKILL, SIGSTOP).
        let mut default = MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigfillset(default.as_mut_ptr());
        let default = default.assume_init();
        let flags = libc::POSIX_SPAWN_SETSID
            | libc::POSIX_SPAWN_SETSIGMASK as libc::c_short
            | libc::POSIX_SPAWN_SETSIGDEF as libc::c_short;
        errno(libc::posix_spawnattr_setflags(attr.ptr(), flags)).map_err(exec_error)?;
        errno(libc::posix_spawnattr_setsigmask(attr.ptr(), &empty)).map_err(exec_error)?;
        errno(libc::posix_spawnattr_setsigdefault(attr.ptr(), &default)).map_err(exec_error)?;
        errno(libc::posix_spawn_file_actions_addchdir_np(
            actions.ptr(),
            cwd.as_ptr(),
        ))
        .map_err(exec_error)?;
        // Without O_NOCTTY: this open is what gives the new session its controlling terminal.
        errno(libc::posix_spawn_file_actions_addopen(
            actions.ptr(),
            0,
            tty.as_ptr(),
            libc::O_RDWR,
            0,
        ))
        .map_err(exec_error)?;
        errno(libc::posix_spawn_file_actions_adddup2(actions.ptr(), 0, 1)).map_err(exec_error)?;
        errno(libc::posix_spawn_file_actions_adddup2(actions.ptr(), 0, 2)).map_err(exec_error)?;
        errno(libc::posix_spawn_file_actions_addclosefrom_np(
            actions.ptr(),
            3,
        ))
        .map_err(exec_error)?;
        // The child starts where this thread is: inside the session's cgroup from its first
        // instruction (see `cgroup::session_group`). The guard brings the thread back.
        // Declared first, dropped last: the thread is home before the weight comes down.
        let _boost = plan.cgroup.as_ref().map(|g| g.boost_start());
        let _inside = match &plan.cgroup {
            Some(group) => Some(group.enter_thread()?),
            None => None,
        };
        let mut pid: libc::pid_t = 0;
        errno(libc::posix_spawnp(
            &mut pid,
            program.as_ptr(),
            actions.ptr(),
            attr.ptr(),
            argv.as_ptr(),
            envp.as_ptr(),
        ))
        .map_err(exec_error)?;
        pid
    };
    let pid = Pid::from_raw(pid)
        .ok_or_else(|| SpawnError::Watch(std::io::Error::other("posix_spawn returned no pid")))?;
    match rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) {
        Ok(pidfd) => Ok(Child {
            pid,
            pidfd: Some(pidfd),
            status: None,
        }),
        Err(e) => {
            // A child nobody can wait for would run unsupervised: end it and reap it now. Both
            // calls can only fail if it is gone already, which is what they are for.
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
            Err(SpawnError::Watch(e.into()))
        }
    }
}

/// [`spawn`] into a cgroup v2 (see [`super::clone_into`]).
fn spawn_into_v2(
    plan: &Plan,
    tty: &CStr,
    group: &super::cgroup::session_group::SessionGroup,
    argv: &[*mut libc::c_char],
    envp: &[*mut libc::c_char],
    cwd: &CString,
) -> std::io::Result<Child> {
    let not_found = || std::io::Error::from_raw_os_error(libc::ENOENT);
    let path = super::clone_into::resolve(&plan.program).ok_or_else(not_found)?;
    let path = CString::new(path.as_os_str().as_bytes()).map_err(|_| not_found())?;
    let dir = group
        .dir(super::cgroup::hierarchy::Controller::Pids)
        .ok_or_else(|| std::io::Error::other("a v2 session group without a directory"))?;
    let _boost = group.boost_start();
    let (pid, pidfd) = super::clone_into::spawn(
        &super::clone_into::Prepared {
            path: &path,
            argv,
            envp,
            tty,
            cwd,
        },
        dir,
    )?;
    Ok(Child {
        pid,
        pidfd: Some(pidfd),
        status: None,
    })
}

/// The child's environment, as `KEY=value` entries: `inherited` with `added` set on top
/// (later entries of `added` win), in a stable order.
fn environment(
    inherited: impl IntoIterator<Item = (OsString, OsString)>,
    added: &[(OsString, OsString)],
) -> Vec<OsString> {
    let mut vars: std::collections::BTreeMap<OsString, OsString> = inherited.into_iter().collect();
    for (k, v) in added {
        vars.insert(k.clone(), v.clone());
    }
    vars.into_iter()
        .map(|(k, v)| {
            let mut entry = k;
            entry.push("=");
            entry.push(v);
            entry
        })
        .collect()
}

fn c_string(s: &OsStr, what: &'static str) -> Result<CString, SpawnError> {
    CString::new(s.as_bytes()).map_err(|_| SpawnError::Nul(what))
}

/// The `char *const[]` shape `posix_spawn` takes; borrows `strings`, which must outlive it.
fn null_terminated(strings: &[CString]) -> Vec<*mut libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr().cast_mut())
        .chain(std::iter::once(std::ptr::null_mut()))
        .collect()
}

/// posix_spawn's functions answer an errno instead of setting it.
fn errno(rc: libc::c_int) -> std::io::Result<()> {
    match rc {
        0 => Ok(()),
        e => Err(std::io::Error::from_raw_os_error(e)),
    }
}

/// Destroys an initialised attribute object when the spawn is done with it.
struct SpawnAttr<'a>(&'a mut MaybeUninit<libc::posix_spawnattr_t>);

impl SpawnAttr<'_> {
    fn ptr(&self) -> *mut libc::posix_spawnattr_t {
        self.0.as_ptr().cast_mut()
    }
}

impl Drop for SpawnAttr<'_> {
    fn drop(&mut self) {
        // SAFETY: the guard is only built after a successful init, and destroyed once.
        unsafe { libc::posix_spawnattr_destroy(self.0.as_mut_ptr()) };
    }
}

/// Destroys an initialised file-actions object (and the copies of paths it holds).
struct FileActions<'a>(&'a mut MaybeUninit<libc::posix_spawn_file_actions_t>);

impl FileActions<'_> {
    fn ptr(&self) -> *mut libc::posix_spawn_file_actions_t {
        self.0.as_ptr().cast_mut()
    }
}

impl Drop for FileActions<'_> {
    fn drop(&mut self) {
        // SAFETY: the guard is only built after a successful init, and destroyed once.
        unsafe { libc::posix_spawn_file_actions_destroy(self.0.as_mut_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(s: &str) -> OsString {
        s.into()
    }

    #[test]
    fn the_environment_is_the_daemons_with_the_plans_on_top() {
        let env = environment(
            [(os("PATH"), os("/bin")), (os("TERM"), os("dumb"))],
            &[
                (os("TERM"), os("xterm-256color")),
                (os("ATC_SESSION_ID"), os("x")),
                (os("ATC_SESSION_ID"), os("y")),
            ],
        );
        assert_eq!(
            env,
            [
                os("ATC_SESSION_ID=y"),
                os("PATH=/bin"),
                os("TERM=xterm-256color")
            ]
        );
    }

    #[test]
    fn a_nul_byte_is_refused_by_name() {
        let err = c_string(OsStr::new("a\0b"), "argument").unwrap_err();
        assert_eq!(err.to_string(), "the argument contains a NUL byte");
    }

    #[test]
    fn exit_statuses_say_code_or_signal() {
        assert_eq!(ExitStatus::Exited(3).code(), Some(3));
        assert_eq!(ExitStatus::Exited(3).signal(), None);
        assert_eq!(ExitStatus::Signaled(9).code(), None);
        assert_eq!(ExitStatus::Signaled(9).signal(), Some(9));
    }
}
