//! `atc-bench`: the load tool as its own binary (`atc bench` runs the same code).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Measure an atc daemon under load, each figure beside the floor server's and its bare-PTY ceiling.
#[derive(Parser, Debug)]
#[command(name = "atc-bench", version)]
struct Cli {
    /// The daemon's state dir (default: $XDG_STATE_HOME/atc, else ~/.local/state/atc).
    #[arg(long, global = true, env = "ATC_STATE_DIR")]
    state_dir: Option<PathBuf>,
    #[command(flatten)]
    args: atc_bench::BenchArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    atc_bench::main_with(cli.args, cli.state_dir)
}
