//! Who is calling: the root token, named tokens with a scope and imp patterns, and single-use
//! exec tickets (protocol §2, §8).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::clock::Millis;
use super::envelope::ImpdError;

/// How long an exec ticket lives (protocol §8).
const TICKET_MS: Millis = 30_000;

/// Scopes nest: `Manage` ⊃ `Exec` ⊃ `Read`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Read,
    Exec,
    Manage,
}

impl Scope {
    pub fn wire(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Exec => "exec",
            Scope::Manage => "manage",
        }
    }
}

/// What kind of credential a caller used (`tokens.whoami.kind`, protocol §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    Token,
    Ssh,
    Tailnet,
    Dashboard,
    Oauth,
}

impl TokenKind {
    pub fn wire(self) -> &'static str {
        match self {
            TokenKind::Token => "token",
            TokenKind::Ssh => "ssh",
            TokenKind::Tailnet => "tailnet",
            TokenKind::Dashboard => "dashboard",
            TokenKind::Oauth => "oauth",
        }
    }
}

/// Who a token says it is: what `tokens.whoami` answers and what impd checks calls against.
/// The default is the root token's: a host-wide `manage` token with no `grantable` list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub kind: TokenKind,
    pub scope: Scope,
    /// Imp name patterns (`*` = any run of characters); `None` = every imp and the host.
    pub imps: Option<Vec<String>>,
    /// Secrets the token may grant and revoke (impd 0.27.0+); `None` = the field is absent,
    /// which means none.
    pub grantable: Option<Vec<String>>,
}

impl Default for Identity {
    fn default() -> Identity {
        Identity {
            kind: TokenKind::Token,
            scope: Scope::Manage,
            imps: None,
            grantable: None,
        }
    }
}

/// An authenticated caller.
#[derive(Clone, Debug)]
pub struct Principal {
    /// The lease principal impd derives (`root`, `token:<id>`).
    pub key: String,
    /// Human name (`owner.display` on leases, `name` in whoami).
    pub display: String,
    pub scope: Scope,
    /// Imp name patterns (`*` = any run of characters); `None` = every imp and the host.
    pub imps: Option<Vec<String>>,
    /// The bearer token it authenticated with (what a revocation matches).
    pub token: String,
    pub kind: TokenKind,
    /// Secrets it may grant and revoke; `None` = none (the field is absent in whoami).
    pub grantable: Option<Vec<String>>,
}

impl Principal {
    /// Host-wide `manage`: sees every lease and every imp.
    pub fn host_manager(&self) -> bool {
        self.scope == Scope::Manage && self.imps.is_none()
    }

    /// True when the patterns cover this imp.
    pub fn covers(&self, imp: &str) -> bool {
        match &self.imps {
            None => true,
            Some(patterns) => patterns.iter().any(|p| glob(p.as_bytes(), imp.as_bytes())),
        }
    }

    /// `FORBIDDEN` unless the caller has `scope` on `imp` (or host-wide when `imp` is None).
    pub fn require(&self, scope: Scope, imp: Option<&str>) -> Result<(), ImpdError> {
        if self.scope < scope {
            return Err(
                ImpdError::new("FORBIDDEN", format!("needs {} scope", scope.wire()))
                    .with_data(json!({"reason": "scope"})),
            );
        }
        let in_scope = match imp {
            Some(name) => self.covers(name),
            None => self.imps.is_none(),
        };
        if !in_scope {
            return Err(
                ImpdError::new("FORBIDDEN", "imp outside the token's patterns")
                    .with_data(json!({"reason": "imp_out_of_scope"})),
            );
        }
        Ok(())
    }

    /// `tokens.whoami` output; `grantable` only from an impd that has `grantableTokens`.
    pub fn whoami(&self, grantable_tokens: bool) -> Value {
        let mut v = json!({
            "kind": self.kind.wire(),
            "name": self.display,
            "scope": self.scope.wire(),
            "imps": self.imps,
        });
        if let Some(g) = self.grantable.as_ref().filter(|_| grantable_tokens) {
            v["grantable"] = json!(g);
        }
        v
    }

    /// Takes on `id`'s kind, scope, patterns and grantable list.
    fn assume(&mut self, id: Identity) {
        self.kind = id.kind;
        self.scope = id.scope;
        self.imps = id.imps;
        self.grantable = id.grantable;
    }
}

/// `*` matches any run of characters; everything else matches itself.
fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| glob(rest, &s[i..])),
        Some((c, rest)) => s.first() == Some(c) && glob(rest, &s[1..]),
    }
}

/// A ticket minted by `exec.ticket`.
#[derive(Clone, Debug)]
struct Ticket {
    principal: Principal,
    imp: String,
    expires: Millis,
}

/// What `/exec` authenticated with.
#[derive(Clone, Debug)]
pub struct Caller {
    pub principal: Principal,
    /// Set for a ticket: the only imp this socket may use.
    pub ticket_imp: Option<String>,
}

/// Tokens and tickets.
#[derive(Debug, Default)]
pub struct Auth {
    tokens: BTreeMap<String, Principal>,
    tickets: BTreeMap<String, Ticket>,
    next_id: u64,
}

impl Auth {
    pub fn with_root(token: &str) -> Auth {
        let mut auth = Auth::default();
        auth.tokens.insert(
            token.to_string(),
            Principal {
                key: "root".into(),
                display: "root".into(),
                scope: Scope::Manage,
                imps: None,
                token: token.to_string(),
                kind: TokenKind::Token,
                grantable: None,
            },
        );
        auth
    }

    /// Changes who an existing token is (later calls and sockets see it; sockets already open
    /// keep the identity they opened with). False when the token is unknown.
    pub fn set_identity(&mut self, token: &str, id: Identity) -> bool {
        match self.tokens.get_mut(token) {
            Some(p) => {
                p.assume(id);
                true
            }
            None => false,
        }
    }

    /// Mints a named token `imp_<id>.<secret>`.
    pub fn add_token(&mut self, scope: Scope, imps: Option<Vec<String>>) -> String {
        self.add_token_as(Identity {
            scope,
            imps,
            ..Identity::default()
        })
    }

    /// Mints a named token `imp_<id>.<secret>` with a whole identity.
    pub fn add_token_as(&mut self, identity: Identity) -> String {
        self.next_id += 1;
        let id = format!("{:04x}{}", self.next_id, &random_hex(4));
        let token = format!("imp_{id}.{}", random_hex(16));
        self.tokens.insert(
            token.clone(),
            Principal {
                key: format!("token:{id}"),
                display: format!("token-{id}"),
                scope: identity.scope,
                imps: identity.imps,
                token: token.clone(),
                kind: identity.kind,
                grantable: identity.grantable,
            },
        );
        token
    }

    /// Whether `token` is still one impd knows (not revoked).
    pub fn knows(&self, token: &str) -> bool {
        self.tokens.contains_key(token)
    }

    /// Removes a token (and the tickets it minted). True if it existed.
    pub fn revoke(&mut self, token: &str) -> bool {
        self.tickets.retain(|_, t| t.principal.token != token);
        self.tokens.remove(token).is_some()
    }

    /// The caller behind an `Authorization` header value.
    pub fn bearer(&self, header: Option<&str>) -> Option<Principal> {
        let token = header?.strip_prefix("Bearer ")?.trim();
        self.tokens.get(token).cloned()
    }

    pub fn mint_ticket(
        &mut self,
        principal: &Principal,
        imp: &str,
        now: Millis,
    ) -> (String, Millis) {
        let ticket = random_hex(24);
        // impd keeps at most 32 live tickets per caller, dropping the oldest.
        self.tickets.retain(|_, t| t.expires > now);
        let mine: Vec<(Millis, String)> = self
            .tickets
            .iter()
            .filter(|(_, t)| t.principal.key == principal.key)
            .map(|(k, t)| (t.expires, k.clone()))
            .collect();
        if mine.len() >= 32 {
            if let Some((_, oldest)) = mine.iter().min() {
                self.tickets.remove(oldest);
            }
        }
        let expires = now + TICKET_MS;
        self.tickets.insert(
            ticket.clone(),
            Ticket {
                principal: principal.clone(),
                imp: imp.to_string(),
                expires,
            },
        );
        (ticket, expires)
    }

    /// Consumes a ticket: single use, 30 s, and only while its token still exists.
    pub fn redeem(&mut self, ticket: &str, now: Millis) -> Option<Caller> {
        let t = self.tickets.remove(ticket)?;
        if t.expires <= now || !self.tokens.contains_key(&t.principal.token) {
            return None;
        }
        Some(Caller {
            principal: t.principal,
            ticket_imp: Some(t.imp),
        })
    }
}

/// `n` random bytes as lowercase hex.
pub fn random_hex(n: usize) -> String {
    let mut raw = vec![0u8; n];
    getrandom::fill(&mut raw).expect("the OS random source works");
    raw.iter().map(|b| format!("{b:02x}")).collect()
}

/// A random UUID v4 string (boot ids, imp ids).
pub fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}
