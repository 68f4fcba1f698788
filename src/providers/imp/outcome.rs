//! What a remote harness does when one of its connections ends (spec §5.6, outcome table).
//! A pure function of how the connection ended, whether it had started, and the harness's
//! cursor, so every row of the table is unit-tested without a network.

use impd_client::ImpdCode;
use serde_json::Value;

use super::cursor::Cursor;

/// How one `/exec` connection ended: its first terminal event (impd §9.9).
#[derive(Debug, Clone)]
pub enum ConnectionEnd {
    /// impd reported the process's exit.
    Exit {
        /// Exit status; `None` when a signal ended it.
        code: Option<i32>,
        /// Signal name (`SIGHUP`), when one did.
        signal: Option<String>,
    },
    /// impd refused (an `error` message, or an error answering the open).
    Refused {
        /// impd's code (`NO_SESSION`, `INVALID_STATE`, ...).
        code: ImpdCode,
        /// Its message.
        message: String,
        /// Its data.
        data: Value,
    },
    /// The daemon's launch gate refused before anything was sent (its message says why).
    LaunchRefused(String),
    /// The socket ended while the process runs on (`taken_over`, `slow`, `lost`).
    Detached {
        /// The reason.
        reason: String,
    },
    /// The socket closed with no message first (1011, 1012, 1008, or a transport loss).
    Closed {
        /// The close code, when there was a close frame.
        code: Option<u16>,
    },
    /// impd could not be reached.
    Unreachable(String),
    /// impd refused the token.
    Unauthorized,
    /// Something on our side failed while handling the connection.
    HandlerError(String),
}

/// What the harness does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// The process exited: end the harness with this status.
    Exited {
        /// Exit status (impd's `null` with no signal reads as 1).
        code: Option<i32>,
        /// Signal number.
        signal: Option<i32>,
    },
    /// End the harness without a confirmed exit; the text says why.
    Ended(String),
    /// The host went to sleep: end the harness as suspended.
    Suspended,
    /// Forget the cursor and attach fresh at once.
    FreshAttach,
    /// Reconnect at once, counting no failure.
    ReconnectNow,
    /// Reconnect after the next delay of the failure counter (`handler`: our own errors have
    /// a counter of their own); `why` ends the harness when the delays run out.
    Retry {
        /// Whether the failure was ours.
        handler: bool,
        /// The outcome's text.
        why: String,
    },
}

/// Why impd refused a start behind the broker, as the spawn that waits for it is answered
/// (spec §5.6: `PRECONDITION_FAILED` rows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartRefusal {
    /// impd cannot check `require` (before 0.30): nothing was sent.
    ImpdTooOld,
    /// impd refused: its broker is not ready for this start.
    BrokerNotReady {
        /// impd's detail.
        detail: String,
    },
}

/// The start refusal a connection's end carries, if it is one.
pub fn start_refusal(end: &ConnectionEnd) -> Option<StartRefusal> {
    let ConnectionEnd::Refused {
        code,
        message,
        data,
    } = end
    else {
        return None;
    };
    if *code != ImpdCode::PreconditionFailed {
        return None;
    }
    let detail = data
        .get("detail")
        .and_then(Value::as_str)
        .unwrap_or(message)
        .to_string();
    Some(match data.get("reason").and_then(Value::as_str) {
        Some("impd_outdated") => StartRefusal::ImpdTooOld,
        _ => StartRefusal::BrokerNotReady { detail },
    })
}

/// Decides what follows a connection's end.
pub fn decide(end: &ConnectionEnd, started: bool, cursor: &Cursor) -> Next {
    match end {
        ConnectionEnd::Exit { code, signal } => {
            let signal = signal.as_deref().and_then(signal_number);
            Next::Exited {
                code: code.or(if signal.is_none() { Some(1) } else { None }),
                signal,
            }
        }
        ConnectionEnd::Refused {
            code,
            message,
            data,
        } => refused(code, message, data, cursor),
        ConnectionEnd::LaunchRefused(message) => Next::Ended(format!("launch refused ({message})")),
        ConnectionEnd::Detached { reason } if started && reason == "slow" => Next::ReconnectNow,
        ConnectionEnd::Closed { code: Some(1011) } if started => Next::ReconnectNow,
        ConnectionEnd::Detached { reason } => Next::Retry {
            handler: false,
            why: format!("imp detached the session ({reason})"),
        },
        ConnectionEnd::Closed { code: Some(1008) } => {
            Next::Ended("impd revoked the token (close 1008); fix the target's token".into())
        }
        ConnectionEnd::Closed { code } => Next::Retry {
            handler: false,
            why: match code {
                Some(1012) => "impd restarted and did not come back".into(),
                Some(c) => format!("connection to impd closed ({c})"),
                None => "connection to impd lost".into(),
            },
        },
        ConnectionEnd::Unreachable(detail) => Next::Retry {
            handler: false,
            why: format!("impd unreachable ({detail})"),
        },
        ConnectionEnd::Unauthorized => {
            Next::Ended("impd refused the token; fix the target's token".into())
        }
        ConnectionEnd::HandlerError(detail) => Next::Retry {
            handler: true,
            why: format!("the session's connection failed ({detail})"),
        },
    }
}

fn refused(code: &ImpdCode, message: &str, data: &Value, cursor: &Cursor) -> Next {
    match code {
        ImpdCode::InvalidResume => Next::FreshAttach,
        ImpdCode::NoSession => lost(data, cursor),
        ImpdCode::InvalidState => match data.get("state").and_then(Value::as_str) {
            Some("sleeping") => Next::Suspended,
            Some(state) => Next::Ended(format!("imp is {state}")),
            None => Next::Ended("imp is not running".into()),
        },
        ImpdCode::PreconditionFailed => {
            let detail = data
                .get("detail")
                .and_then(Value::as_str)
                .unwrap_or(message);
            match data.get("reason").and_then(Value::as_str) {
                Some("impd_outdated") => Next::Ended("impd too old to require the broker".into()),
                _ => Next::Ended(format!("imp broker not ready ({detail})")),
            }
        }
        ImpdCode::Absent => Next::Ended(format!("imp refused the session ({message})")),
        other => Next::Ended(format!("imp refused the session ({other})")),
    }
}

/// `NO_SESSION`: nothing runs under the name in the imp's current boot. Our own generation's
/// recorded exit in the same boot is an exit; a cold boot after ours names its cause.
fn lost(data: &Value, cursor: &Cursor) -> Next {
    let boot = data.get("bootId").and_then(Value::as_str);
    let previous = data.get("previous");
    let prev_generation = previous
        .and_then(|p| p.get("executionGeneration"))
        .and_then(Value::as_str);
    if boot.is_some()
        && boot == cursor.boot_id()
        && prev_generation.is_some()
        && prev_generation == cursor.generation()
    {
        let code = previous
            .and_then(|p| p.get("exitCode"))
            .and_then(Value::as_i64)
            .map(|c| c as i32);
        return Next::Exited {
            code: Some(code.unwrap_or(1)),
            signal: None,
        };
    }
    let boots = data
        .get("coldBoots")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ours = cursor.boot_id().and_then(|mine| {
        boots
            .iter()
            .position(|b| b.get("bootId").and_then(Value::as_str) == Some(mine))
    });
    if let Some(i) = ours.filter(|i| *i > 0) {
        let cause = boots[i - 1]
            .get("cause")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        return Next::Ended(format!("imp rebooted ({cause})"));
    }
    Next::Ended("ended, cause unknown".into())
}

/// The number of a signal impd names (`SIGHUP` → 1); unknown names give `None`.
pub fn signal_number(name: &str) -> Option<i32> {
    const SIGNALS: &[(&str, i32)] = &[
        ("SIGHUP", 1),
        ("SIGINT", 2),
        ("SIGQUIT", 3),
        ("SIGILL", 4),
        ("SIGTRAP", 5),
        ("SIGABRT", 6),
        ("SIGBUS", 7),
        ("SIGFPE", 8),
        ("SIGKILL", 9),
        ("SIGUSR1", 10),
        ("SIGSEGV", 11),
        ("SIGUSR2", 12),
        ("SIGPIPE", 13),
        ("SIGALRM", 14),
        ("SIGTERM", 15),
    ];
    SIGNALS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::super::cursor::Continuity;
    use super::*;
    use serde_json::json;

    fn following(boot: &str, generation: &str) -> Cursor {
        let mut c = Cursor::default();
        c.begin(
            Some(&Continuity {
                boot_id: boot.into(),
                generation: generation.into(),
                offset: 0,
                prelude: 0,
            }),
            true,
        );
        c
    }

    fn refused(code: &str, data: Value) -> ConnectionEnd {
        ConnectionEnd::Refused {
            code: ImpdCode::parse(code),
            message: "text".into(),
            data,
        }
    }

    #[test]
    fn every_outcome_row_maps_as_the_spec_says() {
        let c = following("B1", "G1");
        let boots =
            json!([{"bootId": "B2", "cause": "watchdog"}, {"bootId": "B1", "cause": "start"}]);
        let cases: Vec<(ConnectionEnd, bool, Next)> = vec![
            (
                ConnectionEnd::Exit {
                    code: Some(3),
                    signal: None,
                },
                true,
                Next::Exited {
                    code: Some(3),
                    signal: None,
                },
            ),
            (
                ConnectionEnd::Exit {
                    code: None,
                    signal: Some("SIGHUP".into()),
                },
                true,
                Next::Exited {
                    code: None,
                    signal: Some(1),
                },
            ),
            (
                ConnectionEnd::Exit {
                    code: None,
                    signal: None,
                },
                true,
                Next::Exited {
                    code: Some(1),
                    signal: None,
                },
            ),
            (
                refused("INVALID_RESUME", json!({"end": 3})),
                false,
                Next::FreshAttach,
            ),
            (
                refused(
                    "NO_SESSION",
                    json!({"bootId": "B1", "coldBoots": [], "previous": {"executionGeneration": "G1", "exitCode": 7}}),
                ),
                false,
                Next::Exited {
                    code: Some(7),
                    signal: None,
                },
            ),
            (
                refused(
                    "NO_SESSION",
                    json!({"bootId": "B1", "previous": {"executionGeneration": "G0", "exitCode": 7}}),
                ),
                false,
                Next::Ended("ended, cause unknown".into()),
            ),
            (
                refused("NO_SESSION", json!({"bootId": "B2", "coldBoots": boots})),
                false,
                Next::Ended("imp rebooted (watchdog)".into()),
            ),
            (
                refused(
                    "NO_SESSION",
                    json!({"bootId": "B9", "coldBoots": [{"bootId": "B9", "cause": "start"}]}),
                ),
                false,
                Next::Ended("ended, cause unknown".into()),
            ),
            (
                refused("INVALID_STATE", json!({"state": "sleeping"})),
                false,
                Next::Suspended,
            ),
            (
                refused("INVALID_STATE", json!({"state": "stopped"})),
                false,
                Next::Ended("imp is stopped".into()),
            ),
            (
                refused(
                    "PRECONDITION_FAILED",
                    json!({"reason": "broker_not_ready", "detail": "no grant"}),
                ),
                false,
                Next::Ended("imp broker not ready (no grant)".into()),
            ),
            (
                refused("SESSION_LIMIT", Value::Null),
                false,
                Next::Ended("imp refused the session (SESSION_LIMIT)".into()),
            ),
            (
                ConnectionEnd::Closed { code: Some(1011) },
                true,
                Next::ReconnectNow,
            ),
            (
                ConnectionEnd::Detached {
                    reason: "slow".into(),
                },
                true,
                Next::ReconnectNow,
            ),
            (
                ConnectionEnd::Closed { code: Some(1011) },
                false,
                Next::Retry {
                    handler: false,
                    why: "connection to impd closed (1011)".into(),
                },
            ),
            (
                ConnectionEnd::Closed { code: Some(1012) },
                true,
                Next::Retry {
                    handler: false,
                    why: "impd restarted and did not come back".into(),
                },
            ),
            (
                ConnectionEnd::Detached {
                    reason: "taken_over".into(),
                },
                true,
                Next::Retry {
                    handler: false,
                    why: "imp detached the session (taken_over)".into(),
                },
            ),
            (
                ConnectionEnd::Unreachable("connection refused".into()),
                false,
                Next::Retry {
                    handler: false,
                    why: "impd unreachable (connection refused)".into(),
                },
            ),
            (
                ConnectionEnd::HandlerError("boom".into()),
                true,
                Next::Retry {
                    handler: true,
                    why: "the session's connection failed (boom)".into(),
                },
            ),
        ];
        for (end, started, want) in cases {
            assert_eq!(decide(&end, started, &c), want, "{end:?} started={started}");
        }
        assert!(matches!(
            decide(&ConnectionEnd::Unauthorized, true, &c),
            Next::Ended(_)
        ));
        assert!(matches!(
            decide(&ConnectionEnd::Closed { code: Some(1008) }, true, &c),
            Next::Ended(_)
        ));
    }

    #[test]
    fn broker_preconditions_are_start_refusals_and_nothing_else_is() {
        let refused = |code: &str, data: Value| ConnectionEnd::Refused {
            code: ImpdCode::parse(code),
            message: "m".into(),
            data,
        };
        assert_eq!(
            start_refusal(&refused(
                "PRECONDITION_FAILED",
                json!({"reason": "broker_not_ready", "detail": "no grant"})
            )),
            Some(StartRefusal::BrokerNotReady {
                detail: "no grant".into()
            })
        );
        assert_eq!(
            start_refusal(&refused(
                "PRECONDITION_FAILED",
                json!({"reason": "impd_outdated"})
            )),
            Some(StartRefusal::ImpdTooOld)
        );
        assert_eq!(start_refusal(&refused("NO_SESSION", json!({}))), None);
        assert_eq!(start_refusal(&ConnectionEnd::Unauthorized), None);
    }
}
