//! The report of one bench run: what was asked for, and each phase's outcome and figures, as
//! JSON (`--json`, the phases' figures verbatim, plus `vsFloor`) or as a table that puts every
//! daemon figure beside the floor's and the ratio atc / floor, and beside its bare-PTY ceiling,
//! all from the same run.
//!
//! The table is derived from the same [`Report`] value as the JSON, so the two cannot disagree;
//! it only chooses units and which figures are worth a row. Errors and timeouts go into notes
//! under the table to keep the columns narrow. The table is built in `table.rs`, the storm's
//! own table in `storm_table.rs`, the reach phase's in `reach_table.rs`, and `units.rs` writes
//! each figure with its unit.

use serde::Serialize;

mod reach_table;
mod scale_table;
mod storm_table;
mod table;
mod units;

use super::api::SessionLimits;
use super::bare_pty::{BareEchoFigures, BareReadFigures, BareSpawnFigures};
use super::echo::EchoFigures;
use super::fanout::FanoutFigures;
use super::payload::{Payload, Shape};
use super::phase::{Outcome, PhaseReport};
use super::reach::ReachFigures;
use super::rounds::{RoundKeys, ShapeRoundKeys};
use super::scale::ScaleFigures;
use super::slow_client::SlowClientFigures;
use super::spawn::SpawnFigures;
use super::storm::StormFigures;
use super::throughput::ThroughputFigures;
use super::{Context, FloorUse, Phase};

/// What the run was asked to do.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// Daemon URL, when a daemon phase ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Daemon pid from `GET /v1/daemon`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daemon_pid: Option<u32>,
    /// Phases selected, in run order.
    pub phases: Vec<Phase>,
    /// Agent of the spawn phase.
    pub agent: String,
    /// Sessions spawned (and bare spawn cycles).
    pub sessions: u32,
    /// Requests in flight.
    pub concurrency: usize,
    /// The payloads of the output phases (throughput, fan-out, slow client, bare PTY read),
    /// one per shape, in run order.
    pub payloads: Vec<Payload>,
    /// Echo round trips.
    pub echo_count: u32,
    /// Fan-out clients.
    pub fanout_clients: u32,
    /// Slow client's rate.
    pub slow_rate_mib_per_sec: f64,
    /// Steps of the scale phase, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_steps: Option<Vec<u32>>,
    /// Each phase's deadline.
    pub phase_timeout_secs: f64,
    /// Whether echo, throughput and fan-out also ran against the floor.
    pub floor: FloorUse,
    /// The limits of the spawn phase's second pass, when it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawn_limits: Option<SessionLimits>,
    /// The storm's settings, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storm: Option<StormSettings>,
    /// URL of the storm's second daemon, the one without CPU priority, when there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storm_baseline_url: Option<String>,
    /// The reach phase's settings, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reach: Option<ReachSettings>,
}

/// What the reach phase was asked to do.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReachSettings {
    /// Sessions held.
    pub sessions: u32,
    /// Requests timed per path and caller.
    pub requests: u32,
    /// Requests in flight at once.
    pub clients: usize,
    /// The principal acted as (`X-Atc-As`).
    pub principal: String,
}

/// What the storm was asked to do.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StormSettings {
    /// Sessions spawned.
    pub sessions: u32,
    /// Spawns in flight.
    pub concurrency: usize,
    /// The agent whose start-up burns CPU.
    pub agent: String,
    /// Deadline on each daemon.
    pub timeout_secs: f64,
}

/// Everything one run measured. Phases that were not selected are absent.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// What was asked for.
    pub settings: Settings,
    /// Spawn phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawn: Option<PhaseReport<SpawnFigures>>,
    /// The spawn phase's second pass, with `--spawn-limits` on every spawn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawn_limited: Option<PhaseReport<SpawnFigures>>,
    /// Echo phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub echo: Option<PhaseReport<EchoFigures>>,
    /// The output phases, once per payload shape, in run order; empty when none of them ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shapes: Vec<ShapeReport>,
    /// Scale phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale: Option<PhaseReport<ScaleFigures>>,
    /// Reach phase: the owner's requests beside a principal's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reach: Option<PhaseReport<ReachFigures>>,
    /// Storm phase on the daemon.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storm: Option<PhaseReport<StormFigures>>,
    /// The same storm on the daemon without CPU priority (`--storm-baseline-state-dir`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storm_baseline: Option<PhaseReport<StormFigures>>,
    /// Bare PTY spawn ceiling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bare_spawn: Option<PhaseReport<BareSpawnFigures>>,
    /// Bare PTY echo ceiling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bare_echo: Option<PhaseReport<BareEchoFigures>>,
    /// Echo phase against the floor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_echo: Option<PhaseReport<EchoFigures>>,
    /// With `--rounds` over 1: every echo round's key figure; the phases above are the
    /// standing rounds (`rounds.rs`). Each shape has its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rounds: Option<RoundKeys>,
}

/// The output phases of one payload shape: throughput, fan-out and the slow client on the
/// daemon, the first two on the floor, and the bare-PTY read, each present when it ran.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShapeReport {
    /// What the bytes were.
    pub shape: Shape,
    /// How many.
    pub payload_bytes: u64,
    /// Throughput phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput: Option<PhaseReport<ThroughputFigures>>,
    /// Fan-out phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fanout: Option<PhaseReport<FanoutFigures>>,
    /// Slow-client phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_client: Option<PhaseReport<SlowClientFigures>>,
    /// Throughput phase against the floor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_throughput: Option<PhaseReport<ThroughputFigures>>,
    /// Fan-out phase against the floor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_fanout: Option<PhaseReport<FanoutFigures>>,
    /// Bare PTY read ceiling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bare_read: Option<PhaseReport<BareReadFigures>>,
    /// With `--rounds` over 1: every round's key figure of this shape's phases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rounds: Option<ShapeRoundKeys>,
}

/// atc's echo over the floor's from the same run, where both phases finished: above 1 means
/// atc is slower than the floor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VsFloor {
    /// Echo p50, atc / floor (the target is ≤ 1.1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub echo_p50: Option<f64>,
    /// Echo p99, atc / floor (the target is ≤ 1.25).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub echo_p99: Option<f64>,
}

/// atc's output figures for one shape over the floor's from the same run, where both phases
/// finished: above 1 means atc is faster (rates) or spends more (CPU) than the floor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShapeVsFloor {
    /// One-client MiB/s, atc / floor (the target is ≥ 0.9).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput: Option<f64>,
    /// Server CPU for that payload, atc / floor (the target is ≤ 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_cpu: Option<f64>,
    /// Slowest fan-out client's MiB/s, atc / floor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fanout_slowest: Option<f64>,
}

/// A spawn with limits over one without, from the spawn phase's two passes, where both
/// finished: above 1 means the limits cost more (latency, CPU) or spawn faster (the rate).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LimitsCost {
    /// Spawns per second, with / without.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawns_per_sec: Option<f64>,
    /// Latency p50, with / without.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_p50: Option<f64>,
    /// Latency p99, with / without.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_p99: Option<f64>,
    /// The daemon's CPU per spawn, with / without.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_per_spawn: Option<f64>,
}

/// `a / b` when both are positive numbers.
fn ratio(a: f64, b: f64) -> Option<f64> {
    (a.is_finite() && b.is_finite() && a > 0.0 && b > 0.0).then(|| a / b)
}

/// The figures of a phase that ran to the end.
fn finished<T>(r: Option<&PhaseReport<T>>) -> Option<&T> {
    r.filter(|r| r.outcome == Outcome::Ok)
        .and_then(PhaseReport::figures)
}

impl Report {
    /// An empty report for the run `cx` describes; `url` when a daemon is used.
    pub(super) fn new(cx: &Context, url: Option<String>) -> Report {
        let p = &cx.plan;
        let output_phases = [Phase::Throughput, Phase::Fanout, Phase::Slow, Phase::Bare];
        Report {
            settings: Settings {
                url,
                daemon_pid: cx.pid.map(|pid| pid.0),
                phases: p.phases.clone(),
                agent: p.agent.clone(),
                sessions: p.sessions,
                concurrency: p.concurrency,
                payloads: p.payloads.clone(),
                echo_count: p.echo_count,
                fanout_clients: p.fanout_clients,
                slow_rate_mib_per_sec: p.slow_rate_mib,
                scale_steps: p.has(Phase::Scale).then(|| p.scale_steps.clone()),
                phase_timeout_secs: p.phase_limit.as_secs_f64(),
                floor: p.floor,
                spawn_limits: p.spawn_limits.filter(|_| p.has(Phase::Spawn)),
                storm: p.has(Phase::Storm).then(|| StormSettings {
                    sessions: p.storm.sessions,
                    concurrency: p.storm.concurrency,
                    agent: p.storm.agent.clone(),
                    timeout_secs: p.storm.limit.as_secs_f64(),
                }),
                storm_baseline_url: None,
                reach: p.has(Phase::Reach).then(|| ReachSettings {
                    sessions: p.reach.sessions,
                    requests: p.reach.requests,
                    clients: p.reach.clients,
                    principal: p.reach.principal.clone(),
                }),
            },
            spawn: None,
            spawn_limited: None,
            echo: None,
            shapes: if output_phases.iter().any(|ph| p.has(*ph)) {
                p.payloads.iter().map(ShapeReport::new).collect()
            } else {
                Vec::new()
            },
            scale: None,
            reach: None,
            storm: None,
            storm_baseline: None,
            bare_spawn: None,
            bare_echo: None,
            floor_echo: None,
            rounds: None,
        }
    }

    /// Whether the user interrupted one of the phases, so no further phase should start.
    pub fn interrupted(&self) -> bool {
        fn hit<T>(r: Option<&PhaseReport<T>>) -> bool {
            r.is_some_and(PhaseReport::was_interrupted)
        }
        hit(self.spawn.as_ref())
            || hit(self.spawn_limited.as_ref())
            || hit(self.storm.as_ref())
            || hit(self.storm_baseline.as_ref())
            || hit(self.echo.as_ref())
            || self.shapes.iter().any(ShapeReport::interrupted)
            || hit(self.scale.as_ref())
            || hit(self.reach.as_ref())
            || hit(self.bare_spawn.as_ref())
            || hit(self.bare_echo.as_ref())
            || hit(self.floor_echo.as_ref())
    }

    /// atc's echo against the floor's, when both finished.
    pub fn vs_floor(&self) -> VsFloor {
        let mut v = VsFloor::default();
        let (d, f) = (
            finished(self.echo.as_ref()).and_then(|e| e.latency),
            finished(self.floor_echo.as_ref()).and_then(|e| e.latency),
        );
        if let Some((d, f)) = d.zip(f) {
            v.echo_p50 = ratio(d.p50_us, f.p50_us);
            v.echo_p99 = ratio(d.p99_us, f.p99_us);
        }
        v
    }

    /// What the limits cost a spawn, when both passes of the spawn phase finished.
    pub fn limits_cost(&self) -> Option<LimitsCost> {
        let without = finished(self.spawn.as_ref())?;
        let with = finished(self.spawn_limited.as_ref())?;
        let (w, wo) = (&with.batch, &without.batch);
        let mut c = LimitsCost {
            spawns_per_sec: ratio(w.spawns_per_sec, wo.spawns_per_sec),
            cpu_per_spawn: with
                .cpu_per_spawn_us
                .zip(without.cpu_per_spawn_us)
                .and_then(|(w, wo)| ratio(w, wo)),
            ..LimitsCost::default()
        };
        if let Some((w, wo)) = w.latency.zip(wo.latency) {
            c.latency_p50 = ratio(w.p50_us, wo.p50_us);
            c.latency_p99 = ratio(w.p99_us, wo.p99_us);
        }
        Some(c)
    }

    /// The report as pretty JSON, with `vsFloor` (in the report and in each shape's) when the
    /// floor ran and `limitsCost` when the spawn phase ran with and without limits.
    pub fn to_json(&self) -> serde_json::Result<String> {
        let mut v = serde_json::to_value(self)?;
        if let Some(obj) = v.as_object_mut() {
            if self.settings.floor != FloorUse::Off {
                obj.insert("vsFloor".into(), serde_json::to_value(self.vs_floor())?);
                if let Some(shapes) = obj.get_mut("shapes").and_then(|s| s.as_array_mut()) {
                    for (json, shape) in shapes.iter_mut().zip(&self.shapes) {
                        if let Some(json) = json.as_object_mut() {
                            json.insert("vsFloor".into(), serde_json::to_value(shape.vs_floor())?);
                        }
                    }
                }
            }
            if let Some(cost) = self.limits_cost() {
                obj.insert("limitsCost".into(), serde_json::to_value(cost)?);
            }
        }
        serde_json::to_string_pretty(&v)
    }
}

impl ShapeReport {
    /// The report of `payload`'s phases before any has run.
    pub(super) fn new(payload: &Payload) -> ShapeReport {
        ShapeReport {
            shape: payload.shape,
            payload_bytes: payload.bytes,
            throughput: None,
            fanout: None,
            slow_client: None,
            floor_throughput: None,
            floor_fanout: None,
            bare_read: None,
            rounds: None,
        }
    }

    /// Whether the user interrupted one of this shape's phases.
    pub(crate) fn interrupted(&self) -> bool {
        fn hit<T>(r: Option<&PhaseReport<T>>) -> bool {
            r.is_some_and(PhaseReport::was_interrupted)
        }
        hit(self.throughput.as_ref())
            || hit(self.fanout.as_ref())
            || hit(self.slow_client.as_ref())
            || hit(self.floor_throughput.as_ref())
            || hit(self.floor_fanout.as_ref())
            || hit(self.bare_read.as_ref())
    }

    /// atc against the floor with this shape, for the phases where both finished.
    pub fn vs_floor(&self) -> ShapeVsFloor {
        let mut v = ShapeVsFloor::default();
        let (d, f) = (
            finished(self.throughput.as_ref()),
            finished(self.floor_throughput.as_ref()),
        );
        if let Some((d, f)) = d.zip(f) {
            v.throughput = ratio(d.client.mib_per_sec, f.client.mib_per_sec);
            v.throughput_cpu = d
                .server_cpu_ms
                .zip(f.server_cpu_ms)
                .and_then(|(d, f)| ratio(d, f));
        }
        let (d, f) = (
            finished(self.fanout.as_ref()),
            finished(self.floor_fanout.as_ref()),
        );
        if let Some((d, f)) = d.zip(f) {
            v.fanout_slowest = ratio(d.slowest_mib_per_sec, f.slowest_mib_per_sec);
        }
        v
    }
}

#[cfg(test)]
mod tests;
