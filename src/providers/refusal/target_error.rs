//! Why a target cannot take an operation: the refusal chain of spec §4.4, one variant per
//! step, plus a target this daemon has no provider for.

use atc_protocol::capabilities::Capability;

/// A refusal from the target chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Step 1: the config file itself is unusable.
    #[error("the config file is unusable ({problem}); fix it and restart the daemon")]
    ConfigUnusable {
        /// The problem's stable word.
        problem: String,
        /// Human detail.
        detail: String,
        /// The target it concerns, if any.
        target: Option<String>,
    },
    /// Step 2: no target named and no default.
    #[error("no target was named and there is no default; set defaultTarget in the config")]
    NoDefault {
        /// Why there is no default.
        problem: String,
    },
    /// Step 3: the targets map, or this entry, is misconfigured.
    #[error("target '{id}' is misconfigured ({problem}); fix the config")]
    Misconfigured {
        /// The target asked for.
        id: String,
        /// The problem's stable word.
        problem: String,
        /// Human detail.
        detail: String,
        /// The target the problem concerns, if it names one.
        target: Option<String>,
    },
    /// Step 4: no such target.
    #[error("no target '{id}'; GET /v1/agents lists the configured targets")]
    Unknown {
        /// The target asked for.
        id: String,
    },
    /// Step 5: the target's options changed since the session bound to it.
    #[error(
        "target '{id}' changed since this session started on it; restore its previous options to reach the session"
    )]
    Changed {
        /// The target.
        id: String,
        /// The identity the session bound to.
        bound: String,
        /// The identity the target has now.
        current: String,
    },
    /// Step 6: the target cannot reach its provider.
    #[error("target '{id}' cannot serve: {why}; fix the config")]
    Unavailable {
        /// The target.
        id: String,
        /// Its provider kind.
        provider: String,
        /// Why.
        why: String,
    },
    /// Step 6: this daemon has no provider of the target's kind.
    #[error("target '{id}' needs the '{provider}' provider, which this daemon does not have")]
    NoProvider {
        /// The target.
        id: String,
        /// Its provider kind.
        provider: String,
    },
    /// Step 7: the provider cannot do this.
    #[error("target '{id}' ({provider}) cannot {}", capability.as_str())]
    CannotDo {
        /// The target.
        id: String,
        /// Its provider kind.
        provider: String,
        /// What was asked.
        capability: Capability,
    },
    /// A session's target has no provider instance in this daemon (one started without it).
    #[error("target '{id}' has no provider in this daemon")]
    NotServed {
        /// The target.
        id: String,
    },
}
