//! Why an imp host could not do what a session asked: impd refused or could not be reached,
//! the host is busy or leased by another owner, or its harness never started (spec §5).

use impd_client::{ImpPortError, ImpdCode};
use serde_json::{Map, Value};

/// A refusal from an imp host.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HostError {
    /// The host's lease actor is gone (only while the daemon stops).
    #[error("the host's lease actor stopped; retry")]
    LeaseGone,
    /// An impd call failed.
    #[error(
        "target '{target}': {what} failed ({code}: {message}); check impd and the target's config"
    )]
    Impd {
        /// The target.
        target: String,
        /// What was being done, e.g. "creating the imp".
        what: &'static str,
        /// impd's code, e.g. `RAM_BUDGET_EXCEEDED`.
        code: ImpdCode,
        /// impd's message.
        message: String,
    },
    /// A suspend of a host whose session looks busy.
    #[error(
        "target '{target}': the session is busy (an agent turn or output under way), so its host stays awake; retry when it is idle"
    )]
    Busy {
        /// The target.
        target: String,
    },
    /// A suspend of a host another owner holds a lease on.
    #[error("target '{target}': another owner holds a lease on the host, so it stays awake")]
    Leased {
        /// The target.
        target: String,
        /// impd's `leases` and `otherCount`, passed on as given.
        leases: Map<String, Value>,
    },
    /// The harness ended before its start was confirmed.
    #[error("target '{target}': the session did not start: {detail}")]
    NotStarted {
        /// The target.
        target: String,
        /// Why it ended.
        detail: String,
    },
    /// impd would not listen on the report socket (spec §5.6).
    #[error("target '{target}': imp refused the report socket ({code})")]
    ReportSocketRefused {
        /// The target.
        target: String,
        /// impd's code.
        code: ImpdCode,
        /// impd's message.
        message: String,
    },
    /// A command or transfer on an imp target that names no host.
    #[error("a command on an imp target must name the host (the owning session) to run on")]
    NoHostNamed,
    /// The agent's hooks need atc inside the imp, and there is none of the daemon's version
    /// and no binary to copy in.
    #[error(
        "target '{target}': the agent's hooks need atc {daemon} inside the imp, but the image has {} and <guestDir>/bin/atc is {}, and this daemon has no atc binary to copy in; put atc {daemon} on the image's PATH (with guestATC) or run the daemon from its installed binary",
        shown(image_version), shown(copied_version), daemon = super::guest_atc::DAEMON_VERSION
    )]
    NoGuestAtc {
        /// The target.
        target: String,
        /// The image's atc version, if it has one.
        image_version: Option<String>,
        /// The version `<guestDir>/bin/atc` reports, if it runs.
        copied_version: Option<String>,
    },
    /// 4 MiB of input waits for the remote session.
    #[error("{}", if *.connected {
        "the remote session has 4 MiB of input it has not sent yet; retry once it has caught up"
    } else {
        "the remote session is reconnecting and 4 MiB of input already waits for it; retry once it is attached"
    })]
    InputFull {
        /// Whether a connection was up.
        connected: bool,
    },
    /// The failure may have left its effect standing (an imp it created and could not destroy
    /// again): a keyed spawn must answer `outcome_unknown` and never run again (spec §7.4).
    #[error(transparent)]
    EffectRemains(Box<HostError>),
}

/// A version in a message, or "none".
fn shown(version: &Option<String>) -> String {
    version
        .as_deref()
        .map_or("none".to_string(), |v| format!("atc {v}"))
}

impl HostError {
    /// An impd failure while doing `what` for `target`.
    pub fn impd(target: &str, what: &'static str, e: &ImpPortError) -> HostError {
        HostError::Impd {
            target: target.to_string(),
            what,
            code: e.code.clone(),
            message: e.message.clone(),
        }
    }

    /// Marks the error as one whose effect may still stand.
    pub fn effect_remains(self) -> HostError {
        match self {
            e @ HostError::EffectRemains(_) => e,
            e => HostError::EffectRemains(Box::new(e)),
        }
    }
}
