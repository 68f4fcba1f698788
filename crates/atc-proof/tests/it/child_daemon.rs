//! The suites' daemon child: `atc-proof daemon` is a real daemon, `kill` stops it dead, and a
//! new one on the same state dir is found by its own pid, not the dead one's `daemon.json`.

use std::path::PathBuf;

use atc_testkit::{ChildDaemon, DaemonSpec};

fn spec() -> DaemonSpec {
    DaemonSpec::new(
        PathBuf::from(env!("CARGO_BIN_EXE_atc-proof")),
        serde_json::json!({"agents": {"cat": {"bin": "cat"}}}),
    )
}

#[actix_rt::test]
async fn a_killed_daemon_restarts_on_its_state_dir() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    let log = dir.path().join("daemon-1.log");
    let first = ChildDaemon::launch(&spec(), &state, &log)
        .await
        .expect("the first daemon starts");
    let spawned = first
        .client()
        .spawn(&serde_json::json!({"agent": "cat", "cwd": "/tmp", "name": "kept"}))
        .await
        .expect("spawn a cat");
    let first_pid = first.pid();
    let first_log = first.log();
    first.kill();

    let log = dir.path().join("daemon-2.log");
    let second = ChildDaemon::launch(&spec(), &state, &log)
        .await
        .expect("the second daemon starts on the same state dir");
    assert_ne!(second.pid(), first_pid);
    let fleet = second.client().get_json("/v1/fleet").await.expect("fleet");
    let id = spawned.id.to_string();
    let rows = fleet["fleet"].as_array().expect("a fleet array");
    assert!(
        rows.iter().any(|row| row["sessionId"] == id.as_str()),
        "the row survives the kill: {fleet}\nfirst:\n{first_log}\nsecond:\n{}",
        second.log()
    );
    assert!(second.stop_within(std::time::Duration::from_secs(15)).await);
}
