//! Launcher threads: where local children are started, from a descriptor table of their own.
//!
//! `posix_spawn`'s child begins with a copy of its parent's descriptor table and closes all
//! of it above 2 before the exec ([`super::pty_spawn`]). The daemon holds two descriptors a
//! session, so with a thousand sessions every spawn copied and then closed over two thousand
//! of them, a cost that grows with each session held (README, "Load tool": `close_range` in
//! the child was 7 % of all the machine's samples over the spawn phase).
//!
//! A launcher thread unshares its descriptor table when it starts (`unshare(CLONE_FILES)`)
//! and closes the copies it got, so a child it starts copies a table of four. What it opens
//! for a child (the PTY's master side and the child's pidfd) is in its own table, so it sends
//! them to the daemon's table over a socket pair (`SCM_RIGHTS`) and closes its copies. A
//! descriptor opened on a launcher thread never leaves it any other way: its number means
//! nothing on another thread.
//!
//! Callers block (a blocking thread of the runtime, or a revive in place) and hold their
//! launcher while it works, so the descriptors on its socket are theirs. Where no launcher can
//! be made (the kernel refuses the unshare), children start on the caller's thread.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex, MutexGuard, OnceLock};

use atc_protocol::TermSize;
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};
use rustix::process::Pid;

use super::local_launch::{self, Launched};
use super::pty_spawn::{Child, Plan};
use super::ProviderError;

/// A start a launcher is asked for.
struct Job {
    plan: Plan,
    size: TermSize,
}

/// A launcher's answer: the child's pid once its master and pidfd are on the socket, or why
/// nothing started.
type Reply = Result<Pid, ProviderError>;

/// One launcher thread, as its callers reach it.
struct Launcher {
    jobs: mpsc::Sender<Job>,
    replies: mpsc::Receiver<Reply>,
    /// The daemon's end of the socket pair.
    socket: OwnedFd,
    /// The thread's id, whose `/proc` entry shows its descriptor table.
    tid: Pid,
}

/// A launcher's thread is gone (it panicked).
struct Stopped;

/// The launcher threads of the process.
pub struct Launchers {
    launchers: Vec<Mutex<Launcher>>,
    next: AtomicUsize,
}

/// Starts `plan` on a fresh PTY of `size`: on a launcher thread, or on this one where the
/// process has none. Blocks until the child has exec'd.
pub fn launch(plan: &Plan, size: TermSize) -> Result<Launched, ProviderError> {
    static LAUNCHERS: OnceLock<Option<Launchers>> = OnceLock::new();
    let launchers = LAUNCHERS.get_or_init(|| {
        let count = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
        Launchers::start(count)
            .map_err(|e| {
                tracing::warn!(error = %e, "no launcher thread; children start with a copy of every descriptor the daemon holds")
            })
            .ok()
    });
    match launchers {
        Some(l) => l.launch(plan, size),
        None => local_launch::launch_here(plan, size),
    }
}

impl Launchers {
    /// Starts `count` launcher threads (at least one), each with its own descriptor table.
    pub fn start(count: usize) -> std::io::Result<Launchers> {
        let launchers = (0..count.max(1))
            .map(|i| Launcher::start(i).map(Mutex::new))
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Launchers {
            launchers,
            next: AtomicUsize::new(0),
        })
    }

    /// Starts `plan` on a fresh PTY of `size` on the first launcher free, or waits for one.
    /// Should that launcher's thread have stopped (it never has), the start is made on this
    /// thread instead, so a spawn does not fail for it.
    pub fn launch(&self, plan: &Plan, size: TermSize) -> Result<Launched, ProviderError> {
        match self.take().launch(plan, size) {
            Ok(answer) => answer,
            Err(Stopped) => {
                tracing::error!("a launcher thread stopped; starting the child on this thread");
                local_launch::launch_here(plan, size)
            }
        }
    }

    /// The thread ids of the launchers, for a look at their tables.
    pub fn tids(&self) -> Vec<Pid> {
        (0..self.launchers.len())
            .map(|i| lock(&self.launchers[i]).tid)
            .collect()
    }

    fn take(&self) -> MutexGuard<'_, Launcher> {
        let first = self.next.fetch_add(1, Ordering::Relaxed);
        let n = self.launchers.len();
        for i in 0..n {
            if let Ok(free) = self.launchers[(first + i) % n].try_lock() {
                return free;
            }
        }
        lock(&self.launchers[first % n])
    }
}

/// A launcher whose last caller panicked is still sound: nothing between sending a job and
/// reading the last of its answer panics, so no answer is left half read for the next caller.
fn lock(m: &Mutex<Launcher>) -> MutexGuard<'_, Launcher> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Launcher {
    fn start(index: usize) -> std::io::Result<Launcher> {
        let (ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?;
        let (jobs, job_rx) = mpsc::channel::<Job>();
        let (reply_tx, replies) = mpsc::channel::<Reply>();
        let (ready_tx, ready) = mpsc::channel::<std::io::Result<Pid>>();
        let theirs_raw = theirs.as_raw_fd();
        std::thread::Builder::new()
            .name(format!("atc-launch-{index}"))
            .spawn(move || match own_table(theirs_raw) {
                Ok(socket) => {
                    // The caller waits for this answer (and the one below); it is gone only
                    // if it gave up.
                    // SAFETY: gettid has no preconditions and touches no memory.
                    let tid = Pid::from_raw(unsafe { libc::gettid() });
                    let tid = tid.ok_or_else(|| std::io::Error::other("gettid gave no id"));
                    let _ = ready_tx.send(tid);
                    serve(&socket, job_rx, reply_tx);
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            })?;
        let tid = ready
            .recv()
            .map_err(|_| std::io::Error::other("the launcher thread stopped as it started"))??;
        // The thread holds its own copy now; this table's copy of its end is not needed.
        drop(theirs);
        Ok(Launcher {
            jobs,
            replies,
            socket: ours,
            tid,
        })
    }

    fn launch(
        &mut self,
        plan: &Plan,
        size: TermSize,
    ) -> Result<Result<Launched, ProviderError>, Stopped> {
        let job = Job {
            plan: plan.clone(),
            size,
        };
        self.jobs.send(job).map_err(|_| Stopped)?;
        let answer = self.replies.recv().map_err(|_| Stopped)?;
        Ok(answer.and_then(|pid| {
            let [master, pidfd] = receive_two(&self.socket)?;
            Ok(Launched {
                master,
                child: Child::adopt(pid, pidfd),
            })
        }))
    }
}

/// Gives the calling thread a descriptor table of its own holding only 0-2 and `keep`, which
/// it returns owned.
fn own_table(keep: RawFd) -> std::io::Result<OwnedFd> {
    // SAFETY: unshare(CLONE_FILES) gives this thread a copy of the process's table and
    // touches no memory. From here on, descriptors this thread opens exist only in its copy,
    // which is why nothing opened here leaves except through the socket.
    if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Close every copied descriptor above 2 but `keep`: the daemon's copies stay open, and
    // these would only be copied into every child.
    let keep_u = keep as libc::c_uint;
    for (first, last) in [
        (3, keep_u.saturating_sub(1)),
        (keep_u + 1, libc::c_uint::MAX),
    ] {
        if first > last {
            continue;
        }
        // SAFETY: close_range closes descriptors of this thread's own table, none of which
        // any Rust value on this thread owns yet; it touches no memory.
        let closed =
            unsafe { libc::syscall(libc::SYS_close_range, first, last, 0 as libc::c_uint) };
        if closed != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    // SAFETY: `keep` is open in this table (a copy of the daemon's end the caller keeps until
    // this thread says it is ready), and nothing else on this thread owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(keep) })
}

/// A launcher thread's loop: starts each job and answers it, until its callers are gone.
fn serve(socket: &OwnedFd, jobs: mpsc::Receiver<Job>, replies: mpsc::Sender<Reply>) {
    for job in jobs {
        let reply = local_launch::launch_here(&job.plan, job.size).and_then(|launched| {
            // A child just started was never waited for, so it has its pidfd.
            let (pid, pidfd) = launched.child.into_parts().ok_or_else(|| {
                std::io::Error::other("a child was waited for before it was handed over")
            })?;
            // Sent, the descriptors are the daemon's; dropped here, the copies in this table close.
            send_two(socket, [launched.master.as_fd(), pidfd.as_fd()])?;
            Ok(pid)
        });
        if replies.send(reply).is_err() {
            return;
        }
    }
}

fn send_two(socket: &OwnedFd, fds: [std::os::fd::BorrowedFd<'_>; 2]) -> std::io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(std::io::Error::other("no room for two descriptors"));
    }
    rustix::net::sendmsg(
        socket,
        &[IoSlice::new(&[0])],
        &mut control,
        SendFlags::empty(),
    )?;
    Ok(())
}

/// Reads one message's two descriptors, close-on-exec in this table.
fn receive_two(socket: &OwnedFd) -> std::io::Result<[OwnedFd; 2]> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    let got = rustix::net::recvmsg(
        socket,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds: Vec<OwnedFd> = Vec::with_capacity(2);
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    if got.flags.contains(rustix::net::ReturnFlags::CTRUNC) {
        return Err(std::io::Error::other(
            "a launcher's descriptors were cut off",
        ));
    }
    <[OwnedFd; 2]>::try_from(fds).map_err(|fds| {
        std::io::Error::other(format!(
            "a launcher sent {} descriptors, not two",
            fds.len()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn plan(program: &str, args: &[&str]) -> Plan {
        Plan {
            program: program.into(),
            args: args.iter().map(Into::into).collect(),
            cwd: "/".into(),
            env: Vec::new(),
            withheld: Vec::new(),
        }
    }

    /// Everything the child printed, read until its side closes.
    fn output(master: OwnedFd) -> String {
        let flags = rustix::fs::fcntl_getfl(&master).expect("flags");
        rustix::fs::fcntl_setfl(&master, flags - rustix::fs::OFlags::NONBLOCK).expect("blocking");
        let mut file = std::fs::File::from(master);
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        // EIO once the child's side is closed.
        while let Ok(n @ 1..) = file.read(&mut buf) {
            seen.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&seen).into_owned()
    }

    /// The descriptors open in a thread's table.
    fn table_of(tid: Pid) -> Vec<String> {
        let dir = format!("/proc/self/task/{}/fd", tid.as_raw_nonzero());
        let mut fds: Vec<String> = std::fs::read_dir(&dir)
            .expect("the thread's fd dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        fds.sort();
        fds
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .expect("runtime")
    }

    #[test]
    fn a_launcher_keeps_a_table_of_four_however_many_the_process_holds() {
        // Descriptors the process holds, as a daemon with sessions does.
        let held: Vec<OwnedFd> = (0..300)
            .map(|_| std::fs::File::open("/dev/null").expect("open").into())
            .collect();
        let launchers = Launchers::start(1).expect("a launcher");
        let tid = launchers.tids()[0];
        let before = table_of(tid);
        assert_eq!(before.len(), 4, "0-2 and its socket: {before:?}");

        let mut launched = launchers
            .launch(
                &plan("sh", &["-c", "echo started; exit 3"]),
                TermSize::DEFAULT,
            )
            .expect("launch");
        // The master and the pidfd are this table's: the child's output reads here, and it
        // is waited for here.
        let status = runtime().block_on(launched.child.wait()).expect("wait");
        assert_eq!(status.code(), Some(3));
        assert!(output(launched.master).contains("started"));
        assert_eq!(table_of(tid), before, "the launcher closed its copies");
        drop(held);
    }

    #[test]
    fn a_refused_start_is_the_callers_error_and_the_launcher_goes_on() {
        let launchers = Launchers::start(2).expect("launchers");
        for _ in 0..3 {
            let err = launchers
                .launch(&plan("/no/such/program", &[]), TermSize::DEFAULT)
                .expect_err("no such program");
            assert!(matches!(err, ProviderError::Spawn(_)), "{err:?}");
        }
        let launched = launchers
            .launch(
                &plan("sh", &["-c", "stty size"]),
                TermSize { cols: 77, rows: 19 },
            )
            .expect("launch after the refusals");
        assert!(output(launched.master).contains("19 77"));
        for tid in launchers.tids() {
            assert_eq!(table_of(tid).len(), 4);
        }
    }

    #[test]
    fn callers_on_many_threads_each_get_their_own_child() {
        let launchers = Launchers::start(2).expect("launchers");
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let launchers = &launchers;
                    s.spawn(move || {
                        let word = format!("child-{i}-here");
                        let launched = launchers
                            .launch(&plan("echo", &[&word]), TermSize::DEFAULT)
                            .expect("launch");
                        (word, output(launched.master))
                    })
                })
                .collect();
            for h in handles {
                let (word, seen) = h.join().expect("caller");
                assert!(seen.contains(&word), "{word}: {seen:?}");
            }
        });
    }
}
