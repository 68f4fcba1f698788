//! The WebSocket message decoder both sockets read clients with (`server::InboundMessages`,
//! which splits binary from text): any bytes in any chunking, and well-formed messages that
//! must come out as sent. Properties: `tests/it/decoders/checks.rs`.
#![no_main]

#[path = "../../tests/it/decoders/checks.rs"]
mod checks;

use arbitrary::Arbitrary;

#[derive(Debug, Arbitrary)]
enum Input {
    /// Raw bytes, cut into chunks of these sizes.
    Raw {
        splits: Vec<u8>,
        small_cap: bool,
        bytes: Vec<u8>,
    },
    /// Whole messages (binary or text) as a client frames them.
    Messages(Vec<(bool, Vec<u8>)>),
}

libfuzzer_sys::fuzz_target!(|input: Input| match input {
    Input::Raw {
        splits,
        small_cap,
        bytes,
    } => {
        let splits: Vec<usize> = splits.into_iter().map(usize::from).collect();
        let cap = if small_cap { 64 } else { checks::ATTACH_CAP };
        checks::ws_stream(&bytes, &splits, cap);
    }
    Input::Messages(messages) => checks::ws_round_trip(&messages, checks::ATTACH_CAP),
});
