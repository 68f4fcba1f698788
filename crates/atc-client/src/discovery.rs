//! Finding a running daemon from the client side: which state dir to look in, and what
//! `daemon.json` and `token` in it say. This module only reads files; it never connects.
//! Whether the daemon at the address it finds is really up is learned on the first request
//! (see `DaemonClient` in `client/mod.rs`).
//!
//! The daemon writes `<state>/daemon.json` (`{"pid","listen","url","version"}`) and
//! `<state>/token` (64 hex chars, maybe with a trailing newline) when it starts.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub use atc_protocol::state_dir::{DAEMON_FILE, TOKEN_FILE};
use serde::Deserialize;

use super::error::ClientError;

/// Where a daemon can be reached and how to prove we may talk to it, as read from a state dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// Base URL without a trailing slash, e.g. `http://127.0.0.1:7767`; API paths start with `/v1`.
    pub base_url: String,
    /// Bearer token, trimmed of surrounding whitespace.
    pub token: String,
    /// The certificate an HTTPS daemon serves (`tlsCert` in `daemon.json`), which the client
    /// pins (see `pinned_tls`).
    pub tls_cert: Option<PathBuf>,
}

/// The two fields of `daemon.json` (`atc_protocol::state_dir::DaemonFile`) that locate the
/// daemon. Read on their own, both optional, because a hand-written or older file may carry
/// only `listen`; a file with neither is refused below with a message naming the file.
#[derive(Debug, Deserialize)]
struct Address {
    url: Option<String>,
    listen: Option<String>,
    #[serde(rename = "tlsCert")]
    tls_cert: Option<String>,
}

/// The state dir used when `--state-dir` is not given: `$XDG_STATE_HOME/atc`, else
/// `~/.local/state/atc`. The daemon uses the same rule, which is what lets a bare `atc ls`
/// find a bare `atc daemon`.
pub fn default_state_dir() -> Result<PathBuf, ClientError> {
    state_dir_from_env(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME"))
}

/// The default-state-dir rule with the environment passed in; the rule itself is
/// `atc_protocol::state_dir::state_dir_from_env`, shared with the daemon so they cannot drift.
pub fn state_dir_from_env(
    xdg_state_home: Option<OsString>,
    home: Option<OsString>,
) -> Result<PathBuf, ClientError> {
    atc_protocol::state_dir::state_dir_from_env(xdg_state_home, home).ok_or(ClientError::NoStateDir)
}

/// Reads `daemon.json` and `token` from `state_dir`. A missing `daemon.json` means no daemon
/// was ever started with this state dir (or it was cleaned up), which is reported as
/// [`ClientError::NotRunning`] so the message can say how to start one.
pub fn read_state_dir(state_dir: &Path) -> Result<Discovered, ClientError> {
    let daemon_path = state_dir.join(DAEMON_FILE);
    let daemon_text = match std::fs::read_to_string(&daemon_path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(ClientError::NotRunning {
                state_dir: state_dir.to_path_buf(),
            })
        }
        Err(err) => {
            return Err(ClientError::StateFile {
                path: daemon_path,
                problem: err.to_string(),
            })
        }
    };
    let base_url = parse_daemon_file(&daemon_text).map_err(|problem| ClientError::StateFile {
        path: daemon_path.clone(),
        problem,
    })?;
    // Already read as JSON above; only an https daemon names a certificate.
    let tls_cert = serde_json::from_str::<Address>(&daemon_text)
        .ok()
        .and_then(|a| a.tls_cert)
        .filter(|c| !c.trim().is_empty())
        .map(PathBuf::from);

    let token_path = state_dir.join(TOKEN_FILE);
    let token_text =
        std::fs::read_to_string(&token_path).map_err(|err| ClientError::StateFile {
            path: token_path.clone(),
            problem: err.to_string(),
        })?;
    let token = parse_token(&token_text).map_err(|problem| ClientError::StateFile {
        path: token_path,
        problem,
    })?;
    Ok(Discovered {
        base_url,
        token,
        tls_cert,
    })
}

/// Extracts the base URL from the text of `daemon.json`: `url` when present, else
/// `http://` + `listen` (older or hand-written files may carry only the address).
pub fn parse_daemon_file(text: &str) -> Result<String, String> {
    let file: Address =
        serde_json::from_str(text).map_err(|err| format!("it is not valid JSON ({err})"))?;
    let url = match (file.url, file.listen) {
        (Some(url), _) if !url.trim().is_empty() => url.trim().to_string(),
        (_, Some(listen)) if !listen.trim().is_empty() => format!("http://{}", listen.trim()),
        _ => return Err("it has neither `url` nor `listen`".to_string()),
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!("its url `{url}` does not start with http://"));
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// Trims the token file's text and checks it can go into an HTTP header as is, so a damaged
/// file is reported here instead of as an obscure header error later.
pub fn parse_token(text: &str) -> Result<String, String> {
    // The file holds the current token on its first line and, while a rotation is under way,
    // the previous one on the second (README, "Rotating the token"); clients use the current.
    let token = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if token.is_empty() {
        return Err("it is empty".to_string());
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("it contains characters that cannot be a token".to_string());
    }
    Ok(token.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_token_of_a_rotating_file_is_used() {
        assert_eq!(
            parse_token("\n new-token \nold-token\n").as_deref(),
            Ok("new-token")
        );
        assert!(parse_token(" \n\n").is_err());
    }

    #[test]
    fn xdg_state_home_wins_when_set() {
        let dir = state_dir_from_env(Some("/x/state".into()), Some("/home/u".into()));
        assert_eq!(dir.ok(), Some(PathBuf::from("/x/state/atc")));
    }

    #[test]
    fn empty_xdg_falls_back_to_home() {
        let dir = state_dir_from_env(Some("".into()), Some("/home/u".into()));
        assert_eq!(dir.ok(), Some(PathBuf::from("/home/u/.local/state/atc")));
    }

    #[test]
    fn no_home_and_no_xdg_is_an_error() {
        assert!(matches!(
            state_dir_from_env(None, None),
            Err(ClientError::NoStateDir)
        ));
    }

    #[test]
    fn daemon_file_prefers_url_and_strips_trailing_slash() {
        let text =
            r#"{"pid":1,"listen":"127.0.0.1:1","url":"http://127.0.0.1:7767/","version":"0.1.0"}"#;
        assert_eq!(
            parse_daemon_file(text).as_deref(),
            Ok("http://127.0.0.1:7767")
        );
    }

    #[test]
    fn daemon_file_falls_back_to_listen() {
        assert_eq!(
            parse_daemon_file(r#"{"listen":"127.0.0.1:9"}"#).as_deref(),
            Ok("http://127.0.0.1:9")
        );
    }

    #[test]
    fn daemon_file_without_address_or_json_is_rejected() {
        assert!(parse_daemon_file(r#"{"pid":1}"#).is_err());
        assert!(parse_daemon_file("not json").is_err());
        assert!(parse_daemon_file(r#"{"url":"ftp://x"}"#).is_err());
    }

    #[test]
    fn token_is_trimmed_and_checked() {
        assert_eq!(parse_token("abc123\n").as_deref(), Ok("abc123"));
        assert!(parse_token("  \n").is_err());
        assert!(parse_token("ab c").is_err());
    }

    #[test]
    fn read_state_dir_reads_both_files() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        std::fs::write(
            dir.path().join(DAEMON_FILE),
            r#"{"pid":42,"listen":"127.0.0.1:5555","url":"http://127.0.0.1:5555","version":"0.1.0"}"#,
        )?;
        std::fs::write(
            dir.path().join(TOKEN_FILE),
            format!("{}\n", "ab".repeat(32)),
        )?;
        let found = read_state_dir(dir.path())?;
        assert_eq!(
            found,
            Discovered {
                base_url: "http://127.0.0.1:5555".into(),
                token: "ab".repeat(32),
                tls_cert: None,
            }
        );
        Ok(())
    }

    #[test]
    fn missing_daemon_file_says_not_running_and_how_to_start(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let err = read_state_dir(dir.path()).err();
        assert!(matches!(err, Some(ClientError::NotRunning { .. })));
        let text = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(text.contains("atc daemon"), "{text}");
        Ok(())
    }

    #[test]
    fn missing_token_names_the_file() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        std::fs::write(
            dir.path().join(DAEMON_FILE),
            r#"{"url":"http://127.0.0.1:1"}"#,
        )?;
        let text = read_state_dir(dir.path())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(text.contains("token"), "{text}");
        Ok(())
    }
}
