//! The config loader (`Config::from_json`): any text is a config plus problems, never a
//! panic, and no value of the file reaches a problem. Properties: `tests/it/decoders/checks.rs`.
#![no_main]

#[path = "../../tests/it/decoders/checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    checks::config_text(data);
});
