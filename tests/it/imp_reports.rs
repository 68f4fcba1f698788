//! The report socket inside an imp (spec §5.1, §5.6, §5.7): hooks of a remote session report
//! through an impd reverse forward, and each guest connection is a session bridge. Everything
//! goes through atc's real HTTP API and the impd simulator, whose guest is this machine: the
//! guest socket is a real path under the test's `guestDir`, so a test can also speak the
//! bridge protocol on it directly, as a process inside the imp would.

use std::path::{Path, PathBuf};
use std::time::Duration;

use atc::config::Config;
use atc_testkit::impd_sim::{ImpdSim, SimOptions};
use atc_testkit::{agent_shells_config, hook, id_of, poll_ok, with_imp_target, TestDaemon, WITHIN};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// Agent shells (`claude` is a plain shell) plus an imp target `box` (the default) on `sim`
/// whose guest dir is `guest_dir`.
fn config(sim: &ImpdSim, guest_dir: &Path) -> Config {
    let mut c = with_imp_target(
        agent_shells_config(),
        &sim.url(),
        sim.token_file(),
        json!({"guestDir": guest_dir.display().to_string()}),
    );
    c.timings.imp_reconnect_delays = [20, 50, 100, 200, 400]
        .into_iter()
        .map(Duration::from_millis)
        .collect();
    c
}

/// A simulator, a daemon on it, and the temp dir holding the daemon's state and the guest
/// dir.
struct Setup {
    sim: ImpdSim,
    d: TestDaemon,
    guest_dir: PathBuf,
    _tmp: tempfile::TempDir,
}

async fn setup() -> Setup {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let guest_dir = tmp.path().join("guest");
    let d = TestDaemon::start_on(&tmp.path().join("state"), config(&sim, &guest_dir)).await;
    Setup {
        sim,
        d,
        guest_dir,
        _tmp: tmp,
    }
}

impl Setup {
    /// Spawns a `claude` shell and waits until it is attached; returns its id.
    async fn spawn_attached(&self) -> String {
        let id = id_of(&self.d.spawn("claude").await);
        self.d
            .wait_session(&id, "attached", |s| {
                s["lifecycle"]["attachment"] == "attached"
            })
            .await;
        id
    }

    /// The guest path of a session's report socket.
    fn socket(&self, id: &str) -> String {
        atc::providers::imp::naming::guest_socket(&self.guest_dir.display().to_string(), id)
    }

    /// A connection to a session's report socket, as a process inside the imp makes it.
    async fn guest(&self, id: &str) -> Guest {
        let stream = UnixStream::connect(self.socket(id))
            .await
            .unwrap_or_else(|e| panic!("connecting to {}: {e}", self.socket(id)));
        let (r, w) = stream.into_split();
        Guest {
            lines: BufReader::new(r).lines(),
            w,
        }
    }

    async fn stop(self) {
        self.d.stop().await;
        self.sim.stop();
    }
}

/// One guest connection to a report socket.
struct Guest {
    lines: tokio::io::Lines<BufReader<tokio::net::unix::OwnedReadHalf>>,
    w: tokio::net::unix::OwnedWriteHalf,
}

impl Guest {
    async fn send(&mut self, line: &Value) {
        let mut bytes = line.to_string().into_bytes();
        bytes.push(b'\n');
        self.w
            .write_all(&bytes)
            .await
            .expect("write to the guest socket");
    }

    /// The next answer line; `None` once the daemon closed the connection.
    async fn answer(&mut self) -> Option<Value> {
        let line = tokio::time::timeout(WITHIN, self.lines.next_line())
            .await
            .expect("an answer (or the close) within the deadline")
            .ok()
            .flatten()?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("answer {line:?}: {e}")))
    }

    /// Sends a request and returns its answer.
    async fn ask(&mut self, line: Value) -> Value {
        self.send(&line).await;
        match self.answer().await {
            Some(a) => a,
            None => panic!("no answer to {line}: the connection closed"),
        }
    }

    /// The connection was closed by the daemon: end of file, nothing more.
    async fn assert_closed(&mut self) {
        assert_eq!(self.answer().await, None, "nothing after a close");
    }
}

fn status_read(id: u64) -> Value {
    json!({"v": 1, "id": id, "op": "status.read"})
}

#[actix_rt::test]
async fn a_hook_inside_the_imp_drives_the_session_to_needs_you() {
    let s = setup().await;
    let id = s.spawn_attached().await;
    // The guest environment names the report socket, the bridge and the outbox.
    let (status, body) =
        s.d.call(
            "POST",
            &format!("/v1/sessions/{id}/submit"),
            Some(json!({"text": "printf '%s\\n' b=$ATC_BRIDGE s=$ATC_SOCKET o=$ATC_OUTBOX"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let socket = s.socket(&id);
    let outbox = format!("{}.outbox", socket.trim_end_matches(".sock"));
    // One line each: the screen is 80 columns wide.
    s.d.wait_screen(&id, "\nb=1\n").await;
    s.d.wait_screen(&id, &format!("\ns={socket}\n")).await;
    s.d.wait_screen(&id, &format!("\no={outbox}")).await;

    hook(
        &s.d,
        &id,
        json!({"hook_event_name": "Notification", "message": "Allow Bash?"}),
    )
    .await;
    let session =
        s.d.wait_session(&id, "needs_you", |d| {
            d["state"] == "needs_you" && d["lastMsg"] == "Allow Bash?"
        })
        .await;
    assert_eq!(session["unread"], true, "{session}");
    hook(
        &s.d,
        &id,
        json!({"hook_event_name": "UserPromptSubmit", "prompt": "go on"}),
    )
    .await;
    s.d.wait_session(&id, "running", |d| {
        d["state"] == "running" && d["lastMsg"] == "go on"
    })
    .await;
    s.stop().await;
}

#[actix_rt::test]
async fn a_hook_line_naming_another_session_is_forbidden_and_changes_nothing() {
    let s = setup().await;
    let id = s.spawn_attached().await;
    let before = s.d.session(&id).await;
    let mut g = s.guest(&id).await;
    let other = "3f2504e0-4f89-41d3-9a0c-0305e82c3301";
    g.send(&json!({
        "atcId": other,
        "event": "Notification",
        "payload": {"message": "not yours"},
    }))
    .await;
    assert_eq!(
        g.answer().await,
        Some(json!({"ok": false, "code": "forbidden"}))
    );
    g.assert_closed().await;
    // A malformed line is refused the same way, with its request id when it has one.
    let mut g = s.guest(&id).await;
    let answer = g.ask(json!({"v": 1, "id": 9, "op": "session.kill"})).await;
    assert_eq!(answer, json!({"id": 9, "ok": false, "code": "forbidden"}));
    g.assert_closed().await;
    let mut g = s.guest(&id).await;
    let answer = g.ask(json!(["not", "an", "object"])).await;
    assert_eq!(answer, json!({"ok": false, "code": "forbidden"}));
    g.assert_closed().await;
    // Lines are served in order, so a fresh status read sees whatever the refused ones did:
    // nothing.
    let mut g = s.guest(&id).await;
    let status = g.ask(status_read(1)).await;
    assert_eq!(
        status,
        json!({"id": 1, "ok": true, "state": before["state"], "lastMsg": before["lastMsg"]})
    );
    let after = s.d.session(&id).await;
    assert_eq!(
        (&after["state"], &after["lastMsg"], &after["unread"]),
        (&before["state"], &before["lastMsg"], &before["unread"])
    );
    s.stop().await;
}

#[actix_rt::test]
async fn status_read_answers_the_sessions_state_and_taps_are_unsupported() {
    let s = setup().await;
    let id = s.spawn_attached().await;
    let mut g = s.guest(&id).await;
    // A hook line on the bridge gets no answer; the request after it sees it applied.
    g.send(&json!({
        "atcId": id,
        "event": "Notification",
        "payload": {"message": "Allow Edit?"},
    }))
    .await;
    let status = g.ask(status_read(1)).await;
    assert_eq!(
        status,
        json!({"id": 1, "ok": true, "state": "needs_you", "lastMsg": "Allow Edit?"})
    );
    // Inbox taps are not built: refused, and the connection stays.
    let tap = g.ask(json!({"v": 1, "id": "t", "op": "tap.open"})).await;
    assert_eq!(tap, json!({"id": "t", "ok": false, "code": "unsupported"}));
    let ack = g
        .ask(json!({"v": 1, "id": "a", "op": "tap.ack", "message": "m1"}))
        .await;
    assert_eq!(ack, json!({"id": "a", "ok": false, "code": "unsupported"}));
    let status = g.ask(status_read(2)).await;
    assert_eq!(status["state"], "needs_you", "{status}");
    s.stop().await;
}

/// The trail's `Report` events of a session.
async fn reports_in_trail(d: &TestDaemon, id: &str) -> (usize, Vec<Value>) {
    let (status, trail) = d.call("GET", "/v1/events/trail?limit=200", None).await;
    assert_eq!(status, 200, "{trail}");
    let events: Vec<Value> = trail["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["atcId"] == id)
        .collect();
    let reports = events.iter().filter(|e| e["event"] == "Report").count();
    (reports, events)
}

#[actix_rt::test]
async fn a_report_resent_with_the_same_report_id_lands_once() {
    let s = setup().await;
    let id = s.spawn_attached().await;
    let report = |rid: u64| {
        json!({
            "v": 1, "id": rid, "op": "report", "reportID": "note-1",
            "payload": {"kind": "note", "label": "build", "text": "green"},
        })
    };
    let mut g = s.guest(&id).await;
    assert_eq!(g.ask(report(1)).await, json!({"id": 1, "ok": true}));
    drop(g);
    // The guest reporter resends what it saw no answer for on its next connection.
    let mut g = s.guest(&id).await;
    assert_eq!(
        g.ask(report(2)).await,
        json!({"id": 2, "ok": true, "duplicate": true})
    );
    // A hook after it: once that is in the trail, anything before it is too.
    g.send(&json!({
        "atcId": id,
        "event": "Notification",
        "payload": {"message": "sentinel"},
    }))
    .await;
    let reached = poll_ok(WITHIN, async || {
        let (reports, events) = reports_in_trail(&s.d, &id).await;
        if events.iter().any(|e| e["message"] == "sentinel") {
            Ok((reports, events))
        } else {
            Err(events)
        }
    })
    .await;
    let (reports, events) =
        reached.unwrap_or_else(|events| panic!("the sentinel never reached the trail: {events:?}"));
    assert_eq!(reports, 1, "the report landed once: {events:?}");
    s.stop().await;
}

#[actix_rt::test]
async fn a_connection_from_before_a_revive_is_a_stale_binding() {
    let s = setup().await;
    let id = s.spawn_attached().await;
    let mut old = s.guest(&id).await;
    assert_eq!(old.ask(status_read(1)).await["ok"], true);
    // End the process and revive the session: a new harness, a newer epoch.
    let (status, body) =
        s.d.call("POST", &format!("/v1/sessions/{id}/kill"), None)
            .await;
    assert_eq!(status, 200, "{body}");
    s.d.wait_session(&id, "exited", |d| d["alive"] == false)
        .await;
    let (status, body) =
        s.d.call("POST", &format!("/v1/sessions/{id}/revive"), None)
            .await;
    assert_eq!(status, 200, "{body}");
    s.d.wait_session(&id, "attached again", |d| {
        d["alive"] == true && d["lifecycle"]["attachment"] == "attached"
    })
    .await;
    assert_eq!(
        old.ask(status_read(2)).await,
        json!({"id": 2, "ok": false, "code": "stale_binding"})
    );
    old.assert_closed().await;
    // The new harness's socket serves.
    let mut new = s.guest(&id).await;
    assert_eq!(new.ask(status_read(3)).await["ok"], true);
    // A session that is gone leaves no connection serving. A dead imp session is forgotten
    // in two steps (a second kill asks for them), and forgetting destroys the imp.
    let (status, body) =
        s.d.call("POST", &format!("/v1/sessions/{id}/kill"), None)
            .await;
    assert_eq!(status, 200, "{body}");
    s.d.wait_session(&id, "exited", |d| d["alive"] == false)
        .await;
    let (status, body) =
        s.d.call("POST", &format!("/v1/sessions/{id}/kill"), None)
            .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "confirmation_required");
    assert_eq!(body["error"]["data"]["session"], id.as_str());
    let (_, first) =
        s.d.call("DELETE", &format!("/v1/sessions/{id}"), None)
            .await;
    let token = first["confirmToken"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let (status, body) =
        s.d.call(
            "DELETE",
            &format!("/v1/sessions/{id}?confirm={token}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // The imp went with it, and so did its connections.
    new.assert_closed().await;
    s.stop().await;
}

#[actix_rt::test]
async fn a_lost_listener_listens_again_on_the_next_attach() {
    let s = setup().await;
    let id = s.spawn_attached().await;
    let imp = s.sim.imps()[0].name.clone();
    let session = impd_client::exec_session_name(&id);
    let faults = s.sim.faults();
    assert!(faults.lose_listeners(&imp));
    s.sim
        .wait_until("the socket file is gone", |_| {
            !Path::new(&s.socket(&id)).exists()
        })
        .await;
    // The next attach (a dropped output connection reconnects at once) listens again.
    assert!(faults.drop_output(&imp, &session));
    s.sim
        .wait_until("listening again", |_| Path::new(&s.socket(&id)).exists())
        .await;
    let mut g = s.guest(&id).await;
    g.send(&json!({
        "atcId": id,
        "event": "Notification",
        "payload": {"message": "back"},
    }))
    .await;
    assert_eq!(g.ask(status_read(1)).await["lastMsg"], "back");
    s.stop().await;
}

#[actix_rt::test]
async fn a_report_socket_impd_refuses_ends_the_spawn_with_the_refusal() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    // A guest dir so deep that no unix socket fits under it: the listen fails.
    let guest_dir = tmp.path().join("g".repeat(120));
    let d = TestDaemon::start_on(&tmp.path().join("state"), config(&sim, &guest_dir)).await;
    let (status, body) = d
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"agent": "claude", "cwd": "/tmp"})),
        )
        .await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "host_unavailable", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("imp refused the report socket (LISTEN_FAILED)"),
        "{body}"
    );
    assert_eq!(body["error"]["data"]["problem"], "listen_failed", "{body}");
    // Nothing runs in the imp, and its lease went back with the harness.
    sim.wait_until("lease returned", |sim| {
        sim.imps()
            .iter()
            .all(|i| sim.live_leases(&i.name).is_empty())
    })
    .await;
    d.stop().await;
    sim.stop();
}

/// What a guest says in a hook line (here: a Claude `Notification` naming a transcript) about
/// a path is never opened on the host: the host file's title never names the session, while
/// the same report from a local session does (the control).
#[actix_rt::test]
async fn a_transcript_path_from_inside_the_imp_is_never_opened_on_the_host() {
    let s = setup().await;
    let host_file = s.guest_dir.with_file_name("host-secret.jsonl");
    std::fs::write(
        &host_file,
        format!(
            "{}\n",
            json!({"type": "custom-title", "customTitle": "read off the host"})
        ),
    )
    .unwrap();
    let payload = json!({"message": "from the guest", "transcript_path": host_file});
    let remote = s.spawn_attached().await;
    let mut g = s.guest(&remote).await;
    g.send(&json!({"atcId": remote, "event": "Notification", "payload": payload}))
        .await;
    s.d.wait_session(&remote, "the guest's report", |d| {
        d["lastMsg"] == "from the guest"
    })
    .await;
    // The local control: the same report, from a local session's own hook.
    let local = id_of(
        &s.d.spawn_with(json!({"agent": "claude", "cwd": "/tmp", "target": "local"}))
            .await,
    );
    hook(
        &s.d,
        &local,
        json!({"hook_event_name": "Notification", "message": "local",
               "transcript_path": host_file}),
    )
    .await;
    s.d.wait_session(&local, "named from its transcript", |d| {
        d["name"] == "read off the host"
    })
    .await;
    // The remote session's report was applied before the local one was sent, and its name
    // would have been read in the same time: a short window more proves it never comes (the
    // sleep is that window, absence being what is checked).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let session = s.d.session(&remote).await;
    assert_ne!(session["name"], "read off the host", "{session}");
    s.stop().await;
}

/// A guest's report with a value that could end up in an argv is refused, with nothing stored,
/// and the connection stays open for the next one.
#[actix_rt::test]
async fn a_guest_report_with_a_flag_for_an_agent_session_id_is_refused_and_nothing_stored() {
    let s = setup().await;
    let id = s.spawn_attached().await;
    let mut g = s.guest(&id).await;
    let answer = g
        .ask(json!({"v": 1, "id": 1, "op": "report", "reportID": "r1",
                    "payload": {"session_id": "--dangerously-skip-permissions"}}))
        .await;
    assert_eq!(answer, json!({"id": 1, "ok": false, "code": "refused"}));
    // The connection is still served.
    let status = g.ask(status_read(2)).await;
    assert_eq!(status["ok"], true, "{status}");
    let session = s.d.session(&id).await;
    assert_eq!(session["agentSessionID"], Value::Null, "{session}");
    let (_, trail) = s.d.call("GET", "/v1/events/trail", None).await;
    assert_eq!(trail["events"].as_array().map(Vec::len), Some(0), "{trail}");
    s.stop().await;
}
