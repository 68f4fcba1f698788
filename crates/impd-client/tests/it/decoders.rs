//! Property tests of the decoders of what impd sends, on stable inside `cargo test`: random
//! bytes and mutated real answers and `/exec` messages (the mutations are the daemon's, in
//! `tests/it/decoders/mutate.rs` at the repository root). What must hold is in
//! `decoders/checks.rs`, shared with the fuzz targets.

mod checks;
// The daemon's mutations, at the repository root.
#[path = "../../../../tests/it/decoders/mutate.rs"]
mod mutate;

use mutate::{config, mutated};
use proptest::prelude::*;
use serde_json::{json, Value};

/// Answers impd gives (impd-protocol.md §3): a success, an error envelope, a bare value.
fn envelope_seeds() -> Vec<Value> {
    vec![
        json!({"json": {"name": "imp-1", "state": "running", "createdAt": "2026-01-01T00:00:00Z"}}),
        json!({"json": {"defined": true, "code": "NOT_FOUND", "status": 404,
                        "message": "no imp", "data": {"kind": "imp", "name": "x"}}}),
        json!({"json": {"code": "PRECONDITION_FAILED", "message": "broker",
                        "data": {"reason": "broker_not_ready", "detail": "later"}}}),
        json!({"json": null, "meta": []}),
    ]
}

/// `/exec` text messages (impd-protocol.md §9).
fn exec_seeds() -> Vec<Value> {
    vec![
        json!({"type": "started", "pid": 42, "session": "atc-1", "created": true,
               "output": {"continuity": "offsets", "executionGeneration": "g1", "offset": 0,
                          "resume": {"mode": "replay"}}}),
        json!({"type": "exit", "code": 0, "offset": 1234}),
        json!({"type": "exit", "code": null, "signal": "SIGKILL"}),
        json!({"type": "detached", "reason": "slow", "offset": 99}),
        json!({"type": "error", "code": "NO_SESSION", "message": "gone", "data": {}}),
        json!({"type": "stdin_ack", "bytes": 3}),
    ]
}

/// Statuses impd answers with, and some it never should.
fn status() -> impl Strategy<Value = u16> {
    prop_oneof![
        Just(200u16),
        Just(204),
        Just(400),
        Just(401),
        Just(404),
        Just(409),
        Just(500),
        any::<u16>(),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn envelopes_from_random_bytes(status in status(), body in prop::collection::vec(any::<u8>(), 0..256)) {
        checks::envelope(status, &body);
    }

    #[test]
    fn envelopes_mutated(status in status(), body in mutated(envelope_seeds())) {
        checks::envelope(status, &body);
    }

    #[test]
    fn exec_binary_messages(message in prop::collection::vec(any::<u8>(), 0..64)) {
        checks::exec_binary(&message);
    }

    #[test]
    fn exec_text_from_random_bytes(text in prop::collection::vec(any::<u8>(), 0..256)) {
        checks::exec_text(&text);
    }

    #[test]
    fn exec_text_mutated(text in mutated(exec_seeds())) {
        checks::exec_text(&text);
    }
}
