//! The real daemon started in-process on `127.0.0.1:0` with a fresh state dir and short
//! timings ([`TestDaemon`]), or a client of one that runs elsewhere ([`TestDaemon::connect`]),
//! and the calls tests make of its API. Every wait has a deadline; nothing sleeps hoping a
//! state arrived.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use atc::config::Config;
use atc::daemon::{Daemon, DaemonHandle, DaemonOptions, ExtraProviders};
use atc_protocol::responses::{DaemonInfo, SessionEnvelope};
use atc_protocol::{AttachFrame, Descriptor};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::atc_binary::atc_bin;
use crate::config::test_config;
use crate::screen::terminal_after;
use crate::wait::{poll_every, poll_ok, WITHIN};
use crate::ws::{ws_at, Ws};

/// Who a test request acts as: a bearer token (the owner's or a principal's), and the
/// principal it names in `X-Atc-As`, if any.
#[derive(Debug, Clone, Copy)]
pub struct Acting<'a> {
    /// The bearer token.
    pub token: &'a str,
    /// The `X-Atc-As` header.
    pub act_as: Option<&'a str>,
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
    /// Set when the daemon serves HTTPS: what its clients trust.
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
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

    /// A daemon serving HTTPS with `cert` (`--tls-cert`/`--tls-key`); its `url` is
    /// `https://`, and its calls and sockets go through clients that trust `cert`'s CA.
    pub async fn start_tls(dir: &Path, config: Config, cert: &crate::tls::TestCert) -> TestDaemon {
        TestDaemon::try_start_inner(
            dir,
            config,
            ExtraProviders::default(),
            atc_bin(),
            Some(cert),
        )
        .await
        .unwrap_or_else(|e| panic!("daemon failed to start: {e}"))
    }

    async fn try_start_with(
        dir: &Path,
        config: Config,
        extra: ExtraProviders,
    ) -> Result<TestDaemon, atc::daemon::StartError> {
        TestDaemon::try_start_full(dir, config, extra, atc_bin()).await
    }

    async fn try_start_full(
        dir: &Path,
        config: Config,
        extra: ExtraProviders,
        atc_program: PathBuf,
    ) -> Result<TestDaemon, atc::daemon::StartError> {
        TestDaemon::try_start_inner(dir, config, extra, atc_program, None).await
    }

    async fn try_start_inner(
        dir: &Path,
        config: Config,
        extra: ExtraProviders,
        atc_program: PathBuf,
        cert: Option<&crate::tls::TestCert>,
    ) -> Result<TestDaemon, atc::daemon::StartError> {
        let options = DaemonOptions {
            tls: cert.map(crate::tls::TestCert::files),
            atc_program: Some(atc_program),
            ..loopback_options(dir, config)
        };
        let handle = Daemon::start_with_providers(options, extra).await?;
        let tls = cert.map(crate::tls::TestCert::client_config);
        Ok(TestDaemon {
            url: format!(
                "{}://{}",
                if tls.is_some() { "https" } else { "http" },
                handle.addr
            ),
            token: handle.token.clone(),
            state_dir: dir.to_path_buf(),
            handle: Some(handle),
            _tmp: None,
            http: match &tls {
                Some(tls) => crate::tls::client_trusting(tls, pool_idle()),
                None => http_client(),
            },
            tls,
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
        self.call_headers(method, path, body, token, &[]).await
    }

    /// A request acting as `who`: its token, and its `X-Atc-As` if any.
    pub async fn call_acting(
        &self,
        who: Acting<'_>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let headers: Vec<(&str, &str)> = who
            .act_as
            .map(|a| (atc_protocol::ACT_AS_HEADER, a))
            .into_iter()
            .collect();
        self.call_headers(method, path, body, Some(who.token), &headers)
            .await
    }

    /// Opens a WebSocket acting as `who`, returning the HTTP refusal on failure.
    pub async fn try_ws_acting(
        &self,
        who: Acting<'_>,
        path_and_query: &str,
    ) -> Result<Ws, (u16, String)> {
        let url = format!("{}{}", self.url.replace("http://", "ws://"), path_and_query);
        let headers: Vec<(&str, &str)> = who
            .act_as
            .map(|a| (atc_protocol::ACT_AS_HEADER, a))
            .into_iter()
            .collect();
        crate::ws::ws_at_with(&url, Some(who.token), None, &headers).await
    }

    /// The owner's token, acting as itself.
    pub fn owner(&self) -> Acting<'_> {
        Acting {
            token: &self.token,
            act_as: None,
        }
    }

    /// A request with the given token and extra headers.
    pub async fn call_headers(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        token: Option<&str>,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let method = awc::http::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self.http.request(method, format!("{}{}", self.url, path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        for (name, value) in headers {
            req = req.insert_header((*name, *value));
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

    /// `POST /v1/sessions` under an `Idempotency-Key` (and `Idempotency-Replay-Only` when
    /// `replay_only`): the status, whether it was marked replayed, and the body.
    pub async fn keyed_spawn(
        &self,
        key: &str,
        body: &Value,
        replay_only: bool,
    ) -> (u16, bool, Value) {
        let mut req = self
            .http
            .post(format!("{}/v1/sessions", self.url))
            .bearer_auth(&self.token)
            .insert_header(("Idempotency-Key", key));
        if replay_only {
            req = req.insert_header(("Idempotency-Replay-Only", "true"));
        }
        let mut resp = req.send_json(body).await.expect("keyed spawn");
        let replayed = resp
            .headers()
            .get("Idempotent-Replayed")
            .is_some_and(|v| v == "true");
        let bytes = resp.body().await.expect("body");
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (resp.status().as_u16(), replayed, json)
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

    /// A `GET` that must answer 200, read as the protocol type `T`.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> T {
        let (status, json) = self.call("GET", path, None).await;
        assert_eq!(status, 200, "GET {path}: {json}");
        serde_json::from_value(json.clone())
            .unwrap_or_else(|e| panic!("GET {path} is not the protocol's answer ({e}): {json}"))
    }

    /// The current descriptor of a session, typed.
    pub async fn descriptor(&self, id: &str) -> Descriptor {
        self.get::<SessionEnvelope>(&format!("/v1/sessions/{id}"))
            .await
            .session
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
        poll_ok(within, async || {
            let d = self.session(id).await;
            if pred(&d) {
                Ok(d)
            } else {
                Err(d)
            }
        })
        .await
        .unwrap_or_else(|d| panic!("session {id} never became {what}; last descriptor: {d}"))
    }

    /// Waits until session `id` is `done` (its agent's Stop hook) and checks that the fleet row
    /// carries `result` as the turn's result; answers the descriptor and the row.
    pub async fn wait_done_with(&self, id: &str, result: &str, within: Duration) -> (Value, Value) {
        let descriptor = self
            .wait_session_within(id, &format!("done with {result:?}"), within, |s| {
                s["state"] == "done"
            })
            .await;
        let row = self.fleet_row(id).await;
        assert_eq!(row["result"], result, "the turn's result: {row}");
        (descriptor, row)
    }

    /// Session `id`'s row of `GET /v1/fleet` (`Null` when it has none).
    pub async fn fleet_row(&self, id: &str) -> Value {
        let (_, fleet) = self.call("GET", "/v1/fleet", None).await;
        fleet["fleet"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["sessionId"] == id))
            .cloned()
            .unwrap_or(Value::Null)
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
        poll_ok(WITHIN, async || {
            let (_, trail) = self.call("GET", "/v1/events/trail?limit=200", None).await;
            let rows: Vec<Value> = trail["events"]
                .as_array()
                .map(|rows| rows.iter().filter(|r| r["atcId"] == id).cloned().collect())
                .unwrap_or_default();
            if pred(&rows) {
                Ok(rows)
            } else {
                Err(trail)
            }
        })
        .await
        .unwrap_or_else(|trail| panic!("the trail of {id} never showed {what}: {trail}"))
    }

    /// Polls `GET /v1/daemon` until the reporter socket's counts are `(accepted, dropped)`.
    pub async fn wait_reporter(&self, accepted: u64, dropped: u64) {
        let counted = poll_ok(WITHIN, async || {
            let r = self.get::<DaemonInfo>("/v1/daemon").await.reporter;
            if r.accepted == accepted && r.dropped == dropped {
                Ok(())
            } else {
                Err(r)
            }
        })
        .await;
        if let Err(r) = counted {
            panic!("reporter counts never became {accepted}/{dropped}: {r:?}");
        }
    }

    /// Polls the screen until its text contains `needle`.
    pub async fn wait_screen(&self, id: &str, needle: &str) -> Value {
        self.wait_screen_within(id, needle, WITHIN).await
    }

    /// [`Self::wait_screen`] with its own deadline (a real agent starts slower).
    pub async fn wait_screen_within(&self, id: &str, needle: &str, within: Duration) -> Value {
        poll_ok(within, async || {
            let (_, s) = self
                .call("GET", &format!("/v1/sessions/{id}/screen"), None)
                .await;
            if s["text"].as_str().is_some_and(|t| t.contains(needle)) {
                Ok(s)
            } else {
                Err(s)
            }
        })
        .await
        .unwrap_or_else(|s| panic!("screen of {id} never showed {needle:?}; last screen: {s}"))
    }

    /// Waits until the program in session `id` has turned bracketed paste on (DEC 2004), as a
    /// watch-only client's repaint says: from then on a submit reaches an agent as a paste.
    /// Real agents turn it on a moment after they draw their prompt.
    pub async fn wait_paste_mode(&self, id: &str, within: Duration) {
        // Each look is an attach: a slower beat than a plain read's.
        let on = poll_every(Duration::from_millis(50), within, async || {
            let (ws, _, prelude) = self.attach(id, "cols=120&rows=40&mode=watch").await;
            ws.close().await;
            terminal_after(&prelude, 120, 40)
                .screen()
                .bracketed_paste()
                .then_some(())
        })
        .await;
        assert!(on.is_some(), "session {id} never turned bracketed paste on");
    }

    /// Where session `id`'s output stream stands now: its id, and the offset its next byte
    /// will have (offsets go on across revives).
    pub async fn stream_end(&self, id: &str) -> (String, u64) {
        let (ws, attached, _) = self.attach(id, "cols=120&rows=40&mode=watch").await;
        ws.close().await;
        match serde_json::from_value(attached) {
            Ok(AttachFrame::Attached { stream, offset, .. }) => (stream, offset),
            other => panic!("not an attached frame: {other:?}"),
        }
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
        let base = match self.url.strip_prefix("https://") {
            Some(rest) => format!("wss://{rest}"),
            None => self.url.replace("http://", "ws://"),
        };
        let url = format!("{base}{path_and_query}");
        match &self.tls {
            Some(tls) => {
                let client = crate::tls::client_trusting(tls, pool_idle());
                crate::ws::ws_through(&client, &url, Some(&self.token), origin, &[]).await
            }
            None => ws_at(&url, Some(&self.token), origin).await,
        }
    }

    /// Attaches to a session and reads the `attached` frame and its prelude.
    pub async fn attach(&self, id: &str, query: &str) -> (Ws, Value, Vec<u8>) {
        let mut ws = self.ws(&format!("/v1/sessions/{id}/attach?{query}")).await;
        let attached = ws.next_text("attached").await;
        let prelude_len = match serde_json::from_value(attached.clone()) {
            Ok(AttachFrame::Attached { prelude, .. }) => prelude,
            other => panic!("not an attached frame: {other:?}"),
        };
        let prelude = ws.read_exact(prelude_len).await;
        (ws, attached, prelude)
    }
}

/// Options for a daemon on `dir` serving `config` in plain HTTP on a loopback port of its
/// own, with one worker, no atc program to run in sessions and Codex's files under `dir`;
/// a test changes the fields it is about.
pub fn loopback_options(dir: &Path, config: Config) -> DaemonOptions {
    DaemonOptions {
        state_dir: dir.to_path_buf(),
        config,
        listen: None,
        listener: Some(TcpListener::bind("127.0.0.1:0").expect("bind port 0")),
        allow_remote: false,
        insecure_plaintext: false,
        tls: None,
        workers: 1,
        runtime_dir: Some(dir.to_path_buf()),
        atc_program: None,
        // Never the developer's own Codex files.
        codex_home: Some(dir.join("codex-home")),
        metrics_listen: None,
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        // A test that panicked before stop(): the daemon dies with the test's system; its
        // children get SIGHUP when their PTY masters close.
    }
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
            tls: None,
        }
    }
}

/// The pooled HTTP client a [`TestDaemon`] calls through. awc keeps an idle connection 15 s
/// by default, past the daemon's keep-alive; a request written on one as the daemon closed it
/// fails with "connector has been disconnected" (a CI run lost a test to this after a long
/// transfer left the pool idle). Letting go first, like `atc-client`, closes that window.
pub fn http_client() -> awc::Client {
    awc::Client::builder()
        .connector(awc::Connector::new().conn_keep_alive(pool_idle()))
        .timeout(Duration::from_secs(30))
        .finish()
}

/// How long a pooled connection may idle: less than the daemon's keep-alive (see
/// [`http_client`]).
fn pool_idle() -> Duration {
    atc_protocol::HTTP_KEEP_ALIVE - Duration::from_secs(1)
}
