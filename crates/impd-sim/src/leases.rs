//! Leases (protocol §6): keyed by (imp, principal, label), ended by time only, never
//! shortened. Only `leases.*` leases block `imps.sleep`/`imps.stop`; `hold` leases written by
//! `imps.hold` never do. What a caller sees is filtered: its own leases, or all of them for a
//! host-wide `manage` caller, with `otherCount` counting the rest.

use serde_json::{json, Value};

use super::auth::{Principal, Scope};
use super::clock::Millis;
use super::envelope::{date, opt_date, ImpdError};
use super::state::{Imp, SimState};

/// One lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub principal: String,
    pub display: String,
    pub label: String,
    /// `None` = no end (no call writes one, but a test may).
    pub until: Option<Millis>,
    /// Written by `imps.hold`: never blocks a sleep.
    pub hold: bool,
}

impl Lease {
    pub fn live(&self, now: Millis) -> bool {
        self.until.is_none_or(|u| u > now)
    }

    pub fn wire(&self, imp: &str) -> Value {
        json!({
            "name": imp,
            "owner": {"principal": self.principal, "display": self.display, "label": self.label},
            "until": opt_date(self.until),
        })
    }
}

/// `^[\w.:-]{1,64}$` (JavaScript `\w`: ASCII letters, digits, underscore).
pub fn valid_label(label: &str) -> bool {
    (1..=64).contains(&label.len())
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

/// `{leases, otherCount}` over the leases `pick` selects, filtered for `p`.
pub fn filtered(imp: &Imp, p: &Principal, now: Millis, pick: impl Fn(&Lease) -> bool) -> Value {
    let mut shown = Vec::new();
    let mut hidden = 0;
    for l in imp.leases.iter().filter(|l| l.live(now) && pick(l)) {
        if p.host_manager() || l.principal == p.key {
            shown.push(l.wire(&imp.name));
        } else {
            hidden += 1;
        }
    }
    json!({"leases": shown, "otherCount": hidden})
}

fn check_input(label: &str, ttl: Option<i64>) -> Result<(), ImpdError> {
    if !valid_label(label) {
        return Err(ImpdError::bad_request(
            "label",
            "label must match ^[\\w.:-]{1,64}$",
        ));
    }
    if label == "hold" {
        return Err(ImpdError::bad_request(
            "label",
            "the label hold is reserved",
        ));
    }
    if let Some(t) = ttl {
        if !(10..=3600).contains(&t) {
            return Err(ImpdError::bad_request(
                "ttlSeconds",
                "ttlSeconds must be 10–3600",
            ));
        }
    }
    Ok(())
}

impl SimState {
    /// Writes or extends `p`'s lease; the end is `max(old end, now + ttl)`.
    fn extend(
        &mut self,
        imp: &str,
        p: &Principal,
        label: &str,
        ttl: i64,
        hold: bool,
        now: Millis,
    ) -> Option<Lease> {
        let imp = self.imps.get_mut(imp)?;
        let until = now + ttl * 1000;
        imp.leases.retain(|l| l.live(now));
        match imp
            .leases
            .iter_mut()
            .find(|l| l.principal == p.key && l.label == label)
        {
            Some(l) => {
                l.until = l.until.map(|old| old.max(until));
                Some(l.clone())
            }
            None => {
                let l = Lease {
                    principal: p.key.clone(),
                    display: p.display.clone(),
                    label: label.to_string(),
                    until: Some(until),
                    hold,
                };
                imp.leases.push(l.clone());
                Some(l)
            }
        }
    }

    /// `leases.acquire`: wakes or boots the imp first; a refused boot writes no lease.
    pub fn lease_acquire(
        &mut self,
        p: &Principal,
        name: &str,
        label: &str,
        ttl: i64,
        now: Millis,
    ) -> Result<Value, ImpdError> {
        check_input(label, Some(ttl))?;
        p.require(Scope::Exec, Some(name))?;
        self.ensure_running(name, p, now)?;
        let lease = self
            .extend(name, p, label, ttl, false, now)
            .ok_or_else(|| ImpdError::not_found("imp", name))?;
        Ok(lease.wire(name))
    }

    /// `leases.renew`: extends a live lease; wakes nothing.
    pub fn lease_renew(
        &mut self,
        p: &Principal,
        name: &str,
        label: &str,
        ttl: i64,
        now: Millis,
    ) -> Result<Value, ImpdError> {
        check_input(label, Some(ttl))?;
        p.require(Scope::Exec, Some(name))?;
        let imp = self
            .imps
            .get(name)
            .ok_or_else(|| ImpdError::not_found("imp", name))?;
        let held = imp
            .leases
            .iter()
            .any(|l| !l.hold && l.principal == p.key && l.label == label && l.live(now));
        if !held {
            return Err(ImpdError::new(
                "LEASE_NOT_HELD",
                format!("no live lease {label} on {name}"),
            ));
        }
        let lease = self
            .extend(name, p, label, ttl, false, now)
            .ok_or_else(|| ImpdError::not_found("imp", name))?;
        Ok(lease.wire(name))
    }

    /// `leases.release`: deletes only the caller's own lease.
    pub fn lease_release(
        &mut self,
        p: &Principal,
        name: &str,
        label: &str,
        now: Millis,
    ) -> Result<Value, ImpdError> {
        p.require(Scope::Exec, Some(name))?;
        let imp = self
            .imps
            .get_mut(name)
            .ok_or_else(|| ImpdError::not_found("imp", name))?;
        let before = imp.leases.len();
        imp.leases
            .retain(|l| !(l.principal == p.key && l.label == label && !l.hold));
        let released = imp.leases.len() < before;
        imp.leases.retain(|l| l.live(now));
        Ok(json!({"released": released}))
    }

    /// `leases.list {name?, label?}`: live leases the caller may see.
    pub fn lease_list(
        &self,
        p: &Principal,
        name: Option<&str>,
        label: Option<&str>,
        now: Millis,
    ) -> Result<Value, ImpdError> {
        let mut out = Vec::new();
        for imp in self.imps.values() {
            if name.is_some_and(|n| n != imp.name) || !p.covers(&imp.name) {
                continue;
            }
            for l in imp.leases.iter().filter(|l| l.live(now)) {
                let visible = p.host_manager() || l.principal == p.key;
                if visible && label.is_none_or(|want| want == l.label) {
                    out.push(l.wire(&imp.name));
                }
            }
        }
        Ok(Value::Array(out))
    }

    /// `imps.hold {name, seconds}`: the caller's `hold` lease (0 releases it), then a wake.
    pub fn hold(
        &mut self,
        p: &Principal,
        name: &str,
        seconds: i64,
        now: Millis,
    ) -> Result<(), ImpdError> {
        p.require(Scope::Exec, Some(name))?;
        if !self.imps.contains_key(name) {
            return Err(ImpdError::not_found("imp", name));
        }
        if seconds <= 0 {
            if let Some(imp) = self.imps.get_mut(name) {
                imp.leases.retain(|l| !(l.hold && l.principal == p.key));
            }
            return Ok(());
        }
        self.extend(name, p, "hold", seconds, true, now);
        self.ensure_running(name, p, now)
    }

    /// `LEASED` unless no `leases.*` lease lives; with `force`, those leases end instead.
    pub fn check_leased(
        &mut self,
        p: &Principal,
        name: &str,
        force: bool,
        now: Millis,
    ) -> Result<(), ImpdError> {
        let Some(imp) = self.imps.get_mut(name) else {
            return Err(ImpdError::not_found("imp", name));
        };
        let blocking = imp.leases.iter().any(|l| !l.hold && l.live(now));
        if !blocking {
            return Ok(());
        }
        if force {
            imp.leases.retain(|l| l.hold);
            return Ok(());
        }
        let data = filtered(imp, p, now, |l| !l.hold);
        Err(ImpdError::new("LEASED", format!("{name} is leased")).with_data(data))
    }

    /// A test control: a lease held by someone else.
    pub fn add_foreign_lease(
        &mut self,
        name: &str,
        principal: &str,
        label: &str,
        until: Option<Millis>,
    ) -> bool {
        let Some(imp) = self.imps.get_mut(name) else {
            return false;
        };
        imp.leases
            .retain(|l| !(l.principal == principal && l.label == label));
        imp.leases.push(Lease {
            principal: principal.to_string(),
            display: principal.to_string(),
            label: label.to_string(),
            until,
            hold: false,
        });
        true
    }
}

/// `holdUntil`: the latest end of live leases and holds.
pub fn hold_until(imp: &Imp, now: Millis) -> Option<Value> {
    imp.leases
        .iter()
        .filter(|l| l.live(now))
        .filter_map(|l| l.until)
        .max()
        .map(date)
}
