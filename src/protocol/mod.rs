//! The daemon's side of the wire: [`DaemonError`] (a refusal on its way to a client, with its
//! code from `atc_protocol`), the checked extraction of request parameters (`params`), and the
//! canonical JSON hashes (`canonical`). The wire types themselves are the `atc-protocol`
//! crate's; nothing here knows about actors.

pub mod canonical;
pub mod error;
pub mod params;
// The reassembler lives in its own crate (the impd client and simulator use it too); this
// path stays for the daemon's sockets until they name the crate.
pub use ws_fragments;

pub use error::{DaemonError, ErrorCode};
