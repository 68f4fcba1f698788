//! What came back for each request of the storm (a spawn, a health probe, an echo trip), and
//! the count of each kind.
//!
//! Issue 35 judges the storm on answers, not only on latency: every spawn answered, none of its
//! connections reset, and a refusal for load (`host_unavailable` with `problem: busy` and a
//! `Retry-After`, or `problem: memory_low`) counted apart from an error. So an answer is put in
//! one of a few kinds here, from the status, the `Retry-After` header and the error body, and a
//! [`Tally`] keeps how many of each. Nothing here sends anything.

use std::collections::BTreeMap;

use atc_client::ApiError;
use atc_protocol::ErrorCode;
use serde::Serialize;

use crate::api::{Exchange, Fault};

/// One request's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A success (a spawn's 201, the health's 200, an echo that came back).
    Ok,
    /// `host_unavailable`, `problem: busy`: the spawn queue is full; `retry_after` says
    /// whether the answer carried the header the issue asks for.
    Busy { retry_after: bool },
    /// `host_unavailable`, `problem: memory_low`.
    MemoryLow,
    /// Any other error answer, named `code` or `code/problem`, with the daemon's message.
    Error { code: String, message: String },
    /// No answer within the request's limit.
    TimedOut,
    /// The connection could not be made.
    Unreachable(String),
    /// The connection broke before the answer was complete.
    Reset(String),
}

impl Answer {
    /// The kind of a bare exchange's outcome: a 2xx is [`Answer::Ok`], anything else is read
    /// as the daemon's error body.
    pub fn of(exchange: &Result<Exchange, Fault>) -> Answer {
        match exchange {
            Ok(e) if (200..300).contains(&e.status) => Answer::Ok,
            Ok(e) => Answer::refusal(
                &ApiError::from_response(e.status, &e.body),
                e.retry_after.is_some(),
            ),
            Err(Fault::TimedOut) => Answer::TimedOut,
            Err(Fault::Unreachable(why)) => Answer::Unreachable(why.clone()),
            Err(Fault::Reset(why)) => Answer::Reset(why.clone()),
        }
    }

    /// The kind of an error answer; `retry_after` when it carried the header.
    fn refusal(err: &ApiError, retry_after: bool) -> Answer {
        let problem = err.data.get("problem").and_then(serde_json::Value::as_str);
        let code = match problem {
            Some("busy") if err.is(ErrorCode::HostUnavailable) => {
                return Answer::Busy { retry_after }
            }
            Some("memory_low") if err.is(ErrorCode::HostUnavailable) => return Answer::MemoryLow,
            Some(problem) => format!("{}/{problem}", err.code),
            None => err.code.to_string(),
        };
        Answer::Error {
            code,
            message: err.message.clone(),
        }
    }
}

/// How many requests got each kind of [`Answer`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tally {
    /// Successes.
    pub ok: u64,
    /// `busy` refusals.
    pub busy: u64,
    /// Of those, the ones with a `Retry-After` header.
    pub busy_with_retry_after: u64,
    /// `memory_low` refusals.
    pub memory_low: u64,
    /// Other error answers, by `code` or `code/problem`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
    /// Requests that got no answer within their limit.
    pub timed_out: u64,
    /// Connections that could not be made.
    pub unreachable: u64,
    /// Connections that broke mid-request (reset, closed early).
    pub reset: u64,
    /// The first answer that was neither a success nor a refusal for load, for the report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_fault: Option<String>,
}

impl Tally {
    /// Counts one answer.
    pub fn add(&mut self, answer: Answer) {
        let fault = match answer {
            Answer::Ok => {
                self.ok += 1;
                None
            }
            Answer::Busy { retry_after } => {
                self.busy += 1;
                self.busy_with_retry_after += u64::from(retry_after);
                None
            }
            Answer::MemoryLow => {
                self.memory_low += 1;
                None
            }
            Answer::Error { code, message } => {
                *self.errors.entry(code.clone()).or_default() += 1;
                Some(format!("{code}: {message}"))
            }
            Answer::TimedOut => {
                self.timed_out += 1;
                Some("timed out".into())
            }
            Answer::Unreachable(why) => {
                self.unreachable += 1;
                Some(format!("connection failed: {why}"))
            }
            Answer::Reset(why) => {
                self.reset += 1;
                Some(format!("connection broke: {why}"))
            }
        };
        if let Some(why) = fault {
            self.first_fault.get_or_insert(why);
        }
    }

    /// Requests the daemon answered, successes and refusals alike.
    pub fn answered(&self) -> u64 {
        self.ok + self.busy + self.memory_low + self.errors.values().sum::<u64>()
    }

    /// Requests with no answer: timed out, or their connection failed or broke.
    pub fn unanswered(&self) -> u64 {
        self.timed_out + self.unreachable + self.reset
    }

    /// Every request counted.
    pub fn total(&self) -> u64 {
        self.answered() + self.unanswered()
    }

    /// Connections that failed or broke: what "no connection is reset" is about.
    pub fn connection_faults(&self) -> u64 {
        self.unreachable + self.reset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(code: &str, message: &str) -> Answer {
        Answer::Error {
            code: code.into(),
            message: message.into(),
        }
    }

    fn answer(status: u16, retry_after: Option<&str>, body: &str) -> Answer {
        Answer::of(&Ok(Exchange {
            status,
            retry_after: retry_after.map(str::to_string),
            body: bytes::Bytes::copy_from_slice(body.as_bytes()),
        }))
    }

    const BUSY: &str = r#"{"error":{"code":"host_unavailable","message":"queue full",
        "data":{"problem":"busy"}}}"#;
    const LOW: &str = r#"{"error":{"code":"host_unavailable","message":"low",
        "data":{"problem":"memory_low","availableMiB":100,"floorMiB":512}}}"#;
    const NO_CGROUPS: &str = r#"{"error":{"code":"unsupported_operation","message":"m",
        "data":{"problem":"no_cgroups"}}}"#;

    #[test]
    fn load_refusals_are_told_from_errors() {
        assert_eq!(answer(201, None, "{}"), Answer::Ok);
        assert_eq!(answer(200, None, ""), Answer::Ok);
        assert_eq!(
            answer(503, Some("1"), BUSY),
            Answer::Busy { retry_after: true }
        );
        assert_eq!(answer(503, None, BUSY), Answer::Busy { retry_after: false });
        assert_eq!(answer(503, None, LOW), Answer::MemoryLow);
        assert_eq!(
            answer(422, None, NO_CGROUPS),
            error("unsupported_operation/no_cgroups", "m")
        );
        let unknown = r#"{"error":{"code":"no_such_agent","message":"m"}}"#;
        assert_eq!(answer(404, None, unknown), error("no_such_agent", "m"));
        assert!(matches!(
            answer(502, None, "<html>"),
            Answer::Error { code, .. } if code == "http_502"
        ));
        // `busy` under another code is not the admission's refusal.
        let odd = r#"{"error":{"code":"bad_args","message":"m","data":{"problem":"busy"}}}"#;
        assert_eq!(answer(400, None, odd), error("bad_args/busy", "m"));
    }

    #[test]
    fn faults_keep_their_kind() {
        assert_eq!(Answer::of(&Err(Fault::TimedOut)), Answer::TimedOut);
        assert_eq!(
            Answer::of(&Err(Fault::Reset("peer reset".into()))),
            Answer::Reset("peer reset".into())
        );
        assert_eq!(
            Answer::of(&Err(Fault::Unreachable("refused".into()))),
            Answer::Unreachable("refused".into())
        );
    }

    #[test]
    fn the_tally_counts_each_kind_once() {
        let mut t = Tally::default();
        for a in [
            Answer::Ok,
            Answer::Ok,
            Answer::Busy { retry_after: true },
            Answer::Busy { retry_after: false },
            Answer::MemoryLow,
            error("bad_args", "head late"),
            error("bad_args", "other"),
            Answer::TimedOut,
            Answer::Reset("reset by peer".into()),
            Answer::Unreachable("refused".into()),
        ] {
            t.add(a);
        }
        assert_eq!(t.ok, 2);
        assert_eq!((t.busy, t.busy_with_retry_after, t.memory_low), (2, 1, 1));
        assert_eq!(t.errors.get("bad_args"), Some(&2));
        assert_eq!((t.timed_out, t.reset, t.unreachable), (1, 1, 1));
        assert_eq!((t.answered(), t.unanswered(), t.total()), (7, 3, 10));
        assert_eq!(t.connection_faults(), 2);
        assert_eq!(t.first_fault.as_deref(), Some("bad_args: head late"));
    }

    #[test]
    fn the_json_leaves_out_what_did_not_happen() {
        let mut t = Tally::default();
        t.add(Answer::Ok);
        let v = serde_json::to_value(&t).expect("serializes");
        assert_eq!(v["ok"], 1);
        assert_eq!(v["busyWithRetryAfter"], 0);
        assert!(v.get("errors").is_none() && v.get("firstFault").is_none());
    }
}
