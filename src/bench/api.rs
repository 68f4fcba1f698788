//! The handful of daemon routes the bench calls, over `awc`, with answers parsed into the few
//! typed values the phases need.
//!
//! This is deliberately not a general client: it knows the routes of the HTTP contract that a
//! load run touches (daemon info, spawn, input, kill, forget, list, attach) and nothing else, so it
//! can live inside `bench/` without waiting for the CLI's own client module. Every answer from the
//! daemon is checked here; a refusal keeps the daemon's error code so callers can tell "already
//! gone" from a real failure.

use std::time::Duration;

use actix_codec::Framed;
use awc::http::StatusCode;
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::rss::DaemonPid;

/// The attach WebSocket as `awc` hands it over.
pub type Socket = Framed<awc::BoxedSocket, awc::ws::Codec>;

/// Per-request limit. Generous because a spawn under load can queue behind hundreds of others;
/// phases bound the total with their own deadline anyway.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Largest answer body read; a listing of thousands of sessions stays far below it.
const BODY_LIMIT: usize = 64 << 20;

/// Largest WebSocket frame accepted. awc's default (64 KiB) is below what a daemon may batch into
/// one output frame, and a frame over the limit would end the connection mid-measurement.
const MAX_FRAME: usize = 16 << 20;

/// A session id as the daemon gave it (a uuid); only ever used to build paths.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(transparent)]
pub struct SessionId(String);

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A session as listed: just what cleanup needs to find the bench's own sessions.
#[derive(Debug, Clone, Deserialize)]
pub struct SessionSummary {
    /// The session's id.
    pub id: SessionId,
    /// Its name; bench sessions carry the run's prefix.
    #[serde(default)]
    pub name: String,
}

/// What `GET /v1/daemon` tells the bench.
#[derive(Debug, Clone, Deserialize)]
pub struct DaemonInfo {
    /// The daemon's process id, for reading its RSS.
    pub pid: Option<u32>,
}

impl DaemonInfo {
    /// The pid as the RSS reader wants it.
    pub fn daemon_pid(&self) -> Option<DaemonPid> {
        self.pid.map(DaemonPid)
    }
}

/// Terminal size requested for a session or an attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermSize {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

/// A spawn request body (`POST /v1/sessions`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
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

/// Why a call did not give the expected answer.
#[derive(Debug, Error)]
pub enum ApiError {
    /// The request did not complete (connection refused, reset, timed out).
    #[error("{route}: could not reach the daemon: {cause}")]
    Transport {
        /// Method and path.
        route: String,
        /// The transport error, as text.
        cause: String,
    },
    /// The daemon answered with an error.
    #[error("{route}: HTTP {status} {code}: {message}")]
    Refused {
        /// Method and path.
        route: String,
        /// HTTP status.
        status: u16,
        /// The contract's error code (empty when the body had none).
        code: String,
        /// The daemon's message.
        message: String,
    },
    /// The answer could not be read as the contract describes.
    #[error("{route}: unreadable answer: {cause}")]
    BadAnswer {
        /// Method and path.
        route: String,
        /// What was wrong.
        cause: String,
    },
}

impl ApiError {
    /// Whether the daemon said the session is already gone or already dead, which cleanup treats
    /// as done rather than failed.
    pub fn is_gone(&self) -> bool {
        matches!(self, ApiError::Refused { status, code, .. }
            if *status == 404 || code == "no_such_session" || code == "session_dead")
    }
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Deserialize)]
struct ErrorDetail {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

#[derive(Deserialize)]
struct SessionEnvelope {
    session: SessionSummary,
}

#[derive(Deserialize)]
struct SessionList {
    sessions: Vec<SessionSummary>,
}

/// The daemon's HTTP API as the bench uses it. Cheap to clone (awc's client is shared).
#[derive(Clone)]
pub struct DaemonApi {
    client: awc::Client,
    /// `http://host:port`, without a trailing slash.
    base: String,
    token: String,
}

impl DaemonApi {
    /// A client for the daemon at `url` (e.g. `http://127.0.0.1:7767`) with its bearer token.
    /// Must be created inside an actix System: awc's connector lives on the current arbiter.
    pub fn new(url: &str, token: &str) -> DaemonApi {
        // No connection cap in the client (awc's default is 100): the phases bound their own
        // concurrency, and a hidden client-side queue would show up as daemon latency.
        let connector = awc::Connector::new().limit(0);
        let client = awc::Client::builder()
            .connector(connector)
            .timeout(REQUEST_TIMEOUT)
            .finish();
        DaemonApi {
            client,
            base: url.trim_end_matches('/').to_string(),
            token: token.trim().to_string(),
        }
    }

    /// `GET /v1/daemon`.
    pub async fn daemon_info(&self) -> Result<DaemonInfo, ApiError> {
        let path = "/v1/daemon";
        let req = self.client.get(self.url(path));
        self.call("GET", path, req, None).await
    }

    /// `POST /v1/sessions`: spawns a session and returns its id.
    pub async fn spawn(&self, body: &SpawnRequest<'_>) -> Result<SessionId, ApiError> {
        let path = "/v1/sessions";
        let json = serde_json::to_vec(body).map_err(|e| ApiError::BadAnswer {
            route: format!("POST {path}"),
            cause: e.to_string(),
        })?;
        let req = self
            .client
            .post(self.url(path))
            .content_type("application/json");
        let env: SessionEnvelope = self
            .call("POST", path, req, Some(Bytes::from(json)))
            .await?;
        Ok(env.session.id)
    }

    /// `POST /v1/sessions/{id}/input` with raw bytes, written to the harness whole.
    pub async fn input(&self, id: &SessionId, data: &[u8]) -> Result<(), ApiError> {
        let path = format!("/v1/sessions/{id}/input");
        let req = self
            .client
            .post(self.url(&path))
            .content_type("application/octet-stream");
        let _: serde_json::Value = self
            .call("POST", &path, req, Some(Bytes::copy_from_slice(data)))
            .await?;
        Ok(())
    }

    /// `POST /v1/sessions/{id}/kill`.
    pub async fn kill(&self, id: &SessionId) -> Result<(), ApiError> {
        let path = format!("/v1/sessions/{id}/kill");
        let req = self.client.post(self.url(&path));
        let _: serde_json::Value = self.call("POST", &path, req, Some(Bytes::new())).await?;
        Ok(())
    }

    /// `DELETE /v1/sessions/{id}`.
    pub async fn forget(&self, id: &SessionId) -> Result<(), ApiError> {
        let path = format!("/v1/sessions/{id}");
        let req = self.client.delete(self.url(&path));
        let _: serde_json::Value = self.call("DELETE", &path, req, None).await?;
        Ok(())
    }

    /// `GET /v1/sessions`.
    pub async fn list(&self) -> Result<Vec<SessionSummary>, ApiError> {
        let path = "/v1/sessions";
        let req = self.client.get(self.url(path));
        let list: SessionList = self.call("GET", path, req, None).await?;
        Ok(list.sessions)
    }

    /// Opens the attach WebSocket; the caller reads the `attached` frame.
    pub async fn attach(&self, id: &SessionId, size: TermSize) -> Result<Socket, ApiError> {
        let path = format!(
            "/v1/sessions/{id}/attach?cols={}&rows={}",
            size.cols, size.rows
        );
        let (_, socket) = self
            .client
            .ws(self.url(&path))
            .bearer_auth(&self.token)
            .max_frame_size(MAX_FRAME)
            .connect()
            .await
            .map_err(|e| ApiError::Transport {
                route: format!("GET {path} (WebSocket)"),
                cause: e.to_string(),
            })?;
        Ok(socket)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Sends one request with the token and parses a 2xx JSON answer into `T`; anything else
    /// becomes an [`ApiError`] carrying the daemon's code.
    async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        req: awc::ClientRequest,
        body: Option<Bytes>,
    ) -> Result<T, ApiError> {
        let route = || format!("{method} {path}");
        let req = req.bearer_auth(&self.token);
        let sent = match body {
            Some(b) => req.send_body(b).await,
            None => req.send().await,
        };
        let mut resp = sent.map_err(|e| ApiError::Transport {
            route: route(),
            cause: e.to_string(),
        })?;
        let status = resp.status();
        let bytes = resp
            .body()
            .limit(BODY_LIMIT)
            .await
            .map_err(|e| ApiError::Transport {
                route: route(),
                cause: e.to_string(),
            })?;
        if !status.is_success() {
            return Err(refusal(route(), status, &bytes));
        }
        // An empty 2xx body (204) reads as `null`, which the `Value` answers accept.
        let bytes = if bytes.is_empty() {
            Bytes::from_static(b"null")
        } else {
            bytes
        };
        serde_json::from_slice(&bytes).map_err(|e| ApiError::BadAnswer {
            route: route(),
            cause: e.to_string(),
        })
    }
}

/// Builds the error for a non-2xx answer, keeping the contract's code when the body has one.
fn refusal(route: String, status: StatusCode, body: &[u8]) -> ApiError {
    let (code, message) = match serde_json::from_slice::<ErrorBody>(body) {
        Ok(b) => (b.error.code, b.error.message),
        Err(_) => (
            String::new(),
            String::from_utf8_lossy(body).chars().take(200).collect(),
        ),
    };
    ApiError::Refused {
        route,
        status: status.as_u16(),
        code,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_keeps_the_contract_code() {
        let e = refusal(
            "DELETE /v1/sessions/x".into(),
            StatusCode::NOT_FOUND,
            br#"{"error":{"code":"no_such_session","message":"no session x","data":{}}}"#,
        );
        assert!(e.is_gone());
        assert!(e.to_string().contains("HTTP 404 no_such_session"));
        let e = refusal(
            "POST /v1/sessions".into(),
            StatusCode::BAD_GATEWAY,
            b"<html>",
        );
        assert!(!e.is_gone());
        assert!(e.to_string().contains("<html>"));
    }

    #[test]
    fn spawn_body_is_camel_case() {
        let body = SpawnRequest {
            agent: "cat",
            cwd: "/tmp",
            name: "bench-1-spawn-0",
            cols: 80,
            rows: 24,
        };
        let v = serde_json::to_value(&body).expect("serializable");
        assert_eq!(v["agent"], "cat");
        assert_eq!(v["cols"], 80);
    }
}
