//! Execution targets (spec §4.1–4.4): the `targets` map and `defaultTarget` of the config,
//! each target's identity, the config revision, and the one refusal check every path that
//! starts or touches work runs before it does anything.
//!
//! Config errors are scoped and never stop the daemon: a malformed file refuses every target,
//! a malformed `targets` map refuses all of them, one bad entry refuses only itself. Problems
//! name targets, never option values.

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::raw::RawTargets;
use crate::protocol::canonical::sha256_hex;

/// Identity of the implicit `local` target: `local-pty` over no options (spec §4.2).
pub const IMPLICIT_LOCAL_IDENTITY: &str = "local-pty:44136fa355b3678a";

// A problem and where it sits are the answer's own types: `GET /v1/agents` lists them as
// they are, and the config revision hashes them.
pub use atc_protocol::responses::{TargetProblem, TargetProblemScope};

/// A configured target.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// Its id (the key in `targets`).
    pub id: String,
    /// Provider kind, e.g. `local-pty`.
    pub provider: String,
    /// `<kind>:<16 hex of sha256 over the canonical options>`.
    pub identity: String,
    /// Everything but `provider`: what the provider is built from. Never listed or logged
    /// (they name where credentials live).
    #[serde(skip)]
    pub options: Map<String, Value>,
    /// Why the target is listed but cannot serve although its provider exists (an imp target
    /// without `url`): step 6 of the chain refuses it as `target_unavailable`.
    #[serde(skip)]
    pub unavailable: Option<String>,
}

/// Checks an imp target's options (spec §4.1): `url` is required (without it the target lists
/// as unavailable), at most one of `tokenEnv` and `tokenFile`, and the one given must yield a
/// token now; `guestATC`, when given, is a boolean. Returns the problems (problem word, detail) and the unavailability reason. Only
/// names are reported, never the values.
fn imp_option_problems(
    options: &Map<String, Value>,
) -> (Vec<(&'static str, String)>, Option<String>) {
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
    let env = options.get("tokenEnv");
    let file = options.get("tokenFile");
    match (env, file) {
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
    (problems, unavailable)
}

/// All targets, the default, and what was wrong.
#[derive(Debug, Clone)]
pub struct Targets {
    targets: Vec<Target>,
    default: Option<String>,
    problems: Vec<TargetProblem>,
    revision: String,
}

/// The identity of a target with these options (spec §4.2). Imp targets hash only the options
/// that select an existing imp.
pub fn identity(provider: &str, options: &Map<String, Value>) -> String {
    let mut options = options.clone();
    options.remove("provider");
    if provider == "imp" {
        for k in ["image", "memoryMib", "guestATC"] {
            options.remove(k);
        }
        return format!(
            "imp:reach-v1:{}",
            &sha256_hex(&Value::Object(options))[..16]
        );
    }
    format!("{provider}:{}", &sha256_hex(&Value::Object(options))[..16])
}

impl Targets {
    /// Builds the targets from the config's `targets` and `defaultTarget` values;
    /// `file_problem` is set when the config file itself could not be read or parsed.
    pub fn from_config(
        targets: Option<&RawTargets>,
        default_target: Option<&Value>,
        file_problem: Option<TargetProblem>,
    ) -> Targets {
        let mut problems: Vec<TargetProblem> = file_problem.into_iter().collect();
        let mut list = Vec::new();
        match targets {
            None if default_target.is_none() => list.push(Target {
                id: "local".into(),
                provider: "local-pty".into(),
                identity: IMPLICIT_LOCAL_IDENTITY.into(),
                options: Map::new(),
                unavailable: None,
            }),
            None => {}
            Some(RawTargets::Entries(entries)) if !entries.is_empty() => {
                for (id, entry) in entries {
                    let bad = |problem: &str, detail: &str| TargetProblem {
                        scope: TargetProblemScope::Target,
                        target: Some(id.clone()),
                        problem: problem.into(),
                        detail: detail.into(),
                    };
                    let Value::Object(options) = entry else {
                        problems.push(bad("not_an_object", "a target must be an object"));
                        continue;
                    };
                    let provider = match options.get("provider") {
                        Some(Value::String(p)) if !p.is_empty() => p.clone(),
                        _ => {
                            problems.push(bad(
                                "no_provider",
                                "a target needs a non-empty string 'provider'",
                            ));
                            continue;
                        }
                    };
                    if id.is_empty() {
                        problems.push(bad("no_id", "a target needs a non-empty id"));
                        continue;
                    }
                    let mut unavailable = None;
                    if provider == "imp" {
                        let (found, reason) = imp_option_problems(options);
                        problems.extend(found.into_iter().map(|(p, d)| bad(p, &d)));
                        unavailable = reason;
                    }
                    let mut kept = options.clone();
                    kept.remove("provider");
                    list.push(Target {
                        id: id.clone(),
                        identity: identity(&provider, options),
                        provider,
                        options: kept,
                        unavailable,
                    });
                }
            }
            Some(_) => problems.push(TargetProblem {
                scope: TargetProblemScope::Targets,
                target: None,
                problem: "targets_malformed".into(),
                detail: "'targets' must be a non-empty object".into(),
            }),
        }
        let default = match default_target {
            None => list.iter().find(|t| t.id == "local").map(|t| t.id.clone()),
            Some(Value::String(d)) if list.iter().any(|t| &t.id == d) => Some(d.clone()),
            Some(_) => {
                problems.push(TargetProblem {
                    scope: TargetProblemScope::DefaultTarget,
                    target: None,
                    problem: "default_target_invalid".into(),
                    detail: "'defaultTarget' must name a well-formed target".into(),
                });
                None
            }
        };
        let revision_input = json!({
            "targets": list.iter().map(|t| json!([t.id, t.identity])).collect::<Vec<_>>(),
            "defaultTarget": default,
            "errors": problems
                .iter()
                .map(|p| json!([p.scope, p.target, p.problem]))
                .collect::<Vec<_>>(),
        });
        let revision = sha256_hex(&revision_input)[..16].to_string();
        Targets {
            targets: list,
            default,
            problems,
            revision,
        }
    }

    /// The names of the environment variables that hold a target's credential (imp targets'
    /// `tokenEnv`), whether or not the target is usable: no local process may inherit them.
    pub fn credential_vars(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .targets
            .iter()
            .filter_map(|t| t.options.get("tokenEnv")?.as_str())
            .filter(|name| !name.is_empty())
            .map(str::to_string)
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The configured targets, in config order.
    pub fn list(&self) -> &[Target] {
        &self.targets
    }

    /// The default target's id.
    pub fn default_id(&self) -> Option<&str> {
        self.default.as_deref()
    }

    /// What was wrong with the configuration.
    pub fn problems(&self) -> &[TargetProblem] {
        &self.problems
    }

    /// Whether target `id`'s own entry has a problem (it cannot serve).
    pub fn has_problem(&self, id: &str) -> bool {
        self.problems
            .iter()
            .any(|p| p.target.as_deref() == Some(id))
    }

    /// Changes whenever targets, identities, the default or the errors change.
    pub fn revision(&self) -> &str {
        &self.revision
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn raw(v: Value) -> RawTargets {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn without_targets_there_is_the_implicit_local_target() {
        let t = Targets::from_config(None, None, None);
        let local = &t.list()[0];
        assert_eq!(t.default_id(), Some("local"));
        assert_eq!(
            (local.id.as_str(), local.identity.as_str()),
            ("local", IMPLICIT_LOCAL_IDENTITY)
        );
        assert_eq!(t.revision().len(), 16);
    }

    #[test]
    fn identities_hash_options_in_canonical_form() {
        let a = json!({"provider": "local-pty", "b": 1, "a": [1, 2]});
        let b = json!({"a": [1, 2], "b": 1, "provider": "local-pty"});
        let (Value::Object(a), Value::Object(b)) = (a, b) else {
            unreachable!()
        };
        assert_eq!(identity("local-pty", &a), identity("local-pty", &b));
        assert_ne!(identity("local-pty", &a), IMPLICIT_LOCAL_IDENTITY);
        let imp = json!({"url": "http://h", "image": "x", "memoryMib": 512, "guestATC": true});
        let imp2 = json!({"url": "http://h"});
        let (Value::Object(imp), Value::Object(imp2)) = (imp, imp2) else {
            unreachable!()
        };
        assert_eq!(identity("imp", &imp), identity("imp", &imp2));
        assert!(identity("imp", &imp).starts_with("imp:reach-v1:"));
    }

    #[test]
    fn every_token_variable_is_withheld_even_a_broken_targets() {
        let t = Targets::from_config(
            Some(&raw(json!({
                "a": {"provider": "imp", "url": "http://i", "tokenEnv": "IMPD_A"},
                "b": {"provider": "imp", "url": "http://j", "tokenEnv": "IMPD_A"},
                "unset": {"provider": "imp", "url": "http://i", "tokenEnv": "ATC_TEST_SURELY_UNSET_VAR"},
                "file": {"provider": "imp", "url": "http://i", "tokenFile": "/nowhere"},
                "local": {"provider": "local-pty"},
            }))),
            None,
            None,
        );
        assert_eq!(t.credential_vars(), ["ATC_TEST_SURELY_UNSET_VAR", "IMPD_A"]);
    }

    #[test]
    fn imp_options_are_checked_without_echoing_values() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "imp_1.secret-value\n").unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "  \n").unwrap();
        let path = |p: &std::path::Path| p.display().to_string();
        let t = Targets::from_config(
            Some(&raw(json!({
                "ok": {"provider": "imp", "url": "http://impd:7070", "tokenFile": path(&token)},
                "nourl": {"provider": "imp", "tokenFile": path(&token)},
                "both": {"provider": "imp", "url": "http://i", "tokenFile": path(&token), "tokenEnv": "X"},
                "unset": {"provider": "imp", "url": "http://i", "tokenEnv": "ATC_TEST_SURELY_UNSET_VAR"},
                "emptyfile": {"provider": "imp", "url": "http://i", "tokenFile": path(&empty)},
                "badurl": {"provider": "imp", "url": "ftp://i"},
                "guestatc": {"provider": "imp", "url": "http://i", "guestATC": true},
                "badguestatc": {"provider": "imp", "url": "http://i", "guestATC": "yes"},
            }))),
            None,
            None,
        );
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
    }
}
