//! The daemon under systemd, played by the test: the real `atc` binary as a child with
//! `NOTIFY_SOCKET` on a datagram socket the test owns (readiness, status, watchdog pings,
//! stopping), with a listening socket handed over as fd 3 (socket activation), and with
//! `--log-format json`; and an in-process daemon whose sessions' thread a test provider
//! wedges, to see the watchdog pings stop.

use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use atc_testkit::child_daemon::ChildDaemon;
use atc_testkit::{id_of, poll, TestDaemon, WITHIN};
use serde_json::{json, Map, Value};

/// The config of these daemons: a shell agent.
fn config() -> Value {
    json!({ "agents": { "sh": { "bin": "/bin/sh" } } })
}

/// The test's end of `NOTIFY_SOCKET`.
struct Manager {
    socket: tokio::net::UnixDatagram,
    /// Every datagram received, in order, for failure messages.
    seen: Vec<String>,
}

impl Manager {
    fn bind(path: &Path) -> Manager {
        Manager {
            socket: tokio::net::UnixDatagram::bind(path).expect("bind the notify socket"),
            seen: Vec::new(),
        }
    }

    /// The next datagram within `within`.
    async fn next_within(&mut self, within: Duration) -> Option<String> {
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(within, self.socket.recv(&mut buf))
            .await
            .ok()?
            .expect("recv on the notify socket");
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        self.seen.push(text.clone());
        Some(text)
    }

    /// The next datagram, which must come within [`WITHIN`].
    async fn next(&mut self) -> String {
        match self.next_within(WITHIN).await {
            Some(d) => d,
            None => panic!("no notification within {WITHIN:?}; seen {:?}", self.seen),
        }
    }

    /// Reads until a datagram satisfies `pred`, within [`WITHIN`]; answers it.
    async fn until(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_within(left).await {
                Some(d) if pred(&d) => return d,
                Some(_) => {}
                None => panic!("no {what} within {WITHIN:?}; seen {:?}", self.seen),
            }
        }
    }
}

/// Types `echo` of the named variables into a shell session and reads the line back, with an
/// empty value for each unset one: `vars-2:[a|b|]`. The `2` is computed by the shell, so the
/// needle appears only in the output, never in the typed command.
async fn session_env(d: &TestDaemon, id: &str, vars: &[&str]) -> String {
    let shown: Vec<String> = vars.iter().map(|v| format!("${v}")).collect();
    d.submit(id, &format!("echo \"vars-$((1+1)):[{}]\"", shown.join("|")))
        .await;
    let screen = d.wait_screen(id, "vars-2:[").await;
    let text = screen["text"].as_str().unwrap_or_default();
    let at = text.find("vars-2:[").expect("the echoed line");
    text[at..].lines().next().unwrap_or_default().to_string()
}

#[actix_rt::test]
async fn systemd_hears_ready_then_status_watchdog_pings_and_stopping() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let log = root.path().join("daemon.log");
    let notify_path = root.path().join("notify");
    let mut manager = Manager::bind(&notify_path);
    let mut cmd = ChildDaemon::command(&state, &config(), &log);
    cmd.env("NOTIFY_SOCKET", &notify_path)
        .env("WATCHDOG_USEC", "200000");
    let mut d = ChildDaemon::spawn(cmd, &state, &log).await;

    // Ready comes first, and by then the port answers.
    assert_eq!(manager.next().await, "READY=1\n", "log:\n{}", d.log());
    let (status, body) = d.api().call("GET", "/v1/health", None).await;
    assert_eq!(status, 200, "{body}");
    manager
        .until("an empty fleet's status", |m| {
            m == "STATUS=0 sessions: 0 running, 0 needs you, 0 done, 0 exited\n"
        })
        .await;

    let id = id_of(&d.api().spawn("sh").await);
    manager
        .until("a status counting the session", |m| {
            m.starts_with("STATUS=1 session: ")
        })
        .await;
    // The session does not inherit what systemd told the daemon.
    assert_eq!(
        session_env(
            d.api(),
            &id,
            &["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"]
        )
        .await,
        "vars-2:[||]"
    );

    // Pings at half the timeout: four in a row span three intervals of 100 ms.
    manager
        .until("a watchdog ping", |m| m == "WATCHDOG=1\n")
        .await;
    let first = Instant::now();
    for _ in 0..3 {
        manager
            .until("a watchdog ping", |m| m == "WATCHDOG=1\n")
            .await;
    }
    let span = first.elapsed();
    assert!(
        span >= Duration::from_millis(250),
        "pings faster than half the timeout: 3 intervals in {span:?}"
    );

    let exit = d.terminate().await;
    assert!(exit.success(), "{exit}; log:\n{}", d.log());
    manager.until("STOPPING=1", |m| m == "STOPPING=1\n").await;
}

#[actix_rt::test]
async fn without_notify_socket_a_watchdog_variable_changes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let log = root.path().join("daemon.log");
    let mut cmd = ChildDaemon::command(&state, &config(), &log);
    cmd.env("WATCHDOG_USEC", "200000");
    let d = ChildDaemon::spawn(cmd, &state, &log).await;
    let (status, _) = d.api().call("GET", "/v1/health", None).await;
    assert_eq!(status, 200);
    assert!(!d.log().contains("watchdog"), "log:\n{}", d.log());
    d.stop().await;
}

/// `sh` puts its own pid in `LISTEN_PID` and execs the daemon, which keeps that pid, the way
/// systemd's own exec does; fd 3 is `listener` (made in the child before the exec).
fn socket_activated(base: &Command, listener: RawFd) -> Command {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(r#"LISTEN_PID=$$ exec "$0" "$@""#)
        .arg(base.get_program())
        .args(base.get_args())
        .env("LISTEN_FDS", "1");
    for (key, value) in base.get_envs() {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if listener == 3 {
                // dup2 onto itself would keep close-on-exec set.
                let flags = libc::fcntl(3, libc::F_GETFD);
                if flags < 0 || libc::fcntl(3, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(listener, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

#[actix_rt::test]
async fn a_socket_handed_over_as_fd_3_is_where_the_daemon_listens() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let log = root.path().join("daemon.log");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let base = ChildDaemon::command(&state, &config(), &log);
    let cmd = socket_activated(&base, listener.as_raw_fd());
    let d = ChildDaemon::spawn(cmd, &state, &log).await;
    // Only the daemon's copy is left; connections to the port reach it.
    drop(listener);
    assert_eq!(
        d.api().url,
        format!("http://127.0.0.1:{port}"),
        "daemon.json names the handed socket; log:\n{}",
        d.log()
    );
    let (status, body) = d.api().call("GET", "/v1/health", None).await;
    assert_eq!(status, 200, "{body}");
    assert!(d.log().contains("--listen ignored"), "log:\n{}", d.log());
    let id = id_of(&d.api().spawn("sh").await);
    assert_eq!(
        session_env(d.api(), &id, &["LISTEN_FDS", "LISTEN_PID"]).await,
        "vars-2:[|]"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn a_handed_non_loopback_socket_needs_allow_remote() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let log = root.path().join("daemon.log");
    // Bound, never connected to: nothing leaves the machine.
    let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let base = ChildDaemon::command(&state, &config(), &log);
    let mut child = socket_activated(&base, listener.as_raw_fd())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let exited = poll(WITHIN, async || child.try_wait().unwrap()).await;
    let Some(status) = exited else {
        // Dropping a Child does not end it: do it here, before failing.
        let _ = child.kill();
        let _ = child.wait();
        panic!("the daemon kept running on a non-loopback handed socket");
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!status.success(), "log:\n{text}");
    assert!(
        text.contains("refusing to listen on non-loopback"),
        "log:\n{text}"
    );
    assert!(!state.join("daemon.json").exists());
}

/// The log's lines, each parsed as a JSON object.
fn json_lines(log: &str) -> Vec<Map<String, Value>> {
    log.lines()
        .map(|line| match serde_json::from_str(line) {
            Ok(Value::Object(m)) => m,
            other => panic!("log line is not a JSON object: {line:?} ({other:?})"),
        })
        .collect()
}

#[actix_rt::test]
async fn json_log_lines_carry_the_fields_jq_users_expect() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let log = root.path().join("daemon.log");
    let mut cmd = ChildDaemon::command(&state, &config(), &log);
    // Debug for the server, so every request logs a line of its own.
    cmd.args(["--log-format", "json"])
        .env("RUST_LOG", "info,atc::server=debug");
    let d = ChildDaemon::spawn(cmd, &state, &log).await;
    let token = d.api().token.clone();

    let http = atc_testkit::http_client();
    let resp = http
        .get(format!("{}/v1/sessions", d.api().url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let request_id = resp
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .expect("X-Request-Id")
        .to_string();
    // A token in the query (where WebSocket clients may put one) is never logged.
    let resp = http
        .get(format!("{}/v1/fleet?access_token={token}", d.api().url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let refused_id = resp
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .expect("X-Request-Id")
        .to_string();
    let id = id_of(&d.api().spawn("sh").await);
    let mut d = d;
    let exit = d.terminate().await;
    assert!(exit.success());

    let text = d.log();
    assert!(!text.contains(&token), "the token reached the log:\n{text}");
    let lines = json_lines(&text);
    for l in &lines {
        for key in ["timestamp", "level", "target", "message"] {
            assert!(l.get(key).is_some_and(Value::is_string), "no {key}: {l:?}");
        }
    }
    let with_id = |id: &str| {
        lines
            .iter()
            .find(|l| l.get("request_id").and_then(Value::as_str) == Some(id))
            .unwrap_or_else(|| panic!("no line with request_id {id}:\n{text}"))
    };
    let request = with_id(&request_id);
    assert_eq!(request["span"], "request", "{request:?}");
    assert_eq!(request["path"], "/v1/sessions", "{request:?}");
    assert_eq!(request["method"], "GET", "{request:?}");
    assert_eq!(request["message"], "request done", "{request:?}");
    assert_eq!(request["level"], "DEBUG", "{request:?}");
    let spawned = lines
        .iter()
        .find(|l| l["message"] == "session spawned")
        .unwrap_or_else(|| panic!("no spawn line:\n{text}"));
    assert_eq!(spawned["session"], id.as_str(), "{spawned:?}");
    assert_eq!(spawned["level"], "INFO");
    let refused = with_id(&refused_id);
    assert_eq!(refused["message"], "request refused", "{refused:?}");
    assert_eq!(refused["level"], "WARN", "{refused:?}");
    assert_eq!(refused["status"], 401, "{refused:?}");
    assert_eq!(refused["path"], "/v1/fleet", "{refused:?}");
}

/// The local PTY provider, except that starting a process first blocks the calling thread
/// for `stall`: that thread is the sessions' one, so for that long the arbiter the session
/// manager lives on is wedged, as a runaway handler would wedge it.
struct StallingProvider {
    inner: atc::providers::local::LocalPty,
    stall: Duration,
}

impl atc::providers::ExecutionProvider for StallingProvider {
    fn kind(&self) -> &'static str {
        "stalling-pty"
    }

    fn capabilities(&self) -> atc::providers::Capabilities {
        self.inner.capabilities()
    }

    fn start(
        &self,
        spec: atc::providers::StartSpec,
        events: atc::providers::HarnessEvents,
    ) -> Result<atc::providers::StartedHarness, atc::providers::ProviderError> {
        // The wedge under test: this thread is blocked, not waiting for anything.
        std::thread::sleep(self.stall);
        self.inner.start(spec, events)
    }

    fn run_command(
        &self,
        req: atc::providers::RunRequest,
    ) -> futures_util::future::LocalBoxFuture<
        'static,
        Result<atc::providers::RunOutput, atc::providers::ProviderError>,
    > {
        self.inner.run_command(req)
    }

    fn transfer_archive(
        &self,
        archive: bytes::Bytes,
        dir: std::path::PathBuf,
        host_key: Option<String>,
    ) -> futures_util::future::LocalBoxFuture<'static, Result<(), atc::providers::ProviderError>>
    {
        self.inner.transfer_archive(archive, dir, host_key)
    }
}

#[actix_rt::test]
async fn a_wedged_sessions_thread_stops_the_watchdog_pings() {
    use atc::daemon::systemd::NotifySocket;
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let parsed = atc::config::Config::from_json(
        br#"{"targets": {"stalling": {"provider": "stalling-pty"}}}"#,
    );
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    let config = atc::config::Config {
        targets: parsed.targets,
        ..atc_testkit::test_config()
    };
    let stall = Duration::from_millis(1200);
    let provider = StallingProvider {
        inner: atc::providers::local::LocalPty {
            exit_drain: config.timings.exit_drain,
            withheld: Vec::new(),
            cgroups: None,
        },
        stall,
    };
    let mut d = TestDaemon::start_with_providers(
        &state,
        config,
        atc::daemon::ExtraProviders::default().with(std::sync::Arc::new(provider)),
    )
    .await;
    let notify_path = root.path().join("notify");
    let mut manager = Manager::bind(&notify_path);
    let socket = NotifySocket::connect(notify_path.as_os_str()).expect("notify socket");
    // Pings every 100 ms.
    d.handle
        .as_mut()
        .expect("in-process daemon")
        .notify_systemd(socket, Some(Duration::from_millis(200)));
    assert_eq!(manager.next().await, "READY=1\n");
    for _ in 0..3 {
        manager
            .until("a watchdog ping", |m| m == "WATCHDOG=1\n")
            .await;
    }

    // Pings while the spawn wedges the sessions' thread, and for a while after it.
    let watch = async {
        let mut pings = vec![Instant::now()];
        let until = Instant::now() + stall + Duration::from_millis(800);
        while let Some(m) = manager
            .next_within(until.saturating_duration_since(Instant::now()))
            .await
        {
            if m == "WATCHDOG=1\n" {
                pings.push(Instant::now());
            }
        }
        pings
    };
    let spawn = d.spawn_with(json!({"agent": "sh", "cwd": "/tmp", "target": "stalling"}));
    let (pings, spawned) = tokio::join!(watch, spawn);
    assert_eq!(spawned["alive"], true, "{spawned}");
    let longest = pings
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .expect("pings after the wedge");
    assert!(
        longest >= stall - Duration::from_millis(300),
        "the pings went on while the sessions' thread was wedged (longest gap {longest:?})"
    );
    let last = pings.last().copied().expect("a ping");
    assert!(
        pings.len() > 2 && last > pings[0] + stall,
        "the pings did not resume after the wedge: {pings:?}"
    );
    d.stop().await;
    manager.until("STOPPING=1", |m| m == "STOPPING=1\n").await;
}

/// The README shows the shipped unit without its comments; this keeps the two the same.
#[test]
fn the_readme_shows_the_shipped_unit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let unit = std::fs::read_to_string(root.join("contrib/systemd/atc.service")).unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let directives = |text: &str| -> Vec<String> {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    let intro = "the comments, the service is:\n\n```ini\n";
    let at = readme.find(intro).expect("the unit in the README") + intro.len();
    let shown = &readme[at..at + readme[at..].find("```").expect("the block's end")];
    assert_eq!(directives(shown), directives(&unit));
}
