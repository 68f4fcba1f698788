//! The `remote` suite's short version: two of each impd fault under a remote session with
//! numbered lines flowing and a client attached, through the real binary. Every outcome must
//! be the one the spec gives for its fault, and no line may be lost or repeated where offsets
//! hold.

use std::process::Command;

#[test]
fn two_of_each_remote_fault_meet_the_spec() {
    let work = tempfile::tempdir().expect("a work dir");
    let out = Command::new(env!("CARGO_BIN_EXE_atc-proof"))
        .args([
            "remote",
            "--count",
            "2",
            "--seed",
            "12",
            "--seconds",
            "150",
            "--json",
        ])
        .arg("--work-dir")
        .arg(work.path())
        .output()
        .expect("run atc-proof remote");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let report: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "no JSON line ({e}): stdout {stdout}\nstderr {}\ndaemon log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(work.path().join("daemon.log")).unwrap_or_default()
        )
    });
    let figures = report["figures"].as_array().expect("figures");
    let value = |name: &str| {
        figures
            .iter()
            .find(|f| f["name"] == name)
            .and_then(|f| f["value"].as_f64())
            .unwrap_or_else(|| panic!("no figure {name}: {report}"))
    };
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
