//! Launcher threads: where local children are started, from a descriptor table of their own.
//!
//! `posix_spawn`'s child begins with a copy of its parent's descriptor table and closes all of
//! it above 2 before the exec ([`super::pty_spawn`]). The daemon holds two descriptors a
//! session, so with a thousand sessions every spawn copied and then closed over two thousand of
//! them, a cost that grows with each session held (docs/performance-log.md, "Spawns and
//! requests, 2026-12-03": `close_range` in the child was 7 % of all the machine's samples over
//! the spawn phase).
//!
//! A launcher thread unshares its descriptor table when it starts (`unshare(CLONE_FILES)`)
//! and closes the copies it got, so a child it starts copies a table of four. What it opens
//! for a child (the PTY's master side and the child's pidfd) is in its own table, so it sends
//! them to the daemon's table over a socket pair (`SCM_RIGHTS`) and closes its copies. A
//! descriptor opened on a launcher thread never leaves it any other way: its number means
//! nothing on another thread.
//!
//! Callers block (one of the daemon's blocking threads, or a revive in place) until their start
//! is made. Starts wait in one queue, in the order they were asked for, for the first
//! launcher free; the descriptors of each come tagged with its id. Where no launcher can be
//! made (the kernel refuses the unshare), children start on the caller's thread.
//!
//! The same holds the other way: a value holding one of the daemon's descriptors must never
//! be dropped on a launcher thread, whose close would hit a number in the launcher's table
//! (a debug build aborts on it). So a job carries plain data only (a plan, a size, a reply
//! channel), and so does its answer. Logging is fine: the daemon logs to descriptor 2, which
//! every launcher keeps. The reply channel is std's, whose wake-up is a futex, and never an
//! async one: waking a runtime writes its eventfd, a descriptor only the daemon's table holds
//! (tried: tokio panicked with "failed to wake I/O driver: Bad file descriptor" on the
//! launcher). That is why a spawn's launch waits on a blocking thread, not on the runtime.

use std::collections::HashMap;
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::Instant;

use atc_protocol::TermSize;
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};
use rustix::process::Pid;

use super::host_limit::HostLimit;
use super::launch::{self, LaunchTimes, Launched};
use super::pty_spawn::{Child, Plan};
use crate::providers::ProviderError;

/// A start a launcher is asked for, and where its answer goes.
struct Job {
    plan: Plan,
    size: TermSize,
    /// Tags the descriptors the launcher sends for it.
    id: u64,
    /// When it was asked for, from which its wait for a launcher is counted.
    asked: Instant,
    reply: mpsc::SyncSender<Reply>,
}

/// A launcher's answer: the child's pid and how long its start took, once its master and
/// pidfd are on the socket, or why nothing started.
type Reply = Result<(Pid, LaunchTimes), ProviderError>;

/// The launcher threads of the process, and the daemon's end of their socket.
///
/// Jobs wait in one queue, in the order they came, for the first launcher free. Each launcher
/// sends a job's descriptors tagged with its id; a caller reads the socket once its answer
/// has come, and keeps what it reads for other jobs in `early` for their callers.
pub struct Launchers {
    jobs: mpsc::Sender<Job>,
    inbox: Mutex<Inbox>,
    next_id: AtomicU64,
    tids: Vec<Pid>,
}

/// The daemon's end of the socket the launchers send on, and what was read from it for
/// other callers.
struct Inbox {
    socket: OwnedFd,
    early: HashMap<u64, Delivery>,
}

/// What the socket carried for one start: its two descriptors, or why they did not arrive.
type Delivery = Result<[OwnedFd; 2], Undelivered>;

/// Why a start's descriptors did not arrive whole.
#[derive(Debug)]
enum Undelivered {
    /// The kernel cut the descriptors off the message, which it does when the receiving
    /// table is at the process's open-file limit.
    TableFull,
    /// The message held some other number of descriptors than the two a launcher sends.
    Miscounted(usize),
}

/// Starts `plan` on a fresh PTY of `size`: on a launcher thread, or on this one where the
/// process has none. Blocks until the child has exec'd.
pub fn launch(plan: &Plan, size: TermSize) -> Result<Launched, ProviderError> {
    match launchers() {
        Some(l) => l.launch(plan, size),
        None => launch::launch_here(plan, size),
    }
}

/// Starts the process's launcher threads now, if they are not running yet, rather than on the
/// first spawn. Made then (with the blocking threads), they held up the first spawns of a
/// storm: the slowest of the first sixteen took 16–20 ms in four runs, against 11.5–12.3 ms
/// with both started with the daemon, and sixteen slow spawns are enough on their own to set
/// the p99 of a thousand (docs/performance-log.md, "Spawn stalls").
pub fn prestart() {
    let _ = launchers();
}

/// The process's launcher threads, started on first use; `None` where none could start.
fn launchers() -> Option<&'static Launchers> {
    static LAUNCHERS: OnceLock<Option<Launchers>> = OnceLock::new();
    LAUNCHERS
        .get_or_init(|| {
            Launchers::start(count())
                .map_err(|e| {
                    tracing::warn!(error = %e, "no launcher thread; children start with a copy of every descriptor the daemon holds")
                })
                .ok()
        })
        .as_ref()
}

/// How many launcher threads the process has: one a core (two at least, so one child slow to
/// exec does not hold up every start). Two a core, as before 2026-12-04, started no faster and
/// gave a longer tail: each launcher has a child between fork and exec, and every such child
/// waits its turn for a core among all the children already running (docs/performance-log.md,
/// "Spawns, 2026-12-04").
pub fn count() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.clamp(2, 8)
}

impl Launchers {
    /// Starts `count` launcher threads (at least one), each with its own descriptor table.
    pub fn start(count: usize) -> std::io::Result<Launchers> {
        let (ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?;
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        // Should one fail to start, `jobs` is dropped on the way out and the others stop.
        let tids = (0..count.max(1))
            .map(|i| start_thread(i, theirs.as_raw_fd(), Arc::clone(&queue)))
            .collect::<std::io::Result<Vec<_>>>()?;
        // Every launcher holds its own copy of their end now; this table's is not needed.
        drop(theirs);
        Ok(Launchers {
            jobs,
            inbox: Mutex::new(Inbox {
                socket: ours,
                early: HashMap::new(),
            }),
            next_id: AtomicU64::new(0),
            tids,
        })
    }

    /// Starts `plan` on a fresh PTY of `size` on the first launcher free, after the starts
    /// asked for before it. Should every launcher's thread have stopped (none ever has), the
    /// start is made on this thread instead, so a spawn does not fail for it.
    pub fn launch(&self, plan: &Plan, size: TermSize) -> Result<Launched, ProviderError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = mpsc::sync_channel(1);
        let job = Job {
            plan: plan.clone(),
            size,
            id,
            asked: Instant::now(),
            reply,
        };
        if self.jobs.send(job).is_err() {
            tracing::error!("the launcher threads stopped; starting the child on this thread");
            return launch::launch_here(plan, size);
        }
        let (pid, times) = answer.recv().map_err(|_| {
            ProviderError::Os(std::io::Error::other(
                "a launcher thread stopped during the start",
            ))
        })??;
        match self.redeem(id) {
            Ok([master, pidfd]) => Ok(Launched {
                master,
                child: Child::adopt(pid, pidfd),
                times,
                leader: None,
                cgroup: plan.cgroup.clone(),
            }),
            Err(e) => {
                // The child runs, and nothing of the daemon's reaches it: end it (with its
                // group, which it leads, for anything it started meanwhile) and reap it now,
                // or it would stay a zombie until the daemon exits. Its pid is still ours
                // until reaped. Both calls fail only if it is gone already.
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
                Err(e)
            }
        }
    }

    /// The thread ids of the launchers, for a look at their tables.
    pub fn tids(&self) -> &[Pid] {
        &self.tids
    }

    /// The descriptors sent for job `id`, which are on the socket or kept already: a launcher
    /// sends them before it answers.
    fn redeem(&self, id: u64) -> Result<[OwnedFd; 2], ProviderError> {
        // Nothing panics while the inbox is held, so a poisoned one is whole.
        let mut inbox = self.inbox.lock().unwrap_or_else(|p| p.into_inner());
        match inbox.take(id)? {
            Ok(fds) => Ok(fds),
            Err(Undelivered::TableFull) => Err(ProviderError::LimitReached {
                limit: HostLimit::OpenFiles,
                detail: "the new terminal did not fit in the daemon's descriptor table".into(),
            }),
            Err(Undelivered::Miscounted(n)) => Err(ProviderError::Os(std::io::Error::other(
                format!("a launcher sent {n} descriptors, not two"),
            ))),
        }
    }
}

impl Inbox {
    /// Job `id`'s delivery: kept already, or read on, keeping the others read on the way.
    fn take(&mut self, id: u64) -> std::io::Result<Delivery> {
        if let Some(delivery) = self.early.remove(&id) {
            return Ok(delivery);
        }
        loop {
            let (tag, delivery) = receive_tagged(&self.socket)?;
            if tag == id {
                return Ok(delivery);
            }
            self.early.insert(tag, delivery);
        }
    }
}

/// Starts launcher thread `index`, which keeps `theirs` (the launchers' end of the socket)
/// and takes jobs from `queue`; answers its thread id once its table is its own.
fn start_thread(
    index: usize,
    theirs: RawFd,
    queue: Arc<Mutex<mpsc::Receiver<Job>>>,
) -> std::io::Result<Pid> {
    let (ready_tx, ready) = mpsc::channel::<std::io::Result<Pid>>();
    std::thread::Builder::new()
        .name(format!("atc-launch-{index}"))
        .spawn(move || {
            let socket = match own_table(theirs) {
                Ok(socket) => socket,
                Err(e) => {
                    // The caller waits for this answer; it is gone only if it gave up.
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            // SAFETY: gettid has no preconditions and touches no memory.
            let tid = Pid::from_raw(unsafe { libc::gettid() })
                .ok_or_else(|| std::io::Error::other("gettid gave no id"));
            // As above.
            let _ = ready_tx.send(tid);
            serve(&socket, &queue);
        })?;
    ready
        .recv()
        .map_err(|_| std::io::Error::other("a launcher thread stopped as it started"))?
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

/// A launcher thread's loop: starts each job it takes and answers it, until the queue closes.
fn serve(socket: &OwnedFd, queue: &Mutex<mpsc::Receiver<Job>>) {
    loop {
        // Held only while waiting for a job; nothing panics then, so a poisoned lock is whole.
        let next = queue.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok(job) = next else { return };
        let picked = Instant::now();
        let reply = launch::launch_here(&job.plan, job.size).and_then(|launched| {
            // The launch timed itself; what it waited for is this launcher's pick.
            let times = LaunchTimes {
                waited: picked.saturating_duration_since(job.asked),
                ..launched.times
            };
            // A child just started was never waited for, so it has its pidfd.
            let (pid, pidfd) = launched.child.into_parts().ok_or_else(|| {
                std::io::Error::other("a child was waited for before it was handed over")
            })?;
            // Sent, the descriptors are the daemon's; dropped here, this table's copies close.
            if let Err(e) = send_tagged(socket, job.id, [launched.master.as_fd(), pidfd.as_fd()]) {
                // A child the daemon cannot reach would run unsupervised: end it and reap it
                // now (as pty_spawn does). Both calls fail only if it is gone already.
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
                return Err(e.into());
            }
            Ok((pid, times))
        });
        // A caller that is gone panicked; what was sent for it stays unclaimed.
        let _ = job.reply.send(reply);
    }
}

/// Sends two descriptors, with `tag` as the message's bytes.
fn send_tagged(socket: &OwnedFd, tag: u64, fds: [BorrowedFd<'_>; 2]) -> std::io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(std::io::Error::other("no room for two descriptors"));
    }
    let bytes = tag.to_ne_bytes();
    rustix::net::sendmsg(
        socket,
        &[IoSlice::new(&bytes)],
        &mut control,
        SendFlags::empty(),
    )?;
    Ok(())
}

/// Reads one message, which is there already: its tag, and its two descriptors (close-on-exec
/// in this table) or why they are not all there. A message whose tag did not arrive is an
/// error: there is no telling whose it was.
fn receive_tagged(socket: &OwnedFd) -> std::io::Result<(u64, Delivery)> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut bytes = [0u8; 8];
    let got = rustix::net::recvmsg(
        socket,
        &mut [IoSliceMut::new(&mut bytes)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT,
    )?;
    let mut fds: Vec<OwnedFd> = Vec::with_capacity(2);
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    if got.bytes != bytes.len() || got.flags.contains(ReturnFlags::TRUNC) {
        return Err(std::io::Error::other("a launcher's message was cut off"));
    }
    let tag = u64::from_ne_bytes(bytes);
    if got.flags.contains(ReturnFlags::CTRUNC) {
        // Whatever did arrive of them closes here.
        return Ok((tag, Err(Undelivered::TableFull)));
    }
    let delivery = <[OwnedFd; 2]>::try_from(fds).map_err(|fds| Undelivered::Miscounted(fds.len()));
    Ok((tag, delivery))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::local::launch::tests::{plan, read_until};

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
        assert!(read_until(launched.master, "started").contains("started"));
        assert_eq!(table_of(tid), before, "the launcher closed its copies");
        drop(held);
    }

    #[test]
    fn a_start_says_how_long_it_waited_and_ran_within_the_callers_time() {
        let launchers = Launchers::start(1).expect("a launcher");
        let began = std::time::Instant::now();
        let launched = launchers
            .launch(&plan("sh", &["-c", "echo timed"]), TermSize::DEFAULT)
            .expect("launch");
        let whole = began.elapsed();
        let LaunchTimes { waited, ran } = launched.times;
        assert!(ran > std::time::Duration::ZERO, "a fork and exec take time");
        assert!(
            waited + ran <= whole,
            "{waited:?} + {ran:?} within {whole:?}"
        );
        assert!(read_until(launched.master, "timed").contains("timed"));
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
        assert!(read_until(launched.master, "19 77").contains("19 77"));
        for &tid in launchers.tids() {
            assert_eq!(table_of(tid).len(), 4);
        }
    }

    /// A socket pair of the kind the launchers send on.
    fn seqpacket_pair() -> (OwnedFd, OwnedFd) {
        rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .expect("socket pair")
    }

    #[test]
    fn each_caller_takes_its_own_descriptors_whatever_order_they_came_in() {
        let (ours, theirs) = seqpacket_pair();
        let dir = tempfile::tempdir().expect("dir");
        let open = |name: &str| -> OwnedFd {
            std::fs::File::create(dir.path().join(name))
                .expect("file")
                .into()
        };
        for tag in [7u64, 8, 9] {
            let (a, b) = (open(&format!("{tag}-a")), open(&format!("{tag}-b")));
            send_tagged(&theirs, tag, [a.as_fd(), b.as_fd()]).expect("send");
        }
        let name = |fd: &OwnedFd| {
            let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
            let path = std::fs::read_link(link).expect("link");
            path.file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned()
        };
        let mut inbox = Inbox {
            socket: ours,
            early: HashMap::new(),
        };
        for tag in [9u64, 7, 8] {
            let [a, b] = inbox.take(tag).expect("read").expect("whole");
            assert_eq!(
                (name(&a), name(&b)),
                (format!("{tag}-a"), format!("{tag}-b"))
            );
        }
        assert!(inbox.early.is_empty());
        // Nothing is left to read, and a read does not wait for more.
        assert!(inbox.take(10).is_err());
    }

    /// A message whose descriptors were cut off (here by sending eight where two fit, which
    /// the kernel truncates as it does for a table at its limit) or that holds one is that
    /// start's failure alone: its tag still names it, and the starts around it get theirs.
    #[test]
    fn a_start_whose_descriptors_were_cut_off_fails_alone() {
        let (ours, theirs) = seqpacket_pair();
        let file = || -> OwnedFd { tempfile::tempfile().expect("file").into() };
        let send = |tag: u64, fds: &[OwnedFd]| {
            let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(|f| f.as_fd()).collect();
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(8))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            assert!(control.push(SendAncillaryMessage::ScmRights(&borrowed)));
            rustix::net::sendmsg(
                &theirs,
                &[IoSlice::new(&tag.to_ne_bytes())],
                &mut control,
                SendFlags::empty(),
            )
            .expect("send");
        };
        send(7, &std::array::from_fn::<_, 8, _>(|_| file()));
        send(8, &[file()]);
        send(9, &[file(), file()]);
        let mut inbox = Inbox {
            socket: ours,
            early: HashMap::new(),
        };
        assert!(
            inbox.take(9).expect("read").is_ok(),
            "the whole one arrives"
        );
        let seven = inbox.take(7).expect("read");
        assert!(matches!(seven, Err(Undelivered::TableFull)), "{seven:?}");
        assert!(matches!(
            inbox.take(8).expect("read"),
            Err(Undelivered::Miscounted(1))
        ));
        assert!(inbox.early.is_empty());
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
                        let seen = read_until(launched.master, &word);
                        (word, seen)
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
