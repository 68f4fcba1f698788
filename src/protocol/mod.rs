//! What crosses the wire: the closed error-code set and its HTTP mapping (`error`), the JSON
//! shapes clients see (`wire`), and the checked extraction of request parameters (`params`).
//! Nothing here knows about actors; the server and the sessions both speak these types.

pub mod canonical;
pub mod error;
pub mod params;
pub mod wire;
// The reassembler lives in its own crate (the impd client and simulator use it too); this
// path stays for the daemon's sockets until they name the crate.
pub use ws_fragments;

pub use error::{DaemonError, ErrorCode};
