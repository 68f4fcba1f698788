//! The short version of the `frames` suite: every malformed-frame case once on each socket
//! (the silence cases need a long run and are left out), by the real binary: each answered as
//! expected, no hang, the daemon up and the session unharmed, the witness missing nothing.

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
fn every_malformed_frame_gets_a_clear_answer_and_harms_nothing() {
    let work = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_atc-proof"))
        .args([
            "frames",
            "--count",
            "1",
            "--seed",
            "3",
            "--seconds",
            "120",
            "--json",
        ])
        .arg("--work-dir")
        .arg(work.path())
        .output()
        .expect("run atc-proof frames");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let report: Value = serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "no JSON line ({e}); stdout:\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
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
