//! Fan-out phase: several clients attached to one session, all reading the same payload as fast
//! as they can.
//!
//! Every client is attached before the payload starts. The figures are the slowest and fastest
//! client's MiB/s and the bytes lost: for each client, payload size minus what it received, so a
//! client that was desynced counts the bytes the daemon dropped for it.

use serde::Serialize;

use super::cleanup::SessionLedger;
use super::delivery::{self, ClientFigures, Reader};
use super::payload::Payload;
use super::phase::{Deadline, Figures, Outcome};
use super::Context;

/// What the fan-out phase measured.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FanoutFigures {
    /// Payload size.
    pub payload_bytes: u64,
    /// Each client, in attach order.
    pub clients: Vec<ClientFigures>,
    /// Lowest MiB/s among the clients.
    pub slowest_mib_per_sec: f64,
    /// Highest MiB/s among the clients.
    pub fastest_mib_per_sec: f64,
    /// Clients that saw the whole payload go by.
    pub complete_clients: usize,
    /// Sum over complete clients of bytes they will never get.
    pub bytes_lost: u64,
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

impl Figures for FanoutFigures {
    fn shortfall(&self) -> Option<(Outcome, String)> {
        delivery::shortfall(&self.clients)
    }
}

/// Runs the fan-out phase with `payload` in a fresh shell session recorded in `ledger`.
pub async fn run(
    cx: &Context,
    ledger: &SessionLedger,
    deadline: Deadline,
    payload: Payload,
) -> anyhow::Result<FanoutFigures> {
    let readers = vec![Reader { pace: None }; cx.plan.fanout_clients as usize];
    let delivered = delivery::deliver(cx, ledger, deadline, payload, &readers).await?;
    let mut figures = summarise(
        payload.bytes,
        delivered.clients,
        delivered.rss_before_kib,
        delivered.rss_peak_kib,
    );
    figures.server_cpu_ms = delivered.server_cpu_ms;
    Ok(figures)
}

/// Reduces per-client figures to the phase's figures.
fn summarise(
    payload_bytes: u64,
    clients: Vec<ClientFigures>,
    rss_before_kib: Option<u64>,
    rss_peak_kib: Option<u64>,
) -> FanoutFigures {
    let rates = clients.iter().map(|c| c.mib_per_sec);
    let slowest = rates.clone().fold(f64::INFINITY, f64::min);
    let fastest = rates.fold(0.0, f64::max);
    FanoutFigures {
        payload_bytes,
        slowest_mib_per_sec: if slowest.is_finite() { slowest } else { 0.0 },
        fastest_mib_per_sec: fastest,
        complete_clients: clients.iter().filter(|c| c.is_complete()).count(),
        bytes_lost: clients.iter().filter_map(|c| c.lost_bytes).sum(),
        clients,
        rss_before_kib,
        rss_peak_kib,
        server_cpu_ms: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::Ending;

    fn client(rate: f64, lost: Option<u64>, ending: Ending) -> ClientFigures {
        ClientFigures {
            received_bytes: 100 - lost.unwrap_or(0),
            lost_bytes: lost,
            mib_per_sec: rate,
            elapsed_ms: 1.0,
            desyncs: u32::from(lost.is_some_and(|l| l > 0)),
            dropped_bytes: lost.unwrap_or(0),
            ending,
        }
    }

    #[test]
    fn slowest_fastest_and_losses_over_clients() {
        let f = summarise(
            100,
            vec![
                client(50.0, Some(0), Ending::Complete),
                client(20.0, Some(30), Ending::Complete),
                client(80.0, None, Ending::TimedOut),
            ],
            None,
            None,
        );
        assert_eq!(f.slowest_mib_per_sec, 20.0);
        assert_eq!(f.fastest_mib_per_sec, 80.0);
        assert_eq!(f.bytes_lost, 30);
        assert_eq!(f.complete_clients, 2);
    }

    #[test]
    fn no_clients_give_zero_rates() {
        let f = summarise(100, Vec::new(), None, None);
        assert_eq!((f.slowest_mib_per_sec, f.fastest_mib_per_sec), (0.0, 0.0));
    }
}
