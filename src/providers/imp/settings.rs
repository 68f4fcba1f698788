//! An imp target's options (spec §4.1), read once from the target's config entry. Values the
//! config left out take the spec's defaults; the token is kept as a reference (an environment
//! variable or a file re-read before each call), never as a value.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use super::naming::{DEFAULT_GUEST_DIR, DEFAULT_IMP_PREFIX};
use crate::config::Timings;
use impd_client::TokenSource;

/// What the imp provider of one target works with.
#[derive(Debug, Clone)]
pub struct ImpSettings {
    /// The target's id (for messages and logs).
    pub target: String,
    /// The target's identity (spec §4.2), which session bridges are bound to.
    pub identity: String,
    /// impd's API address.
    pub url: String,
    /// Where the bearer token comes from.
    pub token: TokenSource,
    /// Image for imps atc creates.
    pub image: Option<String>,
    /// Memory for imps atc creates.
    pub memory_mib: Option<u64>,
    /// Where atc keeps its files inside an imp.
    pub guest_dir: String,
    /// `guestATC`: an atc of this daemon's version on the image's `PATH` is used (linked as
    /// `<guestDir>/bin/atc`) instead of a copy of the daemon's own binary (spec §5.3 step 4).
    pub guest_atc: bool,
    /// The atc binary copied into imps whose `bin/atc` needs it: the daemon's own, set by
    /// [`ImpSettings::with_atc_binary`]. `None`: this daemon has no binary to copy, and an imp
    /// that needs one is refused (`no_guest_atc`).
    pub atc_binary: Option<PathBuf>,
    /// Prefix of imp names.
    pub imp_prefix: String,
    /// This daemon's id (the lease label is made from it).
    pub daemon_id: String,
    /// Lease length.
    pub lease_ttl: Duration,
    /// Lease renewal interval.
    pub lease_renew: Duration,
    /// Reconnect delays of a harness.
    pub reconnect_delays: Vec<Duration>,
}

impl ImpSettings {
    /// Reads a target's options. `None` when it has no `url` (such a target lists as
    /// unavailable; `config::targets` says so).
    pub fn from_options(
        target: &str,
        options: &Map<String, Value>,
        daemon_id: &str,
        timings: &Timings,
    ) -> Option<ImpSettings> {
        let text = |k: &str| {
            options
                .get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let url = text("url")?;
        let token = match (text("tokenEnv"), text("tokenFile")) {
            (Some(var), _) => TokenSource::Env(var),
            (None, Some(file)) => TokenSource::File(PathBuf::from(file)),
            (None, None) => TokenSource::None,
        };
        Some(ImpSettings {
            target: target.to_string(),
            identity: super::target_options::identity(options),
            url,
            token,
            image: text("image"),
            memory_mib: options.get("memoryMib").and_then(Value::as_u64),
            guest_dir: text("guestDir").unwrap_or_else(|| DEFAULT_GUEST_DIR.to_string()),
            // A non-boolean value is the target's config problem (`target_options`).
            guest_atc: options.get("guestATC").and_then(Value::as_bool) == Some(true),
            atc_binary: None,
            imp_prefix: text("impPrefix").unwrap_or_else(|| DEFAULT_IMP_PREFIX.to_string()),
            daemon_id: daemon_id.to_string(),
            lease_ttl: timings.imp_lease_ttl,
            lease_renew: timings.imp_lease_renew,
            reconnect_delays: timings.imp_reconnect_delays.clone(),
        })
    }

    /// These settings with `binary` as the atc copied into imps; one that is not an absolute
    /// path to a regular file (a bare `atc` left for `PATH` to find) counts as none.
    pub fn with_atc_binary(mut self, binary: &std::path::Path) -> ImpSettings {
        self.atc_binary = (binary.is_absolute() && binary.is_file()).then(|| binary.to_path_buf());
        self
    }

    /// The lease label of this daemon.
    pub fn lease_label(&self) -> String {
        super::naming::lease_label(&self.daemon_id)
    }

    /// A client for impd (cheap; made where it is used, since awc clients stay on their
    /// thread).
    pub fn client(&self) -> impd_client::ImpdClient {
        impd_client::ImpdClient::new(&self.url, self.token.clone())
    }
}
