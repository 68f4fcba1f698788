//! The events socket: its frames as clients decode them (`FleetEvent`, which must re-encode
//! to the same event), and what a client sends it, through the daemon's decoder at the
//! socket's cap. Properties: `crates/atc-protocol/tests/decoders/checks.rs` and
//! `tests/it/decoders/checks.rs`.
#![no_main]

#[path = "../../tests/it/decoders/checks.rs"]
mod checks;
#[path = "../../crates/atc-protocol/tests/decoders/checks.rs"]
mod proto_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((&b, rest)) if b & 1 == 1 => checks::ws_stream(rest, &[], checks::EVENTS_CAP),
        _ => proto_checks::fleet_event(data),
    }
});
