//! What an imp target's options mean before any provider is built (spec §4.1–4.2): the
//! option check whose problems `GET /v1/agents` lists, the identity that says which imps the
//! target reaches, and the variable that holds its token, which no local process inherits.

use serde_json::{Map, Value};

use crate::providers::targets::{hashed_identity, OptionCheck};

/// Options that shape a new imp but do not say which existing imp a target reaches; a change
/// to them keeps the target's identity, so its sessions stay reachable.
const SHAPE_ONLY: [&str; 3] = ["image", "memoryMib", "guestATC"];

/// Checks an imp target's options: `url` is required (without it the target lists as
/// unavailable), at most one of `tokenEnv` and `tokenFile`, and the one given must yield a
/// token now; `guestATC`, when given, is a boolean. Only names are reported, never values.
pub fn check(options: &Map<String, Value>) -> OptionCheck {
    let mut problems = Vec::new();
    let unavailable = match options.get("url") {
        None => Some("it has no 'url' for impd".to_string()),
        Some(Value::String(u)) if u.starts_with("http://") || u.starts_with("https://") => None,
        Some(_) => {
            problems.push((
                "url_invalid",
                "'url' must be an http:// or https:// URL".into(),
            ));
            None
        }
    };
    match (options.get("tokenEnv"), options.get("tokenFile")) {
        (Some(_), Some(_)) => problems.push((
            "token_source_ambiguous",
            "give 'tokenEnv' or 'tokenFile', not both".into(),
        )),
        (Some(Value::String(name)), None) if !name.is_empty() => {
            if std::env::var(name).map(|v| v.is_empty()).unwrap_or(true) {
                problems.push((
                    "token_unavailable",
                    format!("environment variable {name} (tokenEnv) is unset or empty"),
                ));
            }
        }
        (None, Some(Value::String(path))) if !path.is_empty() => {
            let readable = std::fs::read_to_string(path)
                .map(|t| !t.trim().is_empty())
                .unwrap_or(false);
            if !readable {
                problems.push((
                    "token_unavailable",
                    "the tokenFile is unreadable or empty".into(),
                ));
            }
        }
        (None, None) => {}
        _ => problems.push((
            "token_source_invalid",
            "'tokenEnv' / 'tokenFile' must be a non-empty string".into(),
        )),
    }
    if options.get("guestATC").is_some_and(|v| !v.is_boolean()) {
        problems.push((
            "guest_atc_invalid",
            "'guestATC' must be true or false".into(),
        ));
    }
    OptionCheck {
        problems,
        unavailable,
    }
}

/// An imp target's identity: only the options that select an existing imp are hashed, under
/// a label of its own (`imp:reach-v1:`).
pub fn identity(options: &Map<String, Value>) -> String {
    let mut reach = options.clone();
    for k in SHAPE_ONLY {
        reach.remove(k);
    }
    hashed_identity("imp:reach-v1", &reach)
}

/// The variable named by `tokenEnv`, if any.
pub fn credential_vars(options: &Map<String, Value>) -> Vec<String> {
    options
        .get("tokenEnv")
        .and_then(Value::as_str)
        .map(str::to_string)
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::targets::Targets;
    use serde_json::json;

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!("a test gives an object"),
        }
    }

    #[test]
    fn the_identity_hashes_only_what_selects_an_imp() {
        let shaped =
            object(json!({"url": "http://h", "image": "x", "memoryMib": 512, "guestATC": true}));
        let bare = object(json!({"url": "http://h"}));
        assert_eq!(identity(&shaped), identity(&bare));
        assert!(identity(&bare).starts_with("imp:reach-v1:"));
        assert_ne!(
            identity(&bare),
            identity(&object(json!({"url": "http://g"})))
        );
        // Through the table, `provider` is never hashed.
        let mut with_provider = bare.clone();
        with_provider.insert("provider".into(), json!("imp"));
        assert_eq!(
            crate::providers::targets::identity("imp", &with_provider),
            identity(&bare)
        );
    }

    #[test]
    fn imp_options_are_checked_without_echoing_values() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "imp_1.secret-value\n").unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "  \n").unwrap();
        let path = |p: &std::path::Path| p.display().to_string();
        let raw = serde_json::from_value(json!({
            "ok": {"provider": "imp", "url": "http://impd:7070", "tokenFile": path(&token)},
            "nourl": {"provider": "imp", "tokenFile": path(&token)},
            "both": {"provider": "imp", "url": "http://i", "tokenFile": path(&token), "tokenEnv": "X"},
            "unset": {"provider": "imp", "url": "http://i", "tokenEnv": "ATC_TEST_SURELY_UNSET_VAR"},
            "emptyfile": {"provider": "imp", "url": "http://i", "tokenFile": path(&empty)},
            "badurl": {"provider": "imp", "url": "ftp://i"},
            "guestatc": {"provider": "imp", "url": "http://i", "guestATC": true},
            "badguestatc": {"provider": "imp", "url": "http://i", "guestATC": "yes"},
        }))
        .unwrap();
        let t = Targets::from_config(Some(&raw), None, None);
        let problem = |id: &str| {
            t.problems()
                .iter()
                .find(|p| p.target.as_deref() == Some(id))
                .map(|p| p.problem.as_str())
        };
        assert_eq!(problem("ok"), None);
        assert_eq!(problem("nourl"), None);
        assert_eq!(problem("both"), Some("token_source_ambiguous"));
        assert_eq!(problem("unset"), Some("token_unavailable"));
        assert_eq!(problem("emptyfile"), Some("token_unavailable"));
        assert_eq!(problem("badurl"), Some("url_invalid"));
        assert_eq!(problem("guestatc"), None);
        assert_eq!(problem("badguestatc"), Some("guest_atc_invalid"));
        for p in t.problems() {
            assert!(!p.detail.contains("secret"), "{p:?}");
            assert!(!p.detail.contains(&path(dir.path())), "{p:?}");
        }
        let ok = t.list().iter().find(|t| t.id == "ok").unwrap();
        assert_eq!(ok.options["url"], "http://impd:7070");
        assert!(!ok.options.contains_key("provider"));
        let nourl = t.list().iter().find(|t| t.id == "nourl").unwrap();
        assert!(nourl.unavailable.is_some());
    }
}
