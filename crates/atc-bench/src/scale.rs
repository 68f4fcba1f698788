//! Scale phase: hold N sessions at each step (500, 1,000, 2,000, 4,000 by default, cumulative:
//! a step keeps the earlier sessions and adds the rest), give a tenth of them output and an
//! attached client, and measure, with every session idle, what holding them costs the daemon:
//! RSS and RSS per session, open descriptors per session, the idle CPU, `GET /v1/sessions`
//! latency and echo p99 on one session. Then it checks how linear RSS is in N. While a step
//! ramps it also reads RSS between the idle spawns and the busy ones, which splits the growth
//! into what an idle session costs and what one that has printed a screenful costs.
//!
//! The busy tenth are `shell` sessions: each gets a client that types a command printing a
//! screenful and then stays attached, reading (which also answers the daemon's pings), until the
//! phase ends. The first busy session then turns into a raw `cat` and carries the echo trips of
//! every step. The other sessions are of the run's `--agent` and never get a byte.
//!
//! Before each step it reads the kernel's PTY count and refuses a step that needs more PTYs than
//! are free, rather than failing halfway with thousands of sessions up; once a step has shown
//! descriptors per session, it also refuses a step that would pass the daemon's open-file limit.
//! A step that is refused, fails or times out ends the phase with the earlier rows kept. The
//! phase needs the daemon on this machine: every figure comes from its `/proc` entry.

use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use futures_util::StreamExt as _;
use serde::Serialize;
use thiserror::Error;
use tokio::time::Instant;

use super::attach::{AttachClient, Event};
use super::cleanup::SessionLedger;
use super::echo::{time_round_trips, AttachEcho};
use super::limits::{Limit, OpenFileLimit, PtyCount};
use super::payload;
use super::phase::{Deadline, DeadlinePassed, Figures, Outcome};
use super::rss::DaemonPid;
use super::spawn::{spawn_batch, spawn_one};
use super::stats::{millis, round3, Latency};
use super::{Context, TERMINAL};

/// The steps of issue 10: up to 4,000 sessions, near the default `kernel.pty.max` of 4,096.
pub const DEFAULT_STEPS: [u32; 4] = [500, 1000, 2000, 4000];

/// One session in this many is busy (has printed and has a client attached).
const BUSY_ONE_IN: u32 = 10;

/// `GET /v1/sessions` calls timed per step; enough for a p99 that is the slowest but one.
const LIST_CALLS: usize = 20;

/// Echo trips per step: a few hundred give a stable p99 without stretching a step.
const ECHO_TRIPS: u32 = 300;

/// How long the daemon is left alone to measure its idle CPU. CPU time comes in 10 ms ticks,
/// so 10 s resolves a tenth of a percent: the target is under 1 %, and near 0 is what an
/// idle fleet should cost.
const IDLE_WINDOW: Duration = Duration::from_secs(10);

/// Checks `--scale-steps`: at least one, and growing, since each step keeps the earlier
/// sessions (a step smaller than the last would have to end some).
pub fn checked_steps(steps: &[u32]) -> Result<Vec<u32>, String> {
    if steps.is_empty() {
        return Err("--scale-steps needs at least one step".into());
    }
    for w in steps.windows(2) {
        if let [a, b] = w {
            if a >= b {
                return Err(format!(
                    "--scale-steps must grow from step to step, each keeping the sessions of \
                     the last ({a} is followed by {b})"
                ));
            }
        }
    }
    Ok(steps.to_vec())
}

/// Sessions of a step of `n` that are busy: a tenth, at least one (the echo session).
pub fn busy_for(n: u32) -> u32 {
    n.div_ceil(BUSY_ONE_IN)
}

/// Why a step of `step` sessions, `held` of them already up, cannot get its PTYs.
pub fn pty_refusal(step: u32, held: u32, pty: PtyCount) -> Option<String> {
    let needed = u64::from(step.saturating_sub(held));
    (needed > pty.free()).then(|| {
        format!(
            "refused: {step} sessions need {needed} more PTYs, but kernel.pty.max is {} with {} \
             in use, so only {} are free (raise it with `sysctl kernel.pty.max=N`)",
            pty.max,
            pty.in_use,
            pty.free()
        )
    })
}

/// Why a step would pass the daemon's soft open-file limit: `open` descriptors now, and
/// `per_session` more for each of the `step - held` new sessions, as the last step measured.
pub fn fd_refusal(
    step: u32,
    held: u32,
    open: u64,
    per_session: f64,
    soft: Limit,
) -> Option<String> {
    let Limit::Count(soft) = soft else {
        return None;
    };
    let projected = open as f64 + per_session.max(0.0) * f64::from(step.saturating_sub(held));
    (projected > soft as f64).then(|| {
        format!(
            "refused: {step} sessions would need about {projected:.0} descriptors in the daemon \
             ({per_session:.2} per session), past its open-file limit of {soft}"
        )
    })
}

/// A step the limits rule out; it fails the phase before any of its sessions is spawned.
#[derive(Debug, Error)]
#[error("{0}")]
struct StepRefused(String);

/// What the scale phase measured.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleFigures {
    /// The kernel's PTY count before the first step.
    pub pty: PtyCount,
    /// The daemon's `RLIMIT_NOFILE`, when readable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_file_limit: Option<OpenFileLimit>,
    /// Daemon RSS before the first spawn.
    pub baseline_rss_kib: u64,
    /// Daemon descriptors before the first spawn.
    pub baseline_fds: u64,
    /// One row per step that completed, in order.
    pub steps: Vec<ScaleStep>,
    /// How linear RSS is in N, once two steps completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub linearity: Option<Linearity>,
    /// The step that did not complete, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
}

/// A step that was refused, failed or timed out; the phase stopped there.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stopped {
    /// Its N.
    pub step: u32,
    /// Timed out or failed (a refusal is a failure).
    pub outcome: Outcome,
    /// What happened.
    pub reason: String,
}

impl Figures for ScaleFigures {
    fn shortfall(&self) -> Option<(Outcome, String)> {
        self.stopped
            .as_ref()
            .map(|s| (s.outcome, format!("step {}: {}", s.step, s.reason)))
    }
}

/// One step's figures, all taken with every session idle.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleStep {
    /// Sessions held.
    pub sessions: u32,
    /// Of those, how many printed a screenful and have a client attached.
    pub busy: u32,
    /// Of those clients, how many were still attached when the step was measured.
    pub attached: u32,
    /// Wall time to bring the sessions from the last step's count up to this one.
    pub ramp_ms: f64,
    /// `kernel.pty.nr` once the step's sessions were up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pty_in_use: Option<u64>,
    /// Daemon RSS.
    pub rss_kib: u64,
    /// `(rss - baseline) / sessions`.
    pub rss_per_session_kib: f64,
    /// Daemon descriptors.
    pub fds: u64,
    /// `(fds - baseline) / sessions`.
    pub fds_per_session: f64,
    /// RSS the daemon grew by per idle session this step spawned, read right after they
    /// were spawned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_added_kib: Option<f64>,
    /// RSS the daemon grew by per busy session this step added: a screenful printed at the
    /// bench's 120×40 and a client attached, read once all of them had printed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_added_kib: Option<f64>,
    /// Daemon CPU over the idle window, in % of one core.
    pub idle_cpu_pct: f64,
    /// Length of that window.
    pub idle_window_ms: f64,
    /// `GET /v1/sessions` latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub list: Option<Latency>,
    /// Sessions in the last listing (the daemon's, the bench's or not).
    pub listed: usize,
    /// Echo round trips on the echo session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub echo: Option<Latency>,
}

/// A least-squares line through the steps' `(sessions, RSS)` and how far they stray from it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Linearity {
    /// Slope: what one more session costs, in KiB.
    pub slope_kib_per_session: f64,
    /// RSS the line gives at 0 sessions (near the baseline when RSS is linear).
    pub intercept_kib: f64,
    /// The largest distance of a step's RSS from the line, in % of the line's value there.
    pub max_deviation_pct: f64,
    /// Each step's RSS per session over the first step's; all near 1 when RSS is linear
    /// through the baseline.
    pub per_session_vs_first: Vec<f64>,
}

impl Linearity {
    /// The line through the steps, or `None` with fewer than two.
    pub fn of(steps: &[ScaleStep]) -> Option<Linearity> {
        let points: Vec<(f64, f64)> = steps
            .iter()
            .map(|s| (f64::from(s.sessions), s.rss_kib as f64))
            .collect();
        let per_session: Vec<f64> = steps.iter().map(|s| s.rss_per_session_kib).collect();
        Linearity::from_points(&points, &per_session)
    }

    /// The fit over `(n, rss)` points, and `per_session` figures against the first.
    pub fn from_points(points: &[(f64, f64)], per_session: &[f64]) -> Option<Linearity> {
        if points.len() < 2 {
            return None;
        }
        let len = points.len() as f64;
        let mean_x = points.iter().map(|p| p.0).sum::<f64>() / len;
        let mean_y = points.iter().map(|p| p.1).sum::<f64>() / len;
        let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
        if sxx <= 0.0 {
            return None;
        }
        let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
        let slope = sxy / sxx;
        let intercept = mean_y - slope * mean_x;
        let max_deviation_pct = points
            .iter()
            .map(|&(x, y)| {
                let fitted = intercept + slope * x;
                if fitted > 0.0 {
                    (y - fitted).abs() / fitted * 100.0
                } else {
                    0.0
                }
            })
            .fold(0.0, f64::max);
        let first = per_session.first().copied().unwrap_or(0.0);
        let per_session_vs_first = per_session
            .iter()
            .map(|p| if first > 0.0 { round3(p / first) } else { 0.0 })
            .collect();
        Some(Linearity {
            slope_kib_per_session: round3(slope),
            intercept_kib: round3(intercept),
            max_deviation_pct: round3(max_deviation_pct),
            per_session_vs_first,
        })
    }
}

/// Tasks that keep the busy sessions' clients reading; dropping this aborts them, which drops
/// their sockets, so a phase cut off at its deadline detaches every client before cleanup.
#[derive(Default)]
struct Readers(Vec<actix_rt::task::JoinHandle<()>>);

impl Readers {
    fn keep_reading(&mut self, mut client: AttachClient) {
        self.0.push(actix_rt::spawn(async move {
            // Reading drains what the daemon sends and answers its pings; a socket that ends
            // or errs ends the task, and `still_attached` counts it out.
            while let Ok(event) = client.next().await {
                if matches!(event, Event::Closed(_)) {
                    return;
                }
            }
        }));
    }

    fn still_attached(&self) -> u32 {
        self.0.iter().filter(|t| !t.is_finished()).count() as u32
    }
}

impl Drop for Readers {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// The sessions held so far and the clients on the busy ones.
struct Held {
    sessions: u32,
    busy: u32,
    /// The first busy session, a raw `cat` behind its own client.
    echo: Option<AttachEcho>,
    readers: Readers,
}

/// What the daemon used before the phase spawned anything.
#[derive(Debug, Clone, Copy)]
struct Baseline {
    rss_kib: u64,
    fds: u64,
}

/// Runs the scale phase over `steps` (already checked); every session goes into `ledger`.
pub async fn run(
    cx: &Context,
    ledger: &SessionLedger,
    deadline: Deadline,
    steps: &[u32],
) -> anyhow::Result<ScaleFigures> {
    let pid = cx.pid.context(
        "the scale phase reads the daemon's /proc entry, and the daemon did not give its pid",
    )?;
    let pty = PtyCount::read().context("reading /proc/sys/kernel/pty/{max,nr}")?;
    let baseline = Baseline {
        rss_kib: pid
            .rss_kib()
            .context("the scale phase needs the daemon on this machine: no VmRSS")?,
        fds: pid
            .open_fds()
            .context("the scale phase needs the daemon on this machine: no /proc/<pid>/fd")?,
    };
    let mut figures = ScaleFigures {
        pty,
        open_file_limit: pid.open_file_limit(),
        baseline_rss_kib: baseline.rss_kib,
        baseline_fds: baseline.fds,
        steps: Vec::with_capacity(steps.len()),
        linearity: None,
        stopped: None,
    };
    let mut held = Held {
        sessions: 0,
        busy: 0,
        echo: None,
        readers: Readers::default(),
    };
    for &n in steps {
        cx.progress.step(&format!("scale: {n} sessions"));
        let refusal = refuse(n, &held, &figures, pid);
        let result = match refusal {
            Some(why) => Err(StepRefused(why).into()),
            None => step(cx, ledger, deadline, pid, &mut held, n, baseline).await,
        };
        match result {
            Ok(row) => figures.steps.push(row),
            Err(err) => {
                let outcome = if err.downcast_ref::<DeadlinePassed>().is_some() {
                    Outcome::TimedOut
                } else {
                    Outcome::Failed
                };
                figures.stopped = Some(Stopped {
                    step: n,
                    outcome,
                    reason: format!("{err:#}"),
                });
                break;
            }
        }
    }
    figures.linearity = Linearity::of(&figures.steps);
    if let Some(echo) = held.echo.take() {
        echo.close().await;
    }
    Ok(figures)
}

/// Why step `n` must not start, judged on the kernel's PTY count now and, once a step measured
/// descriptors per session, on the daemon's open-file limit.
fn refuse(n: u32, held: &Held, figures: &ScaleFigures, pid: DaemonPid) -> Option<String> {
    let Some(pty) = PtyCount::read() else {
        return Some("cannot read /proc/sys/kernel/pty/{max,nr}".into());
    };
    if let Some(why) = pty_refusal(n, held.sessions, pty) {
        return Some(why);
    }
    let last = figures.steps.last()?;
    let soft = figures.open_file_limit?.soft;
    let open = pid.open_fds()?;
    fd_refusal(n, held.sessions, open, last.fds_per_session, soft)
}

/// Brings the sessions up to `n` and measures them.
async fn step(
    cx: &Context,
    ledger: &SessionLedger,
    deadline: Deadline,
    pid: DaemonPid,
    held: &mut Held,
    n: u32,
    baseline: Baseline,
) -> anyhow::Result<ScaleStep> {
    let started = Instant::now();
    let mut echo = match held.echo.take() {
        Some(echo) => echo,
        None => {
            let client = busy_shell(cx, ledger, deadline).await?;
            held.sessions += 1;
            held.busy += 1;
            AttachEcho::start(client, deadline).await?
        }
    };
    let ramped = echo
        .answering_pings(ramp(cx, ledger, deadline, pid, held, n))
        .await;
    held.echo = Some(echo);
    let added = ramped??;
    let ramp_ms = millis(started.elapsed());
    let pty_in_use = PtyCount::read().map(|p| p.in_use);

    // Every session is idle now: the busy ones have printed their screen and sit at a prompt,
    // their clients reading nothing. The CPU window comes first, before this bench's own calls.
    let idle_started = Instant::now();
    let before = pid.cpu_ticks().context("reading the daemon's CPU time")?;
    deadline
        .within("measuring the idle CPU", tokio::time::sleep(IDLE_WINDOW))
        .await?;
    let after = pid.cpu_ticks().context("reading the daemon's CPU time")?;
    let window = idle_started.elapsed();
    let used = after
        .since(before)
        .context("the daemon's CPU counter went backwards (was it restarted?)")?;
    let idle_cpu_pct = round3(used.as_secs_f64() / window.as_secs_f64() * 100.0);

    let rss_kib = pid.rss_kib().context("reading the daemon's VmRSS")?;
    let fds = pid.open_fds().context("reading /proc/<pid>/fd")?;
    let per = |now: u64, base: u64| round3((now as f64 - base as f64) / f64::from(n.max(1)));

    let mut list_samples = Vec::with_capacity(LIST_CALLS);
    let mut listed = 0;
    for _ in 0..LIST_CALLS {
        let sent = Instant::now();
        let sessions = deadline
            .within("listing the sessions", cx.api.list())
            .await??;
        list_samples.push(sent.elapsed());
        listed = sessions.len();
    }

    let echo = held
        .echo
        .as_mut()
        .context("the echo session was set up in the first step")?;
    let mut echo_samples =
        time_round_trips(echo, ECHO_TRIPS, deadline, "timing echo round trips").await?;

    Ok(ScaleStep {
        sessions: held.sessions,
        busy: held.busy,
        // The echo session's client is attached while it echoes.
        attached: held.readers.still_attached() + 1,
        ramp_ms,
        pty_in_use,
        rss_kib,
        rss_per_session_kib: per(rss_kib, baseline.rss_kib),
        fds,
        fds_per_session: per(fds, baseline.fds),
        idle_added_kib: added.idle_kib,
        busy_added_kib: added.busy_kib,
        idle_cpu_pct,
        idle_window_ms: millis(window),
        list: Latency::from_samples(&mut list_samples),
        listed,
        echo: Latency::from_samples(&mut echo_samples),
    })
}

/// What one ramp added to the daemon's RSS, per session of each kind it added.
struct RampRss {
    idle_kib: Option<f64>,
    busy_kib: Option<f64>,
}

/// RSS growth from `before` to `after`, per one of `count` sessions.
fn added_per(before: Option<u64>, after: Option<u64>, count: u32) -> Option<f64> {
    let (before, after) = (before?, after?);
    (count > 0).then(|| round3((after as f64 - before as f64) / f64::from(count)))
}

/// Spawns the idle and busy sessions that bring `held` up to `n`.
async fn ramp(
    cx: &Context,
    ledger: &SessionLedger,
    deadline: Deadline,
    pid: DaemonPid,
    held: &mut Held,
    n: u32,
) -> anyhow::Result<RampRss> {
    let new_busy = busy_for(n).saturating_sub(held.busy);
    let new_idle = n.saturating_sub(held.sessions + new_busy);
    let rss_before = pid.rss_kib();

    const IDLE_SPAWNS: &str = "spawning the idle sessions";
    let batch = spawn_batch(new_idle, cx.plan.concurrency, deadline, IDLE_SPAWNS, |_| {
        spawn_one(cx, ledger)
    })
    .await;
    held.sessions += u32::try_from(batch.spawned).unwrap_or(u32::MAX);
    if batch.timed_out {
        return Err(DeadlinePassed(IDLE_SPAWNS).into());
    }
    if batch.failed > 0 {
        anyhow::bail!(
            "{} of {new_idle} idle spawns failed; the first: {}",
            batch.failed,
            batch.first_error.unwrap_or_default()
        );
    }
    let rss_idle = pid.rss_kib();

    let mut busy = futures_util::stream::iter(0..new_busy)
        .map(|_| busy_shell(cx, ledger, deadline))
        .buffer_unordered(cx.plan.concurrency.max(1));
    while let Some(client) = busy.next().await {
        let client = client?;
        held.sessions += 1;
        held.busy += 1;
        held.readers.keep_reading(client);
    }
    Ok(RampRss {
        idle_kib: added_per(rss_before, rss_idle, new_idle),
        busy_kib: added_per(rss_idle, pid.rss_kib(), new_busy),
    })
}

/// Spawns a `shell` session, attaches, and has it print a screenful; returns the client once
/// the screen is full.
async fn busy_shell(
    cx: &Context,
    ledger: &SessionLedger,
    deadline: Deadline,
) -> anyhow::Result<AttachClient> {
    let id = cx.spawn_shell(ledger, deadline).await?;
    let mut client = AttachClient::connect(&cx.api, &id, TERMINAL, deadline).await?;
    let line = payload::screenful_line(TERMINAL.cols, TERMINAL.rows);
    client.send(Bytes::from(line)).await?;
    deadline
        .within(
            "waiting for a busy session to print its screen",
            client.wait_for(payload::SCREEN),
        )
        .await??;
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_per_session_needs_both_readings_and_some_sessions() {
        assert_eq!(added_per(Some(1000), Some(1600), 4), Some(150.0));
        assert_eq!(added_per(Some(1000), Some(900), 2), Some(-50.0));
        assert_eq!(added_per(Some(1000), Some(1600), 0), None);
        assert_eq!(added_per(None, Some(1600), 4), None);
    }

    #[test]
    fn steps_must_grow() {
        assert_eq!(checked_steps(&[5, 10]), Ok(vec![5, 10]));
        assert_eq!(checked_steps(&DEFAULT_STEPS), Ok(DEFAULT_STEPS.to_vec()));
        assert!(checked_steps(&[]).is_err());
        assert!(checked_steps(&[10, 10]).is_err());
        let e = checked_steps(&[1000, 500]).expect_err("shrinks");
        assert!(e.contains("1000 is followed by 500"), "{e}");
    }

    #[test]
    fn a_tenth_is_busy_and_never_none() {
        assert_eq!(busy_for(500), 50);
        assert_eq!(busy_for(4000), 400);
        assert_eq!(busy_for(5), 1);
        assert_eq!(busy_for(11), 2);
    }

    #[test]
    fn a_step_past_the_free_ptys_is_refused_before_it_starts() {
        let pty = PtyCount {
            max: 4096,
            in_use: 100,
            reserve: Some(1024),
        };
        // 2,000 held, 2,000 more needed, 3,996 free.
        assert_eq!(pty_refusal(4000, 2000, pty), None);
        // From nothing, 4,000 > 3,996.
        let why = pty_refusal(4000, 0, pty).expect("refused");
        assert!(
            why.contains("4000 more PTYs") && why.contains("3996 are free"),
            "{why}"
        );
        assert_eq!(pty_refusal(3996, 0, pty), None);
    }

    #[test]
    fn a_step_past_the_open_file_limit_is_refused() {
        // 1,000 sessions at 2.5 fds each would take 300 + 2,500 descriptors.
        let why = fd_refusal(2000, 1000, 300, 2.5, Limit::Count(1024)).expect("refused");
        assert!(why.contains("2800") && why.contains("1024"), "{why}");
        assert_eq!(fd_refusal(2000, 1000, 300, 2.5, Limit::Count(20000)), None);
        assert_eq!(fd_refusal(2000, 1000, 300, 2.5, Limit::Unlimited), None);
    }

    #[test]
    fn linear_rss_fits_exactly_and_keeps_per_session_flat() {
        // 20 MiB baseline and 16 KiB per session.
        let points: Vec<(f64, f64)> = [500.0, 1000.0, 2000.0, 4000.0]
            .iter()
            .map(|&n| (n, 20480.0 + 16.0 * n))
            .collect();
        let l = Linearity::from_points(&points, &[16.0, 16.0, 16.0, 16.0]).expect("fits");
        assert_eq!(l.slope_kib_per_session, 16.0);
        assert_eq!(l.intercept_kib, 20480.0);
        assert_eq!(l.max_deviation_pct, 0.0);
        assert_eq!(l.per_session_vs_first, vec![1.0; 4]);
    }

    #[test]
    fn rss_that_bends_shows_as_deviation() {
        // Quadratic growth: 0.01 KiB × n², no baseline.
        let ns = [500.0, 1000.0, 2000.0, 4000.0];
        let points: Vec<(f64, f64)> = ns.iter().map(|&n| (n, 0.01 * n * n)).collect();
        let per: Vec<f64> = ns.iter().map(|&n| 0.01 * n).collect();
        let l = Linearity::from_points(&points, &per).expect("fits");
        assert!(l.max_deviation_pct > 10.0, "{l:?}");
        assert_eq!(l.per_session_vs_first, vec![1.0, 2.0, 4.0, 8.0]);
        assert_eq!(Linearity::from_points(&points[..1], &per[..1]), None);
        assert_eq!(
            Linearity::from_points(&[(5.0, 1.0), (5.0, 2.0)], &[1.0, 1.0]),
            None
        );
    }
}
