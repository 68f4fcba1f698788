//! Ending what the last daemon left running when it was killed without a chance to stop.
//!
//! Local processes live in the daemon's PTYs: a graceful stop hangs each up and records its
//! exit, and a `kill -9` of the daemon closes the PTYs, which hangs them up too. A harness that
//! ignores SIGHUP survives that, its parent gone, and a restore would then start a second agent
//! beside it in the same directory. So a starting daemon, before it restores or serves
//! anything, reads the group leader each session's row recorded while its process ran
//! ([`GroupLeader`]) and ends that leader's whole session (its process group and any job
//! groups a shell made in it) with SIGKILL: the hangup was its chance to stop cleanly.
//!
//! Only a leader that still matches is acted on: same boot, same pid, same start time. A pid
//! that now names another process, or a machine booted since, is left alone. Each process is
//! signalled through a pidfd opened before its identity is checked again, so a pid freed and
//! reused in between is never signalled. What was ended is logged.

use std::os::fd::OwnedFd;
use std::time::Duration;

use atc_protocol::SessionId;
use rustix::process::{Pid, PidfdFlags, Signal};

use crate::providers::local::group_leader::{GroupLeader, LeaderNow};
use crate::providers::local::proc_stat::Stat;
use crate::store::FleetRow;

/// What was found of one session's recorded leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Survivor {
    /// Its processes were signalled: this many.
    Ended {
        /// The session.
        session: SessionId,
        /// Its leader's pid.
        pid: i32,
        /// Processes signalled, the leader among them.
        processes: usize,
    },
    /// Nothing of it runs any more.
    Gone,
    /// Its pid names another process now (or it is from another boot): left alone.
    Stranger,
}

/// Ends the processes the rows' sessions left running (see the module doc) and waits up to
/// `wait` for them to be gone. Logs each session it ended, and any process still there when
/// the wait ran out.
pub async fn end(rows: &[FleetRow], wait: Duration) -> Vec<Survivor> {
    let marked: Vec<(SessionId, GroupLeader)> = rows
        .iter()
        .filter_map(|r| Some((r.session_id, r.leader()?)))
        .collect();
    if marked.is_empty() {
        return Vec::new();
    }
    // `/proc` reads and signals: blocking work, off the runtime.
    let swept = tokio::task::spawn_blocking(move || {
        let mut pidfds = Vec::new();
        let found = marked
            .iter()
            .map(|(session, leader)| end_session(*session, leader, &mut pidfds))
            .collect::<Vec<_>>();
        (found, pidfds)
    })
    .await;
    let (found, pidfds) = match swept {
        Ok(swept) => swept,
        Err(e) => {
            tracing::error!(error = %e, "the sweep for processes a killed daemon left running failed");
            return Vec::new();
        }
    };
    for survivor in &found {
        if let Survivor::Ended {
            session,
            pid,
            processes,
        } = survivor
        {
            tracing::warn!(session = %session, pid, processes,
                "ended the processes the last daemon left running in this session (it was killed without a stop; they ignored the hangup)");
        }
    }
    let left = wait_gone(pidfds, wait).await;
    if left > 0 {
        tracing::error!(
            processes = left,
            "processes the last daemon left running are still there after SIGKILL"
        );
    }
    found
}

/// Signals every process of `leader`'s session, if the leader still matches; keeps a pidfd of
/// each signalled process in `pidfds` to wait on.
fn end_session(session: SessionId, leader: &GroupLeader, pidfds: &mut Vec<OwnedFd>) -> Survivor {
    let Some(pid) = Pid::from_raw(leader.pid) else {
        return Survivor::Stranger;
    };
    // Opened first, checked second: the pidfd names the process that had the pid when it was
    // opened, and a match after that proves it is the recorded one.
    let leader_fd = match rustix::process::pidfd_open(pid, PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::SRCH) => return Survivor::Gone,
        Err(e) => {
            tracing::warn!(session = %session, pid = leader.pid, error = %e,
                "could not look at the process the last daemon left running");
            return Survivor::Stranger;
        }
    };
    match leader.now() {
        LeaderNow::Same => {}
        LeaderNow::Gone => return Survivor::Gone,
        LeaderNow::Stranger => {
            tracing::info!(session = %session, pid = leader.pid,
                "the process the last daemon recorded for this session is gone, and its pid names another one now: left alone");
            return Survivor::Stranger;
        }
    }
    let mut processes = 0;
    if signal(&leader_fd) {
        processes += 1;
        pidfds.push(leader_fd);
    }
    // The others of its session. While one of them lives, the session id stays theirs (the
    // kernel does not hand out a pid that is still some process's session id).
    for member in session_members(leader.pid) {
        if member == leader.pid {
            continue;
        }
        let Some(fd) = Pid::from_raw(member)
            .and_then(|p| rustix::process::pidfd_open(p, PidfdFlags::empty()).ok())
        else {
            continue;
        };
        if session_of(member) == Some(leader.pid) && signal(&fd) {
            processes += 1;
            pidfds.push(fd);
        }
    }
    if processes == 0 {
        return Survivor::Gone;
    }
    Survivor::Ended {
        session,
        pid: leader.pid,
        processes,
    }
}

/// SIGKILL through a pidfd; false when the process is gone already.
fn signal(pidfd: &OwnedFd) -> bool {
    match rustix::process::pidfd_send_signal(pidfd, Signal::KILL) {
        Ok(()) => true,
        Err(rustix::io::Errno::SRCH) => false,
        Err(e) => {
            tracing::warn!(error = %e, "could not signal a process the last daemon left running");
            false
        }
    }
}

/// The pids whose session id is `sid`, from `/proc`.
fn session_members(sid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| session_of(*pid) == Some(sid))
        .collect()
}

/// The session id of `pid` now.
fn session_of(pid: i32) -> Option<i32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Stat::parse(&text).map(|s| s.session)
}

/// Waits up to `wait` for each process to exit (its pidfd turns readable); answers how many
/// had not.
async fn wait_gone(pidfds: Vec<OwnedFd>, wait: Duration) -> usize {
    let count = pidfds.len();
    let exits = pidfds.into_iter().map(|fd| async move {
        // SAFETY: the registration's requirement is that the fd stays open and the same for
        // the AsyncFd's life; it owns the OwnedFd, which nothing else can close.
        let registered = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
        };
        match registered {
            // Readable once the process has exited (a zombie counts: it runs no more).
            Ok(fd) => fd.readable().await.is_ok(),
            Err(_) => false,
        }
    });
    let mut exited = 0;
    let all = futures_util::future::join_all(exits);
    if let Ok(results) = tokio::time::timeout(wait, all).await {
        exited = results.into_iter().filter(|gone| *gone).count();
    }
    count - exited
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child in a session of its own that ignores SIGHUP, as a stubborn harness is.
    fn stubborn_child() -> std::process::Child {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args(["-c", "trap '' HUP; while :; do sleep 1; done"]);
        // SAFETY: setsid is async-signal-safe; the hook touches nothing else.
        unsafe {
            cmd.pre_exec(|| rustix::process::setsid().map(|_| ()).map_err(Into::into));
        }
        cmd.spawn().expect("start sh")
    }

    fn row_with(leader: &GroupLeader) -> FleetRow {
        FleetRow {
            session_id: SessionId::new(),
            name: "s".into(),
            named_by: "auto".into(),
            cwd: "/".into(),
            pinned: false,
            last_attached: None,
            agent: "sh".into(),
            args: Vec::new(),
            exited: false,
            exit_code: None,
            exit_signal: None,
            exit_reason: None,
            cols: 80,
            rows: 24,
            created_at: 0,
            target: None,
            target_identity: None,
            agent_session_id: None,
            model: None,
            effort: None,
            transcript_path: None,
            result: None,
            remote_boot_id: None,
            remote_generation: None,
            remote_offset: None,
            leader_pid: Some(leader.pid),
            leader_start_ticks: Some(leader.start_ticks as i64),
            leader_boot_id: Some(leader.boot_id.clone()),
            limit_memory_mib: None,
            limit_pids: None,
            limit_cpu_percent: None,
            parent_session_id: None,
            host_key: None,
        }
    }

    #[tokio::test]
    async fn a_matching_leader_is_ended_with_its_session_and_a_stranger_is_left_alone() {
        let mut child = stubborn_child();
        let pid = Pid::from_child(&child);
        let leader = GroupLeader::of(pid).expect("the child's stat");
        // The same pid with another start time: a process that reused it.
        let reused = GroupLeader {
            start_ticks: leader.start_ticks + 1,
            ..leader.clone()
        };
        let found = end(&[row_with(&reused)], Duration::from_secs(5)).await;
        assert_eq!(found, vec![Survivor::Stranger]);
        assert!(
            child.try_wait().unwrap().is_none(),
            "a stranger was signalled"
        );

        let row = row_with(&leader);
        let found = end(std::slice::from_ref(&row), Duration::from_secs(5)).await;
        assert!(
            matches!(found.as_slice(), [Survivor::Ended { processes, .. }] if *processes >= 1),
            "{found:?}"
        );
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        // Reaped: nothing of it is left to end.
        assert_eq!(
            end(&[row], Duration::from_secs(5)).await,
            vec![Survivor::Gone]
        );
    }
}
