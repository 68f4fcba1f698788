//! `atc-bench` (also `atc bench`): the load tool. Against a running daemon it measures spawning (rate, latency,
//! memory per session), the echo round trip through the attach WebSocket, one-client throughput,
//! fan-out to several clients, and a slow client beside a fast one; and it measures the same
//! operations on a bare PTY in this process, so each daemon figure comes with its ceiling from
//! the same run. The echo, throughput and fan-out phases also run, right after the daemon's,
//! against the floor (`floor`): the thinnest WebSocket-to-PTY server, started in this process,
//! driven by the same measuring code through the same attach client. The opt-in scale phase
//! holds thousands of sessions and reports what each step costs the daemon. The opt-in reach
//! phase times lookups, listings and resizes as the owner and as a principal (`X-Atc-As`),
//! the owner's being the ceiling of the principal's. The opt-in storm
//! phase spawns hundreds of sessions whose start-up burns CPU and times the daemon's health and
//! an attached echo meanwhile, on the daemon and, beside it, on one without CPU priority.
//!
//! Layout: `args` is the command line and the plan checked from it; `context` what every server
//! phase runs with (the daemon or the floor, its client, its ledger of sessions); this file runs
//! the phases in order and in rounds. One module per phase (`spawn`, `echo`, `throughput`,
//! `fanout`, `slow_client`, `scale`, `reach`, `storm`, `bare_pty`); `limits` reads the kernel's PTY count and the daemon's fd limit and count; `delivery` is the payload procedure the three throughput-type phases share;
//! `api` is the few daemon calls a run makes, on `atc-client`, and `attach` one attach socket; `stream` and `payload`
//! are the pure offset and byte-count logic (`payload` also makes the payload's shapes); `phase` bounds each phase in time; `cleanup` ends a
//! phase's sessions; `progress` is the phase line on stderr (a terminal's only); `rss` reads the daemon's memory and `cpu` a server's CPU; `floor` is the
//! floor server; `stats` and `report` make the figures.
//!
//! Everything runs on one actix System thread (awc is not `Send`): call [`run`] from inside
//! `actix_rt::System::new().block_on(..)`. Every phase has a deadline and reports a timeout instead
//! of hanging, and every daemon phase kills and forgets its sessions afterwards, timed out or not.

mod api;
mod args;
mod attach;
mod bare_pty;
mod cleanup;
mod context;
mod cpu;
mod delivery;
mod echo;
mod fanout;
pub mod floor;
mod launch_split;
pub mod limits;
mod payload;
mod phase;
mod progress;
mod reach;
mod report;
mod rounds;
pub mod rss;
mod scale;
mod slow_client;
mod spawn;
pub mod stats;
mod storm;
mod stream;
mod throughput;

use std::time::Duration;

use anyhow::Context as _;
use futures_util::future::{FutureExt as _, LocalBoxFuture};

pub use args::{BenchArgs, FloorUse, Phase};
pub use payload::Shape;
pub use report::Report;

use api::{DaemonApi, TermSize};
use args::Plan;
use cleanup::SessionLedger;
use context::{Context, Server};
use floor::Floor;
use phase::{run_bounded, Deadline, Figures, PhaseReport};
use progress::PhaseProgress;
use storm::StormFigures;

/// The built-in agent that runs the user's shell: the phases that type commands need one.
const SHELL_AGENT: &str = "shell";

/// Size of every session the bench spawns and every attach it makes; attaching at the spawn size
/// keeps resizes (and the shell's redraws) out of the measurements.
const TERMINAL: TermSize = TermSize {
    cols: 120,
    rows: 40,
};

/// Time allowed to end one phase's sessions; generous because a thousand kill + forget pairs go
/// through the same daemon that was just loaded.
const CLEANUP_LIMIT: Duration = Duration::from_secs(120);

/// Time allowed for the first `GET /v1/daemon`, before any phase starts.
const HELLO_LIMIT: Duration = Duration::from_secs(10);

/// Runs the tool as `atc-bench` and `atc bench` do: finds the daemon through `state_dir` (or
/// the default one) when a phase needs it, prints the report, and gives the exit status: 130
/// after a Ctrl-C, 1 on failure.
pub fn main_with(args: BenchArgs, state_dir: Option<std::path::PathBuf>) -> std::process::ExitCode {
    match run_from_state_dir(args, state_dir) {
        Ok(false) => std::process::ExitCode::SUCCESS,
        Ok(true) => std::process::ExitCode::from(130),
        Err(err) => {
            eprintln!("atc-bench: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `Ok(true)` means the run was interrupted by Ctrl-C.
fn run_from_state_dir(
    args: BenchArgs,
    state_dir: Option<std::path::PathBuf>,
) -> anyhow::Result<bool> {
    let (url, token) = if args.needs_daemon() {
        let dir = match state_dir {
            Some(dir) => dir,
            None => atc_client::discovery::default_state_dir()?,
        };
        let found = atc_client::discovery::read_state_dir(&dir)?;
        (found.base_url, found.token)
    } else {
        (String::new(), String::new())
    };
    let json = args.json;
    let report = actix_rt::System::new().block_on(run(args, url, token))?;
    print_report(&report, json)?;
    Ok(report.interrupted())
}

/// Runs the selected phases against the daemon at `url` (e.g. `http://127.0.0.1:7767`) with
/// `token`, and returns the report. Must run inside an actix System. Fails only when the run
/// cannot start (bad arguments, daemon unreachable); a phase that fails or times out is recorded
/// in the report and the run goes on. Ctrl-C interrupts the current phase, which still cleans up,
/// and skips the rest; the report then has what was measured so far.
pub async fn run(args: BenchArgs, url: String, token: String) -> anyhow::Result<Report> {
    let plan = Plan::from_args(&args)?;
    for payload in &plan.payloads {
        payload
            .shape
            .prepare()
            .with_context(|| format!("writing the {} payload's files", payload.shape.name()))?;
    }
    let api = DaemonApi::new(&url, &token);
    let needs_daemon = plan.needs_daemon();
    let pid = if needs_daemon {
        Deadline::after(HELLO_LIMIT)
            .within("asking the daemon for its pid", api.daemon_pid())
            .await?
            .with_context(|| format!("cannot use the daemon at {url}"))?
    } else {
        None
    };
    let progress = PhaseProgress::for_stderr();
    let floor_phases = [Phase::Echo, Phase::Throughput, Phase::Fanout];
    let fx = if floor_phases.iter().any(|p| plan.on_floor(*p)) {
        let floor = Floor::start()?;
        Some(Context {
            // The floor checks no token: it listens on loopback for this run only.
            api: DaemonApi::new(&floor.url(), ""),
            pid: None,
            plan: plan.clone(),
            run_id: run_id()?,
            server: Server::Floor(floor),
            progress: progress.clone(),
        })
    } else {
        None
    };
    let cx = Context {
        api,
        pid,
        run_id: run_id()?,
        plan,
        server: Server::Daemon,
        progress,
    };
    let baseline = match &cx.plan.storm.baseline {
        Some(dir) if cx.plan.on_daemon(Phase::Storm) => Some(baseline_context(&cx, dir).await?),
        _ => None,
    };
    let mut report = Report::new(&cx, needs_daemon.then_some(url));
    report.settings.storm_baseline_url = baseline.as_ref().map(|b| b.api.url().to_string());
    let fx = fx.as_ref();

    if cx.plan.on_daemon(Phase::Spawn) && !report.interrupted() {
        let r = cx.server_phase("spawn", "spawn", |cx, ledger, d| {
            spawn::run(cx, ledger, d, None).boxed_local()
        });
        let r = r.await;
        if let (Some(path), Some(figures)) = (&cx.plan.spawn_timeline, r.figures()) {
            if let Err(e) = std::fs::write(path, spawn::timeline_csv(&figures.batch)) {
                // The report still stands; the timeline is a reading aid.
                eprintln!("atc-bench: could not write {}: {e}", path.display());
            }
        }
        report.spawn = Some(r);
    }
    if let Some(limits) = cx.plan.spawn_limits {
        if cx.plan.on_daemon(Phase::Spawn) && !report.interrupted() {
            // Right after the first pass, whose sessions are gone by now, so both start from
            // the same daemon.
            let r = cx.server_phase("spawn with limits", "spawnlim", move |cx, ledger, d| {
                spawn::run(cx, ledger, d, Some(limits)).boxed_local()
            });
            report.spawn_limited = Some(r.await);
        }
    }
    run_rounds(&cx, fx, &mut report).await;
    if cx.plan.on_daemon(Phase::Scale) && !report.interrupted() {
        let steps = cx.plan.scale_steps.clone();
        // Each step gets the phase limit, and cleanup the usual limit per thousand sessions.
        let limit = cx.plan.phase_limit * steps.len() as u32;
        let thousands = steps.last().map_or(1, |n| n.div_ceil(1000));
        let ledger = cx.ledger("scale");
        cx.progress.start("scale");
        let r = run_bounded(limit, |d| scale::run(&cx, &ledger, d, &steps)).await;
        let r = cx
            .clean_up_within(&ledger, r, CLEANUP_LIMIT * thousands)
            .await;
        report.scale = Some(r);
    }
    if cx.plan.on_daemon(Phase::Reach) && !report.interrupted() {
        let ledger = cx.ledger("reach");
        cx.progress.start("reach");
        // The phase limit for the spawns and again for each path: a thousand-session listing
        // read from cgroups takes tens of ms, and each caller times thousands.
        let limit = cx.plan.phase_limit * (1 + reach::ReachPath::ALL.len() as u32);
        let r = run_bounded(limit, |d| reach::run(&cx, &ledger, d)).await;
        let thousands = cx.plan.reach.sessions.div_ceil(1000);
        let r = cx
            .clean_up_within(&ledger, r, CLEANUP_LIMIT * thousands)
            .await;
        report.reach = Some(r);
    }
    if cx.plan.on_daemon(Phase::Storm) && !report.interrupted() {
        report.storm = Some(storm_on(&cx, "storm").await);
    }
    if let Some(bx) = baseline.as_ref().filter(|_| !report.interrupted()) {
        report.storm_baseline = Some(storm_on(bx, "storm, no CPU priority").await);
    }
    let bare = cx.plan.has(Phase::Bare);
    if bare && !report.interrupted() {
        let (n, c) = (cx.plan.sessions, cx.plan.concurrency);
        report.bare_spawn = Some(
            cx.bounded("bare PTY spawn", |d| bare_pty::spawn(n, c, d))
                .await,
        );
    }
    if bare && !report.interrupted() {
        let count = cx.plan.echo_count;
        report.bare_echo = Some(
            cx.bounded("bare PTY echo", |d| bare_pty::echo(count, d))
                .await,
        );
    }
    for (shape, payload) in report.shapes.iter_mut().zip(&cx.plan.payloads) {
        if !bare || shape.interrupted() {
            break;
        }
        let label = format!("bare PTY read ({})", payload.shape.name());
        let payload = *payload;
        shape.bare_read = Some(cx.bounded(&label, |d| bare_pty::read(payload, d)).await);
    }
    cx.progress.finish();
    Ok(report)
}

/// The context of the storm's second daemon, the one without CPU priority, found through its
/// state dir as the first one is; a run that cannot reach it does not start.
async fn baseline_context(cx: &Context, dir: &std::path::Path) -> anyhow::Result<Context> {
    let found = atc_client::discovery::read_state_dir(dir)
        .with_context(|| format!("--storm-baseline-state-dir {}", dir.display()))?;
    let api = DaemonApi::new(&found.base_url, &found.token);
    let pid = Deadline::after(HELLO_LIMIT)
        .within("asking the baseline daemon for its pid", api.daemon_pid())
        .await?
        .with_context(|| format!("cannot use the baseline daemon at {}", found.base_url))?;
    anyhow::ensure!(
        pid.is_none() || pid != cx.pid,
        "--storm-baseline-state-dir names the daemon the run is already measuring"
    );
    Ok(Context {
        api,
        pid,
        plan: cx.plan.clone(),
        run_id: run_id()?,
        server: Server::Daemon,
        progress: cx.progress.clone(),
    })
}

/// One storm on `cx`'s daemon, announced as `label`, under the storm's own deadline, with its
/// sessions ended afterwards (the usual cleanup limit per thousand).
async fn storm_on(cx: &Context, label: &str) -> PhaseReport<StormFigures> {
    let ledger = cx.ledger("storm");
    cx.progress.start(label);
    let r = run_bounded(cx.plan.storm.limit, |d| storm::run(cx, &ledger, d)).await;
    let thousands = cx.plan.storm.sessions.div_ceil(1000);
    cx.clean_up_within(&ledger, r, CLEANUP_LIMIT * thousands)
        .await
}

/// The phases compared with the floor, and the slow client, `--rounds` times: echo, then the
/// output phases once per payload shape; the report gets each phase's standing round
/// ([`rounds::pick`]) and, past one round, every round's key figure.
async fn run_rounds(cx: &Context, fx: Option<&Context>, report: &mut Report) {
    let mut echo = Vec::new();
    let mut floor_echo = Vec::new();
    let mut interrupted = report.interrupted();
    // Each floor phase runs right after the daemon's, so both see the machine in the same state.
    for _ in 0..cx.plan.rounds {
        let stop = &mut interrupted;
        if cx.plan.on_daemon(Phase::Echo) && !*stop {
            one_round(
                cx,
                "echo",
                "echo",
                |cx, ledger, d| echo::run(cx, ledger, d).boxed_local(),
                stop,
                &mut echo,
            )
            .await;
        }
        if let Some(fx) = fx.filter(|fx| fx.plan.on_floor(Phase::Echo) && !*stop) {
            one_round(
                fx,
                "floor echo",
                "echo",
                |cx, ledger, d| echo::run(cx, ledger, d).boxed_local(),
                stop,
                &mut floor_echo,
            )
            .await;
        }
    }
    let mut keys = rounds::RoundKeys {
        rounds: cx.plan.rounds,
        ..Default::default()
    };
    report.echo = stand(echo, rounds::echo_key, &mut keys.echo_p50_us);
    report.floor_echo = stand(floor_echo, rounds::echo_key, &mut keys.floor_echo_p50_us);
    report.rounds = (cx.plan.rounds > 1).then_some(keys);
    for (shape, payload) in report.shapes.iter_mut().zip(&cx.plan.payloads) {
        if interrupted {
            break;
        }
        shape_rounds(cx, fx, *payload, shape, &mut interrupted).await;
    }
}

/// The output phases with one payload, `--rounds` times, into `into`; sets `stop` if one was
/// interrupted.
async fn shape_rounds(
    cx: &Context,
    fx: Option<&Context>,
    payload: payload::Payload,
    into: &mut report::ShapeReport,
    stop: &mut bool,
) {
    let mut throughput = Vec::new();
    let mut floor_throughput = Vec::new();
    let mut fanout = Vec::new();
    let mut floor_fanout = Vec::new();
    let mut slow = Vec::new();
    let name = payload.shape.name();
    for _ in 0..cx.plan.rounds {
        if cx.plan.on_daemon(Phase::Throughput) && !*stop {
            one_round(
                cx,
                &format!("throughput ({name})"),
                "throughput",
                move |cx, ledger, d| throughput::run(cx, ledger, d, payload).boxed_local(),
                stop,
                &mut throughput,
            )
            .await;
        }
        if let Some(fx) = fx.filter(|fx| fx.plan.on_floor(Phase::Throughput) && !*stop) {
            one_round(
                fx,
                &format!("floor throughput ({name})"),
                "throughput",
                move |cx, ledger, d| throughput::run(cx, ledger, d, payload).boxed_local(),
                stop,
                &mut floor_throughput,
            )
            .await;
        }
        if cx.plan.on_daemon(Phase::Fanout) && !*stop {
            one_round(
                cx,
                &format!("fan-out ({name})"),
                "fanout",
                move |cx, ledger, d| fanout::run(cx, ledger, d, payload).boxed_local(),
                stop,
                &mut fanout,
            )
            .await;
        }
        if let Some(fx) = fx.filter(|fx| fx.plan.on_floor(Phase::Fanout) && !*stop) {
            one_round(
                fx,
                &format!("floor fan-out ({name})"),
                "fanout",
                move |cx, ledger, d| fanout::run(cx, ledger, d, payload).boxed_local(),
                stop,
                &mut floor_fanout,
            )
            .await;
        }
        if cx.plan.on_daemon(Phase::Slow) && !*stop {
            // Judged against this round's solo rate: the machine's state moves between rounds.
            let solo = throughput
                .last()
                .and_then(PhaseReport::figures)
                .filter(|f: &&throughput::ThroughputFigures| f.client.is_complete())
                .map(|f| f.client.mib_per_sec);
            one_round(
                cx,
                &format!("slow client ({name})"),
                "slow",
                move |cx, ledger, d| slow_client::run(cx, ledger, d, payload, solo).boxed_local(),
                stop,
                &mut slow,
            )
            .await;
        }
    }
    let mut keys = rounds::ShapeRoundKeys::default();
    into.throughput = stand(
        throughput,
        rounds::throughput_key,
        &mut keys.throughput_mib_per_sec,
    );
    into.floor_throughput = stand(
        floor_throughput,
        rounds::throughput_key,
        &mut keys.floor_throughput_mib_per_sec,
    );
    into.fanout = stand(
        fanout,
        rounds::fanout_key,
        &mut keys.fanout_slowest_mib_per_sec,
    );
    into.floor_fanout = stand(
        floor_fanout,
        rounds::fanout_key,
        &mut keys.floor_fanout_slowest_mib_per_sec,
    );
    into.slow_client = stand(slow, rounds::slow_key, &mut keys.slow_fast_mib_per_sec);
    into.rounds = (cx.plan.rounds > 1).then_some(keys);
}

/// The round that stands for `rounds`, with every round's key figure put in `keys`.
fn stand<T>(
    rounds: Vec<PhaseReport<T>>,
    key: impl Fn(&T) -> Option<f64>,
    keys: &mut Vec<f64>,
) -> Option<PhaseReport<T>> {
    let picked = rounds::pick(rounds, key)?;
    *keys = picked.keys;
    Some(picked.report)
}

/// One round of one phase on `cx`'s server, added to `into`; sets `stop` if it was interrupted.
async fn one_round<T, F>(
    cx: &Context,
    label: &str,
    key: &str,
    body: F,
    stop: &mut bool,
    into: &mut Vec<PhaseReport<T>>,
) where
    T: Figures,
    F: for<'a> FnOnce(
        &'a Context,
        &'a SessionLedger,
        Deadline,
    ) -> LocalBoxFuture<'a, anyhow::Result<T>>,
{
    let r = cx.server_phase(label, key, body).await;
    *stop |= r.was_interrupted();
    into.push(r);
}

/// Writes the report to stdout: JSON with `json`, else the table.
pub fn print_report(report: &Report, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", report.to_json()?);
    } else {
        print!("{}", report.to_table());
    }
    Ok(())
}

/// Progress on stderr, so a long run shows where it is without disturbing stdout (the report).
/// Eight hex digits that make this run's session names unique, so cleanup finds exactly its own.
fn run_id() -> anyhow::Result<String> {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes)
        .map_err(|e| anyhow::anyhow!("reading random bytes for the run id: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
