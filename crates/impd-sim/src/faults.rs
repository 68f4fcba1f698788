//! Fault injection and test controls: the handle a test holds to make impd misbehave, change
//! its mind, or do what an operator or the host would (sleep an imp, reboot it, revoke a
//! token). Thread-safe; every method takes effect before it returns, except `restart`,
//! which a network task carries out (wait for its effects, e.g. by reconnecting).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use super::auth::Scope;
use super::holds::{Gate, HeldCall, HoldPoint, Holds};
use super::imps::BootEnd;
use super::options::Features;
use super::server::NetCmd;
use super::session::start_generation;
use super::state::{Ctl, Shared};

/// When an injected drop closes an `/exec` socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// After the opening message arrived, before anything ran (no `started`).
    BeforeStarted,
    /// Right after `started` (the process or session runs on).
    AfterStarted,
}

/// What happens to an upgrade.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpgradeFault {
    /// Answer with this HTTP status instead of upgrading.
    Refuse(u16),
    /// Never answer.
    Hang,
}

/// Pending one-shot faults, consumed in order.
#[derive(Debug, Default)]
pub struct FaultState {
    exec_drops: VecDeque<(When, u16)>,
    upgrades: VecDeque<UpgradeFault>,
    info_unreachable: u32,
    rpc_delays: VecDeque<Duration>,
    garble: u32,
    ram_refusals: u32,
    holds: Holds,
}

impl FaultState {
    pub fn take_exec_drop(&mut self) -> Option<(When, u16)> {
        self.exec_drops.pop_front()
    }

    pub fn take_upgrade(&mut self) -> Option<UpgradeFault> {
        self.upgrades.pop_front()
    }

    pub fn take_info_unreachable(&mut self) -> bool {
        take(&mut self.info_unreachable)
    }

    pub fn take_rpc_delay(&mut self) -> Option<Duration> {
        self.rpc_delays.pop_front()
    }

    pub fn take_garble(&mut self) -> bool {
        take(&mut self.garble)
    }

    pub fn take_ram_refusal(&mut self) -> bool {
        take(&mut self.ram_refusals)
    }

    /// The gate a call of `procedure` must wait at, if a hold takes it.
    pub fn take_hold(&mut self, procedure: &str) -> Option<Gate> {
        self.holds.take(procedure)
    }
}

fn take(n: &mut u32) -> bool {
    let had = *n > 0;
    *n = n.saturating_sub(1);
    had
}

/// The test's handle on a running simulator's faults and controls.
#[derive(Clone)]
pub struct Faults {
    pub(super) shared: Arc<Shared>,
}

impl Faults {
    /// The next `n` `/exec` sockets are closed with `code` (no message) at `when`.
    pub fn drop_next_connections(&self, n: usize, when: When, code: u16) {
        let mut st = self.shared.lock();
        for _ in 0..n {
            st.faults.exec_drops.push_back((when, code));
        }
    }

    /// Forgets every queued `/exec` drop; returns how many were still waiting. With many
    /// drops queued a client keeps failing to connect until this is called, which lets a test
    /// keep a harness away for exactly as long as it needs.
    pub fn cancel_connection_drops(&self) -> usize {
        let mut st = self.shared.lock();
        let n = st.faults.exec_drops.len();
        st.faults.exec_drops.clear();
        n
    }

    /// The next `n` `/exec`/`/tunnel` upgrades are answered with `status` instead.
    pub fn refuse_next_upgrades(&self, n: usize, status: u16) {
        let mut st = self.shared.lock();
        for _ in 0..n {
            st.faults.upgrades.push_back(UpgradeFault::Refuse(status));
        }
    }

    /// The next `n` upgrades never get an answer.
    pub fn hang_next_upgrades(&self, n: usize) {
        let mut st = self.shared.lock();
        for _ in 0..n {
            st.faults.upgrades.push_back(UpgradeFault::Hang);
        }
    }

    /// The next `n` `system.info` calls lose their connection without an answer.
    pub fn unreachable_system_info(&self, n: u32) {
        self.shared.lock().faults.info_unreachable += n;
    }

    /// The next `n` RPC answers wait `by` first.
    pub fn delay_next_rpcs(&self, n: usize, by: Duration) {
        let mut st = self.shared.lock();
        for _ in 0..n {
            st.faults.rpc_delays.push_back(by);
        }
    }

    /// Holds the call of the RPC `procedure` (`imps.create`, `grants.add`, ...) that comes
    /// after `skip` more of them, at `point`, until the handle is released or dropped: so a
    /// test can kill a client with that call in flight, its effect done or not yet.
    pub fn hold_call(&self, procedure: &str, skip: usize, point: HoldPoint) -> HeldCall {
        self.shared.lock().faults.holds.ask(procedure, skip, point)
    }

    /// The next `n` `/exec` sockets get a text message that is not JSON before their answer.
    pub fn garble_next_exec(&self, n: u32) {
        self.shared.lock().faults.garble += n;
    }

    /// The next `n` boots/wakes/acquires are refused with `RAM_BUDGET_EXCEEDED`.
    pub fn refuse_ram_next(&self, n: u32) {
        self.shared.lock().faults.ram_refusals += n;
    }

    /// Changes the RAM budget (`None`: unlimited).
    pub fn set_ram_budget_mib(&self, budget: Option<u64>) {
        self.shared.lock().opts.ram_budget_mib = budget;
    }

    /// Changes the feature flags (`None`: an impd from before flags).
    pub fn set_features(&self, features: Option<Features>) {
        self.shared.lock().opts.features = features;
    }

    /// Whether the imps' agents report offsets (`false`: `continuity:"none"`).
    pub fn set_agent_offsets(&self, on: bool) {
        self.shared.lock().opts.agent_offsets = on;
    }

    /// Whether `attach` also checks `require` (real impd does not).
    pub fn set_require_on_attach(&self, on: bool) {
        self.shared.lock().opts.require_on_attach = on;
    }

    /// An exact resume repeats this many bytes before the asked offset (at-least-once).
    pub fn set_resume_overlap(&self, bytes: u64) {
        self.shared.lock().resume_overlap = bytes;
    }

    /// Removes a token: its sockets close with 1008, and it is refused from now on.
    pub fn revoke_token(&self, token: &str) -> bool {
        let mut st = self.shared.lock();
        let existed = st.auth.revoke(token);
        let theirs: Vec<u64> = st
            .conns
            .iter()
            .filter(|(_, c)| c.principal.token == token)
            .map(|(id, _)| *id)
            .collect();
        for c in theirs {
            st.tell(
                c,
                Ctl::Close {
                    code: 1008,
                    reason: "the token was removed".into(),
                },
            );
        }
        existed
    }

    /// Mints a named token with a scope and imp patterns (`None`: every imp).
    pub fn add_token(&self, scope: Scope, imps: Option<Vec<String>>) -> String {
        self.shared.lock().auth.add_token(scope, imps)
    }

    /// impd restarts: every socket closes with 1012 (no message), every running imp sleeps
    /// with its sessions and leases kept, and connections are refused for `down_for`.
    pub fn restart(&self, down_for: Duration) {
        // The network task is gone only when the simulator stopped; nothing to restart then.
        let _ = self.shared.net.send(NetCmd::Restart { down_for });
    }

    /// A cold boot with `cause` (`watchdog`, `recovery`, `wake_fallback`, `restore`, …):
    /// processes, sessions, rings and `previous` are lost; sockets see `lost`.
    pub fn cold_boot(&self, imp: &str, cause: &str, end: BootEnd) -> bool {
        let now = self.shared.clock.now();
        self.shared.lock().force_cold_boot(imp, cause, end, now)
    }

    /// Puts a running imp to sleep as the host would (leases kept, no `LEASED` check).
    pub fn sleep_imp(&self, imp: &str) -> bool {
        let now = self.shared.clock.now();
        let mut st = self.shared.lock();
        let running = st
            .imps
            .get(imp)
            .is_some_and(|i| i.state == super::state::ImpState::Running);
        if running {
            st.put_to_sleep(imp, now, true);
        }
        running
    }

    /// The imp fails into state `error` (its guest is gone).
    pub fn fail_imp(&self, imp: &str, message: &str) -> bool {
        self.shared.lock().fail_imp(imp, message)
    }

    /// Someone else replaces the session's process in the same boot: a new generation under
    /// the same name (same command), and the old process is killed. Its viewer sees `exit`.
    pub fn replace_generation(&self, imp: &str, session: &str) -> bool {
        let now = self.shared.clock.now();
        let shared = self.shared.clone();
        let mut st = shared.lock();
        let Some(old) = st
            .imps
            .get(imp)
            .and_then(|i| i.boot.as_ref())
            .and_then(|b| b.sessions.get(session))
            .cloned()
        else {
            return false;
        };
        let started = start_generation(
            &shared,
            &mut st,
            imp,
            session,
            old.command.clone(),
            old.with_broker,
            now,
        );
        old.kill();
        started.is_ok()
    }

    /// The session's viewer is dropped as too slow: `detached slow` + 1000.
    pub fn detach_slow(&self, imp: &str, session: &str) -> bool {
        self.tell_viewer(imp, session, Ctl::Detach("slow"))
    }

    /// impd had to drop an output message: the viewer's socket closes 1011 with no message.
    pub fn drop_output(&self, imp: &str, session: &str) -> bool {
        self.tell_viewer(
            imp,
            session,
            Ctl::Close {
                code: 1011,
                reason: "output dropped".into(),
            },
        )
    }

    fn tell_viewer(&self, imp: &str, session: &str, ctl: Ctl) -> bool {
        let st = self.shared.lock();
        let viewer = st
            .imps
            .get(imp)
            .and_then(|i| i.boot.as_ref())
            .and_then(|b| b.sessions.get(session))
            .and_then(|g| g.out().viewer);
        match viewer {
            Some(v) => {
                st.tell(v, ctl);
                true
            }
            None => false,
        }
    }

    /// A lease held by another principal; `ttl` None = no end.
    pub fn add_lease(
        &self,
        imp: &str,
        principal: &str,
        label: &str,
        ttl: Option<Duration>,
    ) -> bool {
        let until = ttl.map(|t| self.shared.clock.now() + t.as_millis() as i64);
        self.shared
            .lock()
            .add_foreign_lease(imp, principal, label, until)
    }

    /// The guest listener of a reverse forward ends: its control socket and relays get 4000.
    pub fn lose_listeners(&self, imp: &str) -> bool {
        let mut st = self.shared.lock();
        let tunnels = st.conns_on(imp, |r| {
            matches!(
                r,
                super::state::Role::TunnelControl { .. } | super::state::Role::TunnelRelay { .. }
            )
        });
        for c in &tunnels {
            st.tell(
                *c,
                Ctl::Close {
                    code: 4000,
                    reason: "lost".into(),
                },
            );
        }
        if let Some(i) = st.imps.get_mut(imp) {
            for (_, l) in std::mem::take(&mut i.listeners) {
                l.shut();
            }
        }
        !tunnels.is_empty()
    }
}
