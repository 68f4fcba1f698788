//! Spawn phase: N sessions of the chosen agent, C requests in flight at a time; spawns per second,
//! spawn latency, and what the sessions cost the daemon in resident memory.
//!
//! Latency is one `POST /v1/sessions` from send to answer. The rate is successful spawns over the
//! wall time of the whole batch. RSS is read just before the first request and just after the
//! last answer, so "per session" is the growth divided by the sessions that exist; whether the
//! memory comes back is the cleanup's `rssAfterKib`, read once they are all forgotten. At the
//! deadline the figures cover the spawns answered so far and the phase reports a timeout.

use std::time::Duration;

use futures_util::StreamExt as _;
use serde::Serialize;
use tokio::time::Instant;

use super::api::SpawnRequest;
use super::cleanup::SessionLedger;
use super::phase::{Deadline, Figures, Outcome};
use super::rss::DaemonPid;
use super::stats::{millis, per_second, round3, Latency};
use super::{Context, TERMINAL};

/// What the spawn phase measured.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpawnFigures {
    /// Spawns asked for.
    pub requested: u64,
    /// Whether the deadline passed before every spawn was answered; the figures then cover the
    /// answered ones.
    pub timed_out: bool,
    /// Spawns the daemon confirmed.
    pub spawned: u64,
    /// Spawns it refused or that failed in transport.
    pub failed: u64,
    /// The first failure, for the report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Wall time from the first request to the last answer.
    pub elapsed_ms: f64,
    /// Confirmed spawns per second.
    pub spawns_per_sec: f64,
    /// Latency of the confirmed spawns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    /// Daemon RSS before the first spawn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_before_kib: Option<u64>,
    /// Daemon RSS after the last answer, with every session alive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_after_kib: Option<u64>,
    /// `(after - before) / spawned`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_per_session_kib: Option<f64>,
}

impl Figures for SpawnFigures {
    fn shortfall(&self) -> Option<(Outcome, String)> {
        self.timed_out.then(|| {
            let answered = self.spawned + self.failed;
            (
                Outcome::TimedOut,
                format!(
                    "{answered} of {} spawns answered before the deadline",
                    self.requested
                ),
            )
        })
    }
}

/// Runs the spawn phase; every confirmed session goes into `ledger`.
pub async fn run(
    cx: &Context,
    ledger: &SessionLedger,
    deadline: Deadline,
) -> anyhow::Result<SpawnFigures> {
    let requested = u64::from(cx.plan.sessions);
    let rss_before_kib = cx.pid.and_then(DaemonPid::rss_kib);
    let mut latencies: Vec<Duration> = Vec::with_capacity(cx.plan.sessions as usize);
    let mut failed = 0u64;
    let mut first_error: Option<String> = None;

    let started = Instant::now();
    let batch = futures_util::stream::iter(0..cx.plan.sessions)
        .map(|_| {
            let name = ledger.next_name();
            async move {
                let req = SpawnRequest {
                    agent: &cx.plan.agent,
                    cwd: &cx.plan.cwd,
                    name: &name,
                    cols: TERMINAL.cols,
                    rows: TERMINAL.rows,
                };
                let sent = Instant::now();
                let answer = cx.api.spawn(&req).await;
                (sent.elapsed(), answer)
            }
        })
        .buffer_unordered(cx.plan.concurrency)
        .for_each(|(latency, answer)| {
            match answer {
                Ok(id) => {
                    ledger.record(id);
                    latencies.push(latency);
                }
                Err(e) => {
                    failed += 1;
                    first_error.get_or_insert_with(|| e.to_string());
                }
            }
            async {}
        });
    // At the deadline the batch is dropped and what was answered so far is still reported.
    let timed_out = deadline.within("spawning sessions", batch).await.is_err();
    let elapsed = started.elapsed();

    let rss_after_kib = cx.pid.and_then(DaemonPid::rss_kib);
    let spawned = latencies.len() as u64;
    let rss_per_session_kib = match (rss_before_kib, rss_after_kib) {
        (Some(before), Some(after)) if spawned > 0 => {
            Some(round3((after as f64 - before as f64) / spawned as f64))
        }
        _ => None,
    };
    Ok(SpawnFigures {
        requested,
        timed_out,
        spawned,
        failed,
        first_error,
        elapsed_ms: millis(elapsed),
        spawns_per_sec: per_second(spawned, elapsed),
        latency: Latency::from_samples(&mut latencies),
        rss_before_kib,
        rss_after_kib,
        rss_per_session_kib,
    })
}
