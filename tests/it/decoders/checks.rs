//! What must hold for each decoder of the daemon's inputs, whatever the bytes: the fuzz
//! targets (`fuzz/fuzz_targets/`) and the property tests (`tests/it/decoders.rs`) both include
//! this file, so the two harnesses assert the very same things. Each check panics on a
//! broken property; a decoder that panics by itself fails it the same way.

#![allow(dead_code)] // Each harness uses the checks of its own decoders.

use std::collections::BTreeMap;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use actix_web::error::PayloadError;
use atc::config::Config;
use atc::protocol::RequestError;
use atc::providers::imp::broker::AgentAuth;
use atc::server::{control_frame, reporter, Inbound, InboundError, InboundMessages, Violation};
use atc_protocol::{ClientFrame, DIM_RANGE};
use bytes::Bytes;
use futures_util::Stream;
use serde_json::{json, Value};

/// The attach socket's cap in the tests that drive it (the daemon's is `bodyCapBytes`).
pub const ATTACH_CAP: usize = 4096;
/// The events socket's cap (`server/events.rs`).
pub const EVENTS_CAP: usize = 64 * 1024;

/// The attach socket's text-frame decoder: an accepted frame is a size in range, it agrees with
/// the wire type clients encode with, and that encoding decodes back to the same size.
pub fn attach_control(text: &[u8]) {
    match control_frame(text) {
        Ok(size) => {
            assert!(DIM_RANGE.contains(&u64::from(size.cols)), "{size:?}");
            assert!(DIM_RANGE.contains(&u64::from(size.rows)), "{size:?}");
            let wire = ClientFrame::Resize {
                cols: size.cols,
                rows: size.rows,
            };
            let again = serde_json::to_vec(&wire).expect("a resize frame serializes");
            assert_eq!(control_frame(&again).ok(), Some(size));
            assert_eq!(ClientFrame::from_text(&again).ok(), Some(wire));
        }
        Err(RequestError::FrameNotJson) => {}
        // A key given twice is refused, never resolved to one of its values.
        Err(RequestError::DuplicateKey { field }) => assert!(!field.is_empty()),
        Err(RequestError::UnknownFrame(kind)) => assert_ne!(kind, "resize"),
        Err(RequestError::OutOfRange { field, .. }) => {
            assert!(field == "cols" || field == "rows", "{field}")
        }
        Err(other) => panic!("an error no text frame can cause: {other:?}"),
    }
}

/// One message or the end of what `InboundMessages` yields, comparable.
#[derive(Debug, PartialEq)]
pub enum Seen {
    Binary(Bytes),
    Text(Bytes),
    Ping(Bytes),
    Pong,
    Close,
    Violation(Violation),
    Failed,
}

/// Everything `InboundMessages` yields for `bytes` arriving in the chunks `splits` cut,
/// through to its end. The payload stream never waits, so neither does this.
pub fn inbound(bytes: &[u8], splits: &[usize], cap: usize) -> Vec<Seen> {
    let mut chunks = Vec::new();
    let mut at = 0;
    for &cut in splits {
        let end = (at + cut).min(bytes.len());
        chunks.push(Ok::<Bytes, PayloadError>(Bytes::copy_from_slice(
            &bytes[at..end],
        )));
        at = end;
    }
    chunks.push(Ok(Bytes::copy_from_slice(&bytes[at..])));
    let mut stream = pin!(InboundMessages::new(
        futures_util::stream::iter(chunks),
        cap
    ));
    let mut cx = Context::from_waker(Waker::noop());
    let mut seen = Vec::new();
    loop {
        let item = match stream.as_mut().poll_next(&mut cx) {
            Poll::Ready(Some(item)) => item,
            Poll::Ready(None) => return seen,
            Poll::Pending => panic!("a payload that never waits made the decoder wait"),
        };
        let failed = item.is_err();
        seen.push(match item {
            Ok(Inbound::Binary(b)) => Seen::Binary(b),
            Ok(Inbound::Text(b)) => Seen::Text(b),
            Ok(Inbound::Ping(b)) => Seen::Ping(b),
            Ok(Inbound::Pong) => Seen::Pong,
            Ok(Inbound::Close) => Seen::Close,
            Err(InboundError::Violation(v)) => Seen::Violation(v),
            Err(InboundError::Failed(_)) => Seen::Failed,
        });
        if failed {
            assert!(
                matches!(stream.as_mut().poll_next(&mut cx), Poll::Ready(None)),
                "the decoder read on after an error"
            );
            return seen;
        }
    }
}

/// The WebSocket decoder both sockets use (it splits text from binary): however the bytes are
/// chunked it yields the same messages; text is UTF-8; no message passes the cap; nothing
/// comes after an error.
pub fn ws_stream(bytes: &[u8], splits: &[usize], cap: usize) {
    let whole = inbound(bytes, &[], cap);
    for seen in &whole {
        match seen {
            Seen::Text(t) => assert!(std::str::from_utf8(t).is_ok(), "text that is not UTF-8"),
            Seen::Binary(b) => assert!(b.len() <= cap, "{} bytes past the {cap} cap", b.len()),
            Seen::Ping(p) => assert!(p.len() <= 125, "a ping of {} bytes", p.len()),
            _ => {}
        }
        if let Seen::Text(t) = seen {
            assert!(t.len() <= cap, "{} bytes past the {cap} cap", t.len());
        }
    }
    assert_eq!(
        inbound(bytes, splits, cap),
        whole,
        "chunking changed the messages"
    );
}

/// A masked client frame (RFC 6455 §5.2), as a browser sends it.
pub fn client_frame(fin: bool, opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut out = vec![if fin { 0x80 } else { 0 } | (opcode & 0x0f)];
    match payload.len() {
        n @ 0..=125 => out.push(0x80 | n as u8),
        n @ 126..=0xffff => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

/// Whole messages sent as well-formed frames come out as sent, in order.
pub fn ws_round_trip(messages: &[(bool, Vec<u8>)], cap: usize) {
    let mut bytes = Vec::new();
    let mut expected = Vec::new();
    for (binary, payload) in messages {
        if payload.len() > cap {
            continue;
        }
        let payload = Bytes::copy_from_slice(payload);
        if *binary {
            bytes.extend(client_frame(true, 0x2, &payload, [1, 2, 3, 4]));
            expected.push(Seen::Binary(payload));
        } else if std::str::from_utf8(&payload).is_ok() {
            bytes.extend(client_frame(true, 0x1, &payload, [9, 8, 7, 6]));
            expected.push(Seen::Text(payload));
        }
    }
    assert_eq!(inbound(&bytes, &[], cap), expected);
}

/// The reporter socket's line parser: an accepted line has a session id, a key and an object
/// payload, and the line written back from them is read the same.
pub fn reporter_line(line: &[u8]) {
    let Some(report) = reporter::parse(line) else {
        return;
    };
    assert!(report.payload.is_object());
    let again = json!({
        "atcId": report.atc_id.to_string(),
        "key": report.key,
        "event": report.event,
        "payload": report.payload,
    })
    .to_string();
    let back = reporter::parse(again.as_bytes()).expect("a line written from a report parses");
    assert_eq!(back.atc_id, report.atc_id);
    assert_eq!(back.key, report.key);
    assert_eq!(back.event, report.event);
    assert!(same_json(&back.payload, &report.payload));
}

/// Equal JSON, with floats compared to their last bits: serde_json reads floats to within an
/// ulp unless built with `float_roundtrip`, which is not what these checks are about.
pub fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => x == y || ((x - y) / x).abs() < 1e-15,
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Long enough to matter, not a plain name, and one word: what a credential looks like.
/// Environment variable names are named in problems on purpose, and a value with spaces is
/// a phrase, not a token.
fn secret_like(s: &str) -> bool {
    let plain_name = s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    let one_word = !s.chars().any(char::is_whitespace);
    s.chars().count() >= 8 && !plain_name && one_word
}

/// Markers planted in place of a document's credential-like values: each one unique, and
/// all of one prefix found nowhere in the document (nor in the daemon's wording, which has no
/// `~leak`).
///
/// Why plant rather than search a problem for the values themselves: a fuzzed value can be
/// any word, including a piece of the daemon's own message (`' must be an ob`), a variable
/// name a problem names on purpose, or a key that a problem names. Each of those was found
/// by the fuzzer as a false leak. A marker in a problem can only have come from a value.
struct Planted {
    prefix: String,
    /// Markers handed out so far, which numbers the next.
    planted: usize,
}

impl Planted {
    /// A prefix that occurs nowhere in `text` (the document as JSON, keys included), so no
    /// marker can be there by chance.
    fn new(text: &str) -> Planted {
        let prefix = (0u32..)
            .map(|n| format!("~leak{n}~"))
            .find(|p| !text.contains(p.as_str()))
            .expect("some prefix is absent from a finite text");
        Planted { prefix, planted: 0 }
    }

    fn marker(&mut self) -> String {
        self.planted += 1;
        format!("{}{}~", self.prefix, self.planted)
    }

    /// `v` with every credential-like string value (not keys) replaced by a marker. A
    /// `tokenEnv` value is the name of the variable that holds a token, which a problem names
    /// on purpose, so it stays.
    fn plant(&mut self, v: &Value) -> Value {
        match v {
            Value::String(s) if secret_like(s) => Value::String(self.marker()),
            Value::Array(items) => Value::Array(items.iter().map(|i| self.plant(i)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, i)| {
                        let i = if k == "tokenEnv" {
                            i.clone()
                        } else {
                            self.plant(i)
                        };
                        (k.clone(), i)
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// The markers are in a prefix's family, so one search finds any of them.
    fn assert_absent(&self, text: &str, what: &dyn std::fmt::Debug) {
        assert!(
            !text.contains(self.prefix.as_str()),
            "a value of the file in a problem: {what:?}"
        );
    }
}

/// The config loader: any text gives a config (never a panic), whose problems each have a
/// scope and a word; and a problem never repeats a value of the file, checked by loading the
/// same document with its values planted (`Planted`).
pub fn config_text(text: &[u8]) {
    config_holds(text);
    let Ok(v) = serde_json::from_slice::<Value>(text) else {
        return;
    };
    // The serialized value, not the text: an escape (`\u007e`) would hide a prefix from a
    // search of the text, and the loader sees the parsed value's strings.
    let mut planted = Planted::new(&v.to_string());
    let doc = serde_json::to_vec(&planted.plant(&v)).expect("a JSON value serializes");
    let config = config_holds(&doc);
    for p in &config.problems {
        planted.assert_absent(&p.scope, p);
        planted.assert_absent(&p.detail, p);
    }
    for problem in atc::providers::targets::Targets::settle(&config.targets).problems() {
        planted.assert_absent(&problem.detail, &problem);
    }
}

/// What any loaded config is, whatever its text.
fn config_holds(text: &[u8]) -> Config {
    let config = Config::from_json(text);
    for p in &config.problems {
        assert!(!p.scope.is_empty() && !p.problem.is_empty(), "{p:?}");
    }
    for agent in config.agents.values() {
        if let Some(auth) = &agent.auth {
            auth_holds(auth, &agent.env);
        }
    }
    config
}

/// What a checked `auth` entry always is.
fn auth_holds(auth: &AgentAuth, env: &BTreeMap<String, String>) {
    assert!(!auth.secrets.is_empty());
    assert!(auth.secrets.windows(2).all(|w| w[0] < w[1]), "{auth:?}");
    for p in &auth.placeholders {
        assert!(!env.contains_key(p), "{auth:?}");
        assert_eq!(auth.placeholders.iter().filter(|q| *q == p).count(), 1);
    }
    if let Some(check) = &auth.check {
        assert!(check.first().is_some_and(|c| !c.trim().is_empty()));
    }
}

/// An agent's `auth` entry: accepted entries hold their invariants, refused ones name a key
/// and never a value (of the entry or of the agent's env), checked with the values planted.
pub fn auth_entry(value: &Value, kind: Option<&str>, env: &BTreeMap<String, String>) {
    // A name that is no kind carries no `auth`, as no kind does.
    let kind = kind.and_then(atc::agents::AgentKind::parse);
    if let Ok(auth) = AgentAuth::from_config(value, kind, env) {
        auth_holds(&auth, env);
    }
    let text = format!("{value} {env:?}");
    let mut planted = Planted::new(&text);
    let value = planted.plant(value);
    let env: BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| {
            let v = if secret_like(v) {
                planted.marker()
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect();
    match AgentAuth::from_config(&value, kind, &env) {
        Ok(auth) => auth_holds(&auth, &env),
        Err(detail) => planted.assert_absent(&detail, &detail),
    }
}
