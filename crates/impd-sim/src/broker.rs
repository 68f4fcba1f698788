//! impd's credential broker as a client sees it (protocol §7, §11): the secrets the host holds,
//! grants of secrets to imps, whether an imp's broker is ready, and the record of every `/exec`
//! opening the simulator received.
//!
//! A secret's value lives only here and in the test that asked for it: no answer, no guest
//! environment and no log line carries it, so a test can grep the daemon's world for the value
//! and expect to find nothing. Grants live on the imp (`Imp::grants`), so destroying an imp ends
//! them. The RPC side with its injected faults is in `grants`; the test's controls in
//! `broker_controls`; the environment a start gets in `exec::command`.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde_json::{json, Value};

use super::auth::{Principal, Scope};
use super::clock::Millis;
use super::envelope::{date, ImpdError};
use super::options::Flag;
use super::state::{Imp, SimState};

/// What a placeholder variable holds in a guest: never the credential, which the broker adds on
/// the way out.
pub const PLACEHOLDER: &str = "imp-broker-placeholder";

/// A secret's kind (protocol §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretKind {
    Github,
    Anthropic,
    Npm,
    Custom,
    Oauth,
}

impl SecretKind {
    pub fn wire(self) -> &'static str {
        match self {
            SecretKind::Github => "github",
            SecretKind::Anthropic => "anthropic",
            SecretKind::Npm => "npm",
            SecretKind::Custom => "custom",
            SecretKind::Oauth => "oauth",
        }
    }

    /// Variables impd sets to [`PLACEHOLDER`] in a guest holding a grant of this kind, and
    /// refuses in a `require` start's env (protocol §11, inferred beyond `GH_TOKEN`).
    pub fn placeholders(self) -> &'static [&'static str] {
        match self {
            SecretKind::Github => &["GH_TOKEN", "GITHUB_TOKEN"],
            SecretKind::Anthropic => &["ANTHROPIC_API_KEY"],
            SecretKind::Npm => &["NPM_TOKEN"],
            SecretKind::Custom | SecretKind::Oauth => &[],
        }
    }
}

/// How a rule puts the credential into a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthScheme {
    Bearer,
    Basic,
    Raw,
}

impl AuthScheme {
    pub fn wire(self) -> &'static str {
        match self {
            AuthScheme::Bearer => "bearer",
            AuthScheme::Basic => "basic",
            AuthScheme::Raw => "raw",
        }
    }
}

/// One rule of a secret: requests to `host` get the credential in `header`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretRule {
    pub host: String,
    pub header: String,
    pub scheme: AuthScheme,
    /// The user of a `basic` scheme.
    pub user: Option<String>,
}

impl SecretRule {
    /// `Authorization: Bearer <value>` for `host`.
    pub fn bearer(host: &str) -> SecretRule {
        SecretRule {
            host: host.to_string(),
            header: "authorization".into(),
            scheme: AuthScheme::Bearer,
            user: None,
        }
    }

    fn wire(&self) -> Value {
        let mut v = json!({"host": self.host, "header": self.header, "scheme": self.scheme.wire()});
        if let Some(u) = &self.user {
            v["user"] = json!(u);
        }
        v
    }
}

/// A secret as a test defines it. `value` is what only impd should know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Secret {
    pub name: String,
    pub kind: SecretKind,
    pub rules: Vec<SecretRule>,
    pub value: String,
}

impl Secret {
    /// A secret with a bearer rule per host and a fresh value no one could guess or mistake
    /// for anything else in a grep.
    pub fn new(name: &str, kind: SecretKind, hosts: &[&str]) -> Secret {
        Secret {
            name: name.to_string(),
            kind,
            rules: hosts.iter().map(|h| SecretRule::bearer(h)).collect(),
            value: format!("impd-sim-secret-{}", super::auth::random_hex(16)),
        }
    }

    fn covers(&self, host: &str) -> bool {
        self.rules.iter().any(|r| r.host == host)
    }
}

/// A grant step a fault can hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrantStep {
    Add,
    Delete,
}

impl GrantStep {
    /// The step a procedure is, if it is one.
    pub fn of(procedure: &str) -> Option<GrantStep> {
        match procedure {
            "grants.add" => Some(GrantStep::Add),
            "grants.delete" => Some(GrantStep::Delete),
            _ => None,
        }
    }
}

/// What an injected fault does to one grant step.
#[derive(Clone, Debug, PartialEq)]
pub enum GrantFault {
    /// Refuse without any effect, with this impd error (`code` as in protocol §3, which also
    /// decides the HTTP status).
    Fail {
        code: &'static str,
        message: String,
        data: Option<Value>,
    },
    /// Apply the step, then drop the connection without an answer (the client sees the call
    /// fail in transport, with the effect in place).
    LoseAnswer,
    /// Apply the step, then answer only after this long (longer than the client's call
    /// timeout: the client gives up with the effect in place).
    AnswerAfter(Duration),
}

/// Which opening message a socket sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenKind {
    Start,
    Attach,
}

/// One `/exec` opening message as the simulator received it, before any check: what a test
/// reads to prove what was (or was not) sent. Environment values are left out on purpose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecOpenRecord {
    pub kind: OpenKind,
    pub imp: String,
    pub session: Option<String>,
    /// `require` as sent (empty when absent).
    pub require: Vec<String>,
    /// The keys of the start's `env` (empty for an attach).
    pub env_keys: Vec<String>,
}

struct StoredSecret {
    secret: Secret,
    created_at: Millis,
}

/// Injected one-shot faults for grant steps, in order.
struct QueuedGrantFault {
    step: GrantStep,
    /// Only a step on this secret takes it; `None`: any.
    secret: Option<String>,
    fault: GrantFault,
}

/// The broker's part of the simulator's state.
#[derive(Default)]
pub struct BrokerState {
    secrets: BTreeMap<String, StoredSecret>,
    /// Imps (by name, so a test can set it before the daemon creates the imp) whose per-boot
    /// CA-bundle step fails, with the error impd would report. It stays until the test clears
    /// it: the test decides when the step would succeed again.
    ca_failures: BTreeMap<String, String>,
    grant_faults: VecDeque<QueuedGrantFault>,
    opens: Vec<ExecOpenRecord>,
    /// Secrets every imp created from now on holds from the start, as if an operator had
    /// granted them: for tests of the broker's `require` that do not care who granted.
    grants_on_create: std::collections::BTreeSet<String>,
    /// The sign-in status `secrets.list` gives an `oauth` secret, by name, where a test set
    /// one; every other oauth secret is `ready`.
    oauth_status: BTreeMap<String, OauthStatus>,
}

/// Where an `oauth` secret's sign-in stands (protocol §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OauthStatus {
    Pending,
    Ready,
    NeedsLogin,
}

impl OauthStatus {
    pub fn wire(self) -> &'static str {
        match self {
            OauthStatus::Pending => "pending",
            OauthStatus::Ready => "ready",
            OauthStatus::NeedsLogin => "needs_login",
        }
    }
}

impl BrokerState {
    /// Makes every imp created from now on hold `secret`.
    pub fn grant_on_create(&mut self, secret: &str) {
        self.grants_on_create.insert(secret.to_string());
    }

    /// The grants a new imp starts with.
    pub fn grants_on_create(&self) -> std::collections::BTreeSet<String> {
        self.grants_on_create.clone()
    }

    /// Sets the sign-in status `secrets.list` gives the oauth secret `name`.
    pub fn set_oauth_status(&mut self, name: &str, status: OauthStatus) {
        self.oauth_status.insert(name.to_string(), status);
    }

    /// Defines (or replaces) a secret. A replaced one keeps its creation time.
    pub fn define(&mut self, secret: Secret, now: Millis) {
        let created_at = self.secrets.get(&secret.name).map_or(now, |s| s.created_at);
        self.secrets
            .insert(secret.name.clone(), StoredSecret { secret, created_at });
    }

    pub fn remove(&mut self, name: &str) -> bool {
        self.secrets.remove(name).is_some()
    }

    pub fn secret(&self, name: &str) -> Option<&Secret> {
        self.secrets.get(name).map(|s| &s.secret)
    }

    pub fn values(&self) -> Vec<String> {
        self.secrets
            .values()
            .map(|s| s.secret.value.clone())
            .collect()
    }

    pub fn set_ca_failure(&mut self, imp: &str, detail: Option<&str>) {
        match detail {
            Some(d) => self.ca_failures.insert(imp.to_string(), d.to_string()),
            None => self.ca_failures.remove(imp),
        };
    }

    /// `Ok` when the imp's broker is ready (it holds a grant and its CA-bundle step did not
    /// fail), else the detail impd would give (protocol §11 rules 1 and 2).
    pub fn readiness(&self, imp: &Imp) -> Result<(), String> {
        if imp.grants.is_empty() {
            return Err("no grant".into());
        }
        match self
            .ca_failures
            .get(&imp.name)
            .or_else(|| self.ca_failures.get("*"))
        {
            Some(detail) => Err(detail.clone()),
            None => Ok(()),
        }
    }

    /// Placeholder variables of the kinds the imp holds grants of.
    pub fn placeholders_of(&self, imp: &Imp) -> Vec<&'static str> {
        let mut vars: Vec<&'static str> = imp
            .grants
            .iter()
            .filter_map(|g| self.secret(g))
            .flat_map(|s| s.kind.placeholders().iter().copied())
            .collect();
        vars.sort_unstable();
        vars.dedup();
        vars
    }

    pub fn queue_grant_fault(&mut self, step: GrantStep, secret: Option<&str>, fault: GrantFault) {
        self.grant_faults.push_back(QueuedGrantFault {
            step,
            secret: secret.map(str::to_string),
            fault,
        });
    }

    /// The first queued fault for this step on this secret, consumed.
    pub fn take_grant_fault(&mut self, step: GrantStep, secret: &str) -> Option<GrantFault> {
        let at = self
            .grant_faults
            .iter()
            .position(|f| f.step == step && f.secret.as_deref().is_none_or(|s| s == secret))?;
        self.grant_faults.remove(at).map(|f| f.fault)
    }

    pub fn record_open(&mut self, record: ExecOpenRecord) {
        self.opens.push(record);
    }

    pub fn opens(&self) -> &[ExecOpenRecord] {
        &self.opens
    }
}

impl SimState {
    /// `secrets.list`: every secret, never a value; `imps` lists only imps the caller may read.
    pub fn secrets_list(&self, p: &Principal) -> Result<Value, ImpdError> {
        if p.scope < Scope::Read {
            return Err(forbidden("scope", "needs read scope"));
        }
        Ok(Value::Array(
            self.broker
                .secrets
                .values()
                .map(|s| {
                    let imps: Vec<&String> = self
                        .imps
                        .values()
                        .filter(|i| i.grants.contains(&s.secret.name) && p.covers(&i.name))
                        .map(|i| &i.name)
                        .collect();
                    let mut v = json!({
                        "name": s.secret.name,
                        "kind": s.secret.kind.wire(),
                        "rules": s.secret.rules.iter().map(SecretRule::wire).collect::<Vec<_>>(),
                        "imps": imps,
                        "createdAt": date(s.created_at),
                    });
                    if s.secret.kind == SecretKind::Oauth {
                        let status = self
                            .broker
                            .oauth_status
                            .get(&s.secret.name)
                            .copied()
                            .unwrap_or(OauthStatus::Ready);
                        v["oauth"] = json!({"status": status.wire(), "idClaims": null});
                    }
                    v
                })
                .collect(),
        ))
    }

    /// `grants.list {name}`.
    pub fn grants_list(&self, p: &Principal, imp: &str) -> Result<Value, ImpdError> {
        p.require(Scope::Read, Some(imp))?;
        Ok(json!(self.imp(imp)?.grants.iter().collect::<Vec<_>>()))
    }

    /// `grants.add {name, secret}`: idempotent; `CONFLICT` when another grant on the imp
    /// already covers one of the secret's hosts.
    pub fn grant_add(
        &mut self,
        p: &Principal,
        imp: &str,
        secret: &str,
    ) -> Result<Value, ImpdError> {
        self.may_grant(p, imp, secret)?;
        let held = &self.imp(imp)?.grants;
        let s = self
            .broker
            .secret(secret)
            .ok_or_else(|| ImpdError::not_found("secret", secret))?;
        if held.contains(secret) {
            return Ok(json!({}));
        }
        for other in held.iter().filter_map(|g| self.broker.secret(g)) {
            if let Some(rule) = s.rules.iter().find(|r| other.covers(&r.host)) {
                return Err(ImpdError::new(
                    "CONFLICT",
                    format!("{imp} already holds {} for {}", other.name, rule.host),
                )
                .with_data(json!({"kind": "grant", "name": other.name})));
            }
        }
        if let Some(i) = self.imps.get_mut(imp) {
            i.grants.insert(secret.to_string());
        }
        Ok(json!({}))
    }

    /// `grants.delete {name, secret}`: `NOT_FOUND` `kind: grant` when the imp does not hold it.
    pub fn grant_delete(
        &mut self,
        p: &Principal,
        imp: &str,
        secret: &str,
    ) -> Result<Value, ImpdError> {
        self.may_grant(p, imp, secret)?;
        let i = self
            .imps
            .get_mut(imp)
            .ok_or_else(|| ImpdError::not_found("imp", imp))?;
        if !i.grants.remove(secret) {
            return Err(ImpdError::not_found("grant", secret));
        }
        Ok(json!({}))
    }

    /// Who may grant or revoke (protocol §2): a host-wide `manage` token, or a patterned
    /// `manage` token whose patterns cover the imp and whose `grantable` list names the secret.
    /// Checked before the imp or secret is looked up, so a refusal tells nothing about what
    /// exists. Without `grantableTokens` no token has a `grantable` list.
    fn may_grant(&self, p: &Principal, imp: &str, secret: &str) -> Result<(), ImpdError> {
        if p.scope < Scope::Manage {
            return Err(forbidden("scope", "needs manage scope"));
        }
        if p.host_manager() {
            return Ok(());
        }
        if !p.covers(imp) {
            return Err(forbidden(
                "imp_out_of_scope",
                "imp outside the token's patterns",
            ));
        }
        let grantable = self
            .opts
            .has(Flag::GrantableTokens)
            .then_some(p.grantable.as_ref())
            .flatten();
        if !grantable.is_some_and(|g| g.iter().any(|s| s == secret)) {
            return Err(forbidden(
                "not_grantable",
                format!("the token may not grant {secret}"),
            ));
        }
        Ok(())
    }
}

fn forbidden(reason: &str, message: impl Into<String>) -> ImpdError {
    ImpdError::new("FORBIDDEN", message).with_data(json!({ "reason": reason }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(b: &mut BrokerState, step: GrantStep, secret: Option<&str>, n: u64) {
        b.queue_grant_fault(
            step,
            secret,
            GrantFault::AnswerAfter(Duration::from_secs(n)),
        );
    }

    #[test]
    fn a_grant_fault_goes_to_the_first_step_it_matches() {
        let mut b = BrokerState::default();
        queued(&mut b, GrantStep::Delete, None, 1);
        queued(&mut b, GrantStep::Add, Some("b"), 2);
        queued(&mut b, GrantStep::Add, None, 3);
        let after = |f: Option<GrantFault>| match f {
            Some(GrantFault::AnswerAfter(d)) => d.as_secs(),
            other => panic!("{other:?}"),
        };
        assert_eq!(after(b.take_grant_fault(GrantStep::Add, "a")), 3);
        assert_eq!(b.take_grant_fault(GrantStep::Add, "a"), None);
        assert_eq!(after(b.take_grant_fault(GrantStep::Add, "b")), 2);
        assert_eq!(after(b.take_grant_fault(GrantStep::Delete, "b")), 1);
        assert_eq!(b.take_grant_fault(GrantStep::Delete, "b"), None);
    }

    #[test]
    fn placeholders_follow_the_kind() {
        assert_eq!(
            SecretKind::Github.placeholders(),
            ["GH_TOKEN", "GITHUB_TOKEN"]
        );
        assert_eq!(SecretKind::Anthropic.placeholders(), ["ANTHROPIC_API_KEY"]);
        assert_eq!(SecretKind::Npm.placeholders(), ["NPM_TOKEN"]);
        assert!(SecretKind::Custom.placeholders().is_empty());
        assert!(SecretKind::Oauth.placeholders().is_empty());
    }

    #[test]
    fn a_new_secret_has_a_distinct_value_and_bearer_rules() {
        let a = Secret::new("gh", SecretKind::Github, &["github.com", "api.github.com"]);
        let b = Secret::new("gh", SecretKind::Github, &["github.com"]);
        assert_ne!(a.value, b.value);
        assert!(a.value.len() > 32);
        assert_eq!(a.rules[1], SecretRule::bearer("api.github.com"));
        assert!(a.covers("github.com") && !a.covers("gitlab.com"));
    }

    #[test]
    fn a_rule_sends_user_only_when_set() {
        let mut r = SecretRule::bearer("npmjs.org");
        assert!(r.wire().get("user").is_none());
        r.scheme = AuthScheme::Basic;
        r.user = Some("ci".into());
        assert_eq!(
            r.wire(),
            json!({"host": "npmjs.org", "header": "authorization", "scheme": "basic", "user": "ci"})
        );
    }
}
