//! `/tunnel` reverse forwards (protocol §12): a control socket asks the guest to `listen` on a
//! unix path (a real path on this machine) or a loopback TCP port and is told of each guest
//! client (`connection`); a relay socket `accept`s one and then carries raw bytes both ways
//! with acks, each side keeping at most 1 MiB unacked, `eof` half-closes.
//!
//! Close codes: 1000 after both eofs or an `error`; 1002 protocol violations (bad JSON, data
//! before `opened`, a second listen/accept, window or frame size exceeded, a relative path);
//! 1012 impd restarting; 4000 when the guest side is lost (sleep, a lost listener).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::auth::{Principal, Scope};
use super::envelope::ImpdError;
use super::exec::{injected_upgrade_fault, unauthorized};
use super::input::Fields;
use super::state::{ConnId, Ctl, Role, Shared};
use super::ws::{upgrade, Inbound, WsIn, WsOut};

/// Unacked bytes allowed each way.
const WINDOW: u64 = 1024 * 1024;
/// Largest binary message either side sends.
const MAX_FRAME: usize = 64 * 1024;
/// Relays per forward.
const MAX_RELAYS: usize = 64;

/// A guest-side stream.
pub trait Duplex: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Duplex for T {}

/// One guest listener, owned by its control socket.
pub struct Listener {
    pub owner: String,
    pub control: ConnId,
    path: Option<PathBuf>,
    /// Guest clients announced and not yet accepted.
    pending: BTreeMap<u64, Box<dyn Duplex>>,
    next_id: u64,
    /// Relays currently open.
    relays: usize,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// Stops listening and removes the socket file.
    pub fn shut(self) {
        self.task.abort();
        if let Some(p) = &self.path {
            // Already gone is fine.
            let _ = std::fs::remove_file(p);
        }
    }
}

/// `GET /tunnel` (upgrade). Bearer header only; tickets never work here.
pub async fn route(
    req: HttpRequest,
    payload: web::Payload,
    shared: web::Data<Shared>,
) -> HttpResponse {
    let shared = shared.into_inner();
    let principal = {
        let mut st = shared.lock();
        let bearer = req
            .headers()
            .get("authorization")
            .and_then(|h| h.to_str().ok());
        match st.auth.bearer(bearer) {
            Some(p) => p,
            None => {
                st.stats.upgrades_refused += 1;
                return unauthorized();
            }
        }
    };
    if let Some(r) = injected_upgrade_fault(&shared).await {
        return r;
    }
    let (response, inp, out) = match upgrade(&req, payload, MAX_FRAME + 1024) {
        Ok(x) => x,
        Err(why) => return HttpResponse::BadRequest().body(why),
    };
    shared.mark_websocket(req.peer_addr());
    let (id, ctl) = {
        let mut st = shared.lock();
        st.stats.tunnel_connections += 1;
        st.register(principal.clone())
    };
    actix_rt::spawn(serve(Tunnel {
        shared,
        id,
        principal,
        inp,
        out,
        ctl,
    }));
    response
}

struct Tunnel {
    shared: Arc<Shared>,
    id: ConnId,
    principal: Principal,
    inp: WsIn,
    out: WsOut,
    ctl: mpsc::UnboundedReceiver<Ctl>,
}

async fn serve(mut t: Tunnel) {
    t.run().await;
    let mut st = t.shared.lock();
    let Some(entry) = st.conns.remove(&t.id) else {
        return;
    };
    let Some(imp) = entry.imp.and_then(|n| st.imps.get_mut(&n)) else {
        return;
    };
    match entry.role {
        Role::TunnelControl { listener } => {
            if let Some(l) = imp.listeners.remove(&listener) {
                l.shut();
            }
        }
        Role::TunnelRelay { listener } => {
            if let Some(l) = imp.listeners.get_mut(&listener) {
                l.relays = l.relays.saturating_sub(1);
            }
        }
        _ => {}
    }
}

impl Tunnel {
    async fn run(&mut self) {
        let first = loop {
            match self.inp.next().await {
                Ok(Inbound::Text(t)) => break t,
                Ok(Inbound::Ping(b)) => {
                    self.out.pong(b).await;
                }
                Ok(Inbound::Close) => return,
                Ok(Inbound::Binary(_)) | Err(_) => {
                    return self.out.close(1002, "protocol error").await
                }
            }
        };
        let Ok(msg) = serde_json::from_slice::<Value>(&first) else {
            return self.out.close(1002, "bad JSON").await;
        };
        match msg.get("type").and_then(Value::as_str) {
            Some("listen") => self.listen(&msg).await,
            Some("accept") => self.accept(&msg).await,
            Some("open") => {
                self.error(&ImpdError::new(
                    "BAD_REQUEST",
                    "forward tunnels are not simulated",
                ))
                .await
            }
            _ => self.out.close(1002, "unknown message").await,
        }
    }

    async fn error(&mut self, e: &ImpdError) {
        self.out
            .text(&json!({"type": "error", "code": e.code, "message": e.message}))
            .await;
        self.out.close(1000, "error").await;
    }

    async fn listen(&mut self, msg: &Value) {
        let f = Fields(msg);
        let (Ok(name), Ok(network), Ok(path), Ok(port)) = (
            f.str("name"),
            f.opt_str("network"),
            f.opt_str("path"),
            f.opt_int("port", 0, 65535),
        ) else {
            return self.out.close(1002, "bad listen").await;
        };
        let tcp = network.as_deref() == Some("tcp");
        if tcp && path.is_some() || path.as_deref().is_some_and(|p| !p.starts_with('/')) {
            return self.out.close(1002, "bad listen").await;
        }
        let listening = self.bind(&name, tcp, path, port.unwrap_or(0) as u16);
        match listening {
            Ok(v) => {
                if !self.out.text(&v).await {
                    return;
                }
            }
            Err(e) => return self.error(&e).await,
        }
        loop {
            tokio::select! {
                ctl = self.ctl.recv() => match ctl {
                    Some(Ctl::Connection(id)) => {
                        if !self.out.text(&json!({"type": "connection", "id": id})).await {
                            return;
                        }
                    }
                    Some(Ctl::Close { code, reason }) => return self.out.close(code, &reason).await,
                    Some(_) | None => return self.out.close(4000, "lost").await,
                },
                msg = self.inp.next() => match msg {
                    Ok(Inbound::Ping(b)) => { self.out.pong(b).await; }
                    Ok(Inbound::Close) => return,
                    // A control socket takes nothing after listen.
                    _ => return self.out.close(1002, "protocol error").await,
                },
            }
        }
    }

    /// Binds the guest listener and starts announcing its clients.
    fn bind(
        &mut self,
        name: &str,
        tcp: bool,
        path: Option<String>,
        port: u16,
    ) -> Result<Value, ImpdError> {
        let shared = self.shared.clone();
        let now = shared.clock.now();
        let mut st = shared.lock();
        self.principal.require(Scope::Exec, Some(name))?;
        st.imp(name)?;
        st.ensure_running(name, &self.principal, now)?;
        let listener_id = super::auth::random_hex(8);
        let _in_guest = shared.guest.enter();
        let (accepting, path, port): (Box<dyn Accept>, Option<PathBuf>, Option<u16>) = if tcp {
            let l = std::net::TcpListener::bind(("127.0.0.1", port))
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .and_then(tokio::net::TcpListener::from_std)
                .map_err(|e| ImpdError::new("LISTEN_FAILED", e.to_string()))?;
            let port = l.local_addr().map(|a| a.port()).ok();
            (Box::new(l), None, port)
        } else {
            let path = match path {
                Some(p) if p.starts_with("/run/imp/") => {
                    return Err(ImpdError::new(
                        "BAD_REQUEST",
                        "paths under /run/imp/ are reserved",
                    ))
                }
                Some(p) => PathBuf::from(p),
                None => {
                    let dir = shared.dir.join("forward");
                    std::fs::create_dir_all(&dir)
                        .map_err(|e| ImpdError::new("LISTEN_FAILED", e.to_string()))?;
                    dir.join(format!("{listener_id}.sock"))
                }
            };
            replace_leftover_socket(&path)?;
            let l = tokio::net::UnixListener::bind(&path)
                .map_err(|e| ImpdError::new("LISTEN_FAILED", e.to_string()))?;
            (Box::new(l), Some(path), None)
        };
        let task = shared.guest.spawn(announce(
            shared.clone(),
            name.to_string(),
            listener_id.clone(),
            accepting,
        ));
        let imp = st
            .imps
            .get_mut(name)
            .ok_or_else(|| ImpdError::not_found("imp", name))?;
        imp.listeners.insert(
            listener_id.clone(),
            Listener {
                owner: self.principal.key.clone(),
                control: self.id,
                path: path.clone(),
                pending: BTreeMap::new(),
                next_id: 0,
                relays: 0,
                task,
            },
        );
        if let Some(c) = st.conns.get_mut(&self.id) {
            c.imp = Some(name.to_string());
            c.role = Role::TunnelControl {
                listener: listener_id.clone(),
            };
        }
        Ok(json!({
            "type": "listening",
            "listener": listener_id,
            "path": path.map(|p| p.display().to_string()),
            "port": port,
        }))
    }

    async fn accept(&mut self, msg: &Value) {
        let f = Fields(msg);
        let (Ok(name), Ok(listener), Ok(connection)) = (
            f.str("name"),
            f.str("listener"),
            f.int("connection", 1, i64::MAX),
        ) else {
            return self.out.close(1002, "bad accept").await;
        };
        let stream = self.claim(&name, &listener, connection as u64);
        match stream {
            Ok(s) => {
                if self.out.text(&json!({"type": "opened"})).await {
                    self.relay(s).await;
                }
            }
            Err(e) => self.error(&e).await,
        }
    }

    /// Takes an announced guest client for this relay.
    fn claim(
        &mut self,
        name: &str,
        listener: &str,
        connection: u64,
    ) -> Result<Box<dyn Duplex>, ImpdError> {
        let mut st = self.shared.lock();
        self.principal.require(Scope::Exec, Some(name))?;
        let imp = st
            .imps
            .get_mut(name)
            .ok_or_else(|| ImpdError::not_found("imp", name))?;
        let l = imp
            .listeners
            .get_mut(listener)
            .filter(|l| l.owner == self.principal.key)
            .ok_or_else(|| ImpdError::new("NOT_FOUND", format!("no listener {listener}")))?;
        if l.relays >= MAX_RELAYS {
            return Err(ImpdError::new("TUNNEL_LIMIT", "64 relays per forward"));
        }
        let stream = l
            .pending
            .remove(&connection)
            .ok_or_else(|| ImpdError::new("NOT_FOUND", format!("no connection {connection}")))?;
        l.relays += 1;
        if let Some(c) = st.conns.get_mut(&self.id) {
            c.imp = Some(name.to_string());
            c.role = Role::TunnelRelay {
                listener: listener.to_string(),
            };
        }
        Ok(stream)
    }

    /// Relays raw bytes with the acked window until both sides sent eof.
    async fn relay(&mut self, stream: Box<dyn Duplex>) {
        let (mut guest_r, mut guest_w) = tokio::io::split(stream);
        let mut buf = vec![0u8; MAX_FRAME];
        // Bytes we sent the client that it has not acked, and the other way round.
        let mut to_client_unacked: u64 = 0;
        let (mut guest_eof, mut client_eof) = (false, false);
        loop {
            if guest_eof && client_eof {
                return self.out.close(1000, "done").await;
            }
            tokio::select! {
                n = guest_r.read(&mut buf), if !guest_eof && to_client_unacked < WINDOW => match n {
                    Ok(0) => {
                        guest_eof = true;
                        if !self.out.text(&json!({"type": "eof"})).await {
                            return;
                        }
                    }
                    Ok(n) => {
                        let n = n.min((WINDOW - to_client_unacked) as usize);
                        to_client_unacked += n as u64;
                        if !self.out.binary(None, &buf[..n]).await {
                            return;
                        }
                    }
                    Err(_) => return self.out.close(4000, "lost").await,
                },
                ctl = self.ctl.recv() => match ctl {
                    Some(Ctl::Close { code, reason }) => return self.out.close(code, &reason).await,
                    Some(Ctl::Connection(_)) => {}
                    Some(_) | None => return self.out.close(4000, "lost").await,
                },
                msg = self.inp.next() => match msg {
                    Ok(Inbound::Binary(b)) => {
                        if b.len() > MAX_FRAME || client_eof {
                            return self.out.close(1002, "frame too big or after eof").await;
                        }
                        if guest_w.write_all(&b).await.is_err() {
                            return self.out.close(4000, "lost").await;
                        }
                        if !self.out.text(&json!({"type": "ack", "bytes": b.len()})).await {
                            return;
                        }
                    }
                    Ok(Inbound::Text(t)) => {
                        let Ok(v) = serde_json::from_slice::<Value>(&t) else {
                            return self.out.close(1002, "bad JSON").await;
                        };
                        match v.get("type").and_then(Value::as_str) {
                            Some("eof") => {
                                client_eof = true;
                                // The guest may have closed already; then the half-close is moot.
                                let _ = guest_w.shutdown().await;
                            }
                            Some("ack") => {
                                let n = v.get("bytes").and_then(Value::as_u64).unwrap_or(0);
                                if n == 0 || n > to_client_unacked {
                                    return self.out.close(1002, "bad ack").await;
                                }
                                to_client_unacked -= n;
                            }
                            _ => return self.out.close(1002, "unexpected message").await,
                        }
                    }
                    Ok(Inbound::Ping(b)) => { self.out.pong(b).await; }
                    Ok(Inbound::Close) => return,
                    Err(_) => return self.out.close(1002, "protocol error").await,
                },
            }
        }
    }
}

/// A leftover socket at the path is replaced; any other file is in the way.
fn replace_leftover_socket(path: &std::path::Path) -> Result<(), ImpdError> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            std::fs::remove_file(path).map_err(|e| ImpdError::new("LISTEN_FAILED", e.to_string()))
        }
        Ok(_) => Err(ImpdError::new("LISTEN_FAILED", "a file is in the way")),
        Err(_) => Ok(()),
    }
}

/// A guest client being accepted.
type Accepted<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = std::io::Result<Box<dyn Duplex>>> + Send + 'a>,
>;

/// Something that accepts guest clients.
trait Accept: Send {
    fn accept(&mut self) -> Accepted<'_>;
}

impl Accept for tokio::net::UnixListener {
    fn accept(&mut self) -> Accepted<'_> {
        Box::pin(async move {
            let (s, _) = tokio::net::UnixListener::accept(self).await?;
            Ok(Box::new(s) as Box<dyn Duplex>)
        })
    }
}

impl Accept for tokio::net::TcpListener {
    fn accept(&mut self) -> Accepted<'_> {
        Box::pin(async move {
            let (s, _) = tokio::net::TcpListener::accept(self).await?;
            Ok(Box::new(s) as Box<dyn Duplex>)
        })
    }
}

/// Accepts guest clients, parks each for an `accept` and tells the control socket.
async fn announce(
    shared: Arc<Shared>,
    imp: String,
    listener: String,
    mut accepting: Box<dyn Accept>,
) {
    while let Ok(stream) = accepting.accept().await {
        let mut st = shared.lock();
        let Some(l) = st
            .imps
            .get_mut(&imp)
            .and_then(|i| i.listeners.get_mut(&listener))
        else {
            return;
        };
        if l.relays + l.pending.len() >= MAX_RELAYS {
            // Past the relay cap the guest client is closed at once.
            continue;
        }
        l.next_id += 1;
        let id = l.next_id;
        l.pending.insert(id, stream);
        let control = l.control;
        st.tell(control, Ctl::Connection(id));
    }
}
