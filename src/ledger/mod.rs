//! The idempotency ledger (spec §7): a retried spawn never runs twice.
//!
//! A request with an `Idempotency-Key` goes through the [`KeyLock`](key_lock::KeyLock) actor of
//! its (principal, operation, key), which runs one request at a time: look the key up, claim it
//! with the pre-minted session id, spawn, wait for the session's row to be durable, mark the
//! key completed with the result. A retry finds the key completed and gets the current
//! descriptor back; a different payload under the same key is a conflict; a key whose effect
//! may or may not have happened (a daemon died between claim and completion) answers
//! `outcome_unknown` forever. [`IdempotencyLedger`](idempotency_ledger::IdempotencyLedger) hands out the
//! key locks and sweeps old completed keys.

pub mod idempotency_ledger;
pub mod key_lock;

use crate::protocol::canonical;
use serde_json::Value;

/// The payload of a spawn as spec §7.3 hashes it: the parsed params with defaults applied and
/// the key fields left out; `parent` as the request named it.
pub fn spawn_payload(spawn: &crate::sessions::messages::Spawn, parent: Option<&str>) -> Value {
    let mut payload = serde_json::json!({
        "agent": spawn.agent,
        "cwd": spawn.cwd,
        "name": spawn.name,
        "cols": spawn.size.cols,
        "rows": spawn.size.rows,
        "target": spawn.target,
        "model": spawn.model,
        "effort": spawn.effort,
    });
    // Only when given, so the keys of spawns without one hash as they always did.
    if let (Some(ask), Some(fields)) = (&spawn.workspace, payload.as_object_mut()) {
        fields.insert("workspace".into(), ask.payload());
    }
    // The parent it joins as the request named it (the params as parsed, spec §7.3, so a
    // parent gone since still replays), for the same reason only when there is one.
    if let (Some(parent), Some(fields)) = (parent, payload.as_object_mut()) {
        fields.insert("parent".into(), serde_json::json!(parent));
    }
    // The limits it runs under, for the same reason only when there are some. These are the
    // effective ones: a retry after config changed them is another spawn, not a replay.
    if let (false, Some(fields)) = (spawn.limits.is_empty(), payload.as_object_mut()) {
        fields.insert("limits".into(), serde_json::json!(spawn.limits));
    }
    payload
}

/// SHA-256 (hex) of a payload in canonical form (spec §7.3); see [`canonical`].
pub fn payload_hash(payload: &Value) -> String {
    canonical::sha256_hex(payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_change_the_hash_but_values_and_array_order_do() {
        let a = payload_hash(&json!({"b": 1, "a": {"y": [1, 2], "x": null}}));
        let b = payload_hash(&json!({"a": {"x": null, "y": [1, 2]}, "b": 1}));
        assert_eq!(a, b);
        assert_eq!(a.len(), 64);
        assert_ne!(
            a,
            payload_hash(&json!({"a": {"x": null, "y": [2, 1]}, "b": 1}))
        );
        assert_ne!(
            a,
            payload_hash(&json!({"a": {"x": null, "y": [1, 2]}, "b": 2}))
        );
    }
}
