//! The HTTP and WebSocket front: routes, the attach and events sockets, auth. Handlers only
//! translate requests into messages for the actors that own the state (zellij's `route.rs`).

mod attach;
pub mod auth;
pub mod caller;
mod conn_registry;
mod conn_socket;
pub mod error;
mod error_response;
mod events;
mod head_guard;
mod keep_alive;
pub mod metrics_http;
pub mod openapi;
mod page;
mod principal_routes;
pub mod reporter;
pub mod route_table;
mod routes;
mod spawn_limits;
mod spawn_route;
pub mod tickets;
pub mod tokens;
pub mod transport;
mod workspace_routes;
mod ws_header;
mod ws_transport;

// The decoders of what a client sends on the sockets, named here for the fuzz targets and
// property tests: the frames and messages of the WebSocket stream (which splits binary from
// text), and the attach socket's control frame.
pub use attach::control_frame;
pub use ws_header::Violation;
pub use ws_transport::{Inbound, InboundError, InboundMessages};

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use actix::Addr;
use actix_web::body::{BoxBody, EitherBody};
use actix_web::dev::{Server, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::{web, App, HttpMessage, ResponseError};
use tracing::Instrument;
use uuid::Uuid;

use crate::agents::AgentCatalog;
use crate::config::{ConfigProblem, Limits, Timings};
use crate::protocol::RequestError;
use crate::server::error::Error;
use crate::sessions::manager::SessionManager;
use crate::sessions::messages::{Found, Lookup};
use crate::sessions::session_error::SessionError;
use crate::store::StateStore;

/// What every handler can reach. Read-only; the state itself lives in actors.
#[derive(Clone)]
pub struct AppState {
    /// The supervisor; set once the worker that hosts it has started.
    pub manager: Option<Addr<SessionManager>>,
    /// The permission registry, started beside the manager.
    pub permissions: Option<Addr<crate::permissions::registry::PermissionRegistry>>,
    /// The idempotency ledger, started beside the manager.
    pub ledger: Option<Addr<crate::ledger::idempotency_ledger::IdempotencyLedger>>,
    /// For fleet and dirs reads.
    pub store: StateStore,
    /// Agents.
    pub catalog: Arc<AgentCatalog>,
    /// The bearer tokens accepted now (changed by a reload, see [`tokens::Tokens`]).
    pub tokens: tokens::Tokens,
    /// The live WebSocket tickets (`POST /v1/tickets`), shared by every worker.
    pub tickets: Arc<tickets::Tickets>,
    /// Stable daemon id.
    pub daemon_id: Uuid,
    /// Sizes.
    pub limits: Limits,
    /// Durations.
    pub timings: Timings,
    /// Extra allowed Origins.
    pub allowed_origins: Vec<String>,
    /// Where we listen.
    pub listen: SocketAddr,
    /// The state dir.
    pub state_dir: PathBuf,
    /// Problems found in the config file.
    pub config_problems: Vec<ConfigProblem>,
    /// Asks the daemon to stop (`POST /v1/daemon/quit`).
    pub quit: tokio::sync::mpsc::UnboundedSender<()>,
    /// Execution targets and the refusal chain.
    pub targets: Arc<crate::providers::targets::Targets>,
    /// The refusal chain (spec §4.4); routes ask it only for a spawn, sessions for the rest.
    pub refusal: crate::providers::refusal::Refusal,
    /// The provider of each target.
    pub providers: crate::providers::registry::Providers,
    /// What the reporter socket received.
    pub reporter: Arc<reporter::ReporterStats>,
    /// This daemon's metrics (`GET /metrics`).
    pub metrics: crate::metrics::Metrics,
    /// Config's limits on sessions' processes (see `spawn_limits`).
    pub session_limits: Arc<crate::config::session_limits::LimitsPolicy>,
    /// Spawns in flight, shared by every worker (`limits.spawnQueue`).
    pub spawn_queue: crate::sessions::admission::SpawnQueue,
    /// The configured principals (config is read once, at start).
    pub principals: Arc<crate::config::principals::Principals>,
    /// Where the principals' token files are, one named for each id (absolute).
    pub principals_dir: PathBuf,
    /// What each principal reaches (`caller.rs`), built from `principals` and the targets.
    pub reaches: Arc<caller::Reaches>,
}

static NEXT_CLIENT: AtomicU64 = AtomicU64::new(1);
static NEXT_REQUEST: AtomicU64 = AtomicU64::new(1);

/// The id a request is logged under and answered with in `X-Request-Id`.
fn next_request_id() -> String {
    format!("r{}", NEXT_REQUEST.fetch_add(1, Ordering::Relaxed))
}

/// A daemon-wide unique id for a socket connection.
pub fn next_client_id() -> crate::sessions::messages::ClientId {
    crate::sessions::messages::ClientId(NEXT_CLIENT.fetch_add(1, Ordering::Relaxed))
}

impl AppState {
    /// The supervisor.
    pub fn manager(&self) -> Result<&Addr<SessionManager>, Error> {
        self.manager.as_ref().ok_or(Error::Internal)
    }

    /// Whether forgetting `session` destroys its host (its target's provider can).
    pub fn destroys_host(&self, session: &atc_protocol::Descriptor) -> bool {
        self.refusal.destroys_host(&session.locator.target_id)
    }

    /// The idempotency ledger.
    pub fn ledger(
        &self,
    ) -> Result<&Addr<crate::ledger::idempotency_ledger::IdempotencyLedger>, Error> {
        self.ledger.as_ref().ok_or(Error::Internal)
    }
}

/// Finds a session by id or name among those `caller` reaches: one out of its reach answers
/// exactly as one that does not exist.
pub async fn lookup(state: &AppState, caller: &caller::Caller, key: &str) -> Result<Found, Error> {
    Ok(find(state, caller, key).await?)
}

/// [`lookup`], answering the session's own error (a spawn hands its parent's to the ledger).
pub async fn find(
    state: &AppState,
    caller: &caller::Caller,
    key: &str,
) -> Result<Found, SessionError> {
    let manager = state.manager.as_ref().ok_or(SessionError::Internal)?;
    let lookup = Lookup {
        key: key.to_string(),
        reach: caller.reach.clone(),
    };
    manager
        .send(lookup)
        .await
        .map_err(|_| SessionError::Internal)?
}

/// Builds and starts the HTTP server on an already-bound listener (so tests can bind port 0).
/// `make_state` runs once per worker, on the worker's thread.
///
/// This is what `actix_web::HttpServer` does for a TCP listener, with the same settings, except
/// that each connection's stream is wrapped in a [`head_guard::HeadGuard`], so malformed and
/// late heads get our error body instead of the dispatcher's empty answer (or none), and that
/// each connection is counted in one [`conn_registry::ConnRegistry`] shared by the workers,
/// as tokenless until a request on it shows the token. With `tls`, each connection's TLS
/// handshake comes first (see [`transport::accept`]), under the guard's own head deadline.
pub fn serve(
    listener: TcpListener,
    make_state: impl Fn() -> AppState + Send + Clone + 'static,
    workers: usize,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> std::io::Result<Server> {
    use actix_service::{fn_service, map_config, ServiceFactoryExt};
    let addr = listener.local_addr()?;
    let builder = actix_server::Server::build();
    let shutdown = builder.graceful_shutdown_signal();
    // Built by the first worker, from the limits its state carries (the state can only be
    // made on a worker's thread).
    let registry = Arc::new(std::sync::OnceLock::<Arc<conn_registry::ConnRegistry>>::new());
    let server = builder
        .workers(workers)
        .disable_signals()
        .shutdown_timeout(2)
        .listen("atc-http", listener, move || {
            let state = make_state();
            let registry = registry
                .get_or_init(|| {
                    conn_registry::ConnRegistry::new(conn_registry::Caps::for_this_process(
                        state.limits.tokenless_connections,
                    ))
                })
                .clone();
            let deadlines = head_guard::Deadlines {
                head: state.timings.head_read,
                // Twice a route's own bound, so a route reading the body answers 408 first.
                body: state.timings.body_read.saturating_mul(2),
            };
            let shutdown = shutdown.clone();
            let http = actix_http::HttpService::build()
                .graceful_shutdown_signal(move || {
                    let signal = shutdown.clone();
                    async move { signal.notified().await }
                })
                .keep_alive(atc_protocol::HTTP_KEEP_ALIVE)
                // Every head's deadline is the guard's (actix-http's covers only the first).
                .client_request_timeout(std::time::Duration::ZERO)
                .client_disconnect_timeout(std::time::Duration::from_secs(1))
                .local_addr(addr)
                .on_connect_ext(|io: &head_guard::HeadGuard<transport::Transport>, data| {
                    data.insert(io.socket().clone());
                    data.insert(io.mark());
                });
            // The guard judges heads with a codec built from the dispatcher's own settings.
            let config = actix_http::ServiceConfig::new(
                actix_http::KeepAlive::Timeout(atc_protocol::HTTP_KEEP_ALIVE),
                std::time::Duration::ZERO,
                std::time::Duration::from_secs(1),
                false,
                Some(addr),
            );
            // The host only feeds URL generation, which no route uses.
            let app = map_config(app(state), |_| actix_web::dev::AppConfig::default());
            let tls = tls.clone();
            fn_service(move |io: actix_rt::net::TcpStream| {
                let peer = io.peer_addr().ok();
                let socket = conn_socket::ConnSocket::new();
                // Admitted before the handshake: a connection still shaking hands counts
                // among the tokenless ones, as one that has sent nothing does.
                let registration = registry.admit(peer.map(|p| p.ip()), socket.clone());
                let (config, tls) = (config.clone(), tls.clone());
                async move {
                    let io = transport::accept(io, tls.as_ref(), deadlines.head)
                        .await
                        .map_err(|e| {
                            // A scanner or a client refusing the certificate: not ours to shout.
                            tracing::debug!(peer = ?peer, error = %e, "TLS handshake failed");
                            actix_http::error::DispatchError::Io(e)
                        })?;
                    let guarded =
                        head_guard::HeadGuard::new(io, config, deadlines, socket, registration);
                    Ok((guarded, actix_http::Protocol::Http1, peer))
                }
            })
            .and_then(http.finish(app))
        })?
        .run();
    Ok(server)
}

/// The application one worker serves.
fn app(
    state: AppState,
) -> App<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = ServiceResponse<EitherBody<BoxBody, BoxBody>>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    let state = web::Data::new(state);
    App::new()
        .app_data(state.clone())
        .app_data(
            web::QueryConfig::default()
                .error_handler(|e, _| Error::from(RequestError::BadQuery(e.to_string())).into()),
        )
        .configure(routes::configure)
        .configure(page::configure)
        .default_service(web::to(routes::not_found))
        .wrap_fn(move |req, srv| {
            use actix_web::dev::Service;
            let request_id = next_request_id();
            let span = tracing::info_span!("request", request_id = %request_id,
                    method = %req.method(), path = %req.path());
            let refused = if auth::is_public(req.path()) {
                None
            } else {
                match auth::check_token(&req, &state.tokens, &state.tickets).and_then(|admitted| {
                    let caller = acting(&req, &admitted, &state)?;
                    Ok((admitted, caller))
                }) {
                    Ok((admitted, caller)) => {
                        auth::admit(&req, admitted);
                        req.extensions_mut().insert(caller);
                        // The connection is the owner's from now on: never closed to make
                        // room for tokenless ones.
                        if let Some(mark) = req.conn_data::<conn_registry::ConnMark>() {
                            mark.token_shown();
                        }
                        None
                    }
                    Err(e) => Some(Error::from(e).error_response()),
                }
            }
            .or_else(|| declared_body_too_large(&req, state.limits.body_cap_bytes));
            if let Some(refusal) = refused {
                {
                    tracing::warn!(parent: &span, status = refusal.status().as_u16(),
                            "request refused");
                    let resp = req.into_response(refusal);
                    return Box::pin(async move {
                        Ok(with_request_id(resp.map_into_right_body(), &request_id))
                    })
                        as std::pin::Pin<Box<dyn std::future::Future<Output = _>>>;
                }
            }
            let fut = srv.call(req);
            Box::pin(
                async move {
                    let resp = fut.await?;
                    let status = resp.status();
                    if status.is_server_error() {
                        tracing::error!(status = status.as_u16(), "request failed");
                    } else {
                        tracing::debug!(status = status.as_u16(), "request done");
                    }
                    Ok(with_request_id(resp.map_into_left_body(), &request_id))
                }
                .instrument(span),
            )
        })
}

/// What an admitted request acts as; a principal on an owner-only route is refused.
fn acting(
    req: &actix_web::dev::ServiceRequest,
    admitted: &auth::Admitted,
    state: &AppState,
) -> Result<caller::Caller, auth::AuthError> {
    let acting_as = admitted.acting_as(req.headers())?;
    let caller = state.reaches.caller(admitted.who(), acting_as.as_deref())?;
    if !caller.is_owner() && route_table::is_owner_only(req.method(), req.path()) {
        return Err(auth::AuthError::OwnerOnly);
    }
    Ok(caller)
}

/// A body the request declares longer than the cap is refused from its head, before any of
/// it is read: waiting for it would only end in the client's upload or our request timeout.
/// actix-http closes the connection after this answer, since the body stays unread. (A
/// chunked body has no declared length; `routes::read_body` stops it at the cap.)
fn declared_body_too_large(
    req: &actix_web::dev::ServiceRequest,
    cap: usize,
) -> Option<actix_web::HttpResponse> {
    let declared = req
        .headers()
        .get(actix_web::http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()?;
    if declared <= cap as u64 {
        return None;
    }
    Some(Error::from(RequestError::DeclaredTooLarge { declared, cap }).error_response())
}

/// Adds what every answer carries: its `X-Request-Id`, and `X-Content-Type-Options:
/// nosniff`, so no browser takes a JSON error (which may quote what a client sent) for a page.
fn with_request_id<B>(
    mut resp: ServiceResponse<EitherBody<B, BoxBody>>,
    id: &str,
) -> ServiceResponse<EitherBody<B, BoxBody>> {
    let headers = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(id) {
        headers.insert(HeaderName::from_static("x-request-id"), v);
    }
    headers.insert(
        actix_web::http::header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}
