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

use super::api::SpawnRequest;
use super::attach::{AttachClient, Event};
use super::cleanup::SessionLedger;
use super::payload;
use super::phase::{Deadline, Figures};
use super::stats::Latency;
use super::stream::ControlFrame;
use super::{Context, SHELL_AGENT, TERMINAL};

/// The bytes sent, one per trip in turn; printable so a stray one is readable in a screen dump.
const ALPHABET: &[u8; 26] = b"abcdefghijklmnopqrstuvwxyz";

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
    let name = ledger.next_name();
    let spawn = SpawnRequest {
        agent: SHELL_AGENT,
        cwd: &cx.plan.cwd,
        name: &name,
        cols: TERMINAL.cols,
        rows: TERMINAL.rows,
    };
    let id = deadline
        .within("spawning the shell session", cx.api.spawn(&spawn))
        .await??;
    ledger.record(id.clone());
    let mut client = AttachClient::connect(&cx.api, &id, TERMINAL, deadline).await?;

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

    let mut stray_bytes = 0u64;
    // One untimed trip: it comes back only once `cat` has started reading.
    deadline
        .within(
            "waiting for cat to echo",
            round_trip(&mut client, b'.', &mut stray_bytes),
        )
        .await??;
    stray_bytes = 0;

    let mut samples: Vec<Duration> = Vec::with_capacity(cx.plan.echo_count as usize);
    for byte in ALPHABET.iter().cycle().take(cx.plan.echo_count as usize) {
        let rtt = deadline
            .within(
                "timing echo round trips",
                round_trip(&mut client, *byte, &mut stray_bytes),
            )
            .await??;
        samples.push(rtt);
    }
    client.close().await;
    Ok(EchoFigures {
        round_trips: cx.plan.echo_count,
        latency: Latency::from_samples(&mut samples),
        stray_bytes,
    })
}

/// Sends `byte` and waits until it comes back; bytes that arrive with or before it other than
/// the echo itself are added to `stray`.
async fn round_trip(
    client: &mut AttachClient,
    byte: u8,
    stray: &mut u64,
) -> anyhow::Result<Duration> {
    let sent = Instant::now();
    client.send(Bytes::copy_from_slice(&[byte])).await?;
    loop {
        match client.next().await? {
            Event::Live { bytes, .. } => {
                if bytes.contains(&byte) {
                    let rtt = sent.elapsed();
                    *stray += (bytes.len() - 1) as u64;
                    return Ok(rtt);
                }
                *stray += bytes.len() as u64;
            }
            Event::Control(ControlFrame::Exit { reason }) => {
                bail!(
                    "session exited ({}) during the echo phase",
                    reason.unwrap_or_default()
                )
            }
            Event::Closed(why) => bail!("attach WebSocket {why} during the echo phase"),
            Event::Control(_) => {}
        }
    }
}
