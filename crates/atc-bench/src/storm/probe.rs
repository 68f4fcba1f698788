//! The two probers that run through a storm until told to stop: `GET /v1/health`, and an echo
//! trip on a session attached before the storm began, each every [`PERIOD`].
//!
//! The health prober is open-loop: it sends on every tick whether or not earlier probes have
//! come back, so a daemon that stalls for a second shows as the many probes that waited, not as
//! one slow sample. The echo prober cannot be: its bytes share one session, so it sends the next
//! only once the last came back, and a stall is one long trip. Each request has its own limit,
//! so a prober never waits on one for ever; what was still in flight when the window closed is
//! counted apart and not as a failure.

use std::time::Duration;

use actix_http::Method;
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use serde::Serialize;
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use super::answers::{Answer, Tally};
use crate::api::DaemonApi;
use crate::echo::{AttachEcho, RoundTrip as _, ALPHABET};
use crate::stats::Latency;

/// Time between two probes: a stall of a few ticks is already visible, and a probe costs the
/// daemon far less than the storm does.
pub const PERIOD: Duration = Duration::from_millis(15);

/// Time a probe may take before it counts as unanswered.
const PROBE_LIMIT: Duration = Duration::from_secs(10);

/// Health probes out at once before a tick is skipped: enough for the whole [`PROBE_LIMIT`]
/// at [`PERIOD`], so only a daemon that answers nothing for ten seconds hits it.
const MAX_IN_FLIGHT: usize = 700;

/// What one prober saw.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeFigures {
    /// Probes sent.
    pub sent: u64,
    /// Their answers by kind (an echo that came back is `ok`; a broken socket `reset`).
    pub answers: Tally,
    /// Latency of the successful ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    /// Probes still in flight when the window closed, counted in no other figure.
    pub cut_at_end: u64,
    /// Ticks with no probe sent because [`MAX_IN_FLIGHT`] were out.
    pub skipped: u64,
    /// Why the prober stopped before the window closed, when it did (the echo's socket broke).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_early: Option<String>,
}

/// Waits until `stop` turns true (or its sender is gone, which means the same).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// Probes `GET /v1/health` every [`PERIOD`] until `stop`.
pub async fn health(api: &DaemonApi, mut stop: watch::Receiver<bool>) -> ProbeFigures {
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut in_flight = FuturesUnordered::new();
    let mut figures = ProbeFigures::default();
    let mut samples = Vec::new();
    loop {
        tokio::select! {
            () = stopped(&mut stop) => break,
            Some((answer, took)) = in_flight.next(), if !in_flight.is_empty() => {
                if answer == Answer::Ok {
                    samples.push(took);
                }
                figures.answers.add(answer);
            }
            _ = tick.tick() => {
                if in_flight.len() >= MAX_IN_FLIGHT {
                    figures.skipped += 1;
                    continue;
                }
                figures.sent += 1;
                in_flight.push(async {
                    let sent = Instant::now();
                    let answer = api
                        .exchange(Method::GET, "/v1/health", None, PROBE_LIMIT)
                        .await;
                    (Answer::of(&answer), sent.elapsed())
                });
            }
        }
    }
    figures.cut_at_end = in_flight.len() as u64;
    figures.latency = Latency::from_samples(&mut samples);
    figures
}

/// Times an echo trip on `echo` every [`PERIOD`] until `stop`; a trip that breaks the socket
/// ends the prober, one that times out does not.
pub async fn echo(echo: &mut AttachEcho, mut stop: watch::Receiver<bool>) -> ProbeFigures {
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut figures = ProbeFigures::default();
    let mut samples = Vec::new();
    for byte in ALPHABET.iter().cycle() {
        tokio::select! {
            biased;
            () = stopped(&mut stop) => break,
            _ = tick.tick() => {}
        }
        figures.sent += 1;
        let trip = tokio::select! {
            biased;
            () = stopped(&mut stop) => {
                figures.cut_at_end = 1;
                break;
            }
            trip = tokio::time::timeout(PROBE_LIMIT, echo.round_trip(*byte)) => trip,
        };
        match trip {
            Ok(Ok(rtt)) => {
                samples.push(rtt);
                figures.answers.add(Answer::Ok);
            }
            Ok(Err(e)) => {
                let why = format!("{e:#}");
                figures.answers.add(Answer::Reset(why.clone()));
                figures.stopped_early = Some(why);
                break;
            }
            Err(_) => figures.answers.add(Answer::TimedOut),
        }
    }
    figures.latency = Latency::from_samples(&mut samples);
    figures
}
