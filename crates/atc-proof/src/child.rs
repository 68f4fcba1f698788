//! A daemon in a child process: `<bin> daemon` on a state dir of the suite's, on port 0, with
//! a config the suite gives, its log in a file. The suites need the daemon out of their own
//! process to SIGKILL it at a random moment and start it again on the same state dir, which
//! an in-process daemon cannot do; the others use the same path so every suite drives the
//! real binary.
//!
//! `bin` is normally this program itself (`atc-proof daemon …` runs `atc daemon`), so
//! `cargo run -p atc-proof` needs nothing else built; tests pass
//! `env!("CARGO_BIN_EXE_atc-proof")`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use atc_protocol::state_dir::{DaemonFile, DAEMON_FILE, TOKEN_FILE};

/// How to start a daemon: the binary, the config, and extra environment.
#[derive(Debug, Clone)]
pub struct DaemonSpec {
    /// A program whose `daemon` subcommand is `atc daemon` (`atc` or `atc-proof`).
    pub bin: PathBuf,
    /// The config file's JSON.
    pub config: serde_json::Value,
    /// Added to the daemon's environment (e.g. `RUST_LOG`).
    pub env: Vec<(String, String)>,
    /// How long the daemon may take to start answering.
    pub start_limit: Duration,
}

impl DaemonSpec {
    /// `bin` with `config`, logging at info, 20 s to start.
    pub fn new(bin: PathBuf, config: serde_json::Value) -> DaemonSpec {
        DaemonSpec {
            bin,
            config,
            env: vec![("RUST_LOG".into(), "info".into())],
            start_limit: Duration::from_secs(20),
        }
    }
}

/// A running daemon child.
pub struct ChildDaemon {
    child: Child,
    state_dir: PathBuf,
    log: PathBuf,
    url: String,
    token: String,
}

impl ChildDaemon {
    /// Starts `spec` on `state_dir` (created if missing) with its log in `log`, and waits
    /// until `daemon.json` names this child and its API answers.
    pub async fn start(spec: &DaemonSpec, state_dir: &Path, log: &Path) -> anyhow::Result<Self> {
        let config_path = log.with_extension("config.json");
        std::fs::write(&config_path, spec.config.to_string())
            .with_context(|| format!("writing {}", config_path.display()))?;
        let log_file = std::fs::File::create(log)
            .with_context(|| format!("creating the daemon log {}", log.display()))?;
        let mut cmd = Command::new(&spec.bin);
        cmd.arg("daemon")
            .arg("--state-dir")
            .arg(state_dir)
            .args(["--listen", "127.0.0.1:0", "--config"])
            .arg(&config_path)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file);
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {} daemon", spec.bin.display()))?;
        let mut daemon = ChildDaemon {
            child,
            state_dir: state_dir.to_path_buf(),
            log: log.to_path_buf(),
            url: String::new(),
            token: String::new(),
        };
        daemon.wait_until_up(spec.start_limit).await?;
        Ok(daemon)
    }

    /// Polls the state dir until `daemon.json` carries this child's pid and the API answers
    /// with its token. A `daemon.json` left by a killed predecessor names another pid and is
    /// not taken for this one.
    async fn wait_until_up(&mut self, limit: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().context("polling the daemon child")? {
                anyhow::bail!(
                    "the daemon exited with {status} before it answered; its log:\n{}",
                    self.log_text()
                );
            }
            if let Some((url, token)) = self.announced() {
                let client = atc_client::DaemonClient::new(url.clone(), token.clone());
                if client.get_json("/v1/daemon").await.is_ok() {
                    self.url = url;
                    self.token = token;
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "the daemon did not answer within {limit:?}; its log:\n{}",
                    self.log_text()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
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
        &self.url
    }

    /// The bearer token. Never print it: reports and notes must not carry it.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The daemon's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The state dir it runs on.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// A client of its API.
    pub fn client(&self) -> atc_client::DaemonClient {
        atc_client::DaemonClient::new(self.url.clone(), self.token.clone())
    }

    /// What it has logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether it is still running (it may have crashed on its own).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILL: the daemon stops wherever it is, with nothing cleaned up, and is reaped.
    pub fn kill9(mut self) -> anyhow::Result<()> {
        self.child.kill().context("SIGKILL the daemon")?;
        self.child.wait().context("reaping the daemon")?;
        Ok(())
    }

    /// SIGTERM, then waits up to `limit` for it to exit, and SIGKILLs it past that. Returns
    /// whether it exited by itself.
    pub async fn stop(mut self, limit: Duration) -> anyhow::Result<bool> {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32)
            .context("the daemon's pid is not a pid")?;
        // ESRCH means it is already gone, which the wait below sees.
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self
                .child
                .try_wait()
                .context("polling the daemon")?
                .is_some()
            {
                return Ok(true);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.child.kill().context("SIGKILL the daemon")?;
        self.child.wait().context("reaping the daemon")?;
        Ok(false)
    }
}

impl Drop for ChildDaemon {
    /// A suite that fails part-way leaves no daemon behind. After `kill9` or `stop` the child
    /// is reaped already and these calls fail quietly.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
