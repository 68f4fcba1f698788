//! The real `atc` binary as a daemon in a child process, on a config given as JSON, with its
//! log in a file: for tests that must cut the daemon off mid-step with SIGKILL, which an
//! in-process daemon cannot be, or that start it the way a service manager does (its own
//! environment, fds and flags; see [`ChildDaemon::command`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::TestDaemon;

/// `atc daemon` running in a child process.
pub struct ChildDaemon {
    child: Child,
    /// A client of its API.
    pub client: TestDaemon,
    log: PathBuf,
}

impl ChildDaemon {
    /// Starts `atc daemon` on `state_dir` (port 0, one worker) with `config` written beside
    /// it, logging at info into `log`, and waits until its `daemon.json` names it.
    pub async fn start(state_dir: &Path, config: &Value, log: &Path) -> ChildDaemon {
        ChildDaemon::spawn(ChildDaemon::command(state_dir, config, log), state_dir, log).await
    }

    /// The command [`ChildDaemon::start`] runs, for a test to add to before
    /// [`ChildDaemon::spawn`]; `config` is written beside `log`.
    pub fn command(state_dir: &Path, config: &Value, log: &Path) -> Command {
        let config_path = log.with_extension("config.json");
        std::fs::write(&config_path, config.to_string()).expect("write the child's config");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_atc"));
        cmd.arg("daemon")
            .arg("--state-dir")
            .arg(state_dir)
            .args(["--listen", "127.0.0.1:0", "--workers", "1", "--config"])
            .arg(&config_path)
            .env("RUST_LOG", "info")
            // Plain text, so a test can look for `field=value` in the log.
            .env("NO_COLOR", "1");
        cmd
    }

    /// Runs `cmd` (see [`ChildDaemon::command`]) with its stderr in `log`, and waits until its
    /// `daemon.json` in `state_dir` names it.
    pub async fn spawn(mut cmd: Command, state_dir: &Path, log: &Path) -> ChildDaemon {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).expect("create the child's log"))
            .spawn()
            .expect("start the atc binary");
        let mut cd = ChildDaemon {
            client: TestDaemon::connect("http://0.0.0.0:0", "", state_dir),
            child,
            log: log.to_path_buf(),
        };
        let info = super::wait_for_child_daemon(&mut cd.child, state_dir, &cd.log).await;
        let token = std::fs::read_to_string(state_dir.join("token")).expect("token file");
        cd.client = TestDaemon::connect(&info.url, &token, state_dir);
        cd
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL: the daemon stops wherever it is, with nothing cleaned up.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL the daemon");
        self.child.wait().expect("reap the daemon");
    }

    /// SIGTERM, then waits (up to [`super::WITHIN`]) for a clean exit.
    pub async fn stop(mut self) {
        self.terminate().await;
    }

    /// SIGTERM, then waits (up to [`super::WITHIN`]) for the daemon to exit and answers how it
    /// exited; its log stays readable.
    pub async fn terminate(&mut self) -> ExitStatus {
        rustix::process::kill_process(
            rustix::process::Pid::from_child(&self.child),
            rustix::process::Signal::TERM,
        )
        .expect("SIGTERM the daemon");
        let deadline = Instant::now() + super::WITHIN;
        loop {
            if let Some(status) = self.child.try_wait().expect("poll the daemon") {
                return status;
            }
            if Instant::now() > deadline {
                panic!("the daemon did not stop; log:\n{}", self.log());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for ChildDaemon {
    fn drop(&mut self) {
        // A failed test must not leave the daemon running; a reaped one has nothing to kill.
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
