//! The daemon calls a load run makes (daemon info, spawn, input, kill, forget, list, attach),
//! on `atc-client`, with the limits a load run needs. No wire type is declared here: answers
//! are the protocol's, and errors are the client's.

use std::time::Duration;

pub use atc_client::ClientError as ApiError;
use atc_client::{routes, ClientOptions, DaemonClient, Descriptor};
use atc_protocol::ErrorCode;
pub use atc_protocol::TermSize;

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
}

impl SpawnRequest<'_> {
    /// The `POST /v1/sessions` body.
    fn body(&self) -> serde_json::Value {
        serde_json::json!({
            "agent": self.agent, "cwd": self.cwd, "name": self.name,
            "cols": self.cols, "rows": self.rows,
        })
    }
}

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
}

impl DaemonApi {
    /// A client for the daemon at `url` (e.g. `http://127.0.0.1:7767`) with its bearer token.
    /// Must be created inside an actix System: awc's connector lives on the current arbiter.
    pub fn new(url: &str, token: &str) -> DaemonApi {
        // No connection cap in the client: the phases bound their own concurrency, and a
        // hidden client-side queue would show up as daemon latency.
        let options = ClientOptions {
            request_timeout: REQUEST_TIMEOUT,
            connection_limit: None,
        };
        DaemonApi {
            client: DaemonClient::with_options(url.to_string(), token.to_string(), options),
        }
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
        }
        .body();
        assert_eq!(body["agent"], "cat");
        assert_eq!(body["cols"], 80);
    }
}
