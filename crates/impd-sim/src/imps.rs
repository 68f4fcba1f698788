//! Imps: names, the lifecycle table, boots and the RAM governor (protocol §5, §13).
//!
//! A boot is the guest's memory: its sessions, their rings and `previous`. A sleep freezes
//! the boot's processes (SIGSTOP to each group) and a wake thaws them, so generations go on
//! unchanged; a cold boot kills them and starts a new boot with a new id, recording the cause
//! among the last 4 cold boots. Sockets on the imp learn what happened through their `Ctl`.

use rustix::process::Signal;
use serde_json::{json, Value};

use super::auth::{uuid, Principal, Scope};
use super::clock::Millis;
use super::envelope::{date, ImpdError};
use super::leases::{filtered, hold_until};
use super::options::Flag;
use super::process::signal_group;
use super::state::{Boot, ColdBoot, Ctl, Imp, ImpState, Role, SimState};

/// `^[a-z][a-z0-9-]{0,30}$`.
pub fn valid_imp_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 31
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// Where a forced cold boot leaves the imp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootEnd {
    /// Booted again at once: running under a new boot id.
    Running,
    /// Left stopped; the next boot is cold with the given cause.
    Stopped,
}

/// What `imps.create` asks for.
#[derive(Clone, Debug, Default)]
pub struct CreateImp {
    pub name: Option<String>,
    pub image: Option<String>,
    pub memory_mib: Option<u64>,
    pub vcpus: Option<u64>,
    pub disk_mib: Option<u64>,
}

/// `INVALID_STATE` for a move to `target` from `state`.
fn invalid_state(imp: &Imp, target: ImpState) -> ImpdError {
    let allowed: Vec<&str> = match target {
        ImpState::Running => vec!["creating", "stopped", "sleeping", "error"],
        ImpState::Sleeping => vec!["running"],
        ImpState::Stopped => vec!["running", "sleeping", "error"],
        ImpState::Error => vec!["creating", "running", "stopped", "sleeping"],
        ImpState::Creating => vec![],
    };
    ImpdError::new(
        "INVALID_STATE",
        format!("{} is {}", imp.name, imp.state.wire()),
    )
    .with_data(json!({"state": imp.state.wire(), "allowed": allowed}))
}

impl SimState {
    pub fn imp(&self, name: &str) -> Result<&Imp, ImpdError> {
        self.imps
            .get(name)
            .ok_or_else(|| ImpdError::not_found("imp", name))
    }

    fn imp_mut(&mut self, name: &str) -> Result<&mut Imp, ImpdError> {
        self.imps
            .get_mut(name)
            .ok_or_else(|| ImpdError::not_found("imp", name))
    }

    /// The imp object as `p` may see it.
    pub fn imp_wire(&self, imp: &Imp, p: &Principal, now: Millis) -> Value {
        let mut v = json!({
            "id": imp.id,
            "name": imp.name,
            "state": imp.state.wire(),
            "image": imp.image,
            "vcpus": imp.vcpus,
            "memoryMib": imp.memory_mib,
            "diskMib": imp.disk_mib,
            "createdAt": date(imp.created_at),
            "lastActiveAt": date(imp.last_active_at),
            "sessions": imp.boot.as_ref().map(|b| b.sessions.len()).unwrap_or(0),
        });
        if let Some(t) = imp.slept_at {
            v["sleptAt"] = date(t);
        }
        if self.opts.has(Flag::Leases) {
            v["leases"] = filtered(imp, p, now, |_| true);
        }
        if let Some(h) = hold_until(imp, now) {
            v["holdUntil"] = h;
        }
        if let Some(r) = &imp.cold_boot_reason {
            v["coldBootReason"] = json!(r);
        }
        if let Some(e) = &imp.error {
            v["error"] = json!(e);
        }
        v
    }

    /// MiB held by imps that have guest memory awake.
    pub fn ram_used(&self) -> u64 {
        self.imps
            .values()
            .filter(|i| matches!(i.state, ImpState::Running | ImpState::Creating))
            .map(|i| i.memory_mib)
            .sum()
    }

    /// The governor: `RAM_BUDGET_EXCEEDED` when `requested` more MiB do not fit (or a refusal
    /// was injected).
    pub fn ram_check(
        &mut self,
        requested: u64,
        p: &Principal,
        now: Millis,
    ) -> Result<(), ImpdError> {
        let used = self.ram_used();
        let forced = self.faults.take_ram_refusal();
        let budget = self.opts.ram_budget_mib.unwrap_or(u64::MAX);
        if !forced && used.saturating_add(requested) <= budget {
            return Ok(());
        }
        let budget = self.opts.ram_budget_mib.unwrap_or(used);
        let mut protected = Vec::new();
        let mut hidden = 0;
        for imp in self.imps.values().filter(|i| i.state == ImpState::Running) {
            let leased = imp.leases.iter().any(|l| l.live(now));
            let busy = imp
                .boot
                .as_ref()
                .is_some_and(|b| !b.sessions.is_empty() || !b.plain.is_empty());
            if !(leased || busy) {
                continue;
            }
            if p.covers(&imp.name) {
                protected.push(json!({"name": imp.name, "ramMib": imp.memory_mib, "leased": leased, "busy": busy}));
            } else {
                hidden += 1;
            }
        }
        Err(
            ImpdError::new("RAM_BUDGET_EXCEEDED", "not enough RAM to boot or wake").with_data(
                json!({
                    "budgetMib": budget,
                    "usedMib": used,
                    "requestedMib": requested,
                    "neededMib": (used + requested).saturating_sub(budget).max(1),
                    "protected": protected,
                    "protectedHidden": hidden,
                }),
            ),
        )
    }

    /// `imps.create`: boots with cause `start` and answers once running. A refused boot leaves
    /// no imp behind.
    pub fn create(
        &mut self,
        p: &Principal,
        req: CreateImp,
        now: Millis,
    ) -> Result<Value, ImpdError> {
        let name = match req.name {
            Some(n) => n,
            None if p.imps.is_some() => {
                return Err(ImpdError::bad_request(
                    "name",
                    "a patterned token must pass name",
                ))
            }
            None => format!("imp-{}", &uuid()[..8]),
        };
        if !valid_imp_name(&name) {
            return Err(ImpdError::bad_request(
                "name",
                "name must match ^[a-z][a-z0-9-]{0,30}$",
            ));
        }
        p.require(Scope::Manage, Some(&name))?;
        if self.imps.contains_key(&name) {
            return Err(ImpdError::new("CONFLICT", format!("imp {name} exists"))
                .with_data(json!({"kind": "imp", "name": name})));
        }
        let memory = req.memory_mib.unwrap_or(self.opts.default_memory_mib);
        self.ram_check(memory, p, now)?;
        self.imps.insert(
            name.clone(),
            Imp {
                id: uuid(),
                name: name.clone(),
                image: req.image.unwrap_or_else(|| "default".into()),
                memory_mib: memory,
                vcpus: req.vcpus.unwrap_or(2),
                disk_mib: req.disk_mib.unwrap_or(8192),
                state: ImpState::Creating,
                error: None,
                created_at: now,
                last_active_at: now,
                slept_at: None,
                boot: None,
                cold_boots: Default::default(),
                cold_boot_reason: None,
                leases: Vec::new(),
                grants: self.broker.grants_on_create(),
                listeners: Default::default(),
            },
        );
        self.boot(&name, now);
        let imp = self.imp(&name)?;
        Ok(self.imp_wire(imp, p, now))
    }

    /// Starts a new boot (cold): new boot id, the cause recorded, state running.
    fn boot(&mut self, name: &str, now: Millis) {
        let Some(imp) = self.imps.get_mut(name) else {
            return;
        };
        let cause = imp
            .cold_boot_reason
            .take()
            .unwrap_or_else(|| "start".to_string());
        let boot = Boot::new();
        imp.cold_boots.push_front(ColdBoot {
            boot_id: boot.id.clone(),
            cause,
            at: now,
        });
        imp.cold_boots.truncate(4);
        imp.boot = Some(boot);
        imp.state = ImpState::Running;
        imp.error = None;
        imp.slept_at = None;
        imp.last_active_at = now;
    }

    /// Makes the imp run for something that needs the VM: a memory wake for a sleeping imp,
    /// a cold boot for a stopped one, both under the RAM governor.
    pub fn ensure_running(
        &mut self,
        name: &str,
        p: &Principal,
        now: Millis,
    ) -> Result<(), ImpdError> {
        let imp = self.imp(name)?;
        let (state, memory) = (imp.state, imp.memory_mib);
        match state {
            ImpState::Running => Ok(()),
            ImpState::Sleeping => {
                self.ram_check(memory, p, now)?;
                self.thaw(name, now);
                Ok(())
            }
            ImpState::Stopped => {
                self.ram_check(memory, p, now)?;
                self.boot(name, now);
                Ok(())
            }
            ImpState::Creating | ImpState::Error => Err(invalid_state(imp, ImpState::Running)),
        }
    }

    /// `imps.wake` / `imps.start`.
    pub fn wake(
        &mut self,
        p: &Principal,
        name: &str,
        restart_error: bool,
        now: Millis,
    ) -> Result<Value, ImpdError> {
        p.require(Scope::Exec, Some(name))?;
        let imp = self.imp(name)?;
        if imp.state == ImpState::Error && restart_error {
            let memory = imp.memory_mib;
            self.ram_check(memory, p, now)?;
            self.end_boot(name);
            self.boot(name, now);
        } else {
            self.ensure_running(name, p, now)?;
        }
        Ok(self.imp_wire(self.imp(name)?, p, now))
    }

    /// `imps.sleep`: a sleeping imp is returned as is; `LEASED` unless `force`.
    pub fn sleep_rpc(
        &mut self,
        p: &Principal,
        name: &str,
        force: bool,
        now: Millis,
    ) -> Result<Value, ImpdError> {
        p.require(Scope::Exec, Some(name))?;
        let imp = self.imp(name)?;
        match imp.state {
            ImpState::Sleeping => {}
            ImpState::Running => {
                self.check_leased(p, name, force, now)?;
                self.put_to_sleep(name, now, true);
            }
            _ => return Err(invalid_state(imp, ImpState::Sleeping)),
        }
        Ok(self.imp_wire(self.imp(name)?, p, now))
    }

    /// `imps.stop`: memory lost; a stopped imp is returned as is.
    pub fn stop_rpc(
        &mut self,
        p: &Principal,
        name: &str,
        force: bool,
        now: Millis,
    ) -> Result<Value, ImpdError> {
        p.require(Scope::Exec, Some(name))?;
        let imp = self.imp(name)?;
        match imp.state {
            ImpState::Stopped => {}
            ImpState::Creating => return Err(invalid_state(imp, ImpState::Stopped)),
            _ => {
                self.check_leased(p, name, force, now)?;
                self.end_boot(name);
                let imp = self.imp_mut(name)?;
                imp.state = ImpState::Stopped;
                imp.slept_at = None;
            }
        }
        Ok(self.imp_wire(self.imp(name)?, p, now))
    }

    /// `imps.destroy`: works from every state; ends leases and grants with the imp.
    pub fn destroy(&mut self, p: &Principal, name: &str) -> Result<Value, ImpdError> {
        p.require(Scope::Manage, Some(name))?;
        self.imp(name)?;
        // Open sockets end as on a cold boot: viewers `detached lost`, plain execs `error`,
        // forwards 4000 (inferred; protocol §17.7 leaves it open).
        self.end_boot(name);
        self.imps.remove(name);
        Ok(json!({}))
    }

    /// Freezes the guest: sessions keep their generation and ring, viewers get `detached
    /// lost`, plain execs end with `error` (their agent connection is gone), forwards get 4000.
    /// `tell_sockets` is false for an impd restart, whose sockets already got 1012.
    pub fn put_to_sleep(&mut self, name: &str, now: Millis, tell_sockets: bool) {
        if tell_sockets {
            for c in self.conns_on(name, |r| matches!(r, Role::Session { .. })) {
                self.tell(c, Ctl::Detach("lost"));
            }
        }
        self.end_plain_and_forwards(name, tell_sockets);
        let Some(imp) = self.imps.get_mut(name) else {
            return;
        };
        if let Some(boot) = &imp.boot {
            for g in boot.sessions.values() {
                if !g.exited() {
                    signal_group(g.pid, Signal::STOP);
                }
            }
        }
        imp.state = ImpState::Sleeping;
        imp.slept_at = Some(now);
    }

    /// Thaws a sleeping imp's processes: same boot, same generations.
    fn thaw(&mut self, name: &str, now: Millis) {
        let Some(imp) = self.imps.get_mut(name) else {
            return;
        };
        if let Some(boot) = &imp.boot {
            for g in boot.sessions.values() {
                signal_group(g.pid, Signal::CONT);
            }
        }
        imp.state = ImpState::Running;
        imp.slept_at = None;
        imp.last_active_at = now;
    }

    /// Kills plain execs and ends reverse forwards on the imp.
    fn end_plain_and_forwards(&mut self, name: &str, tell_sockets: bool) {
        if tell_sockets {
            for c in self.conns_on(name, |r| *r == Role::Plain) {
                self.tell(c, Ctl::AgentLost);
            }
            for c in self.conns_on(name, |r| {
                matches!(r, Role::TunnelControl { .. } | Role::TunnelRelay { .. })
            }) {
                self.tell(
                    c,
                    Ctl::Close {
                        code: 4000,
                        reason: "lost".into(),
                    },
                );
            }
        }
        let Some(imp) = self.imps.get_mut(name) else {
            return;
        };
        if let Some(boot) = imp.boot.as_mut() {
            for (_, pid) in std::mem::take(&mut boot.plain) {
                signal_group(pid, Signal::KILL);
            }
        }
        for (_, l) in std::mem::take(&mut imp.listeners) {
            l.shut();
        }
    }

    /// Throws the current boot away: every process killed, every socket on the imp told.
    fn end_boot(&mut self, name: &str) {
        for c in self.conns_on(name, |r| matches!(r, Role::Session { .. })) {
            self.tell(c, Ctl::Detach("lost"));
        }
        self.end_plain_and_forwards(name, true);
        let Some(imp) = self.imps.get_mut(name) else {
            return;
        };
        if let Some(boot) = imp.boot.take() {
            for g in boot.sessions.values() {
                g.kill();
            }
        }
    }

    /// A test control: a cold boot with `cause` (watchdog, recovery, wake_fallback, restore,
    /// …). `Running`: the imp runs again at once under a new boot; `Stopped`: it ends stopped
    /// and its next boot carries the cause.
    pub fn force_cold_boot(&mut self, name: &str, cause: &str, end: BootEnd, now: Millis) -> bool {
        if !self.imps.contains_key(name) {
            return false;
        }
        self.end_boot(name);
        if let Some(imp) = self.imps.get_mut(name) {
            imp.cold_boot_reason = Some(cause.to_string());
            imp.state = ImpState::Stopped;
            imp.slept_at = None;
        }
        if end == BootEnd::Running {
            self.boot(name, now);
        }
        true
    }

    /// A test control: the imp fails into state `error`.
    pub fn fail_imp(&mut self, name: &str, message: &str) -> bool {
        if !self.imps.contains_key(name) {
            return false;
        }
        self.end_boot(name);
        if let Some(imp) = self.imps.get_mut(name) {
            imp.state = ImpState::Error;
            imp.error = Some(message.to_string());
        }
        true
    }

    /// impd restart: sockets were closed with 1012; every running imp sleeps with its
    /// sessions and leases kept.
    pub fn restart_sleep_all(&mut self, now: Millis) {
        let running: Vec<String> = self
            .imps
            .values()
            .filter(|i| i.state == ImpState::Running)
            .map(|i| i.name.clone())
            .collect();
        for name in running {
            self.put_to_sleep(&name, now, false);
        }
    }

    /// Kills every guest process (the simulator is going away).
    pub fn kill_everything(&mut self) {
        let names: Vec<String> = self.imps.keys().cloned().collect();
        for name in names {
            self.end_boot(&name);
        }
    }
}
