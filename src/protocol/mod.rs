//! The daemon's side of the wire: what can be wrong with a request ([`RequestError`]; the
//! wire form of every error is `crate::server::error`'s), request bodies read into `atc-protocol`'s
//! types (`body`), the checked extraction of query parameters (`params`), the one parse of a
//! client's JSON text (`strict_json`), and the canonical JSON hashes (`canonical`). The wire
//! types themselves are the `atc-protocol` crate's; nothing here knows about actors.

pub mod body;
pub mod canonical;
pub mod params;
pub mod request_error;
pub mod strict_json;
// The reassembler lives in its own crate (the impd client and simulator use it too); this
// path stays for the daemon's sockets until they name the crate.
pub use ws_fragments;

pub use request_error::RequestError;
