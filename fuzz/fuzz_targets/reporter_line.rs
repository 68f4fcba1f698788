//! The reporter socket's line (`server::reporter::parse`). Properties:
//! `tests/it/decoders/checks.rs`.
#![no_main]

#[path = "../../tests/it/decoders/checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    checks::reporter_line(data);
});
