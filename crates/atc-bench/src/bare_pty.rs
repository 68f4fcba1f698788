//! The ceilings: the same operations on a bare PTY in this process, with no daemon in between.
//!
//! Each daemon figure is only meaningful next to what the machine can do at all in the same run,
//! so these phases repeat the daemon phases' work on PTYs this process opens itself:
//! - spawn: open a PTY and spawn `cat` on it, N times, C at a time, each child left running (as a
//!   session's is) until the batch ends and then killed and reaped; and once more with each
//!   child killed and reaped as soon as it is spawned, the cycle this ceiling used to be;
//! - echo: one byte written to a raw, non-echoing `cat` and read back, many times;
//! - read: the payload command run by `sh -c` on a PTY, read as fast as possible.
//!
//! Children are spawned with `kill_on_drop`, so a phase dropped at its deadline leaves none behind.

use std::os::fd::AsFd as _;
use std::os::unix::process::CommandExt as _;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use anyhow::{bail, Context as _};
use pty_process::{Command, Pty, Size};
use rustix::termios::{tcgetattr, tcsetattr, OptionalActions};
use serde::Serialize;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::time::Instant;

use super::cpu::{own_ticks, per_item_us};
use super::echo::{time_round_trips, RoundTrip};
use super::payload::{Fed, Payload, PayloadProgress};
use super::phase::{Deadline, Figures, Outcome};
use super::spawn::{spawn_batch, SpawnBatch};
use super::stats::{mib_per_second, millis, Latency};
use super::TERMINAL;

/// Read buffer for the PTY; larger than the kernel hands out per read, so one read is one chunk.
const READ_BUF: usize = 64 << 10;

/// What the bare spawn ceiling measured.
///
/// The daemon's spawn leaves its child running, and the child's own start-up (the dynamic
/// loader, libc's set-up: about 0.7 ms of CPU for `cat` on the machine README's figures come
/// from) shares the cores with the spawns after it. So the ceiling does the same: `batch`
/// keeps every child and its PTY until the batch ends. `killed_at_once` is the cycle this
/// ceiling was before: each child killed and reaped as soon as `posix_spawn` returns, before
/// it has run any of its own code, which leaves the cores to the spawns alone.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BareSpawnFigures {
    /// Open + spawn with each child left running until the batch ends; the latency is the
    /// open + spawn part, the rate covers the batch.
    #[serde(flatten)]
    pub batch: SpawnBatch,
    /// This process's CPU (every thread, not the children) over `batch`, per spawn: opening
    /// the PTY and `posix_spawn`, the part of the daemon's spawn CPU a server cannot avoid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_per_spawn_us: Option<f64>,
    /// Of `batch`'s children, how many were still running when it ended (all of them, unless
    /// some exited on their own, which would make the batch cheaper than the daemon's).
    pub running_at_end: u64,
    /// Killing and reaping the children `batch` left running, once it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cleanup_ms: Option<f64>,
    /// Cycles of open + spawn + kill + reap; the rate covers whole cycles, the latency the
    /// open + spawn part. Not run when `batch` was cut short.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub killed_at_once: Option<SpawnBatch>,
}

impl Figures for BareSpawnFigures {
    fn shortfall(&self) -> Option<(Outcome, String)> {
        self.batch.shortfall("spawns done").or_else(|| {
            self.killed_at_once
                .as_ref()
                .and_then(|cycles| cycles.shortfall("cycles done"))
        })
    }
}

/// What the bare echo ceiling measured.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BareEchoFigures {
    /// Round trips timed.
    pub round_trips: u32,
    /// Their latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
}

impl Figures for BareEchoFigures {}

/// What the bare read ceiling measured.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BareReadFigures {
    /// Payload size.
    pub payload_bytes: u64,
    /// Payload bytes read (all of them, unless the command failed).
    pub received_bytes: u64,
    /// From the start marker to the last payload byte.
    pub elapsed_ms: f64,
    /// Payload MiB per second.
    pub mib_per_sec: f64,
}

impl Figures for BareReadFigures {}

/// A fresh PTY at the bench's terminal size.
fn open_pty() -> anyhow::Result<(Pty, pty_process::Pts)> {
    let (pty, pts) = pty_process::open().context("opening a PTY")?;
    pty.resize(Size::new(TERMINAL.rows, TERMINAL.cols))
        .context("sizing the PTY")?;
    Ok((pty, pts))
}

/// Spawn ceiling: `count` spawns of `cat` on fresh PTYs, `concurrency` at a time, each child
/// left running until the batch ends; then the same count of cycles that kill each at once.
pub async fn spawn(
    count: u32,
    concurrency: usize,
    deadline: Deadline,
) -> anyhow::Result<BareSpawnFigures> {
    raise_open_file_limit();
    // Dropped at the deadline, the children die with it (`kill_on_drop`).
    let running = Mutex::new(Vec::with_capacity(count as usize));
    let cpu_before = own_ticks();
    let batch = spawn_batch(
        count,
        concurrency,
        deadline,
        "spawning cat on bare PTYs",
        |_| async {
            let (latency, kept) = spawn_cat().map_err(|e| format!("{e:#}"))?;
            lock(&running).push(kept);
            Ok(latency)
        },
    )
    .await;
    let cpu_per_spawn_us = per_item_us(cpu_before, own_ticks(), batch.spawned);
    let mut running = running.into_inner().unwrap_or_else(PoisonError::into_inner);
    let running_at_end = running
        .iter_mut()
        .map(|(_, child)| u64::from(matches!(child.try_wait(), Ok(None))))
        .sum();
    let cleanup_ms = Some(millis(kill_and_reap(running, deadline).await?));
    let killed_at_once = if batch.timed_out {
        None
    } else {
        let cycles = spawn_batch(
            count,
            concurrency,
            deadline,
            "spawning and killing cat on bare PTYs",
            |_| async { spawn_cycle().await.map_err(|e| format!("{e:#}")) },
        );
        Some(cycles.await)
    };
    Ok(BareSpawnFigures {
        batch,
        cpu_per_spawn_us,
        running_at_end,
        cleanup_ms,
        killed_at_once,
    })
}

/// Lifts this process's soft `RLIMIT_NOFILE` to its hard limit: the kept batch holds a PTY
/// master a child, and a common soft limit (1,024) is fewer than the default 1,000 sessions
/// and the bench's own descriptors. Where it cannot be lifted, the batch's spawns past it fail
/// and are counted and shown as failures.
fn raise_open_file_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        // Refused, the limit stays as it was; see above.
        let _ = setrlimit(Resource::Nofile, raised);
    }
}

/// A child the spawn ceiling keeps running, with the PTY it reads from.
type Running = (Pty, tokio::process::Child);

/// The vector of running children, whole even if a holder panicked (a push is one step).
fn lock(running: &Mutex<Vec<Running>>) -> std::sync::MutexGuard<'_, Vec<Running>> {
    running.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Opens a PTY and spawns `cat` on it; returns how long that took, and both.
///
/// The child starts as the daemon's do, through `posix_spawn`: a vfork-style clone that
/// shares this process's memory until the exec. (`pty_process::Command` forks instead, to run
/// its `setsid` and `TIOCSCTTY` hooks, and a fork copies the bench's page tables, which grow
/// with the phases run before this one: the ceiling measured 967/s after the whole README run
/// against 1,571/s alone.) std takes the `posix_spawn` path only without such hooks, so the
/// child gets a process group of its own instead of a session and controlling terminal, two
/// system calls fewer than the daemon's children make.
fn spawn_cat() -> anyhow::Result<(Duration, Running)> {
    let began = Instant::now();
    let (pty, pts) = open_pty()?;
    let stdio = || -> anyhow::Result<std::process::Stdio> {
        let fd = pts
            .as_fd()
            .try_clone_to_owned()
            .context("copying the PTY")?;
        Ok(fd.into())
    };
    let mut command = std::process::Command::new("cat");
    command
        .stdin(stdio()?)
        .stdout(stdio()?)
        .stderr(stdio()?)
        .process_group(0);
    let child = tokio::process::Command::from(command)
        .kill_on_drop(true)
        .spawn()
        .context("spawning cat")?;
    Ok((began.elapsed(), (pty, child)))
}

/// Kills every child, then reaps them all; returns the time that took.
async fn kill_and_reap(mut running: Vec<Running>, deadline: Deadline) -> anyhow::Result<Duration> {
    let began = Instant::now();
    for (_, child) in &mut running {
        child.start_kill().context("killing cat")?;
    }
    for (_, child) in &mut running {
        deadline
            .within("reaping the bare PTYs' cats", child.wait())
            .await?
            .context("reaping cat")?;
    }
    Ok(began.elapsed())
}

/// One open + spawn (timed) + kill + reap (untimed) cycle.
async fn spawn_cycle() -> anyhow::Result<Duration> {
    let (latency, (pty, mut child)) = spawn_cat()?;
    child.start_kill().context("killing cat")?;
    child.wait().await.context("reaping cat")?;
    drop(pty);
    Ok(latency)
}

/// Echo ceiling: `count` one-byte round trips through a raw `cat`.
pub async fn echo(count: u32, deadline: Deadline) -> anyhow::Result<BareEchoFigures> {
    let (pty, pts) = open_pty()?;
    let mut echo = PtyEcho {
        pty,
        buf: [0u8; 256],
    };
    // The same terminal mode as `stty raw -echo` in the daemon's echo phase, set before `cat`
    // starts so no byte is ever cooked or echoed by the line discipline.
    let mut mode = tcgetattr(&pts).context("reading the PTY's mode")?;
    mode.make_raw();
    tcsetattr(&pts, OptionalActions::Now, &mode).context("making the PTY raw")?;
    let _child = Command::new("cat")
        .kill_on_drop(true)
        .spawn(pts)
        .context("spawning cat")?;

    let mut samples =
        time_round_trips(&mut echo, count, deadline, "timing bare echo round trips").await?;
    Ok(BareEchoFigures {
        round_trips: count,
        latency: Latency::from_samples(&mut samples),
    })
}

/// The bare end: a raw `cat` on a PTY of this process.
struct PtyEcho {
    pty: Pty,
    buf: [u8; 256],
}

impl RoundTrip for PtyEcho {
    /// Writes `byte` and reads until it comes back.
    async fn round_trip(&mut self, byte: u8) -> anyhow::Result<Duration> {
        let sent = Instant::now();
        self.pty
            .write_all(&[byte])
            .await
            .context("writing to the PTY")?;
        loop {
            let n = self
                .pty
                .read(&mut self.buf)
                .await
                .context("reading the PTY")?;
            if n == 0 {
                bail!("cat closed the PTY");
            }
            if self.buf.iter().take(n).any(|b| *b == byte) {
                return Ok(sent.elapsed());
            }
        }
    }
}

/// Read ceiling: the payload command under `sh -c`, read from the PTY as fast as possible.
pub async fn read(payload: Payload, deadline: Deadline) -> anyhow::Result<BareReadFigures> {
    let (mut pty, pts) = open_pty()?;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(payload.command())
        .kill_on_drop(true)
        .spawn(pts)
        .context("spawning sh")?;
    let mut progress = PayloadProgress::new(payload.bytes);
    let mut buf = vec![0u8; READ_BUF];
    let mut offset = 0u64;
    let mut started: Option<Instant> = None;
    let reading = async {
        while !progress.is_complete(offset, None) {
            let n = match pty.read(&mut buf).await {
                Ok(n) => n,
                // Linux reports the far side closing as EIO rather than end of file.
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error()) => 0,
                Err(e) => return Err(e).context("reading the PTY"),
            };
            let Some(chunk) = buf.get(..n).filter(|c| !c.is_empty()) else {
                bail!("the payload command ended before the payload did");
            };
            if let Fed::FoundStart(_) = progress.feed(offset, chunk, None) {
                started = Some(Instant::now());
            }
            offset += n as u64;
        }
        Ok(Instant::now())
    };
    let finished = deadline
        .within("reading the payload from a bare PTY", reading)
        .await??;
    let elapsed = started.map_or(Duration::ZERO, |at| finished.saturating_duration_since(at));
    // The command is done or about to be; the figures do not depend on how it exits.
    child.start_kill().ok();
    child.wait().await.context("reaping sh")?;
    Ok(BareReadFigures {
        payload_bytes: payload.bytes,
        received_bytes: progress.received(),
        elapsed_ms: millis(elapsed),
        mib_per_sec: mib_per_second(progress.received(), elapsed),
    })
}
