//! Why a provider could not start or reach a harness, run a command, or do a host operation.

use super::imp::host_error::HostError;

/// A provider's refusal or failure.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The working directory is missing or not a directory.
    #[error("working directory {0} does not exist or is not a directory")]
    BadCwd(String),
    /// The OS refused something a start or a command needed that names none of the host's
    /// limits (a launcher thread gone, a PTY's name unreadable, a command not started, ...).
    #[error("could not start the process: {0}; check the daemon's limits (open files, PTYs) and its log")]
    Os(#[from] std::io::Error),
    /// The start ran into one of the machine's limits (no PTY left, the daemon's open-file
    /// limit, ...).
    #[error("{limit} ({detail})")]
    LimitReached {
        /// Which limit.
        limit: super::local::host_limit::HostLimit,
        /// What failed, and the kernel's word for it.
        detail: String,
    },
    /// The process could not be started on its terminal.
    #[error("{0}; check the daemon's limits (open files, processes) and its log")]
    Spawn(#[from] super::local::pty_spawn::SpawnError),
    /// pty-process failed.
    #[error(
        "could not open a terminal: {0}; check the daemon's limits (open files, PTYs) and its log"
    )]
    Pty(#[from] pty_process::Error),
    /// A start behind impd's broker was refused.
    #[error(transparent)]
    Broker(#[from] crate::providers::imp::broker::BrokerError),
    /// A remote host refused or could not be reached.
    #[error(transparent)]
    Host(#[from] HostError),
    /// A command run for the daemon (tar, a workspace step) exited unsuccessfully.
    #[error("{what} failed ({status}): {stderr}")]
    CommandFailed {
        /// What was being done, e.g. "unpacking the archive".
        what: &'static str,
        /// `exit 2`, `signal 9`.
        status: String,
        /// The start of its stderr, for the user.
        stderr: String,
    },
    /// A host operation on a provider without hosts.
    #[error("a {kind} session has no host to {capability}")]
    NoHostLifecycle {
        /// The provider kind.
        kind: &'static str,
        /// `suspend` or `destroy`.
        capability: &'static str,
    },
    /// The local process has 4 MiB of input it has not read.
    #[error("the process is not reading its input; retry once it has caught up")]
    InputBacklogFull,
    /// The process is gone, so its input has nowhere to go.
    #[error("the process has exited")]
    ProcessGone,
    /// A failure inside the daemon (a record that could not be written, an actor gone);
    /// whoever hit it logged the cause.
    #[error("internal error; the daemon log has details under this request id")]
    Internal,
}

impl ProviderError {
    /// Whether the failed operation may have left its effect standing (an imp it created
    /// and could not destroy again): a keyed spawn then answers `outcome_unknown` and never
    /// runs again (spec §7.4 "effect remains").
    pub fn effect_remains(&self) -> bool {
        matches!(self, ProviderError::Host(HostError::EffectRemains(_)))
    }

    /// A command run for the daemon that exited unsuccessfully (`code` `None`: a signal ended
    /// it), with the start of its stderr for the user.
    pub fn command_failed(what: &'static str, code: Option<i32>, stderr: &[u8]) -> ProviderError {
        /// How much of the stderr an error carries.
        const STDERR_IN_ERROR: usize = 512;
        let text = String::from_utf8_lossy(stderr);
        let text = text.trim();
        let stderr = match text.char_indices().nth(STDERR_IN_ERROR) {
            Some((i, _)) => format!("{}…", &text[..i]),
            None => text.to_string(),
        };
        ProviderError::CommandFailed {
            what,
            status: match code {
                Some(c) => format!("exit {c}"),
                None => "ended by a signal".into(),
            },
            stderr,
        }
    }
}
