//! Spawn phase: N sessions of the chosen agent, C requests in flight at a time; spawns per second,
//! spawn latency, and what the sessions cost the daemon in resident memory.
//!
//! Latency is one `POST /v1/sessions` from send to answer. The rate is successful spawns over the
//! wall time of the whole batch. RSS is read just before the first request and just after the
//! last answer, so "per session" is the growth divided by the sessions that exist; whether the
//! memory comes back is the cleanup's `rssAfterKib`, read once they are all forgotten. At the
//! deadline the figures cover the spawns answered so far and the phase reports a timeout.
//!
//! With `--spawn-limits` the phase runs a second pass with those `limits` on every spawn, so
//! the cost of a session's cgroup shows beside a spawn without one from the same run. A daemon
//! that refuses them (`unsupported_operation`, `problem: no_cgroups`, or `bad_args` over a
//! ceiling) fails that pass alone, saying so.

use std::cell::RefCell;
use std::future::Future;
use std::time::Duration;

use atc_protocol::ErrorCode;

use futures_util::StreamExt as _;
use serde::Serialize;
use tokio::time::Instant;

use super::api::{ApiError, SessionLimits, SpawnRequest};
use super::cleanup::SessionLedger;
use super::cpu::per_item_us;
use super::launch_split::{LaunchSplit, LaunchTotals};
use super::phase::{Deadline, Figures, Outcome};
use super::rss::DaemonPid;
use super::stats::{millis, per_second, round3, Latency};
use super::{Context, TERMINAL};

/// What a batch of spawns measured: the spawn phase's figures, and those of its bare-PTY
/// ceiling, which repeats the batch on bare PTYs.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpawnBatch {
    /// Spawns asked for.
    pub requested: u64,
    /// Whether the deadline passed before every spawn was answered; the figures then cover the
    /// answered ones.
    pub timed_out: bool,
    /// Spawns that succeeded.
    pub spawned: u64,
    /// Spawns that were refused or failed.
    pub failed: u64,
    /// The first failure, for the report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Wall time from the first attempt to the last answer.
    pub elapsed_ms: f64,
    /// Successful spawns per second.
    pub spawns_per_sec: f64,
    /// Latency of the successful spawns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    /// Each successful spawn's send, from the batch's start, and its latency, in the order
    /// they were answered: for `--spawn-timeline`, not the report.
    #[serde(skip)]
    pub timeline: Vec<(Duration, Duration)>,
}

impl SpawnBatch {
    /// A timeout when the deadline cut the batch short, saying how far it got; `answered` names
    /// what counts as done (e.g. "spawns answered").
    pub fn shortfall(&self, answered: &str) -> Option<(Outcome, String)> {
        self.timed_out.then(|| {
            let done = self.spawned + self.failed;
            (
                Outcome::TimedOut,
                format!(
                    "{done} of {} {answered} before the deadline",
                    self.requested
                ),
            )
        })
    }
}

/// Runs `count` spawn attempts, `concurrency` at a time, until they are all answered or
/// `deadline` passes (`what` names the wait); each attempt returns its latency or why it failed.
/// At the deadline the attempts still in flight are dropped and the figures cover those answered.
pub async fn spawn_batch<F, Fut>(
    count: u32,
    concurrency: usize,
    deadline: Deadline,
    what: &'static str,
    attempt: F,
) -> SpawnBatch
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<Duration, String>>,
{
    let mut timeline: Vec<(Duration, Duration)> = Vec::with_capacity(count as usize);
    let mut failed = 0u64;
    let mut first_error: Option<String> = None;
    let started = Instant::now();
    let batch = futures_util::stream::iter(0..count)
        .map(attempt)
        .buffer_unordered(concurrency.max(1))
        .for_each(|answer| {
            match answer {
                Ok(latency) => timeline.push((started.elapsed().saturating_sub(latency), latency)),
                Err(e) => {
                    failed += 1;
                    first_error.get_or_insert(e);
                }
            }
            async {}
        });
    let timed_out = deadline.within(what, batch).await.is_err();
    let elapsed = started.elapsed();
    let spawned = timeline.len() as u64;
    let mut latencies: Vec<Duration> = timeline.iter().map(|(_, latency)| *latency).collect();
    SpawnBatch {
        requested: u64::from(count),
        timed_out,
        spawned,
        failed,
        first_error,
        elapsed_ms: millis(elapsed),
        spawns_per_sec: per_second(spawned, elapsed),
        latency: Latency::from_samples(&mut latencies),
        timeline,
    }
}

/// `batch`'s timeline as CSV, one spawn a line in the order they were sent: when it was sent
/// (ms from the batch's start) and its latency (ms). Stalls show as spawns sent apart that
/// are answered at one instant.
pub fn timeline_csv(batch: &SpawnBatch) -> String {
    let mut spawns = batch.timeline.clone();
    spawns.sort_by_key(|(sent, _)| *sent);
    let mut csv = String::from("sentMs,latencyMs\n");
    for (sent, latency) in spawns {
        csv.push_str(&format!("{:.3},{:.3}\n", millis(sent), millis(latency)));
    }
    csv
}

/// What the spawn phase measured.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpawnFigures {
    /// Spawns the daemon confirmed (or refused, or that failed in transport), their rate and
    /// latency from send to answer.
    #[serde(flatten)]
    pub batch: SpawnBatch,
    /// Daemon RSS before the first spawn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_before_kib: Option<u64>,
    /// Daemon RSS after the last answer, with every session alive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_after_kib: Option<u64>,
    /// `(after - before) / spawned`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_per_session_kib: Option<f64>,
    /// The daemon's CPU (every thread, not the children) from the first request to the last
    /// answer, per spawn. Less at the mercy of the machine's scheduling than the rate is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_per_spawn_us: Option<f64>,
    /// The daemon's own split of the batch's launches: waiting for a launcher thread, and the
    /// launcher's work (from its metrics; absent where it keeps none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch: Option<LaunchSplit>,
    /// The `limits` every spawn of this pass carried (the second pass's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<SessionLimits>,
    /// The daemon's first refusal of those limits, when it refused them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits_refused: Option<String>,
}

impl Figures for SpawnFigures {
    fn shortfall(&self) -> Option<(Outcome, String)> {
        match &self.limits_refused {
            Some(why) if self.batch.spawned == 0 => Some((
                Outcome::Failed,
                format!("the daemon refuses spawns with limits: {why}"),
            )),
            _ => self.batch.shortfall("spawns answered"),
        }
    }
}

/// Whether `e` is the daemon refusing a spawn's `limits`: it has no cgroups to enforce them
/// with, or they pass what its config allows.
fn refuses_limits(e: &ApiError) -> bool {
    matches!(e, ApiError::Api(err)
        if err.is(ErrorCode::UnsupportedOperation) || err.is(ErrorCode::BadArgs))
}

/// Spawns one session of the plan's agent at the bench's terminal size, records it in
/// `ledger` for cleanup, and answers the request's latency (the spawn answers once the session
/// runs).
pub async fn spawn_one(cx: &Context, ledger: &SessionLedger) -> Result<Duration, String> {
    spawn_with(cx, ledger, None)
        .await
        .map_err(|e| e.to_string())
}

/// [`spawn_one`] with `limits` in the spawn when given, failing with the client's error.
async fn spawn_with(
    cx: &Context,
    ledger: &SessionLedger,
    limits: Option<&SessionLimits>,
) -> Result<Duration, ApiError> {
    let name = ledger.next_name();
    let req = SpawnRequest {
        agent: &cx.plan.agent,
        cwd: &cx.plan.cwd,
        name: &name,
        cols: TERMINAL.cols,
        rows: TERMINAL.rows,
        limits,
    };
    let sent = Instant::now();
    let answer = cx.api.spawn(&req).await;
    let latency = sent.elapsed();
    ledger.record(answer?);
    Ok(latency)
}

/// Runs the spawn phase, with `limits` on every spawn when given; every confirmed session goes
/// into `ledger`.
pub async fn run(
    cx: &Context,
    ledger: &SessionLedger,
    deadline: Deadline,
    limits: Option<SessionLimits>,
) -> anyhow::Result<SpawnFigures> {
    let rss_before_kib = cx.pid.and_then(DaemonPid::rss_kib);
    let launches_before = launch_totals(cx).await;
    let cpu_before = cx.pid.and_then(DaemonPid::cpu_ticks);
    let refused: RefCell<Option<String>> = RefCell::new(None);
    let batch = spawn_batch(
        cx.plan.sessions,
        cx.plan.concurrency,
        deadline,
        "spawning sessions",
        |_| {
            let refused = &refused;
            async move {
                spawn_with(cx, ledger, limits.as_ref()).await.map_err(|e| {
                    if limits.is_some() && refuses_limits(&e) {
                        refused.borrow_mut().get_or_insert_with(|| e.to_string());
                    }
                    e.to_string()
                })
            }
        },
    )
    .await;

    let cpu_per_spawn_us = per_item_us(
        cpu_before,
        cx.pid.and_then(DaemonPid::cpu_ticks),
        batch.spawned,
    );
    let rss_after_kib = cx.pid.and_then(DaemonPid::rss_kib);
    let launch = match (launches_before, launch_totals(cx).await) {
        (Some(before), Some(after)) => after.since(&before),
        _ => None,
    };
    let rss_per_session_kib = match (rss_before_kib, rss_after_kib) {
        (Some(before), Some(after)) if batch.spawned > 0 => Some(round3(
            (after as f64 - before as f64) / batch.spawned as f64,
        )),
        _ => None,
    };
    Ok(SpawnFigures {
        batch,
        rss_before_kib,
        rss_after_kib,
        rss_per_session_kib,
        cpu_per_spawn_us,
        launch,
        limits,
        limits_refused: refused.into_inner(),
    })
}

/// The daemon's launch histograms now; `None` where it has none or the read fails (the split
/// is a reading aid, not a figure a target is judged on).
async fn launch_totals(cx: &Context) -> Option<LaunchTotals> {
    LaunchTotals::read(&cx.api.metrics().await.ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_of_limits_is_told_from_other_failures() {
        let api =
            |status, body: &[u8]| ApiError::Api(atc_client::ApiError::from_response(status, body));
        assert!(refuses_limits(&api(
            422,
            br#"{"error":{"code":"unsupported_operation","message":"m","data":{"problem":"no_cgroups"}}}"#
        )));
        assert!(refuses_limits(&api(
            400,
            br#"{"error":{"code":"bad_args","message":"memoryMiB over 256","data":{}}}"#
        )));
        assert!(!refuses_limits(&api(
            503,
            br#"{"error":{"code":"host_unavailable","message":"m","data":{"problem":"busy"}}}"#
        )));
        assert!(!refuses_limits(&ApiError::NoSessionGiven));
    }

    #[test]
    fn the_timeline_lists_spawns_in_the_order_they_were_sent() {
        let ms = Duration::from_millis;
        let batch = SpawnBatch {
            requested: 3,
            timed_out: false,
            spawned: 3,
            failed: 0,
            first_error: None,
            elapsed_ms: 30.0,
            spawns_per_sec: 100.0,
            latency: None,
            // In the order answered: the first sent was held up and answered last.
            timeline: vec![
                (ms(2), ms(10)),
                (ms(5), ms(8)),
                (ms(0), Duration::from_micros(25_500)),
            ],
        };
        assert_eq!(
            timeline_csv(&batch),
            "sentMs,latencyMs\n0.000,25.500\n2.000,10.000\n5.000,8.000\n"
        );
    }
}
