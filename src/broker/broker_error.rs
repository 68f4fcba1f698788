//! Every refusal on the broker path (spec §6.5), each carrying what its message and its
//! `data` need. The wire form is `crate::error`'s, like every other module's.

/// A refusal from broker authentication.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrokerError {
    /// A broker-backed agent on a target whose provider has no broker.
    #[error(
        "agent '{agent}' keeps its credential in impd's broker, and target '{target}' has none; spawn it on an imp target"
    )]
    TargetUnsupported {
        /// The agent.
        agent: String,
        /// The target asked for.
        target: String,
    },
    /// A broker-backed agent whose start env sets a broker or proxy variable itself.
    #[error(
        "agent '{agent}' sets {variable} in its env, which impd sets for the broker; remove it from the agent's env"
    )]
    GuestEnvConflict {
        /// The agent.
        agent: String,
        /// The variable.
        variable: String,
    },
    /// The agent's `auth` cannot be bound as written.
    #[error("agent '{agent}': its 'auth' cannot be bound: {detail}; fix its entry and restart the daemon")]
    BindingInvalid {
        /// The agent.
        agent: String,
        /// A stable word: `agent_invalid` for the entry, `placeholder_set_by_impd`, ….
        problem: &'static str,
        /// What is wrong, naming keys and secrets, never values.
        detail: String,
    },
}
