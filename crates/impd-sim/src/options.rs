//! What kind of impd the simulator plays: its version, feature flags, agent abilities, RAM
//! budget and clock. Set at start; most of it can be switched later through the fault handle.

use std::collections::BTreeSet;
use std::net::SocketAddr;

use serde_json::{json, Map, Value};

use super::clock::Clock;

/// One `system.info.features` flag a client reads (protocol §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Flag {
    SessionOffsets,
    Leases,
    ExecRequire,
    GrantableTokens,
    SecretRebind,
    OauthSecrets,
}

impl Flag {
    /// Every flag, in the order `features` lists them.
    pub const ALL: [Flag; 6] = [
        Flag::SessionOffsets,
        Flag::Leases,
        Flag::ExecRequire,
        Flag::GrantableTokens,
        Flag::SecretRebind,
        Flag::OauthSecrets,
    ];

    pub fn wire(self) -> &'static str {
        match self {
            Flag::SessionOffsets => "sessionOffsets",
            Flag::Leases => "leases",
            Flag::ExecRequire => "execRequire",
            Flag::GrantableTokens => "grantableTokens",
            Flag::SecretRebind => "secretRebind",
            Flag::OauthSecrets => "oauthSecrets",
        }
    }
}

/// What `features` says about one flag: `true`, `false`, or nothing (an impd from before it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagState {
    True,
    False,
    Absent,
}

/// `system.info.features` flags (protocol §4). Each one only counts when literally `true`: a
/// flag in `absent` is left out of `features` and off, whatever its field says.
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
    /// Flags left out of `features` altogether (an impd from before them); they are off.
    pub absent: BTreeSet<Flag>,
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
            absent: BTreeSet::new(),
        }
    }

    fn field(&mut self, flag: Flag) -> &mut bool {
        match flag {
            Flag::SessionOffsets => &mut self.session_offsets,
            Flag::Leases => &mut self.leases,
            Flag::ExecRequire => &mut self.exec_require,
            Flag::GrantableTokens => &mut self.grantable_tokens,
            Flag::SecretRebind => &mut self.secret_rebind,
            Flag::OauthSecrets => &mut self.oauth_secrets,
        }
    }

    /// The field's value, announced or not.
    fn value(&self, flag: Flag) -> bool {
        match flag {
            Flag::SessionOffsets => self.session_offsets,
            Flag::Leases => self.leases,
            Flag::ExecRequire => self.exec_require,
            Flag::GrantableTokens => self.grantable_tokens,
            Flag::SecretRebind => self.secret_rebind,
            Flag::OauthSecrets => self.oauth_secrets,
        }
    }

    /// Whether the flag is on: announced, and announced as `true`.
    pub fn has(&self, flag: Flag) -> bool {
        !self.absent.contains(&flag) && self.value(flag)
    }

    /// Announces the flag as `true` or `false`, or leaves it out.
    pub fn set(&mut self, flag: Flag, state: FlagState) {
        *self.field(flag) = state == FlagState::True;
        if state == FlagState::Absent {
            self.absent.insert(flag);
        } else {
            self.absent.remove(&flag);
        }
    }

    pub fn wire(&self) -> Value {
        let mut m = Map::new();
        for flag in Flag::ALL {
            if !self.absent.contains(&flag) {
                m.insert(flag.wire().into(), json!(self.value(flag)));
            }
        }
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
    /// Whether `flag` is on (an impd from before flags has none).
    pub fn has(&self, flag: Flag) -> bool {
        self.features.as_ref().is_some_and(|f| f.has(flag))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_is_on_only_when_announced_true() {
        let mut f = Features::all();
        for flag in Flag::ALL {
            assert!(f.has(flag), "{flag:?}");
        }
        f.set(Flag::ExecRequire, FlagState::False);
        f.set(Flag::SecretRebind, FlagState::Absent);
        assert!(!f.has(Flag::ExecRequire) && !f.has(Flag::SecretRebind));
        let wire = f.wire();
        assert_eq!(wire["execRequire"], false);
        assert!(wire.get("secretRebind").is_none(), "{wire}");
        assert_eq!(wire["grantableTokens"], true);
        // Setting a field by hand does not bring an absent flag back.
        f.secret_rebind = true;
        assert!(!f.has(Flag::SecretRebind));
        f.set(Flag::SecretRebind, FlagState::True);
        assert!(f.has(Flag::SecretRebind) && f.wire()["secretRebind"] == true);
    }

    #[test]
    fn an_impd_before_flags_has_none() {
        let opts = SimOptions {
            features: None,
            ..SimOptions::default()
        };
        assert!(Flag::ALL.iter().all(|f| !opts.has(*f)));
    }
}
