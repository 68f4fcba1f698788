//! What atc's tests share, in one dev-only crate: the daemon in-process ([`TestDaemon`]) and
//! as a child process ([`ChildDaemon`]), its HTTP and WebSocket clients, the one wait with a
//! deadline ([`wait_until`]), the impd simulator's setups, and the fake model APIs the real
//! agents talk to.
//!
//! The root crate's integration tests (`tests/it/`) and `atc-bench`'s use it as a
//! dev-dependency; `atc-proof` depends on it outright, because its suites start child daemons
//! at run time. The attach-frame reader underneath [`Ws`] is `atc-client`'s
//! [`FrameReader`](atc_client::FrameReader), which the bench's binary needs too.

/// The impd simulator, a crate of its own (compiled once, not into every test binary); tests
/// reach it as `atc_testkit::impd_sim`.
pub use impd_sim;

pub mod agent_shells;
pub mod atc_binary;
pub mod attach_checks;
pub mod broker;
pub mod caps_provider;
pub mod child_daemon;
pub mod claude_world;
pub mod codex_home;
pub mod config;
pub mod fake_anthropic;
pub mod fake_model;
pub mod fake_openai;
pub mod git_repo;
pub mod raw_answer;
pub mod real_agents;
pub mod remote;
pub mod screen;
pub mod test_daemon;
pub mod tls;
pub mod wait;
pub mod ws;

pub use agent_shells::{agent_shells_config, agent_shells_daemon, hook};
pub use atc_binary::atc_bin;
pub use attach_checks::{
    assert_attached_comes_first, attaches_during_heavy_output_continue_exactly,
};
pub use child_daemon::{ChildDaemon, DaemonSpec};
pub use config::{test_agents, test_config, with_imp_target};
pub use remote::{spawn_remote, suspend_when_idle, Remote};
pub use screen::{rendered_rows, terminal_after};
pub use test_daemon::{http_client, id_of, loopback_options, TestDaemon};
pub use tls::TestCert;
pub use wait::{poll, poll_every, poll_ok, wait_for, wait_until, POLL, WITHIN};
pub use ws::{ws_at, Frame, Ws};
