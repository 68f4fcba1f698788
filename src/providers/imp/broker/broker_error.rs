//! Every refusal on the broker path (spec §6.5), each carrying what its message and its
//! `data` need. The wire form is `crate::server::error`'s, like every other module's.

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
    /// impd lacks a feature the broker needs.
    #[error("impd serving imp '{imp}' is too old for broker authentication (no {}); upgrade it to 0.30.0 or later", missing.join(", no "))]
    ImpdTooOld {
        /// The imp.
        imp: String,
        /// The features it lacks, by their `system.info` names.
        missing: Vec<&'static str>,
    },
    /// A start that requires the broker on an impd that cannot check `require`: nothing was
    /// sent.
    #[error("impd serving imp '{imp}' cannot require the broker for a start; upgrade it to 0.30.0 or later")]
    ExecRequireMissing {
        /// The imp.
        imp: String,
    },
    /// impd refused a start because its broker is not ready.
    #[error("imp '{imp}': impd's broker is not ready ({detail}); the agent was not started")]
    BrokerNotReady {
        /// The imp.
        imp: String,
        /// impd's detail (no grant, the CA bundle failed, an env that sets a broker variable…).
        detail: String,
    },
    /// The agent's sign-in check (`auth.check`) failed inside the imp: the agent is not
    /// signed in there. Only how it ended is kept; what it printed could name an account.
    #[error("agent '{agent}' is not signed in on target '{target}': its sign-in check (auth.check) {outcome}; sign it in inside the imp or fix 'auth.check'")]
    NotConfigured {
        /// The agent.
        agent: String,
        /// The target.
        target: String,
        /// How the check ended.
        outcome: CheckOutcome,
    },
    /// The daemon's impd token is below `manage`.
    #[error("the daemon's impd token has scope '{scope}'; broker authentication needs a token with scope 'manage'")]
    TokenScope {
        /// The token's scope.
        scope: String,
    },
    /// The token reaches every imp.
    #[error("the daemon's impd token names no imp patterns (or only '*'); give it patterns that cover only atc's imps")]
    TokenTooBroad,
    /// The imp is outside the token's patterns.
    #[error("imp '{imp}' is outside the daemon's impd token's imp patterns")]
    ImpOutOfScope {
        /// The imp.
        imp: String,
    },
    /// A bound secret is not in the token's `grantable` list.
    #[error("the daemon's impd token may not grant secret '{secret}'; add it to the token's grantable list")]
    SecretNotGrantable {
        /// The secret.
        secret: String,
    },
    /// A bound secret does not exist at impd.
    #[error("impd has no secret '{secret}'; add it to impd (imp secrets add) or fix the agent's 'auth.secrets'")]
    SecretMissing {
        /// The secret.
        secret: String,
    },
    /// A secret's rules at impd differ from the bound ones.
    #[error("secret '{secret}' changed at impd since it was bound; rebind the session (POST /v1/sessions/{{id}}/auth/rebind)")]
    SecretMismatch {
        /// The secret.
        secret: String,
    },
    /// An oauth secret whose sign-in is not ready.
    #[error("secret '{secret}' is an impd sign-in that is not ready ({status}); finish the sign-in at impd")]
    SigninNeeded {
        /// The secret.
        secret: String,
        /// Its `oauth.status`.
        status: String,
    },
    /// An imp or a binding already exists under the name a new binding would create.
    #[error("imp '{imp}' exists already, so it cannot be bound for a new session; forget the session that owns it")]
    RuntimeExists {
        /// The imp.
        imp: String,
    },
    /// The host's binding is not `ready`.
    #[error("the host's broker binding is {state}; launches are blocked until it is rebound (POST /v1/sessions/{{id}}/auth/rebind)")]
    Blocked {
        /// The binding's state.
        state: &'static str,
    },
    /// The host holds no binding, or one for other secrets than the launch's.
    #[error("{reason}; rebind the session (POST /v1/sessions/{{id}}/auth/rebind)")]
    RebindRequired {
        /// Why.
        reason: String,
    },
    /// A sub-session joining its parent's host whose agent's auth is not the one the host is
    /// bound to (one binding per host, spec §6.3).
    #[error("session {parent}'s host is bound to another auth than this agent's; a sub-session joins it only with the same auth (pick the parent's agent, or another target)")]
    BindingMismatch {
        /// The parent, the host's owner.
        parent: atc_protocol::SessionId,
    },
    /// The imp under the binding's name is not the one it created.
    #[error("imp '{imp}' is not the one its binding created; forget the session")]
    RuntimeMismatch {
        /// The imp.
        imp: String,
    },
    /// Bound grants impd no longer has.
    #[error("the imp lacks grants its binding holds ({}); rebind the session", missing.join(", "))]
    GrantMissing {
        /// The secrets.
        missing: Vec<String>,
    },
    /// Grants the imp holds beyond its binding's.
    #[error("the imp holds grants its binding does not ({}); revoke them at impd or rebind the session", extra.join(", "))]
    GrantsMismatch {
        /// The secrets.
        extra: Vec<String>,
    },
    /// A revoke impd did not confirm for every grant.
    #[error("impd did not confirm the revoke of {}; retry the revoke", unconfirmed.join(", "))]
    RevocationPending {
        /// The secrets not confirmed gone.
        unconfirmed: Vec<String>,
    },
    /// The session's host holds no broker binding.
    #[error("this session's host holds no broker binding")]
    NotBound,
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

/// How a failed sign-in check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckOutcome {
    /// It exited with this non-zero status.
    Exited(i32),
    /// A signal ended it.
    Signalled,
    /// impd could not run it (the command is missing from the guest).
    NotRun,
}

impl std::fmt::Display for CheckOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckOutcome::Exited(code) => write!(f, "exited with status {code}"),
            CheckOutcome::Signalled => f.write_str("was ended by a signal"),
            CheckOutcome::NotRun => f.write_str("could not be run (is the command in the image?)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_sign_in_check_is_told_by_how_it_ended_only() {
        let e = |outcome| BrokerError::NotConfigured {
            agent: "codex".into(),
            target: "box".into(),
            outcome,
        };
        let exited = e(CheckOutcome::Exited(3)).to_string();
        assert!(exited.contains("exited with status 3"), "{exited}");
        assert!(
            exited.contains("'codex'") && exited.contains("'box'"),
            "{exited}"
        );
        let missing = e(CheckOutcome::NotRun).to_string();
        assert!(missing.contains("could not be run"), "{missing}");
        let signalled = e(CheckOutcome::Signalled).to_string();
        assert!(signalled.contains("signal"), "{signalled}");
    }
}
