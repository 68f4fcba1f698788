//! What a session's name may be, whoever sets it: a client (spawn or rename) or the agent
//! (a title it keeps in its files). One rule for all of them, so a name that cannot be given
//! cannot be taken either.
//!
//! Names are what people type to pick a session (`atc kill NAME`), and what they read in a
//! list, so a name must not pretend to be something else:
//!
//! - not another session's id, full or short (the 8 characters `atc ls` prints): the daemon
//!   and the CLI look a key up by id and by name, and `atc kill <short id>` must not reach a
//!   session named like it;
//! - no bidirectional-override characters (U+202A–U+202E, U+2066–U+2069), which make a
//!   listing show text in another order than it is;
//! - and, as before, 1–200 characters without control characters.
//!
//! The syntax is checked here ([`check`]); whether a name shadows an id needs the fleet, which
//! the manager owns ([`shadowed_id`] is the rule it applies).

use atc_protocol::SessionId;

use crate::agents::report_check::is_bidi_control;

use atc_client::session::SHORT_ID_LEN;

/// The longest name, in characters (what an agent's name is cut to as well,
/// `agents::names::NAME_MAX`).
pub const NAME_MAX_CHARS: usize = 200;

/// Why a name cannot be a session's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameProblem {
    /// Nothing but whitespace.
    Empty,
    /// Longer than [`NAME_MAX_CHARS`].
    TooLong,
    /// A control character.
    Control,
    /// A bidirectional-override character.
    Bidi,
    /// Another session's id, full or short.
    ShadowsId,
}

impl NameProblem {
    /// The stable word (`data.reason` of the `bad_args` it answers).
    pub fn as_str(self) -> &'static str {
        match self {
            NameProblem::Empty => "empty",
            NameProblem::TooLong => "too_long",
            NameProblem::Control => "control_character",
            NameProblem::Bidi => "bidi_override",
            NameProblem::ShadowsId => "shadows_id",
        }
    }

    /// What is wrong, for the message.
    pub fn what(self) -> &'static str {
        match self {
            NameProblem::Empty => "a name cannot be empty",
            NameProblem::TooLong => "a name has at most 200 characters",
            NameProblem::Control => "a name cannot hold control characters",
            NameProblem::Bidi => {
                "a name cannot hold bidirectional-override characters (U+202A-U+202E, U+2066-U+2069)"
            }
            NameProblem::ShadowsId => {
                "a name cannot be another session's id, full or short: `atc kill NAME` would reach that session"
            }
        }
    }
}

/// Checks a name's own text (already trimmed); the fleet's ids are [`shadowed_id`]'s.
pub fn check(name: &str) -> Result<(), NameProblem> {
    if name.is_empty() {
        return Err(NameProblem::Empty);
    }
    if name.chars().count() > NAME_MAX_CHARS {
        return Err(NameProblem::TooLong);
    }
    if name.chars().any(char::is_control) {
        return Err(NameProblem::Control);
    }
    if name.chars().any(is_bidi_control) {
        return Err(NameProblem::Bidi);
    }
    Ok(())
}

/// The id among `ids`, other than `own`, that `name` would shadow: one it spells in any form
/// the daemon parses as that id, or whose short id it is (in either case).
pub fn shadowed_id<'a>(
    name: &str,
    own: SessionId,
    ids: impl IntoIterator<Item = &'a SessionId>,
) -> Option<SessionId> {
    let full = name.parse::<SessionId>().ok();
    let short = (name.len() == SHORT_ID_LEN && name.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| name.to_ascii_lowercase());
    if full.is_none() && short.is_none() {
        return None;
    }
    ids.into_iter().copied().find(|id| {
        *id != own
            && (full == Some(*id)
                || short
                    .as_deref()
                    .is_some_and(|s| id.as_uuid().simple().to_string().starts_with(s)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_rules() {
        assert_eq!(check("build"), Ok(()));
        assert_eq!(check("déjà vu ✓"), Ok(()));
        assert_eq!(check(""), Err(NameProblem::Empty));
        assert_eq!(check(&"x".repeat(201)), Err(NameProblem::TooLong));
        assert_eq!(check(&"x".repeat(200)), Ok(()));
        assert_eq!(check(&"é".repeat(200)), Ok(()));
        assert_eq!(check("a\tb"), Err(NameProblem::Control));
        assert_eq!(check("a\u{1b}[31mb"), Err(NameProblem::Control));
        for c in ['\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}'] {
            assert_eq!(
                check(&format!("txt{c}exe")),
                Err(NameProblem::Bidi),
                "{c:?}"
            );
        }
        for c in ['\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}'] {
            assert_eq!(check(&format!("a{c}b")), Err(NameProblem::Bidi), "{c:?}");
        }
        // A mark that only sets a direction (LRM) reorders nothing.
        assert_eq!(check("a\u{200E}b"), Ok(()));
    }

    #[test]
    fn a_name_shadows_another_sessions_full_or_short_id_in_any_spelling() {
        let other: SessionId = "3f2a9c1b-0d4e-4a7b-9c2d-1e5f6a7b8c9d".parse().unwrap();
        let own: SessionId = "aaaaaaaa-0000-4000-8000-000000000000".parse().unwrap();
        let ids = [own, other];
        for name in [
            "3f2a9c1b-0d4e-4a7b-9c2d-1e5f6a7b8c9d",
            "3F2A9C1B-0D4E-4A7B-9C2D-1E5F6A7B8C9D",
            "3f2a9c1b0d4e4a7b9c2d1e5f6a7b8c9d",
            "{3f2a9c1b-0d4e-4a7b-9c2d-1e5f6a7b8c9d}",
            "urn:uuid:3f2a9c1b-0d4e-4a7b-9c2d-1e5f6a7b8c9d",
            "3f2a9c1b",
            "3F2A9C1B",
        ] {
            assert_eq!(shadowed_id(name, own, &ids), Some(other), "{name}");
        }
        // Its own id, a shorter or longer prefix, or an id no session has: no shadow.
        for name in [
            "aaaaaaaa",
            "aaaaaaaa-0000-4000-8000-000000000000",
            "3f2a9c1",
            "3f2a9c1b0",
            "3f2a9c1c",
            "11111111-1111-4111-8111-111111111111",
            "build",
        ] {
            assert_eq!(shadowed_id(name, own, &ids), None, "{name}");
        }
    }
}
