//! Why an agent cannot be launched as asked: it is unknown, misconfigured or not installed, or
//! a spawn override (`model`, `effort`) does not fit it (spec §2.8, §9.2).

/// A refusal about an agent or one of its spawn overrides.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// The agent's config entry has a problem, so it is not registered.
    #[error(
        "agent '{agent}' has a problem in the config file ({detail}); fix its entry and restart the daemon"
    )]
    Misconfigured {
        /// The agent id.
        agent: String,
        /// The problem's stable name.
        problem: &'static str,
        /// What is wrong, naming the key.
        detail: String,
    },
    /// The agent's `auth` entry has a problem, so it is not registered (spec §6.1).
    #[error(
        "agent '{agent}' has a problem in its 'auth' ({detail}); fix its entry and restart the daemon"
    )]
    AuthInvalid {
        /// The agent id.
        agent: String,
        /// What is wrong, naming the key.
        detail: String,
    },
    /// No agent has this id.
    #[error("no agent '{agent}'; GET /v1/agents lists the agents this daemon knows")]
    Unknown {
        /// The id asked for.
        agent: String,
    },
    /// The agent's program does not resolve on `PATH`.
    #[error(
        "agent '{agent}' is not installed: '{bin}' is not on PATH; install it, set its bin in config, or pick another agent (GET /v1/agents lists them; 'shell' is always there)"
    )]
    NotInstalled {
        /// The agent id.
        agent: String,
        /// Its configured program.
        bin: String,
    },
    /// A session's agent left the config since it was spawned.
    #[error("agent '{agent}' is no longer configured")]
    NoLongerConfigured {
        /// The agent id.
        agent: String,
    },
    /// The agent takes no such override.
    #[error("agent '{agent}' takes no {option}")]
    NoSuchOption {
        /// The agent id.
        agent: String,
        /// `model` or `effort`.
        option: &'static str,
    },
    /// An override for an agent that cannot be spawned.
    #[error("agent '{agent}' is not installed")]
    OptionForUninstalled {
        /// The agent id.
        agent: String,
        /// `model` or `effort`.
        option: &'static str,
    },
    /// An override value that is empty or too long.
    #[error("'{option}' must be 1-200 characters")]
    OptionLength {
        /// `model` or `effort`.
        option: &'static str,
    },
    /// An override value that could be taken for a flag or carries control characters.
    #[error("'{option}' may not start with '-' or contain control characters")]
    OptionUnsafe {
        /// `model` or `effort`.
        option: &'static str,
    },
    /// An override outside the agent's closed set of values.
    #[error("'{option}' must be one of {}", values.join(", "))]
    OptionNotOneOf {
        /// `model` or `effort`.
        option: &'static str,
        /// The values it may take.
        values: &'static [&'static str],
    },
}
