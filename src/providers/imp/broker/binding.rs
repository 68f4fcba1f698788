//! The binding of one host to impd's broker (spec §6.3), as plain data and rules: its states,
//! its grants' states, the bound secrets (names and rules only, so there is nowhere to put a
//! credential value), the binding hash, and the transitions a binder takes. Nothing here talks
//! to impd or the store: `store::bindings` keeps these records and the binder (one actor per
//! host) drives them; every rule it applies is a function here with a unit test.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use uuid::Uuid;

// A binding's and a grant's states are the wire's own: the store keeps their words, and
// `GET /v1/sessions/{id}/auth` lists them as they are.
use atc_protocol::responses::{AuthBindingState, AuthGrantState};
use impd_client::{AuthScheme, Secret, SecretRule};

/// A state word that names no state; a store row holding one is corrupt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} state '{word}'")]
pub struct UnknownState {
    /// Which kind of state (`binding`, `grant`).
    pub what: &'static str,
    /// The word found.
    pub word: String,
}

/// The binding state a store word names.
pub fn binding_state(word: &str) -> Result<AuthBindingState, UnknownState> {
    AuthBindingState::parse(word).ok_or_else(|| UnknownState {
        what: "binding",
        word: word.to_string(),
    })
}

/// The grant state a store word names.
pub fn grant_state(word: &str) -> Result<AuthGrantState, UnknownState> {
    AuthGrantState::parse(word).ok_or_else(|| UnknownState {
        what: "grant",
        word: word.to_string(),
    })
}

/// One rule of a bound secret, as impd listed it when it was bound. The scheme stays the
/// word impd used, so a scheme this daemon does not know still hashes and compares exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundRule {
    /// The host the broker adds the credential for.
    pub host: String,
    /// The header it goes in.
    pub header: String,
    /// `bearer`, `basic`, `raw`, or a newer impd's word.
    pub scheme: String,
    /// The user of a `basic` scheme. Absent (not `null`) from the JSON when there is none, as
    /// on impd's wire, so the hash does not depend on how a missing user was spelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// A secret as a binding records it: its name, kind and rules. There is deliberately no field
/// a credential value could go in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundSecret {
    /// The impd secret's name.
    pub name: String,
    /// Its kind as impd named it (`github`, `custom`, ...).
    pub kind: String,
    /// Where the broker uses it, in impd's order.
    pub rules: Vec<BoundRule>,
}

/// The lower-case word serde gives a unit enum variant (`SecretKind`, `AuthScheme`).
fn serde_word<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        // Both enums are plain unit variants, so serde always gives a string; anything else
        // would be a change to impd-client, and recording it as unknown keeps the hash honest.
        _ => "unknown".to_string(),
    }
}

impl BoundSecret {
    /// What a binding records of a secret impd listed (its value is never in a listing).
    pub fn from_impd(secret: &Secret) -> BoundSecret {
        BoundSecret {
            name: secret.name.clone(),
            kind: serde_word(&secret.kind),
            rules: secret
                .rules
                .iter()
                .map(|r| BoundRule {
                    host: r.host.clone(),
                    header: r.header.clone(),
                    scheme: serde_word(&r.scheme),
                    user: r.user.clone(),
                })
                .collect(),
        }
    }

    /// The bound rules in impd-client's form, for the gate's comparison with what impd lists
    /// now. A scheme word impd-client does not know becomes its `Unknown`.
    pub fn impd_rules(&self) -> Vec<SecretRule> {
        self.rules
            .iter()
            .map(|r| SecretRule {
                host: r.host.clone(),
                header: r.header.clone(),
                scheme: serde_json::from_value(Value::String(r.scheme.clone()))
                    .unwrap_or(AuthScheme::Unknown),
                user: r.user.clone(),
            })
            .collect()
    }
}

/// The binding hash (spec §6.3): SHA-256 hex of the canonical JSON
/// `{"secrets": [{name, kind, rules}, ...]}`, secrets sorted by name and rules in impd's order,
/// so a launch planned against one set of secrets can tell it is still current.
pub fn binding_hash(secrets: &[BoundSecret]) -> String {
    let mut sorted: Vec<&BoundSecret> = secrets.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    crate::protocol::canonical::sha256_hex(&json!({ "secrets": sorted }))
}

/// The revision a rebind in flight moves the binding to. Recorded before the rebind touches
/// impd, so a daemon that dies midway knows at start-up which grants to take back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRebind {
    /// The revision it moves to (the current one plus one).
    pub revision: u32,
    /// The hash of `secrets`.
    pub hash: String,
    /// The secrets it binds.
    pub secrets: Vec<BoundSecret>,
    /// The rebind's own attempt id: grants it adds carry it, so a failure removes exactly
    /// those and no grant of the earlier revision.
    pub attempt_id: Uuid,
}

/// One host's binding record (spec §6.3). Sub-sessions on the host share it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// The host key (the record's key).
    pub host_key: String,
    /// The target's name.
    pub target: String,
    /// The target's identity when bound.
    pub target_identity: String,
    /// The imp's name at impd.
    pub imp_name: String,
    /// impd's id for the imp, once this attempt created or found it.
    pub imp_id: Option<String>,
    /// Starts at 1; each committed rebind adds one.
    pub revision: u32,
    /// [`binding_hash`] of `secrets`.
    pub hash: String,
    /// What is bound: names and rules, never values.
    pub secrets: Vec<BoundSecret>,
    /// Its state.
    pub state: AuthBindingState,
    /// The create attempt that made this record; its grants carry the same id.
    pub attempt_id: Uuid,
    /// Whether this attempt creates the imp (so taking the attempt back destroys it). Set
    /// before `imps.create` is sent, so an imp found under the name while no id is recorded
    /// yet is this attempt's.
    pub created_imp: bool,
    /// A rebind in flight, if any.
    pub pending_rebind: Option<PendingRebind>,
    /// Epoch ms.
    pub created_at: i64,
    /// Epoch ms of the last change.
    pub updated_at: i64,
}

/// What start-up reconciliation does with one binding (spec §6.3, "startup reconcile").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileAction {
    /// A rebind was in flight: remove the grants it added, leave `rebind_failed` at the old
    /// revision.
    FailRebind,
    /// A create (or its rollback) was cut off and no listed session uses the host: take back
    /// exactly that attempt's imp and grants.
    TakeBackAttempt,
    /// Leave it as it is.
    Keep,
}

/// What start-up reconciliation does with a binding in `state`, with `pending_rebind` in
/// flight, when some listed session does or does not use its host. A rebind in flight wins:
/// whatever the state it started from, it did not finish.
pub fn reconcile_action(
    state: AuthBindingState,
    pending_rebind: Option<&PendingRebind>,
    has_listed_session: bool,
) -> ReconcileAction {
    if pending_rebind.is_some() {
        return ReconcileAction::FailRebind;
    }
    match state {
        // A listed session may still own the attempt (its take-back is the session's).
        AuthBindingState::Provisioning | AuthBindingState::RollbackPending
            if !has_listed_session =>
        {
            ReconcileAction::TakeBackAttempt
        }
        AuthBindingState::Provisioning | AuthBindingState::RollbackPending => ReconcileAction::Keep,
        // A pending revocation stays blocked until a retried revoke confirms it.
        AuthBindingState::Ready
        | AuthBindingState::Revoked
        | AuthBindingState::RevocationPending
        | AuthBindingState::RebindFailed => ReconcileAction::Keep,
    }
}

/// A rebind asked for from a state that does not allow one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a binding in state '{}' cannot be rebound", .0.as_str())]
pub struct RebindNotAllowed(pub AuthBindingState);

impl Binding {
    /// The record a create writes before it touches impd: `provisioning`, revision 1, a new
    /// attempt id, no imp id yet.
    pub fn provisioning(
        host_key: &str,
        target: &str,
        target_identity: &str,
        imp_name: &str,
        secrets: Vec<BoundSecret>,
        now: i64,
    ) -> Binding {
        Binding {
            host_key: host_key.to_string(),
            target: target.to_string(),
            target_identity: target_identity.to_string(),
            imp_name: imp_name.to_string(),
            imp_id: None,
            revision: 1,
            hash: binding_hash(&secrets),
            secrets,
            state: AuthBindingState::Provisioning,
            attempt_id: Uuid::new_v4(),
            created_imp: false,
            pending_rebind: None,
            created_at: now,
            updated_at: now,
        }
    }

    /// What start-up reconciliation does with this binding.
    pub fn reconcile_action(&self, has_listed_session: bool) -> ReconcileAction {
        reconcile_action(self.state, self.pending_rebind.as_ref(), has_listed_session)
    }

    /// Records a rebind to `secrets` as in flight (state unchanged until it ends). Answers the
    /// pending rebind, whose attempt id the grants it adds must carry.
    pub fn begin_rebind(
        &mut self,
        secrets: Vec<BoundSecret>,
        now: i64,
    ) -> Result<&PendingRebind, RebindNotAllowed> {
        if !self.state.allows_rebind() || self.pending_rebind.is_some() {
            return Err(RebindNotAllowed(self.state));
        }
        self.updated_at = now;
        Ok(self.pending_rebind.insert(PendingRebind {
            revision: self.revision.saturating_add(1),
            hash: binding_hash(&secrets),
            secrets,
            attempt_id: Uuid::new_v4(),
        }))
    }

    /// The rebind in flight succeeded: its revision, hash and secrets become the binding's,
    /// and the binding is `ready`. Answers the new revision; `None` when none was in flight.
    pub fn commit_rebind(&mut self, now: i64) -> Option<u32> {
        let p = self.pending_rebind.take()?;
        self.revision = p.revision;
        self.hash = p.hash;
        self.secrets = p.secrets;
        self.state = AuthBindingState::Ready;
        self.updated_at = now;
        Some(self.revision)
    }

    /// The rebind in flight failed (and its added grants were removed): `rebind_failed` at
    /// the old revision. Answers the rebind that was given up, if there was one.
    pub fn fail_rebind(&mut self, now: i64) -> Option<PendingRebind> {
        let p = self.pending_rebind.take()?;
        self.state = AuthBindingState::RebindFailed;
        self.updated_at = now;
        Some(p)
    }
}

/// One grant of a secret to a host's imp (spec §6.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The host key of the binding it belongs to.
    pub host_key: String,
    /// The impd secret's name.
    pub secret: String,
    /// Its state.
    pub state: AuthGrantState,
    /// The grant existed before this binding asked for it; taking an attempt back leaves it.
    pub preexisted: bool,
    /// The attempt (create or rebind) that recorded it.
    pub attempt_id: Uuid,
}

/// What a rebind does to the imp's grants (spec §6.3), decided from the grant rows, the grants
/// impd lists for the imp now, and the secrets the rebind binds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RebindPlan {
    /// Secrets the imp does not hold: granted by this rebind (its rows carry its attempt id).
    /// A kept secret whose grant was revoked, or lost at impd, is among them.
    pub add: Vec<String>,
    /// Secrets the imp holds and a row records: nothing is sent, and a row that says
    /// otherwise (`revoked`, `uncertain`) is set `granted`.
    pub keep: Vec<String>,
    /// Secrets the imp holds that no row records: nothing is sent, and the row records them
    /// as preexisting, so a failed rebind never removes them.
    pub adopt: Vec<String>,
    /// Rows of secrets the rebind no longer binds, each with whether impd still lists the
    /// grant (only then is a delete sent).
    pub drop: Vec<(String, bool)>,
}

/// The grant changes of a rebind to `wanted` (in its order) from the host's `rows`, with the
/// imp holding `held` now. A grant the imp holds that neither a row nor `wanted` names is not
/// this binding's and is left alone (a later verify reports it as extra).
pub fn plan_rebind(
    rows: &[Grant],
    held: &std::collections::BTreeSet<String>,
    wanted: &[String],
) -> RebindPlan {
    let mut plan = RebindPlan::default();
    for secret in wanted {
        let recorded = rows.iter().any(|g| &g.secret == secret);
        match (held.contains(secret), recorded) {
            (false, _) => plan.add.push(secret.clone()),
            (true, true) => plan.keep.push(secret.clone()),
            (true, false) => plan.adopt.push(secret.clone()),
        }
    }
    plan.drop = rows
        .iter()
        .filter(|g| !wanted.contains(&g.secret))
        .map(|g| (g.secret.clone(), held.contains(&g.secret)))
        .collect();
    plan
}

/// A binding and its grants as a client sees them (`GET /v1/sessions/{id}/auth`).
pub fn listed(b: &Binding, grants: &[Grant]) -> atc_protocol::responses::AuthStatus {
    use atc_protocol::responses::{AuthGrant, AuthImp, AuthStatus};
    AuthStatus {
        state: b.state,
        revision: b.revision,
        hash: b.hash.clone(),
        imp: AuthImp {
            name: b.imp_name.clone(),
            id: b.imp_id.clone(),
        },
        // The actor that owns the counts fills them in (`host_binding`).
        admissions: Default::default(),
        grants: grants
            .iter()
            .map(|g| AuthGrant {
                secret: g.secret.clone(),
                state: g.state,
                preexisted: g.preexisted,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIGRATION: &str = include_str!("../../../../migrations/0005_broker_bindings.sql");

    fn secret(name: &str, host: &str) -> BoundSecret {
        BoundSecret {
            name: name.into(),
            kind: "custom".into(),
            rules: vec![BoundRule {
                host: host.into(),
                header: "authorization".into(),
                scheme: "bearer".into(),
                user: None,
            }],
        }
    }

    fn binding(state: AuthBindingState) -> Binding {
        let mut b = Binding::provisioning(
            "h1",
            "imp",
            "imp:0123",
            "atc-h1",
            vec![secret("gh", "api.github.com")],
            10,
        );
        b.state = state;
        b
    }

    #[test]
    fn binding_states_round_trip_through_their_words() {
        let words: Vec<&str> = AuthBindingState::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            words,
            [
                "provisioning",
                "ready",
                "revoked",
                "revocation_pending",
                "rollback_pending",
                "rebind_failed"
            ]
        );
        for s in AuthBindingState::ALL {
            assert_eq!(binding_state(s.as_str()), Ok(s));
        }
        assert_eq!(
            binding_state("Ready"),
            Err(UnknownState {
                what: "binding",
                word: "Ready".into()
            })
        );
    }

    #[test]
    fn grant_states_round_trip_through_their_words() {
        let words: Vec<&str> = AuthGrantState::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            words,
            [
                "granting",
                "granted",
                "uncertain",
                "revoking",
                "revoked",
                "revocation_pending"
            ]
        );
        for s in AuthGrantState::ALL {
            assert_eq!(grant_state(s.as_str()), Ok(s));
        }
        assert!(grant_state("").is_err());
        assert!(grant_state("provisioning").is_err());
    }

    #[test]
    fn the_migration_checks_exactly_these_words() {
        // The CHECK lists and the enums must not drift apart: a word the enum writes and the
        // schema refuses would fail at run time, one the schema allows and the enum cannot
        // parse would be a corrupt row.
        let check = |column: &str| -> Vec<String> {
            let start = MIGRATION
                .find(&format!("{column} IN ("))
                .unwrap_or_else(|| panic!("no CHECK for {column}"));
            let list = &MIGRATION[start + column.len() + 5..];
            let list = &list[..list.find(')').expect("CHECK list closes")];
            list.split(',')
                .map(|w| w.trim().trim_matches('\'').to_string())
                .collect()
        };
        let binding: Vec<String> = AuthBindingState::ALL
            .iter()
            .map(|s| s.as_str().to_string())
            .collect();
        let grant: Vec<String> = AuthGrantState::ALL
            .iter()
            .map(|s| s.as_str().to_string())
            .collect();
        assert_eq!(check("CONSTRAINT binding_state CHECK (state"), binding);
        assert_eq!(check("CONSTRAINT grant_state CHECK (state"), grant);
    }

    #[test]
    fn only_a_ready_binding_admits_a_launch() {
        for s in AuthBindingState::ALL {
            assert_eq!(s.admits_launch(), s == AuthBindingState::Ready, "{s:?}");
        }
    }

    #[test]
    fn rebind_is_allowed_from_ready_revoked_and_rebind_failed_only() {
        let allowed: Vec<AuthBindingState> = AuthBindingState::ALL
            .into_iter()
            .filter(|s| s.allows_rebind())
            .collect();
        assert_eq!(
            allowed,
            [
                AuthBindingState::Ready,
                AuthBindingState::Revoked,
                AuthBindingState::RebindFailed
            ]
        );
    }

    #[test]
    fn the_hash_ignores_secret_order_and_tracks_every_field() {
        let a = secret("a", "one.example");
        let b = secret("b", "two.example");
        let h = binding_hash(&[a.clone(), b.clone()]);
        assert_eq!(h, binding_hash(&[b.clone(), a.clone()]));
        assert_eq!(h.len(), 64);
        assert!(h.bytes().all(|c| c.is_ascii_hexdigit()));
        let mut changed = b.clone();
        changed.kind = "github".into();
        assert_ne!(h, binding_hash(&[a.clone(), changed]));
        let mut changed = b.clone();
        changed.rules[0].user = Some("x".into());
        assert_ne!(h, binding_hash(&[a.clone(), changed]));
        let mut changed = b.clone();
        changed.rules[0].scheme = "raw".into();
        assert_ne!(h, binding_hash(&[a.clone(), changed]));
        assert_ne!(h, binding_hash(&[a]));
    }

    #[test]
    fn the_hash_is_over_the_canonical_secrets_object() {
        // Pinned by hand: sha256 of the canonical text, so the form (keys sorted, no `user`
        // when absent, secrets sorted by name) cannot change without this test noticing.
        let s = [secret("gh", "api.github.com")];
        let text = r#"{"secrets":[{"kind":"custom","name":"gh","rules":[{"header":"authorization","host":"api.github.com","scheme":"bearer"}]}]}"#;
        use sha2::{Digest, Sha256};
        let want: String = Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(binding_hash(&s), want);
        assert_eq!(binding_hash(&[]), {
            let d = Sha256::digest(br#"{"secrets":[]}"#);
            d.iter().map(|b| format!("{b:02x}")).collect::<String>()
        });
    }

    #[test]
    fn a_listed_secret_binds_its_names_and_rules_and_compares_back() {
        let listed: Secret = serde_json::from_value(json!({
            "name": "gh", "kind": "github",
            "rules": [
                {"host": "api.github.com", "header": "authorization", "scheme": "bearer"},
                {"host": "git.example", "header": "authorization", "scheme": "basic", "user": "x"},
                {"host": "new.example", "header": "x-key", "scheme": "sigv9"}
            ],
            "imps": ["atc-h1"]
        }))
        .expect("a secrets.list entry");
        let bound = BoundSecret::from_impd(&listed);
        assert_eq!(bound.name, "gh");
        assert_eq!(bound.kind, "github");
        assert_eq!(bound.rules[1].scheme, "basic");
        assert_eq!(bound.rules[1].user.as_deref(), Some("x"));
        assert_eq!(bound.rules[2].scheme, "unknown");
        assert_eq!(bound.impd_rules(), listed.rules);
    }

    #[test]
    fn reconciliation_fails_a_rebind_in_flight_whatever_the_state() {
        let pending = PendingRebind {
            revision: 2,
            hash: "h".into(),
            secrets: vec![],
            attempt_id: Uuid::new_v4(),
        };
        for s in AuthBindingState::ALL {
            for listed in [false, true] {
                assert_eq!(
                    reconcile_action(s, Some(&pending), listed),
                    ReconcileAction::FailRebind
                );
            }
        }
    }

    #[test]
    fn reconciliation_takes_back_an_unfinished_create_only_without_a_listed_session() {
        use AuthBindingState::*;
        use ReconcileAction::*;
        let cases = [
            (Provisioning, false, TakeBackAttempt),
            (Provisioning, true, Keep),
            (RollbackPending, false, TakeBackAttempt),
            (RollbackPending, true, Keep),
            (Ready, false, Keep),
            (Ready, true, Keep),
            (Revoked, false, Keep),
            (RevocationPending, false, Keep),
            (RevocationPending, true, Keep),
            (RebindFailed, false, Keep),
        ];
        for (state, listed, want) in cases {
            assert_eq!(
                reconcile_action(state, None, listed),
                want,
                "{state:?} listed={listed}"
            );
        }
        assert_eq!(
            binding(Provisioning).reconcile_action(false),
            TakeBackAttempt
        );
    }

    #[test]
    fn a_new_binding_is_provisioning_at_revision_one_with_its_hash() {
        let b = binding(AuthBindingState::Provisioning);
        assert_eq!(b.revision, 1);
        assert_eq!(b.hash, binding_hash(&b.secrets));
        assert_eq!(b.imp_id, None);
        assert!(!b.created_imp);
        assert_eq!(b.pending_rebind, None);
        assert_ne!(
            b.attempt_id,
            binding(AuthBindingState::Provisioning).attempt_id,
            "each attempt has its own id"
        );
    }

    #[test]
    fn a_committed_rebind_moves_to_the_next_revision_and_ready() {
        let mut b = binding(AuthBindingState::Revoked);
        let next = vec![secret("gh", "api.github.com"), secret("npm", "npmjs.org")];
        let p = b
            .begin_rebind(next.clone(), 20)
            .expect("revoked allows rebind")
            .clone();
        assert_eq!(p.revision, 2);
        assert_ne!(p.attempt_id, b.attempt_id);
        assert_eq!(
            b.state,
            AuthBindingState::Revoked,
            "state holds until it ends"
        );
        assert_eq!(
            b.begin_rebind(next.clone(), 21),
            Err(RebindNotAllowed(AuthBindingState::Revoked)),
            "one rebind at a time"
        );
        assert_eq!(b.commit_rebind(30), Some(2));
        assert_eq!(b.revision, 2);
        assert_eq!(b.secrets, next);
        assert_eq!(b.hash, binding_hash(&next));
        assert_eq!(b.state, AuthBindingState::Ready);
        assert_eq!(b.pending_rebind, None);
        assert_eq!(b.updated_at, 30);
        assert_eq!(b.commit_rebind(31), None);
    }

    #[test]
    fn a_failed_rebind_keeps_the_old_revision() {
        let mut b = binding(AuthBindingState::Ready);
        let old = b.clone();
        b.begin_rebind(vec![secret("npm", "npmjs.org")], 20)
            .expect("ready allows rebind");
        let given_up = b.fail_rebind(25).expect("one was in flight");
        assert_eq!(given_up.revision, 2);
        assert_eq!(b.state, AuthBindingState::RebindFailed);
        assert_eq!(
            (b.revision, &b.hash, &b.secrets),
            (old.revision, &old.hash, &old.secrets)
        );
        assert_eq!(b.pending_rebind, None);
        // And rebind_failed may be rebound again.
        assert!(b.begin_rebind(vec![], 26).is_ok());
    }

    #[test]
    fn a_rebind_is_refused_while_blocked() {
        for s in [
            AuthBindingState::Provisioning,
            AuthBindingState::RevocationPending,
            AuthBindingState::RollbackPending,
        ] {
            let mut b = binding(s);
            assert_eq!(b.begin_rebind(vec![], 20), Err(RebindNotAllowed(s)));
            assert_eq!(b.pending_rebind, None);
            assert_eq!(b.updated_at, 10);
        }
    }

    fn row(secret: &str, state: AuthGrantState) -> Grant {
        Grant {
            host_key: "h1".into(),
            secret: secret.into(),
            state,
            preexisted: false,
            attempt_id: Uuid::nil(),
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_rebind_adds_what_the_imp_lacks_and_drops_what_is_no_longer_bound() {
        let rows = [
            row("alpha", AuthGrantState::Granted),
            row("beta", AuthGrantState::Granted),
        ];
        let held = ["alpha", "beta"].map(String::from).into_iter().collect();
        let plan = plan_rebind(&rows, &held, &names(&["gamma", "alpha", "delta"]));
        assert_eq!(
            plan,
            RebindPlan {
                add: names(&["gamma", "delta"]),
                keep: names(&["alpha"]),
                adopt: vec![],
                drop: vec![("beta".into(), true)],
            }
        );
        // Nothing changes: nothing is sent.
        let plan = plan_rebind(&rows, &held, &names(&["alpha", "beta"]));
        assert!(plan.add.is_empty() && plan.drop.is_empty() && plan.adopt.is_empty());
        assert_eq!(plan.keep, names(&["alpha", "beta"]));
    }

    #[test]
    fn a_rebind_grants_again_a_kept_secret_the_imp_no_longer_holds() {
        // From `revoked`: the rows stay, the imp holds nothing.
        let rows = [
            row("alpha", AuthGrantState::Revoked),
            row("beta", AuthGrantState::Revoked),
        ];
        let none = std::collections::BTreeSet::new();
        let plan = plan_rebind(&rows, &none, &names(&["alpha"]));
        assert_eq!(plan.add, names(&["alpha"]));
        assert_eq!(
            plan.drop,
            [("beta".to_string(), false)],
            "no delete is sent"
        );
        // A grant lost at impd behind a `granted` row is granted again too.
        let plan = plan_rebind(
            &[row("alpha", AuthGrantState::Granted)],
            &none,
            &names(&["alpha"]),
        );
        assert_eq!(plan.add, names(&["alpha"]));
    }

    #[test]
    fn a_rebind_adopts_a_held_grant_no_row_records_and_leaves_strangers_alone() {
        let held = ["alpha", "stranger"]
            .map(String::from)
            .into_iter()
            .collect();
        let plan = plan_rebind(&[], &held, &names(&["alpha"]));
        assert_eq!(
            plan,
            RebindPlan {
                adopt: names(&["alpha"]),
                ..RebindPlan::default()
            }
        );
    }

    #[test]
    fn the_listed_states_use_the_store_words() {
        for state in AuthBindingState::ALL {
            let b = Binding {
                state,
                ..Binding::provisioning("h", "t", "i", "imp", vec![], 0)
            };
            let wire = serde_json::to_value(listed(&b, &[]).state).unwrap();
            assert_eq!(wire, state.as_str());
        }
        for state in AuthGrantState::ALL {
            let g = Grant {
                host_key: "h".into(),
                secret: "s".into(),
                state,
                preexisted: false,
                attempt_id: Uuid::nil(),
            };
            let b = Binding::provisioning("h", "t", "i", "imp", vec![], 0);
            let wire = serde_json::to_value(listed(&b, &[g]).grants[0].state).unwrap();
            assert_eq!(wire, state.as_str());
        }
    }
}
