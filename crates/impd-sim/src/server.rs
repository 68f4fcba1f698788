//! The simulator's network: a TCP front on the public address that relays each connection to
//! an actix-web server on a private loopback port.
//!
//! The front exists so impd can be unreachable the way a real one is: during a restart the
//! public port refuses connections (the listener is closed and later bound again), and a
//! handler can cut its own connection without an answer (`Shared::cut`), which a client sees
//! as a network failure rather than an HTTP status.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{web, App, HttpResponse, HttpServer};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, oneshot, Notify};

use super::state::{Carried, Ctl, Shared};

/// How long a restart waits for its sockets to send their 1012 close.
const RESTART_FLUSH: Duration = Duration::from_secs(2);

/// What the network front is asked to do.
#[derive(Debug)]
pub enum NetCmd {
    /// impd restart: close every socket 1012, sleep the imps, refuse connections for a while.
    Restart { down_for: Duration },
}

/// The private HTTP server's routes.
fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/health", web::get().to(health))
        .route("/rpc/{group}/{proc}", web::post().to(super::rpc::route))
        .route("/rpc/{tail:.*}", web::route().to(super::rpc::refuse_method))
        .route("/exec", web::get().to(super::exec::route))
        .route("/tunnel", web::get().to(super::tunnel::route))
        .default_service(web::to(|| async {
            HttpResponse::NotFound()
                .content_type("text/plain; charset=utf-8")
                .body("not found")
        }));
}

async fn health() -> HttpResponse {
    HttpResponse::Ok().json(serde_json::json!({"status": "ok", "ready": true}))
}

/// Starts the private server and returns its address and a handle to stop it.
pub fn start_http(
    shared: Arc<Shared>,
) -> std::io::Result<(SocketAddr, actix_web::dev::ServerHandle)> {
    let data = web::Data::from(shared);
    let server = HttpServer::new(move || App::new().app_data(data.clone()).configure(routes))
        .workers(1)
        .disable_signals()
        .shutdown_timeout(1)
        // No Nagle on the private leg either: a close frame right after output must not
        // wait for the relay's delayed ACK.
        .on_connect(|conn, _| {
            if let Some(tcp) = conn.downcast_ref::<actix_web::rt::net::TcpStream>() {
                // A socket that refuses the option still works, only with Nagle.
                let _ = tcp.set_nodelay(true);
            }
        })
        .bind(("127.0.0.1", 0))?;
    let addr = server
        .addrs()
        .first()
        .copied()
        .ok_or_else(|| std::io::Error::other("the HTTP server bound no address"))?;
    let running = server.run();
    let handle = running.handle();
    actix_rt::spawn(running);
    Ok((addr, handle))
}

/// Binds the public address (reusable, so a restart can bind it again at once).
pub fn bind_front(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Runs the front until `stop` fires.
pub async fn run_front(
    shared: Arc<Shared>,
    mut listener: TcpListener,
    inner: SocketAddr,
    mut cmds: mpsc::UnboundedReceiver<NetCmd>,
    mut stop: oneshot::Receiver<()>,
) {
    let public = match listener.local_addr() {
        Ok(a) => a,
        Err(_) => return,
    };
    loop {
        tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => {
                if let Ok((client, _)) = accepted {
                    actix_rt::spawn(relay(shared.clone(), client, inner));
                }
            }
            cmd = cmds.recv() => match cmd {
                Some(NetCmd::Restart { down_for }) => {
                    drop(listener);
                    restart(&shared, down_for).await;
                    listener = loop {
                        match bind_front(public) {
                            Ok(l) => break l,
                            // Someone holds the port for a moment; try again shortly.
                            Err(_) => actix_rt::time::sleep(Duration::from_millis(20)).await,
                        }
                    };
                }
                None => return,
            },
        }
    }
}

/// impd stops: sockets closed 1012 first (no message), imps slept with sessions and leases
/// kept, every connection cut, then nothing answers for `down_for`.
async fn restart(shared: &Arc<Shared>, down_for: Duration) {
    {
        let now = shared.clock.now();
        let mut st = shared.lock();
        let all: Vec<u64> = st.conns.keys().copied().collect();
        for c in all {
            st.tell(
                c,
                Ctl::Close {
                    code: 1012,
                    reason: "impd is restarting".into(),
                },
            );
        }
        st.restart_sleep_all(now);
    }
    let deadline = tokio::time::Instant::now() + RESTART_FLUSH;
    while !shared.lock().conns.is_empty() && tokio::time::Instant::now() < deadline {
        actix_rt::time::sleep(Duration::from_millis(10)).await;
    }
    let cuts: Vec<Arc<Notify>> = shared
        .carried
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .filter(|c| !c.websocket)
        .map(|c| c.cut.clone())
        .collect();
    for c in cuts {
        c.notify_one();
    }
    actix_rt::time::sleep(down_for).await;
}

/// Carries one client connection to the private server until either side ends or a handler
/// cuts it.
async fn relay(shared: Arc<Shared>, mut client: TcpStream, inner: SocketAddr) {
    let Ok(mut upstream) = TcpStream::connect(inner).await else {
        return;
    };
    // A relay must not hold small writes back (Nagle against delayed ACKs adds ~40 ms to
    // every close after output and every first message).
    // Either socket refusing the option still works, only with Nagle.
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let Ok(key) = upstream.local_addr() else {
        return;
    };
    let cut = Arc::new(Notify::new());
    shared
        .carried
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(
            key,
            Carried {
                cut: cut.clone(),
                websocket: false,
            },
        );
    tokio::select! {
        biased;
        _ = cut.notified() => {}
        _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
    }
    shared
        .carried
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&key);
}
