//! The `atc` client commands as a person runs them: the real binary (`CARGO_BIN_EXE_atc`) as a
//! child process against an in-process daemon, under a real PTY where a terminal matters
//! (colour, raw-mode attach) and with pipes where it must not (scripts).

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use atc_testkit::impd_sim::{ImpdSim, SimOptions, When};
use atc_testkit::{
    agent_shells_daemon, hook, id_of, poll_ok, spawn_remote, test_config, wait_for,
    with_imp_target, TestDaemon, WITHIN,
};

/// `atc --state-dir DIR args...` with pipes for stdout and stderr; its output once it exits.
pub(crate) async fn atc(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_atc"));
    cmd.arg("--state-dir")
        .arg(dir)
        .args(args)
        .env_remove("NO_COLOR")
        .stdin(Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    tokio::time::timeout(WITHIN, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("atc {args:?} did not finish within {WITHIN:?}"))
        .expect("run the atc binary")
}

/// `atc` running under a PTY of 80x24, as it would in a terminal.
struct PtyRun {
    pty: pty_process::Pty,
    child: tokio::process::Child,
    /// Everything read from the terminal so far (printed on failure).
    seen: Vec<u8>,
}

impl PtyRun {
    fn start(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> PtyRun {
        let (pty, pts) = pty_process::open().expect("open a pty");
        pty.resize(pty_process::Size::new(24, 80))
            .expect("size the pty");
        let mut cmd = pty_process::Command::new(env!("CARGO_BIN_EXE_atc"))
            .arg("--state-dir")
            .arg(dir)
            .args(args)
            .env_remove("NO_COLOR")
            .env("TERM", "xterm");
        for (k, v) in envs {
            cmd = cmd.env(k, v);
        }
        let child = cmd.spawn(pts).expect("start atc on the pty");
        PtyRun {
            pty,
            child,
            seen: Vec::new(),
        }
    }

    fn seen(&self) -> String {
        String::from_utf8_lossy(&self.seen).into_owned()
    }

    /// Reads the terminal until what it showed since `from` contains `needle`.
    async fn read_until_from(&mut self, from: usize, needle: &str) {
        let deadline = tokio::time::Instant::now() + WITHIN;
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(self.seen.get(from..).unwrap_or_default()).contains(needle) {
            let read = tokio::time::timeout_at(deadline, self.pty.read(&mut buf)).await;
            match read {
                Ok(Ok(n)) if n > 0 => self.seen.extend_from_slice(&buf[..n]),
                Ok(_) => panic!(
                    "the terminal closed before {needle:?}; seen {:?}",
                    self.seen()
                ),
                Err(_) => panic!("no {needle:?} within {WITHIN:?}; seen {:?}", self.seen()),
            }
        }
    }

    async fn read_until(&mut self, needle: &str) {
        self.read_until_from(0, needle).await;
    }

    async fn type_bytes(&mut self, bytes: &[u8]) {
        self.pty.write_all(bytes).await.expect("write to the pty");
        self.pty.flush().await.expect("flush the pty");
    }

    /// Waits for atc to exit, reading what it still shows meanwhile (a full terminal would
    /// block its writes).
    async fn wait(&mut self) -> ExitStatus {
        let deadline = tokio::time::Instant::now() + WITHIN;
        let mut buf = [0u8; 4096];
        let mut open = true;
        loop {
            tokio::select! {
                status = self.child.wait() => return status.expect("wait for atc"),
                read = self.pty.read(&mut buf), if open => match read {
                    Ok(n) if n > 0 => self.seen.extend_from_slice(&buf[..n]),
                    // EIO once the last process on the terminal is gone.
                    Ok(_) | Err(_) => open = false,
                },
                () = tokio::time::sleep_until(deadline) => {
                    panic!("atc did not exit within {WITHIN:?}; seen {:?}", self.seen())
                }
            }
        }
    }
}

#[actix_rt::test]
async fn ls_is_plain_with_a_summary_when_piped_and_coloured_on_a_terminal() {
    let d = TestDaemon::start().await;
    let first = id_of(&d.spawn("cat").await);
    d.spawn("sh").await;
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{first}/kill"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    d.wait_session(&first, "exited", |s| s["alive"] == false)
        .await;

    let out = atc(&d.state_dir, &["ls"], &[]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(!text.contains('\x1b'), "escapes in a pipe: {text:?}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.last().copied(),
        Some("2 sessions: 1 running, 1 exited"),
        "{text}"
    );
    let running = lines.iter().position(|l| l.contains("running"));
    let exited = lines.iter().position(|l| l.contains(" exited "));
    assert!(running < exited, "running is listed before exited: {text}");

    let mut tty = PtyRun::start(&d.state_dir, &["ls"], &[]);
    tty.read_until("2 sessions").await;
    assert!(tty.wait().await.success());
    assert!(
        tty.seen().contains("\x1b[32mrunning\x1b[0m"),
        "no colour on a terminal: {:?}",
        tty.seen()
    );

    let mut no_color = PtyRun::start(&d.state_dir, &["ls"], &[("NO_COLOR", "1")]);
    no_color.read_until("2 sessions").await;
    assert!(no_color.wait().await.success());
    assert!(
        !no_color.seen().contains("\x1b["),
        "NO_COLOR still coloured: {:?}",
        no_color.seen()
    );
    d.stop().await;
}

#[actix_rt::test]
async fn ls_watch_redraws_from_the_events_socket_until_interrupted() {
    let d = TestDaemon::start().await;
    d.spawn("cat").await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_atc"))
        .arg("--state-dir")
        .arg(&d.state_dir)
        .args(["ls", "--watch"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start atc ls --watch");
    let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    let mut wait_for = async |needle: &str| loop {
        let line = tokio::time::timeout(WITHIN, lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("no {needle:?} within {WITHIN:?}"))
            .expect("read atc's stdout")
            .unwrap_or_else(|| panic!("atc ended before {needle:?}"));
        if line == needle {
            return;
        }
    };
    wait_for("1 session: 1 running").await;
    // The next list comes from the event, long before the age refresh would redraw it.
    let spawned = tokio::time::Instant::now();
    d.spawn("sh").await;
    wait_for("2 sessions: 2 running").await;
    assert!(
        spawned.elapsed() < Duration::from_secs(4),
        "the list was redrawn by the clock, not by the event"
    );
    let pid = rustix::process::Pid::from_raw(child.id().expect("running") as i32)
        .expect("a child pid is positive");
    rustix::process::kill_process(pid, rustix::process::Signal::INT).expect("send SIGINT");
    let status = tokio::time::timeout(WITHIN, child.wait())
        .await
        .expect("atc ls --watch ends on Ctrl-C")
        .expect("wait for atc");
    assert_eq!(status.code(), Some(0));
    d.stop().await;
}

#[actix_rt::test]
async fn top_once_and_n_print_frames_of_every_session_without_screen_control() {
    let d = TestDaemon::start().await;
    let ids = [id_of(&d.spawn("cat").await), id_of(&d.spawn("sh").await)];
    let short = |id: &str| id.get(..8).expect("a uuid is longer than 8").to_string();

    // Usage may be absent (no cgroups), so no figure is checked: only that each session
    // has its row under the fleet's line.
    for sort in ["mem", "cpu"] {
        let out = atc(&d.state_dir, &["top", "--once", "--sort", sort], &[]).await;
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{out:?}");
        assert!(!text.contains('\x1b'), "screen control in a pipe: {text:?}");
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines
                .first()
                .is_some_and(|l| l.starts_with("2 sessions, 2 alive")),
            "{text}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("ID") && l.contains("MEM")),
            "{text}"
        );
        for id in &ids {
            assert!(
                lines
                    .iter()
                    .any(|l| l.starts_with(&short(id)) && l.contains("running")),
                "no row for {id}: {text}"
            );
        }
    }

    let out = atc(&d.state_dir, &["top", "-n", "2", "--interval", "0.2"], &[]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(text.matches("2 sessions, 2 alive").count(), 2, "{text}");

    let out = atc(&d.state_dir, &["top", "--once", "--interval", "0"], &[]).await;
    assert!(!out.status.success(), "a zero interval is refused: {out:?}");
    d.stop().await;
}

#[actix_rt::test]
async fn top_on_a_terminal_redraws_in_the_alternate_screen_until_q() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("cat").await);
    let mut tty = PtyRun::start(&d.state_dir, &["top", "--interval", "0.2"], &[]);
    tty.read_until(id.get(..8).expect("a uuid is longer than 8"))
        .await;
    // A second frame: it refreshes by itself.
    let mark = tty.seen.len();
    tty.read_until_from(mark, "1 session, 1 alive").await;
    tty.type_bytes(b"q").await;
    assert_eq!(tty.wait().await.code(), Some(0), "{}", tty.seen());
    let seen = tty.seen();
    let entered = seen.find("\x1b[?1049h");
    let left = seen.rfind("\x1b[?1049l");
    assert!(
        entered.is_some() && entered < left,
        "the alternate screen was not taken and given back: {seen:?}"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn ls_sort_mem_lists_with_the_memory_column() {
    let d = TestDaemon::start().await;
    d.spawn("cat").await;
    for sort in ["mem", "cpu"] {
        let out = atc(&d.state_dir, &["ls", "--sort", sort], &[]).await;
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{out:?}");
        assert!(
            text.lines().next().is_some_and(|h| h.contains(" MEM ")),
            "{text}"
        );
        assert!(text.ends_with("1 session: 1 running\n"), "{text}");
    }
    d.stop().await;
}

#[actix_rt::test]
async fn attach_prints_why_the_session_ended() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("sh").await);
    d.submit(&id, "echo ready-$((1+1))").await;
    d.wait_screen(&id, "ready-2").await;
    let mut tty = PtyRun::start(&d.state_dir, &["attach", &id], &[]);
    // The repaint is drawn once atc is attached and the terminal raw.
    tty.read_until("ready-2").await;
    let mark = tty.seen.len();
    tty.type_bytes(b"echo typed-$((6*7))\r").await;
    tty.read_until_from(mark, "typed-42").await;
    tty.type_bytes(b"exit 3\r").await;
    tty.read_until("[session exited: code 3]").await;
    assert_eq!(tty.wait().await.code(), Some(0), "{}", tty.seen());
    d.stop().await;
}

#[actix_rt::test]
async fn attach_watch_sends_no_keys_and_ctrl_backslash_detaches() {
    let d = TestDaemon::start().await;
    let id = id_of(&d.spawn("cat").await);
    let input = |data: &str| json!({ "data": data });
    let path = format!("/v1/sessions/{id}/input");
    let (status, body) = d.call("POST", &path, Some(input("before\r"))).await;
    assert_eq!(status, 200, "{body}");
    d.wait_screen(&id, "before").await;
    let mut tty = PtyRun::start(&d.state_dir, &["attach", "--watch", &id], &[]);
    tty.read_until("before").await;
    tty.type_bytes(b"typed-by-the-watcher\r").await;
    tty.type_bytes(b"\x1c").await;
    tty.read_until("[detached]").await;
    assert_eq!(tty.wait().await.code(), Some(0), "{}", tty.seen());
    // Had the keys been sent, they would have been written before this.
    let (status, body) = d.call("POST", &path, Some(input("after\r"))).await;
    assert_eq!(status, 200, "{body}");
    let screen = d.wait_screen(&id, "after").await;
    assert!(
        !screen["text"]
            .as_str()
            .unwrap_or_default()
            .contains("typed-by-the-watcher"),
        "a watcher's keys reached the session: {screen}"
    );
    assert!(
        d.session(&id).await["lastAttachedAt"].is_null(),
        "atc attach --watch attached interactively"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn spawn_attach_spawns_and_attaches_in_one_step() {
    let d = TestDaemon::start().await;
    let mut tty = PtyRun::start(&d.state_dir, &["spawn", "--agent", "sh", "--attach"], &[]);
    tty.read_until("spawned").await;
    let (_, list) = d.call("GET", "/v1/sessions", None).await;
    let sessions = list["sessions"].as_array().cloned().unwrap_or_default();
    assert_eq!(sessions.len(), 1, "{list}");
    let id = id_of(&sessions[0]);
    d.wait_session(&id, "attached", |s| !s["lastAttachedAt"].is_null())
        .await;
    let mark = tty.seen.len();
    tty.type_bytes(b"echo spawned-$((6*7))\r").await;
    tty.read_until_from(mark, "spawned-42").await;
    tty.type_bytes(b"\x1c").await;
    tty.read_until("[detached]").await;
    assert_eq!(tty.wait().await.code(), Some(0), "{}", tty.seen());
    assert_eq!(d.session(&id).await["alive"], true, "detaching killed it");
    d.stop().await;
}

#[actix_rt::test]
async fn completion_covers_the_whole_command_tree() {
    let dir = tempfile::tempdir().expect("temp dir");
    for shell in ["bash", "zsh", "fish"] {
        let out = atc(dir.path(), &["completion", shell], &[]).await;
        assert!(out.status.success(), "{shell}: {out:?}");
        let script = String::from_utf8_lossy(&out.stdout);
        for word in [
            "daemon",
            "bench",
            "attach",
            "restore",
            "logs",
            "open",
            "--watch",
            "top",
            "send",
            "wait",
            "--keys",
            "--tls-cert",
            "--insecure-plaintext",
        ] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
    let out = atc(dir.path(), &["completion", "powershell"], &[]).await;
    assert!(!out.status.success(), "only bash, zsh and fish are offered");
}

#[actix_rt::test]
async fn logs_prints_the_sessions_trail_and_follows_it() {
    let (d, _tmp) = agent_shells_daemon().await;
    let id = id_of(&d.spawn("claude").await);
    let other = id_of(&d.spawn("claude").await);
    hook(
        &d,
        &id,
        json!({"hook_event_name": "Notification", "message": "Allow the first?"}),
    )
    .await;
    hook(
        &d,
        &other,
        json!({"hook_event_name": "Notification", "message": "for someone else"}),
    )
    .await;
    wait_trail(&d, "Allow the first?").await;
    wait_trail(&d, "for someone else").await;
    let out = atc(&d.state_dir, &["logs", &id], &[]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.contains("needs-input (Notification)  Allow the first?"),
        "{text}"
    );

    let mut child = Command::new(env!("CARGO_BIN_EXE_atc"))
        .arg("--state-dir")
        .arg(&d.state_dir)
        .args(["logs", "-f", &id])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start atc logs -f");
    let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    let mut next_line = async || {
        tokio::time::timeout(WITHIN, lines.next_line())
            .await
            .expect("a line within the deadline")
            .expect("read atc's stdout")
            .expect("atc still runs")
    };
    assert!(next_line().await.contains("Allow the first?"));
    hook(
        &d,
        &other,
        json!({"hook_event_name": "Notification", "message": "not this one"}),
    )
    .await;
    hook(
        &d,
        &id,
        json!({"hook_event_name": "Stop", "last_assistant_message": "all done"}),
    )
    .await;
    let followed = next_line().await;
    assert!(followed.contains("turn-done (Stop)"), "{followed}");
    let pid = rustix::process::Pid::from_raw(child.id().expect("running") as i32)
        .expect("a child pid is positive");
    rustix::process::kill_process(pid, rustix::process::Signal::INT).expect("send SIGINT");
    let status = tokio::time::timeout(WITHIN, child.wait())
        .await
        .expect("atc logs -f ends on Ctrl-C")
        .expect("wait for atc");
    assert_eq!(status.code(), Some(0));
    d.stop().await;
}

/// Waits until the trail holds an event whose message is `message` (hooks report through the
/// session, after `hook` returns).
async fn wait_trail(d: &TestDaemon, message: &str) {
    let found = poll_ok(WITHIN, async || {
        let (_, trail) = d.call("GET", "/v1/events/trail?limit=200", None).await;
        let found = trail["events"]
            .as_array()
            .is_some_and(|events| events.iter().any(|e| e["message"] == message));
        if found {
            Ok(())
        } else {
            Err(trail)
        }
    })
    .await;
    if let Err(trail) = found {
        panic!("no {message:?} in the trail: {trail}");
    }
}

#[actix_rt::test]
async fn restore_revives_and_summarises_without_progress_when_stderr_is_not_a_terminal() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let d1 = TestDaemon::start_on(tmp.path(), test_config()).await;
    let a = id_of(&d1.spawn("sh").await);
    d1.spawn("sh").await;
    d1.stop().await;
    let d2 = TestDaemon::start_on(tmp.path(), test_config()).await;
    let out = atc(&d2.state_dir, &["restore"], &[]).await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "restored 2 sessions\n"
    );
    assert!(out.stderr.is_empty(), "progress on a pipe: {out:?}");
    d2.wait_session(&a, "alive", |s| s["alive"] == true).await;
    let again = atc(&d2.state_dir, &["restore"], &[]).await;
    assert_eq!(
        String::from_utf8_lossy(&again.stdout),
        "nothing to restore: no session died with an old daemon\n"
    );
    d2.stop().await;

    // On a terminal the progress line follows the events socket; the summary is the same.
    let d3 = TestDaemon::start_on(tmp.path(), test_config()).await;
    let mut tty = PtyRun::start(&d3.state_dir, &["restore"], &[]);
    tty.read_until("restored 2 sessions").await;
    assert_eq!(tty.wait().await.code(), Some(0), "{}", tty.seen());
    d3.wait_session(&a, "alive", |s| s["alive"] == true).await;
    d3.stop().await;
}

#[actix_rt::test]
async fn open_prints_the_url_without_the_token_and_starts_the_browser() {
    let d = TestDaemon::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let opened = dir.path().join("opened");
    let browser = dir.path().join("browser");
    std::fs::write(
        &browser,
        format!(
            "#!/bin/sh\nprintf '%s' \"$1\" > {}.tmp && mv {0}.tmp {0}\n",
            opened.display()
        ),
    )
    .expect("write the browser script");
    std::fs::set_permissions(
        &browser,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("make it executable");
    let browser_env = browser.display().to_string();
    let out = atc(&d.state_dir, &["open"], &[("BROWSER", &browser_env)]).await;
    assert!(out.status.success(), "{out:?}");
    let url = format!("{}/", d.url);
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{url}\n"));
    let got = wait_for(WITHIN, "the browser starts", async || {
        std::fs::read_to_string(&opened).ok()
    })
    .await;
    assert_eq!(got, url);
    assert!(!got.contains(&d.token) && !String::from_utf8_lossy(&out.stderr).contains(&d.token));

    // No browser: the URL all the same, and a word on how to get one.
    let out = atc(
        &d.state_dir,
        &["open"],
        &[("BROWSER", ""), ("PATH", "/nonexistent")],
    )
    .await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{url}\n"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no browser configured"));
    d.stop().await;
}

#[actix_rt::test]
async fn attach_shows_a_status_line_while_a_remote_link_is_reattaching_and_clears_it() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut config = with_imp_target(test_config(), &sim.url(), sim.token_file(), json!({}));
    // Enough short delays that the harness stays away until the drops are cancelled.
    config.timings.imp_reconnect_delays = vec![Duration::from_millis(50); 100];
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let r = spawn_remote(&d, &sim).await;
    d.submit(&r.id, "echo remote-$((2+3))").await;
    d.wait_screen(&r.id, "remote-5").await;
    let mut tty = PtyRun::start(&d.state_dir, &["attach", &r.id], &[]);
    tty.read_until("remote-5").await;

    // Every reconnect fails until the drops are cancelled, and the viewer goes now.
    sim.faults()
        .drop_next_connections(10_000, When::BeforeStarted, 1011);
    assert!(
        sim.faults().drop_output(&r.imp, &r.session),
        "no viewer to drop"
    );
    let mark = tty.seen.len();
    tty.read_until_from(mark, "reattaching...").await;
    let drawn = tty.seen[mark..].to_vec();
    let shown = String::from_utf8_lossy(&drawn);
    assert!(
        shown.contains("\x1b7\x1b[24;1H\x1b[2K\x1b[7matc: connection to the session lost"),
        "the line is not drawn over the bottom row: {shown:?}"
    );

    let mark = tty.seen.len();
    assert!(
        sim.faults().cancel_connection_drops() > 0,
        "the drops ran out"
    );
    d.wait_session(&r.id, "attached", |s| {
        s["lifecycle"]["attachment"] == "attached"
    })
    .await;
    tty.read_until_from(mark, "\x1b7\x1b[24;1H\x1b[2K\x1b8")
        .await;
    tty.type_bytes(b"\x1c").await;
    tty.read_until("[detached]").await;
    assert_eq!(tty.wait().await.code(), Some(0), "{}", tty.seen());
    d.stop().await;
}

#[actix_rt::test]
async fn spawn_workspace_and_forget_force_work_from_the_command_line() {
    use atc_testkit::git_repo::TestRepo;
    let d = TestDaemon::start().await;
    let repo = TestRepo::with_files(2);
    repo.git(&["branch", "feature"]);
    let arg = format!("{}@feature", repo.path().display());
    let cwd = repo.path().display().to_string();
    let out = atc(
        &d.state_dir,
        &["spawn", "--agent", "sh", "--cwd", &cwd, "--workspace", &arg],
        &[],
    )
    .await;
    assert!(out.status.success(), "{out:?}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let ws = d.session(&id).await["workspace"].clone();
    assert_eq!(ws["ref"], "feature", "{ws}");
    let dir = std::path::PathBuf::from(ws["dir"].as_str().expect("a workspace dir"));
    std::fs::write(dir.join("notes.txt"), "unsaved").expect("write into the workspace");
    let listed = atc(&d.state_dir, &["ls"], &[("HOME", "/nonexistent")]).await;
    let table = String::from_utf8_lossy(&listed.stdout);
    let branch = ws["branch"].as_str().expect("a branch");
    assert!(
        table.contains(&format!("{branch}+ in {}", repo.path().display())),
        "{table}"
    );

    let refused = atc(&d.state_dir, &["forget", &id], &[]).await;
    assert!(!refused.status.success(), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("1 uncommitted file"), "{said}");
    assert!(dir.exists());
    let forced = atc(&d.state_dir, &["forget", &id, "--force"], &[]).await;
    assert!(forced.status.success(), "{forced:?}");
    assert!(!dir.exists());

    // A directory no session owns is an orphan, listed, then pruned.
    let unfinished = d.state_dir.join("workspaces").join("unfinished");
    std::fs::create_dir_all(&unfinished).expect("an orphan");
    let listed = atc(&d.state_dir, &["workspaces", "orphans"], &[]).await;
    let said = String::from_utf8_lossy(&listed.stdout);
    assert!(said.contains("unfinished  nothing to lose"), "{listed:?}");
    let pruned = atc(&d.state_dir, &["workspaces", "prune"], &[]).await;
    assert!(pruned.status.success(), "{pruned:?}");
    assert!(String::from_utf8_lossy(&pruned.stdout).starts_with("removed "));
    assert!(!unfinished.exists());
    d.stop().await;
}
