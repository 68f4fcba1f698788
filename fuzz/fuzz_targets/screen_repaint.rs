//! The screen model and its repaint (`atc-screen`): any output in any chunks, then a fresh
//! terminal fed only the repaint. Property: `crates/atc-screen/tests/checks/round_trip.rs`.
#![no_main]

#[path = "../../crates/atc-screen/tests/checks/round_trip.rs"]
mod round_trip;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    round_trip::repaint_round_trip(data, round_trip::Check::Modes);
});
