//! The soak suite: thousands of sessions (4,000 by default, near `kernel.pty.max` = 4,096)
//! held for ten minutes with churn across them, and what holding them costs over time.
//!
//! One daemon child holds the fleet: nine in ten are quiet `cat`s, one in ten prints steadily
//! (`atc-proof ticker`). Before the ramp the suite reads the kernel's PTY count and lowers the
//! fleet to what is free; after the first sessions it knows descriptors per session and lowers
//! it again to what the daemon's open-file limit allows. During the hold ([`churn`]) clients
//! attach, read, resize and detach, echo clients type into `cat`s, `GET /v1/sessions` is timed
//! once a second, and sessions are killed and respawned so the fleet turns over; every
//! `--sample-secs` a reading of RSS, descriptors, WAL size and sessions alive goes into the
//! report's series ([`sample`]). Before the hold every session is used once (attached at the
//! churn's widest width, with output on its screen), since a session's first use allocates
//! its screen and its first widening grows it; the first quarter of the hold is warm-up (the tickers' rings fill); over the
//! rest, RSS and descriptors must not grow.
//!
//! `--grow` ([`grow`]) instead finds the largest fleet the machine holds and what stops it.
//! Every session and the daemon are ended before the suite returns, failed or not.

pub mod attach;
pub mod churn;
mod fleet;
mod grow;
mod sample;
pub mod ticker;

use std::time::Duration;

use anyhow::Context as _;
use atc_bench::limits::{Limit, PtyCount};
use futures_util::StreamExt as _;
use tokio::time::Instant;

use crate::report::{Report, Want};
use crate::Plan;
use atc_testkit::{ChildDaemon, DaemonSpec};
use churn::{ChurnKind, Ctx, Rates, Tally};
use fleet::{Fleet, Kind};
use sample::{Probe, Trend};

/// The fleet.
pub const DEFAULT_SESSIONS: u64 = 4000;

/// PTYs left free for everyone else on the machine (terminals, other tests).
const PTY_MARGIN: u64 = 32;

/// Share of the daemon's open-file limit the projected fleet may use; the rest is for its
/// database, sockets and the churn's clients.
const FD_SHARE: f64 = 0.9;

/// Sessions spawned first to measure descriptors per session.
const PROBE_SESSIONS: u64 = 50;

/// Spawns in flight during the ramp (two cores: more only queues).
const RAMP_CONCURRENCY: usize = 8;

/// Sessions primed at once before the hold.
const PRIME_CONCURRENCY: usize = 16;

/// The daemon's ring per session: its minimum, so the tickers fill theirs within the warm-up
/// and the steady state is reached (at the default 1 MiB a ticker would need most of the hold).
const RING_BYTES: u64 = 256 * 1024;

/// Share of the hold that is warm-up, left out of the growth figures.
const WARM_UP: f64 = 0.25;

/// Share of the hold at each end whose latencies are the start and end figures.
const LATENCY_WINDOW: f64 = 0.2;

/// RSS growth over the steady state may be this share of the RSS at its start (2 %), but at
/// least [`RSS_GROWTH_FLOOR_KIB`]. Why 2 %: at the full size the steady state sees ~10,000
/// attaches and ~450 turnovers; a leak of one KiB per attach already passes it, while the
/// allocator's own drift over a held fleet stays well under 1 %.
const RSS_GROWTH_SHARE: f64 = 0.02;

/// Below this much growth nothing is read into it: a small fleet's RSS moves by a few MiB
/// with the allocator's arenas alone.
const RSS_GROWTH_FLOOR_KIB: f64 = 4096.0;

/// What a soak run does besides the plan's count and limit.
#[derive(Debug, Clone, PartialEq)]
pub struct SoakOptions {
    /// How long the full fleet is held with churn.
    pub hold: Duration,
    /// Time between two readings.
    pub sample_every: Duration,
    /// Find the largest fleet instead of holding one.
    pub grow: bool,
    /// With `grow`: lower the daemon's open-file limit to this first.
    pub grow_fd_limit: Option<u64>,
    /// The churn to run during the hold.
    pub churn: Vec<ChurnKind>,
}

impl Default for SoakOptions {
    /// The issue's: ten minutes, a reading every 10 s.
    fn default() -> SoakOptions {
        SoakOptions {
            hold: Duration::from_secs(600),
            sample_every: Duration::from_secs(10),
            grow: false,
            grow_fd_limit: None,
            churn: ChurnKind::ALL.to_vec(),
        }
    }
}

/// Runs the soak with the default options.
pub async fn run(plan: &Plan) -> anyhow::Result<Report> {
    run_with(plan, &SoakOptions::default()).await
}

/// Runs the soak (or the growth, with `opts.grow`).
pub async fn run_with(plan: &Plan, opts: &SoakOptions) -> anyhow::Result<Report> {
    let started = std::time::Instant::now();
    let mut report = if opts.grow {
        grow::run(plan, opts).await?
    } else {
        hold(plan, opts).await?
    };
    report.elapsed_secs = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The ticker's byte rate: enough to fill the ring in half the warm-up, within 1–64 KiB/s.
fn ticker_bytes_per_sec(hold: Duration) -> u64 {
    let fill_secs = (hold.as_secs_f64() * WARM_UP / 2.0).max(1.0);
    ((RING_BYTES as f64 / fill_secs) as u64).clamp(1024, 64 * 1024)
}

/// Starts the soak's daemon on `<work>/<name>/state`, with its cap on running sessions at
/// `max_sessions` (`None`: the one the daemon works out from the host).
async fn start_daemon(
    plan: &Plan,
    name: &str,
    ticker_rate: u64,
    max_sessions: Option<u64>,
) -> anyhow::Result<ChildDaemon> {
    let dir = plan.work_dir.join(name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let config = serde_json::json!({
        "agents": {
            fleet::QUIET_AGENT: {"bin": "cat"},
            fleet::TICKER_AGENT: {
                "bin": plan.daemon_bin,
                "args": ["ticker", "--bytes-per-sec", ticker_rate.to_string()],
            },
        },
        "limits": {"ringBytes": RING_BYTES, "maxSessions": max_sessions},
    });
    let mut spec = DaemonSpec::new(plan.daemon_bin.clone(), config);
    spec.start_limit = Duration::from_secs(60);
    ChildDaemon::launch(&spec, &dir.join("state"), &dir.join("daemon.log")).await
}

/// The fleet size the PTYs allow: what was asked, or what is free less a margin.
pub fn sessions_for_ptys(requested: u64, pty: Option<PtyCount>) -> (u64, Option<String>) {
    let Some(pty) = pty else {
        return (requested, None);
    };
    let room = pty.free().saturating_sub(PTY_MARGIN);
    if requested <= room {
        return (requested, None);
    }
    (
        room,
        Some(format!(
            "lowered from {requested} to {room} sessions: kernel.pty.max is {} with {} in use \
             (and {PTY_MARGIN} left for others); raise it with `sysctl kernel.pty.max=N`",
            pty.max, pty.in_use
        )),
    )
}

/// The fleet size the daemon's open-file limit allows, from `open` descriptors with `held`
/// sessions up and `per_session` more for each.
pub fn sessions_for_fds(
    requested: u64,
    held: u64,
    open: u64,
    per_session: f64,
    soft: Limit,
) -> (u64, Option<String>) {
    let Limit::Count(soft) = soft else {
        return (requested, None);
    };
    let room = (soft as f64 * FD_SHARE - open as f64).max(0.0);
    let more = if per_session > 0.0 {
        (room / per_session) as u64
    } else {
        u64::MAX
    };
    let fits = held.saturating_add(more);
    if requested <= fits {
        return (requested, None);
    }
    (
        fits,
        Some(format!(
            "lowered from {requested} to {fits} sessions: at {per_session:.2} descriptors a \
             session the daemon would pass {:.0} % of its open-file limit of {soft} \
             (raise it with `ulimit -n` or LimitNOFILE=)",
            FD_SHARE * 100.0
        )),
    )
}

/// Spawns sessions until the fleet holds `n` (or `deadline` passes, or a spawn fails);
/// answers the spawn latencies.
async fn ramp(
    client: &atc_client::DaemonClient,
    fleet: &Fleet,
    tally: &Tally,
    n: u64,
    deadline: Instant,
) -> Vec<Duration> {
    let from = fleet.len() as u64;
    let mut latencies = Vec::new();
    let mut spawns = futures_util::stream::iter(from..n)
        .map(|i| fleet.spawn(client, Kind::of_index(i)))
        .buffer_unordered(RAMP_CONCURRENCY);
    while let Ok(Some(answer)) = tokio::time::timeout_at(deadline, spawns.next()).await {
        match answer {
            Ok((_, latency)) => latencies.push(latency),
            Err(e) => tally.error(format!("ramp spawn: {e}")),
        }
    }
    latencies
}

/// The latencies of `samples` taken in `[from, to)` seconds.
fn window(samples: &[(f64, Duration)], from: f64, to: f64) -> Vec<Duration> {
    samples
        .iter()
        .filter(|(t, _)| *t >= from && *t < to)
        .map(|(_, d)| *d)
        .collect()
}

/// Ramps the fleet up, holds it with churn, and tears it down.
async fn hold(plan: &Plan, opts: &SoakOptions) -> anyhow::Result<Report> {
    let mut report = Report::new(plan.suite, plan.seed);
    let started = Instant::now();
    let requested = plan.count_or(DEFAULT_SESSIONS);
    let teardown = Duration::from_secs(30 + requested / 50);
    let hold_by = started + plan.limit.saturating_sub(teardown);

    let pty = PtyCount::read();
    if let Some(p) = pty {
        report.info("ptyMax", p.max as f64, "count");
        report.info("ptyInUseBefore", p.in_use as f64, "count");
        if let Some(r) = p.reserve {
            report.info("ptyReserve", r as f64, "count");
        }
    } else {
        report.note("kernel.pty.max and pty.nr are unreadable; no PTY check was made");
    }
    let (mut n, why) = sessions_for_ptys(requested, pty);
    if let Some(why) = why {
        report.note(why);
    }

    // The fleet asked for, past the cap the daemon would work out (half of kernel.pty.max):
    // the PTY check above already keeps it within what the machine has.
    let daemon = start_daemon(plan, "soak", ticker_bytes_per_sec(opts.hold), Some(n)).await?;
    let probe = Probe::new(daemon.pid(), daemon.state_dir());
    let client = daemon.client();
    let fleet = Fleet::new(plan.work_dir.display().to_string());
    let tally = Tally::default();
    let base = probe.read(0.0);
    let fd_limit = probe.pid().open_file_limit();
    if let Some(Limit::Count(soft)) = fd_limit.map(|l| l.soft) {
        report.info("daemonFdLimit", soft as f64, "count");
    }

    // Ramp: a first batch shows descriptors per session, which may lower the fleet.
    let mut ramp_latency = ramp(&client, &fleet, &tally, n.min(PROBE_SESSIONS), hold_by).await;
    let after_probe = probe.read(0.0);
    if let (Some(limit), Some(open), Some(base_fds)) = (fd_limit, after_probe.fds, base.fds) {
        let held = fleet.len() as u64;
        if held > 0 {
            let per = (open as f64 - base_fds as f64) / held as f64;
            let (fits, why) = sessions_for_fds(n, held, open, per, limit.soft);
            if let Some(why) = why {
                report.note(why);
            }
            n = fits;
        }
    }
    ramp_latency.extend(ramp(&client, &fleet, &tally, n, hold_by).await);
    eprintln!(
        "atc-proof soak: {} of {n} sessions spawned in {:.0} s; priming, then the hold",
        fleet.len(),
        started.elapsed().as_secs_f64()
    );
    report.info("sessionsRequested", requested as f64, "count");
    report.figure(
        "sessionsHeld",
        fleet.len() as f64,
        "count",
        Want::Equal(n as f64),
    );
    report.latency("rampSpawn", &mut ramp_latency);

    // Every session used once before the hold (see `churn::prime`); what that costs is the
    // first use's memory.
    let before_prime = probe.pid().rss_kib();
    let members = fleet.members();
    let mut primes = futures_util::stream::iter(members.iter().copied().enumerate())
        .map(|(i, m)| {
            let client = &client;
            let mut rng = crate::rng::Rng::new(plan.seed ^ (0x9e1e_0000 + i as u64));
            async move { churn::prime(client, m, &mut rng).await }
        })
        .buffer_unordered(PRIME_CONCURRENCY);
    while let Ok(Some(primed)) = tokio::time::timeout_at(hold_by, primes.next()).await {
        if let Err(e) = primed {
            tally.error(e);
        }
    }
    drop(primes);
    if let (Some(before), Some(after)) = (before_prime, probe.pid().rss_kib()) {
        report.info(
            "rssFirstUsePerSessionKib",
            (after as f64 - before as f64) / members.len().max(1) as f64,
            "KiB",
        );
    }

    // The hold.
    let rates = Rates::for_fleet(n, opts.hold, opts.sample_every);
    let start = Instant::now();
    let end = hold_by.min(start + opts.hold);
    let cx = Ctx {
        client: &client,
        fleet: &fleet,
        tally: &tally,
        probe: &probe,
        start,
        end,
        seed: plan.seed,
    };
    churn::run(&cx, rates, &opts.churn).await;
    let held_secs = start.elapsed().as_secs_f64();
    let hold_secs = opts.hold.as_secs_f64();
    if held_secs + 0.5 < hold_secs {
        report.note(format!(
            "cut short: held {held_secs:.0} s of {hold_secs:.0} s before the time limit \
             (--seconds) left only the teardown"
        ));
    }
    report.figure(
        "heldSecs",
        held_secs.round(),
        "s",
        Want::AtLeast(hold_secs.floor()),
    );

    // Every held session must have its row.
    let rows_missing = match client.get_json("/v1/fleet").await {
        Ok(answer) => {
            let rows: std::collections::HashSet<String> = answer["fleet"]
                .as_array()
                .map(|rows| {
                    rows.iter()
                        .filter_map(|r| r["sessionId"].as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            fleet
                .members()
                .iter()
                .filter(|m| !rows.contains(&m.id.to_string()))
                .count() as u64
        }
        Err(e) => {
            tally.error(format!("GET /v1/fleet: {e}"));
            fleet.len() as u64
        }
    };

    figures(&mut report, &tally, &base, n, rates, held_secs);
    report.zero("fleetRowsMissing", rows_missing, "count");

    // Teardown.
    let ended = fleet.end_all(&client, 16, teardown).await;
    report.zero(
        "sessionsNotEnded",
        (ended.total - ended.ended) as u64,
        "count",
    );
    if let Some(e) = ended.first_error {
        report.note(format!("ending the fleet: {e}"));
    }
    if ended.timed_out {
        report.note("ending the fleet ran out of time; the daemon's stop ended the rest");
    }
    if let Some(rss) = probe.pid().rss_kib() {
        report.info("rssAfterTeardownKib", rss as f64, "KiB");
    }
    let errors = tally.first_errors();
    for e in errors {
        report.note(e);
    }
    // Whether it exited by itself or took the SIGKILL, it is gone.
    daemon.stop_within(Duration::from_secs(30)).await;
    report.series(sample::series(&tally.samples.borrow()));
    Ok(report)
}

/// The figures the hold's tally and readings give.
fn figures(
    report: &mut Report,
    tally: &Tally,
    base: &sample::Sample,
    n: u64,
    rates: Rates,
    held_secs: f64,
) {
    report.zero("errors", tally.errors(), "count");
    report.zero("sessionsLost", tally.lost_count(), "count");
    for (name, cell) in [
        ("attaches", &tally.attaches),
        ("resizes", &tally.resizes),
        ("resizedFrames", &tally.resized_frames),
        ("desyncs", &tally.desyncs),
        ("echoTrips", &tally.echo_trips),
        ("listCalls", &tally.lists),
        ("turnovers", &tally.turnovers),
        ("liveBytesRead", &tally.live_bytes),
    ] {
        report.info(name, cell.get() as f64, "count");
    }

    let samples = tally.samples.borrow();
    let steady_from = held_secs * WARM_UP;
    let rss = sample::points(&samples, steady_from, |s| s.rss_kib);
    let fds = sample::points(&samples, steady_from, |s| s.fds);
    if let Some(rss0) = base.rss_kib {
        report.info("rssBaselineKib", rss0 as f64, "KiB");
    }
    match Trend::fit(&rss) {
        Some(t) => {
            report.info("rssSteadyStartKib", t.start.round(), "KiB");
            report.info("rssSteadyEndKib", t.end.round(), "KiB");
            if let Some(rss0) = base.rss_kib {
                report.info(
                    "rssPerSessionKib",
                    (t.start - rss0 as f64) / n.max(1) as f64,
                    "KiB",
                );
            }
            let bound = (t.start * RSS_GROWTH_SHARE)
                .max(RSS_GROWTH_FLOOR_KIB)
                .round();
            report.figure(
                "rssSteadyGrowthKib",
                t.growth.round(),
                "KiB",
                Want::AtMost(bound),
            );
            report.info("rssSteadyGrowthPct", t.growth_pct, "%");
        }
        None => report.note("too few readings in the steady state to fit RSS growth"),
    }
    if let Some(t) = Trend::fit(&fds) {
        if let Some(fds0) = base.fds {
            report.info(
                "fdsPerSession",
                (t.start - fds0 as f64) / n.max(1) as f64,
                "count",
            );
        }
        // The churn's own sockets come and go; more than their number is a leak.
        let churn_sockets = f64::from(rates.attach_slots + rates.echo_clients) + 8.0;
        report.figure(
            "fdSteadyGrowth",
            t.growth.round(),
            "count",
            Want::AtMost(churn_sockets),
        );
    }
    let wal_max = samples.iter().map(|s| s.wal_bytes).max().unwrap_or(0);
    report.info("walMaxBytes", wal_max as f64, "bytes");
    drop(samples);

    let early = held_secs * LATENCY_WINDOW;
    let late = held_secs * (1.0 - LATENCY_WINDOW);
    for (name, samples) in [
        ("spawn", &tally.spawn),
        ("echo", &tally.echo),
        ("list", &tally.list),
    ] {
        let samples = samples.borrow();
        report.latency(&format!("{name}Start"), &mut window(&samples, 0.0, early));
        report.latency(&format!("{name}End"), &mut window(&samples, late, f64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleet_fits_the_free_ptys() {
        let pty = |in_use| {
            Some(PtyCount {
                max: 4096,
                in_use,
                reserve: Some(1024),
            })
        };
        assert_eq!(sessions_for_ptys(4000, pty(10)), (4000, None));
        let (n, why) = sessions_for_ptys(4000, pty(200));
        assert_eq!(n, 4096 - 200 - PTY_MARGIN);
        assert!(why.is_some_and(|w| w.contains("kernel.pty.max is 4096 with 200 in use")));
        assert_eq!(sessions_for_ptys(4000, None), (4000, None));
    }

    #[test]
    fn the_fleet_fits_the_open_file_limit() {
        // 50 held with 200 open at 3 a session: 0.9 × 10,000 − 200 = 8,800 more fds, 2,933
        // more sessions.
        let (n, why) = sessions_for_fds(4000, 50, 200, 3.0, Limit::Count(10_000));
        assert_eq!(n, 50 + 2933);
        assert!(why.is_some_and(|w| w.contains("10000")));
        assert_eq!(
            sessions_for_fds(4000, 50, 200, 3.0, Limit::Count(20_000)),
            (4000, None)
        );
        assert_eq!(
            sessions_for_fds(4000, 50, 200, 3.0, Limit::Unlimited),
            (4000, None)
        );
    }

    #[test]
    fn tickers_fill_their_ring_within_the_warm_up() {
        // Ten minutes: 75 s to fill 256 KiB.
        assert_eq!(ticker_bytes_per_sec(Duration::from_secs(600)), 3495);
        assert_eq!(ticker_bytes_per_sec(Duration::from_secs(20)), 64 * 1024);
        assert_eq!(ticker_bytes_per_sec(Duration::from_secs(100_000)), 1024);
    }

    #[test]
    fn windows_split_by_time() {
        let s = [
            (0.5, Duration::from_millis(1)),
            (5.0, Duration::from_millis(2)),
            (9.5, Duration::from_millis(3)),
        ];
        assert_eq!(window(&s, 0.0, 2.0), vec![Duration::from_millis(1)]);
        assert_eq!(window(&s, 8.0, f64::MAX), vec![Duration::from_millis(3)]);
    }
}
