//! Who leads a local session's processes, recorded so that a later daemon can still tell them
//! from a stranger that took the same pid.
//!
//! A local harness's child leads its own session and process group (it calls `setsid` before
//! its exec, see `pty_spawn`). When the daemon dies by `kill -9`, the kernel hangs up the
//! PTY, and a child that ignores SIGHUP runs on, its parent gone. So each session's row keeps
//! the leader's pid, its start time (field 22 of `/proc/<pid>/stat`, in clock ticks since
//! boot) and the boot id; a pid names the same process only while all three match, since a
//! pid is reused only after its process is gone and a start time only grows within one boot.
//! The next daemon ends what matches (`daemon::survivors`) before any restore.

use std::sync::OnceLock;

use rustix::process::Pid;

use super::proc_stat::Stat;

/// A process-group leader as recorded with its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupLeader {
    /// Its pid, which is also its process group and session id.
    pub pid: i32,
    /// When it started, in clock ticks since boot.
    pub start_ticks: u64,
    /// The boot it started in (`/proc/sys/kernel/random/boot_id`).
    pub boot_id: String,
}

/// What a recorded leader's pid holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaderNow {
    /// The same process, still there (perhaps exited and not yet reaped).
    Same,
    /// No process has the pid.
    Gone,
    /// Another process has the pid, or the machine booted since.
    Stranger,
}

impl GroupLeader {
    /// The leader `pid` as it is now; an error when its `/proc` entry or the boot id cannot
    /// be read (it exited already, or there is no procfs).
    pub fn of(pid: Pid) -> std::io::Result<GroupLeader> {
        let raw = pid.as_raw_nonzero().get();
        let stat = std::fs::read_to_string(format!("/proc/{raw}/stat"))?;
        let start_ticks = Stat::parse(&stat)
            .map(|s| s.start_ticks)
            .ok_or_else(|| std::io::Error::other("unreadable /proc/<pid>/stat"))?;
        Ok(GroupLeader {
            pid: raw,
            start_ticks,
            boot_id: boot_id()?.to_string(),
        })
    }

    /// What the recorded pid holds now (see [`LeaderNow`]).
    pub fn now(&self) -> LeaderNow {
        match boot_id() {
            Ok(boot) if boot == self.boot_id => {}
            // Another boot, or no way to tell: never signal on a guess.
            _ => return LeaderNow::Stranger,
        }
        match std::fs::read_to_string(format!("/proc/{}/stat", self.pid)) {
            Ok(text) => match Stat::parse(&text) {
                Some(stat) if stat.start_ticks == self.start_ticks => LeaderNow::Same,
                _ => LeaderNow::Stranger,
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => LeaderNow::Gone,
            Err(_) => LeaderNow::Stranger,
        }
    }
}

/// This boot's id, read once.
pub fn boot_id() -> std::io::Result<&'static str> {
    static BOOT_ID: OnceLock<String> = OnceLock::new();
    if let Some(id) = BOOT_ID.get() {
        return Ok(id);
    }
    let read = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")?;
    Ok(BOOT_ID.get_or_init(|| read.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_itself_and_a_changed_start_is_a_stranger() {
        let me = GroupLeader::of(rustix::process::getpid()).expect("read my own stat");
        assert_eq!(me.now(), LeaderNow::Same);
        let other = GroupLeader {
            start_ticks: me.start_ticks + 1,
            ..me.clone()
        };
        assert_eq!(other.now(), LeaderNow::Stranger);
        let rebooted = GroupLeader {
            boot_id: "another boot".into(),
            ..me.clone()
        };
        assert_eq!(rebooted.now(), LeaderNow::Stranger);
        // pid_max is at most 2^22: this pid is never in use.
        let gone = GroupLeader { pid: 1 << 23, ..me };
        assert_eq!(gone.now(), LeaderNow::Gone);
    }
}
