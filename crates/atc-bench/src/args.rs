//! What a run is asked to do: the command line of `atc bench` ([`BenchArgs`], with its
//! [`Phase`]s and [`FloorUse`]), and the [`Plan`] made of it once, checked, that the rest of
//! the run reads.

use std::time::Duration;

use serde::Serialize;

use crate::api::SessionLimits;
use crate::payload::{self, Payload};
use crate::{floor, reach, scale, SHELL_AGENT};

/// The agent the storm phase spawns unless told otherwise; the daemon's config must define it
/// (README, "Load tool").
pub const STORM_AGENT: &str = "storm";

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
    /// `--reach-sessions` sessions held while lookups, listings and resizes are timed as the
    /// owner and as a principal (`X-Atc-As`), the owner's being the ceiling. Not in the
    /// default list: it holds a thousand PTYs.
    Reach,
    /// `--storm-sessions` sessions whose start-up burns CPU, spawned at once, while `GET
    /// /v1/health` and an attached echo are timed (issue 35). Not in the default list: it
    /// loads the machine for minutes.
    Storm,
    /// The bare-PTY ceilings (spawn, echo, read), no daemon needed.
    Bare,
}

impl Phase {
    /// The default phases, in the order they run; `scale`, `reach` and `storm` must be asked
    /// for.
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
    /// Payload written by the session in the throughput, fan-out and slow-client phases, in MiB,
    /// for each shape [default: 64 MiB each].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub payload_mib: Option<u32>,
    /// What the payload is, one shape or a comma-separated list; the output phases run once per
    /// shape. `lines` of printable text; `wrapped`, one unbroken run; `sgr`, colour runs;
    /// `redraw`, an Ink status area redrawn in place; `alt`, full-screen redraws on the
    /// alternate screen; `cjk`, wide and combining characters; `scroll`, a scroll region;
    /// `tui`, a recording of vim; `claude` and `codex`, real agents' sessions replayed; `all`.
    #[arg(long, value_name = "SHAPES", default_value_t = payload::ShapeList::default(),
          value_parser = payload::parse_shapes)]
    pub payload: payload::ShapeList,
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
    /// Phases to run, comma-separated; they always run in the listed order (`scale`, `reach`
    /// and `storm` only when named).
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
    /// Run the spawn phase a second time with these `limits` on every spawn, and report both
    /// passes with their ratio: `memoryMiB=512,pids=256,cpuPercent=100` (any of the three).
    #[arg(long, value_name = "LIMITS", value_parser = parse_limits)]
    pub spawn_limits: Option<SessionLimits>,
    /// Sessions the reach phase holds (of `--agent`) while it times its requests.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub reach_sessions: u32,
    /// Requests the reach phase times on each of its paths (look up, list, resize) as each
    /// caller, the owner and the principal.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..))]
    pub reach_requests: u32,
    /// Requests the reach phase keeps in flight at once, each on a connection of its own.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub reach_clients: u32,
    /// The principal the reach phase acts as (`X-Atc-As`). On a daemon without a `principals`
    /// key any id reaches the `local` target; with one, name a principal granted the target
    /// the sessions go on.
    #[arg(long, default_value = reach::PRINCIPAL, value_name = "ID")]
    pub reach_as: String,
    /// Sessions the storm phase spawns.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..))]
    pub storm_sessions: u32,
    /// Storm spawns in flight at once.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub storm_concurrency: u32,
    /// Agent the storm spawns: one whose start-up burns about a second of CPU (README, "Load
    /// tool", has the config).
    #[arg(long, default_value = STORM_AGENT)]
    pub storm_agent: String,
    /// Deadline of the storm on each daemon, in seconds: spawning, then probing until the
    /// sessions' start-up is over. 500 sessions of a second's CPU keep 2 cores busy for
    /// over four minutes.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub storm_timeout_secs: u64,
    /// State dir of a second daemon, run with `"cgroupRoot": null` (so without its CPU
    /// priority over its sessions): the storm runs against it too, after the first, and the
    /// report puts the two side by side.
    #[arg(long, value_name = "DIR")]
    pub storm_baseline_state_dir: Option<std::path::PathBuf>,
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

    /// The storm's settings, checked.
    fn storm(&self) -> anyhow::Result<StormPlan> {
        anyhow::ensure!(
            !self.storm_agent.is_empty(),
            "--storm-agent must name an agent"
        );
        Ok(StormPlan {
            sessions: self.storm_sessions,
            concurrency: self.storm_concurrency as usize,
            agent: self.storm_agent.clone(),
            limit: Duration::from_secs(self.storm_timeout_secs),
            baseline: self.storm_baseline_state_dir.clone(),
        })
    }

    fn floor_use(&self) -> FloorUse {
        match (self.no_floor, self.floor_only) {
            (_, true) => FloorUse::Only,
            (true, false) => FloorUse::Off,
            (false, false) => FloorUse::Beside,
        }
    }
}

/// `--spawn-limits`: comma-separated `name=value` pairs with the wire names of the spawn's
/// `limits`, each within the protocol's bounds.
pub fn parse_limits(text: &str) -> Result<SessionLimits, String> {
    let mut limits = SessionLimits::default();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?} is not name=value"))?;
        let number = |v: &str| -> Result<u64, String> {
            v.trim()
                .parse()
                .map_err(|_| format!("{name} must be a whole number, not {v:?}"))
        };
        let too_big = |_| format!("{name} {value} is out of range");
        match name.trim() {
            "memoryMiB" => limits.memory_mib = Some(number(value)?),
            "pids" => limits.pids = Some(number(value)?.try_into().map_err(too_big)?),
            "cpuPercent" => limits.cpu_percent = Some(number(value)?.try_into().map_err(too_big)?),
            other => {
                return Err(format!(
                    "unknown limit {other:?}; the limits are memoryMiB, pids and cpuPercent"
                ))
            }
        }
    }
    if limits.is_empty() {
        return Err("give at least one of memoryMiB, pids and cpuPercent".into());
    }
    if let Some((name, lo, hi)) = limits.out_of_bounds() {
        return Err(format!("{name} must lie in {lo}..={hi}"));
    }
    Ok(limits)
}

/// The reach phase's settings.
#[derive(Debug, Clone)]
pub(crate) struct ReachPlan {
    pub(crate) sessions: u32,
    /// Requests timed per path and caller.
    pub(crate) requests: u32,
    /// Requests in flight at once.
    pub(crate) clients: usize,
    /// The principal's id, checked as the daemon checks `X-Atc-As`.
    pub(crate) principal: String,
}

/// The storm phase's settings.
#[derive(Debug, Clone)]
pub(crate) struct StormPlan {
    pub(crate) sessions: u32,
    pub(crate) concurrency: usize,
    pub(crate) agent: String,
    /// Deadline of the storm on each daemon.
    pub(crate) limit: Duration,
    /// State dir of the daemon without CPU priority, when there is one.
    pub(crate) baseline: Option<std::path::PathBuf>,
}

/// The arguments, checked once; nothing downstream re-reads [`BenchArgs`].
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Selected phases, deduplicated and in run order.
    pub(crate) phases: Vec<Phase>,
    pub(crate) sessions: u32,
    pub(crate) concurrency: usize,
    pub(crate) agent: String,
    pub(crate) cwd: String,
    /// The floor's shell, resolved once.
    pub(crate) floor_shell: String,
    /// The payload of each shape the output phases run, in run order.
    pub(crate) payloads: Vec<Payload>,
    pub(crate) echo_count: u32,
    pub(crate) fanout_clients: u32,
    pub(crate) slow_rate_mib: f64,
    /// Growing steps of the scale phase.
    pub(crate) scale_steps: Vec<u32>,
    /// Rounds of the phases compared with the floor (and the slow client).
    pub(crate) rounds: u32,
    pub(crate) phase_limit: Duration,
    pub(crate) floor: FloorUse,
    /// Where the spawn phase's timeline goes, if anywhere.
    pub(crate) spawn_timeline: Option<std::path::PathBuf>,
    /// The limits of the spawn phase's second pass, when it has one.
    pub(crate) spawn_limits: Option<SessionLimits>,
    pub(crate) storm: StormPlan,
    pub(crate) reach: ReachPlan,
}

impl Plan {
    pub(crate) fn from_args(args: &BenchArgs) -> anyhow::Result<Plan> {
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
            payloads: args
                .payload
                .0
                .iter()
                .map(|&shape| Payload {
                    bytes: u64::from(args.payload_mib.unwrap_or_else(|| shape.default_mib())) << 20,
                    shape,
                })
                .collect(),
            echo_count: args.echo_count,
            fanout_clients: args.fanout_clients,
            slow_rate_mib: args.slow_rate_mib,
            scale_steps,
            rounds: args.rounds,
            phase_limit: Duration::from_secs(args.phase_timeout_secs),
            floor: args.floor_use(),
            spawn_timeline: args.spawn_timeline.clone(),
            spawn_limits: args.spawn_limits,
            storm: args.storm()?,
            reach: ReachPlan {
                sessions: args.reach_sessions,
                requests: args.reach_requests,
                clients: args.reach_clients as usize,
                principal: reach::checked_principal(&args.reach_as).map_err(anyhow::Error::msg)?,
            },
        })
    }

    pub(crate) fn has(&self, phase: Phase) -> bool {
        self.phases.contains(&phase)
    }

    pub(crate) fn needs_daemon(&self) -> bool {
        self.floor != FloorUse::Only && self.phases.iter().any(|p| *p != Phase::Bare)
    }

    /// Whether the daemon runs `phase`.
    pub(crate) fn on_daemon(&self, phase: Phase) -> bool {
        self.has(phase) && self.floor != FloorUse::Only
    }

    /// Whether the floor runs `phase` (only echo, throughput and fan-out have one).
    pub(crate) fn on_floor(&self, phase: Phase) -> bool {
        self.has(phase)
            && self.floor != FloorUse::Off
            && matches!(phase, Phase::Echo | Phase::Throughput | Phase::Fanout)
    }
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
        assert_eq!((a.sessions, a.concurrency, a.payload_mib), (1000, 16, None));
        assert_eq!((a.echo_count, a.fanout_clients), (2000, 8));
        assert_eq!(a.agent, "shell");
        assert_eq!(a.phases, Phase::ALL.to_vec());
        assert!(a.needs_daemon());
        let plan = Plan::from_args(&a).expect("defaults are valid");
        // Every shape, each with its own default size.
        let shapes: Vec<_> = plan.payloads.iter().map(|p| p.shape).collect();
        assert_eq!(shapes, payload::Shape::ALL.to_vec());
        assert!(plan.payloads.iter().all(|p| p.bytes == 64 << 20));
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
    fn storm_runs_only_when_named_with_its_own_defaults() {
        let a = parse(&[]).expect("defaults parse");
        assert!(!a.phases.contains(&Phase::Storm));
        let plan = Plan::from_args(&a).expect("valid");
        assert_eq!((plan.storm.sessions, plan.storm.concurrency), (500, 100));
        assert_eq!(plan.storm.agent, "storm");
        assert_eq!(plan.storm.limit, Duration::from_secs(600));
        assert!(plan.storm.baseline.is_none());
        let a = parse(&[
            "--phases",
            "storm",
            "--storm-sessions",
            "100",
            "--storm-concurrency",
            "20",
            "--storm-baseline-state-dir",
            "/tmp/nocg",
        ])
        .expect("parses");
        assert!(a.needs_daemon());
        let plan = Plan::from_args(&a).expect("valid");
        assert!(plan.on_daemon(Phase::Storm) && !plan.has(Phase::Spawn));
        assert_eq!((plan.storm.sessions, plan.storm.concurrency), (100, 20));
        assert_eq!(
            plan.storm.baseline.as_deref(),
            Some(std::path::Path::new("/tmp/nocg"))
        );
        assert!(parse(&["--storm-sessions", "0"]).is_err());
        assert!(parse(&["--storm-concurrency", "0"]).is_err());
        let empty = parse(&["--storm-agent", ""]).expect("parses");
        assert!(Plan::from_args(&empty).is_err());
    }

    #[test]
    fn reach_runs_only_when_named_as_the_bench_principal() {
        let a = parse(&[]).expect("defaults parse");
        assert!(!a.phases.contains(&Phase::Reach));
        let plan = Plan::from_args(&a).expect("valid");
        assert_eq!((plan.reach.sessions, plan.reach.requests), (1000, 2000));
        assert_eq!(
            (plan.reach.clients, plan.reach.principal.as_str()),
            (4, "bench")
        );
        let a = parse(&[
            "--phases",
            "reach,spawn",
            "--reach-sessions",
            "10",
            "--reach-requests",
            "50",
            "--reach-clients",
            "2",
            "--reach-as",
            "ci-bot",
        ])
        .expect("parses");
        let plan = Plan::from_args(&a).expect("valid");
        assert_eq!(plan.phases, vec![Phase::Spawn, Phase::Reach]);
        assert!(plan.on_daemon(Phase::Reach));
        assert_eq!((plan.reach.sessions, plan.reach.requests), (10, 50));
        assert_eq!(
            (plan.reach.clients, plan.reach.principal.as_str()),
            (2, "ci-bot")
        );
        assert!(parse(&["--reach-sessions", "0"]).is_err());
        assert!(parse(&["--reach-clients", "0"]).is_err());
        let bad = parse(&["--reach-as", "Bench"]).expect("parses");
        assert!(
            Plan::from_args(&bad).is_err(),
            "the daemon takes lower case only"
        );
    }

    #[test]
    fn spawn_limits_are_read_by_their_wire_names() {
        let a =
            parse(&["--spawn-limits", "memoryMiB=512,pids=256,cpuPercent=100"]).expect("parses");
        let want = SessionLimits {
            memory_mib: Some(512),
            pids: Some(256),
            cpu_percent: Some(100),
        };
        assert_eq!(a.spawn_limits, Some(want));
        assert_eq!(Plan::from_args(&a).expect("valid").spawn_limits, Some(want));
        assert_eq!(parse(&[]).expect("parses").spawn_limits, None);
        assert_eq!(
            parse_limits(" pids = 64 "),
            Ok(SessionLimits {
                pids: Some(64),
                ..SessionLimits::default()
            })
        );
        assert!(parse_limits("").is_err(), "nothing asked");
        assert!(parse_limits("memory=512").is_err(), "unknown name");
        assert!(parse_limits("pids").is_err(), "no value");
        assert!(parse_limits("pids=lots").is_err(), "not a number");
        assert!(
            parse_limits("pids=4").is_err(),
            "below the protocol's bound"
        );
        assert!(parse_limits("cpuPercent=99999999999").is_err(), "past u32");
        assert!(parse(&["--spawn-limits", "memoryMiB=1"]).is_err());
    }

    #[test]
    fn payload_names_one_shape_a_list_or_all_at_one_size() {
        use payload::Shape;
        let plan = |args: &[&str]| Plan::from_args(&parse(args).expect("parses")).expect("valid");
        let one = plan(&["--payload", "sgr", "--payload-mib", "64"]);
        assert_eq!(
            one.payloads,
            vec![Payload {
                bytes: 64 << 20,
                shape: Shape::Sgr
            }]
        );
        let list = plan(&["--payload", "cjk,alt"]);
        let shapes: Vec<Shape> = list.payloads.iter().map(|p| p.shape).collect();
        assert_eq!(shapes, vec![Shape::Cjk, Shape::Alt]);
        assert_eq!(plan(&["--payload", "all"]).payloads.len(), Shape::ALL.len());
        assert!(parse(&["--payload", "sgr,vt52"]).is_err());
        assert!(parse(&["--payload-mib", "0"]).is_err());
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
