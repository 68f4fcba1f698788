//! atc: a daemon that hosts coding-agent CLIs in pseudo-terminals and serves them to HTTP and
//! WebSocket clients, plus the `atc` command-line clients.
//!
//! Read it layer by layer, from the wire inwards. Each module uses only those below it
//! (`tests/it/import_graph.rs` checks it, and lists the layers):
//!
//! - [`cli`]: the `atc` client commands, on the `atc-client` crate, which find a daemon
//!   through its state dir and speak its HTTP/WebSocket API like any other client (the load
//!   tool is the `atc-bench` crate).
//! - [`daemon`]: the start-up and shutdown order, state dir, lock and token.
//! - [`server`]: actix-web routes, the attach and events WebSockets, auth. Handlers only turn
//!   requests into messages; `server::error` gives every module's error its wire form.
//! - [`ledger`]: the idempotency ledger, so a retried spawn never runs twice.
//! - [`sessions`]: the `SessionManager` supervisor and one `Session` actor per session, which
//!   owns the screen model, the output ring and the attached clients' bounded queues.
//! - [`permissions`]: the permission requests sessions put to their users.
//! - [`store`]: SQLite through sqlx; the only module that names a table.
//! - [`workspaces`]: each agent's own copy of a repository at a commit.
//! - [`providers`]: where processes run, in two wings: `local` (a child and its PTY in one
//!   actor) and `imp` (microVMs on an impd host, with the broker), and the refusal chain.
//! - [`agents`], [`config`]: what can run, and how it is configured.
//! - [`protocol`], [`metrics`], [`clock`]: what a request must look like, what
//!   `GET /metrics` shows, and the time of day.
//! - [`impd_client`] (its own crate): the client of impd, the control plane that runs imps
//!   for the imp execution target.
//!
//! The daemon can be started in-process ([`daemon::Daemon::start`]) on any listener, which is
//! how the integration tests run the real thing on port 0.

pub mod agents;
pub mod cli;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod ledger;
pub mod metrics;
pub mod permissions;
pub mod protocol;
pub mod providers;
pub mod server;
pub mod sessions;
pub mod store;
pub mod workspaces;
