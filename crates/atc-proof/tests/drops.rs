//! The short version of the `drops` suite: 30 drops of every kind across two sessions, run by
//! the real binary, with nothing lost, repeated or wrong and both sessions unharmed.

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
fn thirty_drops_lose_and_repeat_nothing() {
    let work = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_atc-proof"))
        .args([
            "drops",
            "--count",
            "30",
            "--seed",
            "12",
            "--seconds",
            "150",
            "--json",
        ])
        .arg("--work-dir")
        .arg(work.path())
        .output()
        .expect("run atc-proof drops");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let report: Value = serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "no JSON line ({e}); stdout:\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
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
