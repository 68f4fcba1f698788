//! The simulator's one piece of shared state and the records it holds.
//!
//! Everything lives in one `std::sync::Mutex<SimState>` inside [`Shared`]. A plain mutex is
//! right here: critical sections are short, never held across an `.await`, and the state is
//! touched from three places that cannot share an actor system (HTTP worker, guest runtime,
//! and the test's own thread through the fault handle). Lock order: `Shared::state` before any
//! `Generation::out`; never the other way round.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use rustix::process::Pid;
use serde_json::Value;
use tokio::runtime::Handle;
use tokio::sync::mpsc;

use super::auth::{Auth, Principal};
use super::broker::BrokerState;
use super::clock::{Clock, Millis};
use super::faults::FaultState;
use super::leases::Lease;
use super::options::SimOptions;
use super::session::Generation;
use super::tunnel::Listener;

/// Identifies one accepted `/exec` or `/tunnel` socket.
pub type ConnId = u64;

/// State shared by the HTTP side, the guest side and the test's handle.
pub struct Shared {
    pub state: Mutex<SimState>,
    /// The runtime guest processes and listeners live on; it outlives every connection.
    pub guest: Handle,
    pub clock: Clock,
    /// Scratch directory (agent-chosen forward sockets live here).
    pub dir: PathBuf,
    /// Asks the network front to go down for a while (impd restart).
    pub net: mpsc::UnboundedSender<super::server::NetCmd>,
    /// Connections the network front carries (keyed by the private server's view of their
    /// peer address), so a handler can cut its own and a restart can cut the rest.
    pub carried: Mutex<BTreeMap<std::net::SocketAddr, Carried>>,
}

/// One connection the network front carries.
pub struct Carried {
    /// Notified to drop the connection at once.
    pub cut: Arc<tokio::sync::Notify>,
    /// Upgraded to a WebSocket: it ends by itself after its close frame, so a restart leaves
    /// it be rather than risk cutting that frame off.
    pub websocket: bool,
}

impl Shared {
    /// The state, even if a panicking thread poisoned the lock (a test failure elsewhere
    /// must not hide behind a poison error here).
    pub fn lock(&self) -> MutexGuard<'_, SimState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops the TCP connection a handler's request came in on, without an answer: what a
    /// client sees when impd is unreachable.
    pub fn cut(&self, peer: Option<std::net::SocketAddr>) {
        let carried = self.carried.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = peer.and_then(|p| carried.get(&p)) {
            c.cut.notify_one();
        }
    }

    /// Marks the connection a request came in on as upgraded.
    pub fn mark_websocket(&self, peer: Option<std::net::SocketAddr>) {
        let mut carried = self.carried.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = peer.and_then(|p| carried.get_mut(&p)) {
            c.websocket = true;
        }
    }
}

/// Counters a test can assert on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// RPC calls that reached a procedure (after auth), by `group.name`.
    pub rpc_calls: BTreeMap<String, u64>,
    /// `/exec` upgrades accepted.
    pub exec_connections: u64,
    /// `/tunnel` upgrades accepted.
    pub tunnel_connections: u64,
    /// Upgrades refused (auth or an injected refusal).
    pub upgrades_refused: u64,
    /// Output bytes sent on `/exec` sockets (channels 1 and 2, prelude included).
    pub exec_bytes_sent: u64,
    /// `/exec` opening messages handled, by type (`start`, `attach`).
    pub exec_opens: BTreeMap<String, u64>,
    /// Processes started (sessions and plain execs).
    pub processes_started: u64,
}

/// An imp's lifecycle state (protocol §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImpState {
    Creating,
    Running,
    Sleeping,
    Stopped,
    Error,
}

impl ImpState {
    pub fn wire(self) -> &'static str {
        match self {
            ImpState::Creating => "creating",
            ImpState::Running => "running",
            ImpState::Sleeping => "sleeping",
            ImpState::Stopped => "stopped",
            ImpState::Error => "error",
        }
    }
}

/// One cold boot, as `coldBoots` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColdBoot {
    pub boot_id: String,
    pub cause: String,
    pub at: Millis,
}

/// What a generation left under its name once it ended (`previous`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Previous {
    pub generation: String,
    pub end: u64,
    pub exit_code: Option<i32>,
}

/// One boot of an imp's guest: what a cold boot throws away.
pub struct Boot {
    pub id: String,
    /// The current generation under each session name (running, or exited and uncollected).
    pub sessions: BTreeMap<String, Arc<Generation>>,
    /// `previous` per name, newest last, at most 16 names.
    pub previous: VecDeque<(String, Previous)>,
    /// Plain execs running in this boot, by socket.
    pub plain: BTreeMap<ConnId, Pid>,
}

impl Boot {
    pub fn new() -> Boot {
        Boot {
            id: super::auth::uuid(),
            sessions: BTreeMap::new(),
            previous: VecDeque::new(),
            plain: BTreeMap::new(),
        }
    }

    pub fn previous_of(&self, name: &str) -> Option<&Previous> {
        self.previous
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p)
    }

    /// Records what left `name`; keeps 16 names.
    pub fn set_previous(&mut self, name: &str, p: Previous) {
        self.previous.retain(|(n, _)| n != name);
        self.previous.push_back((name.to_string(), p));
        while self.previous.len() > 16 {
            self.previous.pop_front();
        }
    }
}

/// One imp.
pub struct Imp {
    pub id: String,
    pub name: String,
    pub image: String,
    pub memory_mib: u64,
    pub vcpus: u64,
    pub disk_mib: u64,
    pub state: ImpState,
    pub error: Option<String>,
    pub created_at: Millis,
    pub last_active_at: Millis,
    pub slept_at: Option<Millis>,
    /// `None` while stopped (no guest memory).
    pub boot: Option<Boot>,
    /// Newest first, at most 4.
    pub cold_boots: VecDeque<ColdBoot>,
    /// Why the next boot is cold (set when a fault stopped the imp).
    pub cold_boot_reason: Option<String>,
    pub leases: Vec<Lease>,
    pub grants: BTreeSet<String>,
    pub listeners: BTreeMap<String, Listener>,
}

impl Imp {
    pub fn cold_boots_wire(&self) -> Value {
        Value::Array(
            self.cold_boots
                .iter()
                .map(|b| {
                    serde_json::json!({
                        "bootId": b.boot_id,
                        "cause": b.cause,
                        "at": super::clock::iso(b.at),
                    })
                })
                .collect(),
        )
    }
}

/// What a socket is for, so an event on its imp reaches it the right way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Upgraded, opening message not handled yet.
    Opening,
    /// A session viewer.
    Session { session: String, generation: String },
    /// A command run to completion.
    Plain,
    /// A reverse-forward control socket.
    TunnelControl { listener: String },
    /// A reverse-forward relay.
    TunnelRelay { listener: String },
}

/// What the state tells a socket's task. The task owns the wire; these say what happened.
#[derive(Debug)]
pub enum Ctl {
    /// Close with this code and no message (1008 revoked, 1011 output dropped, 1012 restart,
    /// 4000 tunnel lost, or an injected code).
    Close { code: u16, reason: String },
    /// A session viewer ends with `detached` (reason `taken_over`, `slow` or `lost`) + 1000.
    Detach(&'static str),
    /// The agent connection ended without exit: plain exec `error` + 1011.
    AgentLost,
    /// A guest client connected to this control socket's listener.
    Connection(u64),
}

/// One accepted socket.
pub struct ConnEntry {
    pub principal: Principal,
    pub imp: Option<String>,
    pub role: Role,
    pub ctl: mpsc::UnboundedSender<Ctl>,
}

/// Everything the simulator knows.
pub struct SimState {
    pub opts: SimOptions,
    pub auth: Auth,
    pub imps: BTreeMap<String, Imp>,
    pub conns: BTreeMap<ConnId, ConnEntry>,
    pub next_conn: ConnId,
    pub faults: FaultState,
    pub stats: Stats,
    /// Secrets, broker readiness and the record of `/exec` openings.
    pub broker: BrokerState,
    /// Extra bytes a resume repeats before the asked offset (at-least-once delivery).
    pub resume_overlap: u64,
}

impl SimState {
    /// A simulator with no imps, no sockets and no faults yet, whose root token is `root`.
    pub fn new(opts: SimOptions, root: &str) -> SimState {
        SimState {
            auth: Auth::with_root(root),
            opts,
            imps: BTreeMap::new(),
            conns: BTreeMap::new(),
            next_conn: 0,
            faults: Default::default(),
            stats: Default::default(),
            broker: Default::default(),
            resume_overlap: 0,
        }
    }

    /// Registers a socket and returns its id and control receiver.
    pub fn register(&mut self, principal: Principal) -> (ConnId, mpsc::UnboundedReceiver<Ctl>) {
        self.next_conn += 1;
        let id = self.next_conn;
        let (tx, rx) = mpsc::unbounded_channel();
        // A token revoked after this socket was authenticated and before it got here would
        // escape the revocation's close (which only sees registered sockets): close it as if
        // it had been registered in time, so a revocation ends every socket of its token.
        if !self.auth.knows(&principal.token) {
            let _ = tx.send(Ctl::Close {
                code: 1008,
                reason: "the token was removed".into(),
            });
        }
        self.conns.insert(
            id,
            ConnEntry {
                principal,
                imp: None,
                role: Role::Opening,
                ctl: tx,
            },
        );
        (id, rx)
    }

    /// Tells one socket something; a socket that already ended is simply gone.
    pub fn tell(&self, conn: ConnId, ctl: Ctl) {
        if let Some(c) = self.conns.get(&conn) {
            let _ = c.ctl.send(ctl);
        }
    }

    /// Sockets on `imp` whose role matches.
    pub fn conns_on(&self, imp: &str, pick: impl Fn(&Role) -> bool) -> Vec<ConnId> {
        self.conns
            .iter()
            .filter(|(_, c)| c.imp.as_deref() == Some(imp) && pick(&c.role))
            .map(|(id, _)| *id)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by `atc-proof remote` (`revokeDuringReconnect`): a socket authenticated just
    /// before its token was revoked, and registered just after, used to stay open for good.
    #[test]
    fn a_socket_registered_after_its_token_was_revoked_is_closed_at_once() {
        let mut st = SimState::new(Default::default(), "root-token");
        let token = st.auth.add_token(crate::auth::Scope::Manage, None);
        let principal = st
            .auth
            .bearer(Some(&format!("Bearer {token}")))
            .expect("the new token authenticates");
        let (_, mut live) = st.register(principal.clone());
        assert!(live.try_recv().is_err(), "a live token's socket stays open");
        assert!(st.auth.revoke(&token));
        let (_, mut late) = st.register(principal);
        match late.try_recv() {
            Ok(Ctl::Close { code, .. }) => assert_eq!(code, 1008),
            other => panic!("not closed: {other:?}"),
        }
    }
}
