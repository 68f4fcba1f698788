//! The short version of the `drops` suite: 30 drops of every kind across two sessions, run by
//! the real binary, with nothing lost, repeated or wrong and both sessions unharmed.

use crate::support;

use support::figure;

#[test]
fn thirty_drops_lose_and_repeat_nothing() {
    let support::Run {
        report,
        output: out,
        work,
    } = support::run_suite(
        "drops",
        &["--count", "30", "--seed", "12", "--seconds", "150"],
    );
    let log = std::fs::read_to_string(work.path().join("drops/daemon.log")).unwrap_or_default();
    assert_eq!(
        report["passed"],
        true,
        "{report:#}\ndaemon log tail:\n{}",
        tail(&log)
    );
    assert_eq!(figure(&report, "drops"), 30.0);
    for zero in ["bytesLost", "bytesRepeated", "bytesWrong", "cycleErrors"] {
        assert_eq!(figure(&report, zero), 0.0, "{zero}: {report:#}");
    }
    for some in ["midFrameDrops", "repaintDrops", "desyncDrops"] {
        assert!(figure(&report, some) >= 1.0, "{some}: {report:#}");
    }
    assert!(figure(&report, "bytesChecked") > 0.0);
    assert_eq!(figure(&report, "sessionsAlive"), 2.0);
    assert_eq!(figure(&report, "screensAnswering"), 2.0);
    assert!(out.status.success(), "exit status {:?}", out.status);
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
