//! Config `principals` (spec §2.5): who besides the owner may hold a token, and the targets
//! each is granted by name. `{<id>: {targets: [names]}}`.
//!
//! Checked here: an id's spelling (it names a file under `<state dir>/principals/`, so it must
//! be a safe file name), the ids `local` and `owner` reserved (the owner acts as `local` in the
//! idempotency ledger), and an entry's shape (an unknown field is refused, not dropped). Each
//! bad entry is a problem scoped to `principals.<id>` and that principal is left out: it has no
//! token anywhere, so a typo fails closed. Target names are not checked against the configured
//! targets: a grant is judged by name against each target's current identity when a request
//! is made, and a grant of a target that is not configured grants nothing.
//!
//! The principals' tokens are the daemon's business (`daemon::principal_files`).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{ClassifyDetail, ConfigProblem};

/// The longest principal id.
pub const MAX_ID_LEN: usize = 64;

/// Ids a principal cannot take: the owner is `local` in the idempotency ledger, and `owner`
/// would read as the owner in a log or a listing.
pub const RESERVED_IDS: [&str; 2] = ["local", "owner"];

/// The problem word of a principal entry left out.
pub const PRINCIPAL_INVALID: &str = "principal_invalid";

/// The configured principals, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Principals {
    /// Whether the config has a `principals` key at all: without one, every principal may use
    /// only the implicit `local` target (spec §2.5), which is not the same as an empty map.
    declared: bool,
    /// Each good principal's granted target names, in the order written, without repeats.
    grants: BTreeMap<String, Vec<String>>,
}

/// One entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawPrincipal {
    /// Target names granted.
    targets: Vec<String>,
}

impl Principals {
    /// Whether config has a `principals` key (even an empty or wholly invalid one).
    pub fn declared(&self) -> bool {
        self.declared
    }

    /// The ids of the principals that may hold a token, in id order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.grants.keys().map(String::as_str)
    }

    /// The target names granted to `id`; `None` for a principal not configured (or left out
    /// for a problem of its entry).
    pub fn targets_of(&self, id: &str) -> Option<&[String]> {
        self.grants.get(id).map(Vec::as_slice)
    }

    /// Checks the `principals` value (`None`: the key is absent), pushing a scoped problem
    /// for each entry left out.
    pub fn from_config(
        value: Option<serde_json::Value>,
        problems: &mut Vec<ConfigProblem>,
    ) -> Principals {
        let Some(value) = value else {
            return Principals::default();
        };
        let mut principals = Principals {
            declared: true,
            grants: BTreeMap::new(),
        };
        let serde_json::Value::Object(entries) = value else {
            problems.push(problem(
                "principals".into(),
                "config_malformed",
                "principals must be an object of id -> {targets: [names]}".into(),
            ));
            return principals;
        };
        for (id, entry) in entries {
            match checked_entry(&id, entry) {
                Ok(targets) => {
                    principals.grants.insert(id, targets);
                }
                Err(detail) => problems.push(problem(
                    // An id that is not a safe name is not put in a scope as it is either.
                    format!("principals.{}", scope_name(&id)),
                    PRINCIPAL_INVALID,
                    detail,
                )),
            }
        }
        principals
    }
}

fn problem(scope: String, problem: &'static str, detail: String) -> ConfigProblem {
    ConfigProblem {
        scope,
        problem,
        detail,
        path: None,
    }
}

/// One entry's granted targets, or why it is left out (naming keys, never values).
fn checked_entry(id: &str, entry: serde_json::Value) -> Result<Vec<String>, String> {
    id_problem(id).map_or(Ok(()), Err)?;
    if !entry.is_object() {
        return Err("a principal entry must be an object with 'targets'".into());
    }
    let raw = serde_json::from_value::<RawPrincipal>(entry).map_err(|e| {
        let text = e.to_string();
        if text.starts_with("unknown field") {
            e.classify_detail()
        } else if text.starts_with("missing field") {
            "'targets' is required".into()
        } else {
            "'targets' must be a list of target names".into()
        }
    })?;
    let mut targets: Vec<String> = Vec::with_capacity(raw.targets.len());
    for name in raw.targets {
        if name.is_empty() {
            return Err("a target name in 'targets' is empty".into());
        }
        if !targets.contains(&name) {
            targets.push(name);
        }
    }
    Ok(targets)
}

/// Why `id` cannot be a principal's id, if it cannot.
fn id_problem(id: &str) -> Option<String> {
    if RESERVED_IDS.contains(&id) {
        return Some(format!("the id '{id}' is reserved"));
    }
    if !atc_protocol::is_principal_id(id) {
        return Some(format!(
            "a principal id is 1 to {MAX_ID_LEN} characters of a-z, 0-9, '_' and '-', \
             starting with a letter or a digit"
        ));
    }
    None
}

/// `id` as it may appear in a problem's scope: itself when it is a good id, else a marker
/// (an id is a key, not a secret, but a bad one may hold control characters or be huge).
fn scope_name(id: &str) -> String {
    let printable = id.len() <= MAX_ID_LEN && id.bytes().all(|b| b.is_ascii_graphic());
    if printable {
        id.to_string()
    } else {
        "<unusable id>".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn load(text: &str) -> Config {
        Config::from_json(text.as_bytes())
    }

    #[test]
    fn absent_is_undeclared_and_empty_is_declared() {
        let c = load("{}");
        assert!(!c.principals.declared());
        assert_eq!(c.principals.ids().count(), 0);
        let c = load(r#"{"principals": {}}"#);
        assert!(c.principals.declared());
        assert_eq!(c.principals.ids().count(), 0);
        assert!(c.problems.is_empty(), "{:?}", c.problems);
    }

    #[test]
    fn grants_are_read_in_order_without_repeats() {
        let c = load(
            r#"{"principals": {"ci": {"targets": ["local", "box", "local"]},
                               "0-bot_x": {"targets": []}}}"#,
        );
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(c.principals.ids().collect::<Vec<_>>(), ["0-bot_x", "ci"]);
        assert_eq!(
            c.principals.targets_of("ci"),
            Some(&["local".to_string(), "box".to_string()][..])
        );
        assert_eq!(c.principals.targets_of("0-bot_x"), Some(&[][..]));
        assert_eq!(c.principals.targets_of("nobody"), None);
    }

    #[test]
    fn a_grant_of_an_unconfigured_target_is_kept_by_name() {
        let c = load(r#"{"principals": {"ci": {"targets": ["nowhere"]}}}"#);
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(
            c.principals.targets_of("ci"),
            Some(&["nowhere".to_string()][..])
        );
    }

    #[test]
    fn bad_ids_are_problems_of_their_entry_and_the_rest_stay() {
        let long = "a".repeat(MAX_ID_LEN + 1);
        let c = load(&format!(
            r#"{{"principals": {{"local": {{"targets": []}}, "owner": {{"targets": []}},
                 "CI": {{"targets": []}}, "-x": {{"targets": []}}, "a/b": {{"targets": []}},
                 "": {{"targets": []}}, "{long}": {{"targets": []}},
                 "ok": {{"targets": ["local"]}}}}}}"#
        ));
        assert_eq!(c.principals.ids().collect::<Vec<_>>(), ["ok"]);
        let scopes: Vec<&str> = c.problems.iter().map(|p| p.scope.as_str()).collect();
        assert_eq!(
            scopes,
            [
                "principals.",
                "principals.-x",
                "principals.CI",
                "principals.a/b",
                "principals.<unusable id>",
                "principals.local",
                "principals.owner",
            ]
        );
        assert!(c.problems.iter().all(|p| p.problem == PRINCIPAL_INVALID));
        let reserved = c.problems.iter().find(|p| p.scope == "principals.local");
        assert!(reserved.is_some_and(|p| p.detail.contains("reserved")));
        assert!(c.principals.declared());
        // The rest of the file still applies.
        let a_max = "a".repeat(MAX_ID_LEN);
        let c = load(&format!(
            r#"{{"principals": {{"{a_max}": {{"targets": []}}}}}}"#
        ));
        assert!(c.problems.is_empty(), "{:?}", c.problems);
    }

    #[test]
    fn an_unknown_field_or_a_wrong_shape_is_refused_naming_the_key_not_the_value() {
        let c = load(
            r#"{"principals": {"a": {"targets": [], "reach": "secret-value"},
                               "b": {"targets": "secret-value"},
                               "c": {},
                               "d": "secret-value",
                               "e": {"targets": [""]},
                               "f": {"targets": ["local"]}}}"#,
        );
        assert_eq!(c.principals.ids().collect::<Vec<_>>(), ["f"]);
        let detail = |id: &str| {
            c.problems
                .iter()
                .find(|p| p.scope == format!("principals.{id}"))
                .map(|p| p.detail.clone())
                .unwrap_or_else(|| panic!("no problem for {id}: {:?}", c.problems))
        };
        assert!(detail("a").contains("reach"), "{}", detail("a"));
        assert!(detail("b").contains("targets"), "{}", detail("b"));
        assert!(detail("c").contains("targets"), "{}", detail("c"));
        assert!(detail("d").contains("object"), "{}", detail("d"));
        assert!(detail("e").contains("empty"), "{}", detail("e"));
        assert!(c.problems.iter().all(|p| !p.detail.contains("secret")));
    }

    #[test]
    fn principals_that_are_not_an_object_are_one_problem() {
        let c = load(r#"{"principals": ["ci"], "limits": {"killGraceMs": 1234}}"#);
        assert_eq!(c.problems.len(), 1, "{:?}", c.problems);
        assert_eq!(c.problems[0].scope, "principals");
        assert!(c.principals.declared());
        assert_eq!(c.principals.ids().count(), 0);
        assert_eq!(c.timings.kill_grace, std::time::Duration::from_millis(1234));
    }

    #[test]
    fn the_example_config_grants_ci_the_local_target() {
        let c = load(include_str!("../../config.example.json"));
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(c.principals.ids().collect::<Vec<_>>(), ["ci"]);
        assert_eq!(
            c.principals.targets_of("ci"),
            Some(&["local".to_string()][..])
        );
    }
}
