//! The real daemon in a child process: `<bin> daemon` on a state dir, on port 0, with a config
//! given as JSON (written beside its log) and its stderr in that log file. For what an
//! in-process daemon cannot be: cut off mid-step with SIGKILL and started again on the same
//! state dir, sent a signal of its own (SIGHUP, SIGTERM), measured as a process (its
//! descriptors, its memory), or started the way a service manager starts it (its own
//! environment, descriptors and flags; see [`DaemonSpec::command`]).
//!
//! The proof suites start their daemons with it at run time, the tests of `atc`, `atc-proof`
//! and `atc-bench` in their tests. Starting returns a `Result` for the suites, which report a
//! failed start as a finding; [`ChildDaemon::start`] and [`ChildDaemon::spawn`] are the tests'
//! shorthands, which panic with the daemon's log instead.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::Context as _;
use atc_protocol::state_dir::{DaemonFile, DAEMON_FILE, TOKEN_FILE};
use serde_json::Value;

use crate::atc_binary::atc_bin;
use crate::test_daemon::TestDaemon;
use crate::wait::{poll, WITHIN};

/// How long a daemon may take to start answering before its start counts as failed.
pub const START_LIMIT: Duration = Duration::from_secs(20);

/// How to start a daemon: the binary, its config, its environment and workers.
#[derive(Debug, Clone)]
pub struct DaemonSpec {
    /// A program whose `daemon` subcommand is `atc daemon` (`atc`, or `atc-proof`, which
    /// runs the same daemon so the suites need nothing else built).
    pub bin: PathBuf,
    /// The config file's JSON.
    pub config: Value,
    /// Added to the daemon's environment.
    pub env: Vec<(String, String)>,
    /// `--workers` (`None`: the daemon's default).
    pub workers: Option<u16>,
    /// How long the daemon may take to start answering.
    pub start_limit: Duration,
}

impl DaemonSpec {
    /// `bin` with `config`, logging at info, on the daemon's default workers.
    pub fn new(bin: PathBuf, config: Value) -> DaemonSpec {
        DaemonSpec {
            bin,
            config,
            env: vec![("RUST_LOG".into(), "info".into())],
            workers: None,
            start_limit: START_LIMIT,
        }
    }

    /// The tests' daemon: the `atc` binary ([`atc_bin`]) with `config`, logging at info, on
    /// one worker.
    pub fn atc(config: Value) -> DaemonSpec {
        DaemonSpec {
            workers: Some(1),
            ..DaemonSpec::new(atc_bin(), config)
        }
    }

    /// The command that starts it on `state_dir` with its log in `log` (stdio not yet set:
    /// [`ChildDaemon::launch_command`] does that), for a test to add to; the config is
    /// written beside `log` now.
    pub fn command(&self, state_dir: &Path, log: &Path) -> Command {
        let config_path = log.with_extension("config.json");
        std::fs::write(&config_path, self.config.to_string())
            .unwrap_or_else(|e| panic!("writing {}: {e}", config_path.display()));
        let mut cmd = Command::new(&self.bin);
        cmd.arg("daemon")
            .arg("--state-dir")
            .arg(state_dir)
            .args(["--listen", "127.0.0.1:0", "--config"])
            .arg(&config_path)
            // Plain text, so a test can look for `field=value` in the log.
            .env("NO_COLOR", "1");
        if let Some(workers) = self.workers {
            cmd.args(["--workers", &workers.to_string()]);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }
}

/// How a start ended.
enum Came {
    /// It answers at `url` with `token`.
    Up { url: String, token: String },
    /// It exited first.
    Exited(ExitStatus),
}

/// A running daemon child. Dropped, it is killed (a failed test or suite leaves nothing).
pub struct ChildDaemon {
    child: Child,
    state_dir: PathBuf,
    log: PathBuf,
    api: TestDaemon,
}

impl ChildDaemon {
    /// Starts `spec` on `state_dir` with its log in `log`, and waits until it answers.
    pub async fn launch(spec: &DaemonSpec, state_dir: &Path, log: &Path) -> anyhow::Result<Self> {
        let cmd = spec.command(state_dir, log);
        ChildDaemon::launch_command(cmd, state_dir, log, spec.start_limit).await
    }

    /// Runs `cmd` (from [`DaemonSpec::command`], added to) with its stderr in `log`, and waits
    /// up to `limit` until `daemon.json` in `state_dir` names this child and its API answers
    /// with the token. A `daemon.json` left by a killed predecessor names another pid and is
    /// not taken for this one.
    pub async fn launch_command(
        mut cmd: Command,
        state_dir: &Path,
        log: &Path,
        limit: Duration,
    ) -> anyhow::Result<Self> {
        let log_file = std::fs::File::create(log)
            .with_context(|| format!("creating the daemon log {}", log.display()))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("starting {} daemon", cmd.get_program().display()))?;
        let mut daemon = ChildDaemon {
            child,
            state_dir: state_dir.to_path_buf(),
            log: log.to_path_buf(),
            api: TestDaemon::connect("http://0.0.0.0:0", "", state_dir),
        };
        let came = poll(limit, async || {
            if let Ok(Some(status)) = daemon.child.try_wait() {
                return Some(Came::Exited(status));
            }
            let (url, token) = daemon.announced()?;
            let client = atc_client::DaemonClient::new(url.clone(), token.clone());
            client.get_json("/v1/daemon").await.ok()?;
            Some(Came::Up { url, token })
        })
        .await;
        match came {
            Some(Came::Up { url, token }) => {
                daemon.api = TestDaemon::connect(&url, &token, state_dir);
                Ok(daemon)
            }
            Some(Came::Exited(status)) => anyhow::bail!(
                "the daemon exited with {status} before it answered; its log:\n{}",
                daemon.log()
            ),
            None => anyhow::bail!(
                "the daemon did not answer within {limit:?}; its log:\n{}",
                daemon.log()
            ),
        }
    }

    /// The tests' daemon ([`DaemonSpec::atc`] with `config`) on `state_dir`, logging into
    /// `log`; panics with the log if it does not come up.
    pub async fn start(state_dir: &Path, config: &Value, log: &Path) -> ChildDaemon {
        let spec = DaemonSpec::atc(config.clone());
        ChildDaemon::launch(&spec, state_dir, log)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// The command [`ChildDaemon::start`] runs, for a test to add to before
    /// [`ChildDaemon::spawn`].
    pub fn command(state_dir: &Path, config: &Value, log: &Path) -> Command {
        DaemonSpec::atc(config.clone()).command(state_dir, log)
    }

    /// Runs `cmd` (see [`ChildDaemon::command`]) and waits until it answers; panics with the
    /// log if it does not come up.
    pub async fn spawn(cmd: Command, state_dir: &Path, log: &Path) -> ChildDaemon {
        ChildDaemon::launch_command(cmd, state_dir, log, START_LIMIT)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// The URL and token this child announced, once it has.
    fn announced(&self) -> Option<(String, String)> {
        let text = std::fs::read_to_string(self.state_dir.join(DAEMON_FILE)).ok()?;
        let file: DaemonFile = serde_json::from_str(&text).ok()?;
        if file.pid != self.child.id() {
            return None;
        }
        let token = std::fs::read_to_string(self.state_dir.join(TOKEN_FILE)).ok()?;
        Some((file.url, token.trim().to_string()))
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.api.url
    }

    /// The bearer token it answered with at its start. Never print it: reports and notes
    /// must not carry it.
    pub fn token(&self) -> &str {
        &self.api.token
    }

    /// The daemon's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The state dir it runs on.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The tests' client of its API, with the token it started with.
    pub fn api(&self) -> &TestDaemon {
        &self.api
    }

    /// `atc-client`'s client of its API, with the token it started with.
    pub fn client(&self) -> atc_client::DaemonClient {
        atc_client::DaemonClient::new(self.api.url.clone(), self.api.token.clone())
    }

    /// What it has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether it is still running (it may have crashed on its own).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends `signal` to the daemon.
    pub fn signal(&self, signal: rustix::process::Signal) {
        rustix::process::kill_process(rustix::process::Pid::from_child(&self.child), signal)
            .unwrap_or_else(|e| panic!("sending {signal:?} to the daemon: {e}"));
    }

    /// SIGKILL: the daemon stops wherever it is, with nothing cleaned up, and is reaped.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL the daemon");
        self.child.wait().expect("reap the daemon");
    }

    /// Waits up to `limit` for the daemon to exit by itself (after `POST /v1/daemon/quit`, a
    /// signal, a crash): how it exited, or `None` while it still runs.
    pub async fn exit_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        poll(limit, async || self.child.try_wait().ok().flatten()).await
    }

    /// SIGTERM, then waits up to `limit` for the daemon to exit: how it exited, or `None`
    /// while it still runs. Its log stays readable.
    pub async fn terminate_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        // ESRCH means it is gone already, which the wait below sees.
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_child(&self.child),
            rustix::process::Signal::TERM,
        );
        self.exit_within(limit).await
    }

    /// SIGTERM, then waits up to [`WITHIN`] for the daemon to exit and answers how it did;
    /// panics with its log if it does not.
    pub async fn terminate(&mut self) -> ExitStatus {
        match self.terminate_within(WITHIN).await {
            Some(status) => status,
            None => panic!("the daemon did not stop; log:\n{}", self.log()),
        }
    }

    /// SIGTERM, then waits up to `limit` for it to exit, and SIGKILLs it past that. Answers
    /// whether it exited by itself.
    pub async fn stop_within(mut self, limit: Duration) -> bool {
        self.terminate_within(limit).await.is_some()
        // Past the limit, the drop kills it.
    }

    /// SIGTERM, and waits (up to [`WITHIN`]) for a clean exit; panics with its log if it
    /// does not stop.
    pub async fn stop(mut self) {
        self.terminate().await;
    }
}

impl Drop for ChildDaemon {
    /// A failed test or suite must not leave the daemon running. After `kill` or a stop the
    /// child is reaped already and these calls fail quietly.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
