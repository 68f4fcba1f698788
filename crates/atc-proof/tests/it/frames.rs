//! The short version of the `frames` suite: every malformed-frame case once on each socket
//! (the silence cases need a long run and are left out), by the real binary: each answered as
//! expected, no hang, the daemon up and the session unharmed, the witness missing nothing.

use crate::support;

use support::figure;

#[test]
fn every_malformed_frame_gets_a_clear_answer_and_harms_nothing() {
    let support::Run {
        report,
        output: out,
        ..
    } = support::run_suite(
        "frames",
        &["--count", "1", "--seed", "3", "--seconds", "120"],
    );
    assert_eq!(report["passed"], true, "{report:#}");
    let run = figure(&report, "casesRun");
    assert!(run >= 60.0, "every case on all three sockets: {run}");
    assert_eq!(figure(&report, "casesAsExpected"), run);
    for zero in [
        "hangs",
        "daemonCrashes",
        "sessionsHarmed",
        "witnessBytesLost",
        "witnessBytesRepeated",
        "witnessBytesWrong",
        "witnessDisconnects",
    ] {
        assert_eq!(figure(&report, zero), 0.0, "{zero}: {report:#}");
    }
    assert!(out.status.success(), "exit status {:?}", out.status);
}
