//! What kind of impd the simulator plays: its version, feature flags, agent abilities, RAM
//! budget and clock. Set at start; most of it can be switched later through the fault handle.

use std::net::SocketAddr;

use serde_json::{json, Map, Value};

use super::clock::Clock;

/// `system.info.features` flags (protocol §4). Each one only counts when literally `true`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Features {
    /// Sessions carry `started.output` (off: an impd from before offsets, no `output`).
    pub session_offsets: bool,
    /// `leases.*` exist and imps carry `leases` (off: `/rpc/leases/*` answers 404).
    pub leases: bool,
    /// `/exec` start honours `require` (off: pre-0.30 impd silently ignores it).
    pub exec_require: bool,
    pub grantable_tokens: bool,
    pub secret_rebind: bool,
    pub oauth_secrets: bool,
}

impl Features {
    /// Everything a current impd has.
    pub fn all() -> Features {
        Features {
            session_offsets: true,
            leases: true,
            exec_require: true,
            grantable_tokens: true,
            secret_rebind: true,
            oauth_secrets: true,
        }
    }

    pub fn wire(&self) -> Value {
        let mut m = Map::new();
        m.insert("sessionOffsets".into(), json!(self.session_offsets));
        m.insert("leases".into(), json!(self.leases));
        m.insert("execRequire".into(), json!(self.exec_require));
        m.insert("grantableTokens".into(), json!(self.grantable_tokens));
        m.insert("secretRebind".into(), json!(self.secret_rebind));
        m.insert("oauthSecrets".into(), json!(self.oauth_secrets));
        m.insert("databaseCopy".into(), json!(false));
        m.insert("imageBuildStream".into(), json!(false));
        m.insert("imageOpStream".into(), json!(false));
        m.insert("sessionLog".into(), json!(false));
        Value::Object(m)
    }
}

/// How to start a simulator.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Where clients connect; port 0 picks a free one.
    pub listen: SocketAddr,
    /// The root token; `None` mints a random one.
    pub token: Option<String>,
    /// `system.info.version`.
    pub version: String,
    /// `None`: an impd from before feature flags (no `features` object, no leases, no offsets,
    /// `require` ignored).
    pub features: Option<Features>,
    /// The imps' agents report offsets (off: `continuity: "none"`, replay on every attach,
    /// `resumeFrom` ignored).
    pub agent_offsets: bool,
    /// RAM governor budget; `None` never refuses.
    pub ram_budget_mib: Option<u64>,
    /// `memoryMib` of an imp created without one.
    pub default_memory_mib: u64,
    /// Time for leases, tickets and dates.
    pub clock: Clock,
    /// Largest WebSocket message accepted; a bigger one closes the socket with 1009.
    pub max_message_bytes: usize,
    /// Also check `require` on `attach` (real impd ignores it there; protocol §17.1).
    pub require_on_attach: bool,
    /// Imps that exist (running) when the simulator starts.
    pub imps: Vec<String>,
    /// The image's `PATH` (what a command that sets none runs with); `None`: this machine's.
    /// A test gives a guest with no atc on it, or one whose atc it chose.
    pub image_path: Option<String>,
}

impl Default for SimOptions {
    fn default() -> SimOptions {
        SimOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            version: "0.30.1".into(),
            features: Some(Features::all()),
            agent_offsets: true,
            ram_budget_mib: None,
            default_memory_mib: 1024,
            clock: Clock::system(),
            // The daemon's own test double uses 2 MiB (protocol §17.2); its stdin chunks are 1 MiB.
            max_message_bytes: 2 * 1024 * 1024,
            require_on_attach: false,
            imps: Vec::new(),
            image_path: None,
        }
    }
}

impl SimOptions {
    /// The features in force, `None` when the impd predates flags.
    pub fn flag(&self, pick: impl Fn(&Features) -> bool) -> bool {
        self.features.as_ref().is_some_and(pick)
    }
}
