//! Canonical JSON and its SHA-256: object keys sorted at every depth, arrays in order, no
//! whitespace. Idempotency payload hashes (spec §7.3) and target identities (§4.2) are both
//! taken over this form, so two values that mean the same thing hash the same.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// SHA-256 (lower-case hex) of the canonical form of `v`.
pub fn sha256_hex(v: &Value) -> String {
    let mut canonical = String::new();
    write_canonical(v, &mut canonical);
    let digest = Sha256::digest(canonical.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_empty_object_hashes_to_the_implicit_local_identity() {
        // Spec §4.2: the implicit local target is local-pty:44136fa355b3678a.
        assert!(sha256_hex(&serde_json::json!({})).starts_with("44136fa355b3678a"));
    }
}
