//! Test support: the real daemon started in-process on `127.0.0.1:0` with a fresh state dir
//! and short timings, an HTTP client for its API, and a WebSocket client for its sockets.
//! Every wait has a deadline; nothing sleeps hoping a state arrived.

#![allow(dead_code)]

/// The impd simulator, a crate of its own (compiled once, not into every test binary); tests
/// reach it as `support::impd_sim`.
pub use impd_sim;

pub mod broker;
pub mod caps_provider;
pub mod child_daemon;
pub mod claude_world;
pub mod codex_home;
pub mod fake_anthropic;
pub mod fake_model;
pub mod fake_openai;
pub mod raw_answer;
pub mod real_agents;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use actix_http::ws;
use atc::config::{AgentConfig, Config};
use atc::daemon::{Daemon, DaemonHandle, DaemonOptions, ExtraProviders};
use awc::BoxedSocket;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;

/// Generous bound for things that should happen quickly; it only bounds failure.
pub const WITHIN: Duration = Duration::from_secs(10);

/// Agents every test daemon knows besides the built-ins.
pub fn test_agents() -> BTreeMap<String, AgentConfig> {
    let mut agents = BTreeMap::new();
    let agent = |bin: &str, args: &[&str]| AgentConfig {
        bin: bin.into(),
        args: args.iter().map(|s| s.to_string()).collect(),
        env: BTreeMap::new(),
        label: None,
        kind: None,
        ..Default::default()
    };
    agents.insert("cat".into(), agent("cat", &[]));
    // No prompt: output then ends exactly where a command's output ends, so a screen read
    // after a marker cannot race the next prompt.
    let mut sh = agent("/bin/sh", &[]);
    sh.env.insert("PS1".into(), String::new());
    agents.insert("sh".into(), sh);
    // Ignores SIGHUP: only the SIGKILL after the grace can end it.
    agents.insert(
        "stubborn".into(),
        agent(
            "/bin/sh",
            &["-c", "trap '' HUP; echo ready; while :; do sleep 1; done"],
        ),
    );
    agents.insert(
        "ghost".into(),
        agent("definitely-not-installed-atc-test", &[]),
    );
    agents
}

/// The config tests run with: test agents, short timings.
pub fn test_config() -> Config {
    let mut c = Config {
        agents: test_agents(),
        ..Config::default()
    };
    c.timings.kill_grace = Duration::from_millis(300);
    c.timings.exit_drain = Duration::from_millis(100);
    c.timings.shutdown_grace = Duration::from_secs(3);
    c
}

/// The test config with `claude`, `codex` and `grok` as plain shells without a prompt, so a
/// test can run `atc hook-report` inside them as the agents' hooks would.
pub fn agent_shells_config() -> Config {
    let mut config = test_config();
    for kind in ["claude", "codex", "grok"] {
        let mut env = BTreeMap::new();
        env.insert("PS1".to_string(), String::new());
        config.agents.insert(
            kind.into(),
            AgentConfig {
                bin: "/bin/sh".into(),
                // The shell ignores what atc appends per kind (Claude's --settings, Grok's
                // --no-leader): they land in "$@" of a script that only execs a shell.
                args: vec!["-c".into(), "exec /bin/sh".into(), "agent".into()],
                env,
                ..Default::default()
            },
        );
    }
    config
}

/// A daemon with [`agent_shells_config`] on a fresh dir (returned, so a test can restart on it).
pub async fn agent_shells_daemon() -> (TestDaemon, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    (
        TestDaemon::start_on(tmp.path(), agent_shells_config()).await,
        tmp,
    )
}

/// Runs `atc hook-report` inside the session with this hook JSON on stdin (single quotes in
/// the JSON would end the shell word: tests keep them out).
pub async fn hook(d: &TestDaemon, id: &str, payload: Value) {
    let payload = payload.to_string();
    assert!(
        !payload.contains('\''),
        "a hook payload with a single quote"
    );
    let cmd = format!(
        "printf '%s' '{}' | {} hook-report",
        payload,
        env!("CARGO_BIN_EXE_atc")
    );
    let (status, body) = d
        .call(
            "POST",
            &format!("/v1/sessions/{id}/submit"),
            Some(serde_json::json!({ "text": cmd })),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

/// `targets` for `base` (a test config) with `local` and an imp target `box`, the default,
/// on the impd at `url` with its token in `token_file`; `options` join the `box` entry.
pub fn with_imp_target(base: Config, url: &str, token_file: &Path, options: Value) -> Config {
    let mut entry = serde_json::json!({"provider": "imp", "url": url, "tokenFile": token_file});
    if let (Some(e), Value::Object(more)) = (entry.as_object_mut(), options) {
        e.extend(more);
    }
    let text = serde_json::json!({
        "targets": {"local": {"provider": "local-pty"}, "box": entry},
        "defaultTarget": "box",
    })
    .to_string();
    let parsed = Config::from_json(text.as_bytes());
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    Config {
        targets: parsed.targets,
        ..base
    }
}

/// One remote `sh` session and its names on the impd simulator.
pub struct Remote {
    /// atc's session id.
    pub id: String,
    /// The imp it runs in.
    pub imp: String,
    /// Its impd session name.
    pub session: String,
}

/// Spawns `sh` on the daemon's default (imp) target and waits until its harness is attached.
pub async fn spawn_remote(d: &TestDaemon, sim: &impd_sim::ImpdSim) -> Remote {
    let id = id_of(&d.spawn("sh").await);
    d.wait_session(&id, "attached", |s| {
        s["lifecycle"]["attachment"] == "attached"
    })
    .await;
    let session = atc::providers::imp::naming::exec_session_name(&id);
    let imp = sim
        .imps()
        .into_iter()
        .find(|i| i.sessions.iter().any(|s| s.name == session))
        .map(|i| i.name)
        .unwrap_or_else(|| panic!("no imp runs {session}: {:#?}", sim.imps()));
    Remote { id, imp, session }
}

/// A daemon running in this test's actix system.
pub struct TestDaemon {
    pub handle: Option<DaemonHandle>,
    pub url: String,
    pub token: String,
    pub state_dir: PathBuf,
    /// Keeps the temp dir alive (None when the test owns the dir).
    _tmp: Option<tempfile::TempDir>,
    http: awc::Client,
}

impl TestDaemon {
    /// A daemon with the test config and a fresh state dir.
    pub async fn start() -> TestDaemon {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().to_path_buf();
        let mut d = TestDaemon::start_on(&dir, test_config()).await;
        d._tmp = Some(tmp);
        d
    }

    /// A daemon on a given state dir and config.
    pub async fn start_on(dir: &Path, config: Config) -> TestDaemon {
        TestDaemon::try_start_on(dir, config)
            .await
            .unwrap_or_else(|e| panic!("daemon failed to start: {e}"))
    }

    /// Like `start_on`, returning the start error.
    pub async fn try_start_on(
        dir: &Path,
        config: Config,
    ) -> Result<TestDaemon, atc::daemon::StartError> {
        TestDaemon::try_start_with(dir, config, ExtraProviders::default()).await
    }

    /// A daemon on a given state dir and config whose targets may name the `extra`
    /// providers' kinds (test doubles behind the provider trait).
    pub async fn start_with_providers(
        dir: &Path,
        config: Config,
        extra: ExtraProviders,
    ) -> TestDaemon {
        TestDaemon::try_start_with(dir, config, extra)
            .await
            .unwrap_or_else(|e| panic!("daemon failed to start: {e}"))
    }

    /// A daemon whose own atc (what hooks run and imps get copied) is `atc_program`; a path
    /// that is no file makes a daemon with no atc binary.
    pub async fn start_with_atc_program(
        dir: &Path,
        config: Config,
        atc_program: PathBuf,
    ) -> TestDaemon {
        TestDaemon::try_start_full(dir, config, ExtraProviders::default(), atc_program)
            .await
            .unwrap_or_else(|e| panic!("daemon failed to start: {e}"))
    }

    async fn try_start_with(
        dir: &Path,
        config: Config,
        extra: ExtraProviders,
    ) -> Result<TestDaemon, atc::daemon::StartError> {
        TestDaemon::try_start_full(dir, config, extra, env!("CARGO_BIN_EXE_atc").into()).await
    }

    async fn try_start_full(
        dir: &Path,
        config: Config,
        extra: ExtraProviders,
        atc_program: PathBuf,
    ) -> Result<TestDaemon, atc::daemon::StartError> {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
        let options = DaemonOptions {
            state_dir: dir.to_path_buf(),
            config,
            listen: None,
            listener: Some(listener),
            allow_remote: false,
            workers: 1,
            runtime_dir: Some(dir.to_path_buf()),
            atc_program: Some(atc_program),
            // Never the developer's own Codex files.
            codex_home: Some(dir.join("codex-home")),
            metrics_listen: None,
        };
        let handle = Daemon::start_with_providers(options, extra).await?;
        Ok(TestDaemon {
            url: format!("http://{}", handle.addr),
            token: handle.token.clone(),
            state_dir: dir.to_path_buf(),
            handle: Some(handle),
            _tmp: None,
            http: http_client(),
        })
    }

    /// Graceful stop.
    pub async fn stop(mut self) {
        if let Some(h) = self.handle.take() {
            h.stop().await;
        }
    }

    /// Stops and hands back the state dir's owner so a new daemon can start on it.
    pub async fn stop_keep_dir(mut self) -> Option<tempfile::TempDir> {
        if let Some(h) = self.handle.take() {
            h.stop().await;
        }
        self._tmp.take()
    }

    /// Types `text` and Enter into session `id` (`POST .../submit`), asserting it was taken.
    pub async fn submit(&self, id: &str, text: &str) {
        let (status, body) = self
            .call(
                "POST",
                &format!("/v1/sessions/{id}/submit"),
                Some(serde_json::json!({ "text": text })),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }

    /// A request with the token.
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_with(method, path, body, Some(&self.token)).await
    }

    /// A request with the given token (None: no Authorization header).
    pub async fn call_with(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        token: Option<&str>,
    ) -> (u16, Value) {
        let method = awc::http::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self.http.request(method, format!("{}{}", self.url, path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let mut resp = match body {
            Some(b) => req.send_json(&b).await,
            None => req.send().await,
        }
        .unwrap_or_else(|e| panic!("request {path} failed: {e}"));
        let status = resp.status().as_u16();
        let bytes = resp.body().limit(64 * 1024 * 1024).await.expect("body");
        let json = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        (status, json)
    }

    /// Sends a raw body with a content type.
    pub async fn post_raw(&self, path: &str, content_type: &str, body: Vec<u8>) -> (u16, Value) {
        let mut resp = self
            .http
            .post(format!("{}{}", self.url, path))
            .bearer_auth(&self.token)
            .insert_header(("Content-Type", content_type))
            .send_body(body)
            .await
            .expect("request");
        let status = resp.status().as_u16();
        let bytes = resp.body().await.expect("body");
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// Spawns a session of `agent` in /tmp and returns its descriptor.
    pub async fn spawn(&self, agent: &str) -> Value {
        self.spawn_with(serde_json::json!({"agent": agent, "cwd": "/tmp"}))
            .await
    }

    /// Spawns with a full body.
    pub async fn spawn_with(&self, body: Value) -> Value {
        let (status, json) = self.call("POST", "/v1/sessions", Some(body)).await;
        assert_eq!(status, 201, "spawn failed: {json}");
        json["session"].clone()
    }

    /// The current descriptor of a session.
    pub async fn session(&self, id: &str) -> Value {
        let (status, json) = self.call("GET", &format!("/v1/sessions/{id}"), None).await;
        assert_eq!(status, 200, "get {id}: {json}");
        json["session"].clone()
    }

    /// Polls the descriptor until `pred` holds, or panics with the last one seen.
    pub async fn wait_session(&self, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.wait_session_within(id, what, WITHIN, pred).await
    }

    /// [`Self::wait_session`] with its own deadline (a real agent's turn takes longer).
    pub async fn wait_session_within(
        &self,
        id: &str,
        what: &str,
        within: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let d = self.session(id).await;
            if pred(&d) {
                return d;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("session {id} never became {what}; last descriptor: {d}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until session `id` is `done` (its agent's Stop hook) and checks that the fleet row
    /// carries `result` as the turn's result; answers the descriptor and the row.
    pub async fn wait_done_with(&self, id: &str, result: &str, within: Duration) -> (Value, Value) {
        let descriptor = self
            .wait_session_within(id, &format!("done with {result:?}"), within, |s| {
                s["state"] == "done"
            })
            .await;
        let (_, fleet) = self.call("GET", "/v1/fleet", None).await;
        let row = fleet["fleet"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["sessionId"] == id))
            .cloned()
            .unwrap_or(Value::Null);
        assert_eq!(row["result"], result, "the turn's result: {row}");
        (descriptor, row)
    }

    /// Polls the trail until `pred` holds for session `id`'s rows (oldest first, among the
    /// newest 200), and answers them; panics with the trail after [`WITHIN`]. Reading the
    /// trail flushes every store write queued before its rows.
    pub async fn wait_trail(
        &self,
        id: &str,
        what: &str,
        pred: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + WITHIN;
        loop {
            let (_, trail) = self.call("GET", "/v1/events/trail?limit=200", None).await;
            let rows: Vec<Value> = trail["events"]
                .as_array()
                .map(|rows| rows.iter().filter(|r| r["atcId"] == id).cloned().collect())
                .unwrap_or_default();
            if pred(&rows) {
                return rows;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the trail of {id} never showed {what}: {trail}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Polls `GET /v1/daemon` until the reporter socket's counts are `(accepted, dropped)`.
    pub async fn wait_reporter(&self, accepted: u64, dropped: u64) {
        let deadline = tokio::time::Instant::now() + WITHIN;
        loop {
            let (_, info) = self.call("GET", "/v1/daemon", None).await;
            let r = &info["reporter"];
            if r["accepted"] == accepted && r["dropped"] == dropped {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "reporter counts never became {accepted}/{dropped}: {r}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Polls the screen until its text contains `needle`.
    pub async fn wait_screen(&self, id: &str, needle: &str) -> Value {
        self.wait_screen_within(id, needle, WITHIN).await
    }

    /// [`Self::wait_screen`] with its own deadline (a real agent starts slower).
    pub async fn wait_screen_within(&self, id: &str, needle: &str, within: Duration) -> Value {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let (_, s) = self
                .call("GET", &format!("/v1/sessions/{id}/screen"), None)
                .await;
            if s["text"].as_str().is_some_and(|t| t.contains(needle)) {
                return s;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("screen of {id} never showed {needle:?}; last screen: {s}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the program in session `id` has turned bracketed paste on (DEC 2004), as a
    /// watch-only client's repaint says: from then on a submit reaches an agent as a paste.
    /// Real agents turn it on a moment after they draw their prompt.
    pub async fn wait_paste_mode(&self, id: &str, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let (ws, _, prelude) = self.attach(id, "cols=120&rows=40&mode=watch").await;
            ws.close().await;
            if terminal_after(&prelude, 120, 40).screen().bracketed_paste() {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "session {id} never turned bracketed paste on"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Where session `id`'s output stream stands now: its id, and the offset its next byte
    /// will have (offsets go on across revives).
    pub async fn stream_end(&self, id: &str) -> (String, u64) {
        let (ws, attached, _) = self.attach(id, "cols=120&rows=40&mode=watch").await;
        ws.close().await;
        (
            attached["stream"]
                .as_str()
                .expect("a stream id")
                .to_string(),
            attached["offset"].as_u64().expect("an offset"),
        )
    }

    /// Waits until session `id` printed `needle` after `since` (from [`Self::stream_end`]),
    /// reading the stream itself: what a revived program prints, apart from what the screen
    /// model still shows of the one before it.
    pub async fn wait_output_since(&self, id: &str, since: &(String, u64), needle: &[u8]) {
        let (stream, from) = since;
        let query = format!("cols=120&rows=40&mode=watch&stream={stream}&from={from}");
        let (mut ws, attached, _) = self.attach(id, &query).await;
        assert_eq!(attached["replay"], "resume", "{attached}");
        ws.read_until(needle).await;
        ws.close().await;
    }

    /// Opens a WebSocket on `path_and_query` with the token header.
    pub async fn ws(&self, path_and_query: &str) -> Ws {
        self.try_ws(path_and_query, None)
            .await
            .unwrap_or_else(|(status, body)| panic!("ws {path_and_query} refused: {status} {body}"))
    }

    /// Opens a WebSocket, returning the HTTP refusal on failure.
    pub async fn try_ws(
        &self,
        path_and_query: &str,
        origin: Option<&str>,
    ) -> Result<Ws, (u16, String)> {
        let url = format!("{}{}", self.url.replace("http://", "ws://"), path_and_query);
        ws_at(&url, Some(&self.token), origin).await
    }

    /// Attaches to a session and reads the `attached` frame and its prelude.
    pub async fn attach(&self, id: &str, query: &str) -> (Ws, Value, Vec<u8>) {
        let mut ws = self.ws(&format!("/v1/sessions/{id}/attach?{query}")).await;
        let attached = ws.next_text("attached").await;
        let prelude_len = attached["prelude"].as_u64().unwrap_or(0) as usize;
        let prelude = ws.read_exact(prelude_len).await;
        (ws, attached, prelude)
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        // A test that panicked before stop(): the daemon dies with the test's system; its
        // children get SIGHUP when their PTY masters close.
    }
}

/// One frame from a socket.
#[derive(Debug)]
pub enum Frame {
    Text(Value),
    Binary(Bytes),
    Close,
}

/// A WebSocket client with a log of what it saw (printed on failure).
pub struct Ws {
    framed: actix_codec::Framed<BoxedSocket, ws::Codec>,
    pub seen: Vec<String>,
}

impl Ws {
    /// The next frame within `within`, or None on timeout. Pings answered on the way do not
    /// extend it.
    pub async fn next_within(&mut self, within: Duration) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let item = tokio::time::timeout_at(deadline, self.framed.next())
                .await
                .ok()?;
            let frame = match item {
                None => Frame::Close,
                Some(Err(e)) => panic!("ws protocol error: {e}; seen: {:?}", self.seen),
                Some(Ok(ws::Frame::Text(t))) => {
                    Frame::Text(serde_json::from_slice(&t).expect("text frames are JSON"))
                }
                Some(Ok(ws::Frame::Binary(b))) => Frame::Binary(b),
                Some(Ok(ws::Frame::Close(_))) => Frame::Close,
                Some(Ok(ws::Frame::Ping(p))) => {
                    let _ = self.framed.send(ws::Message::Pong(p)).await;
                    continue;
                }
                Some(Ok(_)) => continue,
            };
            let note = match &frame {
                Frame::Text(v) => v.to_string(),
                Frame::Binary(b) => format!("<{} bytes>", b.len()),
                Frame::Close => "<close>".into(),
            };
            self.seen.push(note);
            if self.seen.len() > 50 {
                self.seen.remove(0);
            }
            return Some(frame);
        }
    }

    /// When the next ping arrives, within `within`, skipping every other frame and answering
    /// nothing, as a client that stopped answering would. `None` on timeout or close.
    pub async fn next_ping_unanswered(&mut self, within: Duration) -> Option<Instant> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.framed.next())
                .await
                .ok()?
            {
                Some(Ok(ws::Frame::Ping(_))) => return Some(Instant::now()),
                Some(Ok(ws::Frame::Close(_))) | None => return None,
                Some(Ok(_)) => continue,
                Some(Err(e)) => panic!("ws protocol error: {e}; seen: {:?}", self.seen),
            }
        }
    }

    /// Reads without answering pings until the daemon closes the socket: `true` once it has,
    /// `false` if it is still open after `within`.
    pub async fn closed_unanswered_within(&mut self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.framed.next()).await {
                Err(_) => return false,
                Ok(Some(Ok(ws::Frame::Close(_))) | None | Some(Err(_))) => return true,
                Ok(Some(Ok(_))) => continue,
            }
        }
    }

    /// The next frame, within [`WITHIN`].
    pub async fn next(&mut self) -> Frame {
        match self.next_within(WITHIN).await {
            Some(f) => f,
            None => panic!("no frame within {WITHIN:?}; seen: {:?}", self.seen),
        }
    }

    /// The next text frame of `kind`, skipping binary and other text frames.
    pub async fn next_text(&mut self, kind: &str) -> Value {
        loop {
            match self.next().await {
                Frame::Text(v) if v["type"] == kind => return v,
                Frame::Close => panic!("closed while waiting for {kind}; seen: {:?}", self.seen),
                _ => {}
            }
        }
    }

    /// Reads exactly `n` bytes of binary frames (text frames in between are an error).
    pub async fn read_exact(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            match self.next().await {
                Frame::Binary(b) => out.extend_from_slice(&b),
                other => panic!("expected {n} bytes, got {other:?} after {}", out.len()),
            }
        }
        assert_eq!(out.len(), n, "read past the expected byte count");
        out
    }

    /// Reads whole binary frames until at least `n` bytes arrived; returns them all.
    pub async fn read_at_least(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            match self.next().await {
                Frame::Binary(b) => out.extend_from_slice(&b),
                Frame::Text(_) => {}
                Frame::Close => panic!("closed after {} of {n} bytes", out.len()),
            }
        }
        out
    }

    /// Reads binary frames until the accumulated bytes contain `needle`; returns them all.
    pub async fn read_until(&mut self, needle: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            // Only the new bytes (and a needle's length before them) can complete a match.
            let scan_from = out.len().saturating_sub(needle.len());
            match self.next().await {
                Frame::Binary(b) => out.extend_from_slice(&b),
                Frame::Text(_) => {}
                Frame::Close => panic!(
                    "closed before {:?}; got {:?}",
                    String::from_utf8_lossy(needle),
                    String::from_utf8_lossy(&out)
                ),
            }
            if out[scan_from..].windows(needle.len()).any(|w| w == needle) {
                return out;
            }
        }
    }

    /// Sends input bytes.
    pub async fn send_binary(&mut self, bytes: &[u8]) {
        self.framed
            .send(ws::Message::Binary(Bytes::copy_from_slice(bytes)))
            .await
            .expect("send binary");
    }

    /// Sends a JSON text frame.
    pub async fn send_json(&mut self, v: Value) {
        self.send_text(&v.to_string()).await;
    }

    /// Sends a text frame as written (JSON a `Value` cannot hold, such as a key given twice).
    pub async fn send_text(&mut self, text: &str) {
        self.framed
            .send(ws::Message::Text(text.to_string().into()))
            .await
            .expect("send text");
    }

    /// Closes the socket.
    pub async fn close(mut self) {
        let _ = self.framed.send(ws::Message::Close(None)).await;
    }
}

/// api.md: `attached` is the first frame on an attach socket, whatever happens meanwhile.
/// Opens `n` sockets on `id` one after another with `query(i)`, each after `before_each(i)`
/// and a resize from `other` (attached already), so state and size changes race each attach;
/// fails naming the frame that came first. Returns each socket's `attached` frame.
pub async fn assert_attached_comes_first(
    d: &TestDaemon,
    id: &str,
    other: &mut Ws,
    n: usize,
    query: impl Fn(usize) -> String,
    mut before_each: impl FnMut(usize),
) -> Vec<Value> {
    let mut frames = Vec::with_capacity(n);
    for i in 0..n {
        before_each(i);
        let cols = if i % 2 == 0 { 60 } else { 90 };
        other
            .send_json(serde_json::json!({"type": "resize", "cols": cols, "rows": 24}))
            .await;
        let q = query(i);
        let mut ws = d.ws(&format!("/v1/sessions/{id}/attach?{q}")).await;
        match ws.next().await {
            Frame::Text(v) if v["type"] == "attached" => frames.push(v),
            first => panic!(
                "attach {i} ({q}): the first frame is {first:?}, not attached; seen {:?}",
                ws.seen
            ),
        }
        ws.close().await;
    }
    frames
}

/// A descriptor's id as a string.
pub fn id_of(d: &Value) -> String {
    d["id"].as_str().expect("descriptor has an id").to_string()
}

impl TestDaemon {
    /// A client of a daemon that runs elsewhere (the `atc` binary as a child process): no
    /// handle, so `stop` does nothing; the test ends that daemon itself.
    pub fn connect(url: &str, token: &str, state_dir: &Path) -> TestDaemon {
        TestDaemon {
            handle: None,
            url: url.trim_end_matches('/').to_string(),
            token: token.trim().to_string(),
            state_dir: state_dir.to_path_buf(),
            _tmp: None,
            http: http_client(),
        }
    }
}

/// The pooled HTTP client a [`TestDaemon`] calls through. awc keeps an idle connection 15 s
/// by default, past the daemon's keep-alive; a request written on one as the daemon closed it
/// fails with "connector has been disconnected" (a CI run lost a test to this after a long
/// transfer left the pool idle). Letting go first, like `atc-client`, closes that window.
pub fn http_client() -> awc::Client {
    let idle = atc_protocol::HTTP_KEEP_ALIVE - Duration::from_secs(1);
    awc::Client::builder()
        .connector(awc::Connector::new().conn_keep_alive(idle))
        .timeout(Duration::from_secs(30))
        .finish()
}

/// Opens a WebSocket at a full `ws://` URL with an optional bearer token and Origin, returning
/// the HTTP refusal on failure.
pub async fn ws_at(
    url: &str,
    bearer: Option<&str>,
    origin: Option<&str>,
) -> Result<Ws, (u16, String)> {
    let mut req = awc::Client::builder()
        .timeout(Duration::from_secs(30))
        .max_http_version(awc::http::Version::HTTP_11)
        .finish()
        .ws(url)
        .max_frame_size(16 * 1024 * 1024);
    if let Some(t) = bearer {
        req = req.bearer_auth(t);
    }
    if let Some(o) = origin {
        req = req.origin(o);
    }
    match req.connect().await {
        Ok((_, framed)) => Ok(Ws {
            framed,
            seen: Vec::new(),
        }),
        Err(awc::error::WsClientError::InvalidResponseStatus(s)) => {
            Err((s.as_u16(), String::new()))
        }
        Err(e) => Err((0, e.to_string())),
    }
}

/// Waits until a daemon started as a child process (`env!("CARGO_BIN_EXE_atc") daemon`) has
/// written `<state_dir>/daemon.json` naming its own pid, and answers what the file says.
/// Panics with the child's log (written to `log`) if it exits first or takes over [`WITHIN`].
pub async fn wait_for_child_daemon(
    child: &mut std::process::Child,
    state_dir: &Path,
    log: &Path,
) -> atc::daemon::state_dir::DaemonInfo {
    let log_text = || std::fs::read_to_string(log).unwrap_or_default();
    let deadline = Instant::now() + WITHIN;
    loop {
        let info = atc::daemon::state_dir::read_info(state_dir).filter(|i| i.pid == child.id());
        if let Some(info) = info {
            return info;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "the daemon exited with {status} before writing daemon.json; log:\n{}",
                log_text()
            );
        }
        if Instant::now() > deadline {
            panic!("no daemon.json within {WITHIN:?}; log:\n{}", log_text());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Three clients attach to `id`, a shell, while `numbers` (a command line printing 1, 2, 3, …
/// one a line, far more than the test reads) pours out, and each reads on live from its
/// repaint: no line may show twice or be skipped between the repaint and the bytes after it.
/// The daemon's queues must be large enough that no reader falls behind.
pub async fn attaches_during_heavy_output_continue_exactly(
    d: &TestDaemon,
    id: &str,
    numbers: &str,
) {
    let (mut driver, _, _) = d.attach(id, "cols=80&rows=24").await;
    driver.send_binary(format!("{numbers}\r").as_bytes()).await;
    let mut observers = Vec::new();
    for mark in [20_000, 120_000, 300_000] {
        driver.read_until(format!("\n{mark}\r\n").as_bytes()).await;
        let (mut ws, attached, prelude) = d.attach(id, "cols=80&rows=24").await;
        assert_eq!(attached["replay"], "screen");
        let screen = repainted_text_to_cursor(&prelude, 80, 24);
        // The screen model may run behind what the driver has read (by up to its mailbox), so
        // the repaint can show earlier lines than `mark`, even none of the numbers yet.
        let first: u64 = screen
            .lines()
            .find_map(|l| l.trim().parse().ok())
            .unwrap_or(1);
        // Read on live until 50,000 lines past the repaint's first.
        let until = first + 50_000;
        observers.push(actix_rt::spawn(async move {
            let live = ws.read_until(format!("\n{until}\r\n").as_bytes()).await;
            (screen, live, until, ws.seen)
        }));
    }
    for observer in observers {
        let (screen, live, until, seen) = observer.await.unwrap();
        assert!(
            !seen.iter().any(|f| f.contains("desync")),
            "the test's reader fell behind: {seen:?}"
        );
        let text = screen + &String::from_utf8_lossy(&live).replace('\r', "");
        let numbers: Vec<u64> = text
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .take_while(|n| *n <= until)
            .collect();
        for pair in numbers.windows(2) {
            assert_eq!(
                pair[1],
                pair[0] + 1,
                "a line shown twice or skipped between the repaint and the live bytes"
            );
        }
        assert_eq!(numbers.last(), Some(&until));
    }
}

/// What a client that attached mid-stream has on its screen, as text: the repaint's rows down
/// to the cursor's. The cursor's row is kept whole: the snapshot may fall between a line's CR
/// and its LF, with the cursor back at column 0 of a row that still shows the line.
fn repainted_text_to_cursor(prelude: &[u8], cols: u16, rows: u16) -> String {
    let (lines, cursor_row) = rendered_rows(prelude, cols, rows);
    lines[..=cursor_row].join("\n")
}

/// A `cols`×`rows` terminal (vt100, no scrollback) after `bytes`: what a client would show.
pub fn terminal_after(bytes: &[u8], cols: u16, rows: u16) -> vt100::Parser {
    let size = |n| std::num::NonZeroU16::new(n).expect("a terminal size above zero");
    let mut parser = vt100::Parser::new(size(rows), size(cols), 0);
    parser.process(bytes);
    parser
}

/// `bytes` rendered on a fresh vt100 screen of `cols`×`rows`: its rows as text, each with its
/// trailing blanks trimmed, and the cursor's row.
pub fn rendered_rows(bytes: &[u8], cols: u16, rows: u16) -> (Vec<String>, usize) {
    let p = terminal_after(bytes, cols, rows);
    let screen = p.screen();
    let lines = screen
        .rows(0, cols)
        .map(|r| r.trim_end().to_string())
        .collect();
    (lines, usize::from(screen.cursor_position().0))
}
