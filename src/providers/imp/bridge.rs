//! The session bridge (spec §5.7): what a process inside an imp may say on its session's
//! report socket, and what it is answered. Each guest connection is bound at its accept to
//! one [`Binding`]; every line re-checks that binding against the live session before it is
//! served, so a connection that outlived its harness (the session was forgotten, moved, or
//! given a newer harness) cannot reach a session it no longer belongs to.
//!
//! This module is the protocol only: parsing a line ([`parse`]), deciding whether a binding
//! still holds ([`binding_holds`]), the answers, and the daemon-wide memory every bridge
//! shares ([`Bridges`]: epochs and report ids already applied). Moving bytes is
//! `report_forward`'s job; applying a report is the session's.
//!
//! Trust model: reaching the guest socket is the proof; an imp is one trust domain. So the
//! rules here are about staying bound to the right session, not about authenticating anyone.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;

use crate::providers::SessionView;
use atc_protocol::SessionId;

/// Longest line served, the same as the reporter socket's; a hook payload is far smaller.
pub const MAX_LINE: usize = 1024 * 1024;

/// Longest `reportID` (spec §5.7: 1–128 characters).
const MAX_REPORT_ID: usize = 128;

/// Report ids remembered per session. The guest-side reporter resends only what it has not
/// seen answered, so a resend trails the original by a few reports at most; the cap only
/// bounds memory of a session that reports for days.
const REMEMBERED_REPORTS: usize = 1024;

/// What one bridge connection serves, fixed when it was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// The session whose harness listened.
    pub session: SessionId,
    /// Its target's id.
    pub target: String,
    /// Its target's identity (spec §4.2).
    pub target_identity: String,
    /// The host key its imp was derived from.
    pub host_key: String,
    /// The harness's epoch (unique per daemon, grows with every harness start or attach).
    pub epoch: u64,
}

/// Why a line was refused: the stable codes of the bridge's `{ok:false, code}` answers, their
/// wire words the snake_case names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BridgeCode {
    /// A malformed line, an unknown op, or a hook line for another session (then closed).
    Forbidden,
    /// The binding no longer matches the live session (then closed).
    StaleBinding,
    /// An op atc does not build (inbox taps); the connection stays.
    Unsupported,
    /// The session refused the report (a bad value, or over its report rate); nothing of it
    /// was stored, and the connection stays.
    Refused,
}

/// A request op (`{v:1, id, op, …}`).
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Apply `payload` as a `Report` hook, once per `report_id`.
    Report {
        /// The guest reporter's id for this report (1–128 characters).
        report_id: String,
        /// The report (an object).
        payload: Value,
    },
    /// Answer the session's own `state` and `lastMsg`.
    StatusRead,
    /// Make this connection the session's inbox tap: inbox messages are not built in atc.
    TapOpen,
    /// Acknowledge an inbox message: inbox messages are not built in atc.
    TapAck,
}

/// One parsed line.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    /// A line without `op`: a hook line, as on the reporter socket.
    Hook {
        /// The session it names (`ATC_SESSION_ID` of the reporting process).
        atc_id: String,
        /// The hook's name.
        event: String,
        /// The agent's hook JSON (an object).
        payload: Value,
    },
    /// A request, answered once.
    Request {
        /// The caller's id, echoed in the answer (a string or a number).
        id: Value,
        /// What it asks.
        op: Op,
    },
}

/// A line that is not a valid bridge line; it carries the request id when the line had a
/// usable one, so the `forbidden` answer can name it.
#[derive(Debug, Clone, PartialEq)]
pub struct Malformed {
    /// The request's id, if any.
    pub id: Option<Value>,
}

/// The request id of a parsed JSON line, when it has a usable one (a string or a number).
pub fn request_id(v: &Value) -> Option<Value> {
    v.get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned()
}

/// Parses one line (without its newline). Anything but a JSON object that is a complete hook
/// line or a known, well-formed request is [`Malformed`].
pub fn parse(line: &[u8]) -> Result<Line, Malformed> {
    // A key given twice is malformed, as in a request body.
    let v: Value = crate::protocol::strict_json::parse(line.trim_ascii())
        .map_err(|_| Malformed { id: None })?;
    let id = request_id(&v);
    let malformed = || Malformed { id: id.clone() };
    let obj = v.as_object().ok_or_else(malformed)?;
    let text = |k: &str| obj.get(k).and_then(Value::as_str);
    let object = |k: &str| obj.get(k).filter(|p| p.is_object()).cloned();
    let Some(op) = obj.get("op") else {
        return match (text("atcId"), text("event"), object("payload")) {
            (Some(atc_id), Some(event), Some(payload)) => Ok(Line::Hook {
                atc_id: atc_id.to_string(),
                event: event.to_string(),
                payload,
            }),
            _ => Err(malformed()),
        };
    };
    let (Some(op), Some(request)) = (op.as_str(), id.clone()) else {
        return Err(malformed());
    };
    if obj.get("v").and_then(Value::as_u64) != Some(1) {
        return Err(malformed());
    }
    let op = match op {
        "report" => {
            let report_id = text("reportID")
                .filter(|r| (1..=MAX_REPORT_ID).contains(&r.chars().count()))
                .ok_or_else(malformed)?;
            Op::Report {
                report_id: report_id.to_string(),
                payload: object("payload").ok_or_else(malformed)?,
            }
        }
        "status.read" => Op::StatusRead,
        "tap.open" => Op::TapOpen,
        "tap.ack" => Op::TapAck,
        _ => return Err(malformed()),
    };
    Ok(Line::Request { id: request, op })
}

/// Whether `binding` still holds: the session is there (`view`), still on the target and
/// identity it was bound to, and no newer harness (`current`: the session's latest epoch and
/// host key, if any) took over.
pub fn binding_holds(
    binding: &Binding,
    view: Option<&SessionView>,
    current: Option<(u64, &str)>,
) -> bool {
    let Some(view) = view else {
        return false;
    };
    let newer =
        current.is_some_and(|(epoch, host)| epoch > binding.epoch || host != binding.host_key);
    view.target == binding.target && view.target_identity == binding.target_identity && !newer
}

/// One answer line: `{id, ok:true, …}` or `{id, ok:false, code}` (spec §5.7), with `id`
/// left out when the line had none.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    /// The caller's id, echoed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
    /// Whether the line was served.
    pub ok: bool,
    /// Why not, on a refusal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<BridgeCode>,
    /// A report already applied: served again as a success, not applied twice.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub duplicate: bool,
    /// The session's state and last message, for `status.read`.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusFields>,
}

/// What `status.read` answers beside `ok`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusFields {
    /// The session's attention state.
    pub state: atc_protocol::SessionState,
    /// Its last message.
    pub last_msg: String,
}

impl Answer {
    /// A success answer to request `id`.
    pub fn ok(id: &Value) -> Answer {
        Answer {
            id: Some(id.clone()),
            ok: true,
            code: None,
            duplicate: false,
            status: None,
        }
    }

    /// A success answer to a report already applied.
    pub fn duplicate(id: &Value) -> Answer {
        Answer {
            duplicate: true,
            ..Answer::ok(id)
        }
    }

    /// A refusal (`id` left out when the line had none).
    pub fn refusal(id: Option<&Value>, code: BridgeCode) -> Answer {
        Answer {
            id: id.cloned(),
            ok: false,
            code: Some(code),
            duplicate: false,
            status: None,
        }
    }

    /// The answer to `status.read`.
    pub fn status(id: &Value, view: &SessionView) -> Answer {
        Answer {
            status: Some(StatusFields {
                state: view.state,
                last_msg: view.last_msg.clone(),
            }),
            ..Answer::ok(id)
        }
    }

    /// The answer as one line, without its newline.
    pub fn to_line(&self) -> Vec<u8> {
        // Every field is a plain value or a JSON value already; serializing cannot fail, and
        // an empty line would be a refusal the reader cannot parse rather than a panic.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// What every bridge counted, for the daemon's stats.
#[derive(Debug, Default, Serialize)]
pub struct BridgeStats {
    /// Hook lines and reports handed to their session.
    pub accepted: AtomicU64,
    /// Reports answered as already applied (a resend).
    pub repeated: AtomicU64,
    /// Lines refused (`forbidden`, `stale_binding`), or too long.
    pub dropped: AtomicU64,
}

/// The bridge memory of one session.
#[derive(Debug, Default)]
struct SessionBridge {
    /// Epoch of its latest harness.
    epoch: u64,
    /// Host key of its latest harness.
    host_key: String,
    /// Report ids already applied, oldest first (`seen` holds the same ids).
    order: VecDeque<String>,
    seen: HashSet<String>,
}

/// What all session bridges of this daemon share: the epoch counter, each session's latest
/// epoch and host key, and the report ids already applied (a resend after a lost answer
/// must land once, on whichever connection it comes). One per daemon, shared by every imp
/// provider, so epochs are unique per daemon.
///
/// A plain mutex: every critical section is a map lookup or insert, never held across an
/// await, and the bridges that ask run on the sessions' thread.
#[derive(Debug, Default)]
pub struct Bridges {
    last_epoch: AtomicU64,
    sessions: Mutex<HashMap<SessionId, SessionBridge>>,
    stats: BridgeStats,
}

impl Bridges {
    /// A harness of `session` on `host_key` starts or attaches: its new epoch, which makes
    /// every connection bound to an older harness of the session stale.
    pub fn begin(&self, session: SessionId, host_key: &str) -> u64 {
        let epoch = self.last_epoch.fetch_add(1, Ordering::SeqCst) + 1;
        let mut sessions = self.lock();
        let entry = sessions.entry(session).or_default();
        entry.epoch = epoch;
        entry.host_key = host_key.to_string();
        epoch
    }

    /// The latest epoch and host key of `session`'s harnesses, if it had one.
    pub fn current(&self, session: SessionId) -> Option<(u64, String)> {
        self.lock()
            .get(&session)
            .map(|s| (s.epoch, s.host_key.clone()))
    }

    /// Records `report_id` for `session`; `false` when it was applied already.
    pub fn first_report(&self, session: SessionId, report_id: &str) -> bool {
        let mut sessions = self.lock();
        let entry = sessions.entry(session).or_default();
        if !entry.seen.insert(report_id.to_string()) {
            return false;
        }
        entry.order.push_back(report_id.to_string());
        if entry.order.len() > REMEMBERED_REPORTS {
            if let Some(old) = entry.order.pop_front() {
                entry.seen.remove(&old);
            }
        }
        true
    }

    /// Forgets `session` (it is gone; nothing of it can be served again).
    pub fn forget(&self, session: SessionId) {
        self.lock().remove(&session);
    }

    /// The counters.
    pub fn stats(&self) -> &BridgeStats {
        &self.stats
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, SessionBridge>> {
        match self.sessions.lock() {
            Ok(g) => g,
            // A panic while holding this lock left at worst one entry half-written: an epoch
            // or a report id, each of which only ever makes a check stricter.
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atc_protocol::SessionState;
    use serde_json::json;

    fn binding() -> Binding {
        Binding {
            session: SessionId::NIL,
            target: "box".into(),
            target_identity: "imp:reach-v1:0011".into(),
            host_key: "h".into(),
            epoch: 3,
        }
    }

    fn view() -> SessionView {
        SessionView {
            target: "box".into(),
            target_identity: "imp:reach-v1:0011".into(),
            state: SessionState::NeedsYou,
            last_msg: "Allow?".into(),
        }
    }

    #[test]
    fn hook_lines_and_requests_parse_and_anything_else_is_malformed() {
        let hook = parse(br#"{"atcId":"x","event":"Stop","payload":{}}"#).unwrap();
        assert!(matches!(hook, Line::Hook { ref atc_id, .. } if atc_id == "x"));
        let report =
            parse(br#"{"v":1,"id":7,"op":"report","reportID":"r1","payload":{"kind":"note"}}"#);
        assert_eq!(
            report,
            Ok(Line::Request {
                id: json!(7),
                op: Op::Report {
                    report_id: "r1".into(),
                    payload: json!({"kind": "note"})
                }
            })
        );
        let read = parse(br#"{"v":1,"id":"a","op":"status.read"}"#).unwrap();
        assert_eq!(
            read,
            Line::Request {
                id: json!("a"),
                op: Op::StatusRead
            }
        );
        for tap in ["tap.open", "tap.ack"] {
            let line = format!(r#"{{"v":1,"id":1,"op":"{tap}"}}"#);
            assert!(parse(line.as_bytes()).is_ok(), "{tap}");
        }
        // Malformed, with the id kept when there is one.
        assert_eq!(parse(b"not json"), Err(Malformed { id: None }));
        assert_eq!(parse(b"[1,2]"), Err(Malformed { id: None }));
        assert_eq!(
            parse(br#"{"atcId":"x","event":"Stop","payload":[]}"#),
            Err(Malformed { id: None })
        );
        let unknown = parse(br#"{"v":1,"id":4,"op":"session.kill"}"#);
        assert_eq!(unknown, Err(Malformed { id: Some(json!(4)) }));
        assert!(parse(br#"{"v":2,"id":4,"op":"status.read"}"#).is_err());
        assert!(parse(br#"{"v":1,"op":"status.read"}"#).is_err());
        assert!(parse(br#"{"v":1,"id":{},"op":"status.read"}"#).is_err());
        let long = "r".repeat(129);
        let line = format!(r#"{{"v":1,"id":1,"op":"report","reportID":"{long}","payload":{{}}}}"#);
        assert!(parse(line.as_bytes()).is_err());
        assert!(parse(br#"{"v":1,"id":1,"op":"report","reportID":"","payload":{}}"#).is_err());
        assert!(parse(br#"{"v":1,"id":1,"op":"report","reportID":"r"}"#).is_err());
    }

    #[test]
    fn a_binding_holds_only_for_the_same_session_target_and_newest_harness() {
        let b = binding();
        assert!(binding_holds(&b, Some(&view()), Some((3, "h"))));
        assert!(binding_holds(&b, Some(&view()), None));
        // Gone.
        assert!(!binding_holds(&b, None, Some((3, "h"))));
        // Moved to another target or identity.
        let moved = SessionView {
            target: "other".into(),
            ..view()
        };
        assert!(!binding_holds(&b, Some(&moved), Some((3, "h"))));
        let reconfigured = SessionView {
            target_identity: "imp:reach-v1:ffff".into(),
            ..view()
        };
        assert!(!binding_holds(&b, Some(&reconfigured), Some((3, "h"))));
        // A newer harness, or one on another host.
        assert!(!binding_holds(&b, Some(&view()), Some((4, "h"))));
        assert!(!binding_holds(&b, Some(&view()), Some((3, "other"))));
    }

    #[test]
    fn epochs_grow_and_report_ids_land_once() {
        let bridges = Bridges::default();
        let (a, b) = (
            SessionId::from(uuid::Uuid::from_u128(1)),
            SessionId::from(uuid::Uuid::from_u128(2)),
        );
        let e1 = bridges.begin(a, "ha");
        let e2 = bridges.begin(b, "hb");
        let e3 = bridges.begin(a, "ha");
        assert!(e1 < e2 && e2 < e3);
        assert_eq!(bridges.current(a), Some((e3, "ha".to_string())));
        assert!(bridges.first_report(a, "r1"));
        assert!(!bridges.first_report(a, "r1"));
        // Per session.
        assert!(bridges.first_report(b, "r1"));
        // Old ids are forgotten past the cap, newest kept.
        for i in 0..REMEMBERED_REPORTS {
            assert!(bridges.first_report(a, &format!("n{i}")));
        }
        assert!(bridges.first_report(a, "r1"));
        assert!(!bridges.first_report(a, &format!("n{}", REMEMBERED_REPORTS - 1)));
        bridges.forget(a);
        assert_eq!(bridges.current(a), None);
    }

    #[test]
    fn answers_have_the_spec_shapes() {
        let line = |a: Answer| serde_json::from_slice::<Value>(&a.to_line()).unwrap();
        assert_eq!(
            line(Answer::refusal(Some(&json!(2)), BridgeCode::StaleBinding)),
            json!({"id": 2, "ok": false, "code": "stale_binding"})
        );
        assert_eq!(
            line(Answer::refusal(None, BridgeCode::Forbidden)),
            json!({"ok": false, "code": "forbidden"})
        );
        assert_eq!(
            line(Answer::status(&json!("s"), &view())),
            json!({"id": "s", "ok": true, "state": "needs_you", "lastMsg": "Allow?"})
        );
        assert_eq!(line(Answer::ok(&json!(1))), json!({"id": 1, "ok": true}));
        assert_eq!(
            line(Answer::duplicate(&json!(1))),
            json!({"id": 1, "ok": true, "duplicate": true})
        );
        for (code, word) in [
            (BridgeCode::Forbidden, "forbidden"),
            (BridgeCode::StaleBinding, "stale_binding"),
            (BridgeCode::Unsupported, "unsupported"),
            (BridgeCode::Refused, "refused"),
        ] {
            assert_eq!(serde_json::to_value(code).unwrap(), json!(word));
        }
    }
}
