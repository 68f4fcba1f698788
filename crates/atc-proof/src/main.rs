//! `atc-proof <suite>`: runs one proof suite and prints its table, then its JSON line last (so
//! `| tail -1 | jq` finds it). Exit status 0 when every figure met its bound, 1 when one did
//! not, 2 when the suite could not run. `atc-proof daemon …` is `atc daemon …`: the suites
//! start their daemons through it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use atc::daemon::command::{self as daemon_command, DaemonArgs};
use atc_proof::{Plan, Suite};

#[derive(Parser)]
#[command(
    name = "atc-proof",
    about = "atc's fault, fuzz-frame, soak and security suites"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon (as `atc daemon`); the suites start their daemons this way.
    #[command(hide = true)]
    Daemon {
        /// State directory.
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        #[command(flatten)]
        args: DaemonArgs,
    },
    /// Print numbered lines steadily until the terminal goes (the soak's printing sessions).
    #[command(hide = true)]
    Ticker {
        /// Bytes a second.
        #[arg(long, default_value_t = 4096)]
        bytes_per_sec: u64,
    },
    /// Write the checksummed stream the drops and frames suites read (run inside a session).
    #[command(hide = true)]
    Emit(atc_proof::emit::EmitArgs),
    #[command(flatten)]
    Suite(SuiteCommand),
}

#[derive(Subcommand)]
enum SuiteCommand {
    /// 1,000 client drops during a checksummed stream: bytes lost and repeated, resume latency.
    Drops(SuiteArgs),
    /// 100 kill -9 of the daemon during keyed spawns: double spawns, keys in progress, rows.
    Crashes(SuiteArgs),
    /// 100 of each impd fault under remote sessions: bytes, exit reasons, reconnect latency.
    Remote(SuiteArgs),
    /// Malformed frames on every WebSocket: clear closes, sessions unharmed.
    Frames(SuiteArgs),
    /// 4,000 sessions for 10 minutes with churn: RSS, fds, WAL, latencies over time.
    Soak(SoakArgs),
    /// The security walk: tokens, Origin, modes, credential grep, path escapes, slow requests.
    Security(SuiteArgs),
}

#[derive(clap::Args)]
struct SuiteArgs {
    /// The suite's main count (default: the figure).
    #[arg(long)]
    count: Option<u64>,
    /// Bound on the whole run, in seconds.
    #[arg(long, default_value_t = 1800)]
    seconds: u64,
    /// Seed of the random choices (default: from the clock; the report prints it).
    #[arg(long)]
    seed: Option<u64>,
    /// Print only the JSON line.
    #[arg(long)]
    json: bool,
    /// Where state dirs and logs go (default: a fresh temporary directory, removed after a
    /// passing run).
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
}

#[derive(clap::Args)]
struct SoakArgs {
    #[command(flatten)]
    suite: SuiteArgs,
    /// How long the full fleet is held with churn, in seconds.
    #[arg(long, default_value_t = 600)]
    hold_secs: u64,
    /// Time between two readings of RSS, fds, WAL and sessions alive, in seconds.
    #[arg(long, default_value_t = 10)]
    sample_secs: u64,
    /// Instead of holding a fleet, grow one until a spawn is refused and report what stopped
    /// it (`--count` caps it; default 100,000).
    #[arg(long)]
    grow: bool,
    /// With --grow: lower the daemon's open-file limit to this first, to find the descriptor
    /// ceiling without taking the machine's PTYs.
    #[arg(long, requires = "grow")]
    grow_fd_limit: Option<u64>,
    /// The churn during the hold, comma-separated (default: all of it); leaving some out
    /// tells which part a growth comes from.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = atc_proof::soak::churn::ChurnKind::ALL)]
    churn: Vec<atc_proof::soak::churn::ChurnKind>,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Daemon { state_dir, args } => daemon_command::run(args, state_dir),
        Command::Ticker { bytes_per_sec } => atc_proof::soak::ticker::run(bytes_per_sec),
        Command::Suite(SuiteCommand::Soak(a)) => {
            let opts = atc_proof::soak::SoakOptions {
                hold: Duration::from_secs(a.hold_secs),
                sample_every: Duration::from_secs(a.sample_secs.max(1)),
                grow: a.grow,
                grow_fd_limit: a.grow_fd_limit,
                churn: a.churn,
            };
            run_suite_with(Suite::Soak, a.suite, |plan| {
                Box::pin(async move { atc_proof::soak::run_with(plan, &opts).await })
            })
        }
        Command::Emit(args) => atc_proof::emit::run(args),
        Command::Suite(cmd) => {
            let (suite, args) = match cmd {
                SuiteCommand::Drops(a) => (Suite::Drops, a),
                SuiteCommand::Crashes(a) => (Suite::Crashes, a),
                SuiteCommand::Remote(a) => (Suite::Remote, a),
                SuiteCommand::Frames(a) => (Suite::Frames, a),
                SuiteCommand::Soak(a) => (Suite::Soak, a.suite),
                SuiteCommand::Security(a) => (Suite::Security, a),
            };
            run_suite(suite, args)
        }
    }
}

fn run_suite(suite: Suite, args: SuiteArgs) -> ExitCode {
    run_suite_with(suite, args, |plan| Box::pin(atc_proof::run(plan)))
}

/// A suite's run as `run_suite_with` takes it.
type SuiteRun<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<atc_proof::Report>> + 'a>>;

/// Runs `suite` through `run` (a suite with options of its own passes them in it).
fn run_suite_with(
    suite: Suite,
    args: SuiteArgs,
    run: impl for<'a> FnOnce(&'a Plan) -> SuiteRun<'a>,
) -> ExitCode {
    let daemon_bin = match std::env::current_exe() {
        Ok(bin) => bin,
        Err(e) => {
            eprintln!("atc-proof: cannot find this program to start daemons with: {e}");
            return ExitCode::from(2);
        }
    };
    // A temporary work dir goes with a passing run; a failing one keeps it for its logs.
    let temp = match &args.work_dir {
        Some(_) => None,
        None => match tempfile::Builder::new().prefix("atc-proof-").tempdir() {
            Ok(dir) => Some(dir),
            Err(e) => {
                eprintln!("atc-proof: cannot make a work dir: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let work_dir = match (&args.work_dir, &temp) {
        (Some(dir), _) => dir.clone(),
        (None, Some(t)) => t.path().to_path_buf(),
        (None, None) => unreachable!("a temporary dir is made when none is given"),
    };
    let plan = Plan {
        suite,
        count: args.count,
        limit: Duration::from_secs(args.seconds),
        seed: args.seed.unwrap_or_else(atc_proof::rng::fresh_seed),
        daemon_bin,
        work_dir,
    };
    let outcome = actix_rt::System::new().block_on(run(&plan));
    match outcome {
        Ok(report) => {
            if !args.json {
                print!("{}", report.to_table());
            }
            println!("{}", report.to_json_line());
            if report.passed {
                ExitCode::SUCCESS
            } else {
                if let Some(t) = temp {
                    let kept = t.keep();
                    eprintln!("atc-proof: logs kept in {}", kept.display());
                }
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("atc-proof {}: {e:#}", suite.name());
            if let Some(t) = temp {
                let kept = t.keep();
                eprintln!("atc-proof: logs kept in {}", kept.display());
            }
            ExitCode::from(2)
        }
    }
}
