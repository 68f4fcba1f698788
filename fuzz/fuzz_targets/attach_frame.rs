//! The attach socket's server text frames as clients decode them (`AttachFrame`): what
//! decodes re-encodes to the same frame. Properties: `crates/atc-protocol/tests/decoders/checks.rs`.
#![no_main]

#[path = "../../crates/atc-protocol/tests/decoders/checks.rs"]
mod proto_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    proto_checks::attach_frame(data);
});
