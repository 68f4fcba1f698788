//! Identity, secrets and grants (spec §4 `tokens.whoami`, §7): what the daemon reads before it
//! relies on impd's credential broker, and the grant calls that bind secrets to an imp.
//!
//! No type here holds a secret's value: impd never sends one, and an unknown field in an answer
//! is dropped by the parser, so a value could not be kept even if one arrived. Errors stay the
//! crate's [`ImpPortError`]; `refusal` reads their `data` as types (`FORBIDDEN` reasons,
//! `NOT_FOUND` kinds).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::client::{parse, ImpdClient};
use super::error::ImpPortError;

/// What kind of credential the caller used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrincipalKind {
    /// A root or named token.
    Token,
    /// An SSH key.
    Ssh,
    /// A tailnet identity.
    Tailnet,
    /// The dashboard's session.
    Dashboard,
    /// An OAuth login.
    Oauth,
    /// A kind this client does not know.
    #[serde(other)]
    Unknown,
}

/// A token's scope. Scopes nest: `Manage` ⊃ `Exec` ⊃ `Read`, so they order that way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenScope {
    /// Read imps, grants and secrets.
    Read,
    /// Also exec, tunnels, leases, sleep and wake.
    Exec,
    /// Also create and destroy imps, grant and revoke.
    Manage,
}

impl TokenScope {
    /// impd's word for the scope.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenScope::Read => "read",
            TokenScope::Exec => "exec",
            TokenScope::Manage => "manage",
        }
    }
}

/// `tokens.whoami`: who impd takes the caller for.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct WhoAmI {
    /// The credential's kind.
    pub kind: PrincipalKind,
    /// The token's (or key's, or login's) name.
    pub name: String,
    /// Its scope.
    pub scope: TokenScope,
    /// Imp name patterns (`*` = any run of characters); `None` (`null`) = every imp and the
    /// host.
    #[serde(default)]
    pub imps: Option<Vec<String>>,
    /// Secrets the caller may grant and revoke (impd 0.27.0+); `None` = the field was absent,
    /// which means none.
    #[serde(default)]
    pub grantable: Option<Vec<String>>,
}

impl WhoAmI {
    /// Whether the caller's patterns cover `imp` (every imp when it has none).
    pub fn covers(&self, imp: &str) -> bool {
        match &self.imps {
            None => true,
            Some(patterns) => patterns.iter().any(|p| glob(p.as_bytes(), imp.as_bytes())),
        }
    }

    /// Whether `secret` is in the caller's `grantable` list.
    pub fn may_grant(&self, secret: &str) -> bool {
        self.grantable
            .as_ref()
            .is_some_and(|g| g.iter().any(|s| s == secret))
    }
}

/// impd's pattern match: `*` matches any run of characters, everything else itself.
fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| s.get(i..).is_some_and(|t| glob(rest, t))),
        Some((c, rest)) => s
            .split_first()
            .is_some_and(|(h, t)| h == c && glob(rest, t)),
    }
}

/// A secret's kind (spec §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SecretKind {
    /// GitHub; impd sets `GH_TOKEN` and `GITHUB_TOKEN` placeholders.
    Github,
    /// Anthropic; impd sets an `ANTHROPIC_API_KEY` placeholder.
    Anthropic,
    /// npm; impd sets an `NPM_TOKEN` placeholder.
    Npm,
    /// Anything else; the caller sets its own placeholders.
    Custom,
    /// An OAuth login held by impd (newer impds).
    Oauth,
    /// A kind this client does not know.
    #[serde(other)]
    Unknown,
}

impl SecretKind {
    /// The placeholder variables impd itself sets in a guest holding a grant of this kind,
    /// and refuses in a `require` start's env (spec §11; inferred beyond `GH_TOKEN`).
    pub fn placeholders(self) -> &'static [&'static str] {
        match self {
            SecretKind::Github => &["GH_TOKEN", "GITHUB_TOKEN"],
            SecretKind::Anthropic => &["ANTHROPIC_API_KEY"],
            SecretKind::Npm => &["NPM_TOKEN"],
            SecretKind::Custom | SecretKind::Oauth | SecretKind::Unknown => &[],
        }
    }
}

/// How a rule puts the credential into a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthScheme {
    /// `<header>: Bearer <value>`.
    Bearer,
    /// `<header>: Basic base64(<user>:<value>)`.
    Basic,
    /// `<header>: <value>`.
    Raw,
    /// A scheme this client does not know.
    #[serde(other)]
    Unknown,
}

/// One rule of a secret: requests to `host` get the credential in `header`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretRule {
    /// The host the broker adds the credential for.
    pub host: String,
    /// The header it goes in.
    pub header: String,
    /// How it goes in.
    pub scheme: AuthScheme,
    /// The user of a `basic` scheme.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// A secret as `secrets.list` describes it: never its value.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Secret {
    /// Its name (what grants and config refer to).
    pub name: String,
    /// Its kind.
    pub kind: SecretKind,
    /// Where the broker uses it.
    pub rules: Vec<SecretRule>,
    /// Imps granted it (those the caller may read).
    #[serde(default)]
    pub imps: Vec<String>,
    /// When it was created (ISO time).
    #[serde(default)]
    pub created_at: Option<String>,
    /// `{status, idClaims}` of an `oauth` secret.
    #[serde(default)]
    pub oauth: Option<Value>,
}

impl ImpdClient {
    /// `tokens.whoami`: the caller's kind, scope, imp patterns and `grantable` list.
    pub async fn tokens_whoami(&self) -> Result<WhoAmI, ImpPortError> {
        parse(self.call("tokens.whoami", Value::Null).await?)
    }

    /// `secrets.list`: every secret's name, kind and rules.
    pub async fn secrets_list(&self) -> Result<Vec<Secret>, ImpPortError> {
        parse(self.call("secrets.list", Value::Null).await?)
    }

    /// `grants.list`: the secret names granted to an imp.
    pub async fn grants_list(&self, imp: &str) -> Result<Vec<String>, ImpPortError> {
        parse(self.call("grants.list", json!({ "name": imp })).await?)
    }

    /// `grants.add`: idempotent. `CONFLICT` when another grant on the imp covers one of the
    /// secret's hosts, `FORBIDDEN` with a reason, `NOT_FOUND` for an unknown imp or secret.
    pub async fn grants_add(&self, imp: &str, secret: &str) -> Result<(), ImpPortError> {
        self.call("grants.add", json!({ "name": imp, "secret": secret }))
            .await?;
        Ok(())
    }

    /// `grants.delete`: `NOT_FOUND` with `data.kind = "grant"` when the imp does not hold it
    /// (a caller revoking treats that as done).
    pub async fn grants_delete(&self, imp: &str, secret: &str) -> Result<(), ImpPortError> {
        self.call("grants.delete", json!({ "name": imp, "secret": secret }))
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scopes_word_is_the_one_impd_sends() {
        for scope in [TokenScope::Read, TokenScope::Exec, TokenScope::Manage] {
            let parsed: TokenScope = serde_json::from_value(json!(scope.as_str())).unwrap();
            assert_eq!(parsed, scope);
        }
    }

    #[test]
    fn whoami_of_the_root_token_and_of_a_patterned_one() {
        let root: WhoAmI = serde_json::from_value(
            json!({"kind": "token", "name": "root", "scope": "manage", "imps": null}),
        )
        .unwrap();
        assert_eq!(root.scope, TokenScope::Manage);
        assert!(root.covers("anything") && !root.may_grant("gh"));
        assert_eq!(root.grantable, None);
        let narrow: WhoAmI = serde_json::from_value(json!({
            "kind": "token", "name": "atc", "scope": "exec", "imps": ["atc-*", "box"],
            "grantable": ["gh"], "extra": 1
        }))
        .unwrap();
        assert!(narrow.scope < TokenScope::Manage && narrow.scope > TokenScope::Read);
        assert!(narrow.covers("atc-x1") && narrow.covers("box") && !narrow.covers("boxer"));
        assert!(narrow.may_grant("gh") && !narrow.may_grant("npm"));
        let odd: WhoAmI = serde_json::from_value(
            json!({"kind": "passkey", "name": "n", "scope": "read", "imps": []}),
        )
        .unwrap();
        assert_eq!(odd.kind, PrincipalKind::Unknown);
        assert!(!odd.covers("a"));
        assert!(serde_json::from_value::<WhoAmI>(
            json!({"kind": "token", "name": "n", "scope": "admin", "imps": null})
        )
        .is_err());
    }

    #[test]
    fn glob_matches_runs_of_characters() {
        assert!(glob(b"*", b""));
        assert!(glob(b"a*c", b"abbbc") && glob(b"a*c", b"ac"));
        assert!(!glob(b"a*c", b"abd") && !glob(b"abc", b"ab"));
        assert!(glob(b"*-x*", b"atc-x1"));
    }

    #[test]
    fn a_secret_never_keeps_a_value_even_if_one_is_sent() {
        let s: Secret = serde_json::from_value(json!({
            "name": "gh", "kind": "github", "imps": ["box"], "createdAt": "2026-01-01T00:00:00.000Z",
            "rules": [{"host": "github.com", "header": "authorization", "scheme": "bearer"},
                      {"host": "npm.example", "header": "authorization", "scheme": "basic", "user": "ci"}],
            "value": "hunter2-the-value"
        }))
        .unwrap();
        assert_eq!(s.kind, SecretKind::Github);
        assert_eq!(s.rules[1].user.as_deref(), Some("ci"));
        assert_eq!(s.rules[1].scheme, AuthScheme::Basic);
        assert!(!format!("{s:?}").contains("hunter2"));
        assert_eq!(
            serde_json::to_value(&s.rules[0]).unwrap(),
            json!({"host": "github.com", "header": "authorization", "scheme": "bearer"})
        );
    }

    #[test]
    fn placeholders_per_kind() {
        assert_eq!(
            SecretKind::Github.placeholders(),
            ["GH_TOKEN", "GITHUB_TOKEN"]
        );
        assert_eq!(SecretKind::Npm.placeholders(), ["NPM_TOKEN"]);
        assert_eq!(SecretKind::Anthropic.placeholders(), ["ANTHROPIC_API_KEY"]);
        assert!(SecretKind::Custom.placeholders().is_empty());
        let k: SecretKind = serde_json::from_value(json!("aws")).unwrap();
        assert_eq!(k, SecretKind::Unknown);
    }
}
