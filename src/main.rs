//! The `atc` command: `atc daemon` runs the daemon in the foreground; every other subcommand
//! is a client of a running daemon. This file only parses flags and dispatches.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use atc::daemon::command::{self as daemon_command, DaemonArgs};

#[derive(Parser)]
#[command(
    name = "atc",
    version,
    about = "Host coding-agent CLIs in terminals and serve them over HTTP/WebSocket"
)]
struct Cli {
    /// State directory (default $XDG_STATE_HOME/atc, else ~/.local/state/atc). The daemon keeps
    /// its database, token and daemon.json there; clients find the daemon through it.
    #[arg(long, global = true, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon in the foreground (systemd Type=notify, with socket activation and the
    /// watchdog when the unit asks; see contrib/systemd).
    Daemon(DaemonArgs),
    /// Load-test a running daemon; every figure comes with its bare-PTY ceiling.
    Bench(atc_bench::BenchArgs),
    /// Report an agent hook (JSON on stdin) to the daemon; for agents' hook configs.
    /// Always exits 0 within 2 s.
    HookReport(atc::cli::hook_report::HookReportArgs),
    /// Print a completion script for a shell, e.g.
    /// `atc completion bash > ~/.local/share/bash-completion/completions/atc`.
    Completion {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: CompletionShell,
    },
    #[command(flatten)]
    Client(atc::cli::ClientCommand),
}

/// The shells `atc completion` writes for.
#[derive(Clone, Copy, ValueEnum)]
enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

/// The completion script for the whole `atc` command tree, subcommands and flags included.
fn completion(shell: CompletionShell) -> ExitCode {
    let shell = match shell {
        CompletionShell::Bash => clap_complete::Shell::Bash,
        CompletionShell::Zsh => clap_complete::Shell::Zsh,
        CompletionShell::Fish => clap_complete::Shell::Fish,
    };
    // Into memory first: clap_complete panics on a failed write, and `| head` is not a failure.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "atc", &mut script);
    match atc::cli::output::print(&String::from_utf8_lossy(&script)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("atc: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Daemon(args) => daemon_command::run(args, cli.state_dir),
        Command::HookReport(args) => ExitCode::from(atc::cli::hook_report::run(&args) as u8),
        Command::Bench(args) => atc_bench::main_with(args, cli.state_dir),
        Command::Completion { shell } => completion(shell),
        Command::Client(cmd) => {
            match actix_rt::System::new().block_on(atc::cli::run(cmd, cli.state_dir)) {
                Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
                Err(err) => {
                    eprintln!("atc: {err:#}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
