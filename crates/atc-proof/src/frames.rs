//! The `frames` suite (issue 12, item 4's last bullet): malformed frames on every WebSocket the
//! daemon serves (the attach socket, interactive and watch-only, and the events socket), each
//! on its own connection from a raw client ([`crate::rawws`]), while a well-behaved witness
//! stays attached to the session they all target.
//!
//! Each case expects what the protocol gives it: a close with the RFC 6455 code that fits
//! (1002 protocol, 1007 bad UTF-8, 1009 too big), or on the attach socket the documented
//! `error` frame with the connection left usable, or on the events socket (whose input is
//! ignored, spec §12) nothing but a pong to the probe that follows. After every case the
//! daemon must be up, the session alive with its screen answering, and the witness's stream
//! still flowing; at the end the witness must have every byte of the stream exactly once.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::emitting::{self, Emitting};
use crate::rawws::{self, op, Frame, Options, RawWs, WsError};
use crate::reassembly::{Asked, Reassembly, Replay, Tally};
use crate::{Plan, Report, Want};
use atc_testkit::{ChildDaemon, DaemonSpec};

/// The attach socket's message cap: the daemon's `bodyCapBytes` (its default).
const ATTACH_CAP: u64 = 1024 * 1024;

/// The events socket's message cap (`server/events.rs`).
const EVENTS_CAP: u64 = 64 * 1024;

/// The emitter's rate: enough to see the stream flow, little enough to leave the machine to
/// the cases.
const RATE: u64 = 64 * 1024;

/// How long a case may take to be answered.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// A socket the daemon drops for silence within its ping interval plus its silence timeout
/// (15 s + 60 s); the silence cases wait this long.
const SILENCE_WAIT: Duration = Duration::from_secs(100);

/// Silence cases run only when the run may take this long.
const SILENCE_MIN_LIMIT: Duration = Duration::from_secs(300);

/// Which socket a case opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Socket {
    Attach,
    Watch,
    Events,
}

impl Socket {
    const ALL: [Socket; 3] = [Socket::Attach, Socket::Watch, Socket::Events];

    fn name(self) -> &'static str {
        match self {
            Socket::Attach => "attach",
            Socket::Watch => "attach?mode=watch",
            Socket::Events => "events",
        }
    }

    fn cap(self) -> u64 {
        match self {
            Socket::Attach | Socket::Watch => ATTACH_CAP,
            Socket::Events => EVENTS_CAP,
        }
    }
}

/// What a case should get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A close frame with one of these codes.
    Close(&'static [u16]),
    /// An `error` frame with this code, the connection still answering a ping after it.
    Error(&'static str),
    /// Nothing but the pong to the probe that follows.
    Ignored,
    /// A close frame, any code (the silence timeout).
    AnyClose,
}

impl Expect {
    fn describe(self) -> String {
        match self {
            Expect::Close(codes) => format!("close {codes:?}"),
            Expect::Error(code) => format!("error {code}"),
            Expect::Ignored => "ignored (pong)".into(),
            Expect::AnyClose => "a close".into(),
        }
    }
}

/// What a case got.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Got {
    Close(Option<u16>),
    /// An error frame, and whether the connection answered a ping after it.
    Error {
        code: String,
        usable: bool,
    },
    /// The probe's pong and nothing else.
    Ignored,
    /// The connection ended without a close frame.
    Ended,
    /// Nothing within the wait.
    Hang,
    /// The case could not be run (the socket did not open).
    Failed(String),
}

impl Got {
    fn meets(&self, want: Expect) -> bool {
        match (want, self) {
            (Expect::Close(codes), Got::Close(Some(c))) => codes.contains(c),
            (Expect::AnyClose, Got::Close(_)) => true,
            (Expect::Error(want), Got::Error { code, usable }) => *usable && code == want,
            (Expect::Ignored, Got::Ignored) => true,
            _ => false,
        }
    }

    fn describe(&self) -> String {
        match self {
            Got::Close(Some(c)) => format!("close {c}"),
            Got::Close(None) => "close without a code".into(),
            Got::Error { code, usable } => {
                format!(
                    "error {code}{}",
                    if *usable { "" } else { ", then unusable" }
                )
            }
            Got::Ignored => "ignored (pong)".into(),
            Got::Ended => "connection ended without a close".into(),
            Got::Hang => "no answer (hang)".into(),
            Got::Failed(why) => format!("could not run: {why}"),
        }
    }
}

/// One malformed input.
struct Case {
    name: String,
    socket: Socket,
    bytes: Vec<u8>,
    expect: Expect,
    wait: Duration,
}

const PROTOCOL: &[u16] = &[1002];
const TOO_BIG: &[u16] = &[1009];
const NOT_UTF8: &[u16] = &[1007];
/// A close frame whose reason is not UTF-8 fails the connection: 1002 or 1007 both fit.
const BAD_CLOSE_REASON: &[u16] = &[1002, 1007];

/// The cases for one socket.
fn cases_for(socket: Socket) -> Vec<Case> {
    let cap = socket.cap();
    let key = Some([0x11, 0x22, 0x33, 0x44]);
    let mut out: Vec<(String, Vec<u8>, Expect)> = vec![
        (
            "RSV1 set on a text frame".into(),
            rawws::frame(true, 0x40, op::TEXT, key, b"{}"),
            Expect::Close(PROTOCOL),
        ),
        (
            "RSV3 set on a binary frame".into(),
            rawws::frame(true, 0x10, op::BINARY, key, b"x"),
            Expect::Close(PROTOCOL),
        ),
        (
            "reserved data opcode 0x3".into(),
            rawws::frame(true, 0, 0x3, key, b"x"),
            Expect::Close(PROTOCOL),
        ),
        (
            "reserved control opcode 0xB".into(),
            rawws::frame(true, 0, 0xb, key, b""),
            Expect::Close(PROTOCOL),
        ),
        (
            "an unmasked frame".into(),
            rawws::frame(true, 0, op::TEXT, None, b"{}"),
            Expect::Close(PROTOCOL),
        ),
        (
            "a ping of 126 bytes".into(),
            rawws::frame(true, 0, op::PING, key, &[b'p'; 126]),
            Expect::Close(PROTOCOL),
        ),
        (
            "a fragmented ping".into(),
            rawws::frame(false, 0, op::PING, key, b"p"),
            Expect::Close(PROTOCOL),
        ),
        (
            "a length with its top bit set".into(),
            rawws::header(true, 0, op::BINARY, 1 << 63, key),
            Expect::Close(PROTOCOL),
        ),
        (
            "a continuation with no message begun".into(),
            rawws::frame(true, 0, op::CONTINUATION, key, b"x"),
            Expect::Close(PROTOCOL),
        ),
        (
            "a new message inside a fragmented one".into(),
            [
                rawws::masked(false, op::TEXT, b"{\"ty"),
                rawws::masked(true, op::TEXT, b"{}"),
            ]
            .concat(),
            Expect::Close(PROTOCOL),
        ),
        (
            "a close frame with a one-byte body".into(),
            rawws::frame(true, 0, op::CLOSE, key, &[3]),
            Expect::Close(PROTOCOL),
        ),
        (
            "a close frame with code 999".into(),
            rawws::frame(true, 0, op::CLOSE, key, &999u16.to_be_bytes()),
            Expect::Close(PROTOCOL),
        ),
        (
            "a close frame whose reason is not UTF-8".into(),
            rawws::frame(true, 0, op::CLOSE, key, &[0x03, 0xe8, 0xff, 0xfe]),
            Expect::Close(BAD_CLOSE_REASON),
        ),
        (
            format!("a text header declaring {} bytes (the cap + 1)", cap + 1),
            [
                rawws::header(true, 0, op::TEXT, cap + 1, key),
                vec![b'a'; 1024],
            ]
            .concat(),
            Expect::Close(TOO_BIG),
        ),
        (
            "a binary header declaring 4 GiB".into(),
            [
                rawws::header(true, 0, op::BINARY, 1 << 32, key),
                vec![0; 1024],
            ]
            .concat(),
            Expect::Close(TOO_BIG),
        ),
        (
            "a fragmented message growing past the cap".into(),
            growing_fragments(cap),
            Expect::Close(TOO_BIG),
        ),
        (
            "a text frame that is not UTF-8".into(),
            rawws::client_frame(op::TEXT, b"{\"type\":\"\xff\xfe\"}"),
            Expect::Close(NOT_UTF8),
        ),
        (
            "an overlong UTF-8 encoding".into(),
            rawws::client_frame(op::TEXT, b"{\"type\":\"\xc0\xaf\"}"),
            Expect::Close(NOT_UTF8),
        ),
        (
            "UTF-8 broken across two fragments".into(),
            [
                rawws::masked(false, op::TEXT, b"{\"type\":\"\xc3"),
                rawws::masked(true, op::CONTINUATION, b"(\"}"),
            ]
            .concat(),
            Expect::Close(NOT_UTF8),
        ),
    ];
    // Whole, well-formed frames whose content is wrong: the attach socket answers each with
    // an error frame and carries on; the events socket ignores its input.
    let content_error = |code| match socket {
        Socket::Attach | Socket::Watch => Expect::Error(code),
        Socket::Events => Expect::Ignored,
    };
    for (name, text) in [
        ("an unknown type", &b"{\"type\":\"explode\"}"[..]),
        ("a text frame without a type", b"{\"cols\":80,\"rows\":24}"),
        ("malformed JSON", b"{\"type\":"),
        ("JSON that is not an object", b"[1,2,3]"),
        (
            "a resize out of range",
            b"{\"type\":\"resize\",\"cols\":0,\"rows\":24}",
        ),
        (
            "a resize with text sizes",
            b"{\"type\":\"resize\",\"cols\":\"80\",\"rows\":24}",
        ),
    ] {
        out.push((
            name.into(),
            rawws::client_frame(op::TEXT, text),
            content_error("bad_args"),
        ));
    }
    // The bounds themselves are fine: a text message of exactly the cap (not JSON, so the
    // attach socket answers it as content) and a ping of 125 bytes.
    out.push((
        format!("a text message of exactly the cap ({cap} bytes)"),
        rawws::client_frame(op::TEXT, &vec![b'a'; cap as usize]),
        content_error("bad_args"),
    ));
    out.push((
        "a ping of 125 bytes".into(),
        rawws::client_frame(op::PING, &[b'p'; 125]),
        Expect::Ignored,
    ));
    out.push((
        "binary (input) where it may not type".into(),
        rawws::client_frame(op::BINARY, b"typed by a watcher"),
        match socket {
            // Binary frames are the attach socket's input: written, not answered.
            Socket::Attach => Expect::Ignored,
            Socket::Watch => Expect::Error("unsupported"),
            Socket::Events => Expect::Ignored,
        },
    ));
    out.into_iter()
        .map(|(name, bytes, expect)| Case {
            name,
            socket,
            bytes,
            expect,
            wait: ANSWER_WAIT,
        })
        .collect()
}

/// A binary message in 64 KiB fragments, none final, until it is past `cap`.
fn growing_fragments(cap: u64) -> Vec<u8> {
    let chunk = vec![b'f'; 64 * 1024];
    let mut out = rawws::masked(false, op::BINARY, &chunk);
    let mut sent = chunk.len() as u64;
    while sent <= cap {
        out.extend(rawws::masked(false, op::CONTINUATION, &chunk));
        sent += chunk.len() as u64;
    }
    out
}

/// The cases that end only by the daemon's silence timeout.
fn silence_cases(socket: Socket) -> Vec<Case> {
    let key = Some([5, 6, 7, 8]);
    [
        (
            "fragments never finished, then silence",
            rawws::masked(false, op::TEXT, b"{\"type\":"),
        ),
        (
            "half a frame, then silence",
            [rawws::header(true, 0, op::BINARY, 100, key), vec![0; 10]].concat(),
        ),
    ]
    .into_iter()
    .map(|(name, bytes)| Case {
        name: name.into(),
        socket,
        bytes,
        expect: Expect::AnyClose,
        wait: SILENCE_WAIT,
    })
    .collect()
}

/// The witness: attached throughout, reading the stream.
#[derive(Default)]
struct Witness {
    reassembly: Reassembly,
    /// Why it stopped reading before the stream's end, if it did.
    broken: Option<String>,
    /// The stream's length, once the emitter stopped.
    total: Option<u64>,
    done: bool,
}

/// How the cases went, for the figures.
#[derive(Default)]
struct Tallies {
    run: u64,
    as_expected: u64,
    hangs: u64,
    crashes: u64,
    harmed: u64,
    rows: Vec<String>,
}

/// Runs the suite.
pub async fn run(plan: &Plan) -> anyhow::Result<Report> {
    let rounds = plan.count_or(1).max(1);
    let mut report = Report::new(plan.suite, plan.seed);
    let dir = plan.work_dir.join("frames");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let max = RATE.saturating_mul(plan.limit.as_secs().max(60) + 120);
    let config = json!({
        "agents": { emitting::AGENT: emitting::agent_entry(&plan.daemon_bin, RATE, max) },
        "limits": { "bodyCapBytes": ATTACH_CAP },
    });
    let spec = DaemonSpec::new(plan.daemon_bin.clone(), config);
    let mut daemon =
        ChildDaemon::launch(&spec, &dir.join("state"), &dir.join("daemon.log")).await?;
    let client = daemon.client();
    let session = match Emitting::spawn(&client, dir.join("session"), "frames").await {
        Ok(s) => s,
        Err(e) => {
            // Teardown of a run that could not begin.
            daemon.stop_within(Duration::from_secs(15)).await;
            return Err(e);
        }
    };
    let url = daemon.url().to_string();
    let token = daemon.token().to_string();
    let witness = Rc::new(RefCell::new(Witness::default()));
    let reading = watch(&url, &token, &session, witness.clone());
    let started = Instant::now();
    let deadline = started + plan.limit.saturating_sub(Duration::from_secs(30));
    let with_silence = plan.limit >= SILENCE_MIN_LIMIT;
    let running = async {
        let mut t = Tallies::default();
        // The witness's first bytes, so "still flowing" has something to compare with.
        wait_for_flow(&witness, 0, Duration::from_secs(20)).await;
        'rounds: for round in 0..rounds {
            for socket in Socket::ALL {
                for case in cases_for(socket) {
                    if Instant::now() >= deadline {
                        t.rows.push("cut short by the time limit".into());
                        break 'rounds;
                    }
                    let got = run_case(&url, &token, &session, &case).await;
                    if !check_after(&mut t, &mut daemon, &client, &session, &witness, &case, got)
                        .await
                    {
                        break 'rounds;
                    }
                }
            }
            if round == 0 && with_silence {
                let cases: Vec<Case> = Socket::ALL.into_iter().flat_map(silence_cases).collect();
                let gots =
                    join_all(cases.iter().map(|c| run_case(&url, &token, &session, c))).await;
                for (case, got) in cases.iter().zip(gots) {
                    if !check_after(&mut t, &mut daemon, &client, &session, &witness, case, got)
                        .await
                    {
                        break 'rounds;
                    }
                }
            }
        }
        let end = if daemon.is_running() {
            let health = session.health(&client).await;
            match session.stop(&client, Duration::from_secs(20)).await {
                Ok((len, _)) => witness.borrow_mut().total = Some(len),
                Err(e) => t.rows.push(format!("stopping the emitter: {e:#}")),
            }
            Some(health)
        } else {
            None
        };
        // The witness reads to the end (or gives up: it has its own deadline).
        let until = Instant::now() + Duration::from_secs(30);
        while !witness.borrow().done && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        witness.borrow_mut().done = true;
        (t, end)
    };
    let ((), (t, end)) = tokio::join!(reading, running);

    let w = witness.take();
    let tally: Tally = w.reassembly.tally();
    report.info("casesRun", t.run as f64, "count");
    report.figure(
        "casesAsExpected",
        t.as_expected as f64,
        "count",
        Want::Equal(t.run as f64),
    );
    report.zero("hangs", t.hangs, "count");
    report.zero("daemonCrashes", t.crashes, "count");
    report.zero("sessionsHarmed", t.harmed, "count");
    report.zero("witnessBytesLost", tally.lost, "bytes");
    report.zero("witnessBytesRepeated", tally.repeated, "bytes");
    report.zero("witnessBytesWrong", tally.wrong, "bytes");
    report.zero(
        "witnessDisconnects",
        u64::from(w.broken.is_some() || w.total.is_none()),
        "count",
    );
    report.info("witnessBytes", tally.received as f64, "bytes");
    let healthy = end.is_some_and(|h| h.alive && h.screen);
    report.figure(
        "sessionHealthyAtEnd",
        f64::from(u8::from(healthy)),
        "bool",
        Want::Equal(1.0),
    );
    if !with_silence {
        report.note(format!(
            "the silence cases (fragments or half a frame, then nothing, closed by the \
             daemon's 75 s silence timeout) run only with --seconds {} or more",
            SILENCE_MIN_LIMIT.as_secs()
        ));
    }
    if let Some(why) = &w.broken {
        report.note(format!("witness: {why}"));
    }
    for row in t.rows {
        report.note(row);
    }
    session.kill(&client).await;
    if !daemon.stop_within(Duration::from_secs(15)).await {
        eprintln!(
            "atc-proof frames: the daemon did not stop within 15 s of SIGTERM and was killed"
        );
    }
    Ok(report)
}

/// Counts one case and checks the daemon, the session and the witness after it. `false` when
/// the daemon is gone and the run cannot go on.
#[allow(clippy::too_many_arguments)]
async fn check_after(
    t: &mut Tallies,
    daemon: &mut ChildDaemon,
    client: &atc_client::DaemonClient,
    session: &Emitting,
    witness: &Rc<RefCell<Witness>>,
    case: &Case,
    got: Got,
) -> bool {
    t.run += 1;
    let ok = got.meets(case.expect);
    t.as_expected += u64::from(ok);
    t.hangs += u64::from(got == Got::Hang);
    let up = daemon.is_running() && client.get_json("/v1/daemon").await.is_ok();
    let mut harm = Vec::new();
    if up {
        let health = session.health(client).await;
        if !health.alive {
            harm.push("session not alive");
        }
        if !health.screen {
            harm.push("screen not answering");
        }
        let before = witness.borrow().reassembly.next();
        if !wait_for_flow(witness, before, Duration::from_secs(10)).await {
            harm.push("witness stream stalled");
        }
    } else {
        t.crashes += 1;
        harm.push("daemon down");
    }
    t.harmed += u64::from(!harm.is_empty());
    t.rows.push(format!(
        "{:<18} {:<46} wants {:<16} got {}{}{}",
        case.socket.name(),
        case.name,
        case.expect.describe(),
        got.describe(),
        if ok { "" } else { "  ← UNEXPECTED" },
        if harm.is_empty() {
            String::new()
        } else {
            format!("  harm: {}", harm.join(", "))
        }
    ));
    up
}

/// Waits until the witness has read past `offset`; `false` if it did not within `limit`.
async fn wait_for_flow(witness: &Rc<RefCell<Witness>>, offset: u64, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    loop {
        {
            let w = witness.borrow();
            if w.reassembly.next() > offset && w.reassembly.resume_point().is_some() {
                return true;
            }
            if w.broken.is_some() {
                return false;
            }
        }
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Opens the case's socket, sends its bytes and reads what comes back.
async fn run_case(url: &str, token: &str, session: &Emitting, case: &Case) -> Got {
    let path = match case.socket {
        Socket::Attach => session.attach_path(None, false),
        Socket::Watch => session.attach_path(None, true),
        Socket::Events => "/v1/events".to_string(),
    };
    let mut ws = match tokio::time::timeout(
        ANSWER_WAIT,
        RawWs::connect(url, &path, token, Options::default()),
    )
    .await
    {
        Ok(Ok(ws)) => ws,
        Ok(Err(e)) => return Got::Failed(e.to_string()),
        Err(_) => return Got::Failed("the socket did not open".into()),
    };
    if case.socket != Socket::Events {
        if let Err(why) = until_attached(&mut ws).await {
            return Got::Failed(why);
        }
    }
    // The daemon may close before all of it is written (it refuses an oversized frame from
    // its header); what it answers is what counts.
    let sent = ws.send_raw(&case.bytes).await.is_ok();
    let probe = b"frames-probe";
    if sent && matches!(case.expect, Expect::Ignored) {
        // A write failure shows as the connection's end below.
        let _ = ws.send(op::PING, probe).await;
    }
    let until = Instant::now() + case.wait;
    let mut error: Option<String> = None;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let frame = match tokio::time::timeout(left, ws.next_frame()).await {
            Err(_) => {
                return match error {
                    Some(code) => Got::Error {
                        code,
                        usable: false,
                    },
                    None => Got::Hang,
                }
            }
            Ok(Err(WsError::Ended)) | Ok(Err(WsError::Io(_))) => {
                return match error {
                    Some(code) => Got::Error {
                        code,
                        usable: false,
                    },
                    None => Got::Ended,
                }
            }
            Ok(Err(e)) => return Got::Failed(e.to_string()),
            Ok(Ok(f)) => f,
        };
        match frame {
            Frame::Close(code) => {
                return match error {
                    // An error frame and then a close: the error is what it answered, but
                    // the connection did not stay usable.
                    Some(code) => Got::Error {
                        code,
                        usable: false,
                    },
                    None => Got::Close(code),
                };
            }
            Frame::Pong(p) if p.as_ref() == probe => {
                return match error {
                    Some(code) => Got::Error { code, usable: true },
                    None => Got::Ignored,
                }
            }
            // A silence case must stay silent: a pong is a frame the daemon hears (and after
            // half a frame it would be read as that frame's payload).
            Frame::Ping(_) if case.expect == Expect::AnyClose => {}
            Frame::Ping(p) => {
                // A failed pong shows as the connection's end on the next read.
                let _ = ws.pong(&p).await;
            }
            Frame::Text(t) => {
                let v: Value = serde_json::from_slice(&t).unwrap_or(Value::Null);
                if v["type"] == "error" && error.is_none() {
                    error = Some(v["code"].as_str().unwrap_or("?").to_string());
                    // Is the connection still usable after the error?
                    let _ = ws.send(op::PING, probe).await;
                }
            }
            Frame::Binary(_) | Frame::Pong(_) | Frame::Other(_) => {}
        }
    }
}

/// Reads an attach socket up to its `attached` frame.
async fn until_attached(ws: &mut RawWs) -> Result<(), String> {
    let until = Instant::now() + ANSWER_WAIT;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, ws.next_frame()).await {
            Err(_) => return Err("no attached frame".into()),
            Ok(Err(e)) => return Err(e.to_string()),
            Ok(Ok(Frame::Text(t))) => {
                let v: Value = serde_json::from_slice(&t).unwrap_or(Value::Null);
                if v["type"] == "attached" {
                    return Ok(());
                }
            }
            Ok(Ok(Frame::Ping(p))) => ws.pong(&p).await.map_err(|e| e.to_string())?,
            Ok(Ok(_)) => {}
        }
    }
}

/// The witness: one plain attach, read until the stream's end is known and reached (or the
/// run gives up on it).
async fn watch(url: &str, token: &str, session: &Emitting, witness: Rc<RefCell<Witness>>) {
    let broken = |w: &Rc<RefCell<Witness>>, why: String| {
        let mut w = w.borrow_mut();
        w.broken = Some(why);
        w.done = true;
    };
    let path = session.attach_path(None, false);
    let mut ws = match RawWs::connect(url, &path, token, Options::default()).await {
        Ok(ws) => ws,
        Err(e) => return broken(&witness, format!("could not attach: {e}")),
    };
    loop {
        {
            let mut w = witness.borrow_mut();
            if let Some(total) = w.total {
                if w.reassembly.next() >= total {
                    w.reassembly.finish(total);
                    w.done = true;
                }
            }
            if w.done {
                break;
            }
        }
        let frame = match tokio::time::timeout(Duration::from_millis(100), ws.next_frame()).await {
            Err(_) => continue,
            Ok(Ok(f)) => f,
            Ok(Err(e)) => return broken(&witness, format!("its socket failed: {e}")),
        };
        match frame {
            Frame::Binary(b) => {
                witness.borrow_mut().reassembly.binary(&b);
            }
            Frame::Text(t) => {
                let v: Value = serde_json::from_slice(&t).unwrap_or(Value::Null);
                match v["type"].as_str() {
                    Some("attached") => {
                        let (Some(offset), Some(prelude)) =
                            (v["offset"].as_u64(), v["prelude"].as_u64())
                        else {
                            return broken(&witness, format!("a bad attached frame: {v}"));
                        };
                        let replay = v["replay"]
                            .as_str()
                            .and_then(Replay::parse)
                            .unwrap_or(Replay::Screen);
                        witness.borrow_mut().reassembly.attached(
                            Asked::First,
                            offset,
                            prelude,
                            replay,
                        );
                    }
                    Some("desync") => return broken(&witness, format!("it was desynced: {v}")),
                    Some("exit") => return broken(&witness, "the session exited".into()),
                    Some("error") => return broken(&witness, format!("an error frame: {v}")),
                    _ => {}
                }
            }
            Frame::Ping(p) => {
                if let Err(e) = ws.pong(&p).await {
                    return broken(&witness, format!("its pong failed: {e}"));
                }
            }
            Frame::Close(code) => return broken(&witness, format!("closed ({code:?})")),
            Frame::Pong(_) | Frame::Other(_) => {}
        }
    }
    ws.close_clean().await;
}
