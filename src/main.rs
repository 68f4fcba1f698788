//! The `atc` command: `atc daemon` runs the daemon in the foreground; every other subcommand
//! is a client of a running daemon. This file only parses flags and dispatches.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use atc::config::Config;
use atc::daemon::{Daemon, DaemonOptions, DaemonSignals};

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

#[derive(clap::Args)]
struct DaemonArgs {
    /// Address to listen on (default 127.0.0.1:7767, or config `listen`).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Config file (default $ATC_CONFIG, else $XDG_CONFIG_HOME/atc/config.json).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Log format: text for terminals, json for journald and log shippers.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Allow a non-loopback --listen (or --metrics-listen) address.
    #[arg(long)]
    allow_remote: bool,
    /// Also serve GET /metrics, without a token, on this address (e.g. 127.0.0.1:9464;
    /// default: config `metricsListen`, else no such listener).
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// HTTP worker threads. Sessions live on the first one, so 1 (the default) keeps a
    /// keystroke and its echo on one thread; more only helps many concurrent API clients.
    #[arg(long, default_value_t = 1)]
    workers: usize,
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

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder
            .fmt_fields(tracing_subscriber::fmt::format::JsonFields::new())
            .event_format(atc::daemon::json_log::JsonLines)
            .init(),
    }
}

fn run_daemon(args: DaemonArgs, state_dir: Option<PathBuf>) -> ExitCode {
    // Before anything else opens an fd: what the daemon inherited must not reach sessions.
    let inherited = atc::providers::child_fds::close_on_exec_beyond_stdio();
    init_logging(args.log_format);
    if let Err(e) = inherited {
        tracing::warn!(error = %e, "could not mark inherited fds close-on-exec; each spawn tries again");
    }
    // Still one thread: the variables are removed from the environment sessions inherit.
    let (systemd, problems) = atc::daemon::systemd::SystemdEnv::take();
    for problem in problems {
        tracing::warn!(%problem, "ignoring a systemd variable");
    }
    let listener = match systemd.take_listener() {
        Ok(listener) => listener,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("atc: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let (Some(l), Some(listen)) = (&listener, args.listen) {
        tracing::warn!(%listen, handed = ?l.local_addr().ok(),
            "--listen ignored: serving on the socket systemd handed over");
    }
    let Some(state_dir) = state_dir.or_else(atc::daemon::state_dir::default_state_dir) else {
        eprintln!("atc: no state dir: set HOME or XDG_STATE_HOME, or pass --state-dir");
        return ExitCode::FAILURE;
    };
    let config_path = Config::locate(args.config.as_deref());
    let config = Config::load(config_path.as_deref(), args.config.is_some());
    let opts = DaemonOptions {
        state_dir,
        config,
        listen: args.listen,
        listener,
        allow_remote: args.allow_remote,
        workers: args.workers,
        runtime_dir: None,
        atc_program: None,
        codex_home: None,
        metrics_listen: args.metrics_listen.map(atc::daemon::MetricsListen::Addr),
    };
    let system = actix_rt::System::new();
    system.block_on(async move {
        // Before the start: a SIGHUP that arrives once daemon.json exists must find its handler.
        let signals = match DaemonSignals::install() {
            Ok(signals) => Some(signals),
            Err(e) => {
                tracing::error!(error = %e,
                    "could not install signal handlers; stop the daemon with POST /v1/daemon/quit");
                None
            }
        };
        match Daemon::start(opts).await {
            Ok(mut handle) => {
                if let Some(socket) = systemd.notify {
                    handle.notify_systemd(socket, systemd.watchdog);
                }
                handle.run_until_stopped(signals).await;
                ExitCode::SUCCESS
            }
            Err(e) => {
                tracing::error!("{e}");
                eprintln!("atc: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Daemon(args) => run_daemon(args, cli.state_dir),
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
