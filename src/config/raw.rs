//! The config file's serde shapes, exactly as written by users. Validation into checked values
//! happens in the parent module; nothing else reads these types.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The whole file. Every field is optional; absent ones take the embedded default.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawConfig {
    /// `host:port` to listen on.
    pub listen: Option<String>,
    /// Origins allowed to open WebSockets besides same-host ones.
    pub allowed_origins: Vec<String>,
    /// Extra agents, by id.
    pub agents: BTreeMap<String, RawAgent>,
    /// Sizes and durations.
    pub limits: RawLimits,
}

/// One configured agent.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawAgent {
    /// Program name (looked up on PATH) or path.
    pub bin: String,
    /// Arguments, passed as separate argv elements.
    pub args: Vec<String>,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
    /// Display label.
    pub label: Option<String>,
}

/// Limits; see `config.example.json` for the defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawLimits {
    /// Per-client outbound queue in bytes.
    pub queue_bytes: Option<usize>,
    /// Per-session output ring in bytes.
    pub ring_bytes: Option<usize>,
    /// SIGHUP to SIGKILL grace in milliseconds.
    pub kill_grace_ms: Option<u64>,
    /// Largest accepted request body in bytes.
    pub body_cap_bytes: Option<usize>,
    /// Resize debounce in milliseconds.
    pub resize_debounce_ms: Option<u64>,
}
