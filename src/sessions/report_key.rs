//! Which session a reporter-socket line belongs to. The socket is one per daemon, and any
//! process of the user's can write to it, so a line's `atcId` alone would let one session
//! report as another. Each start of a local session's process therefore gets a credential of
//! its own in its environment (`ATC_REPORT_KEY`, beside `ATC_SESSION_ID`), and a line must
//! carry the key of the session it names.
//!
//! A key is HMAC-SHA256 over the session id under a secret drawn at each daemon start, cut to
//! 128 bits: nothing needs to be stored, any part of the daemon can check a key against the id
//! it came with, and keys die with the daemon run, as the processes they were given to do
//! (a daemon stops its local sessions, and ends a killed one's survivors at its next start).
//! Remote sessions need none: their bridge is bound to one session by its socket (spec §5.7),
//! and the key never goes into an imp.
//!
//! It is a credential against mistakes and against a process that only knows ids (`atc ls`
//! prints them), not against one that reads another process's environment: processes of one
//! user can read each other's `/proc/<pid>/environ`.

use atc_protocol::SessionId;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The environment variable that carries a session's key.
pub const ENV: &str = "ATC_REPORT_KEY";

/// Bytes of the MAC a key keeps (hex-encoded, twice as many characters).
const KEY_BYTES: usize = 16;

/// The daemon run's secret; cheap to clone.
#[derive(Clone)]
pub struct ReportKeys {
    secret: [u8; 32],
}

impl std::fmt::Debug for ReportKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret never reaches a log line.
        f.write_str("ReportKeys(..)")
    }
}

impl ReportKeys {
    /// A fresh secret from the OS's random source.
    pub fn generate() -> std::io::Result<ReportKeys> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(ReportKeys { secret })
    }

    fn mac(&self, session: SessionId) -> Hmac<Sha256> {
        // HMAC takes a key of any length; 32 bytes cannot be refused.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.secret)
            .expect("HMAC accepts a key of any length");
        mac.update(session.as_uuid().as_bytes());
        mac
    }

    /// The key of `session`, as its process's environment carries it.
    pub fn key_for(&self, session: SessionId) -> String {
        let tag = self.mac(session).finalize().into_bytes();
        tag.iter()
            .take(KEY_BYTES)
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Whether `key` is `session`'s, compared in constant time.
    pub fn holds(&self, session: SessionId, key: &str) -> bool {
        let Some(bytes) = decode_hex(key) else {
            return false;
        };
        bytes.len() == KEY_BYTES && self.mac(session).verify_truncated_left(&bytes).is_ok()
    }
}

/// Lower- or upper-case hex to bytes; `None` for anything else.
fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.as_bytes()
        .chunks(2)
        .map(|pair| {
            let digits = std::str::from_utf8(pair).ok()?;
            u8::from_str_radix(digits, 16).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_opens_its_own_session_only_and_only_for_its_daemon_run() {
        let keys = ReportKeys::generate().unwrap();
        let (a, b) = (SessionId::new(), SessionId::new());
        let key = keys.key_for(a);
        assert_eq!(key.len(), 2 * KEY_BYTES);
        assert!(keys.holds(a, &key));
        assert!(keys.holds(a, &key.to_uppercase()));
        assert!(!keys.holds(b, &key), "another session's key");
        let next_run = ReportKeys::generate().unwrap();
        assert!(!next_run.holds(a, &key), "a key of an earlier run");
        for bad in ["", "zz", &key[..30], &format!("{key}00"), "é"] {
            assert!(!keys.holds(a, bad), "{bad:?}");
        }
        assert_eq!(format!("{keys:?}"), "ReportKeys(..)");
    }
}
