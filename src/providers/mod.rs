//! Execution providers: where a session's process runs, behind one trait.
//!
//! A provider starts a harness and hands back a [`HarnessHandle`]: recipients for the commands
//! a session sends its harness. The harness reports back through [`HarnessEvents`], so this
//! module never imports `sessions/` and a test can pass a probe actor in their place.
//!
//! Only `local-pty` exists so far; the `imp` provider comes later. Targets name a provider by
//! kind, and the refusal chain (`config::targets`) asks the provider's [`Capabilities`]
//! whether it can do what a request needs.

pub mod local_pty;

/// Largest output chunk a harness hands to its session at once. Sessions size their screen
/// model's backlog in these.
pub const MAX_OUTPUT_CHUNK: usize = 16 * 1024;

use actix::prelude::*;
use bytes::Bytes;

use crate::agents::LaunchPlan;
use crate::protocol::params::TermSize;
use crate::protocol::{DaemonError, ErrorCode};

/// Bytes a harness read from its process. Sent by the harness to its session; the reply is
/// awaited, so a session that falls behind slows the reader instead of growing a mailbox.
#[derive(Message)]
#[rtype(result = "()")]
pub struct OutputArrived(pub Bytes);

/// The harness's process is gone and all its output has been delivered. Sent exactly once.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct HarnessExited {
    /// Exit status, when it exited.
    pub code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub signal: Option<i32>,
}

/// Write these bytes to the process's terminal, whole. Sent by the session.
#[derive(Message)]
#[rtype(result = "Result<(), DaemonError>")]
pub struct WriteInput(pub Bytes);

/// Resize the process's terminal. Sent by the session only when the size changes.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ResizeTerminal(pub TermSize);

/// End the process: SIGHUP now, SIGKILL once `grace` runs out (zero: SIGKILL at once).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Hangup {
    /// Time between the two signals.
    pub grace: std::time::Duration,
}

/// Where a harness reports.
#[derive(Clone)]
pub struct HarnessEvents {
    /// Output chunks, in order.
    pub output: Recipient<OutputArrived>,
    /// The one exit notice.
    pub exited: Recipient<HarnessExited>,
}

/// How a session talks to its harness.
#[derive(Clone)]
pub struct HarnessHandle {
    /// Input bytes.
    pub input: Recipient<WriteInput>,
    /// Size changes.
    pub resize: Recipient<ResizeTerminal>,
    /// Kill.
    pub hangup: Recipient<Hangup>,
}

/// What a harness is started with.
#[derive(Debug, Clone)]
pub struct StartSpec {
    /// The session it belongs to (goes into `ATC_SESSION_ID`).
    pub session_id: uuid::Uuid,
    /// Program, argv, environment and cwd.
    pub plan: LaunchPlan,
    /// Initial terminal size.
    pub size: TermSize,
}

/// One thing a provider may or may not be able to do (spec §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// Start a harness.
    Spawn,
    /// Stream output to clients.
    Attach,
    /// Write keystrokes.
    Input,
    /// End a harness.
    Kill,
}

impl Capability {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Spawn => "spawn",
            Capability::Attach => "attach",
            Capability::Input => "input",
            Capability::Kill => "kill",
        }
    }
}

/// What a provider can do; the refusal chain reads these. Capabilities of later issues
/// (transfer, run, headless, suspend, destroy) join when something provides them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Capabilities {
    /// Start a harness.
    pub spawn: bool,
    /// Attach clients.
    pub attach: bool,
    /// Write input.
    pub input: bool,
    /// Resize the terminal.
    pub resize: bool,
    /// Kill a harness.
    pub kill: bool,
}

impl Capabilities {
    /// Whether `c` is among them.
    pub fn has(self, c: Capability) -> bool {
        match c {
            Capability::Spawn => self.spawn,
            Capability::Attach => self.attach,
            Capability::Input => self.input,
            Capability::Kill => self.kill,
        }
    }
}

/// A place sessions can run.
pub trait ExecutionProvider: Send + Sync {
    /// The provider's kind, e.g. `local-pty`.
    fn kind(&self) -> &'static str;
    /// What it can do.
    fn capabilities(&self) -> Capabilities;
    /// Starts a harness on the current arbiter. A refusal here means nothing was started.
    fn start(&self, spec: StartSpec, events: HarnessEvents)
        -> Result<HarnessHandle, ProviderError>;
}

/// Why a harness could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The working directory is missing or not a directory.
    #[error("working directory {0} does not exist or is not a directory")]
    BadCwd(String),
    /// The OS refused (no PTYs left, exec failed, ...).
    #[error("could not start the process: {0}")]
    Os(#[from] std::io::Error),
    /// pty-process failed.
    #[error("could not open a terminal: {0}")]
    Pty(#[from] pty_process::Error),
}

impl From<ProviderError> for DaemonError {
    fn from(e: ProviderError) -> Self {
        match e {
            ProviderError::BadCwd(_) => DaemonError::bad_arg("cwd", e.to_string()),
            ProviderError::Os(_) | ProviderError::Pty(_) => DaemonError::new(
                ErrorCode::Internal,
                format!("{e}; check the daemon's limits (open files, PTYs) and its log"),
            ),
        }
    }
}
