//! `impd-client`'s tests, one binary: the client against the impd simulator over real
//! loopback HTTP and WebSockets, and the property tests of its decoders. A test goes in the
//! module of the part of impd it talks to.

/// The oRPC envelope and its errors, auth and transport failures, features, imps, `/exec`.
mod against_sim;
/// The credential broker: identities, secrets, grants and their refusals.
mod broker;
/// Property tests of the decoders of what impd sends (the fuzz targets' properties).
mod decoders;
/// The last-moment gate of a launch on an open `/exec` socket.
mod gated_open;
