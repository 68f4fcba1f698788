//! The security suite's short version: the real `atc-proof security` with 4 slow-loris
//! connections, every check of the full one. It must pass, and its key figures must be
//! there and right (a walk that walked nothing would pass for the wrong reason).

use crate::support;

use support::figure;

#[test]
fn the_security_walk_finds_nothing() {
    let support::Run {
        report,
        output: out,
        ..
    } = support::run_suite(
        "security",
        &["--count", "4", "--seed", "12", "--seconds", "150"],
    );
    assert_eq!(report["passed"], true, "{report:#}");
    assert!(figure(&report, "routesWalked") >= 20.0, "{report}");
    assert_eq!(figure(&report, "unauthorizedMisses"), 0.0);
    assert!(figure(&report, "upgradesTried") >= 36.0, "{report}");
    assert_eq!(
        figure(&report, "originsRefused"),
        figure(&report, "upgradesTried")
    );
    assert_eq!(figure(&report, "modeViolations"), 0.0);
    assert_eq!(figure(&report, "remoteListenNotRefused"), 0.0);
    assert_eq!(figure(&report, "remoteListenCases"), 3.0);
    assert_eq!(figure(&report, "credentialLeaks"), 0.0);
    assert!(figure(&report, "placesSearched") >= 10.0, "{report}");
    assert_eq!(figure(&report, "pathEscapes"), 0.0);
    assert!(figure(&report, "hostileSpawns") >= 24.0, "{report}");
    assert_eq!(figure(&report, "cutoffChecks"), 8.0);
    assert_eq!(
        figure(&report, "cutoffChecksPassed"),
        figure(&report, "cutoffChecks")
    );
    assert!(figure(&report, "wellBehavedRequests") > 0.0, "{report}");
    assert_eq!(out.status.code(), Some(0), "{report:#}");
}
