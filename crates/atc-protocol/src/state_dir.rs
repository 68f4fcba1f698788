//! The files a daemon leaves in its state dir for clients, and where that dir is. Clients
//! and the daemon read the same rules from here, so `atc ls` finds a bare `atc daemon`.

use std::ffi::OsString;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The daemon's address record inside the state dir; removed on a clean stop.
pub const DAEMON_FILE: &str = "daemon.json";
/// The bearer token file inside the state dir (mode 0600). Its first line is the current
/// token; during a rotation a second line holds the previous one, still accepted.
pub const TOKEN_FILE: &str = "token";

/// What `daemon.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonFile {
    /// The daemon's pid.
    pub pid: u32,
    /// `host:port` it listens on.
    pub listen: String,
    /// Base URL for clients, like `http://127.0.0.1:7767`.
    pub url: String,
    /// Build version.
    pub version: String,
    /// When the daemon serves HTTPS: the absolute path of its certificate chain (PEM), which
    /// clients on this machine pin (it is public; the key's path is not written).
    #[serde(default, rename = "tlsCert", skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<String>,
}

/// The default state dir with the environment passed in: a non-empty `XDG_STATE_HOME` gives
/// `$XDG_STATE_HOME/atc`, else `$HOME/.local/state/atc`; `None` when neither is set.
pub fn state_dir_from_env(
    xdg_state_home: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    if let Some(x) = xdg_state_home.filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(x).join("atc"));
    }
    home.filter(|v| !v.is_empty())
        .map(|h| PathBuf::from(h).join(".local/state/atc"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdg_state_home_wins_and_empty_values_do_not_count() {
        assert_eq!(
            state_dir_from_env(Some("/x".into()), Some("/home/u".into())),
            Some(PathBuf::from("/x/atc"))
        );
        assert_eq!(
            state_dir_from_env(Some("".into()), Some("/home/u".into())),
            Some(PathBuf::from("/home/u/.local/state/atc"))
        );
        assert_eq!(state_dir_from_env(None, Some("".into())), None);
    }
}
