//! The daemon calls a load run makes (daemon info, spawn, input, resize, kill, forget, list,
//! look up, attach), on `atc-client`, with the limits a load run needs. No wire type is declared here: answers
//! are the protocol's, and errors are the client's.
//!
//! The storm phase also needs what `atc-client` keeps to itself: an answer's `Retry-After`
//! header, and whether a request failed by timing out or by its connection breaking. Its spawns
//! and health probes go through [`DaemonApi::exchange`], a bare request on a pool of its own
//! that hands back the status, that header and the body, or the [`Fault`].

use std::time::Duration;

use actix_http::Method;
pub use atc_client::ClientError as ApiError;
use atc_client::{routes, ClientOptions, DaemonClient, Descriptor};
use atc_protocol::ErrorCode;
pub use atc_protocol::{SessionLimits, TermSize};

use super::rss::DaemonPid;

/// The attach WebSocket as `awc` hands it over.
pub type Socket = atc_client::WsConnection;

/// A session id as the daemon gave it.
pub use atc_protocol::SessionId;

/// Per-request limit. Generous because a spawn under load can queue behind hundreds of others;
/// phases bound the total with their own deadline anyway.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// What a spawn asks for.
#[derive(Debug, Clone, Copy)]
pub struct SpawnRequest<'a> {
    /// Agent id from the daemon's config (`shell` is built in).
    pub agent: &'a str,
    /// Absolute working directory on the daemon's machine.
    pub cwd: &'a str,
    /// Name carrying the run's prefix, so cleanup can find a session whose answer never arrived.
    pub name: &'a str,
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
    /// The spawn's `limits`, when the run asks for them (`--spawn-limits`).
    pub limits: Option<&'a SessionLimits>,
}

impl SpawnRequest<'_> {
    /// The `POST /v1/sessions` body.
    pub fn body(&self) -> serde_json::Value {
        let mut body = serde_json::json!({
            "agent": self.agent, "cwd": self.cwd, "name": self.name,
            "cols": self.cols, "rows": self.rows,
        });
        if let Some(limits) = self.limits {
            body["limits"] = serde_json::json!(limits);
        }
        body
    }
}

/// The daemon's answer to an [`DaemonApi::exchange`], whatever its status.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// HTTP status.
    pub status: u16,
    /// The `Retry-After` header, as sent.
    pub retry_after: Option<String>,
    /// The body, unparsed.
    pub body: bytes::Bytes,
}

/// Why an [`DaemonApi::exchange`] got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// No full answer within the request's time limit.
    TimedOut,
    /// The connection could not be made (refused, or the connect itself failed).
    Unreachable(String),
    /// The connection was made and then broke before the answer was complete: reset, closed
    /// early, or a malformed answer.
    Reset(String),
}

/// How long [`DaemonApi::exchange`] keeps an idle connection: well under the daemon's
/// keep-alive, as `atc-client` does.
const POOLED_IDLE: Duration = Duration::from_secs(4);
const _: () = assert!(POOLED_IDLE.as_secs() < atc_protocol::HTTP_KEEP_ALIVE.as_secs());

/// Largest answer body an [`DaemonApi::exchange`] reads: a descriptor or an error.
const EXCHANGE_BODY_LIMIT: usize = 1 << 20;

/// Whether the daemon said the session is already gone or already dead, which cleanup treats
/// as done rather than failed.
pub fn is_gone(e: &ApiError) -> bool {
    matches!(e, ApiError::Api(err) if err.status == 404
        || err.is(ErrorCode::NoSuchSession)
        || err.is(ErrorCode::SessionDead))
}

/// The daemon's HTTP API as the bench uses it.
pub struct DaemonApi {
    client: DaemonClient,
    /// The bare client of [`DaemonApi::exchange`], with a pool of its own.
    raw: awc::Client,
    url: String,
    token: String,
}

impl DaemonApi {
    /// A client for the daemon at `url` (e.g. `http://127.0.0.1:7767`) with its bearer token.
    /// Must be created inside an actix System: awc's connector lives on the current arbiter.
    pub fn new(url: &str, token: &str) -> DaemonApi {
        DaemonApi::with_act_as(url, token, None)
    }

    /// A client of its own (its own connection pools) for the same daemon and token, acting
    /// as `principal` through `X-Atc-As` when given, else as the token's owner: two of these
    /// differ in that header alone.
    pub fn sibling(&self, principal: Option<&str>) -> DaemonApi {
        DaemonApi::with_act_as(&self.url, &self.token, principal)
    }

    fn with_act_as(url: &str, token: &str, principal: Option<&str>) -> DaemonApi {
        // No connection cap in the client: the phases bound their own concurrency, and a
        // hidden client-side queue would show up as daemon latency.
        let options = ClientOptions {
            request_timeout: REQUEST_TIMEOUT,
            connection_limit: None,
            tls: None,
        };
        // Like the client's: no cap on connections, HTTP/1.1, and idle connections dropped
        // before the daemon's keep-alive drops them (else a request sent on one as the daemon
        // closes it fails, which the storm would count as a fault of the daemon). Its own
        // time limit is per exchange, so none is set here.
        let raw = awc::Client::builder()
            .connector(awc::Connector::new().limit(0).conn_keep_alive(POOLED_IDLE))
            .max_http_version(actix_http::Version::HTTP_11)
            .disable_timeout()
            .finish();
        let client = DaemonClient::with_options(url.to_string(), token.to_string(), options);
        DaemonApi {
            client: match principal {
                Some(p) => client.acting_as(p),
                None => client,
            },
            raw,
            url: url.trim_end_matches('/').to_string(),
            token: token.trim().to_string(),
        }
    }

    /// The daemon's URL, for the report.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// One request with the token, `body` as JSON when given, answered within `limit` (the
    /// body read included): the answer whatever its status, or why there was none.
    pub async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        limit: Duration,
    ) -> Result<Exchange, Fault> {
        use awc::error::{ConnectError, SendRequestError};
        let mut request = self
            .raw
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.token);
        if let Some(principal) = self.client.act_as() {
            request = request.insert_header((atc_client::ACT_AS_HEADER, principal));
        }
        let answer = async {
            let sent = match body {
                Some(json) => request.send_json(json).await,
                None => request.send().await,
            };
            let mut response = sent.map_err(|e| match e {
                SendRequestError::Timeout | SendRequestError::Connect(ConnectError::Timeout) => {
                    Fault::TimedOut
                }
                // awc's name for a connection that ended after the request went out and
                // before the answer's head came back: the daemon closed it, it was not refused.
                SendRequestError::Connect(ConnectError::Disconnected) => {
                    Fault::Reset("closed before the answer".into())
                }
                SendRequestError::Connect(e) => Fault::Unreachable(e.to_string()),
                other => Fault::Reset(other.to_string()),
            })?;
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let body = response
                .body()
                .limit(EXCHANGE_BODY_LIMIT)
                .await
                .map_err(|e| Fault::Reset(format!("reading the answer: {e}")))?;
            Ok(Exchange {
                status: response.status().as_u16(),
                retry_after,
                body,
            })
        };
        tokio::time::timeout(limit, answer)
            .await
            .unwrap_or(Err(Fault::TimedOut))
    }

    /// The daemon's pid from `GET /v1/daemon`, for reading its RSS.
    pub async fn daemon_pid(&self) -> Result<Option<DaemonPid>, ApiError> {
        let info = self.client.get_json("/v1/daemon").await?;
        Ok(info
            .get("pid")
            .and_then(serde_json::Value::as_u64)
            .and_then(|pid| u32::try_from(pid).ok())
            .map(DaemonPid))
    }

    /// `GET /metrics`, as text.
    pub async fn metrics(&self) -> Result<String, ApiError> {
        self.client.get_text("/metrics").await
    }

    /// `POST /v1/sessions`: spawns a session and returns its id.
    pub async fn spawn(&self, req: &SpawnRequest<'_>) -> Result<SessionId, ApiError> {
        Ok(self.client.spawn(&req.body()).await?.id)
    }

    /// `POST /v1/sessions/{id}/input` with raw bytes, written to the harness whole.
    pub async fn input(&self, id: &SessionId, data: &[u8]) -> Result<(), ApiError> {
        let path = routes::session_action(id, "input");
        self.client.post_bytes(&path, data.to_vec()).await.map(drop)
    }

    /// `POST /v1/sessions/{id}/kill`.
    pub async fn kill(&self, id: &SessionId) -> Result<(), ApiError> {
        let path = routes::session_action(id, "kill");
        let body = serde_json::json!({});
        self.client.post_json(&path, &body).await.map(drop)
    }

    /// `DELETE /v1/sessions/{id}`.
    pub async fn forget(&self, id: &SessionId) -> Result<(), ApiError> {
        self.client.delete(&routes::session(id)).await.map(drop)
    }

    /// `GET /v1/sessions`.
    pub async fn list(&self) -> Result<Vec<Descriptor>, ApiError> {
        self.client.list_sessions().await
    }

    /// `GET /v1/sessions`, the body unparsed (what the daemon sent, without this side's
    /// parsing in a timing).
    pub async fn list_body(&self) -> Result<bytes::Bytes, ApiError> {
        self.client.get_bytes(routes::SESSIONS).await
    }

    /// `GET /v1/sessions/{id}`, the body unparsed.
    pub async fn session_body(&self, id: &SessionId) -> Result<bytes::Bytes, ApiError> {
        self.client.get_bytes(&routes::session(id)).await
    }

    /// `POST /v1/sessions/{id}/resize`.
    pub async fn resize(&self, id: &SessionId, size: TermSize) -> Result<(), ApiError> {
        let path = routes::session_action(id, "resize");
        let body = serde_json::json!({"cols": size.cols, "rows": size.rows});
        self.client.post_json(&path, &body).await.map(drop)
    }

    /// Opens the attach WebSocket; the caller reads the `attached` frame.
    pub async fn attach(&self, id: &SessionId, size: TermSize) -> Result<Socket, ApiError> {
        let path = routes::attach(id, size.cols, size.rows);
        self.client.ws_connect(&path).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gone_means_unknown_or_dead_and_nothing_else() {
        let gone = |status, body: &[u8]| {
            is_gone(&ApiError::Api(atc_client::ApiError::from_response(
                status, body,
            )))
        };
        assert!(gone(
            404,
            br#"{"error":{"code":"no_such_session","message":"no session x","data":{}}}"#
        ));
        assert!(gone(
            409,
            br#"{"error":{"code":"session_dead","message":"dead","data":{}}}"#
        ));
        assert!(!gone(502, b"<html>"));
        assert!(!gone(
            409,
            br#"{"error":{"code":"idempotency_conflict","message":"x","data":{}}}"#
        ));
    }

    #[test]
    fn spawn_body_is_camel_case() {
        let body = SpawnRequest {
            agent: "cat",
            cwd: "/tmp",
            name: "bench-1-spawn-0",
            cols: 80,
            rows: 24,
            limits: None,
        }
        .body();
        assert_eq!(body["agent"], "cat");
        assert_eq!(body["cols"], 80);
        assert!(body.get("limits").is_none(), "no limits unless asked");
    }

    #[test]
    fn limits_go_into_the_spawn_body_by_their_wire_names() {
        let limits = SessionLimits {
            memory_mib: Some(512),
            pids: None,
            cpu_percent: Some(100),
        };
        let body = SpawnRequest {
            agent: "cat",
            cwd: "/tmp",
            name: "n",
            cols: 80,
            rows: 24,
            limits: Some(&limits),
        }
        .body();
        assert_eq!(
            body["limits"],
            serde_json::json!({"memoryMiB": 512, "cpuPercent": 100})
        );
    }
}
