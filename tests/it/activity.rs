//! Attention from activity (issue 38): a session whose agent has no hooks is `needs_you` once
//! its output has been quiet and its processes idle past the threshold, and `running` again
//! on output or CPU; the `shell` agent (attention `none`) and a hooked agent are left alone.
//! Real shells in real PTYs, CPU from the session's cgroup where the machine gives the daemon
//! cgroups, else from `/proc`; the thresholds are shortened through config.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use atc::config::attention::{ActivityConfig, AttentionMode};
use atc::config::{AgentConfig, Config};
use atc_testkit::{id_of, poll_ok, test_config, TestDaemon};
use serde_json::{json, Value};

const QUIET: Duration = Duration::from_millis(1500);
const SWEEP: Duration = Duration::from_millis(200);

/// Slack on a loaded two-core machine, on top of `QUIET + SWEEP`.
const SLACK: Duration = Duration::from_millis(2500);

/// A plain `/bin/sh` with a visible prompt, under `attention`.
fn shell_agent(attention: Option<AttentionMode>) -> AgentConfig {
    AgentConfig {
        bin: "/bin/sh".into(),
        env: BTreeMap::from([("PS1".to_string(), "$ ".to_string())]),
        attention,
        ..Default::default()
    }
}

/// A daemon whose activity rule runs on short thresholds; `cgroups`: whether sessions run in
/// cgroups (where the machine allows) or are measured through `/proc`.
async fn daemon(cgroups: bool) -> (TestDaemon, tempfile::TempDir) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut config: Config = test_config();
    config.activity = ActivityConfig {
        quiet: QUIET,
        sweep: SWEEP,
        busy_cpu_percent: 5.0,
    };
    if !cgroups {
        config.cgroup_root = None;
    }
    config
        .agents
        .insert("psh".into(), shell_agent(Some(AttentionMode::Activity)));
    config
        .agents
        .insert("hooked".into(), shell_agent(Some(AttentionMode::Hooks)));
    let d = TestDaemon::start_on(tmp.path(), config).await;
    (d, tmp)
}

async fn spawn_shell(d: &TestDaemon, agent: &str) -> String {
    let id = id_of(
        &d.spawn_with(json!({"agent": agent, "cwd": "/tmp", "cols": 80, "rows": 24}))
            .await,
    );
    d.wait_screen(&id, "$").await;
    id
}

/// Waits until `id` is in `state`; answers the descriptor and how long it took.
async fn until_state(d: &TestDaemon, id: &str, state: &str, within: Duration) -> (Value, Duration) {
    let from = Instant::now();
    let s = d
        .wait_session_within(id, state, within, |s| s["state"] == state)
        .await;
    (s, from.elapsed())
}

/// Checks every few polls for `span` that `id` stays `state`; panics with the descriptor
/// that broke it.
async fn stays(d: &TestDaemon, id: &str, state: &str, span: Duration) {
    let until = Instant::now() + span;
    let broke = poll_ok(span + Duration::from_secs(5), async || {
        let s = d.session(id).await;
        if s["state"] != state {
            return Ok(Some(s));
        }
        if Instant::now() >= until {
            Ok(None)
        } else {
            Err(())
        }
    })
    .await;
    if let Ok(Some(s)) = broke {
        panic!("{id} left {state} within {span:?}: {s}");
    }
}

/// The instant `lastMsg` `idle since <RFC 3339>` names.
fn idle_since(s: &Value) -> SystemTime {
    let text = s["lastMsg"].as_str().unwrap_or_default();
    let stamp = text
        .strip_prefix("idle since ")
        .unwrap_or_else(|| panic!("lastMsg is not 'idle since …': {s}"));
    humantime::parse_rfc3339(stamp).unwrap_or_else(|e| panic!("{stamp}: {e}"))
}

async fn a_shell_at_its_prompt_needs_you_and_runs_again_when_a_command_prints(cgroups: bool) {
    let (d, _tmp) = daemon(cgroups).await;
    let id = spawn_shell(&d, "psh").await;
    // The prompt was the last output.
    let (prompt_at, prompt_wall) = (Instant::now(), SystemTime::now());
    let s = d.session(&id).await;
    assert_eq!(s["stateSource"], "activity", "{s}");
    let (s, _) = until_state(&d, &id, "needs_you", QUIET + SWEEP + SLACK).await;
    let took = prompt_at.elapsed();
    assert!(
        took + Duration::from_millis(500) >= QUIET,
        "needs_you after {took:?}, before the {QUIET:?} threshold: {s}"
    );
    assert!(took <= QUIET + SWEEP + SLACK, "needs_you after {took:?}");
    assert_eq!(
        (s["unread"].clone(), s["stateSource"].clone()),
        (json!(true), json!("activity"))
    );
    let since = idle_since(&s);
    let off = since
        .duration_since(prompt_wall)
        .unwrap_or_else(|e| e.duration());
    assert!(
        off < Duration::from_secs(2),
        "idle since {since:?}, prompt at {prompt_wall:?}"
    );
    // Needing the user opens a request for them, as a hook's would.
    let (_, pending) = d.call("GET", "/v1/permissions", None).await;
    assert!(
        pending.to_string().contains(&id),
        "no request for {id}: {pending}"
    );
    // A line typed: running again at once, on the Enter (a turn began).
    let wait = (QUIET + SWEEP + SLACK).as_secs() + 2;
    d.submit(&id, &format!("sleep {wait}; echo activity-marker"))
        .await;
    let (s, took) = until_state(&d, &id, "running", Duration::from_secs(5)).await;
    assert_eq!(s["lastMsg"], "active: input", "{s}");
    assert!(
        took < Duration::from_secs(2),
        "running again after {took:?}"
    );
    // A silent wait without CPU looks idle; then the command prints: running again, on the
    // output itself.
    until_state(&d, &id, "needs_you", QUIET + SWEEP + SLACK).await;
    let (s, _) = until_state(&d, &id, "running", Duration::from_secs(wait + 5)).await;
    assert_eq!(s["lastMsg"], "active: output", "{s}");
    d.wait_screen(&id, "\nactivity-marker\n").await;
    // And quiet again afterwards.
    until_state(&d, &id, "needs_you", QUIET + SWEEP + SLACK).await;
}

#[actix_rt::test]
async fn a_shell_at_its_prompt_needs_you_within_the_threshold_and_runs_when_a_command_prints() {
    a_shell_at_its_prompt_needs_you_and_runs_again_when_a_command_prints(false).await;
}

#[actix_rt::test]
async fn the_same_with_cpu_read_from_the_sessions_cgroup_where_the_machine_has_cgroups() {
    a_shell_at_its_prompt_needs_you_and_runs_again_when_a_command_prints(true).await;
}

/// Busy for `secs` seconds without a byte of output, then prints `end`.
fn silent_work(secs: u64, end: &str) -> String {
    format!("t=$(( $(date +%s) + {secs} )); while [ $(date +%s) -lt $t ]; do :; done; echo {end}")
}

async fn silent_cpu_work_keeps_running(cgroups: bool) {
    let (d, _tmp) = daemon(cgroups).await;
    let id = spawn_shell(&d, "psh").await;
    until_state(&d, &id, "needs_you", QUIET + SWEEP + SLACK).await;
    // The command's echo wakes it; then nothing is written for 4 s while a CPU works.
    d.submit(&id, &silent_work(4, "work-finished")).await;
    until_state(&d, &id, "running", Duration::from_secs(5)).await;
    stays(&d, &id, "running", Duration::from_secs(3)).await;
    d.wait_screen(&id, "\nwork-finished\n").await;
    let (s, _) = until_state(&d, &id, "needs_you", QUIET + SWEEP + SLACK).await;
    assert_eq!(s["stateSource"], "activity", "{s}");
}

#[actix_rt::test]
async fn silent_cpu_work_keeps_a_session_running_measured_in_proc() {
    silent_cpu_work_keeps_running(false).await;
}

#[actix_rt::test]
async fn silent_cpu_work_keeps_a_session_running_measured_in_its_cgroup() {
    silent_cpu_work_keeps_running(true).await;
}

#[actix_rt::test]
async fn a_spinner_that_only_animates_keeps_running_and_needs_you_once_it_stops() {
    let (d, _tmp) = daemon(false).await;
    let id = spawn_shell(&d, "psh").await;
    // A TUI's spinner: a frame every 100 ms, redrawn in place, for 4 s (over twice the
    // threshold), using next to no CPU of its own (as a TUI waiting on its model does).
    let spinner = "i=0; while [ $i -lt 40 ]; do for f in '|' / - '\\'; do printf '\\r%s working' \
                   \"$f\"; sleep 0.1; i=$((i+1)); done; done; printf '\\rspin-done\\n'";
    d.submit(&id, spinner).await;
    d.wait_screen(&id, "\n| working").await;
    stays(&d, &id, "running", Duration::from_secs(3)).await;
    d.wait_screen(&id, "\nspin-done\n").await;
    let done_at = Instant::now();
    let (s, _) = until_state(&d, &id, "needs_you", QUIET + SWEEP + SLACK).await;
    assert!(
        done_at.elapsed() + Duration::from_millis(500) >= QUIET,
        "needs_you too early: {s}"
    );
}

#[actix_rt::test]
async fn the_shell_agent_and_a_hooked_agent_are_left_alone_while_an_activity_one_goes_quiet() {
    let (d, _tmp) = daemon(false).await;
    let shell = id_of(
        &d.spawn_with(json!({"agent": "shell", "cwd": "/tmp", "cols": 80, "rows": 24}))
            .await,
    );
    let hooked = spawn_shell(&d, "hooked").await;
    let watched = spawn_shell(&d, "psh").await;
    // Long enough for the watched one to be found quiet: the others had as long.
    until_state(&d, &watched, "needs_you", QUIET + SWEEP + SLACK).await;
    stays(&d, &watched, "needs_you", SWEEP * 3).await;
    let shell_now = d.session(&shell).await;
    assert_eq!(shell_now["state"], "running", "{shell_now}");
    assert!(
        shell_now.get("stateSource").is_none(),
        "the shell's attention is none: {shell_now}"
    );
    let hooked_now = d.session(&hooked).await;
    assert_eq!(
        (
            hooked_now["state"].clone(),
            hooked_now["stateSource"].clone()
        ),
        (json!("running"), json!("hooks")),
        "{hooked_now}"
    );
}

/// Runs Codex's notify program inside `id` as Codex would at a turn's end: `atc hook-report`
/// with the turn's JSON as its one argument.
async fn codex_notify(d: &TestDaemon, id: &str, reply: &str) {
    let payload = json!({
        "type": "agent-turn-complete",
        "turn-id": "turn-1",
        "input-messages": ["do the thing"],
        "last-assistant-message": reply,
    })
    .to_string();
    assert!(!payload.contains('\''), "a payload with a single quote");
    let cmd = format!(
        "{} hook-report '{payload}'",
        atc_testkit::atc_binary::atc_bin().display()
    );
    d.submit(id, &cmd).await;
}

/// A daemon whose `codex` is a plain shell standing in for Codex, under its default
/// attention (`activity`): only its notify program reports, as for a Codex without hooks.
async fn codex_daemon() -> (TestDaemon, tempfile::TempDir) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut config = test_config();
    config.activity = ActivityConfig {
        quiet: QUIET,
        sweep: SWEEP,
        busy_cpu_percent: 5.0,
    };
    config.cgroup_root = None;
    config.agents.insert(
        "codex".into(),
        AgentConfig {
            // atc appends Codex's `-c notify=…` per start; the script ignores its args.
            bin: "/bin/sh".into(),
            args: vec!["-c".into(), "exec /bin/sh".into(), "codex".into()],
            env: BTreeMap::from([("PS1".to_string(), "$ ".to_string())]),
            ..Default::default()
        },
    );
    let d = TestDaemon::start_on(tmp.path(), config).await;
    (d, tmp)
}

#[actix_rt::test]
async fn a_codex_without_hooks_is_done_at_its_notify_and_running_again_when_its_user_presses_enter()
{
    let (d, _tmp) = codex_daemon().await;
    let id = spawn_shell(&d, "codex").await;
    let s = d.session(&id).await;
    assert_eq!(
        s["stateSource"], "activity",
        "Codex follows its activity: {s}"
    );

    // Its turn ends: notify says done, with the turn's reply as the result.
    codex_notify(&d, &id, "the reply").await;
    let (s, _) = until_state(&d, &id, "done", Duration::from_secs(10)).await;
    assert_eq!(s["stateSource"], "hooks", "{s}");
    // Quiet does not turn a done into needs_you: the turn's end already asks for the user.
    stays(&d, &id, "done", QUIET + SWEEP * 3).await;

    // The user answers by typing Enter through the API: a new turn, running.
    let (status, body) = d
        .call(
            "POST",
            &format!("/v1/sessions/{id}/input"),
            Some(json!({"data": "\r"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (s, _) = until_state(&d, &id, "running", Duration::from_secs(5)).await;
    assert_eq!(
        (s["lastMsg"].clone(), s["stateSource"].clone()),
        (json!("active: input"), json!("activity"))
    );
    // Nothing follows it: quiet, so it needs its user.
    until_state(&d, &id, "needs_you", QUIET + SWEEP + SLACK).await;

    // Done again, then Enter typed by an attached terminal, which writes to the PTY past the
    // session: the session is still told.
    codex_notify(&d, &id, "the second reply").await;
    until_state(&d, &id, "done", Duration::from_secs(10)).await;
    let (mut ws, _, _) = d.attach(&id, "cols=80&rows=24").await;
    let s = d.session(&id).await;
    assert_eq!(s["state"], "done", "attaching does not start a turn: {s}");
    ws.send_binary(b"\r").await;
    let (s, _) = until_state(&d, &id, "running", Duration::from_secs(5)).await;
    assert_eq!(s["lastMsg"], "active: input", "{s}");
}

#[actix_rt::test]
async fn a_codex_whose_hooks_report_a_prompt_follows_its_hooks_and_no_longer_its_activity() {
    let (d, _tmp) = codex_daemon().await;
    let id = spawn_shell(&d, "codex").await;
    // Its user installed Codex's hooks: a prompt is reported.
    atc_testkit::agent_shells::hook(
        &d,
        &id,
        json!({"hook_event_name": "UserPromptSubmit", "prompt": "go on"}),
    )
    .await;
    let s = d
        .wait_session(&id, "the prompt's message", |s| s["lastMsg"] == "go on")
        .await;
    assert_eq!(
        (s["state"].clone(), s["stateSource"].clone()),
        (json!("running"), json!("hooks")),
        "{s}"
    );
    // A silent spell past the threshold no longer says needs_you: the hooks will.
    stays(&d, &id, "running", QUIET + SWEEP * 4).await;
}
