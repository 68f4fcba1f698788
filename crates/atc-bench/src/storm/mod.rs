//! Storm phase (issue 35, "the daemon comes first"): `--storm-sessions` sessions of an agent
//! whose start-up burns CPU, spawned `--storm-concurrency` at a time, while the daemon's health
//! and the echo of a session attached before the storm are timed; then whether the issue's
//! targets held (p99 under 50 ms for both, no connection reset, every spawn answered).
//!
//! The window runs from the first spawn until the storm is over (`settle`): spawns answer once
//! their process runs, and the CPU they burn comes after. Every spawn's answer is counted by
//! kind (`answers`), and a spawn still unanswered at the deadline is counted too, so the report
//! says which were not answered rather than leaving them out. The probers (`probe`) stop when
//! the window closes. `lib.rs` runs this against the daemon and, with
//! `--storm-baseline-state-dir`, against a second one without CPU priority, and the report puts
//! the two side by side. The sessions, the echo's included, are ended by the usual cleanup.

mod answers;
mod probe;
mod settle;

use std::cell::{Cell, RefCell};
use std::time::Duration;

use actix_http::Method;
use futures_util::StreamExt as _;
use serde::Serialize;
use tokio::time::Instant;

pub use answers::Tally;
pub use probe::{ProbeFigures, PERIOD};
pub use settle::Ended;

use super::api::{SessionId, SpawnRequest};
use super::attach::AttachClient;
use super::cleanup::SessionLedger;
use super::echo::{AttachEcho, RoundTrip as _};
use super::phase::{Deadline, Figures, Outcome};
use super::stats::{millis, Latency};
use super::{Context, TERMINAL};
use answers::Answer;

/// Time a storm spawn may take before it counts as unanswered: the client's usual limit.
const SPAWN_LIMIT: Duration = Duration::from_secs(60);

/// The issue's bound on the health's and the echo's p99 during the storm.
const P99_TARGET: Duration = Duration::from_millis(50);

/// What one storm measured.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StormFigures {
    /// Spawns asked for.
    pub requested: u32,
    /// Every spawn's answer by kind (`ok` is a 201).
    pub spawns: Tally,
    /// Spawns still waiting for their answer when the deadline passed.
    pub spawns_unanswered_at_deadline: u64,
    /// Latency of the 201s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawn_latency: Option<Latency>,
    /// From the first spawn sent to the last answered.
    pub spawns_ms: f64,
    /// `GET /v1/health` through the window.
    pub health: ProbeFigures,
    /// The attached session's echo through the window.
    pub echo: ProbeFigures,
    /// The whole window, first spawn to its close.
    pub window_ms: f64,
    /// How the window closed.
    pub ended: Ended,
    /// The most of the daemon's children seen running at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_running_children: Option<u32>,
    /// The daemon's CPU over the window (its threads, not its children).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daemon_cpu_ms: Option<f64>,
    /// The issue's targets, each kept or not.
    pub targets: Targets,
}

impl Figures for StormFigures {
    fn shortfall(&self) -> Option<(Outcome, String)> {
        (self.spawns_unanswered_at_deadline > 0).then(|| {
            (
                Outcome::TimedOut,
                format!(
                    "{} of {} spawns unanswered at the deadline",
                    self.spawns_unanswered_at_deadline, self.requested
                ),
            )
        })
    }
}

/// Issue 35's targets for the storm, and what missed each.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Targets {
    /// Whether every target held.
    pub met: bool,
    /// What missed, one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missed: Vec<String>,
}

impl Targets {
    /// Judges `f` against the issue: health and echo p99 under 50 ms with every probe
    /// answered, no connection failed or broken, every spawn answered.
    fn of(f: &StormFigures) -> Targets {
        let mut missed = Vec::new();
        for (name, probe) in [("health", &f.health), ("echo", &f.echo)] {
            match probe.latency {
                Some(l) if l.p99_us >= P99_TARGET.as_secs_f64() * 1e6 => missed.push(format!(
                    "{name} p99 {:.1} ms, not under {} ms",
                    l.p99_us / 1e3,
                    P99_TARGET.as_millis()
                )),
                Some(_) => {}
                None => missed.push(format!("{name}: no probe answered")),
            }
            if probe.answers.timed_out > 0 {
                missed.push(format!(
                    "{name}: {} probes unanswered in 10 s",
                    probe.answers.timed_out
                ));
            }
            if let Some(why) = &probe.stopped_early {
                missed.push(format!("{name} stopped early: {why}"));
            }
        }
        let faults = f.spawns.connection_faults()
            + f.health.answers.connection_faults()
            + f.echo.answers.connection_faults();
        if faults > 0 {
            missed.push(format!("{faults} connections failed or reset"));
        }
        let unanswered = f.spawns.unanswered() + f.spawns_unanswered_at_deadline;
        if unanswered > 0 {
            missed.push(format!("{unanswered} of {} spawns unanswered", f.requested));
        }
        Targets {
            met: missed.is_empty(),
            missed,
        }
    }
}

/// Runs one storm against `cx`'s daemon; its sessions go into `ledger`.
pub async fn run(
    cx: &Context,
    ledger: &SessionLedger,
    deadline: Deadline,
) -> anyhow::Result<StormFigures> {
    let id = cx.spawn_shell(ledger, deadline).await?;
    let client = AttachClient::connect(&cx.api, &id, TERMINAL, deadline).await?;
    let mut echo = AttachEcho::start(client, deadline).await?;
    // The first trip comes back only once `cat` reads; the probed ones start after it.
    deadline
        .within("waiting for cat to echo", echo.round_trip(b'.'))
        .await??;
    echo.start_timing();

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let spawned = Cell::new(false);
    let cpu_before = cx.server_cpu();
    let started = Instant::now();
    let storm = async {
        let spawns = async {
            let s = spawn_all(cx, ledger, deadline).await;
            spawned.set(true);
            s
        };
        let (spawns, settled) = tokio::join!(spawns, settle::watch(cx.pid, &spawned, deadline));
        // Closing the window stops both probers.
        let _ = stop.send(true);
        (spawns, settled)
    };
    let (health, echo_figures, (spawns, settled)) = tokio::join!(
        probe::health(&cx.api, stopped.clone()),
        probe::echo(&mut echo, stopped),
        storm
    );
    let window = started.elapsed();
    let daemon_cpu_ms = cx
        .server_cpu()
        .zip(cpu_before)
        .and_then(|(after, before)| after.since(before))
        .map(millis);
    echo.close().await;

    let mut figures = StormFigures {
        requested: cx.plan.storm.sessions,
        spawn_latency: spawns.latency(),
        spawns_unanswered_at_deadline: u64::from(cx.plan.storm.sessions)
            .saturating_sub(spawns.tally.total()),
        spawns: spawns.tally,
        spawns_ms: millis(spawns.elapsed),
        health,
        echo: echo_figures,
        window_ms: millis(window),
        ended: settled.ended,
        peak_running_children: settled.peak_running,
        daemon_cpu_ms,
        targets: Targets::default(),
    };
    figures.targets = Targets::of(&figures);
    Ok(figures)
}

/// The storm's spawns as they were answered.
struct Spawns {
    tally: Tally,
    /// The 201s' latencies.
    latencies: Vec<Duration>,
    /// From the first sent to the last answered (or the deadline).
    elapsed: Duration,
}

impl Spawns {
    fn latency(&self) -> Option<Latency> {
        Latency::from_samples(&mut self.latencies.clone())
    }
}

/// Sends every spawn of the storm, `--storm-concurrency` at a time, until all are answered or
/// `deadline` passes; what was still in flight then is left out of the tally.
async fn spawn_all(cx: &Context, ledger: &SessionLedger, deadline: Deadline) -> Spawns {
    let plan = &cx.plan.storm;
    let tally = RefCell::new(Tally::default());
    let latencies = RefCell::new(Vec::with_capacity(plan.sessions as usize));
    let started = Instant::now();
    let all = futures_util::stream::iter(0..plan.sessions)
        .map(|_| spawn_one(cx, ledger))
        .buffer_unordered(plan.concurrency.max(1))
        .for_each(|(answer, took)| {
            if answer == Answer::Ok {
                latencies.borrow_mut().push(took);
            }
            tally.borrow_mut().add(answer);
            async {}
        });
    // Past the deadline the spawns in flight are dropped; the count shows them.
    let _ = deadline.within("spawning the storm", all).await;
    Spawns {
        tally: tally.into_inner(),
        latencies: latencies.into_inner(),
        elapsed: started.elapsed(),
    }
}

/// One storm spawn: its answer and how long it took. A created session goes into `ledger`.
async fn spawn_one(cx: &Context, ledger: &SessionLedger) -> (Answer, Duration) {
    let name = ledger.next_name();
    let req = SpawnRequest {
        agent: &cx.plan.storm.agent,
        cwd: &cx.plan.cwd,
        name: &name,
        cols: TERMINAL.cols,
        rows: TERMINAL.rows,
        limits: None,
    };
    let sent = Instant::now();
    let exchange = cx
        .api
        .exchange(Method::POST, "/v1/sessions", Some(&req.body()), SPAWN_LIMIT)
        .await;
    let took = sent.elapsed();
    let answer = Answer::of(&exchange);
    if answer == Answer::Ok {
        // A 201 without an id still made a session; cleanup finds it by its name.
        if let Some(id) = exchange.ok().and_then(|e| created_id(&e.body)) {
            ledger.record(id);
        }
    }
    (answer, took)
}

/// The `id` of a spawn's 201 body.
fn created_id(body: &[u8]) -> Option<SessionId> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    serde_json::from_value(v.get("id")?.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn latency_ms(p99: f64) -> Latency {
        Latency {
            count: 100,
            min_us: 100.0,
            p50_us: 500.0,
            p90_us: 1000.0,
            p99_us: p99 * 1e3,
            max_us: p99 * 2e3,
            mean_us: 600.0,
        }
    }

    fn probe(p99_ms: f64) -> ProbeFigures {
        let mut answers = Tally::default();
        answers.add(Answer::Ok);
        ProbeFigures {
            sent: 1,
            answers,
            latency: Some(latency_ms(p99_ms)),
            ..ProbeFigures::default()
        }
    }

    fn figures(spawns: Tally, unanswered: u64) -> StormFigures {
        StormFigures {
            requested: 3,
            spawns,
            spawns_unanswered_at_deadline: unanswered,
            spawn_latency: None,
            spawns_ms: 1.0,
            health: probe(2.0),
            echo: probe(3.0),
            window_ms: 2.0,
            ended: Ended::Quiet,
            peak_running_children: Some(3),
            daemon_cpu_ms: None,
            targets: Targets::default(),
        }
    }

    #[test]
    fn a_calm_storm_meets_every_target_and_busy_is_an_answer() {
        let mut t = Tally::default();
        t.add(Answer::Ok);
        t.add(Answer::Ok);
        t.add(Answer::Busy { retry_after: true });
        let f = figures(t, 0);
        assert_eq!(
            Targets::of(&f),
            Targets {
                met: true,
                missed: vec![]
            }
        );
        assert!(f.shortfall().is_none());
    }

    #[test]
    fn each_miss_is_named() {
        let mut t = Tally::default();
        t.add(Answer::Ok);
        t.add(Answer::Reset("connection reset by peer".into()));
        let mut f = figures(t, 1);
        f.health = probe(80.0);
        f.echo.answers.add(Answer::TimedOut);
        let targets = Targets::of(&f);
        assert!(!targets.met);
        assert_eq!(
            targets.missed,
            vec![
                "health p99 80.0 ms, not under 50 ms".to_string(),
                "echo: 1 probes unanswered in 10 s".into(),
                "1 connections failed or reset".into(),
                "2 of 3 spawns unanswered".into(),
            ]
        );
        let (outcome, why) = f.shortfall().expect("a spawn was left");
        assert_eq!(outcome, Outcome::TimedOut);
        assert_eq!(why, "1 of 3 spawns unanswered at the deadline");
    }

    #[test]
    fn a_created_session_is_read_from_its_answer() {
        let id = "0191e5c2-7b7a-7cc0-8000-000000000001";
        let body = format!(r#"{{"id":"{id}","name":"n","state":"running"}}"#);
        let got = created_id(body.as_bytes()).expect("an id");
        assert_eq!(serde_json::to_value(got).expect("serializes"), id);
        assert!(created_id(b"{}").is_none());
        assert!(created_id(b"not json").is_none());
    }
}
