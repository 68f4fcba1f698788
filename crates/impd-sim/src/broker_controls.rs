//! The test's controls over identity and the broker: who a token is (`tokens.whoami`), which
//! features impd announces, the secrets it holds (with their values, which only the test may
//! read), grants set directly, the CA-bundle step failing, faults on grant steps, and the
//! records a test reads back (openings received, grants held).

use std::collections::BTreeMap;

use super::auth::Identity;
use super::broker::{ExecOpenRecord, GrantFault, GrantStep, OpenKind, Secret, SecretKind};
use super::options::{Flag, FlagState};
use super::{Faults, ImpdSim};

/// The detail [`Faults::set_broker_ready`] gives a failed CA-bundle step.
const CA_STEP_FAILED: &str = "the CA bundle step failed this boot";

impl Faults {
    /// Mints a named token with a whole identity (kind, scope, patterns, grantable list).
    pub fn add_token_as(&self, identity: Identity) -> String {
        self.shared.lock().auth.add_token_as(identity)
    }

    /// Changes who a token is, the root token included; later calls (and sockets opened
    /// later) see it. False when the token is unknown.
    pub fn set_identity(&self, token: &str, identity: Identity) -> bool {
        self.shared.lock().auth.set_identity(token, identity)
    }

    /// Announces one feature flag as `true` or `false`, or leaves it out. On an impd playing
    /// "before feature flags" this first gives it every flag.
    pub fn set_feature(&self, flag: Flag, state: FlagState) {
        let mut st = self.shared.lock();
        st.opts
            .features
            .get_or_insert_with(super::Features::all)
            .set(flag, state);
    }

    /// Plays an impd from before 0.30: version 0.29.4, no `execRequire` in `features`, and
    /// `require` silently ignored on every start.
    pub fn play_pre_030(&self) {
        self.set_feature(Flag::ExecRequire, FlagState::Absent);
        self.shared.lock().opts.version = "0.29.4".into();
    }

    /// Defines (or replaces) a secret on the host, value included.
    pub fn define_secret(&self, secret: Secret) {
        let now = self.shared.clock.now();
        self.shared.lock().broker.define(secret, now);
    }

    /// Sets the sign-in status `secrets.list` reports for the oauth secret `name`.
    pub fn set_oauth_status(&self, name: &str, status: crate::broker::OauthStatus) {
        self.shared.lock().broker.set_oauth_status(name, status);
    }

    /// Defines a secret with a bearer rule per host and a fresh value, and returns the value.
    pub fn add_secret(&self, name: &str, kind: SecretKind, hosts: &[&str]) -> String {
        let secret = Secret::new(name, kind, hosts);
        let value = secret.value.clone();
        self.define_secret(secret);
        value
    }

    /// Removes a secret from the host and every grant of it. False if it did not exist.
    pub fn remove_secret(&self, name: &str) -> bool {
        let mut st = self.shared.lock();
        for imp in st.imps.values_mut() {
            imp.grants.remove(name);
        }
        st.broker.remove(name)
    }

    /// Grants a secret to an imp directly, as an operator would (no scope or host check).
    pub fn grant(&self, imp: &str, secret: &str) -> bool {
        match self.shared.lock().imps.get_mut(imp) {
            Some(i) => {
                i.grants.insert(secret.to_string());
                true
            }
            None => false,
        }
    }

    /// Grants `secret` to every imp created from now on, at its creation, as an operator
    /// would (no scope or host check).
    pub fn grant_on_create(&self, secret: &str) {
        self.shared.lock().broker.grant_on_create(secret);
    }

    /// Takes a grant away directly. True if the imp held it.
    pub fn ungrant(&self, imp: &str, secret: &str) -> bool {
        self.shared
            .lock()
            .imps
            .get_mut(imp)
            .is_some_and(|i| i.grants.remove(secret))
    }

    /// Makes the imp's CA-bundle step fail with `detail` (`None`: it succeeds again), so a
    /// `require:["broker"]` start is refused with that detail even while grants exist. Works
    /// before the imp exists: it is keyed by name, and `"*"` stands for every imp (for an imp
    /// whose name a test cannot know in advance).
    pub fn fail_broker_ca(&self, imp: &str, detail: Option<&str>) {
        self.shared.lock().broker.set_ca_failure(imp, detail);
    }

    /// Whether the imp's broker CA step succeeds (`false`: it fails with a fixed detail).
    /// False when there is no such imp.
    pub fn set_broker_ready(&self, imp: &str, ready: bool) -> bool {
        let mut st = self.shared.lock();
        st.broker
            .set_ca_failure(imp, (!ready).then_some(CA_STEP_FAILED));
        st.imps.contains_key(imp)
    }

    /// The next `step` on `secret` (`None`: on any secret) meets `fault`. Faults queue and are
    /// taken in order, each by the first step it matches.
    pub fn fail_next_grant(&self, step: GrantStep, secret: Option<&str>, fault: GrantFault) {
        self.shared
            .lock()
            .broker
            .queue_grant_fault(step, secret, fault);
    }
}

impl ImpdSim {
    /// The value of a secret: what must never turn up anywhere outside impd.
    pub fn secret_value(&self, name: &str) -> Option<String> {
        self.shared
            .lock()
            .broker
            .secret(name)
            .map(|s| s.value.clone())
    }

    /// Every secret's value.
    pub fn secret_values(&self) -> Vec<String> {
        self.shared.lock().broker.values()
    }

    /// Every `/exec` opening received (after the schema check, before any other), oldest
    /// first.
    pub fn exec_opens(&self) -> Vec<ExecOpenRecord> {
        self.shared.lock().broker.opens().to_vec()
    }

    /// Every `/exec` start received, oldest first.
    pub fn exec_starts(&self) -> Vec<ExecOpenRecord> {
        self.exec_opens()
            .into_iter()
            .filter(|o| o.kind == OpenKind::Start)
            .collect()
    }

    /// The grants each imp holds, by imp name.
    pub fn grants(&self) -> BTreeMap<String, Vec<String>> {
        self.shared
            .lock()
            .imps
            .values()
            .map(|i| (i.name.clone(), i.grants.iter().cloned().collect()))
            .collect()
    }

    /// Whether the imp's broker is ready (`Err` carries the detail impd would refuse with);
    /// `None` when there is no such imp.
    pub fn broker_readiness(&self, imp: &str) -> Option<Result<(), String>> {
        let st = self.shared.lock();
        st.imps.get(imp).map(|i| st.broker.readiness(i))
    }
}
