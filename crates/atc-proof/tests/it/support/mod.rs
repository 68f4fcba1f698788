//! Running a suite's short version the way a user runs the full one: the real `atc-proof`
//! binary with `--json`, its work dir a fresh temporary one, and the JSON line read back.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// Held while a suite runs.
static SUITES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One finished run of the binary.
pub struct Run {
    pub report: Value,
    pub output: Output,
    /// The run's work dir (daemon logs, state dirs); removed when dropped.
    pub work: tempfile::TempDir,
}

/// Runs `atc-proof <suite> <args> --json --work-dir <fresh dir>` and parses its last line. No
/// JSON line fails the test with the run's stdout, stderr and the tail of every log it wrote.
pub fn run_suite(suite: &str, args: &[&str]) -> Run {
    // A suite loads the machine on purpose; one runs at a time, as when each was a test binary
    // of its own. A suite that panicked leaves the lock poisoned, which stops no other.
    let _alone = SUITES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let work = tempfile::tempdir().expect("a work dir");
    let output = Command::new(env!("CARGO_BIN_EXE_atc-proof"))
        .arg(suite)
        .args(args)
        .arg("--json")
        .arg("--work-dir")
        .arg(work.path())
        .output()
        .unwrap_or_else(|e| panic!("run atc-proof {suite}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let report: Value = serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "no JSON line ({e}); stdout:\n{stdout}\nstderr:\n{}\n{}",
            String::from_utf8_lossy(&output.stderr),
            log_tails(work.path())
        )
    });
    Run {
        report,
        output,
        work,
    }
}

/// The entry of the figure called `name`.
pub fn figure_entry(report: &Value, name: &str) -> Value {
    report["figures"]
        .as_array()
        .and_then(|fs| fs.iter().find(|f| f["name"] == name))
        .cloned()
        .unwrap_or_else(|| panic!("no figure {name} in {report:#}"))
}

/// The value of the figure called `name`.
pub fn figure(report: &Value, name: &str) -> f64 {
    figure_entry(report, name)["value"]
        .as_f64()
        .unwrap_or_else(|| panic!("figure {name} has no number in {report}"))
}

/// The last 40 lines of every `.log` file under `dir` (three levels deep), for failure
/// messages.
pub fn log_tails(dir: &Path) -> String {
    let mut out = String::new();
    collect_log_tails(dir, 3, &mut out);
    out
}

fn collect_log_tails(dir: &Path, depth: u32, out: &mut String) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() && depth > 0 {
            collect_log_tails(&path, depth - 1, out);
        } else if path.extension().is_some_and(|e| e == "log") {
            let body = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = body.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            out.push_str(&format!("--- {} (last lines)\n{tail}\n", path.display()));
        }
    }
}
