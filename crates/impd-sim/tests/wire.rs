//! The impd simulator itself, tested through its real HTTP and WebSocket on loopback with the
//! raw protocol (no atc code): the envelope, auth, imps, leases, `/exec` sessions and plain
//! execs, continuity, every injectable fault as a client sees it, and `/tunnel`.

use std::time::Duration;

use actix_http::ws;
use awc::BoxedSocket;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use impd_sim::{
    BootEnd, Clock, Features, ImpState, ImpdSim, Scope, SecretKind, SimOptions, When, RING_BYTES,
};
use serde_json::{json, Value};

/// Generous bound for things that should happen quickly; it only bounds failure.
const WITHIN: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------
// A raw impd client: RPC envelope and WebSocket frames with close codes.

/// A simulator with one running imp named `box`.
fn sim_with_box() -> ImpdSim {
    ImpdSim::start(SimOptions {
        imps: vec!["box".into()],
        ..SimOptions::default()
    })
}

fn http() -> awc::Client {
    awc::Client::builder()
        .timeout(Duration::from_secs(30))
        .finish()
}

/// POSTs a raw body to `/rpc/<group>/<proc>` with `token`; returns status and body (JSON, or
/// a JSON string holding a non-JSON body).
async fn post(
    sim: &ImpdSim,
    procedure: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> (u16, Value) {
    let path = procedure.replace('.', "/");
    let mut req = http().post(format!("{}/rpc/{path}", sim.url()));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let mut resp = match body {
        Some(b) => {
            req.insert_header(("Content-Type", "application/json"))
                .send_body(b.to_string())
                .await
        }
        None => req.send().await,
    }
    .unwrap_or_else(|e| panic!("{procedure} failed: {e}"));
    let status = resp.status().as_u16();
    let bytes = resp.body().await.expect("body");
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, v)
}

/// Calls a procedure with `{"json": input}` as root.
async fn rpc(sim: &ImpdSim, procedure: &str, input: Value) -> (u16, Value) {
    rpc_as(sim, sim.token(), procedure, input).await
}

async fn rpc_as(sim: &ImpdSim, token: &str, procedure: &str, input: Value) -> (u16, Value) {
    let body = json!({ "json": input }).to_string();
    post(sim, procedure, Some(&body), Some(token)).await
}

/// A call that must succeed; returns the output.
async fn ok(sim: &ImpdSim, procedure: &str, input: Value) -> Value {
    let (status, body) = rpc(sim, procedure, input).await;
    assert_eq!(status, 200, "{procedure}: {body}");
    body["json"].clone()
}

/// A call that must fail with `code`; returns the error object.
async fn fails(sim: &ImpdSim, procedure: &str, input: Value, status: u16, code: &str) -> Value {
    let (got, body) = rpc(sim, procedure, input).await;
    assert_eq!(got, status, "{procedure}: {body}");
    assert_eq!(body["json"]["code"], code, "{procedure}: {body}");
    assert_eq!(body["json"]["status"], status, "{procedure}: {body}");
    assert_eq!(body["json"]["defined"], true);
    body["json"].clone()
}

/// What a socket received.
#[derive(Debug)]
enum In {
    Text(Value),
    /// A text message that is not JSON.
    Raw(String),
    Data(u8, Bytes),
    /// Close frame code (None: no code, or the connection just ended).
    Closed(Option<u16>),
}

struct Sock {
    framed: actix_codec::Framed<BoxedSocket, ws::Codec>,
    seen: Vec<String>,
}

/// Opens a socket at `path` with a bearer token; `Err(status)` if the upgrade was refused
/// (0: no HTTP answer).
async fn connect(sim: &ImpdSim, path: &str, token: Option<&str>) -> Result<Sock, u16> {
    let mut req = awc::Client::builder()
        .timeout(Duration::from_secs(30))
        .max_http_version(awc::http::Version::HTTP_11)
        .finish()
        .ws(sim.ws_url(path))
        .max_frame_size(16 * 1024 * 1024);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    match req.connect().await {
        Ok((_, framed)) => Ok(Sock {
            framed,
            seen: Vec::new(),
        }),
        Err(awc::error::WsClientError::InvalidResponseStatus(s)) => Err(s.as_u16()),
        Err(_) => Err(0),
    }
}

async fn exec(sim: &ImpdSim) -> Sock {
    connect(sim, "/exec", Some(sim.token()))
        .await
        .unwrap_or_else(|s| panic!("/exec refused with {s}"))
}

impl Sock {
    async fn next_within(&mut self, within: Duration) -> Option<In> {
        loop {
            let item = tokio::time::timeout(within, self.framed.next())
                .await
                .ok()?;
            let got = match item {
                None | Some(Err(_)) => In::Closed(None),
                Some(Ok(ws::Frame::Text(t))) => match serde_json::from_slice(&t) {
                    Ok(v) => In::Text(v),
                    Err(_) => In::Raw(String::from_utf8_lossy(&t).into()),
                },
                Some(Ok(ws::Frame::Binary(b))) => match b.first() {
                    Some(&ch) => In::Data(ch, b.slice(1..)),
                    None => In::Data(255, b),
                },
                Some(Ok(ws::Frame::Close(r))) => In::Closed(r.map(|r| u16::from(r.code))),
                Some(Ok(ws::Frame::Ping(p))) => {
                    let _ = self.framed.send(ws::Message::Pong(p)).await;
                    continue;
                }
                Some(Ok(_)) => continue,
            };
            self.seen.push(match &got {
                In::Data(ch, b) => format!("<ch{ch} {} bytes>", b.len()),
                other => format!("{other:?}"),
            });
            return Some(got);
        }
    }

    async fn next(&mut self) -> In {
        match self.next_within(WITHIN).await {
            Some(i) => i,
            None => panic!("nothing within {WITHIN:?}; seen: {:?}", self.seen),
        }
    }

    /// The next message must be a JSON text of `kind`.
    async fn expect(&mut self, kind: &str) -> Value {
        match self.next().await {
            In::Text(v) if v["type"] == kind => v,
            other => panic!("expected {kind}, got {other:?}; seen: {:?}", self.seen),
        }
    }

    /// Collects channel-1/2 data until a JSON text arrives; returns (stdout, stderr, text).
    async fn data_then(&mut self, kind: &str) -> (Vec<u8>, Vec<u8>, Value) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        loop {
            match self.next().await {
                In::Data(1, b) => out.extend_from_slice(&b),
                In::Data(2, b) => err.extend_from_slice(&b),
                In::Text(v) if v["type"] == kind => return (out, err, v),
                other => panic!(
                    "expected data then {kind}, got {other:?}; seen: {:?}",
                    self.seen
                ),
            }
        }
    }

    /// Reads channel-1 data until it contains `needle`.
    async fn data_until(&mut self, needle: &str) -> Vec<u8> {
        let mut out = Vec::new();
        while !String::from_utf8_lossy(&out).contains(needle) {
            match self.next().await {
                In::Data(1, b) => out.extend_from_slice(&b),
                other => panic!(
                    "waiting for {needle:?} got {other:?} after {:?}",
                    String::from_utf8_lossy(&out)
                ),
            }
        }
        out
    }

    /// Reads exactly `n` bytes of channel-1 data.
    async fn data_exact(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        while out.len() < n {
            match self.next().await {
                In::Data(1, b) => out.extend_from_slice(&b),
                other => panic!("expected {n} bytes, got {other:?} after {}", out.len()),
            }
        }
        assert_eq!(out.len(), n, "more bytes than expected");
        out
    }

    /// The next message must be a close with `code`.
    async fn closed_with(&mut self, code: u16) {
        match self.next().await {
            In::Closed(c) => assert_eq!(c, Some(code), "seen: {:?}", self.seen),
            other => panic!(
                "expected close {code}, got {other:?}; seen: {:?}",
                self.seen
            ),
        }
    }

    /// An `error` with `code` (None: no code) and then close 1011; returns the error.
    async fn refused(&mut self, code: Option<&str>) -> Value {
        let e = self.expect("error").await;
        match code {
            Some(c) => assert_eq!(e["code"], c, "{e}"),
            None => assert!(e.get("code").is_none(), "{e}"),
        }
        self.closed_with(1011).await;
        e
    }

    async fn send(&mut self, v: Value) {
        self.framed
            .send(ws::Message::Text(v.to_string().into()))
            .await
            .expect("send text");
    }

    async fn send_raw_binary(&mut self, b: Vec<u8>) {
        self.framed
            .send(ws::Message::Binary(b.into()))
            .await
            .expect("send binary");
    }

    async fn stdin(&mut self, data: &[u8]) {
        let mut b = vec![0u8];
        b.extend_from_slice(data);
        self.send_raw_binary(b).await;
    }

    async fn close(mut self) {
        let _ = self.framed.send(ws::Message::Close(None)).await;
    }
}

/// A `start` of a named session running `script` under `sh -c`.
fn start_session(session: &str, script: &str) -> Value {
    json!({"type": "start", "name": "box", "session": session, "argv": ["sh", "-c", script],
           "tty": true, "cols": 80, "rows": 24})
}

fn attach(session: &str, resume: Option<(&str, u64)>) -> Value {
    let mut m = json!({"type": "attach", "name": "box", "session": session, "wake": false,
                       "cols": 80, "rows": 24});
    if let Some((g, o)) = resume {
        m["resumeFrom"] = json!({"executionGeneration": g, "offset": o});
    }
    m
}

/// Starts a session and reads its `started`.
async fn open_session(sim: &ImpdSim, session: &str, script: &str) -> (Sock, Value) {
    let mut ws = exec(sim).await;
    ws.send(start_session(session, script)).await;
    let started = ws.expect("started").await;
    (ws, started)
}

fn generation(started: &Value) -> String {
    started["output"]["executionGeneration"]
        .as_str()
        .expect("started.output.executionGeneration")
        .to_string()
}

/// The state letter of a process in /proc (R, S, T = stopped, Z, …), None once it is gone.
fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.trim().chars().next()
}

/// True when every process of the group led by `pgid` is stopped. A shell that vforked a
/// child that got stopped before its exec waits in state D; that counts as frozen too, as long
/// as something in the group is stopped.
fn group_frozen(pgid: i32) -> bool {
    let mut states = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(rest) = stat.rsplit(')').next() else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid) {
            states.push(fields[0].chars().next().unwrap_or('?'));
        }
    }
    states.contains(&'T') && states.iter().all(|s| matches!(s, 'T' | 'D'))
}

// ---------------------------------------------------------------------------------------
// Transport, auth and envelope.

#[actix_rt::test]
async fn health_needs_no_token() {
    let sim = ImpdSim::start(SimOptions::default());
    let mut r = http()
        .get(format!("{}/health", sim.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body, json!({"status": "ok", "ready": true}));
}

#[actix_rt::test]
async fn rpc_with_a_missing_or_wrong_token_is_a_bare_401() {
    let sim = ImpdSim::start(SimOptions::default());
    for token in [None, Some("wrong")] {
        let (status, body) = post(&sim, "system.info", None, token).await;
        assert_eq!(status, 401);
        assert_eq!(body, json!({"error": "unauthorized"}));
    }
    assert_eq!(
        std::fs::read_to_string(sim.token_file()).unwrap().trim(),
        sim.token()
    );
}

#[actix_rt::test]
async fn upgrades_without_a_valid_token_are_refused_with_401() {
    let sim = ImpdSim::start(SimOptions::default());
    for path in ["/exec", "/tunnel"] {
        assert_eq!(connect(&sim, path, None).await.err(), Some(401));
        assert_eq!(connect(&sim, path, Some("nope")).await.err(), Some(401));
    }
    // The token is never accepted in the URL.
    let url = format!("/exec?token={}", sim.token());
    assert_eq!(connect(&sim, &url, None).await.err(), Some(401));
    assert_eq!(sim.stats().exec_connections, 0);
}

#[actix_rt::test]
async fn envelope_accepts_every_form_of_no_input_and_refuses_get_and_unknown_paths() {
    let sim = ImpdSim::start(SimOptions::default());
    for body in [
        None,
        Some(""),
        Some("{}"),
        Some(r#"{"json":null}"#),
        Some(r#"{"json":null,"meta":[]}"#),
    ] {
        let (status, v) = post(&sim, "system.info", body, Some(sim.token())).await;
        assert_eq!(status, 200, "{body:?}: {v}");
        assert_eq!(v["json"]["version"], "0.30.1");
    }
    let mut r = http()
        .get(format!("{}/rpc/system/info", sim.url()))
        .bearer_auth(sim.token())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    let _ = r.body().await;
    let (status, body) = post(&sim, "nothing.here", Some("{}"), Some(sim.token())).await;
    assert_eq!((status, body), (404, json!("not found")));
    let (status, body) = post(&sim, "imps.get", Some("{not json"), Some(sim.token())).await;
    assert_eq!(status, 400);
    assert_eq!(body["json"]["code"], "BAD_REQUEST");
}

#[actix_rt::test]
async fn system_info_lists_features_and_whoami_names_the_caller() {
    let sim = ImpdSim::start(SimOptions::default());
    let info = ok(&sim, "system.info", Value::Null).await;
    for flag in [
        "sessionOffsets",
        "leases",
        "execRequire",
        "grantableTokens",
        "secretRebind",
    ] {
        assert_eq!(info["features"][flag], true, "{flag}: {info}");
    }
    let me = ok(&sim, "tokens.whoami", Value::Null).await;
    assert_eq!(me["scope"], "manage");
    assert_eq!(me["imps"], Value::Null);
}

#[actix_rt::test]
async fn an_impd_without_features_has_no_flags_no_leases_and_no_offsets() {
    let sim = ImpdSim::start(SimOptions {
        features: None,
        imps: vec!["box".into()],
        ..SimOptions::default()
    });
    let info = ok(&sim, "system.info", Value::Null).await;
    assert!(info.get("features").is_none(), "{info}");
    let (status, body) = rpc(
        &sim,
        "leases.acquire",
        json!({"name": "box", "label": "a", "ttlSeconds": 60}),
    )
    .await;
    assert_eq!((status, body), (404, json!("not found")));
    let imp = ok(&sim, "imps.get", json!({"name": "box"})).await;
    assert!(imp.get("leases").is_none(), "{imp}");
    let (ws, started) = open_session(&sim, "s1", "echo hi; sleep 30").await;
    assert!(started.get("output").is_none(), "{started}");
    ws.close().await;
}

#[actix_rt::test]
async fn an_impd_without_leases_answers_404_for_leases_only() {
    let sim = ImpdSim::start(SimOptions {
        features: Some(Features {
            leases: false,
            ..Features::all()
        }),
        imps: vec!["box".into()],
        ..SimOptions::default()
    });
    let (status, _) = rpc(&sim, "leases.list", json!({})).await;
    assert_eq!(status, 404);
    let info = ok(&sim, "system.info", Value::Null).await;
    assert_eq!(info["features"]["leases"], false);
    assert_eq!(info["features"]["sessionOffsets"], true);
}

// ---------------------------------------------------------------------------------------
// Imps.

#[actix_rt::test]
async fn imps_follow_the_lifecycle_table() {
    let sim = ImpdSim::start(SimOptions::default());
    let (status, body) = rpc(
        &sim,
        "imps.create",
        json!({"name": "box", "memoryMib": 512}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let imp = &body["json"];
    assert_eq!(imp["state"], "running");
    assert_eq!(imp["memoryMib"], 512);
    assert!(
        body["meta"]
            .as_array()
            .unwrap()
            .contains(&json!([1, "createdAt"])),
        "{body}"
    );
    let id = imp["id"].as_str().unwrap().to_string();
    let first_boot = sim.imp("box").unwrap().boot_id.unwrap();
    assert_eq!(sim.imp("box").unwrap().cold_boots[0].cause, "start");

    let conflict = fails(&sim, "imps.create", json!({"name": "box"}), 409, "CONFLICT").await;
    assert_eq!(conflict["data"], json!({"kind": "imp", "name": "box"}));
    let missing = fails(&sim, "imps.get", json!({"name": "nope"}), 404, "NOT_FOUND").await;
    assert_eq!(missing["data"], json!({"kind": "imp", "name": "nope"}));
    fails(
        &sim,
        "imps.create",
        json!({"name": "Bad_Name"}),
        400,
        "BAD_REQUEST",
    )
    .await;

    assert_eq!(
        ok(&sim, "imps.sleep", json!({"name": "box"})).await["state"],
        "sleeping"
    );
    assert_eq!(
        ok(&sim, "imps.sleep", json!({"name": "box"})).await["state"],
        "sleeping"
    );
    assert_eq!(
        ok(&sim, "imps.wake", json!({"name": "box"})).await["state"],
        "running"
    );
    assert_eq!(
        sim.imp("box").unwrap().boot_id.unwrap(),
        first_boot,
        "a memory wake keeps the boot"
    );
    assert_eq!(
        ok(&sim, "imps.stop", json!({"name": "box"})).await["state"],
        "stopped"
    );
    let bad = fails(
        &sim,
        "imps.sleep",
        json!({"name": "box"}),
        409,
        "INVALID_STATE",
    )
    .await;
    assert_eq!(bad["data"]["state"], "stopped");
    assert_eq!(bad["data"]["allowed"], json!(["running"]));
    assert_eq!(
        ok(&sim, "imps.start", json!({"name": "box"})).await["state"],
        "running"
    );
    let view = sim.imp("box").unwrap();
    assert_ne!(
        view.boot_id.unwrap(),
        first_boot,
        "a start after stop is a cold boot"
    );
    assert_eq!(view.cold_boots.len(), 2);
    assert_eq!(view.id, id);

    let listed = ok(&sim, "imps.list", Value::Null).await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(
        ok(&sim, "imps.destroy", json!({"name": "box"})).await,
        json!({})
    );
    fails(&sim, "imps.get", json!({"name": "box"}), 404, "NOT_FOUND").await;
    // A new imp under the reused name is a new incarnation.
    let again = ok(&sim, "imps.create", json!({"name": "box"})).await;
    assert_ne!(again["id"], json!(id));
}

#[actix_rt::test]
async fn the_ram_budget_refuses_boots_and_wakes_and_a_refused_create_leaves_nothing() {
    let sim = ImpdSim::start(SimOptions {
        ram_budget_mib: Some(1500),
        imps: vec!["box".into()],
        ..SimOptions::default()
    });
    let e = fails(
        &sim,
        "imps.create",
        json!({"name": "two"}),
        503,
        "RAM_BUDGET_EXCEEDED",
    )
    .await;
    assert_eq!(e["data"]["budgetMib"], 1500);
    assert_eq!(e["data"]["usedMib"], 1024);
    assert_eq!(e["data"]["requestedMib"], 1024);
    fails(&sim, "imps.get", json!({"name": "two"}), 404, "NOT_FOUND").await;
    ok(&sim, "imps.sleep", json!({"name": "box"})).await;
    ok(&sim, "imps.create", json!({"name": "two"})).await;
    fails(
        &sim,
        "imps.wake",
        json!({"name": "box"}),
        503,
        "RAM_BUDGET_EXCEEDED",
    )
    .await;
    // An acquire that would need the wake writes no lease.
    fails(
        &sim,
        "leases.acquire",
        json!({"name": "box", "label": "a", "ttlSeconds": 60}),
        503,
        "RAM_BUDGET_EXCEEDED",
    )
    .await;
    assert!(sim.imp("box").unwrap().leases.is_empty());
    sim.faults().set_ram_budget_mib(None);
    sim.faults().refuse_ram_next(1);
    fails(
        &sim,
        "imps.wake",
        json!({"name": "box"}),
        503,
        "RAM_BUDGET_EXCEEDED",
    )
    .await;
    assert_eq!(
        ok(&sim, "imps.wake", json!({"name": "box"})).await["state"],
        "running"
    );
}

// ---------------------------------------------------------------------------------------
// Leases.

#[actix_rt::test]
async fn leases_extend_never_shorten_and_expire_on_the_clock() {
    let sim = ImpdSim::start(SimOptions {
        clock: Clock::manual(),
        imps: vec!["box".into()],
        ..SimOptions::default()
    });
    let lease = |ttl: i64| json!({"name": "box", "label": "atc-d1", "ttlSeconds": ttl});
    let (status, body) = rpc(&sim, "leases.acquire", lease(600)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["meta"], json!([[1, "until"]]));
    assert_eq!(
        body["json"]["owner"],
        json!({"principal": "root", "display": "root", "label": "atc-d1"})
    );
    let until = body["json"]["until"].clone();
    assert_eq!(
        ok(&sim, "leases.renew", lease(10)).await["until"],
        until,
        "renew never shortens"
    );
    let list = ok(&sim, "imps.get", json!({"name": "box"})).await;
    assert_eq!(list["leases"]["leases"].as_array().unwrap().len(), 1);
    assert_eq!(list["leases"]["otherCount"], 0);

    sim.clock().advance(Duration::from_secs(601));
    fails(&sim, "leases.renew", lease(600), 409, "LEASE_NOT_HELD").await;
    assert_eq!(ok(&sim, "leases.list", json!({})).await, json!([]));

    ok(&sim, "leases.acquire", lease(60)).await;
    assert_eq!(
        ok(
            &sim,
            "leases.release",
            json!({"name": "box", "label": "atc-d1"})
        )
        .await,
        json!({"released": true})
    );
    assert_eq!(
        ok(
            &sim,
            "leases.release",
            json!({"name": "box", "label": "atc-d1"})
        )
        .await,
        json!({"released": false})
    );
    fails(&sim, "leases.renew", lease(60), 409, "LEASE_NOT_HELD").await;
    fails(
        &sim,
        "leases.release",
        json!({"name": "gone", "label": "x"}),
        404,
        "NOT_FOUND",
    )
    .await;
}

#[actix_rt::test]
async fn lease_input_is_validated() {
    let sim = sim_with_box();
    for input in [
        json!({"name": "box", "label": "hold", "ttlSeconds": 60}),
        json!({"name": "box", "label": "has space", "ttlSeconds": 60}),
        json!({"name": "box", "label": "ok", "ttlSeconds": 9}),
        json!({"name": "box", "label": "ok", "ttlSeconds": 3601}),
    ] {
        fails(&sim, "leases.acquire", input, 400, "BAD_REQUEST").await;
    }
}

#[actix_rt::test]
async fn a_leased_imp_refuses_sleep_until_forced_and_callers_see_only_their_leases() {
    let sim = sim_with_box();
    ok(
        &sim,
        "leases.acquire",
        json!({"name": "box", "label": "mine", "ttlSeconds": 600}),
    )
    .await;
    assert!(sim.faults().add_lease(
        "box",
        "token:other",
        "theirs",
        Some(Duration::from_secs(600))
    ));
    let e = fails(&sim, "imps.sleep", json!({"name": "box"}), 409, "LEASED").await;
    assert_eq!(
        e["data"]["leases"].as_array().unwrap().len(),
        2,
        "root sees all: {e}"
    );
    assert_eq!(e["data"]["otherCount"], 0);

    // A patterned exec token sees its own leases only; the rest are counted.
    let limited = sim.faults().add_token(Scope::Exec, Some(vec!["b*".into()]));
    let (status, body) = rpc_as(&sim, &limited, "imps.sleep", json!({"name": "box"})).await;
    assert_eq!(status, 409);
    assert_eq!(body["json"]["data"], json!({"leases": [], "otherCount": 2}));
    let (status, body) = rpc_as(&sim, &limited, "imps.create", json!({"name": "bee"})).await;
    assert_eq!(
        (status, body["json"]["code"].clone()),
        (403, json!("FORBIDDEN"))
    );
    assert_eq!(body["json"]["data"]["reason"], "scope");

    // A hold never blocks a sleep.
    ok(&sim, "imps.hold", json!({"name": "box", "seconds": 60})).await;
    assert_eq!(
        ok(&sim, "imps.sleep", json!({"name": "box", "force": true})).await["state"],
        "sleeping"
    );
    fails(
        &sim,
        "leases.renew",
        json!({"name": "box", "label": "mine", "ttlSeconds": 60}),
        409,
        "LEASE_NOT_HELD",
    )
    .await;
    let left = sim.live_leases("box");
    assert_eq!(left.len(), 1);
    assert!(left[0].hold);
}

// ---------------------------------------------------------------------------------------
// Sessions.

#[actix_rt::test]
async fn a_session_start_streams_output_and_ends_with_exit_and_its_offset() {
    let sim = sim_with_box();
    let (mut ws, started) = open_session(&sim, "s1", "printf hello; exit 3").await;
    assert_eq!(started["created"], true);
    assert_eq!(started["session"], "s1");
    let out = &started["output"];
    assert_eq!(out["continuity"], "offsets");
    assert_eq!(
        (
            out["offset"].clone(),
            out["prelude"].clone(),
            out["bufferStart"].clone()
        ),
        (json!(0), json!(0), json!(0))
    );
    assert_eq!(out["coldBoots"][0]["cause"], "start");
    assert_eq!(
        out["bootId"],
        json!(sim.imp("box").unwrap().boot_id.unwrap())
    );
    let g = generation(&started);
    assert_eq!(g.len(), 32);
    assert!(g
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    let (data, _, exit) = ws.data_then("exit").await;
    assert_eq!(data, b"hello");
    assert_eq!(
        exit,
        json!({"type": "exit", "code": 3, "signal": null, "offset": 5})
    );
    ws.closed_with(1000).await;

    // The exit was collected: the name is free and `previous` remembers the generation.
    let mut again = exec(&sim).await;
    again.send(attach("s1", None)).await;
    let e = again.refused(Some("NO_SESSION")).await;
    assert_eq!(
        e["data"]["previous"],
        json!({"executionGeneration": g, "end": 5, "exitCode": 3})
    );
    assert_eq!(e["data"]["bootId"], out["bootId"]);
}

#[actix_rt::test]
async fn sighup_ends_the_process_with_a_signal_and_resize_reaches_the_pty() {
    let sim = sim_with_box();
    let (mut ws, _) = open_session(
        &sim,
        "s1",
        "trap 'stty size; exit 0' USR1; echo ready; while :; do sleep 0.05; done",
    )
    .await;
    ws.data_until("ready").await;
    ws.send(json!({"type": "resize", "cols": 100, "rows": 30}))
        .await;
    ws.send(json!({"type": "signal", "signal": "SIGNOPE"}))
        .await;
    ws.send(json!({"type": "signal", "signal": "SIGUSR1"}))
        .await;
    let (out, _, exit) = ws.data_then("exit").await;
    assert!(
        String::from_utf8_lossy(&out).contains("30 100"),
        "{:?}",
        String::from_utf8_lossy(&out)
    );
    assert_eq!(exit["code"], 0);

    let (mut ws, _) = open_session(&sim, "s2", "exec cat").await;
    ws.send(json!({"type": "signal", "signal": "SIGHUP"})).await;
    let (_, _, exit) = ws.data_then("exit").await;
    assert_eq!(
        (exit["code"].clone(), exit["signal"].clone()),
        (Value::Null, json!("SIGHUP"))
    );
    ws.closed_with(1000).await;
}

#[actix_rt::test]
async fn stdin_reaches_a_session_and_input_sent_before_started_is_kept() {
    let sim = sim_with_box();
    let mut ws = exec(&sim).await;
    ws.send(start_session("s1", "read line; echo got-$line"))
        .await;
    ws.stdin(b"abc\r").await;
    ws.expect("started").await;
    let (out, _, exit) = ws.data_then("exit").await;
    assert!(
        String::from_utf8_lossy(&out).contains("got-abc"),
        "{:?}",
        String::from_utf8_lossy(&out)
    );
    assert_eq!(exit["code"], 0);
}

#[actix_rt::test]
async fn a_resume_from_an_offset_sends_exactly_the_missing_bytes() {
    let sim = sim_with_box();
    let (mut ws, started) = open_session(
        &sim,
        "s1",
        "for i in 1 2 3 4 5; do echo line$i; done; exec sleep 60",
    )
    .await;
    let g = generation(&started);
    let all = ws.data_until("line5\r\n").await;
    ws.close().await;
    sim.wait_until("the viewer left", |s| {
        s.session("box", "s1").is_some_and(|v| !v.attached)
    })
    .await;

    let mut ws = exec(&sim).await;
    ws.send(attach("s1", Some((&g, 7)))).await;
    let started = ws.expect("started").await;
    assert_eq!(started["created"], false);
    let out = &started["output"];
    assert_eq!(out["resume"], json!({"kind": "exact"}));
    assert_eq!(
        (
            out["offset"].clone(),
            out["end"].clone(),
            out["prelude"].clone()
        ),
        (json!(7), json!(all.len()), json!(0))
    );
    assert_eq!(ws.data_exact(all.len() - 7).await, all[7..].to_vec());
    assert!(
        ws.next_within(Duration::from_millis(300)).await.is_none(),
        "no repeated bytes"
    );

    // With the overlap knob an exact resume repeats bytes (at-least-once) and says so in offset.
    ws.close().await;
    sim.wait_until("the viewer left", |s| {
        s.session("box", "s1").is_some_and(|v| !v.attached)
    })
    .await;
    sim.faults().set_resume_overlap(4);
    let mut ws = exec(&sim).await;
    ws.send(attach("s1", Some((&g, 10)))).await;
    let started = ws.expect("started").await;
    assert_eq!(started["output"]["offset"], 6);
    assert_eq!(ws.data_exact(all.len() - 6).await, all[6..].to_vec());

    // Past the end is a client bug.
    let mut bad = exec(&sim).await;
    bad.send(attach("s1", Some((&g, all.len() as u64 + 1))))
        .await;
    let e = bad.refused(Some("INVALID_RESUME")).await;
    assert_eq!(e["data"], json!({"end": all.len(), "bufferStart": 0}));
}

#[actix_rt::test]
async fn a_resume_whose_offset_left_the_ring_is_a_gap_and_a_fresh_attach_replays_with_a_prelude() {
    let sim = sim_with_box();
    // Bracketed paste on, then 400000 bytes: the ring keeps exactly the last 262144.
    let script = "printf '\\033[?2004h'; head -c 400000 /dev/zero | tr '\\0' x; exec sleep 60";
    let (ws, started) = open_session(&sim, "s1", script).await;
    let g = generation(&started);
    ws.close().await;
    let total = 8 + 400_000u64;
    sim.wait_until("all output arrived", |s| {
        s.session("box", "s1")
            .is_some_and(|v| v.end == total && !v.attached)
    })
    .await;
    let view = sim.session("box", "s1").unwrap();
    assert_eq!(view.buffer_start, total - RING_BYTES as u64);

    let mut ws = exec(&sim).await;
    ws.send(attach("s1", Some((&g, 100)))).await;
    let started = ws.expect("started").await;
    let out = &started["output"];
    assert_eq!(
        out["resume"],
        json!({"kind": "gap", "from": 100, "to": view.buffer_start})
    );
    assert_eq!(out["offset"], view.buffer_start);
    assert_eq!(out["bufferStart"], view.buffer_start);
    let data = ws.data_exact(RING_BYTES).await;
    assert!(data.iter().all(|b| *b == b'x'));
    ws.close().await;
    sim.wait_until("the viewer left", |s| {
        s.session("box", "s1").is_some_and(|v| !v.attached)
    })
    .await;

    // A fresh attach starts at a ground-state boundary and restores the mode first.
    let mut ws = exec(&sim).await;
    ws.send(attach("s1", None)).await;
    let started = ws.expect("started").await;
    let out = &started["output"];
    assert!(out.get("resume").is_none());
    let prelude = out["prelude"].as_u64().unwrap() as usize;
    let offset = out["offset"].as_u64().unwrap();
    assert!(offset >= view.buffer_start);
    assert_eq!(prelude, 8);
    let data = ws.data_exact(prelude + (total - offset) as usize).await;
    assert_eq!(&data[..prelude], b"\x1b[?2004h");
}

#[actix_rt::test]
async fn a_replaced_generation_is_generation_changed_with_previous() {
    let sim = sim_with_box();
    let (mut ws, started) = open_session(&sim, "s1", "echo one; exec sleep 60").await;
    let g1 = generation(&started);
    ws.data_until("one").await;
    assert!(sim.faults().replace_generation("box", "s1"));
    let (_, _, exit) = ws.data_then("exit").await;
    assert_eq!(exit["signal"], "SIGKILL");
    ws.closed_with(1000).await;
    sim.wait_until("the old generation left its name", |s| {
        s.session("box", "s1")
            .is_some_and(|v| v.previous.as_ref().is_some_and(|p| p.generation == g1))
    })
    .await;

    let mut ws = exec(&sim).await;
    ws.send(attach("s1", Some((&g1, 4)))).await;
    let started = ws.expect("started").await;
    let out = &started["output"];
    let g2 = generation(&started);
    assert_ne!(g1, g2);
    assert_eq!(
        out["resume"],
        json!({"kind": "generation_changed", "executionGeneration": g2, "firstOffset": 0})
    );
    assert_eq!(out["previous"]["executionGeneration"], json!(g1));
    assert_eq!(out["previous"]["exitCode"], Value::Null);
    assert_eq!(out["bootId"], started["output"]["coldBoots"][0]["bootId"]);
}

#[actix_rt::test]
async fn an_exit_nobody_collected_waits_for_the_next_attach() {
    let sim = sim_with_box();
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let script = format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; printf abc; exit 4",
        go.display()
    );
    let (ws, started) = open_session(&sim, "s1", &script).await;
    let g = generation(&started);
    ws.close().await;
    sim.wait_until("the viewer left", |s| {
        s.session("box", "s1").is_some_and(|v| !v.attached)
    })
    .await;
    std::fs::write(&go, "").unwrap();
    sim.wait_until("the process exited unseen", |s| {
        s.session("box", "s1").is_some_and(|v| v.exit.is_some())
    })
    .await;
    let end = sim.session("box", "s1").unwrap().end;

    let mut ws = exec(&sim).await;
    ws.send(attach("s1", Some((&g, end - 3)))).await;
    let started = ws.expect("started").await;
    assert_eq!(started["output"]["resume"]["kind"], "exact");
    let (tail, _, exit) = ws.data_then("exit").await;
    assert_eq!(tail, b"abc");
    assert_eq!(
        (exit["code"].clone(), exit["offset"].clone()),
        (json!(4), json!(end))
    );
    ws.closed_with(1000).await;
    assert!(
        sim.session("box", "s1").is_none(),
        "the name is free once the exit was collected"
    );
}

#[actix_rt::test]
async fn a_second_viewer_takes_the_session_over() {
    let sim = sim_with_box();
    let (mut first, started) = open_session(&sim, "s1", "echo hi; exec sleep 60").await;
    first.data_until("hi").await;
    let mut second = exec(&sim).await;
    second.send(start_session("s1", "ignored")).await;
    let joined = second.expect("started").await;
    assert_eq!(joined["created"], false);
    assert_eq!(joined["pid"], started["pid"]);
    let detached = first.expect("detached").await;
    assert_eq!(detached["reason"], "taken_over");
    assert_eq!(detached["offset"], 4);
    first.closed_with(1000).await;
}

#[actix_rt::test]
async fn a_sleep_detaches_viewers_freezes_processes_and_a_wake_continues_the_same_generation() {
    let sim = sim_with_box();
    let (mut ws, started) = open_session(
        &sim,
        "s1",
        "i=0; while :; do i=$((i+1)); echo tick$i; sleep 0.05; done",
    )
    .await;
    let g = generation(&started);
    let pid = started["pid"].as_i64().unwrap() as i32;
    ws.data_until("tick2").await;
    ok(&sim, "imps.sleep", json!({"name": "box"})).await;
    let detached = loop {
        match ws.next().await {
            In::Data(..) => {}
            In::Text(v) if v["type"] == "detached" => break v,
            other => panic!("expected detached, got {other:?}"),
        }
    };
    assert_eq!(detached["reason"], "lost");
    ws.closed_with(1000).await;
    sim.wait_until("the process group is frozen", |_| group_frozen(pid))
        .await;

    let mut ws = exec(&sim).await;
    ws.send(attach("s1", None)).await;
    let e = ws.refused(Some("INVALID_STATE")).await;
    assert_eq!(e["data"]["state"], "sleeping");
    assert_eq!(e["data"]["allowed"], json!(["running"]));
    assert_eq!(e["data"]["coldBoots"].as_array().unwrap().len(), 1);

    ok(&sim, "imps.wake", json!({"name": "box"})).await;
    let end = sim.session("box", "s1").unwrap().end;
    let mut ws = exec(&sim).await;
    ws.send(attach("s1", Some((&g, end)))).await;
    let started = ws.expect("started").await;
    assert_eq!(generation(&started), g);
    assert_eq!(started["output"]["resume"]["kind"], "exact");
    let more = ws.data_until("tick").await;
    assert!(!more.is_empty());
}

#[actix_rt::test]
async fn attach_without_wake_false_boots_a_stopped_imp_and_answers_no_session() {
    let sim = sim_with_box();
    ok(&sim, "imps.stop", json!({"name": "box"})).await;
    let mut ws = exec(&sim).await;
    ws.send(attach("s1", None)).await;
    let e = ws.refused(Some("INVALID_STATE")).await;
    assert_eq!(e["data"]["state"], "stopped");
    let mut ws = exec(&sim).await;
    ws.send(json!({"type": "attach", "name": "box", "session": "s1"}))
        .await;
    let e = ws.refused(Some("NO_SESSION")).await;
    let boot = sim.imp("box").unwrap().boot_id.unwrap();
    assert_eq!(e["data"]["bootId"], json!(boot));
    assert_eq!(e["data"]["coldBoots"][0]["bootId"], json!(boot));
    assert_eq!(e["data"]["coldBoots"].as_array().unwrap().len(), 2);
}

#[actix_rt::test]
async fn a_forced_cold_boot_loses_sessions_and_names_its_cause() {
    let sim = sim_with_box();
    let (mut ws, started) = open_session(&sim, "s1", "echo up; exec sleep 60").await;
    let g = generation(&started);
    let old_boot = started["output"]["bootId"].clone();
    let pid = started["pid"].as_i64().unwrap() as i32;
    ws.data_until("up").await;
    assert!(sim.faults().cold_boot("box", "watchdog", BootEnd::Running));
    assert_eq!(ws.expect("detached").await["reason"], "lost");
    ws.closed_with(1000).await;
    sim.wait_until("the process is gone", |_| {
        !matches!(proc_state(pid), Some('S' | 'R' | 'T'))
    })
    .await;

    let mut ws = exec(&sim).await;
    ws.send(attach("s1", Some((&g, 3)))).await;
    let e = ws.refused(Some("NO_SESSION")).await;
    let boots = e["data"]["coldBoots"].as_array().unwrap().clone();
    assert_eq!(boots[0]["cause"], "watchdog");
    assert_eq!(boots[1]["bootId"], old_boot);
    assert!(
        e["data"].get("previous").is_none(),
        "previous does not survive a cold boot"
    );

    // Ending stopped: the next boot carries the cause.
    assert!(sim.faults().cold_boot("box", "recovery", BootEnd::Stopped));
    assert_eq!(sim.imp("box").unwrap().state, ImpState::Stopped);
    assert_eq!(
        ok(&sim, "imps.get", json!({"name": "box"})).await["coldBootReason"],
        "recovery"
    );
    ok(&sim, "imps.wake", json!({"name": "box"})).await;
    assert_eq!(sim.imp("box").unwrap().cold_boots[0].cause, "recovery");
}

#[actix_rt::test]
async fn schema_violations_are_bad_exec_messages_closed_1011() {
    let sim = sim_with_box();
    let long = "a".repeat(33);
    for msg in [
        json!({"type": "start", "name": "box", "session": long, "argv": ["true"], "tty": true}),
        json!({"type": "start", "name": "box", "session": "s1", "argv": ["true"], "tty": false}),
        json!({"type": "start", "name": "box", "argv": ["true"], "tty": false,
               "resumeFrom": {"executionGeneration": "x", "offset": 0}}),
        json!({"type": "start", "name": "box", "argv": [], "tty": false}),
        json!({"type": "resize", "cols": 80, "rows": 24}),
    ] {
        let mut ws = exec(&sim).await;
        ws.send(msg).await;
        let e = ws.refused(None).await;
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .starts_with("bad exec message"),
            "{e}"
        );
    }
    let mut ws = exec(&sim).await;
    ws.stdin(b"early").await;
    ws.refused(None).await;
    // A second opening message after started.
    let (mut ws, _) = open_session(&sim, "s1", "exec sleep 60").await;
    ws.send(attach("s1", None)).await;
    ws.refused(None).await;
    // An unknown imp.
    let mut ws = exec(&sim).await;
    ws.send(json!({"type": "start", "name": "nope", "argv": ["true"], "tty": false}))
        .await;
    assert_eq!(
        ws.refused(Some("NOT_FOUND")).await["data"],
        json!({"kind": "imp", "name": "nope"})
    );
}

#[actix_rt::test]
async fn an_agent_without_offsets_replays_every_time_and_ignores_resume() {
    let sim = sim_with_box();
    sim.faults().set_agent_offsets(false);
    let (mut ws, started) = open_session(&sim, "s1", "echo abc; exec sleep 60").await;
    assert_eq!(started["output"], json!({"continuity": "none"}));
    ws.data_until("abc\r\n").await;
    ws.close().await;
    sim.wait_until("the viewer left", |s| {
        s.session("box", "s1").is_some_and(|v| !v.attached)
    })
    .await;
    let mut ws = exec(&sim).await;
    ws.send(attach("s1", Some(("0".repeat(32).as_str(), 3))))
        .await;
    let started = ws.expect("started").await;
    assert_eq!(started["output"], json!({"continuity": "none"}));
    assert_eq!(ws.data_exact(5).await, b"abc\r\n");
}

// ---------------------------------------------------------------------------------------
// Requirements.

#[actix_rt::test]
async fn require_broker_is_checked_on_start_and_ignored_by_an_older_impd() {
    let sim = sim_with_box();
    let mut with_require = start_session("s1", "exec sleep 60");
    with_require["require"] = json!(["broker"]);
    let mut ws = exec(&sim).await;
    ws.send(with_require.clone()).await;
    let e = ws.refused(Some("PRECONDITION_FAILED")).await;
    assert_eq!(e["data"]["reason"], "broker_not_ready");
    assert!(sim.session("box", "s1").is_none(), "nothing ran");

    sim.faults()
        .add_secret("gh", SecretKind::Github, &["github.com"]);
    ok(&sim, "grants.add", json!({"name": "box", "secret": "gh"})).await;
    assert_eq!(
        ok(&sim, "grants.list", json!({"name": "box"})).await,
        json!(["gh"])
    );
    let mut bad_env = with_require.clone();
    bad_env["env"] = json!({"HTTPS_PROXY": "http://elsewhere"});
    let mut ws = exec(&sim).await;
    ws.send(bad_env).await;
    ws.refused(Some("PRECONDITION_FAILED")).await;
    let mut ws = exec(&sim).await;
    ws.send(with_require.clone()).await;
    assert_eq!(ws.expect("started").await["created"], true);
    ws.close().await;

    // A start with the requirement may not join a generation started without it.
    let (plain, _) = open_session(&sim, "s2", "exec sleep 60").await;
    plain.close().await;
    let mut join = start_session("s2", "x");
    join["require"] = json!(["broker"]);
    let mut ws = exec(&sim).await;
    ws.send(join.clone()).await;
    let e = ws.refused(Some("PRECONDITION_FAILED")).await;
    assert!(e["data"]["detail"]
        .as_str()
        .unwrap()
        .contains("without the broker requirement"));

    sim.faults().set_features(Some(Features {
        exec_require: false,
        ..Features::all()
    }));
    let mut ws = exec(&sim).await;
    ws.send(join).await;
    assert_eq!(
        ws.expect("started").await["created"],
        false,
        "pre-0.30 impd ignores require"
    );
}

// ---------------------------------------------------------------------------------------
// Plain execs.

#[actix_rt::test]
async fn a_plain_exec_takes_stdin_in_chunks_and_reports_output_and_exit_code() {
    let sim = sim_with_box();
    let mut ws = exec(&sim).await;
    ws.send(
        json!({"type": "start", "name": "box", "argv": ["sh", "-c", "cat; echo oops >&2; exit 7"],
                   "tty": false, "cwd": "/"}),
    )
    .await;
    let started = ws.expect("started").await;
    assert!(started["pid"].as_i64().unwrap() > 0);
    assert!(
        started.get("output").is_none() && started.get("session").is_none(),
        "{started}"
    );
    ws.stdin(b"abc").await;
    ws.stdin(b"def").await;
    ws.send(json!({"type": "stdin_eof"})).await;
    let (out, err, exit) = ws.data_then("exit").await;
    assert_eq!(out, b"abcdef");
    assert_eq!(err, b"oops\n");
    assert_eq!(exit, json!({"type": "exit", "code": 7, "signal": null}));
    ws.closed_with(1000).await;
}

#[actix_rt::test]
async fn a_plain_exec_unpacks_a_tar_streamed_on_stdin() {
    let sim = sim_with_box();
    let src = tempfile::tempdir().unwrap();
    std::fs::create_dir(src.path().join("sub")).unwrap();
    std::fs::write(src.path().join("a.txt"), "alpha").unwrap();
    std::fs::write(src.path().join("sub/b.txt"), vec![b'b'; 100_000]).unwrap();
    let archive = std::process::Command::new("tar")
        .args(["-c", "-f", "-", "-C"])
        .arg(src.path())
        .arg(".")
        .output()
        .unwrap()
        .stdout;
    let dest = tempfile::tempdir().unwrap();
    let target = dest.path().join("unpacked");
    let mut ws = exec(&sim).await;
    ws.send(
        json!({"type": "start", "name": "box", "tty": false, "cwd": "/",
                   "argv": ["sh", "-c", "mkdir -p \"$1\" && tar -x -f - -C \"$1\"", "sh", target]}),
    )
    .await;
    ws.expect("started").await;
    for chunk in archive.chunks(16 * 1024) {
        ws.stdin(chunk).await;
    }
    ws.send(json!({"type": "stdin_eof"})).await;
    let (_, err, exit) = ws.data_then("exit").await;
    assert_eq!(exit["code"], 0, "{}", String::from_utf8_lossy(&err));
    assert_eq!(
        std::fs::read_to_string(target.join("a.txt")).unwrap(),
        "alpha"
    );
    assert_eq!(
        std::fs::read(target.join("sub/b.txt")).unwrap().len(),
        100_000
    );
}

#[actix_rt::test]
async fn closing_a_plain_exec_hangs_it_up_and_a_sleep_ends_it_with_an_error() {
    let sim = sim_with_box();
    let mut ws = exec(&sim).await;
    ws.send(json!({"type": "start", "name": "box", "argv": ["sleep", "60"], "tty": false}))
        .await;
    let pid = ws.expect("started").await["pid"].as_i64().unwrap() as i32;
    ws.close().await;
    sim.wait_until("the command got SIGHUP", |_| {
        !matches!(proc_state(pid), Some('S' | 'R'))
    })
    .await;

    let mut ws = exec(&sim).await;
    ws.send(json!({"type": "start", "name": "box", "argv": ["sleep", "60"], "tty": false}))
        .await;
    ws.expect("started").await;
    assert!(sim.faults().sleep_imp("box"));
    ws.refused(None).await;
}

#[actix_rt::test]
async fn a_message_over_the_size_limit_closes_the_socket() {
    let sim = ImpdSim::start(SimOptions {
        max_message_bytes: 1024,
        imps: vec!["box".into()],
        ..SimOptions::default()
    });
    let mut ws = exec(&sim).await;
    ws.send(json!({"type": "start", "name": "box", "argv": ["cat"], "tty": false}))
        .await;
    ws.expect("started").await;
    ws.stdin(&[b'x'; 2048]).await;
    ws.closed_with(1009).await;
}

#[actix_rt::test]
async fn an_exec_ticket_works_once_and_only_for_its_imp() {
    let sim = sim_with_box();
    ok(&sim, "imps.create", json!({"name": "other"})).await;
    let t = ok(&sim, "exec.ticket", json!({"name": "box"})).await;
    let ticket = t["ticket"].as_str().unwrap().to_string();
    assert!(t["expiresAt"].is_string());
    let path = format!("/exec?ticket={ticket}");
    let mut ws = connect(&sim, &path, None)
        .await
        .expect("a fresh ticket is accepted");
    assert_eq!(
        connect(&sim, &path, None).await.err(),
        Some(401),
        "tickets are single-use"
    );
    ws.send(json!({"type": "start", "name": "box", "argv": ["true"], "tty": false}))
        .await;
    ws.expect("started").await;

    let t = ok(&sim, "exec.ticket", json!({"name": "box"})).await;
    let path = format!("/exec?ticket={}", t["ticket"].as_str().unwrap());
    let mut ws = connect(&sim, &path, None).await.unwrap();
    ws.send(json!({"type": "start", "name": "other", "argv": ["true"], "tty": false}))
        .await;
    ws.refused(Some("FORBIDDEN")).await;
    let t = ok(&sim, "exec.ticket", json!({"name": "box"})).await;
    let path = format!("/tunnel?ticket={}", t["ticket"].as_str().unwrap());
    assert_eq!(
        connect(&sim, &path, None).await.err(),
        Some(401),
        "never on /tunnel"
    );
}

// ---------------------------------------------------------------------------------------
// Faults.

#[actix_rt::test]
async fn injected_drops_close_before_or_after_started() {
    let sim = sim_with_box();
    sim.faults()
        .drop_next_connections(1, When::BeforeStarted, 1011);
    let mut ws = exec(&sim).await;
    ws.send(start_session("s1", "exec sleep 60")).await;
    ws.closed_with(1011).await;
    assert!(sim.session("box", "s1").is_none(), "nothing ran");

    sim.faults()
        .drop_next_connections(1, When::AfterStarted, 1006 + 6);
    let mut ws = exec(&sim).await;
    ws.send(start_session("s1", "exec sleep 60")).await;
    let g = generation(&ws.expect("started").await);
    ws.closed_with(1012).await;
    let view = sim.session("box", "s1").expect("the session runs on");
    assert!(view.exit.is_none());
    let mut ws = exec(&sim).await;
    ws.send(attach("s1", Some((&g, 0)))).await;
    assert_eq!(
        ws.expect("started").await["output"]["resume"]["kind"],
        "exact"
    );
}

#[actix_rt::test]
async fn slow_detach_and_dropped_output_leave_the_process_running() {
    let sim = sim_with_box();
    let (mut ws, started) = open_session(&sim, "s1", "echo hi; exec sleep 60").await;
    let g = generation(&started);
    ws.data_until("hi").await;
    assert!(sim.faults().detach_slow("box", "s1"));
    let d = ws.expect("detached").await;
    assert_eq!(
        (d["reason"].clone(), d["offset"].clone()),
        (json!("slow"), json!(4))
    );
    ws.closed_with(1000).await;

    let mut ws = exec(&sim).await;
    ws.send(attach("s1", Some((&g, 4)))).await;
    ws.expect("started").await;
    sim.wait_until("the viewer is attached", |s| {
        s.session("box", "s1").is_some_and(|v| v.attached)
    })
    .await;
    assert!(sim.faults().drop_output("box", "s1"));
    ws.closed_with(1011).await;
    let view = sim.session("box", "s1").unwrap();
    assert!(view.exit.is_none() && view.generation == g);
}

#[actix_rt::test]
async fn a_garbled_message_comes_before_the_real_answer() {
    let sim = sim_with_box();
    sim.faults().garble_next_exec(1);
    let mut ws = exec(&sim).await;
    ws.send(start_session("s1", "exec sleep 60")).await;
    match ws.next().await {
        In::Raw(text) => assert!(serde_json::from_str::<Value>(&text).is_err()),
        other => panic!("expected an unparseable message, got {other:?}"),
    }
    ws.expect("started").await;
}

#[actix_rt::test]
async fn a_revoked_token_closes_its_sockets_with_1008_and_is_refused() {
    let sim = sim_with_box();
    let token = sim.faults().add_token(Scope::Manage, None);
    let mut ws = connect(&sim, "/exec", Some(&token)).await.unwrap();
    ws.send(start_session("s1", "exec sleep 60")).await;
    ws.expect("started").await;
    assert!(sim.faults().revoke_token(&token));
    ws.closed_with(1008).await;
    let (status, body) = post(&sim, "system.info", None, Some(&token)).await;
    assert_eq!((status, body), (401, json!({"error": "unauthorized"})));
    assert_eq!(connect(&sim, "/exec", Some(&token)).await.err(), Some(401));
    assert!(
        sim.session("box", "s1").unwrap().exit.is_none(),
        "the session runs on"
    );
}

#[actix_rt::test]
async fn a_restart_closes_sockets_with_1012_sleeps_imps_and_is_unreachable_for_a_while() {
    let sim = sim_with_box();
    ok(
        &sim,
        "leases.acquire",
        json!({"name": "box", "label": "l", "ttlSeconds": 600}),
    )
    .await;
    let (mut ws, started) = open_session(&sim, "s1", "echo hi; exec sleep 60").await;
    let g = generation(&started);
    ws.data_until("hi").await;
    sim.faults().restart(Duration::from_millis(500));
    ws.closed_with(1012).await;
    sim.wait_until("the imp sleeps", |s| {
        s.imp("box").is_some_and(|i| i.state == ImpState::Sleeping)
    })
    .await;
    assert_eq!(
        connect(&sim, "/exec", Some(sim.token())).await.err(),
        Some(0),
        "refused while down"
    );
    let deadline = tokio::time::Instant::now() + WITHIN;
    let mut ws = loop {
        if let Ok(ws) = connect(&sim, "/exec", Some(sim.token())).await {
            break ws;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "impd never came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    ws.send(json!({"type": "attach", "name": "box", "session": "s1",
                   "resumeFrom": {"executionGeneration": g, "offset": 4}}))
        .await;
    let started = ws.expect("started").await;
    assert_eq!(generation(&started), g, "sessions survive a restart");
    assert_eq!(sim.live_leases("box").len(), 1, "leases survive a restart");
}

#[actix_rt::test]
async fn upgrade_and_system_info_faults_look_like_network_trouble() {
    let sim = sim_with_box();
    sim.faults().refuse_next_upgrades(1, 503);
    assert_eq!(
        connect(&sim, "/exec", Some(sim.token())).await.err(),
        Some(503)
    );
    sim.faults().hang_next_upgrades(1);
    let hung = tokio::time::timeout(
        Duration::from_millis(300),
        connect(&sim, "/exec", Some(sim.token())),
    )
    .await;
    assert!(hung.is_err(), "a hung upgrade never answers");
    assert!(connect(&sim, "/exec", Some(sim.token())).await.is_ok());

    sim.faults().unreachable_system_info(1);
    let failed = http()
        .post(format!("{}/rpc/system/info", sim.url()))
        .bearer_auth(sim.token())
        .send()
        .await;
    assert!(failed.is_err(), "an unreachable impd gives no HTTP answer");
    ok(&sim, "system.info", Value::Null).await;

    sim.faults().delay_next_rpcs(1, Duration::from_millis(300));
    let t = std::time::Instant::now();
    ok(&sim, "system.info", Value::Null).await;
    assert!(t.elapsed() >= Duration::from_millis(300));
}

// ---------------------------------------------------------------------------------------
// Reverse forwards.

#[actix_rt::test]
async fn a_reverse_forward_relays_bytes_with_acks_and_ends_with_4000_on_sleep() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let sim = sim_with_box();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run/s9.sock");
    std::fs::create_dir(dir.path().join("run")).unwrap();
    let mut control = connect(&sim, "/tunnel", Some(sim.token())).await.unwrap();
    control
        .send(json!({"type": "listen", "name": "box", "network": "unix", "path": path}))
        .await;
    let listening = control.expect("listening").await;
    assert_eq!(listening["path"], json!(path));
    let listener = listening["listener"].as_str().unwrap().to_string();

    let mut guest = tokio::net::UnixStream::connect(&path).await.unwrap();
    guest.write_all(b"ping").await.unwrap();
    let conn = control.expect("connection").await;
    assert_eq!(conn["id"], 1);

    let mut relay = connect(&sim, "/tunnel", Some(sim.token())).await.unwrap();
    relay
        .send(json!({"type": "accept", "name": "box", "listener": listener, "connection": 1}))
        .await;
    relay.expect("opened").await;
    match relay.next().await {
        In::Data(_, _) => {}
        other => panic!("expected raw bytes, got {other:?}"),
    }
    relay.send(json!({"type": "ack", "bytes": 4})).await;
    relay.send_raw_binary(b"pong".to_vec()).await;
    assert_eq!(relay.expect("ack").await["bytes"], 4);
    let mut got = [0u8; 4];
    guest.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"pong");
    guest.shutdown().await.unwrap();
    relay.expect("eof").await;
    relay.send(json!({"type": "eof"})).await;
    relay.closed_with(1000).await;

    // Another caller cannot accept this listener's clients.
    let other = sim.faults().add_token(Scope::Exec, None);
    let _second = tokio::net::UnixStream::connect(&path).await.unwrap();
    assert_eq!(control.expect("connection").await["id"], 2);
    let mut thief = connect(&sim, "/tunnel", Some(&other)).await.unwrap();
    thief
        .send(json!({"type": "accept", "name": "box", "listener": listener, "connection": 2}))
        .await;
    assert_eq!(thief.expect("error").await["code"], "NOT_FOUND");
    thief.closed_with(1000).await;

    ok(&sim, "imps.sleep", json!({"name": "box"})).await;
    control.closed_with(4000).await;
    assert!(!path.exists(), "the guest listener is gone");
}

#[actix_rt::test]
async fn the_simulator_counts_what_it_served() {
    let sim = sim_with_box();
    let (mut ws, _) = open_session(&sim, "s1", "printf 12345; exec sleep 60").await;
    ws.data_exact(5).await;
    let stats = sim.stats();
    assert_eq!(stats.exec_connections, 1);
    assert_eq!(stats.exec_bytes_sent, 5);
    assert_eq!(stats.exec_opens.get("start"), Some(&1));
    assert_eq!(sim.open_sockets(), 1);
}

#[actix_rt::test]
async fn a_held_call_waits_before_or_after_its_effect_until_released() {
    let sim = sim_with_box();
    sim.faults()
        .add_secret("gh", SecretKind::Github, &["api.github.com"]);
    // Before its effect: no imp until the release.
    let held = sim
        .faults()
        .hold_call("imps.create", 0, impd_sim::HoldPoint::BeforeEffect);
    let (url, token) = (sim.url(), sim.token().to_string());
    let call = |procedure: &'static str, input: Value| {
        let (url, token) = (url.clone(), token.clone());
        actix_rt::spawn(async move {
            let path = procedure.replace('.', "/");
            let resp = http()
                .post(format!("{url}/rpc/{path}"))
                .bearer_auth(token)
                .send_json(&json!({ "json": input }))
                .await
                .expect("the held call is answered once released");
            resp.status().as_u16()
        })
    };
    let create = call("imps.create", json!({"name": "held"}));
    held.wait_held(WITHIN).await;
    assert!(
        sim.imp("held").is_none(),
        "the create took effect while held"
    );
    assert!(!create.is_finished());
    held.release();
    assert_eq!(create.await.unwrap(), 200);
    assert!(sim.imp("held").is_some());

    // After its effect: the second grant is in place, its answer not sent.
    let held = sim
        .faults()
        .hold_call("grants.add", 1, impd_sim::HoldPoint::AfterEffect);
    assert_eq!(
        call("grants.add", json!({"name": "box", "secret": "gh"}))
            .await
            .unwrap(),
        200,
        "the first add is let through"
    );
    assert!(sim.faults().ungrant("box", "gh"));
    let add = call("grants.add", json!({"name": "box", "secret": "gh"}));
    held.wait_held(WITHIN).await;
    assert_eq!(sim.grants()["box"], ["gh"]);
    assert!(!add.is_finished(), "the held add was answered");
    held.release();
    assert_eq!(add.await.unwrap(), 200);
}
