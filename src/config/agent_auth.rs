//! An agent's `auth` entry (spec §6.1): the impd secrets its imp is granted, the placeholder
//! variables its harness gets, and an optional sign-in check. Checked when the config loads;
//! a bad entry leaves the agent out with an `auth_binding_invalid` problem naming the key,
//! while every other agent loads. The entry holds names only: a credential value has no key
//! to live in, and an `env` that sets a placeholder is refused, since that is where one would.

use super::agent_kind::AgentKind;
use std::collections::BTreeMap;

use serde::Deserialize;

/// The value every placeholder variable gets; impd's broker swaps the real credential in.
pub const PLACEHOLDER_VALUE: &str = "imp-broker-placeholder";

/// Variables impd sets for the broker (impd spec §11) and the proxy variables that would
/// route around it. An agent env or placeholder that sets one of them conflicts with the
/// guest's broker set-up.
pub const BROKER_VARIABLES: &[&str] = &[
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
    "NODE_USE_ENV_PROXY",
    "SSL_CERT_FILE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
];

/// The agent kinds that may carry `auth` (spec §6.1).
pub const AUTH_KINDS: &[AgentKind] = &[AgentKind::Claude, AgentKind::Codex];

/// A checked `auth` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentAuth {
    /// impd secret names, sorted and without repeats.
    pub secrets: Vec<String>,
    /// Variables set to [`PLACEHOLDER_VALUE`] in the harness's environment.
    pub placeholders: Vec<String>,
    /// The sign-in check, run in the imp before the harness starts; `None`: no check.
    pub check: Option<Vec<String>>,
}

/// The entry as written; unknown keys are refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAuth {
    secrets: Vec<String>,
    #[serde(default)]
    placeholders: Vec<String>,
    #[serde(default)]
    check: Option<Vec<String>>,
}

/// impd's secret names (impd spec §7 takes any string; these are the ones a config can
/// name without quoting trouble in logs and rows).
fn valid_secret_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// A POSIX environment variable name.
fn valid_variable(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The detail for an entry serde refused. serde names the key of an unknown or missing field,
/// but its text for a wrong type quotes the value it found (`invalid type: string "…"`), which
/// can be the very token pasted into the wrong key: so the key of the wrong type is found
/// here, and any other text is cut before its first quote.
fn shape_problem(value: &serde_json::Value, e: &serde_json::Error) -> String {
    let Some(entry) = value.as_object() else {
        return "'auth' must be an object".into();
    };
    let strings = |v: &serde_json::Value| {
        v.as_array()
            .is_some_and(|items| items.iter().all(serde_json::Value::is_string))
    };
    let wrong = ["secrets", "placeholders", "check"]
        .into_iter()
        .find(|key| {
            entry
                .get(*key)
                .is_some_and(|v| !(strings(v) || (*key == "check" && v.is_null())))
        });
    if let Some(key) = wrong {
        return format!("'auth.{key}' must be a list of strings");
    }
    let text = e.to_string();
    let head = text
        .split(['"', '\''])
        .next()
        .unwrap_or_default()
        .trim_end();
    format!("'auth': {head}")
}

impl AgentAuth {
    /// Checks the `auth` value of an agent of `kind` whose configured `env` is `env`. The
    /// error is the problem's detail: it names the key at fault, never a value.
    pub fn from_config(
        value: &serde_json::Value,
        kind: Option<AgentKind>,
        env: &BTreeMap<String, String>,
    ) -> Result<AgentAuth, String> {
        if !kind.is_some_and(|k| AUTH_KINDS.contains(&k)) {
            return Err("'auth' applies to claude and codex agents only".into());
        }
        let raw: RawAuth =
            serde_json::from_value(value.clone()).map_err(|e| shape_problem(value, &e))?;
        if raw.secrets.is_empty() {
            return Err("'auth.secrets' must name at least one impd secret".into());
        }
        if let Some(bad) = raw.secrets.iter().find(|s| !valid_secret_name(s)) {
            return Err(format!(
                "'auth.secrets' has an entry that is not a secret name ({} characters; use letters, digits, '-', '_' and '.')",
                bad.len()
            ));
        }
        let mut placeholders = Vec::new();
        for p in &raw.placeholders {
            if !valid_variable(p) {
                return Err("'auth.placeholders' must hold environment variable names".into());
            }
            if BROKER_VARIABLES.contains(&p.as_str()) {
                return Err(format!(
                    "'auth.placeholders' names {p}, which impd sets for the broker itself"
                ));
            }
            if env.contains_key(p) {
                return Err(format!(
                    "'env' sets {p}, which 'auth.placeholders' names: the broker supplies it, so the config must not hold its value"
                ));
            }
            if !placeholders.contains(p) {
                placeholders.push(p.clone());
            }
        }
        if let Some(check) = &raw.check {
            if check.first().is_none_or(|c| c.trim().is_empty()) {
                return Err("'auth.check' must be a command: a non-empty argv".into());
            }
        }
        let mut secrets = raw.secrets;
        secrets.sort();
        secrets.dedup();
        Ok(AgentAuth {
            secrets,
            placeholders,
            check: raw.check,
        })
    }

    /// The first variable of `env` that would set a broker or proxy variable itself.
    pub fn env_conflict<'a>(env: impl IntoIterator<Item = &'a String>) -> Option<&'a str> {
        env.into_iter()
            .map(String::as_str)
            .find(|k| BROKER_VARIABLES.contains(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: serde_json::Value, kind: Option<AgentKind>) -> Result<AgentAuth, String> {
        AgentAuth::from_config(&v, kind, &BTreeMap::new())
    }

    #[test]
    fn a_full_entry_is_read_with_sorted_secrets() {
        let a = check(
            json!({"secrets": ["b", "a", "b"], "placeholders": ["CLAUDE_CODE_OAUTH_TOKEN"],
                   "check": ["claude", "auth", "status"]}),
            Some(AgentKind::Claude),
        )
        .unwrap();
        assert_eq!(a.secrets, ["a", "b"]);
        assert_eq!(a.placeholders, ["CLAUDE_CODE_OAUTH_TOKEN"]);
        assert_eq!(a.check.unwrap(), ["claude", "auth", "status"]);
    }

    #[test]
    fn auth_is_for_claude_and_codex_only() {
        let entry = json!({"secrets": ["s"]});
        assert!(check(entry.clone(), Some(AgentKind::Codex)).is_ok());
        for kind in [Some(AgentKind::Grok), None] {
            let e = check(entry.clone(), kind).unwrap_err();
            assert!(e.contains("claude and codex"), "{e}");
        }
    }

    #[test]
    fn malformed_entries_name_the_key_and_never_a_value() {
        let cases = [
            (json!({"secrets": ["s"], "token": "sk-live-123"}), "token"),
            (json!({"placeholders": ["A"]}), "secrets"),
            (json!({"secrets": []}), "auth.secrets"),
            (json!({"secrets": ["has space"]}), "auth.secrets"),
            (json!({"secrets": "s"}), "auth"),
            (
                json!({"secrets": ["s"], "placeholders": ["1BAD"]}),
                "auth.placeholders",
            ),
            (
                json!({"secrets": ["s"], "placeholders": ["HTTPS_PROXY"]}),
                "HTTPS_PROXY",
            ),
            (json!({"secrets": ["s"], "check": []}), "auth.check"),
            (json!("nope"), "auth"),
        ];
        for (entry, names) in cases {
            let e = check(entry.clone(), Some(AgentKind::Claude)).unwrap_err();
            assert!(e.contains(names), "{entry}: {e}");
            assert!(
                !e.contains("sk-live-123") && !e.contains("has space"),
                "{e}"
            );
        }
    }

    #[test]
    fn an_env_that_sets_a_placeholder_is_refused() {
        let env = BTreeMap::from([("CLAUDE_CODE_OAUTH_TOKEN".to_string(), "real".to_string())]);
        let e = AgentAuth::from_config(
            &json!({"secrets": ["s"], "placeholders": ["CLAUDE_CODE_OAUTH_TOKEN"]}),
            Some(AgentKind::Claude),
            &env,
        )
        .unwrap_err();
        assert!(
            e.contains("'env' sets CLAUDE_CODE_OAUTH_TOKEN") && !e.contains("real"),
            "{e}"
        );
    }

    #[test]
    fn broker_and_proxy_variables_in_an_env_are_found() {
        let env = ["PATH".to_string(), "NODE_EXTRA_CA_CERTS".to_string()];
        assert_eq!(AgentAuth::env_conflict(&env), Some("NODE_EXTRA_CA_CERTS"));
        assert_eq!(AgentAuth::env_conflict(&env[..1]), None);
    }

    /// Found by the `auth` property test (tests/it/decoders.rs): a token pasted where a list
    /// belongs came back inside the problem, which `GET /v1/daemon` and the log show.
    #[test]
    fn a_wrong_type_names_the_key_and_not_the_value() {
        for key in ["secrets", "placeholders", "check"] {
            let mut v = json!({"secrets": ["anthropic"]});
            v[key] = json!("sk-ant-oat01-pasted-token");
            let detail = check(v, Some(AgentKind::Claude)).expect_err("a string is not a list");
            assert!(!detail.contains("sk-ant"), "{detail}");
            assert_eq!(detail, format!("'auth.{key}' must be a list of strings"));
        }
        let detail = check(
            json!({"secrets": ["a"], "token": "sk-ant-x"}),
            Some(AgentKind::Claude),
        )
        .expect_err("an unknown key");
        assert!(
            detail.contains("unknown field") && !detail.contains("sk-ant"),
            "{detail}"
        );
    }
}
