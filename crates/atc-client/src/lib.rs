//! The CLI's connection to a running daemon: [`DaemonClient`] finds it through the state dir
//! (`discovery`), sends authenticated HTTP/1.1 requests and opens WebSockets with `awc`, and
//! turns every failure into a [`ClientError`] whose message says what to do next.
//!
//! It knows the transport (paths in `routes`, the error envelope in `error`, the sockets'
//! frames in `frame_reader`) and the session lookup rule (`session`), not what any command does
//! with the answers; that is `cli/`'s job.
//! `awc` needs an actix system, so every async method here must run inside one
//! (`actix_rt::System::new().block_on(..)`).

pub mod discovery;
pub mod error;
pub mod frame_reader;
pub mod pinned_tls;
pub mod routes;
pub mod session;

use std::path::{Path, PathBuf};
use std::time::Duration;

use actix_codec::Framed;
use awc::error::{SendRequestError, WsClientError};
use awc::http::{Method, Version};
use awc::BoxedSocket;
use bytes::Bytes;
use serde_json::Value;

pub use atc_protocol;
pub use atc_protocol::Descriptor;
pub use discovery::default_state_dir;
pub use error::ApiCode;
pub use error::{ApiError, ClientError};
pub use frame_reader::{AttachReader, EventsReader, FrameReader, Incoming};
pub use session::SessionLabels;

/// What a request carries.
enum Body<'a> {
    Json(&'a Value),
    Bytes(Vec<u8>),
    Empty,
}

/// An open attach or events WebSocket, as `awc` hands it out: a `Stream` of
/// `awc::ws::Frame` and a `Sink` of `awc::ws::Message`.
pub type WsConnection = Framed<BoxedSocket, awc::ws::Codec>;

/// Largest response body read from the daemon. Session lists and screens are far below this;
/// the cap only keeps a confused peer from exhausting memory.
const BODY_LIMIT: usize = 16 * 1024 * 1024;

/// How long an idle pooled connection may be reused: a second under the daemon's keep-alive,
/// so the client always lets go of a connection first.
const POOLED_IDLE: Duration = Duration::from_secs(4);
const _: () = assert!(POOLED_IDLE.as_secs() < atc_protocol::HTTP_KEEP_ALIVE.as_secs());

/// Largest single WebSocket frame accepted. The repaint prelude after attach is sent as one or
/// a few frames and can exceed awc's 64 KiB default on a large screen.
const WS_MAX_FRAME: usize = 16 * 1024 * 1024;

/// Bound on one request/response exchange. Everything the CLI asks returns promptly (kill is
/// answered before the process is gone), so hitting this means the daemon is wedged.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The header by which a request with the owner's token acts as a principal (spec §2.5): it
/// then reaches only that principal's granted targets. See [`DaemonClient::acting_as`].
pub use atc_protocol::ACT_AS_HEADER;

/// How a [`DaemonClient`] bounds its requests.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Bound on one request/response exchange.
    pub request_timeout: Duration,
    /// Most connections open at once (`None`: no cap, for a caller that bounds its own
    /// concurrency and must not see a hidden client-side queue as daemon latency).
    pub connection_limit: Option<usize>,
    /// For an HTTPS daemon: what its certificate must be (see [`pinned_tls`]).
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

impl Default for ClientOptions {
    /// The CLI's: everything it asks returns promptly, and awc's usual pool of 100.
    fn default() -> ClientOptions {
        ClientOptions {
            request_timeout: REQUEST_TIMEOUT,
            connection_limit: Some(100),
            tls: None,
        }
    }
}

/// A daemon found through a state dir, ready to take requests. Cheap to keep for the whole
/// command; it holds one `awc` connection pool and is not `Send` (awc is single-threaded).
pub struct DaemonClient {
    base_url: String,
    token: String,
    /// The principal every request and socket acts as ([`ACT_AS_HEADER`]); `None` acts as
    /// whoever the token belongs to.
    act_as: Option<String>,
    http: awc::Client,
}

impl DaemonClient {
    /// Finds the daemon whose files are in `state_dir` (default: [`default_state_dir`]).
    /// Only reads `daemon.json` and `token`; an unreachable address shows up on the first
    /// request as [`ClientError::Unreachable`], which says to start the daemon.
    pub fn discover(state_dir: Option<PathBuf>) -> Result<DaemonClient, ClientError> {
        let state_dir = match state_dir {
            Some(dir) => dir,
            None => default_state_dir()?,
        };
        Self::discover_in(&state_dir)
    }

    fn discover_in(state_dir: &Path) -> Result<DaemonClient, ClientError> {
        let found = discovery::read_state_dir(state_dir)?;
        let tls =
            match &found.tls_cert {
                Some(path) => Some(pinned_tls::pinned_config(path).map_err(|problem| {
                    ClientError::StateFile {
                        path: path.clone(),
                        problem: format!("the daemon's TLS certificate: {problem}"),
                    }
                })?),
                None => None,
            };
        let options = ClientOptions {
            tls,
            ..ClientOptions::default()
        };
        Ok(DaemonClient::with_options(
            found.base_url,
            found.token,
            options,
        ))
    }

    /// A client for a daemon whose address and token are already known (tests, in-process
    /// use). `base_url` is like `http://127.0.0.1:7767`, without `/v1`.
    pub fn new(base_url: String, token: String) -> DaemonClient {
        DaemonClient::with_options(base_url, token, ClientOptions::default())
    }

    /// [`DaemonClient::new`] with its limits chosen by the caller (the load tool's).
    pub fn with_options(base_url: String, token: String, options: ClientOptions) -> DaemonClient {
        // awc reads a limit of 0 as no cap. Its pool keeps an idle connection 15 s by default,
        // past the daemon's keep-alive: a request sent on one just as the daemon closed it
        // failed with "connector has been disconnected" (seen once in an `atc-bench` run).
        let connector = awc::Connector::new()
            .limit(options.connection_limit.unwrap_or(0))
            .conn_keep_alive(POOLED_IDLE);
        let builder = awc::Client::builder().timeout(options.request_timeout);
        // awc's `max_http_version` rebuilds the connector's TLS configuration, which would drop
        // the pinned one; that one offers HTTP/1.1 only already.
        let http = match options.tls {
            Some(tls) => builder.connector(connector.rustls_0_23(tls)).finish(),
            None => builder
                .connector(connector)
                .max_http_version(Version::HTTP_11)
                .finish(),
        };
        DaemonClient {
            base_url: base_url.trim_end_matches('/').to_string(),
            token: token.trim().to_string(),
            act_as: None,
            http,
        }
    }

    /// This client with every request and WebSocket acting as `principal`, through
    /// [`ACT_AS_HEADER`]: on the owner's token it sees only what that principal reaches (a
    /// session out of reach answers as a missing one), and owner-only routes refuse it.
    pub fn acting_as(mut self, principal: impl Into<String>) -> DaemonClient {
        self.act_as = Some(principal.into());
        self
    }

    /// The principal this client acts as, if it was given one ([`DaemonClient::acting_as`]).
    pub fn act_as(&self) -> Option<&str> {
        self.act_as.as_deref()
    }

    /// `GET path` and the body of its success, unparsed (a large listing the caller parses,
    /// or times without parsing).
    pub async fn get_bytes(&self, path: &str) -> Result<Bytes, ClientError> {
        self.exchange_raw(Method::GET, path, Body::Empty).await
    }

    /// The daemon's base URL, for messages.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `GET path` (e.g. `/v1/sessions`) and the JSON answer.
    pub async fn get_json(&self, path: &str) -> Result<Value, ClientError> {
        self.request(Method::GET, path, None).await
    }

    /// `GET path` and the answer as text (`/metrics`, which is OpenMetrics text, not JSON).
    pub async fn get_text(&self, path: &str) -> Result<String, ClientError> {
        let bytes = self.exchange_raw(Method::GET, path, Body::Empty).await?;
        String::from_utf8(bytes.to_vec()).map_err(|err| ClientError::BadResponse {
            cause: err.to_string(),
        })
    }

    /// `POST path` with a JSON body and the JSON answer.
    pub async fn post_json(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        self.request(Method::POST, path, Some(body)).await
    }

    /// `PATCH path` with a JSON body and the JSON answer.
    pub async fn patch_json(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        self.request(Method::PATCH, path, Some(body)).await
    }

    /// `POST path` with raw bytes (`application/octet-stream`) and the JSON answer.
    pub async fn post_bytes(&self, path: &str, bytes: Vec<u8>) -> Result<Value, ClientError> {
        self.exchange(Method::POST, path, Body::Bytes(bytes)).await
    }

    /// `POST /v1/sessions` with a spawn body; the new session.
    pub async fn spawn(&self, body: &Value) -> Result<Descriptor, ClientError> {
        session::parse_one(self.post_json(routes::SESSIONS, body).await?)
    }

    /// `POST path` without a body, waiting up to `timeout` for the answer instead of the
    /// usual bound: for calls that do long work before they answer (`POST /v1/fleet/restore`).
    pub async fn post_json_within(
        &self,
        path: &str,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let bytes = self
            .exchange_raw_within(Method::POST, path, Body::Empty, Some(timeout))
            .await?;
        if bytes.is_empty() {
            return Ok(Value::Object(serde_json::Map::new()));
        }
        serde_json::from_slice(&bytes).map_err(|err| ClientError::BadResponse {
            cause: err.to_string(),
        })
    }

    /// `DELETE path` and the JSON answer.
    pub async fn delete(&self, path: &str) -> Result<Value, ClientError> {
        self.request(Method::DELETE, path, None).await
    }

    /// One authenticated exchange. A success with an empty body reads as `{}`; a failure with
    /// the daemon's error envelope becomes [`ClientError::Api`] with its code and message.
    async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ClientError> {
        let body = match body {
            Some(json) => Body::Json(json),
            None => Body::Empty,
        };
        self.exchange(method, path, body).await
    }

    async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Body<'_>,
    ) -> Result<Value, ClientError> {
        let bytes = self.exchange_raw(method, path, body).await?;
        if bytes.is_empty() {
            return Ok(Value::Object(serde_json::Map::new()));
        }
        serde_json::from_slice(&bytes).map_err(|err| ClientError::BadResponse {
            cause: err.to_string(),
        })
    }

    /// One authenticated exchange and the body of its success, unparsed; a failure is
    /// [`ClientError::Api`] as in [`Self::exchange`].
    async fn exchange_raw(
        &self,
        method: Method,
        path: &str,
        body: Body<'_>,
    ) -> Result<Bytes, ClientError> {
        self.exchange_raw_within(method, path, body, None).await
    }

    /// [`Self::exchange_raw`] with its own bound (`None`: the client's).
    async fn exchange_raw_within(
        &self,
        method: Method,
        path: &str,
        body: Body<'_>,
        timeout: Option<Duration>,
    ) -> Result<Bytes, ClientError> {
        let url = format!("{}{path}", self.base_url);
        let mut request = self.http.request(method, &url).bearer_auth(&self.token);
        if let Some(principal) = &self.act_as {
            request = request.insert_header((ACT_AS_HEADER, principal.as_str()));
        }
        if let Some(timeout) = timeout {
            request = request.timeout(timeout);
        }
        let sent = match body {
            Body::Json(json) => request.send_json(json).await,
            Body::Bytes(bytes) => {
                request
                    .content_type("application/octet-stream")
                    .send_body(bytes)
                    .await
            }
            Body::Empty => request.send().await,
        };
        let mut response = sent.map_err(|err| self.send_error(err))?;
        let status = response.status();
        let bytes =
            response
                .body()
                .limit(BODY_LIMIT)
                .await
                .map_err(|err| ClientError::Transport {
                    url: self.base_url.clone(),
                    cause: format!("reading the response to {path}: {err}"),
                })?;
        if !status.is_success() {
            return Err(ApiError::from_response(status.as_u16(), &bytes).into());
        }
        Ok(bytes)
    }

    /// Maps awc's send failure: failing to connect at all means the daemon is gone (the
    /// message says to start it); anything after connecting is a transport failure.
    fn send_error(&self, err: SendRequestError) -> ClientError {
        match err {
            SendRequestError::Connect(cause) => ClientError::Unreachable {
                url: self.base_url.clone(),
                cause: cause.to_string(),
            },
            other => ClientError::Transport {
                url: self.base_url.clone(),
                cause: other.to_string(),
            },
        }
    }

    /// Opens a WebSocket to `path_and_query` (e.g. `routes::attach(..)`) with the bearer token
    /// in the `Authorization` header and no `Origin`, which the daemon accepts from
    /// non-browser clients. The caller must answer `Ping` frames and send `Close` when done.
    pub async fn ws_connect(&self, path_and_query: &str) -> Result<WsConnection, ClientError> {
        let url = format!("{}{path_and_query}", self.base_url);
        let mut ws = self.http.ws(url).bearer_auth(&self.token);
        if let Some(principal) = &self.act_as {
            ws = ws.set_header(ACT_AS_HEADER, principal.as_str());
        }
        let connected = ws.max_frame_size(WS_MAX_FRAME).connect().await;
        match connected {
            Ok((_response, framed)) => Ok(framed),
            Err(WsClientError::InvalidResponseStatus(status)) => Err(ClientError::UpgradeRefused {
                path: path_and_query
                    .split('?')
                    .next()
                    .unwrap_or(path_and_query)
                    .to_string(),
                status: status.as_u16(),
            }),
            Err(WsClientError::SendRequest(err)) => Err(self.send_error(err)),
            Err(other) => Err(ClientError::Transport {
                url: self.base_url.clone(),
                cause: format!("WebSocket handshake failed: {other}"),
            }),
        }
    }

    /// All sessions, parsed.
    pub async fn list_sessions(&self) -> Result<Vec<Descriptor>, ClientError> {
        // Straight from the bytes: at thousands of sessions, a JSON tree first costs more
        // than the daemon's whole answer.
        let body = self
            .exchange_raw(Method::GET, routes::SESSIONS, Body::Empty)
            .await?;
        session::parse_list_body(&body)
    }

    /// Finds a session by uuid, exact name, or a unique prefix of its uuid (the short id
    /// `atc ls` prints). Not finding it is an error that points at `atc ls`.
    pub async fn find_session(&self, id_or_name: &str) -> Result<Descriptor, ClientError> {
        if id_or_name.trim().is_empty() {
            return Err(ClientError::NoSessionGiven);
        }
        match self.get_json(&routes::session(id_or_name)).await {
            Ok(answer) => session::parse_one(answer),
            Err(ClientError::Api(err)) if err.is_no_such_session() || err.status == 404 => {
                let all = self.list_sessions().await?;
                match session::match_id_prefix(&all, id_or_name) {
                    session::PrefixMatch::One(found) => Ok(found.clone()),
                    session::PrefixMatch::None => Err(ClientError::NoSuchSession {
                        given: id_or_name.to_string(),
                    }),
                    session::PrefixMatch::Many(found) => Err(ClientError::AmbiguousSession {
                        given: id_or_name.to_string(),
                        ids: found.iter().map(|s| s.id.to_string()).collect(),
                    }),
                }
            }
            Err(err) => Err(err),
        }
    }

    /// The uuid of the session `id_or_name` names (see [`DaemonClient::find_session`]).
    pub async fn resolve_session(&self, id_or_name: &str) -> Result<String, ClientError> {
        Ok(self.find_session(id_or_name).await?.id.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Write as _};

    /// Answers one request on a loopback listener with `{}` and hands back its head.
    fn answer_once() -> (String, std::thread::JoinHandle<String>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
        let url = format!("http://{}", listener.local_addr().expect("bound"));
        let head = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("a connection");
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                conn.read_exact(&mut byte).expect("the request head");
                head.push(byte[0]);
            }
            conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
                .expect("the answer");
            String::from_utf8_lossy(&head).to_lowercase()
        });
        (url, head)
    }

    #[actix_rt::test]
    async fn a_client_acting_as_a_principal_names_it_on_every_request() {
        let (url, head) = answer_once();
        let client = DaemonClient::new(url, "t0ken".into()).acting_as("bench");
        assert_eq!(client.act_as(), Some("bench"));
        client.get_bytes(routes::SESSIONS).await.expect("answered");
        let head = head.join().expect("the listener");
        assert!(head.contains("\r\nx-atc-as: bench\r\n"), "{head}");
        assert!(head.contains("authorization: bearer t0ken"), "{head}");

        let (url, head) = answer_once();
        let owner = DaemonClient::new(url, "t0ken".into());
        assert_eq!(owner.act_as(), None);
        owner.get_json(routes::SESSIONS).await.expect("answered");
        let head = head.join().expect("the listener");
        assert!(
            !head.contains("x-atc-as"),
            "the owner acts as itself: {head}"
        );
    }
}
