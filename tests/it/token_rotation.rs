//! Which tokens the daemon accepts and how they change: the bearer scheme in any case, and a
//! token rotated by rewriting the token file and sending SIGHUP. Rotation runs against the real
//! `atc` binary in a child process, because a SIGHUP sent to this test process would reach
//! every daemon running in it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use atc::daemon::state_dir::read_info;
use atc_testkit::{id_of, poll_ok, ChildDaemon, Frame, TestDaemon, Ws, WITHIN};
use serde_json::{json, Value};

/// Tokens as an operator would write them (at least 32 bytes).
const NEW: &str = "new-token-0123456789abcdef0123456789abcdef";
const OTHER: &str = "other-token-0123456789abcdef0123456789abcd";

/// The real `atc` binary as a daemon in a child process (the kit's), and what these tests do
/// to it.
struct Daemon {
    child: ChildDaemon,
    url: String,
    state_dir: PathBuf,
}

impl Daemon {
    /// Starts `atc daemon` on a fresh state dir under `root` (port 0) and waits until it
    /// answers.
    async fn start(root: &Path) -> Daemon {
        Daemon::start_with(root, json!({})).await
    }

    /// Like [`Daemon::start`], with `more` config keys beside the test agent.
    async fn start_with(root: &Path, more: Value) -> Daemon {
        let state_dir = root.join("state");
        let mut config = json!({"agents": {"sh": {"bin": "/bin/sh", "env": {"PS1": ""}}}});
        if let (Some(c), Value::Object(more)) = (config.as_object_mut(), more) {
            c.extend(more);
        }
        let child = ChildDaemon::start(&state_dir, &config, &root.join("daemon.log")).await;
        Daemon {
            url: child.url().to_string(),
            child,
            state_dir,
        }
    }

    fn log(&self) -> String {
        self.child.log()
    }

    fn token_file(&self) -> PathBuf {
        self.state_dir.join("token")
    }

    /// The token the daemon minted on its first start.
    fn minted_token(&self) -> String {
        std::fs::read_to_string(self.token_file())
            .expect("token file")
            .trim()
            .to_string()
    }

    /// A client presenting `token`.
    fn client(&self, token: &str) -> TestDaemon {
        TestDaemon::connect(&self.url, token, &self.state_dir)
    }

    /// Rewrites the token file and sends SIGHUP.
    fn rotate(&self, content: &[u8]) {
        std::fs::write(self.token_file(), content).unwrap();
        self.signal(rustix::process::Signal::HUP);
    }

    fn signal(&self, signal: rustix::process::Signal) {
        self.child.signal(signal);
    }

    /// Asserts the daemon still runs and its `daemon.json` still names it.
    fn assert_running(&mut self) {
        assert!(
            self.child.is_running(),
            "the daemon exited; log:\n{}",
            self.log()
        );
        let info = read_info(&self.state_dir).expect("daemon.json left in place");
        assert_eq!(info.pid, self.child.pid());
    }

    /// SIGTERM still stops it cleanly, after any number of SIGHUPs.
    async fn stop(mut self) {
        let status = self.child.terminate().await;
        assert_eq!(status.code(), Some(0), "log:\n{}", self.log());
        assert!(!self.state_dir.join("daemon.json").exists());
    }
}

/// Polls `GET /v1/sessions` with `token` until it answers `status`: a reload is asynchronous
/// to the signal that asked for it.
async fn wait_status(d: &Daemon, token: &str, status: u16) {
    let client = d.client(token);
    let answered = poll_ok(WITHIN, async || {
        let (got, body) = client.call("GET", "/v1/sessions", None).await;
        if got == status {
            Ok(())
        } else {
            Err((got, body))
        }
    })
    .await;
    if let Err((got, body)) = answered {
        panic!("still {got} {body} instead of {status}; log:\n{}", d.log());
    }
}

/// Reads until the socket closes; answers the text frames seen on the way.
async fn until_closed(ws: &mut Ws) -> Vec<Value> {
    let mut texts = Vec::new();
    let deadline = Instant::now() + WITHIN;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match ws.next_within(remaining).await {
            Some(Frame::Close) => return texts,
            Some(Frame::Text(v)) => texts.push(v),
            Some(Frame::Binary(_)) => {}
            None => panic!("the socket stayed open; seen {:?}", ws.seen),
        }
    }
}

/// Proves an attach socket still carries input and output both ways.
async fn assert_attach_works(ws: &mut Ws, marker: &str) {
    ws.send_binary(format!("echo {marker}-$((40+2))\n").as_bytes())
        .await;
    ws.read_until(format!("{marker}-42").as_bytes()).await;
}

/// Proves an events socket is still subscribed: a spawn arrives on it as `session.added`.
async fn assert_events_work(ws: &mut Ws, client: &TestDaemon) {
    let id = id_of(&client.spawn("sh").await);
    let deadline = Instant::now() + WITHIN;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match ws.next_within(remaining).await {
            Some(Frame::Text(v)) if v["type"] == "session.added" && v["session"]["id"] == id => {
                return
            }
            Some(Frame::Close) => panic!("events socket closed; seen {:?}", ws.seen),
            Some(_) => {}
            None => panic!("no session.added for {id}; seen {:?}", ws.seen),
        }
    }
}

#[actix_rt::test]
async fn sighup_rotates_the_token_with_an_overlap_and_drops_only_the_sockets_of_the_old_one() {
    let tmp = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(tmp.path()).await;
    let old = d.minted_token();
    let on_old = d.client(&old);
    let id = id_of(&on_old.spawn("sh").await);
    let (mut old_attach, _, _) = on_old.attach(&id, "cols=80&rows=24").await;
    let mut old_events = on_old.ws("/v1/events").await;

    // Overlap: the new token first, the old one still accepted while clients move over.
    d.rotate(format!("{NEW}\n{old}\n").as_bytes());
    wait_status(&d, NEW, 200).await;
    d.assert_running();
    let on_new = d.client(NEW);
    assert_eq!(on_old.call("GET", "/v1/sessions", None).await.0, 200);
    assert_eq!(
        d.client(OTHER).call("GET", "/v1/sessions", None).await.0,
        401
    );
    assert_attach_works(&mut old_attach, "overlap").await;
    assert_events_work(&mut old_events, &on_new).await;
    let (mut new_attach, _, _) = on_new.attach(&id, "cols=80&rows=24").await;
    let mut new_events = on_new.ws("/v1/events").await;

    // The old token leaves the file: it is refused, and what it opened is dropped.
    d.rotate(format!("{NEW}\n").as_bytes());
    wait_status(&d, &old, 401).await;
    d.assert_running();
    let (status, body) = on_old.call("GET", "/v1/daemon", None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("unauthorized"))
    );
    assert!(
        on_old.try_ws("/v1/events", None).await.is_err(),
        "an upgrade on the old token was accepted"
    );
    let said = until_closed(&mut old_attach).await;
    assert!(
        said.iter()
            .any(|v| v["type"] == "error" && v["code"] == "unauthorized"),
        "the attach socket closed without saying why: {said:?}"
    );
    until_closed(&mut old_events).await;
    // The sockets of the kept token stay open and working.
    assert_attach_works(&mut new_attach, "kept").await;
    assert_events_work(&mut new_events, &on_new).await;
    assert_eq!(on_new.call("GET", "/v1/sessions", None).await.0, 200);

    let log = d.log();
    assert!(log.contains("token file reloaded"), "log:\n{log}");
    for secret in [old.as_str(), NEW] {
        assert!(!log.contains(secret), "a token reached the log:\n{log}");
    }
    d.assert_running();
    d.stop().await;
}

#[actix_rt::test]
async fn a_socket_opened_with_a_ticket_closes_when_the_token_that_asked_for_it_goes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(tmp.path()).await;
    let old = d.minted_token();
    let on_old = d.client(&old);
    let id = id_of(&on_old.spawn("sh").await);
    let ticket = || async {
        let (status, body) = on_old.call("POST", "/v1/tickets", None).await;
        assert_eq!(status, 200, "{body}");
        body["ticket"].as_str().expect("a ticket").to_string()
    };
    let ws_url = |path: &str| format!("{}{path}", d.url.replace("http://", "ws://"));
    let t = ticket().await;
    let mut attach = atc_testkit::ws_at(
        &ws_url(&format!("/v1/sessions/{id}/attach?ticket={t}")),
        None,
        None,
    )
    .await
    .unwrap_or_else(|e| panic!("attach with a ticket refused: {e:?}"));
    let attached = attach.next_text("attached").await;
    attach
        .read_exact(attached["prelude"].as_u64().unwrap() as usize)
        .await;
    assert_attach_works(&mut attach, "ticketed").await;
    let spare = ticket().await;

    d.rotate(format!("{NEW}\n").as_bytes());
    wait_status(&d, &old, 401).await;
    let said = until_closed(&mut attach).await;
    assert!(
        said.iter()
            .any(|v| v["type"] == "error" && v["code"] == "unauthorized"),
        "the ticket's socket closed without saying why: {said:?}"
    );
    // A ticket the old token asked for and never spent opens nothing now.
    let refused =
        atc_testkit::ws_at(&ws_url(&format!("/v1/events?ticket={spare}")), None, None).await;
    assert_eq!(refused.err().map(|e| e.0), Some(401));
    let log = d.log();
    for secret in [old.as_str(), t.as_str(), spare.as_str()] {
        assert!(
            !log.contains(secret),
            "a token or ticket reached the log:\n{log}"
        );
    }
    d.assert_running();
    d.stop().await;
}

#[actix_rt::test]
async fn an_unusable_token_file_fails_closed_until_a_good_one_is_read_on_sighup() {
    let tmp = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(tmp.path()).await;
    let old = d.minted_token();
    let on_old = d.client(&old);
    let id = id_of(&on_old.spawn("sh").await);
    let mut events = on_old.ws("/v1/events").await;

    let not_text: &[u8] = b"not a token \xff\xfe at all\n";
    let not_a_token: &[u8] = b"not a token at all, only words\n";
    let mut accepted = old.clone();
    for (bad, good) in [(&b""[..], NEW), (not_text, OTHER), (not_a_token, NEW)] {
        d.rotate(bad);
        wait_status(&d, &accepted, 401).await;
        d.assert_running();
        let client = d.client(&accepted);
        for (method, path) in [
            ("GET", "/v1/daemon".to_string()),
            ("GET", "/v1/agents".to_string()),
            ("POST", "/v1/sessions".to_string()),
            ("GET", format!("/v1/sessions/{id}")),
            ("GET", format!("/v1/sessions/{id}/screen")),
            ("POST", format!("/v1/sessions/{id}/kill")),
        ] {
            let body = (method == "POST").then(|| json!({"agent": "sh", "cwd": "/tmp"}));
            let (status, err) = client.call(method, &path, body).await;
            assert_eq!(status, 401, "{method} {path}: {err}");
            assert_eq!(
                err["error"]["code"], "unauthorized",
                "{method} {path}: {err}"
            );
        }
        assert!(client.try_ws("/v1/events", None).await.is_err());
        let (status, health) = d
            .client("")
            .call_with("GET", "/v1/health", None, None)
            .await;
        assert_eq!(status, 200, "{health}");

        // A good file and SIGHUP restore service.
        d.rotate(format!("{good}\n").as_bytes());
        wait_status(&d, good, 200).await;
        assert_eq!(
            d.client(&accepted)
                .call("GET", "/v1/sessions", None)
                .await
                .0,
            401
        );
        accepted = good.to_string();
    }
    // The socket opened before the first failure was dropped by it.
    until_closed(&mut events).await;
    // The session was never touched while the daemon refused.
    assert_eq!(d.client(&accepted).session(&id).await["alive"], true);

    let log = d.log();
    assert!(log.contains("holds no token"), "log:\n{log}");
    assert!(log.contains("not text"), "log:\n{log}");
    assert!(log.contains("a token cannot have"), "log:\n{log}");
    for secret in [old.as_str(), NEW, OTHER, "not a token"] {
        assert!(
            !log.contains(secret),
            "token file content reached the log:\n{log}"
        );
    }
    d.assert_running();
    d.stop().await;
}

#[actix_rt::test]
async fn the_bearer_scheme_is_accepted_in_any_case() {
    let d = TestDaemon::start().await;
    let http = atc_testkit::http_client();
    for header in [
        format!("bearer {}", d.token),
        format!("BEARER {}", d.token),
        format!("bEaReR   {}", d.token),
    ] {
        let resp = http
            .get(format!("{}/v1/sessions", d.url))
            .insert_header(("Authorization", header.as_str()))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{header}");
    }
    // Another scheme with the right token is still no bearer token.
    let resp = http
        .get(format!("{}/v1/sessions", d.url))
        .insert_header(("Authorization", format!("Basic {}", d.token)))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    // And the upgrade of a socket.
    let url = format!("{}/v1/events", d.url.replace("http://", "ws://"));
    let upgraded = awc::Client::default()
        .ws(url)
        .set_header("Authorization", format!("bearer {}", d.token))
        .connect()
        .await;
    assert!(upgraded.is_ok(), "{:?}", upgraded.err());
    d.stop().await;
}

/// The daemon's peak resident memory in KiB (`VmHWM`).
fn peak_rss_kib(d: &Daemon) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", d.child.pid())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status")
}

/// Replaces the token file with a FIFO no one writes to.
fn fifo_at(path: &Path) {
    std::fs::remove_file(path).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
}

/// The probe of issue 31: a FIFO at the token file's path held a reload (and with it SIGTERM
/// and quit) until a writer came, and a symlink to `/dev/zero` would have grown the daemon
/// until it died. Each is now refused at once, with the reason, failing closed; a good file
/// brings service back, and quit and SIGTERM still stop the daemon promptly.
#[actix_rt::test]
async fn a_fifo_a_device_or_a_huge_token_file_fails_a_reload_at_once_and_stops_stay_prompt() {
    let tmp = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(tmp.path()).await;
    let token = d.minted_token();
    let before = peak_rss_kib(&d);
    let good = |d: &Daemon| {
        let _ = std::fs::remove_file(d.token_file());
        std::fs::write(d.token_file(), format!("{NEW}\n")).unwrap();
        std::fs::set_permissions(d.token_file(), std::fs::Permissions::from_mode(0o600)).unwrap();
        d.signal(rustix::process::Signal::HUP);
    };

    fifo_at(&d.token_file());
    d.signal(rustix::process::Signal::HUP);
    wait_status(&d, &token, 401).await;
    d.assert_running();
    good(&d);
    wait_status(&d, NEW, 200).await;

    std::fs::remove_file(d.token_file()).unwrap();
    std::os::unix::fs::symlink("/dev/zero", d.token_file()).unwrap();
    d.signal(rustix::process::Signal::HUP);
    wait_status(&d, NEW, 401).await;
    good(&d);
    wait_status(&d, NEW, 200).await;

    // A sparse gigabyte: refused by its size, not read.
    std::fs::OpenOptions::new()
        .write(true)
        .open(d.token_file())
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    d.signal(rustix::process::Signal::HUP);
    wait_status(&d, NEW, 401).await;
    let grown = peak_rss_kib(&d).saturating_sub(before);
    assert!(grown < 64 * 1024, "the daemon grew by {grown} KiB");
    let log = d.log();
    for reason in [
        "the token file is a FIFO",
        "a symlink leading out of the state dir",
        "the token file is 1073741824 bytes",
    ] {
        assert!(log.contains(reason), "no {reason:?} in the log:\n{log}");
    }

    // With a good file read again, quit answers and the daemon exits.
    good(&d);
    wait_status(&d, NEW, 200).await;
    let (status, body) = d.client(NEW).call("POST", "/v1/daemon/quit", None).await;
    assert_eq!(status, 200, "{body}");
    let exited = d.child.exit_within(WITHIN).await;
    let exited = exited.unwrap_or_else(|| panic!("no exit after quit; log:\n{}", d.log()));
    assert_eq!(exited.code(), Some(0), "log:\n{}", d.log());
}

/// SIGTERM sent right behind a SIGHUP that meets a FIFO stops the daemon: no reload stands
/// between a stop and the daemon.
#[actix_rt::test]
async fn sigterm_right_after_a_sighup_on_a_fifo_stops_the_daemon() {
    let tmp = tempfile::tempdir().unwrap();
    let d = Daemon::start(tmp.path()).await;
    fifo_at(&d.token_file());
    d.signal(rustix::process::Signal::HUP);
    d.stop().await;
}

/// A token file others may read, or a symlink out of the state dir, is refused at a reload
/// with the reason (as ssh refuses such a key), and the daemon fails closed.
#[actix_rt::test]
async fn a_token_file_others_can_read_or_one_outside_the_state_dir_is_refused_at_a_reload() {
    let tmp = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(tmp.path()).await;
    let token = d.minted_token();
    std::fs::set_permissions(d.token_file(), std::fs::Permissions::from_mode(0o644)).unwrap();
    d.signal(rustix::process::Signal::HUP);
    wait_status(&d, &token, 401).await;
    d.assert_running();
    std::fs::set_permissions(d.token_file(), std::fs::Permissions::from_mode(0o600)).unwrap();
    d.signal(rustix::process::Signal::HUP);
    wait_status(&d, &token, 200).await;

    // A private file with a good token, but outside the state dir.
    let outside = tmp.path().join("token-elsewhere");
    std::fs::write(&outside, format!("{NEW}\n")).unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::remove_file(d.token_file()).unwrap();
    std::os::unix::fs::symlink(&outside, d.token_file()).unwrap();
    d.signal(rustix::process::Signal::HUP);
    wait_status(&d, &token, 401).await;
    assert_eq!(d.client(NEW).call("GET", "/v1/sessions", None).await.0, 401);
    let log = d.log();
    assert!(log.contains("mode 0644"), "log:\n{log}");
    assert!(log.contains("chmod 600"), "log:\n{log}");
    assert!(log.contains("leading out of the state dir"), "log:\n{log}");
    d.stop().await;
}

#[actix_rt::test]
async fn sighup_rotates_a_principals_token_and_leaves_the_owner_and_the_others_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let principals = json!({"principals": {"ci": {"targets": ["local"]}, "bot": {"targets": []}}});
    let mut d = Daemon::start_with(tmp.path(), principals).await;
    let owner = d.minted_token();
    let dir = d.state_dir.join("principals");
    let file = |id: &str| dir.join(id);
    let read = |id: &str| {
        std::fs::read_to_string(file(id))
            .unwrap()
            .trim()
            .to_string()
    };
    let (old, bot) = (read("ci"), read("bot"));
    let on_old = d.client(&old);
    assert_eq!(on_old.call("GET", "/v1/sessions", None).await.0, 200);
    let mut old_events = on_old.ws("/v1/events").await;
    let on_owner = d.client(&owner);
    let mut owner_events = on_owner.ws("/v1/events").await;

    // Rewritten in place: the file keeps its mode 0600.
    std::fs::write(file("ci"), format!("{NEW}\n")).unwrap();
    d.signal(rustix::process::Signal::HUP);
    wait_status(&d, NEW, 200).await;
    wait_status(&d, &old, 401).await;
    d.assert_running();
    until_closed(&mut old_events).await;
    for token in [owner.as_str(), bot.as_str()] {
        assert_eq!(
            d.client(token).call("GET", "/v1/sessions", None).await.0,
            200
        );
    }
    assert_events_work(&mut owner_events, &on_owner).await;

    // A principal's file made unusable at a reload fails only that principal.
    std::fs::write(file("bot"), "short\n").unwrap();
    d.signal(rustix::process::Signal::HUP);
    wait_status(&d, &bot, 401).await;
    for token in [owner.as_str(), NEW] {
        assert_eq!(
            d.client(token).call("GET", "/v1/sessions", None).await.0,
            200
        );
    }
    let log = d.log();
    assert!(
        log.contains("principal's token file unusable"),
        "log:\n{log}"
    );
    for secret in [old.as_str(), NEW, bot.as_str(), owner.as_str()] {
        assert!(!log.contains(secret), "a token reached the log:\n{log}");
    }
    d.stop().await;
}
