//! Where the bearer token for impd comes from. The token is read anew before every call and
//! every socket open, so a rotated token file (or a changed variable) takes effect on the next
//! call without restarting anything. The value is trimmed, used for one request and dropped;
//! it is never logged and never put in a URL (spec §2).

use std::path::PathBuf;

use super::error::ImpPortError;

/// The source of impd's bearer token, as a target's options name it (`tokenEnv`/`tokenFile`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// No token: requests go without an `Authorization` header (an impd that trusts the
    /// network, or a tailnet identity).
    None,
    /// The name of an environment variable holding the token (the `tokenEnv` option; the
    /// name, not the value), read at each call.
    Env(String),
    /// A file holding the token (the `tokenFile` option), re-read before every call so
    /// rotation needs no restart.
    File(PathBuf),
}

impl TokenSource {
    /// The current token, trimmed; `Ok(None)` for [`TokenSource::None`]. An unset variable,
    /// an unreadable file or an empty value is `UNAUTHORIZED`: impd would refuse the call
    /// anyway, and the error names the source (never a value).
    pub fn current(&self) -> Result<Option<String>, ImpPortError> {
        let raw = match self {
            TokenSource::None => return Ok(None),
            TokenSource::Env(name) => std::env::var(name).map_err(|_| {
                ImpPortError::unauthorized(format!(
                    "the environment variable {name} holding the impd token is unset"
                ))
            })?,
            TokenSource::File(path) => std::fs::read_to_string(path).map_err(|e| {
                ImpPortError::unauthorized(format!(
                    "the impd token file {} is unreadable: {e}",
                    path.display()
                ))
            })?,
        };
        let token = raw.trim();
        if token.is_empty() {
            return Err(ImpPortError::unauthorized("the impd token is empty"));
        }
        Ok(Some(token.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ImpdCode;

    #[test]
    fn file_is_trimmed_and_reread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "  first\n").unwrap();
        let source = TokenSource::File(path.clone());
        assert_eq!(source.current().unwrap().as_deref(), Some("first"));
        std::fs::write(&path, "second\n").unwrap();
        assert_eq!(source.current().unwrap().as_deref(), Some("second"));
    }

    #[test]
    fn missing_or_empty_sources_are_unauthorized() {
        let dir = tempfile::tempdir().unwrap();
        let missing = TokenSource::File(dir.path().join("nope"));
        assert!(missing.current().unwrap_err().is(ImpdCode::Unauthorized));
        let empty = dir.path().join("empty");
        std::fs::write(&empty, " \n").unwrap();
        assert!(TokenSource::File(empty)
            .current()
            .unwrap_err()
            .is(ImpdCode::Unauthorized));
        let unset = TokenSource::Env("ATC_IMP_TEST_SURELY_UNSET_TOKEN".into());
        assert!(unset.current().unwrap_err().is(ImpdCode::Unauthorized));
        assert_eq!(TokenSource::None.current().unwrap(), None);
    }
}
