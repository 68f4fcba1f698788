//! The soak's short versions, through the real binary: 50 sessions held 20 s with churn and
//! sampled every 2 s (no error, no session lost, RSS and descriptors flat, every figure and
//! reading present); and a growth run against a daemon whose open-file limit is lowered to
//! 256, which must stop at that limit, name it, leave every held session alive and leave no
//! child of the refused start behind.

use crate::support;

use serde_json::Value;

use support::figure_entry as figure;

/// The soak with `args`, and its stderr.
fn run(args: &[&str]) -> (Value, String) {
    let mut all = args.to_vec();
    all.extend(["--seed", "12"]);
    let run = support::run_suite("soak", &all);
    (
        run.report,
        String::from_utf8_lossy(&run.output.stderr).to_string(),
    )
}

#[test]
fn fifty_sessions_held_with_churn_lose_nothing_and_do_not_grow() {
    let (report, stderr) = run(&[
        "--count",
        "50",
        "--hold-secs",
        "20",
        "--sample-secs",
        "2",
        "--seconds",
        "120",
    ]);
    assert_eq!(report["passed"], true, "{report:#}\n{stderr}");
    assert_eq!(figure(&report, "sessionsHeld")["value"], 50.0);
    assert_eq!(figure(&report, "errors")["value"], 0.0);
    assert_eq!(figure(&report, "sessionsLost")["value"], 0.0);
    for churn in ["attaches", "resizes", "echoTrips", "listCalls", "turnovers"] {
        assert!(
            figure(&report, churn)["value"].as_f64() > Some(0.0),
            "{churn} never happened: {report:#}"
        );
    }
    for name in [
        "rssPerSessionKib",
        "fdsPerSession",
        "walMaxBytes",
        "rssSteadyGrowthKib",
        "fdSteadyGrowth",
        "echoStartP99Ms",
        "echoEndP99Ms",
        "listStartP99Ms",
        "listEndP99Ms",
        "spawnEndP99Ms",
        "ptyMax",
    ] {
        figure(&report, name);
    }
    let rows = report["series"][0]["rows"].as_array().expect("a series");
    // A reading every 2 s over 20 s, and one at the end.
    assert!(rows.len() >= 9, "{rows:?}");
    let alive = report["series"][0]["columns"]
        .as_array()
        .and_then(|c| c.iter().position(|c| c == "alive"))
        .expect("an alive column");
    assert!(
        rows.iter().all(|r| r[alive] == 50.0 || r[alive] == 49.0),
        "{rows:?}"
    );
}

#[test]
fn growth_stops_at_the_daemons_open_file_limit_and_names_it() {
    let (report, stderr) = run(&["--grow", "--grow-fd-limit", "256", "--count", "300"]);
    assert_eq!(report["passed"], true, "{report:#}\n{stderr}");
    let notes = report["notes"].to_string();
    assert!(notes.contains("stopped by open files"), "{report:#}");
    // Named by the daemon, not guessed from the readings.
    assert!(
        notes.contains("host_unavailable, problem open_files_exhausted"),
        "{report:#}"
    );
    assert_eq!(figure(&report, "refusalNamesItsLimit")["value"], 1.0);
    assert_eq!(figure(&report, "childrenBeyondSessions")["value"], 0.0);
    let grown = figure(&report, "grownSessions")["value"]
        .as_f64()
        .unwrap_or(0.0);
    assert!((20.0..256.0).contains(&grown), "{report:#}");
    assert_eq!(figure(&report, "sessionsLostAtLimit")["value"], 0.0);
}
