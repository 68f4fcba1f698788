//! impd's oRPC answers (`envelope::decode_response`): an HTTP status (the first two bytes)
//! and a body. Properties: `crates/impd-client/tests/it/decoders/checks.rs`.
#![no_main]

#[path = "../../crates/impd-client/tests/it/decoders/checks.rs"]
mod impd_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (status, body) = match data {
        [a, b, body @ ..] => (u16::from_be_bytes([*a, *b]), body),
        _ => (200, data),
    };
    impd_checks::envelope(status, body);
});
