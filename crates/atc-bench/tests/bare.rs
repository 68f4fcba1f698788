//! The bare-PTY ceilings as the bench uses them: a `--phases bare` run, whose spawn ceiling
//! must keep each child running until its batch ends and leave none behind. Real PTYs and real
//! children; no timing is asserted. A test binary of its own, outside `tests/it/`, so no other
//! test's children share this process while it counts them.

#[path = "it/common/mod.rs"]
mod common;

#[actix_rt::test]
async fn the_bare_spawn_ceiling_keeps_its_children_running_then_reaps_them() {
    let args = common::args(&[
        "--phases",
        "bare",
        "--sessions",
        "24",
        "--concurrency",
        "4",
        "--echo-count",
        "10",
        "--payload-mib",
        "1",
        "--payload",
        "lines",
        "--phase-timeout-secs",
        "60",
    ]);
    assert!(!args.needs_daemon());
    let (_, json) = common::run(args, String::new(), String::new()).await;

    let spawn = &json["bareSpawn"];
    assert_eq!(spawn["outcome"], "ok", "{spawn:#}");
    let f = &spawn["figures"];
    assert_eq!(f["spawned"], 24, "{f:#}");
    // Every child of the kept batch was still running when it ended, as a session's is.
    assert_eq!(f["runningAtEnd"], 24, "{f:#}");
    assert!(f["cleanupMs"].as_f64().is_some_and(|ms| ms > 0.0), "{f:#}");
    assert!(
        f["cpuPerSpawnUs"].as_f64().is_some_and(|us| us >= 0.0),
        "{f:#}"
    );
    let cycles = &f["killedAtOnce"];
    assert_eq!(cycles["spawned"], 24, "{cycles:#}");
    assert_eq!(cycles["failed"], 0, "{cycles:#}");
    // Both batches reaped what they spawned: no child of this process is left.
    assert_eq!(children_of_this_process(), Vec::<String>::new());
}

/// The pids of this process's children that still exist (zombies included), from procfs.
fn children_of_this_process() -> Vec<String> {
    let mut pids = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").expect("tasks") {
        let path = task.expect("task").path().join("children");
        let children = std::fs::read_to_string(path).unwrap_or_default();
        pids.extend(children.split_whitespace().map(str::to_owned));
    }
    pids
}
