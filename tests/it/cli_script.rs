//! `atc send` and `atc wait` as a script runs them: the real binary against an in-process
//! daemon, typing into a real shell and waiting on the events socket, with the exit statuses
//! a script tests (`atc spawn … && atc send … && atc wait … && atc screen …`).

use std::path::Path;
use std::process::Stdio;

use atc_testkit::{agent_shells_daemon, hook, id_of, TestDaemon, WITHIN};
use serde_json::json;
use tokio::process::{Child, Command};

use super::cli::atc;

/// `atc --state-dir DIR wait …` started, not waited for: the test acts while it waits.
fn start_wait(dir: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_atc"))
        .arg("--state-dir")
        .arg(dir)
        .arg("wait")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start atc wait")
}

/// The waiting `atc` has not exited: what it waits for has not happened yet.
fn still_waiting(child: &mut Child) {
    assert!(
        child.try_wait().expect("poll atc wait").is_none(),
        "atc wait exited before the state came"
    );
}

/// Its exit code and stderr, within the test deadline.
async fn finished(child: Child) -> (Option<i32>, String) {
    let out = tokio::time::timeout(WITHIN, child.wait_with_output())
        .await
        .expect("atc wait exited within the deadline")
        .expect("atc wait ran");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[actix_rt::test]
async fn send_submits_a_line_and_keys_type_named_keys() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let dir = d.state_dir.clone();

    // A line, through the line plan: several words join with spaces.
    let out = atc(&dir, &["send", &id, "echo", "line-$((40+2))"], &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    d.wait_screen(&id, "line-42").await;

    // Named keys: words as text, Space and Enter as keys.
    let out = atc(
        &dir,
        &[
            "send",
            "--keys",
            &id,
            "echo",
            "Space",
            "keys-$((6*7))",
            "Enter",
        ],
        &[],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    d.wait_screen(&id, "keys-42").await;

    // C-c interrupts what runs: the next line runs at once, not after the sleep.
    d.submit(&id, "sleep 600").await;
    let out = atc(&dir, &["send", "--keys", &id, "C-c"], &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let out = atc(&dir, &["send", &id, "echo", "after-$((1+1))-int"], &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    d.wait_screen(&id, "after-2-int").await;

    // A misspelt key is an error that names it, and nothing of the list is typed.
    let out = atc(
        &dir,
        &[
            "send",
            "--keys",
            &id,
            "echo",
            "Space",
            "never-$((5*5))",
            "C-Entr",
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr(&out).contains("C-Entr"), "{}", stderr(&out));
    d.submit(&id, "echo marker-$((3*3))").await;
    let screen = d.wait_screen(&id, "marker-9").await;
    assert!(
        !screen.to_string().contains("never-"),
        "a refused key list typed something: {screen}"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn wait_returns_0_when_a_hook_says_done_and_at_once_when_it_already_is() {
    let (d, _tmp) = agent_shells_daemon().await;
    let id = id_of(&d.spawn("claude").await);
    let dir = d.state_dir.clone();
    let mut waiting = start_wait(&dir, &[&id, "--for", "done", "--timeout", "30"]);
    // It follows the socket while the session works or asks: neither is done.
    hook(
        &d,
        &id,
        json!({"hook_event_name": "Notification", "message": "Allow Bash?"}),
    )
    .await;
    d.wait_session(&id, "needs_you", |s| s["state"] == "needs_you")
        .await;
    still_waiting(&mut waiting);
    hook(
        &d,
        &id,
        json!({"hook_event_name": "Stop", "last_assistant_message": "all done"}),
    )
    .await;
    let (code, err) = finished(waiting).await;
    assert_eq!(code, Some(0), "{err}");

    // Already done: no wait at all; not needs_you, so that one would wait.
    let out = atc(&dir, &["wait", &id, "--for", "done"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    d.stop().await;
}

#[actix_rt::test]
async fn wait_times_out_with_2() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let started = std::time::Instant::now();
    let out = atc(
        &d.state_dir,
        &["wait", &id, "--for", "done", "--timeout", "0.5"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(started.elapsed() >= std::time::Duration::from_millis(500));
    assert!(stderr(&out).contains("not done yet"), "{}", stderr(&out));
    let out = atc(&d.state_dir, &["wait", &id, "--for", "later"], &[]).await;
    assert_eq!(
        out.status.code(),
        Some(2),
        "clap's usage error: {}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("needs_you"), "{}", stderr(&out));
    d.stop().await;
}

#[actix_rt::test]
async fn wait_returns_1_when_the_session_exits_first_and_0_waiting_for_exited() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    let dir = d.state_dir.clone();
    let mut for_done = start_wait(&dir, &[&id, "--for", "done"]);
    let mut for_exit = start_wait(&dir, &[&id, "--for", "exited", "--timeout", "30"]);
    // Both are connected once the daemon counts their sockets... which no API shows; but
    // neither can have exited while the session runs, and the socket is opened before the
    // state is read, so an exit after this point cannot be missed.
    still_waiting(&mut for_done);
    still_waiting(&mut for_exit);
    let out = atc(&dir, &["send", &id, "exit", "3"], &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let (code, err) = finished(for_done).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("exited without being done"), "{err}");
    let (code, err) = finished(for_exit).await;
    assert_eq!(code, Some(0), "{err}");

    // At the start already: exited is reached, needs_you never will be.
    let out = atc(&dir, &["wait", &id, "--for", "exited"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = atc(&dir, &["wait", &id, "--for", "needs_you"], &[]).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    d.stop().await;
}
