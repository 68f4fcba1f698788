//! Hook reports as a hostile process inside a session sends them (issue 31): a flag for an
//! agent session id, reports as another session, fields of 100,000 characters, a flood, a
//! FIFO for a transcript, a reader that holds its line, and a daemon out of descriptors. Each
//! test replays the probe's step through the real reporter socket and `atc hook-report`, and
//! checks what the daemon stored, ran and spent.

use std::path::Path;
use std::time::Duration;

use atc::config::Config;
use atc_testkit::child_daemon::ChildDaemon;
use atc_testkit::{agent_shells_config, hook, id_of, poll, poll_ok, TestDaemon, WITHIN};
use serde_json::{json, Value};

/// A Claude session id (Claude Code's ids are UUIDs).
const CLAUDE_SESSION: &str = "3f2b8c1e-5d4a-4e6f-9a7b-1c2d3e4f5a6b";

/// Agent shells whose `claude` prints `AGENT-START` and then each argument atc gave it
/// (`ARG<...>`, a line each) before it becomes a plain shell, so a test can read what a start
/// passed.
fn argv_config() -> Config {
    let mut config = agent_shells_config();
    if let Some(claude) = config.agents.get_mut("claude") {
        claude.args = vec![
            "-c".into(),
            "echo AGENT-START; for a; do printf 'ARG<%s>\\n' \"$a\"; done; exec /bin/sh".into(),
            "agent".into(),
        ];
    }
    config
}

/// Runs `atc hook-report` inside session `id` with `payload` read from a file, for payloads
/// too long to type on a terminal line.
async fn hook_from_file(d: &TestDaemon, id: &str, dir: &Path, payload: &Value) {
    let file = dir.join(format!("payload-{}.json", uuid::Uuid::new_v4()));
    std::fs::write(&file, payload.to_string()).unwrap();
    let cmd = format!(
        "{} hook-report < {}",
        env!("CARGO_BIN_EXE_atc"),
        file.display()
    );
    d.submit(id, &cmd).await;
}

/// Kills `id`, waits until it is dead, and revives it.
async fn kill_and_revive(d: &TestDaemon, id: &str) {
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/kill"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    d.wait_session(id, "dead", |s| s["alive"] == false).await;
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(status, 200, "{body}");
}

/// The screen text once it shows `needle` `times` times.
async fn screen_with(d: &TestDaemon, id: &str, needle: &str, times: usize) -> String {
    poll_ok(WITHIN, async || {
        let (_, s) = d
            .call("GET", &format!("/v1/sessions/{id}/screen"), None)
            .await;
        let text = s["text"].as_str().unwrap_or_default().to_string();
        if text.matches(needle).count() >= times {
            Ok(text)
        } else {
            Err(text)
        }
    })
    .await
    .unwrap_or_else(|text| panic!("the screen never showed {needle:?} {times} times: {text}"))
}

#[actix_rt::test]
async fn an_injected_agent_session_id_is_refused_and_never_reaches_an_argv() {
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), argv_config()).await;
    let id = id_of(&d.spawn("claude").await);
    screen_with(&d, &id, "AGENT-START", 1).await;
    hook(
        &d,
        &id,
        json!({"hook_event_name": "SessionStart", "session_id": "--dangerously-skip-permissions"}),
    )
    .await;
    // A report that comes after it is applied: the refused one is behind it.
    hook(
        &d,
        &id,
        json!({"hook_event_name": "Notification", "message": "after"}),
    )
    .await;
    let s = d
        .wait_session(&id, "the report after", |s| s["lastMsg"] == "after")
        .await;
    assert_eq!(s["agentSessionID"], Value::Null, "{s}");
    let rows = d
        .wait_trail(&id, "the notification", |r| !r.is_empty())
        .await;
    let events: Vec<&Value> = rows.iter().map(|r| &r["event"]).collect();
    assert_eq!(
        events,
        [&json!("Notification")],
        "nothing of the refused one"
    );
    d.wait_reporter(1, 1).await;
    // A revive starts the agent afresh: no resume flag, and no injected flag.
    kill_and_revive(&d, &id).await;
    let screen = screen_with(&d, &id, "AGENT-START", 2).await;
    assert!(!screen.contains("ARG<--dangerously"), "{screen}");
    assert!(!screen.contains("ARG<--resume"), "{screen}");
    let (_, fleet) = d.call("GET", "/v1/fleet", None).await;
    assert_eq!(fleet["fleet"][0]["agentSessionId"], Value::Null, "{fleet}");
    // The control: the agent's own id is resumed, joined to its flag.
    hook(
        &d,
        &id,
        json!({"hook_event_name": "SessionStart", "session_id": CLAUDE_SESSION}),
    )
    .await;
    d.wait_session(&id, "the agent's id", |s| {
        s["agentSessionID"] == CLAUDE_SESSION
    })
    .await;
    kill_and_revive(&d, &id).await;
    screen_with(&d, &id, &format!("ARG<--resume={CLAUDE_SESSION}>"), 1).await;
    d.stop().await;
}

#[actix_rt::test]
async fn a_session_cannot_report_as_another() {
    let (d, _tmp) = atc_testkit::agent_shells_daemon().await;
    let thief = id_of(&d.spawn("claude").await);
    let victim = id_of(&d.spawn("claude").await);
    // The thief's process names the victim; its key is its own.
    let payload = json!({"hook_event_name": "Notification", "message": "stolen"}).to_string();
    d.submit(
        &thief,
        &format!(
            "printf '%s' '{payload}' | ATC_SESSION_ID={victim} {} hook-report",
            env!("CARGO_BIN_EXE_atc")
        ),
    )
    .await;
    hook(
        &d,
        &thief,
        json!({"hook_event_name": "Notification", "message": "its own"}),
    )
    .await;
    d.wait_session(&thief, "its own report", |s| s["lastMsg"] == "its own")
        .await;
    // The reports are sent in order: once the second is in, the first was counted.
    d.wait_reporter(1, 1).await;
    let v = d.session(&victim).await;
    assert_eq!(v["state"], "running", "{v}");
    assert_ne!(v["lastMsg"], "stolen", "{v}");
    d.stop().await;
}

#[actix_rt::test]
async fn report_fields_are_capped_and_cleaned_of_control_characters() {
    let (d, tmp) = atc_testkit::agent_shells_daemon().await;
    let id = id_of(&d.spawn("claude").await);
    let message = format!("\u{1b}]0;pwned\u{7}{}", "m".repeat(100_000));
    hook_from_file(
        &d,
        &id,
        tmp.path(),
        &json!({"hook_event_name": "Notification", "message": message}),
    )
    .await;
    let s = d
        .wait_session(&id, "needs_you", |s| s["state"] == "needs_you")
        .await;
    let last = s["lastMsg"].as_str().unwrap();
    assert_eq!(last.chars().count(), 200, "{last}");
    assert!(
        !last.contains('\u{1b}') && !last.contains('\u{7}'),
        "{last:?}"
    );
    let result = "r".repeat(100_000);
    hook_from_file(
        &d,
        &id,
        tmp.path(),
        &json!({"hook_event_name": "Stop", "last_assistant_message": result}),
    )
    .await;
    d.wait_session(&id, "done", |s| s["state"] == "done").await;
    let rows = d.wait_trail(&id, "both reports", |r| r.len() == 2).await;
    assert_eq!(
        rows[0]["message"].as_str().map(|m| m.chars().count()),
        Some(200)
    );
    assert_eq!(rows[1]["detail"].as_str().map(str::len), Some(16 * 1024));
    let (_, fleet) = d.call("GET", "/v1/fleet", None).await;
    assert_eq!(
        fleet["fleet"][0]["result"].as_str().map(str::len),
        Some(16 * 1024)
    );
    d.stop().await;
}

#[actix_rt::test]
async fn reports_over_the_rate_are_refused_and_the_trail_says_so_once() {
    let mut config = agent_shells_config();
    // No refill: exactly the burst is taken, whatever the machine's speed.
    config.limits.reports_per_second = 0;
    config.limits.report_burst = 3;
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let id = id_of(&d.spawn("claude").await);
    for n in 1..=6 {
        hook(
            &d,
            &id,
            json!({"hook_event_name": "UserPromptSubmit", "prompt": format!("p{n}")}),
        )
        .await;
    }
    d.wait_reporter(3, 3).await;
    let rows = d
        .wait_trail(&id, "three reports and one refusal", |r| r.len() >= 4)
        .await;
    let events: Vec<&str> = rows.iter().filter_map(|r| r["event"].as_str()).collect();
    assert_eq!(
        events,
        [
            "UserPromptSubmit",
            "UserPromptSubmit",
            "UserPromptSubmit",
            "ReportsRefused"
        ],
        "{rows:?}"
    );
    assert_eq!(d.session(&id).await["lastMsg"], "p3");
    d.stop().await;
}

#[actix_rt::test]
async fn the_trail_keeps_its_share_per_session_its_total_and_forget_removes_a_trail() {
    let mut config = agent_shells_config();
    config.limits.trail_per_session = 3;
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config.clone()).await;
    let id = id_of(&d.spawn("claude").await);
    let other = id_of(&d.spawn("claude").await);
    for n in 1..=5 {
        hook(
            &d,
            &id,
            json!({"hook_event_name": "UserPromptSubmit", "prompt": format!("p{n}")}),
        )
        .await;
    }
    d.wait_session(&id, "the last prompt", |s| s["lastMsg"] == "p5")
        .await;
    hook(
        &d,
        &other,
        json!({"hook_event_name": "UserPromptSubmit", "prompt": "o1"}),
    )
    .await;
    d.wait_session(&other, "its prompt", |s| s["lastMsg"] == "o1")
        .await;
    let rows = d
        .wait_trail(&id, "the newest three", |r| {
            r.last().is_some_and(|r| r["message"] == "p5")
        })
        .await;
    let kept: Vec<&str> = rows.iter().filter_map(|r| r["message"].as_str()).collect();
    assert_eq!(kept, ["p3", "p4", "p5"]);
    d.stop().await;

    // A daemon that keeps two rows in all sweeps the rest away at its start.
    config.limits.trail_rows = 2;
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let swept = poll_ok(WITHIN, async || {
        let (_, trail) = d.call("GET", "/v1/events/trail?limit=200", None).await;
        let messages: Vec<&str> = trail["events"]
            .as_array()
            .map(|r| r.iter().filter_map(|r| r["message"].as_str()).collect())
            .unwrap_or_default();
        if messages == ["p5", "o1"] {
            Ok(())
        } else {
            Err(trail)
        }
    })
    .await;
    if let Err(trail) = swept {
        panic!("the trail was never swept to its newest two: {trail}");
    }
    // Forgetting a session takes its trail with it.
    let (status, body) = d
        .call("DELETE", &format!("/v1/sessions/{other}"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    let (_, trail) = d.call("GET", "/v1/events/trail?limit=200", None).await;
    let messages: Vec<&str> = trail["events"]
        .as_array()
        .map(|r| r.iter().filter_map(|r| r["message"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(messages, ["p5"], "{trail}");
    d.stop().await;
}

#[actix_rt::test]
async fn a_fifo_for_a_transcript_is_never_opened_and_blocks_nothing() {
    let (d, tmp) = atc_testkit::agent_shells_daemon().await;
    let id = id_of(&d.spawn("claude").await);
    let fifo = tmp.path().join("transcript.fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    hook(
        &d,
        &id,
        json!({"hook_event_name": "Notification", "message": "fifo", "transcript_path": fifo}),
    )
    .await;
    d.wait_session(&id, "the fifo report", |s| s["lastMsg"] == "fifo")
        .await;
    // The session reads names one file at a time: were the FIFO's open waiting for a writer
    // (none ever comes), this transcript would never be read.
    let transcript = tmp.path().join("real.jsonl");
    std::fs::write(
        &transcript,
        format!(
            "{}\n",
            json!({"type": "custom-title", "customTitle": "named after the fifo"})
        ),
    )
    .unwrap();
    hook(
        &d,
        &id,
        json!({"hook_event_name": "Notification", "message": "real", "transcript_path": transcript}),
    )
    .await;
    d.wait_session(&id, "named from the real transcript", |s| {
        s["name"] == "named after the fifo"
    })
    .await;
    d.stop().await;
}

/// The daemon's peak resident memory (`VmHWM`), in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmHWM line")
}

/// The CPU time (user + system) the process has used, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command's closing parenthesis: state is the 3rd field, utime the 14th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[actix_rt::test]
async fn reporters_that_hold_their_lines_cannot_grow_the_daemon() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let d = ChildDaemon::start(&state, &json!({}), &tmp.path().join("daemon.log")).await;
    let before = peak_rss_kib(d.pid());
    // 200 reporters each send a line of 1 MiB less one byte, without its end, and hold their
    // connections open: were each read at once, the daemon would hold 200 MiB.
    let socket = state.join("atc.sock");
    let writers: Vec<_> = (0..200)
        .map(|_| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                use std::io::Write;
                let mut conn = std::os::unix::net::UnixStream::connect(&socket)?;
                conn.set_write_timeout(Some(Duration::from_secs(60)))?;
                conn.write_all(&vec![b'x'; 1024 * 1024 - 1])?;
                // Held until the daemon gives up on the line (its 2 s read timeout) and closes.
                let mut rest = Vec::new();
                std::io::Read::read_to_end(&mut conn, &mut rest)?;
                Ok::<(), std::io::Error>(())
            })
        })
        .collect();
    for w in writers {
        let written = w.join().expect("a writer thread");
        assert!(written.is_ok(), "{written:?}");
    }
    d.api().wait_reporter(0, 200).await;
    let grew_mib = peak_rss_kib(d.pid()).saturating_sub(before) / 1024;
    assert!(
        grew_mib < 80,
        "the daemon grew {grew_mib} MiB holding reporters' lines"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn out_of_descriptors_the_reporter_backs_off_instead_of_spinning() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let d = ChildDaemon::start(&state, &json!({}), &tmp.path().join("daemon.log")).await;
    let pid = rustix::process::Pid::from_raw(d.pid() as i32).expect("a pid");
    // The descriptor table, cut down to what the daemon holds now and two more.
    let open = std::fs::read_dir(format!("/proc/{}/fd", d.pid()))
        .unwrap()
        .count() as u64;
    // The child inherited this process's hard limit.
    let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
    let full = rustix::process::Rlimit {
        current: Some(open + 2),
        maximum: hard,
    };
    let was = rustix::process::prlimit(Some(pid), rustix::process::Resource::Nofile, full)
        .expect("lower the daemon's limit");
    // Reporters that never send their line: two are taken (and held until the daemon's read
    // gives up on them), and the rest wait in the backlog while `accept` fails with EMFILE.
    let socket = state.join("atc.sock");
    let held: Vec<_> = (0..10)
        .map(|_| std::os::unix::net::UnixStream::connect(&socket).expect("connect"))
        .collect();
    let failed = poll(WITHIN, async || {
        d.log()
            .contains("the reporter socket cannot accept")
            .then_some(())
    })
    .await;
    assert!(failed.is_some(), "accept never failed; log:\n{}", d.log());
    // Over a second, a spinning accept loop burns most of a core; backing off costs nearly
    // nothing.
    // SAFETY: sysconf reads a constant of the system.
    let ticks_per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    let before = cpu_ticks(d.pid());
    // The second measured: this sleep is the window, not a wait for a state.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let used = cpu_ticks(d.pid()) - before;
    assert!(
        used * 4 < ticks_per_second,
        "the daemon used {used} of {ticks_per_second} ticks in a second with its table full"
    );
    rustix::process::prlimit(Some(pid), rustix::process::Resource::Nofile, was)
        .expect("restore the daemon's limit");
    // With descriptors back, the waiting reporters are read (and dropped: they send nothing).
    drop(held);
    d.api().wait_reporter(0, 10).await;
    d.stop().await;
}
