//! What must hold for the socket frames' decoders as clients use them (the CLI, the load tool
//! and the page read `AttachFrame` and `FleetEvent` with serde; the daemon's own decoder of
//! client text is in the daemon's `tests/decoders/checks.rs`). Shared by the fuzz targets and
//! the property tests in `tests/decoders.rs`: a frame that decodes re-encodes to text that
//! decodes to the same frame.

#![allow(dead_code)] // Each harness uses the checks of its own decoders.

use atc_protocol::{AttachFrame, ClientFrame, FleetEvent};

/// A server's text frame on the attach socket.
pub fn attach_frame(text: &[u8]) {
    let Ok(frame) = serde_json::from_slice::<AttachFrame>(text) else {
        return;
    };
    let again = frame.to_text();
    let back: AttachFrame =
        serde_json::from_str(&again).unwrap_or_else(|e| panic!("{again} does not decode: {e}"));
    assert_eq!(back, frame, "{again}");
}

/// A client's text frame on the attach socket, as the wire type reads it.
pub fn client_frame(text: &[u8]) {
    let Ok(frame) = ClientFrame::from_text(text) else {
        return;
    };
    let again = serde_json::to_vec(&frame).expect("a client frame serializes");
    assert_eq!(ClientFrame::from_text(&again).ok(), Some(frame));
}

/// A frame of the events socket.
pub fn fleet_event(text: &[u8]) {
    let Ok(event) = serde_json::from_slice::<FleetEvent>(text) else {
        return;
    };
    let again = event.to_text();
    let back: FleetEvent =
        serde_json::from_str(&again).unwrap_or_else(|e| panic!("{again} does not decode: {e}"));
    assert_eq!(back, event, "{again}");
}
