//! The security suite's short version: the real `atc-proof security` with 4 slow-loris
//! connections, every check of the full one. It must pass, and its key figures must be
//! there and right (a walk that walked nothing would pass for the wrong reason).

use std::process::Command;

use serde_json::Value;

fn figure(report: &Value, name: &str) -> f64 {
    report["figures"]
        .as_array()
        .and_then(|fs| fs.iter().find(|f| f["name"] == name))
        .and_then(|f| f["value"].as_f64())
        .unwrap_or_else(|| panic!("no figure {name} in {report}"))
}

#[test]
fn the_security_walk_finds_nothing() {
    let work = tempfile::tempdir().expect("work dir");
    let out = Command::new(env!("CARGO_BIN_EXE_atc-proof"))
        .args([
            "security",
            "--count",
            "4",
            "--seed",
            "12",
            "--seconds",
            "150",
            "--json",
        ])
        .arg("--work-dir")
        .arg(work.path())
        .output()
        .expect("run atc-proof security");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let report: Value = serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "no JSON line ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
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
