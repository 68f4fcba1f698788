//! impd's `/exec` messages (`exec_messages`): the first byte says binary (channel byte and
//! data) or text (a JSON event). Properties: `crates/impd-client/tests/it/decoders/checks.rs`.
#![no_main]

#[path = "../../crates/impd-client/tests/it/decoders/checks.rs"]
mod impd_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((&b, rest)) if b & 1 == 1 => impd_checks::exec_binary(rest),
        Some((_, rest)) => impd_checks::exec_text(rest),
        None => {}
    }
});
