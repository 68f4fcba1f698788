//! Slow-client phase: one client reading at a fixed slow rate beside one reading as fast as it
//! can, on the same session.
//!
//! The daemon promises that a slow client never stalls the session or the other clients: the slow
//! one should be desynced (its bounded queue overflows) while the fast one keeps its solo rate and
//! the daemon's memory stays flat. So the figures are the fast client's MiB/s beside its solo rate
//! from the throughput phase of the same run, the slow client's losses, and the daemon's RSS
//! growth (peak during the phase minus before it). The slow client is stopped once the fast one is
//! done.

use serde::Serialize;

use super::cleanup::SessionLedger;
use super::delivery::{self, ClientFigures, Reader};
use super::payload::Payload;
use super::phase::{Deadline, Figures, Outcome};
use super::stats::MIB;
use super::Context;

/// What the slow-client phase measured.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SlowClientFigures {
    /// Payload size.
    pub payload_bytes: u64,
    /// The rate the slow client reads at.
    pub slow_rate_mib_per_sec: f64,
    /// The fast reader.
    pub fast: ClientFigures,
    /// The slow reader.
    pub slow: ClientFigures,
    /// The throughput phase's one-client rate in this run, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fast_solo_mib_per_sec: Option<f64>,
    /// Daemon RSS before the session was spawned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_before_kib: Option<u64>,
    /// Highest daemon RSS during the phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_peak_kib: Option<u64>,
    /// `peak - before`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_growth_kib: Option<i64>,
}

impl Figures for SlowClientFigures {
    /// Only the fast reader decides: the slow one is there to fall behind, and being cut off by
    /// the daemon is one of the results this phase reports, not a failure of the bench.
    fn shortfall(&self) -> Option<(Outcome, String)> {
        delivery::shortfall([&self.fast])
    }
}

/// Runs the slow-client phase with `payload` in a fresh shell session recorded in `ledger`;
/// `solo` is the
/// throughput phase's rate, if it ran.
pub async fn run(
    cx: &Context,
    ledger: &SessionLedger,
    deadline: Deadline,
    payload: Payload,
    solo: Option<f64>,
) -> anyhow::Result<SlowClientFigures> {
    let readers = [
        Reader { pace: None },
        Reader {
            pace: Some(cx.plan.slow_rate_mib * MIB),
        },
    ];
    let delivered = delivery::deliver(cx, ledger, deadline, payload, &readers).await?;
    let mut clients = delivered.clients.into_iter();
    let (Some(fast), Some(slow)) = (clients.next(), clients.next()) else {
        anyhow::bail!("delivery returned fewer readers than asked for");
    };
    let rss_growth_kib = match (delivered.rss_before_kib, delivered.rss_peak_kib) {
        (Some(before), Some(peak)) => Some(peak as i64 - before as i64),
        _ => None,
    };
    Ok(SlowClientFigures {
        payload_bytes: payload.bytes,
        slow_rate_mib_per_sec: cx.plan.slow_rate_mib,
        fast,
        slow,
        fast_solo_mib_per_sec: solo,
        rss_before_kib: delivered.rss_before_kib,
        rss_peak_kib: delivered.rss_peak_kib,
        rss_growth_kib,
    })
}
