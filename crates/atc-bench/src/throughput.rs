//! Throughput phase: one client reading a known payload as fast as the daemon delivers it.
//!
//! The figure is the payload size over the time from the start marker's arrival to the last
//! payload byte's, as [`delivery`](super::delivery) measures it. It is also the "solo" rate the
//! slow-client phase compares its fast reader against.

use serde::Serialize;

use super::cleanup::SessionLedger;
use super::delivery::{self, ClientFigures, Reader};
use super::payload::Payload;
use super::phase::{Deadline, Figures, Outcome};
use super::Context;

/// What the throughput phase measured.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThroughputFigures {
    /// Payload size.
    pub payload_bytes: u64,
    /// The one reader.
    pub client: ClientFigures,
    /// Daemon RSS before the session was spawned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_before_kib: Option<u64>,
    /// Highest daemon RSS during the delivery.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_peak_kib: Option<u64>,
    /// Server CPU (the daemon process, or the floor's threads) while the payload went through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_ms: Option<f64>,
}

impl Figures for ThroughputFigures {
    fn shortfall(&self) -> Option<(Outcome, String)> {
        delivery::shortfall([&self.client])
    }
}

/// Runs the throughput phase with `payload` in a fresh shell session recorded in `ledger`.
pub async fn run(
    cx: &Context,
    ledger: &SessionLedger,
    deadline: Deadline,
    payload: Payload,
) -> anyhow::Result<ThroughputFigures> {
    let delivered =
        delivery::deliver(cx, ledger, deadline, payload, &[Reader { pace: None }]).await?;
    let client = delivered
        .clients
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("delivery returned no reader"))?;
    Ok(ThroughputFigures {
        payload_bytes: payload.bytes,
        client,
        rss_before_kib: delivered.rss_before_kib,
        rss_peak_kib: delivered.rss_peak_kib,
        server_cpu_ms: delivered.server_cpu_ms,
    })
}
