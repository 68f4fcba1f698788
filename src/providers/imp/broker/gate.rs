//! The gate (spec §6.2): read-only checks, run before the daemon relies on impd's broker, on
//! every create, verify and rebind, since a token or an impd can change under a running
//! daemon. [`judge`] is the decision over what impd said; [`read`] asks impd afresh.

use std::collections::BTreeMap;

use impd_client::{Features, ImpdClient, Secret, SecretRule, TokenScope, WhoAmI};

use super::{AgentAuth, BrokerError};
use crate::providers::imp::host_error::HostError;

/// What impd said, read afresh for one gate.
#[derive(Debug, Clone)]
pub struct ImpdView {
    /// `system.info` features.
    pub features: Features,
    /// `tokens.whoami`.
    pub whoami: WhoAmI,
    /// `secrets.list` (names, kinds and rules; never values).
    pub secrets: Vec<Secret>,
}

/// Reads impd's features, the token's identity and the secrets, in that order. An impd that
/// cannot answer is `host_unavailable`, not a gate refusal.
pub async fn read(client: &ImpdClient, target: &str) -> Result<ImpdView, HostError> {
    let features = client
        .system_info()
        .await
        .map_err(|e| HostError::impd(target, "reading impd's features", &e))?
        .features;
    let whoami = client
        .tokens_whoami()
        .await
        .map_err(|e| HostError::impd(target, "reading the token's identity", &e))?;
    let secrets = client
        .secrets_list()
        .await
        .map_err(|e| HostError::impd(target, "listing impd's secrets", &e))?;
    Ok(ImpdView {
        features,
        whoami,
        secrets,
    })
}

/// A pattern that is nothing but `*`s matches every imp: a token that broad could grant the
/// agent's credential to any imp, so the gate refuses it.
fn matches_everything(pattern: &str) -> bool {
    !pattern.is_empty() && pattern.bytes().all(|b| b == b'*')
}

/// The gate's decision for `agent`'s `auth` on the imp `imp`. `bound`: the rules a binding
/// recorded per secret (verify and rebind); `None` for a create, which binds what impd has
/// now. Answers the secrets to bind, in the order of `auth.secrets`.
pub fn judge<'v>(
    view: &'v ImpdView,
    agent: &str,
    auth: &AgentAuth,
    imp: &str,
    bound: Option<&BTreeMap<String, Vec<SecretRule>>>,
) -> Result<Vec<&'v Secret>, BrokerError> {
    // 1. impd's features.
    let missing: Vec<&'static str> = [
        ("grantableTokens", view.features.grantable_tokens),
        ("secretRebind", view.features.secret_rebind),
    ]
    .into_iter()
    .filter(|(_, has)| !has)
    .map(|(name, _)| name)
    .collect();
    if !missing.is_empty() {
        return Err(BrokerError::ImpdTooOld {
            imp: imp.to_string(),
            missing,
        });
    }
    // 2. The token's identity.
    let who = &view.whoami;
    if who.scope < TokenScope::Manage {
        return Err(BrokerError::TokenScope {
            scope: who.scope.as_str().to_string(),
        });
    }
    match &who.imps {
        Some(patterns)
            if !patterns.is_empty() && !patterns.iter().any(|p| matches_everything(p)) => {}
        _ => return Err(BrokerError::TokenTooBroad),
    }
    if !who.covers(imp) {
        return Err(BrokerError::ImpOutOfScope {
            imp: imp.to_string(),
        });
    }
    // 3. Every bound secret is grantable by this token.
    if let Some(secret) = auth.secrets.iter().find(|s| !who.may_grant(s)) {
        return Err(BrokerError::SecretNotGrantable {
            secret: secret.clone(),
        });
    }
    // 4. Each secret exists, its rules are the bound ones, an oauth one is signed in, and no
    //    configured placeholder is one impd sets itself.
    let mut resolved = Vec::with_capacity(auth.secrets.len());
    for name in &auth.secrets {
        let Some(secret) = view.secrets.iter().find(|s| &s.name == name) else {
            return Err(BrokerError::SecretMissing {
                secret: name.clone(),
            });
        };
        if let Some(rules) = bound.and_then(|b| b.get(name)) {
            if rules != &secret.rules {
                return Err(BrokerError::SecretMismatch {
                    secret: name.clone(),
                });
            }
        }
        if secret.kind == impd_client::SecretKind::Oauth {
            let status = secret
                .oauth
                .as_ref()
                .and_then(|o| o.get("status"))
                .and_then(|s| s.as_str());
            if !view.features.oauth_secrets || status != Some("ready") {
                return Err(BrokerError::SigninNeeded {
                    secret: name.clone(),
                    status: status.unwrap_or("unknown").to_string(),
                });
            }
        }
        if let Some(p) = auth
            .placeholders
            .iter()
            .find(|p| secret.kind.placeholders().contains(&p.as_str()))
        {
            return Err(BrokerError::BindingInvalid {
                agent: agent.to_string(),
                problem: "placeholder_set_by_impd",
                detail: format!(
                    "placeholder {p} is set by impd itself for secret '{name}'; drop it from 'auth.placeholders'"
                ),
            });
        }
        resolved.push(secret);
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn view(
        features: serde_json::Value,
        whoami: serde_json::Value,
        secrets: serde_json::Value,
    ) -> ImpdView {
        let info = impd_client::SystemInfo::from_output(
            &json!({"version": "0.30.1", "features": features}),
        );
        ImpdView {
            features: info.features,
            whoami: serde_json::from_value(whoami).unwrap(),
            secrets: serde_json::from_value(secrets).unwrap(),
        }
    }

    fn good() -> ImpdView {
        view(
            json!({"grantableTokens": true, "secretRebind": true, "execRequire": true, "oauthSecrets": true}),
            json!({"kind": "token", "name": "atc", "scope": "manage", "imps": ["atc-*"],
                   "grantable": ["claude-oauth", "gh"]}),
            json!([
                {"name": "claude-oauth", "kind": "custom",
                 "rules": [{"host": "api.anthropic.com", "header": "authorization", "scheme": "bearer"}]},
                {"name": "gh", "kind": "github",
                 "rules": [{"host": "api.github.com", "header": "authorization", "scheme": "bearer"}]},
                {"name": "login", "kind": "oauth", "rules": [], "oauth": {"status": "needs_login", "idClaims": null}}
            ]),
        )
    }

    fn auth(secrets: &[&str], placeholders: &[&str]) -> AgentAuth {
        AgentAuth {
            secrets: secrets.iter().map(|s| s.to_string()).collect(),
            placeholders: placeholders.iter().map(|s| s.to_string()).collect(),
            check: None,
        }
    }

    fn code(r: Result<Vec<&Secret>, BrokerError>) -> String {
        match r {
            Ok(s) => format!("ok:{}", s.len()),
            Err(e) => crate::server::error::Error::from(e)
                .code()
                .as_str()
                .to_string(),
        }
    }

    #[test]
    fn a_sound_impd_and_token_pass_with_the_secrets_in_order() {
        let v = good();
        let got = judge(
            &v,
            "a",
            &auth(&["gh", "claude-oauth"], &["CLAUDE_CODE_OAUTH_TOKEN"]),
            "atc-x",
            None,
        )
        .unwrap();
        assert_eq!(
            got.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["gh", "claude-oauth"]
        );
    }

    #[test]
    fn each_gate_step_has_its_own_code() {
        let a = auth(&["claude-oauth"], &[]);
        let mut v = good();
        v.features.secret_rebind = false;
        assert_eq!(code(judge(&v, "a", &a, "atc-x", None)), "auth_impd_too_old");
        let mut v = good();
        v.whoami.scope = TokenScope::Exec;
        assert_eq!(code(judge(&v, "a", &a, "atc-x", None)), "auth_token_scope");
        for imps in [None, Some(vec![]), Some(vec!["**".to_string()])] {
            let mut v = good();
            v.whoami.imps = imps.clone();
            assert_eq!(
                code(judge(&v, "a", &a, "atc-x", None)),
                "auth_token_too_broad",
                "{imps:?}"
            );
        }
        assert_eq!(
            code(judge(&good(), "a", &a, "other", None)),
            "auth_imp_out_of_scope"
        );
        assert_eq!(
            code(judge(&good(), "a", &auth(&["nope"], &[]), "atc-x", None)),
            "auth_secret_not_grantable"
        );
        let mut v = good();
        v.whoami.grantable = Some(vec!["ghost".into()]);
        assert_eq!(
            code(judge(&v, "a", &auth(&["ghost"], &[]), "atc-x", None)),
            "auth_secret_mismatch"
        );
        let mut v = good();
        v.whoami.grantable = Some(vec!["login".into()]);
        assert_eq!(
            code(judge(&v, "a", &auth(&["login"], &[]), "atc-x", None)),
            "auth_signin_needed"
        );
    }

    #[test]
    fn bound_rules_must_be_the_rules_impd_has() {
        let v = good();
        let a = auth(&["claude-oauth"], &[]);
        let same = BTreeMap::from([("claude-oauth".to_string(), v.secrets[0].rules.clone())]);
        assert_eq!(code(judge(&v, "a", &a, "atc-x", Some(&same))), "ok:1");
        let other = BTreeMap::from([("claude-oauth".to_string(), vec![])]);
        let e = judge(&v, "a", &a, "atc-x", Some(&other)).unwrap_err();
        assert_eq!(
            e,
            BrokerError::SecretMismatch {
                secret: "claude-oauth".into()
            }
        );
    }

    #[test]
    fn a_placeholder_impd_sets_for_a_granted_kind_is_refused() {
        let e = judge(&good(), "a", &auth(&["gh"], &["GH_TOKEN"]), "atc-x", None).unwrap_err();
        let wire = crate::server::error::Error::from(e).wire();
        assert_eq!(wire.code.as_str(), "auth_binding_invalid");
        assert_eq!(wire.data["problem"], "placeholder_set_by_impd");
    }
}
