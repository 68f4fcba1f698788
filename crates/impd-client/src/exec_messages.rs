//! The `/exec` wire shapes both ways (spec §9): the opening message a client sends first, the
//! control messages after it, the channel-byte framing of binary messages, and the server
//! messages turned into [`ExecEvent`]s. Pure, so each shape is unit-tested without a socket.

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::error::{ImpPortError, ImpdCode};
use super::output::Output;

/// Channel byte of stdin (client → impd only).
pub const STDIN: u8 = 0;
/// Channel byte of stdout (with a tty: all output).
pub const STDOUT: u8 = 1;
/// Channel byte of stderr.
pub const STDERR: u8 = 2;

/// The one message a client sends first on an `/exec` socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Opening {
    /// Run a command, or start (or join) a named session.
    Start(StartMsg),
    /// Attach to a named session that already runs.
    Attach(AttachMsg),
}

/// A `start` (spec §9.3). Fields left empty are not sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StartMsg {
    /// The imp.
    pub name: String,
    /// Program and arguments (at least one element).
    pub argv: Vec<String>,
    /// Run on a new pty (stdout and stderr merged); sessions need it.
    pub tty: bool,
    /// Overrides of the image environment, key by key.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Working directory; impd's default when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Initial pty width (1–65535; ignored without a tty).
    pub cols: u16,
    /// Initial pty height (1–65535; ignored without a tty).
    pub rows: u16,
    /// Start this named session, or join it if it runs (then argv/env/cwd are ignored).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Resume instead of replay (only with `session`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_from: Option<ResumeFrom>,
    /// Preconditions. Send only when `features.exec_require` is true: an older impd drops
    /// the field and runs the command anyway (spec §11). A refusal arrives as an `error` event
    /// whose [`ImpPortError::precondition`] says why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub require: Vec<Requirement>,
}

/// A precondition of a `start` (spec §11); impd knows only one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Requirement {
    /// impd's credential broker is set up for this boot of the guest before the command starts.
    Broker,
}

/// An `attach` (spec §9.4). Fields left empty are not sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachMsg {
    /// The imp.
    pub name: String,
    /// The session name (must exist, else `NO_SESSION`).
    pub session: String,
    /// pty width impd resizes to (it always delivers a SIGWINCH).
    pub cols: u16,
    /// pty height.
    pub rows: u16,
    /// Resume from a cursor instead of a fresh replay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_from: Option<ResumeFrom>,
    /// `false`: fail with `INVALID_STATE` instead of waking or booting the imp (reconnects).
    pub wake: bool,
    /// The start's requirements, re-sent on reconnects as the daemon does (spec §15). The
    /// examined impd ignores it on attach (spec §9.4, §17.1): only a `start` that joins a
    /// running session is checked.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub require: Vec<Requirement>,
}

/// A resume cursor: the generation the client has bytes of, and its high-water mark.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeFrom {
    /// The generation the bytes belong to.
    pub execution_generation: String,
    /// Offset after the last byte the client has.
    pub offset: u64,
}

/// What an `/exec` socket delivers, in order. Exactly one [`ExecEvent::Closed`] ends it. At
/// most one of `Exit`, `Detached`, `Error` is delivered (spec §9.9: the first terminal event
/// wins; later ones are dropped), and a repeated `started` is dropped.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecEvent {
    /// The process started or the session was joined.
    Started(Started),
    /// Output: `channel` 1 (stdout, or everything with a tty) or 2 (stderr).
    Data {
        /// Channel byte.
        channel: u8,
        /// Raw bytes (never decoded: they may split characters or escape sequences).
        bytes: Bytes,
    },
    /// The process ended: `code` is `None` when `signal` ended it.
    Exit {
        /// Exit status.
        code: Option<i32>,
        /// Signal name like `"SIGHUP"`.
        signal: Option<String>,
        /// Offset after the last byte this socket sent (sessions with offsets).
        offset: Option<u64>,
    },
    /// The session socket ended while the process runs on: `taken_over`, `slow` or `lost`.
    Detached {
        /// impd's reason word.
        reason: String,
        /// Offset after the last byte this socket sent.
        offset: Option<u64>,
    },
    /// impd refused or failed (an `error` message), or sent something this client cannot
    /// parse (`BAD_MESSAGE`, after which the client closes the socket). An `error` message
    /// without a code gives `code == ""` (spec §9.3 schema violations, §9.9 a plain exec that
    /// lost its agent).
    Error(ImpPortError),
    /// The socket ended; always the last item. `code` is the close code (1000 after an
    /// exit/detach, 1011 after an error or a dropped output message, 1012 impd restarting,
    /// 1008 token revoked, 1005 a close without status), `None` for a transport loss.
    Closed {
        /// Close code.
        code: Option<u16>,
        /// Close reason text.
        reason: String,
    },
}

/// The `started` message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// The process id inside the imp.
    pub pid: i64,
    /// The session name (session sockets only).
    pub session: Option<String>,
    /// Whether this start created the session (`false`: joined a running one).
    pub created: Option<bool>,
    /// Continuity (session sockets). `None` from an impd before offsets: treat it like
    /// `continuity: "none"`.
    pub output: Option<Output>,
}

/// `{"type":"resize",...}`.
pub fn resize_message(cols: u16, rows: u16) -> Value {
    json!({"type": "resize", "cols": cols, "rows": rows})
}

/// `{"type":"signal",...}`; impd signals the whole process group and ignores unknown names.
pub fn signal_message(signal: &str) -> Value {
    json!({"type": "signal", "signal": signal})
}

/// `{"type":"stdin_eof"}` (ignored with a tty: send byte 0x04 instead).
pub fn stdin_eof_message() -> Value {
    json!({"type": "stdin_eof"})
}

/// A binary message for `channel`: the channel byte, then the raw bytes.
pub fn encode_data(channel: u8, bytes: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(bytes.len() + 1);
    buf.put_u8(channel);
    buf.put_slice(bytes);
    buf.freeze()
}

/// Splits a binary message from impd into channel and bytes; only 1 and 2 flow this way.
pub fn decode_data(message: Bytes) -> Result<(u8, Bytes), ImpPortError> {
    match message.first().copied() {
        None => Err(ImpPortError::bad_message(
            "a binary message without a channel byte",
        )),
        Some(channel @ (STDOUT | STDERR)) => Ok((channel, message.slice(1..))),
        Some(other) => Err(ImpPortError::bad_message(format!(
            "a binary message on channel {other}"
        ))),
    }
}

#[derive(Deserialize)]
struct RawStarted {
    pid: i64,
    #[serde(default)]
    session: Option<String>,
    #[serde(default)]
    created: Option<bool>,
    #[serde(default)]
    output: Option<Value>,
}

#[derive(Deserialize)]
struct RawExit {
    code: Option<i32>,
    #[serde(default)]
    signal: Option<String>,
    #[serde(default)]
    offset: Option<u64>,
}

#[derive(Deserialize)]
struct RawDetached {
    reason: String,
    #[serde(default)]
    offset: Option<u64>,
}

#[derive(Deserialize)]
struct RawError {
    #[serde(default)]
    message: String,
    #[serde(default)]
    code: Option<ImpdCode>,
    #[serde(default)]
    data: Value,
}

/// Turns a text message from impd into an event; `Ok(None)` for a type this client does not
/// use (`stdin_ack`, newer additions).
pub fn decode_server_text(text: &[u8]) -> Result<Option<ExecEvent>, ImpPortError> {
    let value: Value = serde_json::from_slice(text)
        .map_err(|e| ImpPortError::bad_message(format!("a text message that is not JSON: {e}")))?;
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| ImpPortError::bad_message("a text message without a type"))?;
    let bad = |e: serde_json::Error| ImpPortError::bad_message(format!("a bad {kind}: {e}"));
    let event = match kind {
        "started" => {
            let raw = RawStarted::deserialize(&value).map_err(bad)?;
            let output = match raw.output {
                Some(o) if !o.is_null() => Some(Output::from_value(&o)?),
                _ => None,
            };
            ExecEvent::Started(Started {
                pid: raw.pid,
                session: raw.session,
                created: raw.created,
                output,
            })
        }
        "exit" => {
            let raw = RawExit::deserialize(&value).map_err(bad)?;
            ExecEvent::Exit {
                code: raw.code,
                signal: raw.signal,
                offset: raw.offset,
            }
        }
        "detached" => {
            let raw = RawDetached::deserialize(&value).map_err(bad)?;
            ExecEvent::Detached {
                reason: raw.reason,
                offset: raw.offset,
            }
        }
        "error" => {
            let raw = RawError::deserialize(&value).map_err(bad)?;
            ExecEvent::Error(ImpPortError {
                code: raw.code.unwrap_or(ImpdCode::Absent),
                message: raw.message,
                status: None,
                data: raw.data,
            })
        }
        _ => return Ok(None),
    };
    Ok(Some(event))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ImpdCode;
    use crate::output::Resume;

    #[test]
    fn start_of_a_harness_session_as_in_the_spec() {
        // §9.11 (a)
        let mut env = BTreeMap::new();
        env.insert("TERM".to_string(), "xterm-256color".to_string());
        let start = Opening::Start(StartMsg {
            name: "atc-x1".into(),
            argv: vec!["claude".into()],
            tty: true,
            env,
            cwd: Some("/work".into()),
            cols: 120,
            rows: 40,
            session: Some("atc-s9".into()),
            ..StartMsg::default()
        });
        assert_eq!(
            serde_json::to_value(&start).unwrap(),
            json!({"type": "start", "name": "atc-x1", "session": "atc-s9", "argv": ["claude"],
                   "tty": true, "env": {"TERM": "xterm-256color"}, "cwd": "/work",
                   "cols": 120, "rows": 40})
        );
    }

    #[test]
    fn attach_with_resume_as_in_the_spec() {
        // §9.11 (b)
        let attach = Opening::Attach(AttachMsg {
            name: "atc-x1".into(),
            session: "atc-s9".into(),
            cols: 120,
            rows: 40,
            resume_from: Some(ResumeFrom {
                execution_generation: "G1".into(),
                offset: 18000,
            }),
            wake: false,
            require: vec![Requirement::Broker],
        });
        assert_eq!(
            serde_json::to_value(&attach).unwrap(),
            json!({"type": "attach", "name": "atc-x1", "session": "atc-s9", "cols": 120,
                   "rows": 40, "wake": false, "require": ["broker"],
                   "resumeFrom": {"executionGeneration": "G1", "offset": 18000}})
        );
    }

    #[test]
    fn plain_start_leaves_out_session_fields() {
        let start = Opening::Start(StartMsg {
            name: "a".into(),
            argv: vec!["true".into()],
            cols: 80,
            rows: 24,
            ..StartMsg::default()
        });
        let v = serde_json::to_value(&start).unwrap();
        assert_eq!(v["tty"], false);
        for absent in ["env", "cwd", "session", "resumeFrom", "require"] {
            assert!(v.get(absent).is_none(), "{absent} was sent");
        }
    }

    #[test]
    fn start_with_the_broker_requirement() {
        let start = Opening::Start(StartMsg {
            name: "a".into(),
            argv: vec!["claude".into()],
            tty: true,
            cols: 80,
            rows: 24,
            session: Some("s".into()),
            require: vec![Requirement::Broker],
            ..StartMsg::default()
        });
        assert_eq!(
            serde_json::to_value(&start).unwrap()["require"],
            json!(["broker"])
        );
    }

    #[test]
    fn control_messages() {
        assert_eq!(
            resize_message(100, 30),
            json!({"type": "resize", "cols": 100, "rows": 30})
        );
        assert_eq!(
            signal_message("SIGHUP"),
            json!({"type": "signal", "signal": "SIGHUP"})
        );
        assert_eq!(stdin_eof_message(), json!({"type": "stdin_eof"}));
    }

    #[test]
    fn data_framing_both_ways() {
        assert_eq!(&encode_data(STDIN, b"hi")[..], b"\x00hi");
        assert_eq!(&encode_data(STDIN, b"")[..], b"\x00");
        let (ch, bytes) = decode_data(Bytes::from_static(b"\x02err")).unwrap();
        assert_eq!((ch, &bytes[..]), (STDERR, &b"err"[..]));
        let (ch, bytes) = decode_data(Bytes::from_static(b"\x01")).unwrap();
        assert_eq!((ch, bytes.len()), (STDOUT, 0));
        assert!(decode_data(Bytes::new())
            .unwrap_err()
            .is(ImpdCode::BadMessage));
        assert!(decode_data(Bytes::from_static(b"\x00x"))
            .unwrap_err()
            .is(ImpdCode::BadMessage));
        assert!(decode_data(Bytes::from_static(b"\x07x"))
            .unwrap_err()
            .is(ImpdCode::BadMessage));
    }

    #[test]
    fn started_with_and_without_output() {
        let plain = decode_server_text(br#"{"type":"started","pid":88}"#)
            .unwrap()
            .unwrap();
        assert_eq!(
            plain,
            ExecEvent::Started(Started {
                pid: 88,
                session: None,
                created: None,
                output: None
            })
        );
        let session = decode_server_text(
            br#"{"type":"started","pid":412,"session":"atc-s9","created":false,
                "output":{"continuity":"offsets","bootId":"B1","executionGeneration":"G1",
                "bufferStart":0,"end":18900,"offset":18000,"prelude":0,"coldBoots":[],
                "resume":{"kind":"exact"}}}"#,
        )
        .unwrap()
        .unwrap();
        let ExecEvent::Started(s) = session else {
            panic!("not started: {session:?}")
        };
        assert_eq!(s.created, Some(false));
        let output = s.output.unwrap();
        assert_eq!(output.resume, Some(Resume::Exact));
        assert_eq!(output.end, 18900);
    }

    #[test]
    fn exit_detached_and_errors() {
        assert_eq!(
            decode_server_text(br#"{"type":"exit","code":null,"signal":"SIGHUP","offset":18211}"#)
                .unwrap(),
            Some(ExecEvent::Exit {
                code: None,
                signal: Some("SIGHUP".into()),
                offset: Some(18211)
            })
        );
        assert_eq!(
            decode_server_text(br#"{"type":"exit","code":0,"signal":null}"#).unwrap(),
            Some(ExecEvent::Exit {
                code: Some(0),
                signal: None,
                offset: None
            })
        );
        assert_eq!(
            decode_server_text(br#"{"type":"detached","reason":"slow","offset":5}"#).unwrap(),
            Some(ExecEvent::Detached {
                reason: "slow".into(),
                offset: Some(5)
            })
        );
        let Some(ExecEvent::Error(e)) = decode_server_text(
            br#"{"type":"error","code":"PRECONDITION_FAILED","message":"no grant",
                "data":{"reason":"broker_not_ready","detail":"the imp holds no grant"}}"#,
        )
        .unwrap() else {
            panic!("not an error")
        };
        assert!(e.is(ImpdCode::PreconditionFailed));
        assert_eq!(e.data["reason"], "broker_not_ready");
        let p = e.precondition().unwrap();
        assert_eq!(
            p.reason,
            Some(crate::refusal::PreconditionReason::BrokerNotReady)
        );
        assert_eq!(p.detail, "the imp holds no grant");
        let Some(ExecEvent::Error(e)) =
            decode_server_text(br#"{"type":"error","message":"bad exec message: tty"}"#).unwrap()
        else {
            panic!("not an error")
        };
        assert_eq!(e.code, ImpdCode::Absent);
        assert!(e.data.is_null());
    }

    #[test]
    fn unknown_types_are_skipped_and_garbage_is_bad() {
        assert_eq!(
            decode_server_text(br#"{"type":"stdin_ack","bytes":5}"#).unwrap(),
            None
        );
        for bad in [&b"{not json"[..], br#"{"pid":1}"#, br#"{"type":"started"}"#] {
            assert!(decode_server_text(bad)
                .unwrap_err()
                .is(ImpdCode::BadMessage));
        }
    }
}
