//! The `crashes` suite's short version: the real binary, five `kill -9`s of its daemon child
//! during keyed spawns of all three kinds (local, imp, imp with the broker), and its figures.

use crate::support;

use support::figure;

#[test]
fn five_kills_during_keyed_spawns_spawn_nothing_twice_and_lose_no_row() {
    let support::Run {
        report,
        output: out,
        work,
    } = support::run_suite(
        "crashes",
        &["--count", "5", "--seed", "12", "--seconds", "50"],
    );
    let logs = || {
        let dir = work.path().join("crashes/logs");
        let mut text = String::new();
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let body = std::fs::read_to_string(entry.path()).unwrap_or_default();
            let tail: String = body.lines().rev().take(15).collect::<Vec<_>>().join("\n");
            text.push_str(&format!(
                "--- {} (last lines, newest first)\n{tail}\n",
                entry.path().display()
            ));
        }
        text
    };
    assert_eq!(figure(&report, "kills"), 5.0, "{report:#}\n{}", logs());
    // Every figure that must be zero is zero, and the run passes.
    for zero in [
        "doubleSpawns",
        "answersNamingAnotherSession",
        "keysInProgressAfterRestart",
        "fleetRowsLost",
        "answeredRemoteNotReattached",
        "integrityFailures",
        "ledgerReadFailures",
        "keysUnanswered",
        "restartFailures",
        "daemonLogsWithPanics",
        "remoteOrphansAtEnd",
    ] {
        assert_eq!(figure(&report, zero), 0.0, "{zero}: {report:#}\n{}", logs());
    }
    assert!(figure(&report, "spawnsAnswered") >= 5.0, "{report:#}");
    for kind in ["Local", "Imp", "Broker"] {
        assert!(
            figure(&report, &format!("spawnsAnswered{kind}")) >= 1.0,
            "no {kind} spawn answered: {report:#}"
        );
    }
    assert_eq!(report["passed"], true, "{report:#}");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
