//! The root crate's integration tests, one binary: every module below links the daemon once,
//! rather than once a file. A test goes in the module of the feature it proves; a helper two
//! modules share goes in the test kit, `crates/atc-testkit` (the in-process and child daemons,
//! their clients, waits with deadlines, the simulator's setups, the fake model APIs).
//!
//! Run one module with `cargo test --test it MODULE::`, e.g. `cargo test --test it attach::`;
//! the page in Chromium is `cargo test --test it page:: -- --ignored`.

/// Attention from output and CPU for agents without hooks (issue 38).
mod activity;
/// The measurements behind the activity rule's defaults (ignored; prints figures).
mod activity_figures;
/// Spawn admission under load: the queue of spawns in flight (`busy`), the memory floor.
mod admission;
/// The attach WebSocket: replay, resume, sizes, input, backpressure and exit.
mod attach;
/// A full-screen agent's terminal modes reach a client that attaches later.
mod attach_modes;
/// Who may talk to the daemon (token, Origin), the events socket, the daemon and agent listings.
mod auth_events;
/// One host's broker binding driven through its actor against the impd simulator.
mod broker_binding;
/// Agents configured with `auth`: listing, spawn only behind a broker, problems per agent.
mod broker_config;
/// The broker's gate reads impd afresh and refuses with each gate code.
mod broker_gate;
/// Rebind through the API after the agent's `auth` changed.
mod broker_rebind;
/// Start-up reconciliation of a binding left mid-change by a SIGKILLed daemon.
mod broker_reconcile;
/// Broker-backed spawns: binding a host, `require: ["broker"]`, impd's refusals.
mod broker_require;
/// Around a broker-backed start: the sign-in check, the descriptor's `auth`, revives.
mod broker_signin;
/// The `atc` client commands as a person runs them, under a PTY or with pipes.
mod cli;
/// `atc send` and `atc wait` as a script runs them: typing into a session, waiting for a state.
mod cli_script;
/// Property tests of the daemon's decoders (the fuzz targets' properties, on stable).
mod decoders;
/// The atc inside an imp: installed by link or copy at readying.
mod guest_atc;
/// Attention from agent hooks: `atc hook-report`, the reporter socket, each kind's states.
mod hooks;
/// The HTTP front under a hostile client: trickled heads and bodies, piles of connections.
mod hostile_http;
/// Hook reports as a hostile process inside a session sends them.
mod hostile_reports;
/// Malformed heads, oversized bodies, the reporter socket on stop, fds a session inherits.
mod http_hygiene;
/// Idempotent spawn: a retried spawn never runs twice.
mod idempotency;
/// Imp hosts through the API: suspend, revive, forget with its confirmation.
mod imp_hosts;
/// A remote session when its connection to impd ends, and its host's lease.
mod imp_outcomes;
/// The report socket inside an imp: hooks of a remote session, guest bridges.
mod imp_reports;
/// Sessions on an imp target: spawn, echo, resize, exits, reconnects.
mod imp_sessions;
/// The layers of `src/`: no import runs up a layer, so no circle between top-level modules.
mod import_graph;
/// The sockets' keep-alive: shared ping beats, the drop of a silent client.
mod keep_alive;
/// A session's life and the daemon's: kill, revive, forget, restarts, restore, the lock.
mod lifecycle;
mod limits;
/// `GET /metrics` before and after real work.
mod metrics;
/// Names and transcript paths read from agents' own files, stale stops, `last_used_agent`.
mod names;
/// The OpenAPI document against the live daemon: routes, answers, first socket frames.
mod openapi;
/// The browser page in real headless Chromium (ignored: `-- --ignored` runs it).
mod page;
/// Principals' own tokens: their files, acceptance beside the owner's, `GET /v1/principals`
/// and `atc principals`.
mod principals;
/// `pty_spawn` on real PTYs: session leader, controlling terminal, fds, exit reports.
mod pty_spawn;
/// Principals' reach: out-of-reach sessions answer as missing ones on every route.
mod reach;
/// The real Claude Code under atc against a fake Messages API (skips when not installed).
mod real_claude;
/// The real Codex CLI under atc against a fake Responses API (skips when not installed).
mod real_codex;
/// Every route's body: a wrong-typed or unknown field named by its path, reserved ones refused.
mod request_bodies;
/// The screen model against recordings of real agent sessions.
/// Regressions the security proof suite found.
mod security;
/// Spawning, listing, typing into and reading sessions; refusals of bad input.
mod sessions;
/// Spawn overrides: checked first, argv without a shell, reused by revives.
mod spawn_options;
/// Sub-sessions: one level under a parent, sharing its imp, following its host's sleeps.
mod sub_sessions;
/// The daemon under systemd: readiness, watchdog, socket activation, a wedged arbiter.
mod systemd;
/// Execution targets: the refusal chain, a session's binding to its target across restarts.
mod targets;
/// HTTPS served by the daemon itself: the API, the page and both sockets over TLS.
mod tls;
/// Which tokens the daemon accepts, and rotation by SIGHUP on a child daemon.
mod token_rotation;
/// Watch-only attach: sees everything, types and sizes nothing.
mod watch;
/// Workspaces: each session in its own copy of a repository, never losing work.
mod workspaces;
/// What the sockets do with frames a careless or hostile client sends (RFC 6455).
mod ws_protocol;
