//! The remote faults the suite injects and, for each, the outcome the specs say the session
//! must have: the table the suite checks every run against. The rows come from the daemon
//! spec §5.6 (connection outcome mapping and reconnect rules) and the impd protocol §9.9 and
//! §13 (what each fault does to an `/exec` socket and to the imp).

use atc_protocol::session::ExitReason;

/// A fault kind, in the order the suite runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// The harness's viewer is dropped (1011), and the reconnect that follows is closed
    /// before `started`.
    DropBeforeStarted,
    /// As above, but the reconnect is closed (1001) right after `started`.
    DropAfterStarted,
    /// impd dropped an output message: the viewer's socket closes 1011, no message.
    Close1011,
    /// The viewer fell behind: `detached slow` + 1000.
    SlowDetach,
    /// The host puts the imp to sleep while the program writes.
    SleepDuringOutput,
    /// impd restarts: every socket closes 1012, every imp sleeps, connections are refused
    /// for a moment.
    ImpdRestart,
    /// A cold boot of the imp with this cause while the session runs.
    Reboot(Cause),
    /// The daemon's impd token is revoked while the session streams (close 1008).
    TokenRevoked,
    /// The token is revoked while the harness is between reconnect attempts.
    RevokeDuringReconnect,
}

/// Cold-boot causes impd records (impd protocol §9.6) that a running imp can suffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cause {
    Watchdog,
    Recovery,
    WakeFallback,
    Restore,
}

impl Cause {
    /// impd's word for it.
    pub fn wire(self) -> &'static str {
        match self {
            Cause::Watchdog => "watchdog",
            Cause::Recovery => "recovery",
            Cause::WakeFallback => "wake_fallback",
            Cause::Restore => "restore",
        }
    }
}

/// What the session must do after the fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// The harness attaches again by itself and the stream goes on, resumed by offset.
    Reattached,
    /// The harness ends as `suspended` (the imp sleeps; a reconnect never wakes it); a revive
    /// wakes it and resumes the same process by offset.
    Suspended,
    /// The session ends as `ended` with a `lastMsg` containing this text.
    Ended(String),
}

/// What the suite saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    Reattached,
    Exit {
        reason: ExitReason,
        detail: String,
    },
    /// Nothing decided within the run's bound.
    Nothing,
    /// The client lost the session (it could not attach again).
    ClientFailed(String),
}

impl Kind {
    /// Every kind, in running order: those that leave the session running first, then those
    /// that suspend it (it is revived), then those that end it (each run spawns anew).
    pub const ALL: [Kind; 12] = [
        Kind::DropBeforeStarted,
        Kind::DropAfterStarted,
        Kind::Close1011,
        Kind::SlowDetach,
        Kind::SleepDuringOutput,
        Kind::ImpdRestart,
        Kind::Reboot(Cause::Watchdog),
        Kind::Reboot(Cause::Recovery),
        Kind::Reboot(Cause::WakeFallback),
        Kind::Reboot(Cause::Restore),
        Kind::TokenRevoked,
        Kind::RevokeDuringReconnect,
    ];

    /// The figure prefix (`close1011Runs`, `rebootWatchdogBytesLost`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::DropBeforeStarted => "dropBeforeStarted",
            Kind::DropAfterStarted => "dropAfterStarted",
            Kind::Close1011 => "close1011",
            Kind::SlowDetach => "slowDetach",
            Kind::SleepDuringOutput => "sleepDuringOutput",
            Kind::ImpdRestart => "impdRestart",
            Kind::Reboot(Cause::Watchdog) => "rebootWatchdog",
            Kind::Reboot(Cause::Recovery) => "rebootRecovery",
            Kind::Reboot(Cause::WakeFallback) => "rebootWakeFallback",
            Kind::Reboot(Cause::Restore) => "rebootRestore",
            Kind::TokenRevoked => "tokenRevoked",
            Kind::RevokeDuringReconnect => "revokeDuringReconnect",
        }
    }

    /// The spec's outcome for this fault.
    pub fn expected(self) -> Expected {
        match self {
            // Closed 1011 or `detached slow` on a started connection: reconnect at once; a
            // drop before `started` or another close: the next delay, then resume.
            Kind::DropBeforeStarted
            | Kind::DropAfterStarted
            | Kind::Close1011
            | Kind::SlowDetach => Expected::Reattached,
            // `detached lost` (sleep) or 1012 (restart, which sleeps every imp): reconnect
            // after a delay with `wake:false` → `INVALID_STATE sleeping` → suspended.
            Kind::SleepDuringOutput | Kind::ImpdRestart => Expected::Suspended,
            // `lost`, then `NO_SESSION` with a cold boot after ours.
            Kind::Reboot(cause) => Expected::Ended(format!("imp rebooted ({})", cause.wire())),
            // 1008 ends at once; a reconnect refused with 401 (or closed 1008) ends at once.
            Kind::TokenRevoked => Expected::Ended("1008".into()),
            Kind::RevokeDuringReconnect => Expected::Ended("token".into()),
        }
    }

    /// Whether the harness waits out a reconnect delay after this fault (its link is seen
    /// reattaching for a while), so the client can be dropped meanwhile.
    pub fn waits_to_reconnect(self) -> bool {
        matches!(
            self,
            Kind::DropBeforeStarted
                | Kind::DropAfterStarted
                | Kind::SleepDuringOutput
                | Kind::ImpdRestart
                | Kind::Reboot(_)
        )
    }

    /// Whether output offsets hold across this fault, so no byte may be lost.
    pub fn offsets_hold(self) -> bool {
        matches!(self.expected(), Expected::Reattached | Expected::Suspended)
    }
}

impl Expected {
    /// Whether `seen` is this outcome.
    pub fn matches(&self, seen: &Observed) -> bool {
        match (self, seen) {
            (Expected::Reattached, Observed::Reattached) => true,
            (Expected::Suspended, Observed::Exit { reason, .. }) => {
                *reason == ExitReason::Suspended
            }
            (Expected::Ended(text), Observed::Exit { reason, detail }) => {
                *reason == ExitReason::Ended && detail.contains(text.as_str())
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_kind_has_an_outcome() {
        let mut names: Vec<_> = Kind::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Kind::ALL.len());
        assert!(Kind::Close1011.offsets_hold());
        assert!(Kind::ImpdRestart.offsets_hold());
        assert!(!Kind::Reboot(Cause::Restore).offsets_hold());
    }

    #[test]
    fn outcomes_match_only_their_own() {
        let ended = |detail: &str| Observed::Exit {
            reason: ExitReason::Ended,
            detail: detail.into(),
        };
        let watchdog = Kind::Reboot(Cause::Watchdog).expected();
        assert!(watchdog.matches(&ended("imp rebooted (watchdog)")));
        assert!(!watchdog.matches(&ended("imp rebooted (restore)")));
        assert!(!watchdog.matches(&Observed::Reattached));
        assert!(Kind::SleepDuringOutput.expected().matches(&Observed::Exit {
            reason: ExitReason::Suspended,
            detail: "asleep".into()
        }));
        assert!(!Expected::Reattached.matches(&Observed::Nothing));
    }
}
