//! Execution targets, checked (spec §4.1–4.2): each configured target with its provider kind's
//! options checked and its identity, the default, the problems in config order, and the config
//! revision the refusal chain and `GET /v1/agents` carry.
//!
//! Config reads the `targets` map only as JSON ([`TargetsConfig`]); what a target's options
//! mean belongs to its provider kind, so the check lives here, above config, and each kind in
//! [`KINDS`](super::registry::KINDS) brings its own options check, identity and credential
//! variables. A kind this daemon does not have lists with an identity over all its options and
//! is refused later as `target_unavailable`.
//!
//! Problems are scoped and never stop the daemon: a malformed file refuses every target, a
//! malformed `targets` map refuses all of them, one bad entry refuses only itself. Problems
//! name targets, never option values.

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::registry::{ProviderKind, KINDS};
use crate::config::raw::RawTargets;
use crate::config::targets::{TargetProblem, TargetProblemScope, TargetsConfig};
use crate::protocol::canonical::sha256_hex;

/// Identity of the implicit `local` target: `local-pty` over no options (spec §4.2).
pub const IMPLICIT_LOCAL_IDENTITY: &str = "local-pty:44136fa355b3678a";

/// A configured target.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// Its id (the key in `targets`).
    pub id: String,
    /// Provider kind, e.g. `local-pty`.
    pub provider: String,
    /// `<kind>:<16 hex of sha256 over the canonical options>`, or the kind's own form.
    pub identity: String,
    /// Everything but `provider`: what the provider is built from. Never listed or logged
    /// (they name where credentials live).
    #[serde(skip)]
    pub options: Map<String, Value>,
    /// Why the target is listed but cannot serve although its provider exists (an imp target
    /// without `url`): step 6 of the chain refuses it as `target_unavailable`.
    #[serde(skip)]
    pub unavailable: Option<String>,
    /// Limits on its sessions (`limits` in its entry): a ceiling over the agent's and the
    /// daemon's. Not an option of its provider, so not part of its identity: changing a
    /// limit does not make its sessions another target's.
    #[serde(skip)]
    pub limits: Option<atc_protocol::SessionLimits>,
}

/// What a provider kind found in one target's options.
#[derive(Debug, Default)]
pub struct OptionCheck {
    /// Each problem's word and detail; the detail names options, never their values.
    pub problems: Vec<(&'static str, String)>,
    /// Why the target lists but cannot serve, if so.
    pub unavailable: Option<String>,
}

/// All targets, the default, and what was wrong.
#[derive(Debug, Clone)]
pub struct Targets {
    targets: Vec<Target>,
    default: Option<String>,
    problems: Vec<TargetProblem>,
    revision: String,
}

/// `<label>:<16 hex of sha256 over the canonical options>`: the identity of a target whose
/// kind hashes every option, and the form kinds with their own rule build on.
pub fn hashed_identity(label: &str, options: &Map<String, Value>) -> String {
    format!(
        "{label}:{}",
        &sha256_hex(&Value::Object(options.clone()))[..16]
    )
}

/// The identity of a target of `provider` with these options (spec §4.2), `provider` itself
/// left out of the hash.
pub fn identity(provider: &str, options: &Map<String, Value>) -> String {
    let mut options = options.clone();
    options.remove("provider");
    match kind(provider) {
        Some(k) => (k.identity)(&options),
        None => hashed_identity(provider, &options),
    }
}

/// A target entry's `limits`: the problem's detail names fields, never values.
fn target_limits(value: Value) -> Result<atc_protocol::SessionLimits, String> {
    let limits: atc_protocol::SessionLimits = serde_json::from_value(value).map_err(|_| {
        "'limits' must be an object of memoryMiB, pids and cpuPercent, each a whole number"
            .to_string()
    })?;
    match limits.out_of_bounds() {
        Some((field, min, max)) => Err(format!("'limits.{field}' must be between {min} and {max}")),
        None => Ok(limits),
    }
}

fn kind(provider: &str) -> Option<&'static ProviderKind> {
    KINDS.iter().find(|k| k.name == provider)
}

impl Targets {
    /// Checks what config holds about targets.
    pub fn settle(config: &TargetsConfig) -> Targets {
        Targets::from_config(
            config.entries.as_ref(),
            config.default.as_ref(),
            config.file_problem.clone(),
        )
    }

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
                provider: super::local::KIND.into(),
                identity: IMPLICIT_LOCAL_IDENTITY.into(),
                options: Map::new(),
                unavailable: None,
                limits: None,
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
                    let mut kept = options.clone();
                    kept.remove("provider");
                    let limits = match kept.remove("limits").map(target_limits) {
                        None => None,
                        Some(Ok(limits)) => Some(limits),
                        Some(Err(detail)) => {
                            problems.push(bad("limits_invalid", &detail));
                            continue;
                        }
                    };
                    let check = kind(&provider)
                        .map(|k| (k.check_options)(&kept))
                        .unwrap_or_default();
                    problems.extend(check.problems.into_iter().map(|(p, d)| bad(p, &d)));
                    list.push(Target {
                        id: id.clone(),
                        identity: identity(&provider, &kept),
                        provider,
                        options: kept,
                        unavailable: check.unavailable,
                        limits,
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

    /// The names of the environment variables that hold a target's credential (an imp
    /// target's `tokenEnv`), whether or not the target is usable: no local process may
    /// inherit them.
    pub fn credential_vars(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .targets
            .iter()
            .filter_map(|t| Some((kind(&t.provider)?.credential_vars)(&t.options)))
            .flatten()
            .filter(|name| !name.is_empty())
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
        // The implicit target is a local-pty over no options, hashed as any other.
        assert_eq!(identity("local-pty", &Map::new()), IMPLICIT_LOCAL_IDENTITY);
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
        // A kind this daemon does not have still gets an identity, under its own name.
        assert!(identity("docker", &a).starts_with("docker:"));
    }

    #[test]
    fn the_example_configs_targets_are_the_embedded_defaults() {
        // config.example.json names `local` explicitly, over no options: the implicit one.
        let text = include_str!("../../config.example.json");
        let example = crate::config::Config::from_json(text.as_bytes());
        let default = crate::config::Config::default();
        let (example, default) = (
            Targets::settle(&example.targets),
            Targets::settle(&default.targets),
        );
        assert!(example.problems().is_empty(), "{:?}", example.problems());
        assert_eq!(example.revision(), default.revision());
    }

    #[test]
    fn identities_and_the_revision_are_the_ones_sessions_were_recorded_under() {
        // Pinned: sessions keep their target's identity in the store, and a daemon that
        // computed another would refuse them as `target_changed` after an upgrade. The values
        // are the canonical SHA-256 forms of spec §4.2, computed outside this code.
        let entries: RawTargets = serde_json::from_str(
            r#"{"local": {"provider": "local-pty"},
                "vm": {"provider": "imp", "url": "http://impd:7070", "image": "x",
                       "tokenEnv": "ATC_TEST_SURELY_UNSET_VAR"}}"#,
        )
        .unwrap();
        let t = Targets::from_config(Some(&entries), Some(&json!("vm")), None);
        let ids: Vec<_> = t.list().iter().map(|t| t.identity.as_str()).collect();
        assert_eq!(
            ids,
            [IMPLICIT_LOCAL_IDENTITY, "imp:reach-v1:159037044f59e7c0"]
        );
        assert_eq!(t.revision(), "749989d3f830603f");
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
    fn a_kinds_problems_sit_between_the_entries_around_it() {
        // The revision hashes the problems in order, so a kind's checks must land where its
        // entry is, not after every generic one.
        // From text: the entries keep file order, which `json!` would sort.
        let entries: RawTargets = serde_json::from_str(
            r#"{"first": 7, "vm": {"provider": "imp", "url": "ftp://i"}, "last": {"url": "http://i"}}"#,
        )
        .unwrap();
        let t = Targets::from_config(Some(&entries), Some(&json!("ghost")), None);
        let order: Vec<_> = t
            .problems()
            .iter()
            .map(|p| (p.target.as_deref(), p.problem.as_str()))
            .collect();
        assert_eq!(
            order,
            [
                (Some("first"), "not_an_object"),
                (Some("vm"), "url_invalid"),
                (Some("last"), "no_provider"),
                (None, "default_target_invalid"),
            ]
        );
    }
}
