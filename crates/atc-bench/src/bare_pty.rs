//! The ceilings: the same operations on a bare PTY in this process, with no daemon in between.
//!
//! Each daemon figure is only meaningful next to what the machine can do at all in the same run,
//! so these phases repeat the daemon phases' work with `pty-process` directly:
//! - spawn: open a PTY, spawn `cat` on it, kill and reap it, N times, C at a time (latency is the
//!   open + spawn part, the rate covers the whole cycle);
//! - echo: one byte written to a raw, non-echoing `cat` and read back, many times;
//! - read: the payload command run by `sh -c` on a PTY, read as fast as possible.
//!
//! Children are spawned with `kill_on_drop`, so a phase dropped at its deadline leaves none behind.

use std::time::Duration;

use anyhow::{bail, Context as _};
use pty_process::{Command, Pty, Size};
use rustix::termios::{tcgetattr, tcsetattr, OptionalActions};
use serde::Serialize;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::time::Instant;

use super::echo::{time_round_trips, RoundTrip};
use super::payload::{Fed, Payload, PayloadProgress};
use super::phase::{Deadline, Figures, Outcome};
use super::spawn::{spawn_batch, SpawnBatch};
use super::stats::{mib_per_second, millis, Latency};
use super::TERMINAL;

/// Read buffer for the PTY; larger than the kernel hands out per read, so one read is one chunk.
const READ_BUF: usize = 64 << 10;

/// What the bare spawn ceiling measured: the spawn phase's batch, with cycles (open, spawn,
/// kill, reap) for spawns; the rate covers whole cycles, the latency the open + spawn part.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct BareSpawnFigures {
    /// The cycles.
    pub batch: SpawnBatch,
}

impl Figures for BareSpawnFigures {
    fn shortfall(&self) -> Option<(Outcome, String)> {
        self.batch.shortfall("cycles done")
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

/// Spawn ceiling: `count` cycles of open + spawn `cat` + kill + reap, `concurrency` at a time.
pub async fn spawn(
    count: u32,
    concurrency: usize,
    deadline: Deadline,
) -> anyhow::Result<BareSpawnFigures> {
    let batch = spawn_batch(
        count,
        concurrency,
        deadline,
        "spawning cat on bare PTYs",
        |_| async { spawn_cycle().await.map_err(|e| format!("{e:#}")) },
    )
    .await;
    Ok(BareSpawnFigures { batch })
}

/// One open + spawn (timed) + kill + reap (untimed) cycle.
async fn spawn_cycle() -> anyhow::Result<Duration> {
    let began = Instant::now();
    let (pty, pts) = open_pty()?;
    let mut child = Command::new("cat")
        .kill_on_drop(true)
        .spawn(pts)
        .context("spawning cat")?;
    let latency = began.elapsed();
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
