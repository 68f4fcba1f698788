//! The names atc gives its things on impd, where impd's rules bound them (spec §5.1 of the
//! daemon, §5 and §9 of impd's): lower-case letters and digits only, and short (session names
//! at most 32 characters). The daemon names an exec session after its own session id, and
//! whatever else talks to that impd (the proof tools, the tests) finds it by the same name, so
//! the rule lives here, beside the protocol, rather than in the daemon.

/// The longest exec session name impd takes.
pub const EXEC_SESSION_NAME_MAX: usize = 32;

/// `s` with only the characters impd's names take: lower-cased, then ASCII letters and digits.
pub fn name_chars(s: &str) -> String {
    s.chars()
        .flat_map(char::to_lowercase)
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        .collect()
}

/// The impd exec session a session's harness runs under: `atc-` + the session id's name
/// characters, cut so the whole is at most [`EXEC_SESSION_NAME_MAX`].
pub fn exec_session_name(session_id: &str) -> String {
    const PREFIX: &str = "atc-";
    let id: String = name_chars(session_id)
        .chars()
        .take(EXEC_SESSION_NAME_MAX - PREFIX.len())
        .collect();
    format!("{PREFIX}{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_names_fit_impd_limits_whatever_the_id() {
        let id = "3F2504E0-4F89-41D3-9A0C-0305E82C3301";
        let session = exec_session_name(id);
        assert_eq!(session, "atc-3f2504e04f8941d39a0c0305e82c");
        assert_eq!(session.len(), 32);
        // Anything at all still gives a valid name.
        let odd = exec_session_name("ÄÖ!! spaces/and_more-than-thirty-two-characters-here");
        assert!(odd.len() <= 32, "{odd}");
        assert!(odd
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
    }
}
