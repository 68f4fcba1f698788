//! `providers::local::pty_spawn` on real PTYs: the child leads its own session with the PTY as its
//! controlling terminal and standard streams, gets its cwd and environment and no other fd,
//! and its exit (a code or a signal) is reported; a missing program is a clear error.
//!
//! These tests live in their own binary because one of them opens a descriptor without
//! close-on-exec on purpose, which must not leak into another test's children.

use std::ffi::{CString, OsString};
use std::io::Read;
use std::os::fd::OwnedFd;
use std::time::Duration;

use atc::providers::local::pty_spawn::{spawn, ExitStatus, Plan, SpawnError};
use rustix::process::{Pid, Signal};

/// Bounds a failure only; a passing test is done long before.
const WITHIN: Duration = Duration::from_secs(20);

/// A PTY opened here, so the test holds only the master and the child the only slave.
fn open_pty() -> (OwnedFd, CString) {
    use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let tty = ptsname(&master, Vec::new()).unwrap();
    (master, tty)
}

fn plan(program: &str, args: &[&str], cwd: &std::path::Path) -> Plan {
    Plan {
        program: program.into(),
        args: args.iter().map(OsString::from).collect(),
        cwd: cwd.to_path_buf(),
        env: Vec::new(),
        withheld: Vec::new(),
        cgroup: None,
    }
}

/// Everything the child writes until every slave fd is closed (EIO on the master).
async fn read_to_end(master: OwnedFd) -> String {
    let read = tokio::task::spawn_blocking(move || {
        let mut file = std::fs::File::from(master);
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                // EIO: the last slave fd closed, the normal end of a PTY's output.
                Err(e) if e.raw_os_error() == Some(libc::EIO) => break,
                Err(e) => panic!("reading the pty: {e}"),
            }
        }
        String::from_utf8_lossy(&out).replace('\r', "")
    });
    tokio::time::timeout(WITHIN, read)
        .await
        .expect("the child's output did not end")
        .unwrap()
}

async fn wait(child: &mut atc::providers::local::pty_spawn::Child) -> ExitStatus {
    tokio::time::timeout(WITHIN, child.wait())
        .await
        .expect("the child was not reaped")
        .unwrap()
}

/// Field 7 of `/proc/<pid>/stat`: the controlling terminal's device number.
fn tty_nr(pid: Pid) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.as_raw_nonzero())).unwrap();
    // The command name (field 2) is in parentheses and may hold spaces; count after it.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split(' ').nth(4).unwrap().parse().unwrap()
}

#[tokio::test]
async fn the_child_leads_its_own_session_with_the_pty_as_controlling_terminal() {
    let (master, tty) = open_pty();
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn(&plan("cat", &[], dir.path()), &tty).unwrap();
    let pid = child.pid();
    assert_eq!(rustix::process::getsid(Some(pid)).unwrap(), pid);
    assert_eq!(rustix::process::getpgid(Some(pid)).unwrap(), pid);
    let rdev = std::fs::metadata(tty.to_str().unwrap()).unwrap();
    assert_eq!(
        tty_nr(pid),
        std::os::unix::fs::MetadataExt::rdev(&rdev),
        "the controlling terminal is the pty"
    );
    rustix::process::kill_process(pid, Signal::KILL).unwrap();
    assert_eq!(wait(&mut child).await, ExitStatus::Signaled(libc::SIGKILL));
    // A second wait answers the same, without reaping anything else.
    assert_eq!(wait(&mut child).await, ExitStatus::Signaled(libc::SIGKILL));
    drop(master);
}

#[tokio::test]
async fn the_child_gets_its_terminal_cwd_and_environment_and_no_other_fd() {
    let (master, tty) = open_pty();
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    // A plain dup has no close-on-exec flag, like an fd the daemon inherited or a library
    // opened carelessly; the child must not get it.
    let null = std::fs::File::open("/dev/null").unwrap();
    let plain = rustix::io::dup(&null).unwrap();
    assert!(!rustix::io::fcntl_getfd(&plain)
        .unwrap()
        .contains(rustix::io::FdFlags::CLOEXEC));
    let script = r#"echo "out"; echo "err" >&2; echo "ctty" > /dev/tty; pwd; echo "var=$ATC_TEST_VAR"; echo "fds:"; ls -1 /proc/$$/fd; exit 7"#;
    let mut p = plan("sh", &["-c", script], &cwd);
    p.env.push(("ATC_TEST_VAR".into(), "first".into()));
    p.env.push(("ATC_TEST_VAR".into(), "hello world".into()));
    let mut child = spawn(&p, &tty).unwrap();
    let out = read_to_end(master).await;
    assert_eq!(wait(&mut child).await, ExitStatus::Exited(7), "{out}");
    drop(plain);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "out",
            "err",
            "ctty",
            cwd.to_str().unwrap(),
            "var=hello world",
            // The shell's own table while it waits for `ls`.
            "fds:",
            "0",
            "1",
            "2",
        ],
        "{out}"
    );
}

#[tokio::test]
async fn a_missing_program_is_an_error_naming_it() {
    let (_master, tty) = open_pty();
    let dir = tempfile::tempdir().unwrap();
    for program in ["/nonexistent/atc-no-such-program", "atc-no-such-program"] {
        match spawn(&plan(program, &[], dir.path()), &tty) {
            Err(e @ SpawnError::Exec { .. }) => {
                let SpawnError::Exec { source, .. } = &e else {
                    unreachable!()
                };
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound, "{e}");
                assert!(e.to_string().contains(program), "{e}");
            }
            other => panic!("{program}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_missing_cwd_is_an_error_and_a_nul_byte_is_refused() {
    let (_master, tty) = open_pty();
    let missing = std::path::Path::new("/nonexistent/atc-no-such-dir");
    match spawn(&plan("cat", &[], missing), &tty) {
        Err(SpawnError::Exec { source, cwd, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            assert_eq!(cwd, missing.display().to_string());
        }
        other => panic!("{other:?}"),
    }
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        spawn(&plan("cat", &["a\0b"], dir.path()), &tty),
        Err(SpawnError::Nul("argument"))
    ));
}

/// A daemon started under `nohup`, or as a script's background job, has SIGHUP or SIGINT
/// ignored, and an ignored signal survives an exec: its sessions would not hear Ctrl-C or a
/// hangup. The child starts with every signal at its default whatever the daemon ignores.
#[tokio::test]
async fn signals_the_daemon_ignores_reach_the_child_at_their_default() {
    // SAFETY: setting a disposition to SIG_IGN installs no handler; restored below.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
    }
    let (master, tty) = open_pty();
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn(&plan("cat", &["/proc/self/status"], dir.path()), &tty).unwrap();
    // SAFETY: as above, back to the default.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        libc::signal(libc::SIGHUP, libc::SIG_DFL);
    }
    let out = read_to_end(master).await;
    assert_eq!(wait(&mut child).await, ExitStatus::Exited(0), "{out}");
    let ignored = out
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .expect("a SigIgn line");
    // Bit n-1 is signal n. Only the standard signals (1-31) are checked: 32 and 33 are
    // glibc's own, which no program may change.
    assert_eq!(ignored & 0x7fff_ffff, 0, "ignored: {ignored:#x}\n{out}");
}

/// On a cgroup v2 machine the child is cloned straight into its session's cgroup
/// (`clone_into`), and set up exactly as `posix_spawn` sets it up. This machine's unified
/// hierarchy has no controllers, but places processes all the same, which is what is tried.
#[tokio::test]
async fn on_cgroup_v2_the_child_starts_in_its_cgroup_set_up_the_same() {
    use atc::providers::local::cgroup::hierarchy::Controller;
    use atc::providers::local::cgroup::session_group::{Place, SessionGroup, Version};
    let unified = std::path::Path::new("/sys/fs/cgroup/unified");
    let name = format!("atc-test-{}", uuid::Uuid::new_v4());
    let dir = unified.join(&name);
    std::fs::create_dir(&dir).expect("this machine's cgroup v2 mount takes a child cgroup");
    let group = SessionGroup::new(
        Version::V2,
        vec![Place {
            controllers: Controller::ALL.to_vec(),
            dir: dir.clone(),
            home: unified.to_path_buf(),
        }],
    );
    let (master, tty) = open_pty();
    let cwd = tempfile::tempdir().unwrap();
    let cwd = cwd.path().canonicalize().unwrap();
    // SAFETY: as in the test above; restored once the child started.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    let script = r#"echo "ctty" > /dev/tty; pwd; echo "var=$ATC_TEST_VAR"; grep '^0::' /proc/self/cgroup; grep SigIgn /proc/self/status; echo "fds:"; ls -1 /proc/$$/fd; exit 5"#;
    let mut p = plan("sh", &["-c", script], &cwd);
    p.env.push(("ATC_TEST_VAR".into(), "v2".into()));
    p.cgroup = Some(group.clone());
    let mut child = spawn(&p, &tty).unwrap();
    unsafe { libc::signal(libc::SIGINT, libc::SIG_DFL) };
    let pid = child.pid();
    assert_eq!(rustix::process::getsid(Some(pid)).unwrap(), pid);
    let out = read_to_end(master).await;
    assert_eq!(wait(&mut child).await, ExitStatus::Exited(5), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "ctty",
            cwd.to_str().unwrap(),
            "var=v2",
            &format!("0::/{name}"),
            "SigIgn:\t0000000000000000",
            "fds:",
            "0",
            "1",
            "2",
        ],
        "{out}"
    );
    // A program that is not there fails the start, as with posix_spawn.
    let (_master, tty) = open_pty();
    let mut missing = plan("atc-no-such-program", &[], &cwd);
    missing.cgroup = Some(group);
    match spawn(&missing, &tty) {
        Err(SpawnError::Exec { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound)
        }
        other => panic!("{other:?}"),
    }
    std::fs::remove_dir(&dir).unwrap();
}
