//! The `atc daemon` command: its flags, its logging, and the foreground run from the first
//! fd check to the last session stopped. It lives in the library so that `atc` and the proof
//! tool (`atc-proof`, which runs daemons as children of itself to kill them with SIGKILL) start
//! a daemon the same way.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;

use crate::config::Config;
use crate::daemon::{Daemon, DaemonOptions, DaemonSignals};

#[derive(clap::Args)]
pub struct DaemonArgs {
    /// Address to listen on (default 127.0.0.1:7767, or config `listen`).
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Config file (default $ATC_CONFIG, else $XDG_CONFIG_HOME/atc/config.json).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Log format: text for terminals, json for journald and log shippers.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Allow a non-loopback --listen (or --metrics-listen) address. It also needs TLS
    /// (--tls-cert/--tls-key) or --insecure-plaintext.
    #[arg(long)]
    pub allow_remote: bool,
    /// Serve HTTPS with this PEM certificate chain (needs --tls-key). Every listener,
    /// the page and both WebSockets then speak TLS.
    #[arg(long, value_name = "PATH", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve a non-loopback address in plain HTTP: the token crosses the network in clear
    /// text. Only for a network that is private by itself; warned about at every start.
    #[arg(long)]
    pub insecure_plaintext: bool,
    /// Also serve GET /metrics, without a token, on this address (e.g. 127.0.0.1:9464;
    /// default: config `metricsListen`, else no such listener).
    #[arg(long)]
    pub metrics_listen: Option<SocketAddr>,
    /// HTTP worker threads. Sessions live on the first one, so 1 (the default) keeps a
    /// keystroke and its echo on one thread; more only helps many concurrent API clients.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum LogFormat {
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
            .event_format(crate::daemon::json_log::JsonLines)
            .init(),
    }
}

/// Runs the daemon in the foreground until it is told to stop; `state_dir` is the global
/// `--state-dir`.
pub fn run(args: DaemonArgs, state_dir: Option<PathBuf>) -> ExitCode {
    // Before anything else opens an fd: what the daemon inherited must not reach sessions.
    let inherited = crate::providers::local::child_fds::close_on_exec_beyond_stdio();
    init_logging(args.log_format);
    if let Err(e) = inherited {
        tracing::warn!(error = %e, "could not mark inherited fds close-on-exec; each spawn tries again");
    }
    // Still one thread, so growing the descriptor table costs no grace period (fd_table.rs).
    match crate::daemon::fd_table::reserve() {
        Ok(slots) => tracing::debug!(slots, "descriptor table reserved"),
        Err(e) => {
            tracing::warn!(error = %e, "could not size the descriptor table; it grows as sessions come")
        }
    }
    // Still one thread: the variables are removed from the environment sessions inherit.
    let (systemd, problems) = crate::daemon::systemd::SystemdEnv::take();
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
    let Some(state_dir) = state_dir.or_else(crate::daemon::state_dir::default_state_dir) else {
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
        insecure_plaintext: args.insecure_plaintext,
        tls: match (args.tls_cert, args.tls_key) {
            (Some(cert), Some(key)) => Some(crate::daemon::tls::TlsFiles { cert, key }),
            // clap's `requires` makes each flag need the other.
            _ => None,
        },
        workers: args.workers,
        runtime_dir: None,
        atc_program: None,
        codex_home: None,
        metrics_listen: args.metrics_listen.map(crate::daemon::MetricsListen::Addr),
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
