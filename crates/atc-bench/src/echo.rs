//! Echo phase: the round trip of one byte through the attach WebSocket and back, measured many
//! times against a `cat` in raw mode.
//!
//! A `shell` session is turned into a raw, non-echoing `cat` (see [`payload::cat_line`]), so every
//! byte sent as input comes back exactly once and nothing else is printed. Each trip sends one
//! byte as a binary frame and waits for the live output that carries it; the latency covers the
//! client's send, the daemon's input path, the PTY, `cat`, the daemon's output path and the
//! client's read. Trips run one after another, so they never queue behind each other.

use std::time::Duration;

use anyhow::bail;
use bytes::Bytes;
use serde::Serialize;
use tokio::time::Instant;

use super::attach::{AttachClient, Event};
use super::cleanup::SessionLedger;
use super::payload;
use super::phase::{Deadline, Figures};
use super::stats::Latency;
use super::stream::ControlFrame;
use super::{Context, TERMINAL};

/// The bytes sent, one per trip in turn; printable so a stray one is readable in a screen dump.
pub const ALPHABET: &[u8; 26] = b"abcdefghijklmnopqrstuvwxyz";

/// What the echo phase measured.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EchoFigures {
    /// Round trips timed.
    pub round_trips: u32,
    /// Their latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    /// Output bytes that were not the echo being waited for (should be 0).
    pub stray_bytes: u64,
}

impl Figures for EchoFigures {}

/// Runs the echo phase in a fresh shell session recorded in `ledger`.
pub async fn run(
    cx: &Context,
    ledger: &SessionLedger,
    deadline: Deadline,
) -> anyhow::Result<EchoFigures> {
    let id = cx.spawn_shell(ledger, deadline).await?;
    let client = AttachClient::connect(&cx.api, &id, TERMINAL, deadline).await?;
    let mut echo = AttachEcho::start(client, deadline).await?;
    let mut samples = time_round_trips(
        &mut echo,
        cx.plan.echo_count,
        deadline,
        "timing echo round trips",
    )
    .await?;
    let stray_bytes = echo.stray_bytes();
    echo.close().await;
    Ok(EchoFigures {
        round_trips: cx.plan.echo_count,
        latency: Latency::from_samples(&mut samples),
        stray_bytes,
    })
}

/// One end of an echo measurement: a raw `cat` that sends back each byte it gets.
pub trait RoundTrip {
    /// Sends `byte` and returns the time until it came back.
    async fn round_trip(&mut self, byte: u8) -> anyhow::Result<Duration>;

    /// Called once the untimed first trip is back, before the timed ones.
    fn start_timing(&mut self) {}
}

/// The echo measurement, the same for the daemon and its bare-PTY ceiling: one untimed trip
/// (it comes back only once `cat` has started reading), then `count` timed one-byte trips, one
/// after another so they never queue behind each other; `what` names the timed wait.
pub async fn time_round_trips(
    echo: &mut impl RoundTrip,
    count: u32,
    deadline: Deadline,
    what: &'static str,
) -> anyhow::Result<Vec<Duration>> {
    deadline
        .within("waiting for cat to echo", echo.round_trip(b'.'))
        .await??;
    echo.start_timing();
    let mut samples: Vec<Duration> = Vec::with_capacity(count as usize);
    for byte in ALPHABET.iter().cycle().take(count as usize) {
        let rtt = deadline.within(what, echo.round_trip(*byte)).await??;
        samples.push(rtt);
    }
    Ok(samples)
}

/// The daemon's end: a `cat` in a session, reached through the attach WebSocket.
pub struct AttachEcho {
    client: AttachClient,
    /// Output bytes of the timed trips that were not the echo being waited for.
    stray_bytes: u64,
}

impl AttachEcho {
    /// Turns the shell behind `client` into a raw, non-echoing `cat` (see
    /// [`payload::cat_line`]), waiting first for the shell to run a line.
    pub async fn start(mut client: AttachClient, deadline: Deadline) -> anyhow::Result<AttachEcho> {
        client.send(Bytes::from(payload::ready_line())).await?;
        deadline
            .within(
                "waiting for the shell to run its first line",
                client.wait_for(payload::READY),
            )
            .await??;
        client.send(Bytes::from(payload::cat_line())).await?;
        deadline
            .within(
                "waiting for the terminal to turn raw",
                client.wait_for(payload::CAT),
            )
            .await??;
        Ok(AttachEcho {
            client,
            stray_bytes: 0,
        })
    }

    /// Output bytes since timing started that were not an awaited echo (should be 0).
    pub fn stray_bytes(&self) -> u64 {
        self.stray_bytes
    }

    /// Runs `work` while this client reads whatever comes, which answers the daemon's pings:
    /// a client left unread for longer than the daemon's silence timeout (60 s) is cut off,
    /// and a scale step's ramp on a busy machine takes that long. Output that arrives meanwhile
    /// is not an echo and is dropped.
    pub async fn answering_pings<T>(
        &mut self,
        work: impl std::future::Future<Output = T>,
    ) -> anyhow::Result<T> {
        let mut work = std::pin::pin!(work);
        loop {
            tokio::select! {
                out = &mut work => return Ok(out),
                // Cancelling a read between frames loses nothing: the socket keeps what has not
                // been read, and a pong cut off mid-send is only late.
                event = self.client.next() => match event? {
                    Event::Closed(why) => bail!("the echo client's WebSocket {why}"),
                    Event::Control(ControlFrame::Exit { reason }) => {
                        bail!("the echo session exited ({})", reason.as_str())
                    }
                    Event::Control(_) | Event::Live { .. } => {}
                },
            }
        }
    }

    /// Detaches politely.
    pub async fn close(self) {
        self.client.close().await;
    }
}

impl RoundTrip for AttachEcho {
    /// Bytes that arrive with or before the echo, other than the echo itself, are stray.
    async fn round_trip(&mut self, byte: u8) -> anyhow::Result<Duration> {
        let sent = Instant::now();
        self.client.send(Bytes::copy_from_slice(&[byte])).await?;
        loop {
            match self.client.next().await? {
                Event::Live { bytes, .. } => {
                    if bytes.contains(&byte) {
                        let rtt = sent.elapsed();
                        self.stray_bytes += (bytes.len() - 1) as u64;
                        return Ok(rtt);
                    }
                    self.stray_bytes += bytes.len() as u64;
                }
                Event::Control(ControlFrame::Exit { reason }) => {
                    bail!("session exited ({}) during the echo phase", reason.as_str())
                }
                Event::Closed(why) => bail!("attach WebSocket {why} during the echo phase"),
                Event::Control(_) => {}
            }
        }
    }

    fn start_timing(&mut self) {
        self.stray_bytes = 0;
    }
}
