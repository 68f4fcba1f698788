//! `atc-proof`: atc's promises turned into bounded, repeatable loops that print their figures.
//! Each suite drives real daemons (children of this binary, started by the test kit's
//! [`ChildDaemon`](atc_testkit::ChildDaemon)) over loopback, counts
//! what the promise says must never happen (bytes lost, double spawns, 5xx answers), and
//! measures what it costs (resume and reconnect latency). A suite stops by itself: every loop
//! is bounded by a count (`--count`) and by time (`--seconds`).
//!
//! Layout: one module per suite; [`report`] holds the figures and decides pass or fail from
//! their bounds; the kit's `ChildDaemon` starts, kills and restarts daemons; [`rng`] makes the random moments
//! repeatable from `--seed`. The short versions run in `cargo test` (this crate's `tests/`);
//! the full ones with `cargo run --release -p atc-proof -- <suite>`.

mod crashes;
mod drops;
pub mod emit;
pub mod emitting;
mod frames;
mod metrics;
pub mod rawws;
pub mod reassembly;
mod remote;
pub mod report;
pub mod rng;
mod security;
pub mod soak;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

pub use report::{Report, Want};

/// A suite, as named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Suite {
    /// Attached clients closed at random moments of a checksummed stream, each resuming by
    /// stream + offset: bytes lost and repeated must be 0.
    Drops,
    /// `kill -9` of the daemon during keyed spawns, restarted on the same state dir: no double
    /// spawn, no key left in progress, no row lost, an intact database.
    Crashes,
    /// Faults of the impd simulator under remote sessions: drops, restarts, revocations,
    /// reboots and sleeps, with exit reasons and bytes checked at the client.
    Remote,
    /// Malformed frames on every WebSocket: each gets a clear close or error frame, and the
    /// session is never harmed.
    Frames,
    /// Thousands of sessions held with churn: RSS, fds, WAL size and latencies over time.
    Soak,
    /// The security walk: tokens, Origin, state-dir modes, credential grep, path escapes,
    /// oversized and slow requests.
    Security,
}

impl Suite {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Drops => "drops",
            Suite::Crashes => "crashes",
            Suite::Remote => "remote",
            Suite::Frames => "frames",
            Suite::Soak => "soak",
            Suite::Security => "security",
        }
    }
}

/// What every suite is given.
#[derive(Debug, Clone)]
pub struct Plan {
    pub suite: Suite,
    /// The suite's main count (drops, kills, faults of each kind, sessions); `None` for its
    /// default, which is the figure.
    pub count: Option<u64>,
    /// Bound on the whole run; a suite that reaches it stops, reports what it measured and
    /// notes that it was cut short.
    pub limit: Duration,
    /// Where the random choices come from.
    pub seed: u64,
    /// The program whose `daemon` subcommand runs the daemon (this binary, normally).
    pub daemon_bin: PathBuf,
    /// Where suites put state dirs and logs; kept after a failed run for reading.
    pub work_dir: PathBuf,
}

impl Plan {
    /// The count, or the suite's default.
    pub fn count_or(&self, default: u64) -> u64 {
        self.count.unwrap_or(default)
    }
}

/// Runs `plan.suite` and returns its report with the elapsed time filled in. Must run inside
/// an actix System (awc is not `Send`). An error means the suite could not run at all (no
/// daemon would start); whatever it measured is in a report otherwise, failed or not.
pub async fn run(plan: &Plan) -> anyhow::Result<Report> {
    let started = Instant::now();
    let mut report = match plan.suite {
        Suite::Drops => drops::run(plan).await?,
        Suite::Crashes => crashes::run(plan).await?,
        Suite::Remote => remote::run(plan).await?,
        Suite::Frames => frames::run(plan).await?,
        Suite::Soak => soak::run(plan).await?,
        Suite::Security => security::run(plan).await?,
    };
    report.elapsed_secs = started.elapsed().as_secs_f64();
    Ok(report)
}
