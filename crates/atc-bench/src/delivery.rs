//! Pushing a known payload through one daemon session to a set of attached readers, and timing
//! what each of them gets. The throughput, fan-out and slow-client phases are this one procedure
//! with different readers.
//!
//! The procedure: spawn a `shell` session, attach the first reader and wait until the shell runs
//! a probe line (it reads input), attach the others, then type the payload command and read. Every
//! reader counts the payload bytes it receives ([`PayloadProgress`]); the first reader to see the
//! start marker fixes the common start (offset and instant), against which every reader's time
//! is measured and which a reader whose copy of the marker was dropped adopts. A paced reader
//! sleeps between frames to hold its reading rate; it is stopped as soon as every unpaced reader
//! is done, since its job is to be slow beside them, not to finish. The daemon's RSS is sampled
//! for its peak throughout, and the server's CPU is read just before the payload command is
//! typed and again once every unpaced reader is done.

use std::cell::Cell;

use serde::Serialize;
use tokio::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use super::api::SessionId;
use super::attach::{AttachClient, Event};
use super::cleanup::SessionLedger;
use super::payload::{self, Fed, Payload, PayloadProgress};
use super::phase::{Deadline, Outcome};
use super::rss::PeakSampler;
use super::stats::{mib_per_second, millis};
use super::stream::ControlFrame;
use super::{Context, TERMINAL};

/// One reader to attach.
#[derive(Debug, Clone, Copy)]
pub struct Reader {
    /// Bytes per second to read at; `None` reads as fast as frames arrive.
    pub pace: Option<f64>,
}

/// Why a reader stopped reading.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Ending {
    /// Its stream moved past the payload's end.
    Complete,
    /// A paced reader, stopped when the unpaced ones were done.
    Stopped,
    /// The phase deadline passed first.
    TimedOut,
    /// The session exited or the socket closed first.
    Closed(String),
    /// The socket failed or sent something unreadable.
    Failed(String),
}

/// What one reader got.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientFigures {
    /// Payload bytes received.
    pub received_bytes: u64,
    /// Payload bytes this reader will never get (dropped by the daemon); known once complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_bytes: Option<u64>,
    /// Received bytes per second, in MiB, from the common start to this reader's end.
    pub mib_per_sec: f64,
    /// From the common start to this reader's end.
    pub elapsed_ms: f64,
    /// Desync notices this reader got.
    pub desyncs: u32,
    /// Bytes the daemon said it dropped for this reader.
    pub dropped_bytes: u64,
    /// Why it stopped.
    pub ending: Ending,
}

impl ClientFigures {
    /// Whether this reader saw the whole payload go by (possibly with losses).
    pub fn is_complete(&self) -> bool {
        self.ending == Ending::Complete
    }
}

/// How a set of readers fell short: timed out if any was still reading at the deadline, failed
/// if any lost its socket or session; a paced reader that was stopped is not a shortfall.
pub fn shortfall<'a>(
    clients: impl IntoIterator<Item = &'a ClientFigures>,
) -> Option<(Outcome, String)> {
    let mut timed_out = 0;
    let mut failed: Option<String> = None;
    let mut total = 0;
    for c in clients {
        total += 1;
        match &c.ending {
            Ending::Complete | Ending::Stopped => {}
            Ending::TimedOut => timed_out += 1,
            Ending::Closed(why) | Ending::Failed(why) => {
                failed.get_or_insert_with(|| why.clone());
            }
        }
    }
    if let Some(why) = failed {
        Some((Outcome::Failed, format!("a reader ended early: {why}")))
    } else if timed_out > 0 {
        Some((
            Outcome::TimedOut,
            format!(
                "{timed_out} of {total} readers had not seen the whole payload by the deadline"
            ),
        ))
    } else {
        None
    }
}

/// The outcome of one delivery.
#[derive(Debug, Clone)]
pub struct Delivered {
    /// One entry per requested reader, in the same order.
    pub clients: Vec<ClientFigures>,
    /// Daemon RSS before the session was spawned.
    pub rss_before_kib: Option<u64>,
    /// Highest daemon RSS seen during the delivery.
    pub rss_peak_kib: Option<u64>,
    /// Server CPU from typing the payload command until every unpaced reader was done.
    pub server_cpu_ms: Option<f64>,
}

/// The common start: where the payload begins in the stream, and when the first reader saw it.
type SharedStart = Cell<Option<(u64, Instant)>>;

/// Runs one delivery of `payload` to `readers` (at least one) through a fresh shell session
/// recorded in `ledger`.
pub async fn deliver(
    cx: &Context,
    ledger: &SessionLedger,
    deadline: Deadline,
    payload: Payload,
    readers: &[Reader],
) -> anyhow::Result<Delivered> {
    anyhow::ensure!(!readers.is_empty(), "a delivery needs at least one reader");
    let sampler = cx.pid.map(PeakSampler::start);
    let rss_before_kib = sampler.as_ref().and_then(PeakSampler::peak_kib);

    let id = cx.spawn_shell(ledger, deadline).await?;

    let mut clients = Vec::with_capacity(readers.len());
    let mut first = AttachClient::connect(&cx.api, &id, TERMINAL, deadline).await?;
    type_line(cx, &id, &payload::ready_line(), deadline).await?;
    deadline
        .within(
            "waiting for the shell to run its first line",
            first.wait_for(payload::READY),
        )
        .await??;
    clients.push(first);
    for _ in 1..readers.len() {
        clients.push(AttachClient::connect(&cx.api, &id, TERMINAL, deadline).await?);
    }

    let shared: SharedStart = Cell::new(None);
    let stop = CancellationToken::new();
    let len = payload.bytes;
    let mut unpaced = Vec::new();
    let mut paced = Vec::new();
    for (index, (client, reader)) in clients.into_iter().zip(readers).enumerate() {
        let fut = read_payload(client, reader.pace, len, &shared, &stop, deadline);
        match reader.pace {
            None => unpaced.push(async move { (index, fut.await) }),
            Some(_) => paced.push(async move { (index, fut.await) }),
        }
    }
    let cpu_before = cx.server_cpu();
    let unpaced_then_stop = async {
        let done = futures_util::future::join_all(unpaced).await;
        let cpu_after = cx.server_cpu();
        stop.cancel();
        (done, cpu_after)
    };
    let line = payload.typed_line();
    let command = type_line(cx, &id, &line, deadline);
    let (typed, (fast, cpu_after), slow) = futures_util::future::join3(
        command,
        unpaced_then_stop,
        futures_util::future::join_all(paced),
    )
    .await;
    typed?;

    let mut all: Vec<(usize, ClientFigures)> = fast.into_iter().chain(slow).collect();
    all.sort_by_key(|(i, _)| *i);
    Ok(Delivered {
        clients: all.into_iter().map(|(_, f)| f).collect(),
        rss_before_kib,
        rss_peak_kib: sampler.as_ref().and_then(PeakSampler::peak_kib),
        server_cpu_ms: cpu_before
            .zip(cpu_after)
            .and_then(|(before, after)| after.since(before))
            .map(millis),
    })
}

/// Types a line into the session over HTTP input.
async fn type_line(
    cx: &Context,
    id: &SessionId,
    line: &[u8],
    deadline: Deadline,
) -> anyhow::Result<()> {
    deadline
        .within("typing into the session", cx.api.input(id, line))
        .await??;
    Ok(())
}

/// Reads one client until its stream passes the payload's end, or it is stopped, or the deadline
/// passes; then detaches it.
async fn read_payload(
    mut client: AttachClient,
    pace: Option<f64>,
    len: u64,
    shared: &SharedStart,
    stop: &CancellationToken,
    deadline: Deadline,
) -> ClientFigures {
    let mut progress = PayloadProgress::new(len);
    let paced_from = Instant::now();
    let mut paced_bytes = 0u64;
    let ending = loop {
        let shared_offset = shared.get().map(|(offset, _)| offset);
        if client
            .tracker()
            .position()
            .is_some_and(|pos| progress.is_complete(pos, shared_offset))
        {
            break Ending::Complete;
        }
        let event = tokio::select! {
            () = stop.cancelled() => break Ending::Stopped,
            read = deadline.within("reading", client.next()) => match read {
                Err(_) => break Ending::TimedOut,
                Ok(Err(e)) => break Ending::Failed(format!("{e:#}")),
                Ok(Ok(event)) => event,
            },
        };
        match event {
            Event::Live { offset, bytes } => {
                if let Fed::FoundStart(at) = progress.feed(offset, &bytes, shared_offset) {
                    if shared.get().is_none() {
                        shared.set(Some((at, Instant::now())));
                    }
                }
                if let Some(rate) = pace {
                    paced_bytes += bytes.len() as u64;
                    let due = paced_from + Duration::from_secs_f64(paced_bytes as f64 / rate);
                    tokio::select! {
                        () = stop.cancelled() => break Ending::Stopped,
                        () = tokio::time::sleep_until(due.min(deadline.instant())) => {}
                    }
                }
            }
            Event::Control(ControlFrame::Exit { reason }) => {
                break Ending::Closed(format!("session exited ({})", reason.as_str()))
            }
            Event::Control(ControlFrame::Error { code, message }) => {
                break Ending::Failed(format!("{code}: {message}"))
            }
            Event::Control(_) => {}
            Event::Closed(why) => break Ending::Closed(why),
        }
    };
    let ended_at = Instant::now();
    let elapsed = shared.get().map_or(Duration::ZERO, |(_, at)| {
        ended_at.saturating_duration_since(at)
    });
    let figures = ClientFigures {
        received_bytes: progress.received(),
        lost_bytes: (ending == Ending::Complete).then(|| progress.lost()),
        mib_per_sec: mib_per_second(progress.received(), elapsed),
        elapsed_ms: millis(elapsed),
        desyncs: client.tracker().desyncs(),
        dropped_bytes: client.tracker().dropped(),
        ending,
    };
    client.close().await;
    figures
}
