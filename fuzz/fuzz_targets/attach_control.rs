//! The attach socket's client text frames: the daemon's decoder (`server::control_frame`)
//! and the wire type clients encode with. Properties: `tests/it/decoders/checks.rs`.
#![no_main]

#[path = "../../tests/it/decoders/checks.rs"]
mod checks;
#[path = "../../crates/atc-protocol/tests/decoders/checks.rs"]
mod proto_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    checks::attach_control(data);
    proto_checks::client_frame(data);
});
