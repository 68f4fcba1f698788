//! Repeated rounds of the phases compared with the floor, and the round that stands for them.
//!
//! Why rounds: on a small shared machine one pass of a phase swings by more than most changes
//! do. On the 2-core machine these figures come from, the floor's one-client rate ranged over
//! 95–150 MiB/s and the fan-out ratio over 43–103 % between runs of one build on one day. With
//! `--rounds N` the echo, throughput, fan-out and slow-client phases run N times, each round
//! the daemon's phase and then the floor's, so both sides keep sampling the same stretches of
//! the machine. For each phase and server the report shows the round whose key figure is the
//! median, and lists every round's key figure, so the spread is in plain sight.
//!
//! A round that went wrong (not finished, or readers that fell short or lost bytes) is never
//! hidden behind a median: the first such round stands for its phase instead.

use serde::Serialize;

use crate::echo::EchoFigures;
use crate::fanout::FanoutFigures;
use crate::phase::{Outcome, PhaseReport};
use crate::slow_client::SlowClientFigures;
use crate::throughput::ThroughputFigures;

/// One phase's rounds on one server: the report standing for them, and each round's key figure
/// in run order (rounds that went wrong have none).
#[derive(Debug)]
pub struct Picked<T> {
    pub report: PhaseReport<T>,
    pub keys: Vec<f64>,
}

/// The report that stands for `rounds` (`None` when there were none): the first round that
/// went wrong, else the one whose `key` is the median (the lower one of an even count).
pub fn pick<T>(rounds: Vec<PhaseReport<T>>, key: impl Fn(&T) -> Option<f64>) -> Option<Picked<T>> {
    let key_of = |r: &PhaseReport<T>| {
        r.figures()
            .and_then(&key)
            .filter(|_| r.outcome == Outcome::Ok)
    };
    let keys: Vec<f64> = rounds.iter().filter_map(key_of).collect();
    let standing = match rounds.iter().position(|r| key_of(r).is_none()) {
        Some(wrong) => wrong,
        None => {
            let mut order: Vec<usize> = (0..rounds.len()).collect();
            order.sort_by(|&a, &b| {
                let (a, b) = (key_of(&rounds[a]), key_of(&rounds[b]));
                a.partial_cmp(&b).unwrap_or(std::cmp::Ordering::Equal)
            });
            *order.get(rounds.len().checked_sub(1)? / 2)?
        }
    };
    let report = rounds.into_iter().nth(standing)?;
    Some(Picked { report, keys })
}

/// Echo's key figure: the round trip's p50, in µs.
pub fn echo_key(f: &EchoFigures) -> Option<f64> {
    f.latency.as_ref().map(|l| l.p50_us)
}

/// Throughput's key figure: the client's MiB/s, if it got the whole payload.
pub fn throughput_key(f: &ThroughputFigures) -> Option<f64> {
    f.client.is_complete().then_some(f.client.mib_per_sec)
}

/// Fan-out's key figure: the slowest client's MiB/s, if every client got all of it.
pub fn fanout_key(f: &FanoutFigures) -> Option<f64> {
    (f.complete_clients == f.clients.len() && f.bytes_lost == 0).then_some(f.slowest_mib_per_sec)
}

/// The slow-client phase's key figure: the fast client's MiB/s, if it got the whole payload.
pub fn slow_key(f: &SlowClientFigures) -> Option<f64> {
    f.fast.is_complete().then_some(f.fast.mib_per_sec)
}

/// Every echo round's key figure, per server; present in the report when `--rounds` was over
/// 1. An empty list means the phase did not run on that server.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoundKeys {
    /// Rounds asked for.
    pub rounds: u32,
    /// Echo p50 of each daemon round, µs.
    pub echo_p50_us: Vec<f64>,
    /// Echo p50 of each floor round, µs.
    pub floor_echo_p50_us: Vec<f64>,
}

/// Every round's key figure of one payload shape's phases, per phase and server, as
/// [`RoundKeys`] has echo's.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShapeRoundKeys {
    /// One-client MiB/s of each daemon round.
    pub throughput_mib_per_sec: Vec<f64>,
    /// One-client MiB/s of each floor round.
    pub floor_throughput_mib_per_sec: Vec<f64>,
    /// Slowest fan-out client's MiB/s of each daemon round.
    pub fanout_slowest_mib_per_sec: Vec<f64>,
    /// Slowest fan-out client's MiB/s of each floor round.
    pub floor_fanout_slowest_mib_per_sec: Vec<f64>,
    /// The fast client's MiB/s beside the slow one, each round.
    pub slow_fast_mib_per_sec: Vec<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(outcome: Outcome, key: Option<f64>) -> PhaseReport<Option<f64>> {
        PhaseReport {
            outcome,
            elapsed_ms: 1.0,
            error: None,
            figures: Some(key),
            cleanup: None,
        }
    }

    fn picked(rounds: Vec<PhaseReport<Option<f64>>>) -> (Outcome, Option<f64>, Vec<f64>) {
        let p = pick(rounds, |k| *k).expect("some rounds");
        (p.report.outcome, p.report.figures.flatten(), p.keys)
    }

    #[test]
    fn the_median_round_stands_and_every_key_is_kept_in_order() {
        let ok = |k| round(Outcome::Ok, Some(k));
        assert_eq!(
            picked(vec![ok(9.0), ok(3.0), ok(5.0)]),
            (Outcome::Ok, Some(5.0), vec![9.0, 3.0, 5.0])
        );
        // An even count takes the lower of the two middle rounds.
        assert_eq!(
            picked(vec![ok(4.0), ok(1.0), ok(8.0), ok(2.0)]).1,
            Some(2.0)
        );
        assert_eq!(picked(vec![ok(7.0)]).1, Some(7.0));
        assert!(pick(Vec::<PhaseReport<Option<f64>>>::new(), |k| *k).is_none());
    }

    #[test]
    fn a_round_that_went_wrong_stands_instead_of_the_median() {
        let ok = |k| round(Outcome::Ok, Some(k));
        // Timed out, with partial figures that would otherwise sort into the middle.
        let (outcome, key, keys) =
            picked(vec![ok(1.0), round(Outcome::TimedOut, Some(2.0)), ok(3.0)]);
        assert_eq!((outcome, key), (Outcome::TimedOut, Some(2.0)));
        assert_eq!(keys, vec![1.0, 3.0]);
        // Finished, but its figures say it fell short (no key).
        let (outcome, key, _) = picked(vec![ok(1.0), ok(2.0), round(Outcome::Ok, None)]);
        assert_eq!((outcome, key), (Outcome::Ok, None));
    }
}
