//! The `remote` suite's short version: two of each impd fault under a remote session with
//! numbered lines flowing and a client attached, through the real binary. Every outcome must
//! be the one the spec gives for its fault, and no line may be lost or repeated where offsets
//! hold.

use crate::support;

use support::figure;

#[test]
fn two_of_each_remote_fault_meet_the_spec() {
    let support::Run { report, work, .. } = support::run_suite(
        "remote",
        &["--count", "2", "--seed", "12", "--seconds", "150"],
    );
    let value = |name: &str| figure(&report, name);
    for kind in [
        "dropBeforeStarted",
        "dropAfterStarted",
        "close1011",
        "slowDetach",
        "sleepDuringOutput",
        "impdRestart",
        "rebootWatchdog",
        "rebootRecovery",
        "rebootWakeFallback",
        "rebootRestore",
        "tokenRevoked",
        "revokeDuringReconnect",
    ] {
        assert_eq!(value(&format!("{kind}Runs")), 2.0, "{report}");
        assert_eq!(value(&format!("{kind}WrongOutcome")), 0.0, "{report}");
        assert_eq!(value(&format!("{kind}BytesRepeated")), 0.0, "{report}");
        assert!(value(&format!("{kind}ReconnectP99Ms")) > 0.0, "{report}");
    }
    for kind in [
        "close1011",
        "slowDetach",
        "sleepDuringOutput",
        "impdRestart",
    ] {
        assert_eq!(value(&format!("{kind}BytesLost")), 0.0, "{report}");
    }
    assert!(value("linesChecked") > 100.0, "{report}");
    assert_eq!(
        report["passed"],
        true,
        "{report}\ndaemon log:\n{}",
        std::fs::read_to_string(work.path().join("daemon.log")).unwrap_or_default()
    );
}
