//! atc: a daemon that hosts coding-agent CLIs in pseudo-terminals and serves them to HTTP and
//! WebSocket clients, plus the `atc` command-line clients.
//!
//! Read it layer by layer, from the wire inwards:
//!
//! - [`server`]: actix-web routes, the attach and events WebSockets, auth. Handlers only turn
//!   requests into messages.
//! - [`sessions`]: the `SessionManager` supervisor and one `Session` actor per session, which
//!   owns the screen model, the output ring and the attached clients' bounded queues.
//! - [`providers`]: where processes run. `local-pty` owns a child and its PTY in one actor.
//! - [`store`]: SQLite through sqlx; the only module that names a table.
//! - [`ledger`]: the idempotency ledger, so a retried spawn never runs twice.
//! - [`agents`], [`config`], [`protocol`]: what can run, how it is configured, and what a
//!   request must look like.
//! - [`error`]: the daemon's one error type; each module's error enum, and the one mapping
//!   from them to the wire's code, status and data.
//! - [`impd_client`] (its own crate): the client of impd, the control plane that runs imps
//!   (microVMs) for the imp execution target.
//! - [`metrics`]: what `GET /metrics` shows, one set per daemon.
//! - [`daemon`]: the start-up and shutdown order, state dir, lock and token.
//! - [`cli`]: the `atc` client commands, on the `atc-client` crate, which find a daemon through its state
//!   dir and speak its HTTP/WebSocket API like any other client (the load tool is the `atc-bench` crate).
//!
//! The daemon can be started in-process ([`daemon::Daemon::start`]) on any listener, which is
//! how the integration tests run the real thing on port 0.

pub mod agents;
pub mod cli;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod error;
pub mod ledger;
pub mod metrics;
pub mod permissions;
pub mod protocol;
pub mod providers;
pub mod server;
pub mod sessions;
pub mod store;
