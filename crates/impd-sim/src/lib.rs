//! An in-process impd: the control plane for imps (microVMs), faithful on the wire to
//! `shared/spec/impd-protocol.md`, so tests and the daemon's `imp` provider can talk to it.
//!
//! [`ImpdSim::start`] runs the simulator on its own thread with its own actix system, so it
//! works from any test runtime and outlives whatever the test does to its own. Imps are
//! simulated, their guests are not: a session runs a real process on this machine in a pty,
//! a sleep freezes it (SIGSTOP) and a wake thaws it (SIGCONT), a cold boot kills it, and a
//! reverse forward listens on a real unix path. Time for leases and dates comes from a
//! [`Clock`] a test can advance. [`Faults`] makes impd misbehave on purpose; the inspection
//! methods here let a test assert what happened without sleeping.
//!
//! Modules: `server` (network front and routes), `rpc` (procedures), `envelope` (oRPC shapes),
//! `auth` (tokens, tickets), `imps` (lifecycle, boots, RAM), `leases`, `broker` (secrets,
//! grants, broker readiness, the record of openings), `grants` (grant steps over RPC, with
//! faults), `broker_controls` (the test's handle on those), `exec` (the `/exec` socket),
//! `session` (generations), `ring` and `modes` (history and replay boundaries), `process`
//! (guest processes), `tunnel` (`/tunnel`), `ws` (framing), `faults`, `holds` (an RPC call
//! held mid-way for a test), `clock`, `options`, `state` (the shared state), `input` (field
//! parsing).
//!
//! It depends on nothing of atc's (only the shared WebSocket reassembler), so it stays an
//! independent second implementation of the wire protocol the daemon's client speaks. The
//! `impd-sim` binary (`src/main.rs`) runs it for a person trying atc's `imp` target.

mod auth;
mod broker;
mod broker_controls;
mod clock;
mod envelope;
mod exec;
mod faults;
mod grants;
mod holds;
mod imps;
mod input;
mod leases;
mod modes;
mod options;
mod process;
mod ring;
mod rpc;
mod server;
mod session;
mod state;
mod tunnel;
mod ws;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

pub use auth::{Identity, Scope, TokenKind};
pub use broker::{
    AuthScheme, ExecOpenRecord, GrantFault, GrantStep, OauthStatus, OpenKind, Secret, SecretKind,
    SecretRule, PLACEHOLDER,
};
pub use clock::Clock;
pub use faults::{Faults, When};
pub use holds::{HeldCall, HoldPoint};
pub use imps::BootEnd;
pub use leases::Lease;
pub use options::{Features, Flag, FlagState, SimOptions};
pub use ring::RING_BYTES;
pub use session::Exit;
pub use state::{ColdBoot, ImpState, Previous, Stats};

/// A running simulator. Dropping it stops it and kills every guest process.
pub struct ImpdSim {
    shared: Arc<Shared>,
    addr: SocketAddr,
    token: String,
    token_file: PathBuf,
    _dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

use state::{Shared, SimState};

/// One imp as the simulator holds it.
#[derive(Clone, Debug)]
pub struct ImpView {
    pub id: String,
    pub name: String,
    pub state: ImpState,
    /// `None` while stopped.
    pub boot_id: Option<String>,
    /// Newest first.
    pub cold_boots: Vec<ColdBoot>,
    /// Every lease, live or not.
    pub leases: Vec<Lease>,
    pub sessions: Vec<SessionView>,
    pub grants: Vec<String>,
    /// Reverse-forward listeners open on the imp.
    pub listeners: usize,
    pub memory_mib: u64,
    /// `previous` per session name in this boot, oldest first.
    pub previous: Vec<(String, Previous)>,
}

/// A session's current generation.
#[derive(Clone, Debug)]
pub struct SessionView {
    pub name: String,
    pub generation: String,
    pub pid: i32,
    pub end: u64,
    pub buffer_start: u64,
    /// Set when the process ended (and nobody collected the exit yet).
    pub exit: Option<Exit>,
    pub attached: bool,
    /// What the name's last finished generation left.
    pub previous: Option<Previous>,
    /// Started with `require:["broker"]` honoured (a later requiring start may join it).
    pub with_broker: bool,
}

impl ImpdSim {
    /// Starts a simulator; panics if it cannot (a test cannot go on without it).
    pub fn start(opts: SimOptions) -> ImpdSim {
        ImpdSim::try_start(opts).unwrap_or_else(|e| panic!("impd simulator failed to start: {e}"))
    }

    /// Starts a simulator, returning why it could not.
    pub fn try_start(opts: SimOptions) -> std::io::Result<ImpdSim> {
        let dir = tempfile::tempdir()?;
        let token = opts.token.clone().unwrap_or_else(|| auth::random_hex(24));
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, format!("{token}\n"))?;
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = oneshot::channel();
        let scratch = dir.path().to_path_buf();
        let root = token.clone();
        let thread = std::thread::Builder::new()
            .name("impd-sim".into())
            .spawn(move || {
                let system = actix_rt::System::new();
                system.block_on(async move {
                    let started = boot(opts, root, scratch).await;
                    let (shared, front, inner, http, cmds) = match started {
                        Ok(x) => x,
                        Err(e) => {
                            // The starter waits for this; if it is gone there is nobody to tell.
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    let public = front.local_addr();
                    // As above: a starter that is gone has nobody to tell.
                    let _ = ready_tx.send(public.map(|a| (shared.clone(), a)));
                    server::run_front(shared.clone(), front, inner, cmds, stop_rx).await;
                    shared.lock().kill_everything();
                    http.stop(false).await;
                });
            })?;
        let (shared, addr) = ready_rx
            .recv()
            .map_err(|_| std::io::Error::other("the simulator thread died while starting"))??;
        Ok(ImpdSim {
            shared,
            addr,
            token,
            token_file,
            _dir: dir,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `ws://127.0.0.1:<port><path>`.
    pub fn ws_url(&self, path: &str) -> String {
        format!("ws://{}{path}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The root token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// A file holding the root token (as impd's `<dataDir>/token`).
    pub fn token_file(&self) -> &Path {
        &self.token_file
    }

    /// Fault injection and test controls.
    pub fn faults(&self) -> Faults {
        Faults {
            shared: self.shared.clone(),
        }
    }

    /// The clock leases and dates run on (advance it if it is manual).
    pub fn clock(&self) -> &Clock {
        &self.shared.clock
    }

    /// Every imp, by name.
    pub fn imps(&self) -> Vec<ImpView> {
        let st = self.shared.lock();
        st.imps.keys().filter_map(|n| view(&st, n)).collect()
    }

    /// One imp.
    pub fn imp(&self, name: &str) -> Option<ImpView> {
        view(&self.shared.lock(), name)
    }

    /// The current generation of a session.
    pub fn session(&self, imp: &str, session: &str) -> Option<SessionView> {
        self.imp(imp)?
            .sessions
            .into_iter()
            .find(|s| s.name == session)
    }

    /// Live leases on an imp.
    pub fn live_leases(&self, imp: &str) -> Vec<Lease> {
        let now = self.shared.clock.now();
        self.imp(imp)
            .map(|i| i.leases.into_iter().filter(|l| l.live(now)).collect())
            .unwrap_or_default()
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        self.shared.lock().stats.clone()
    }

    /// `/exec` and `/tunnel` sockets open right now.
    pub fn open_sockets(&self) -> usize {
        self.shared.lock().conns.len()
    }

    /// Waits (up to 10 s) until `pred` holds; panics naming `what` otherwise.
    pub async fn wait_until(&self, what: &str, pred: impl Fn(&ImpdSim) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !pred(self) {
            if tokio::time::Instant::now() > deadline {
                panic!("impd sim: never {what}; imps: {:#?}", self.imps());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stops the simulator and kills every guest process.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            // The thread may have ended already; then it is stopped.
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            // Err only if the thread panicked, and the panic has printed already; shutdown (often
            // from Drop) has nothing more to do with it.
            let _ = t.join();
        }
    }
}

impl Drop for ImpdSim {
    fn drop(&mut self) {
        self.shutdown();
    }
}

type Booted = (
    Arc<Shared>,
    tokio::net::TcpListener,
    SocketAddr,
    actix_web::dev::ServerHandle,
    mpsc::UnboundedReceiver<server::NetCmd>,
);

/// Builds the state and binds both servers, on the simulator's own thread.
async fn boot(opts: SimOptions, root: String, dir: PathBuf) -> std::io::Result<Booted> {
    let (net_tx, net_rx) = mpsc::unbounded_channel();
    let clock = opts.clock.clone();
    let front = server::bind_front(opts.listen)?;
    let imps = opts.imps.clone();
    let shared = Arc::new(Shared {
        state: Mutex::new(SimState::new(opts, &root)),
        guest: tokio::runtime::Handle::current(),
        clock,
        dir,
        net: net_tx,
        carried: Mutex::new(BTreeMap::new()),
    });
    {
        let now = shared.clock.now();
        let mut st = shared.lock();
        let root_principal = st
            .auth
            .bearer(Some(&format!("Bearer {root}")))
            .ok_or_else(|| std::io::Error::other("the root token is unknown"))?;
        for name in imps {
            st.create(
                &root_principal,
                imps::CreateImp {
                    name: Some(name.clone()),
                    ..Default::default()
                },
                now,
            )
            .map_err(|e| std::io::Error::other(format!("imp {name}: {}", e.message)))?;
        }
    }
    let (inner, http) = server::start_http(shared.clone())?;
    Ok((shared, front, inner, http, net_rx))
}

fn view(st: &SimState, name: &str) -> Option<ImpView> {
    let imp = st.imps.get(name)?;
    let sessions = imp
        .boot
        .as_ref()
        .map(|b| {
            b.sessions
                .values()
                .map(|g| {
                    let out = g.out();
                    SessionView {
                        name: g.session.clone(),
                        generation: g.id.clone(),
                        pid: g.pid.as_raw_nonzero().get(),
                        end: out.ring.end(),
                        buffer_start: out.ring.buffer_start(),
                        exit: out.exit,
                        attached: out.viewer.is_some(),
                        previous: b.previous_of(&g.session).cloned(),
                        with_broker: g.with_broker,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    Some(ImpView {
        id: imp.id.clone(),
        name: imp.name.clone(),
        state: imp.state,
        boot_id: imp.boot.as_ref().map(|b| b.id.clone()),
        cold_boots: imp.cold_boots.iter().cloned().collect(),
        previous: imp
            .boot
            .as_ref()
            .map(|b| b.previous.iter().cloned().collect())
            .unwrap_or_default(),
        leases: imp.leases.clone(),
        sessions,
        grants: imp.grants.iter().cloned().collect(),
        listeners: imp.listeners.len(),
        memory_mib: imp.memory_mib,
    })
}
