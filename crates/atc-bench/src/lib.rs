//! `atc-bench` (also `atc bench`): the load tool. Against a running daemon it measures spawning (rate, latency,
//! memory per session), the echo round trip through the attach WebSocket, one-client throughput,
//! fan-out to several clients, and a slow client beside a fast one; and it measures the same
//! operations on a bare PTY in this process, so each daemon figure comes with its ceiling from
//! the same run. The echo, throughput and fan-out phases also run, right after the daemon's,
//! against the floor (`floor`): the thinnest WebSocket-to-PTY server, started in this process,
//! driven by the same measuring code through the same attach client. The opt-in scale phase
//! holds thousands of sessions and reports what each step costs the daemon.
//!
//! Layout: one module per phase (`spawn`, `echo`, `throughput`, `fanout`, `slow_client`,
//! `scale`, `bare_pty`); `limits` reads the kernel's PTY count and the daemon's fd limit and count; `delivery` is the payload procedure the three throughput-type phases share;
//! `api` is the few daemon calls a run makes, on `atc-client`, and `attach` one attach socket; `stream` and `payload`
//! are the pure offset and byte-count logic; `phase` bounds each phase in time; `cleanup` ends a
//! phase's sessions; `progress` is the phase line on stderr (a terminal's only); `rss` reads the daemon's memory and `cpu` a server's CPU; `floor` is the
//! floor server; `stats` and `report` make the figures.
//!
//! Everything runs on one actix System thread (awc is not `Send`): call [`run`] from inside
//! `actix_rt::System::new().block_on(..)`. Every phase has a deadline and reports a timeout instead
//! of hanging, and every daemon phase kills and forgets its sessions afterwards, timed out or not.

mod api;
mod attach;
mod bare_pty;
mod cleanup;
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
mod report;
mod rounds;
pub mod rss;
mod scale;
mod slow_client;
mod spawn;
pub mod stats;
mod stream;
mod throughput;

use std::future::Future;
use std::time::Duration;

use anyhow::Context as _;
use futures_util::future::{FutureExt as _, LocalBoxFuture};
use serde::Serialize;

pub use report::Report;

use api::{DaemonApi, SessionId, SpawnRequest, TermSize};
use cleanup::SessionLedger;
use cpu::Ticks;
use floor::Floor;
use payload::Payload;
use phase::{run_bounded, Deadline, Figures, PhaseReport};
use progress::PhaseProgress;
use rss::DaemonPid;

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

/// A part of the run that can be selected with `--phases`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// Spawn N sessions with concurrency C.
    Spawn,
    /// Echo round trips through the attach WebSocket.
    Echo,
    /// One client reading the payload.
    Throughput,
    /// Several clients reading the same payload.
    Fanout,
    /// A slow client beside a fast one.
    Slow,
    /// N sessions held at each of `--scale-steps`, a tenth busy: RSS, fds, idle CPU, listing
    /// and echo latency per step. Not in the default list: it holds thousands of PTYs.
    Scale,
    /// The bare-PTY ceilings (spawn, echo, read), no daemon needed.
    Bare,
}

impl Phase {
    /// The default phases, in the order they run; `scale` must be asked for.
    pub const ALL: [Phase; 6] = [
        Phase::Spawn,
        Phase::Echo,
        Phase::Throughput,
        Phase::Fanout,
        Phase::Slow,
        Phase::Bare,
    ];
}

/// Whether the echo, throughput and fan-out phases also run against the floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FloorUse {
    /// Against the daemon only (`--no-floor`).
    Off,
    /// Against the daemon, each followed by the same phase against the floor (the default).
    Beside,
    /// Against the floor only, no daemon needed (`--floor-only`); phases without a floor
    /// (spawn, slow client) are skipped.
    Only,
}

/// Command-line arguments of `atc bench`.
///
/// The spawn phase uses `--agent`; the others always use the built-in `shell` agent because they
/// type commands. The issue's spawn figures are for `cat` sessions: for those, define an agent
/// named `cat` in the daemon's config (`{"agents":{"cat":{"bin":"cat"}}}`) and pass `--agent cat`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Sessions the spawn phase creates (and the bare spawn ceiling cycles).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub sessions: u32,
    /// Spawn requests in flight at once (also used for cleanup).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub concurrency: u32,
    /// Agent the spawn phase spawns (an agent id from the daemon's config).
    #[arg(long, default_value = SHELL_AGENT)]
    pub agent: String,
    /// Working directory of every spawned session (absolute, on the daemon's machine).
    #[arg(long, default_value = "/tmp")]
    pub cwd: String,
    /// Program the floor runs in each of its PTYs (default: what the daemon's `shell` agent
    /// runs, `$SHELL`, else `/bin/sh`). Give the daemon's `shell` agent the same program, or
    /// the two sides start different shells.
    #[arg(long, value_name = "PROGRAM")]
    pub floor_shell: Option<String>,
    /// Payload written by the session in the throughput, fan-out and slow-client phases, in MiB.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub payload_mib: u32,
    /// What the payload is: `lines` of printable text, or a real agent's session replayed
    /// (`claude`, `codex`; recorded by the real-agent tests).
    #[arg(long, value_enum, default_value_t = payload::Shape::Lines)]
    pub payload: payload::Shape,
    /// Echo round trips timed.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..))]
    pub echo_count: u32,
    /// Clients attached to one session in the fan-out phase.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub fanout_clients: u32,
    /// Reading rate of the slow client, in MiB/s.
    #[arg(long, default_value_t = 1.0)]
    pub slow_rate_mib: f64,
    /// Steps of the scale phase: sessions held at each, comma-separated and growing (each step
    /// keeps the sessions of the last).
    #[arg(long, value_delimiter = ',', default_values_t = scale::DEFAULT_STEPS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub scale_steps: Vec<u32>,
    /// Phases to run, comma-separated; they always run in the listed order (`scale` only
    /// when named).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Phase::ALL)]
    pub phases: Vec<Phase>,
    /// Rounds of the echo, throughput, fan-out and slow-client phases. Each round runs the
    /// daemon's phase and then the floor's; the report shows each phase's median round and
    /// every round's key figure. One pass on a busy machine swings more than most changes.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=99))]
    pub rounds: u32,
    /// Deadline of each phase, in seconds; a phase past it is reported as timed out.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub phase_timeout_secs: u64,
    /// Write each spawn of the spawn phase to this file as CSV (when it was sent, in ms from
    /// the batch's start, and its latency), for a look at how the slow ones fall: spread
    /// out, or held up together.
    #[arg(long, value_name = "PATH")]
    pub spawn_timeline: Option<std::path::PathBuf>,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Skip the floor: do not run echo, throughput and fan-out against the in-process minimal
    /// WebSocket-to-PTY server beside the daemon's.
    #[arg(long, conflicts_with = "floor_only")]
    pub no_floor: bool,
    /// Run echo, throughput and fan-out against the floor only (and the bare PTY, if selected);
    /// no daemon is needed.
    #[arg(long)]
    pub floor_only: bool,
}

impl BenchArgs {
    /// Whether the selected phases talk to a daemon; with `--phases bare` alone the caller need
    /// not find one (and may pass empty `url` and `token` to [`run`]).
    pub fn needs_daemon(&self) -> bool {
        !self.floor_only && self.phases.iter().any(|p| *p != Phase::Bare)
    }

    fn floor_use(&self) -> FloorUse {
        match (self.no_floor, self.floor_only) {
            (_, true) => FloorUse::Only,
            (true, false) => FloorUse::Off,
            (false, false) => FloorUse::Beside,
        }
    }
}

/// The arguments, checked once; nothing downstream re-reads [`BenchArgs`].
#[derive(Debug, Clone)]
struct Plan {
    /// Selected phases, deduplicated and in run order.
    phases: Vec<Phase>,
    sessions: u32,
    concurrency: usize,
    agent: String,
    cwd: String,
    /// The floor's shell, resolved once.
    floor_shell: String,
    payload: Payload,
    echo_count: u32,
    fanout_clients: u32,
    slow_rate_mib: f64,
    /// Growing steps of the scale phase.
    scale_steps: Vec<u32>,
    /// Rounds of the phases compared with the floor (and the slow client).
    rounds: u32,
    phase_limit: Duration,
    floor: FloorUse,
    /// Where the spawn phase's timeline goes, if anywhere.
    spawn_timeline: Option<std::path::PathBuf>,
}

impl Plan {
    fn from_args(args: &BenchArgs) -> anyhow::Result<Plan> {
        anyhow::ensure!(
            args.slow_rate_mib.is_finite() && args.slow_rate_mib > 0.0,
            "--slow-rate-mib must be a positive number of MiB/s, not {}",
            args.slow_rate_mib
        );
        anyhow::ensure!(
            args.cwd.starts_with('/'),
            "--cwd must be an absolute directory, not {:?}",
            args.cwd
        );
        anyhow::ensure!(!args.agent.is_empty(), "--agent must name an agent");
        let scale_steps = scale::checked_steps(&args.scale_steps).map_err(anyhow::Error::msg)?;
        let mut phases = args.phases.clone();
        phases.sort_unstable();
        phases.dedup();
        Ok(Plan {
            phases,
            sessions: args.sessions,
            concurrency: args.concurrency as usize,
            agent: args.agent.clone(),
            cwd: args.cwd.clone(),
            floor_shell: args
                .floor_shell
                .clone()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(floor::default_shell),
            payload: Payload {
                bytes: u64::from(args.payload_mib) << 20,
                shape: args.payload,
            },
            echo_count: args.echo_count,
            fanout_clients: args.fanout_clients,
            slow_rate_mib: args.slow_rate_mib,
            scale_steps,
            rounds: args.rounds,
            phase_limit: Duration::from_secs(args.phase_timeout_secs),
            floor: args.floor_use(),
            spawn_timeline: args.spawn_timeline.clone(),
        })
    }

    fn has(&self, phase: Phase) -> bool {
        self.phases.contains(&phase)
    }

    fn needs_daemon(&self) -> bool {
        self.floor != FloorUse::Only && self.phases.iter().any(|p| *p != Phase::Bare)
    }

    /// Whether the daemon runs `phase`.
    fn on_daemon(&self, phase: Phase) -> bool {
        self.has(phase) && self.floor != FloorUse::Only
    }

    /// Whether the floor runs `phase` (only echo, throughput and fan-out have one).
    fn on_floor(&self, phase: Phase) -> bool {
        self.has(phase)
            && self.floor != FloorUse::Off
            && matches!(phase, Phase::Echo | Phase::Throughput | Phase::Fanout)
    }
}

/// The server a phase runs against.
enum Server {
    /// The daemon at the context's URL; sessions are spawned and ended over its API.
    Daemon,
    /// The floor in this process; sessions are spawned and ended by calling it.
    Floor(Floor),
}

/// What every server phase needs: the client, the daemon's pid for RSS, the plan, the run's id
/// that prefixes session names, and which server it is.
struct Context {
    api: DaemonApi,
    pid: Option<DaemonPid>,
    plan: Plan,
    run_id: String,
    server: Server,
    /// The phase line on stderr, shared by the daemon's and the floor's contexts.
    progress: PhaseProgress,
}

impl Context {
    /// A ledger for one phase's sessions, named `bench-<run>-<phase>-<n>`.
    fn ledger(&self, phase: &str) -> SessionLedger {
        SessionLedger::new(format!("bench-{}-{phase}-", self.run_id))
    }

    /// Spawns a `shell` session at the bench's terminal size, named and recorded in `ledger`.
    async fn spawn_shell(
        &self,
        ledger: &SessionLedger,
        deadline: Deadline,
    ) -> anyhow::Result<SessionId> {
        if let Server::Floor(floor) = &self.server {
            let id = floor.spawn_shell(&self.plan.floor_shell, &self.plan.cwd, TERMINAL)?;
            ledger.record(id);
            return Ok(id);
        }
        let name = ledger.next_name();
        let spawn = SpawnRequest {
            agent: SHELL_AGENT,
            cwd: &self.plan.cwd,
            name: &name,
            cols: TERMINAL.cols,
            rows: TERMINAL.rows,
        };
        let id = deadline
            .within("spawning the shell session", self.api.spawn(&spawn))
            .await??;
        ledger.record(id);
        Ok(id)
    }

    /// Announces a phase and runs its body under the phase limit.
    async fn bounded<T, F, Fut>(&self, label: &str, body: F) -> PhaseReport<T>
    where
        T: Figures,
        F: FnOnce(Deadline) -> Fut,
        Fut: Future<Output = anyhow::Result<T>>,
    {
        self.progress.start(label);
        run_bounded(self.plan.phase_limit, body).await
    }

    /// CPU the server has used so far: the daemon process, or the floor's threads.
    fn server_cpu(&self) -> Option<Ticks> {
        match &self.server {
            Server::Daemon => self.pid.and_then(DaemonPid::cpu_ticks),
            Server::Floor(floor) => floor.cpu_ticks(),
        }
    }

    /// Runs a server phase: announced as `label`, with a ledger of its own named for `key`,
    /// bounded, and its sessions ended afterwards however it ended.
    async fn server_phase<T, F>(&self, label: &str, key: &str, body: F) -> PhaseReport<T>
    where
        T: Figures,
        F: for<'a> FnOnce(
            &'a Context,
            &'a SessionLedger,
            Deadline,
        ) -> LocalBoxFuture<'a, anyhow::Result<T>>,
    {
        let ledger = self.ledger(key);
        let r = self.bounded(label, |d| body(self, &ledger, d)).await;
        self.clean_up(&ledger, r).await
    }

    /// Ends a phase's sessions and, for the daemon, attaches the cleanup figures to its report.
    async fn clean_up<T>(&self, ledger: &SessionLedger, report: PhaseReport<T>) -> PhaseReport<T> {
        self.clean_up_within(ledger, report, CLEANUP_LIMIT).await
    }

    /// [`Context::clean_up`] with its own time limit, for phases with more sessions than usual.
    async fn clean_up_within<T>(
        &self,
        ledger: &SessionLedger,
        mut report: PhaseReport<T>,
        limit: Duration,
    ) -> PhaseReport<T> {
        if let Server::Floor(floor) = &self.server {
            // This blocks the bench's thread while the shells are killed and their readers
            // end; the phase is over, so nothing it measures is in flight.
            floor.end_sessions(&ledger.ids());
            return report;
        }
        report.cleanup = Some(
            ledger
                .clean_up(&self.api, self.plan.concurrency, limit, self.pid)
                .await,
        );
        report
    }
}

/// Runs the selected phases against the daemon at `url` (e.g. `http://127.0.0.1:7767`) with
/// `token`, and returns the report. Must run inside an actix System. Fails only when the run
/// cannot start (bad arguments, daemon unreachable); a phase that fails or times out is recorded
/// in the report and the run goes on. Ctrl-C interrupts the current phase, which still cleans up,
/// and skips the rest; the report then has what was measured so far.
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

/// Runs every phase the arguments ask for against the daemon at `url`.
pub async fn run(args: BenchArgs, url: String, token: String) -> anyhow::Result<Report> {
    let plan = Plan::from_args(&args)?;
    plan.payload
        .shape
        .prepare()
        .context("writing the replayed payload's file")?;
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
    let mut report = Report::new(&cx, needs_daemon.then_some(url));
    let fx = fx.as_ref();

    if cx.plan.on_daemon(Phase::Spawn) && !report.interrupted() {
        let r = cx.server_phase("spawn", "spawn", |cx, ledger, d| {
            spawn::run(cx, ledger, d).boxed_local()
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
    if bare && !report.interrupted() {
        let payload = cx.plan.payload;
        report.bare_read = Some(
            cx.bounded("bare PTY read", |d| bare_pty::read(payload, d))
                .await,
        );
    }
    cx.progress.finish();
    Ok(report)
}

/// The phases compared with the floor, and the slow client, `--rounds` times; the report gets
/// each phase's standing round ([`rounds::pick`]) and, past one round, every round's key figure.
async fn run_rounds(cx: &Context, fx: Option<&Context>, report: &mut Report) {
    let mut echo = Vec::new();
    let mut floor_echo = Vec::new();
    let mut throughput = Vec::new();
    let mut floor_throughput = Vec::new();
    let mut fanout = Vec::new();
    let mut floor_fanout = Vec::new();
    let mut slow = Vec::new();
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
        if cx.plan.on_daemon(Phase::Throughput) && !*stop {
            one_round(
                cx,
                "throughput",
                "throughput",
                |cx, ledger, d| throughput::run(cx, ledger, d).boxed_local(),
                stop,
                &mut throughput,
            )
            .await;
        }
        if let Some(fx) = fx.filter(|fx| fx.plan.on_floor(Phase::Throughput) && !*stop) {
            one_round(
                fx,
                "floor throughput",
                "throughput",
                |cx, ledger, d| throughput::run(cx, ledger, d).boxed_local(),
                stop,
                &mut floor_throughput,
            )
            .await;
        }
        if cx.plan.on_daemon(Phase::Fanout) && !*stop {
            one_round(
                cx,
                "fan-out",
                "fanout",
                |cx, ledger, d| fanout::run(cx, ledger, d).boxed_local(),
                stop,
                &mut fanout,
            )
            .await;
        }
        if let Some(fx) = fx.filter(|fx| fx.plan.on_floor(Phase::Fanout) && !*stop) {
            one_round(
                fx,
                "floor fan-out",
                "fanout",
                |cx, ledger, d| fanout::run(cx, ledger, d).boxed_local(),
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
                "slow client",
                "slow",
                move |cx, ledger, d| slow_client::run(cx, ledger, d, solo).boxed_local(),
                stop,
                &mut slow,
            )
            .await;
        }
    }
    let mut keys = rounds::RoundKeys {
        rounds: cx.plan.rounds,
        ..Default::default()
    };
    fn stand<T>(
        rounds: Vec<PhaseReport<T>>,
        key: impl Fn(&T) -> Option<f64>,
        keys: &mut Vec<f64>,
    ) -> Option<PhaseReport<T>> {
        let picked = rounds::pick(rounds, key)?;
        *keys = picked.keys;
        Some(picked.report)
    }
    report.echo = stand(echo, rounds::echo_key, &mut keys.echo_p50_us);
    report.floor_echo = stand(floor_echo, rounds::echo_key, &mut keys.floor_echo_p50_us);
    report.throughput = stand(
        throughput,
        rounds::throughput_key,
        &mut keys.throughput_mib_per_sec,
    );
    report.floor_throughput = stand(
        floor_throughput,
        rounds::throughput_key,
        &mut keys.floor_throughput_mib_per_sec,
    );
    report.fanout = stand(
        fanout,
        rounds::fanout_key,
        &mut keys.fanout_slowest_mib_per_sec,
    );
    report.floor_fanout = stand(
        floor_fanout,
        rounds::fanout_key,
        &mut keys.floor_fanout_slowest_mib_per_sec,
    );
    report.slow_client = stand(slow, rounds::slow_key, &mut keys.slow_fast_mib_per_sec);
    report.rounds = (cx.plan.rounds > 1).then_some(keys);
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn parse(args: &[&str]) -> Result<BenchArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied())).map(|c| c.bench)
    }

    #[test]
    fn defaults_match_the_issue() {
        let a = parse(&[]).expect("defaults parse");
        assert_eq!((a.sessions, a.concurrency, a.payload_mib), (1000, 16, 256));
        assert_eq!((a.echo_count, a.fanout_clients), (2000, 8));
        assert_eq!(a.agent, "shell");
        assert_eq!(a.phases, Phase::ALL.to_vec());
        assert!(a.needs_daemon());
        let plan = Plan::from_args(&a).expect("defaults are valid");
        assert_eq!(plan.payload.bytes, 268_435_456);
        assert_eq!(plan.rounds, 1, "one pass unless asked");
    }

    #[test]
    fn phases_are_deduplicated_and_run_in_order() {
        let a = parse(&["--phases", "bare,spawn,bare"]).expect("parses");
        let plan = Plan::from_args(&a).expect("valid");
        assert_eq!(plan.phases, vec![Phase::Spawn, Phase::Bare]);
        let bare = parse(&["--phases", "bare"]).expect("parses");
        assert!(!bare.needs_daemon());
    }

    #[test]
    fn the_floor_runs_beside_the_daemon_unless_told_otherwise() {
        let plan = |args: &[&str]| Plan::from_args(&parse(args).expect("parses")).expect("valid");
        let beside = plan(&[]);
        assert_eq!(beside.floor, FloorUse::Beside);
        assert!(beside.on_daemon(Phase::Echo) && beside.on_floor(Phase::Echo));
        assert!(!beside.on_floor(Phase::Spawn) && !beside.on_floor(Phase::Slow));
        let off = plan(&["--no-floor"]);
        assert!(off.on_daemon(Phase::Throughput) && !off.on_floor(Phase::Throughput));
        let only = parse(&["--floor-only"]).expect("parses");
        assert!(!only.needs_daemon());
        let only = Plan::from_args(&only).expect("valid");
        assert!(!only.on_daemon(Phase::Fanout) && only.on_floor(Phase::Fanout));
        assert!(!only.on_daemon(Phase::Spawn) && only.has(Phase::Bare));
        assert!(parse(&["--floor-only", "--no-floor"]).is_err());
    }

    #[test]
    fn scale_runs_only_when_named_with_growing_steps() {
        let a = parse(&[]).expect("defaults parse");
        assert!(!a.phases.contains(&Phase::Scale));
        assert_eq!(a.scale_steps, vec![500, 1000, 2000, 4000]);
        let a = parse(&["--phases", "scale", "--scale-steps", "5,10"]).expect("parses");
        assert!(a.needs_daemon());
        let plan = Plan::from_args(&a).expect("valid");
        assert!(plan.on_daemon(Phase::Scale) && !plan.has(Phase::Spawn));
        assert_eq!(plan.scale_steps, vec![5, 10]);
        let shrinking = parse(&["--scale-steps", "10,5"]).expect("parses");
        assert!(Plan::from_args(&shrinking).is_err());
        assert!(parse(&["--scale-steps", "0,5"]).is_err());
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(parse(&["--sessions", "0"]).is_err());
        assert!(parse(&["--phases", "nope"]).is_err());
        assert!(parse(&["--rounds", "0"]).is_err());
        assert_eq!(parse(&["--rounds", "5"]).expect("parses").rounds, 5);
        let a = parse(&["--slow-rate-mib", "0"]).expect("parses");
        assert!(Plan::from_args(&a).is_err());
        let a = parse(&["--cwd", "tmp"]).expect("parses");
        assert!(Plan::from_args(&a).is_err());
    }
}
