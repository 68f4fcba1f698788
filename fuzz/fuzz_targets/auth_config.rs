//! An agent's `auth` entry (`broker::AgentAuth::from_config`), with the agent's kind and
//! env around it; the rest of the input is the entry's JSON. Properties:
//! `tests/it/decoders/checks.rs`.
#![no_main]

#[path = "../../tests/it/decoders/checks.rs"]
mod checks;

use std::collections::BTreeMap;

use arbitrary::Arbitrary;

#[derive(Debug, Arbitrary)]
struct Input {
    kind: u8,
    env: BTreeMap<String, String>,
    entry: Vec<u8>,
}

libfuzzer_sys::fuzz_target!(|input: Input| {
    let kind = match input.kind % 4 {
        0 => Some("claude"),
        1 => Some("codex"),
        2 => Some("grok"),
        _ => None,
    };
    if let Ok(value) = serde_json::from_slice(&input.entry) {
        checks::auth_entry(&value, kind, &input.env);
    }
});
