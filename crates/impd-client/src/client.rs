//! [`ImpdClient`]: one impd, reached over HTTP for its oRPC procedures and over WebSocket for
//! `/exec` and `/tunnel`. It holds one awc client (so connections are pooled) and is cheap to
//! clone; like awc it lives on the arbiter that made it.
//!
//! Every request reads the token anew (rotation, spec §2) and carries it only in the
//! `Authorization` header. Transport failures and timeouts become `UNREACHABLE`, any 401
//! becomes `UNAUTHORIZED`, and everything else is impd's own error code.

use std::time::Duration;

use serde_json::{json, Value};

use super::envelope::{decode_response, procedure_path, request_body};
use super::error::{ImpPortError, ImpdCode};
use super::token::TokenSource;
use super::types::{CreateImp, Imp, Lease, SystemInfo};
use super::ws_link::WsFramed;

/// How long an idle pooled connection to impd may be reused. The protocol does not say how
/// long impd keeps one; the simulator (actix-web's default) closes it after 5 s, and awc's
/// default of 15 s would write requests onto connections impd is closing, which fail with
/// "connector has been disconnected". Reconnecting after 4 s idle costs one handshake.
const POOLED_IDLE: Duration = Duration::from_secs(4);

/// How long the client waits. Defaults follow impd's client: 10 s from dial to an open socket
/// (spec §14); calls get longer because `imps.create` and `leases.acquire` boot an imp before
/// they answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImpdTimeouts {
    /// From dialing to an upgraded `/exec` or `/tunnel` socket, and to a connected RPC.
    pub open: Duration,
    /// From sending an RPC to its whole answer.
    pub call: Duration,
}

impl Default for ImpdTimeouts {
    fn default() -> Self {
        ImpdTimeouts {
            open: Duration::from_secs(10),
            call: Duration::from_secs(180),
        }
    }
}

/// Largest RPC answer read; impd's answers are a few KiB, this only bounds a broken peer.
const MAX_ANSWER: usize = 16 * 1024 * 1024;

/// Largest WebSocket frame accepted from impd. Its replay frames reach 256 KiB; awc's default
/// (64 KiB) would refuse them.
const MAX_FRAME: usize = 16 * 1024 * 1024;

/// A client of one impd.
#[derive(Clone)]
pub struct ImpdClient {
    /// The API base without a trailing slash; a path prefix is kept.
    base: String,
    /// The same base with `ws:`/`wss:`.
    ws_base: String,
    token: TokenSource,
    timeouts: ImpdTimeouts,
    http: awc::Client,
}

impl std::fmt::Debug for ImpdClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImpdClient")
            .field("base", &self.base)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl ImpdClient {
    /// A client for the impd at `base_url` (`http://host:port[/prefix]`) with default
    /// timeouts. Nothing is contacted until the first call.
    pub fn new(base_url: &str, token: TokenSource) -> ImpdClient {
        ImpdClient::with_timeouts(base_url, token, ImpdTimeouts::default())
    }

    /// Like [`ImpdClient::new`] with chosen timeouts (tests use short ones).
    pub fn with_timeouts(base_url: &str, token: TokenSource, timeouts: ImpdTimeouts) -> ImpdClient {
        let base = base_url.trim_end_matches('/').to_string();
        let ws_base = if let Some(rest) = base.strip_prefix("https://") {
            format!("wss://{rest}")
        } else if let Some(rest) = base.strip_prefix("http://") {
            format!("ws://{rest}")
        } else {
            base.clone()
        };
        let http = awc::Client::builder()
            .connector(
                awc::Connector::new()
                    .connector(no_delay_connector())
                    .timeout(timeouts.open)
                    .conn_keep_alive(POOLED_IDLE),
            )
            .timeout(timeouts.call)
            .max_http_version(awc::http::Version::HTTP_11)
            .finish();
        ImpdClient {
            base,
            ws_base,
            token,
            timeouts,
            http,
        }
    }

    /// The timeouts in use.
    pub fn timeouts(&self) -> ImpdTimeouts {
        self.timeouts
    }

    /// The base URL as given (without a trailing slash).
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Calls procedure `group.name` with `input` (`Value::Null` for none) and returns its
    /// output, `meta` ignored.
    pub async fn call(&self, procedure: &str, input: Value) -> Result<Value, ImpPortError> {
        let token = self.token.current()?;
        let url = format!("{}{}", self.base, procedure_path(procedure));
        let mut req = self
            .http
            .post(url)
            .insert_header(("Content-Type", "application/json"));
        if let Some(token) = &token {
            req = req.bearer_auth(token);
        }
        let answer = async {
            let mut resp = req
                .send_body(request_body(&input))
                .await
                .map_err(ImpPortError::unreachable)?;
            let status = resp.status().as_u16();
            let body = resp
                .body()
                .limit(MAX_ANSWER)
                .await
                .map_err(ImpPortError::unreachable)?;
            decode_response(status, &body)
        };
        match tokio::time::timeout(self.timeouts.call, answer).await {
            Ok(result) => result,
            Err(_) => Err(ImpPortError::unreachable(format!(
                "{procedure} got no answer within {:?}",
                self.timeouts.call
            ))),
        }
    }

    /// `system.info`: impd's version and the features a client must check.
    pub async fn system_info(&self) -> Result<SystemInfo, ImpPortError> {
        let output = self.call("system.info", Value::Null).await?;
        Ok(SystemInfo::from_output(&output))
    }

    /// `imps.get`; never wakes the imp. `Ok(None)` when impd says `NOT_FOUND`.
    pub async fn imps_get(&self, name: &str) -> Result<Option<Imp>, ImpPortError> {
        match self.call("imps.get", json!({ "name": name })).await {
            Ok(output) => parse(output).map(Some),
            Err(e) if e.is(ImpdCode::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `imps.create`: boots the imp and answers once it runs.
    pub async fn imps_create(&self, req: CreateImp) -> Result<Imp, ImpPortError> {
        let input = serde_json::to_value(&req)
            .map_err(|e| ImpPortError::bad_message(format!("imps.create input: {e}")))?;
        parse(self.call("imps.create", input).await?)
    }

    /// `imps.sleep`: `LEASED` while someone's lease lives unless `force` (which ends them).
    pub async fn imps_sleep(&self, name: &str, force: bool) -> Result<Imp, ImpPortError> {
        let input = if force {
            json!({ "name": name, "force": true })
        } else {
            json!({ "name": name })
        };
        parse(self.call("imps.sleep", input).await?)
    }

    /// `imps.wake`: from memory, or a cold boot of a stopped imp.
    pub async fn imps_wake(&self, name: &str) -> Result<Imp, ImpPortError> {
        parse(self.call("imps.wake", json!({ "name": name })).await?)
    }

    /// `imps.destroy`. A `NOT_FOUND` stays an error; the caller decides it counts as done.
    pub async fn imps_destroy(&self, name: &str) -> Result<(), ImpPortError> {
        self.call("imps.destroy", json!({ "name": name })).await?;
        Ok(())
    }

    /// `leases.acquire`: wakes or boots the imp, then creates or extends our lease.
    pub async fn leases_acquire(
        &self,
        name: &str,
        label: &str,
        ttl_seconds: u32,
    ) -> Result<Lease, ImpPortError> {
        let input = json!({ "name": name, "label": label, "ttlSeconds": ttl_seconds });
        parse(self.call("leases.acquire", input).await?)
    }

    /// `leases.renew`: `LEASE_NOT_HELD` once the lease expired or someone ended it.
    pub async fn leases_renew(
        &self,
        name: &str,
        label: &str,
        ttl_seconds: u32,
    ) -> Result<Lease, ImpPortError> {
        let input = json!({ "name": name, "label": label, "ttlSeconds": ttl_seconds });
        parse(self.call("leases.renew", input).await?)
    }

    /// `leases.release`: whether a lease of ours was there to release.
    pub async fn leases_release(&self, name: &str, label: &str) -> Result<bool, ImpPortError> {
        let output = self
            .call("leases.release", json!({ "name": name, "label": label }))
            .await?;
        output["released"].as_bool().ok_or_else(|| {
            ImpPortError::bad_message("leases.release answered without a `released` flag")
        })
    }

    /// Opens a WebSocket at `path` (`/exec`, `/tunnel`) with the bearer header, within the
    /// open timeout. A 401 refusal is `UNAUTHORIZED` (awc reads the status, so spec §2's probe
    /// is not needed); another refusal is `UPGRADE_REFUSED`; anything else `UNREACHABLE`.
    pub(crate) async fn open_socket(&self, path: &str) -> Result<WsFramed, ImpPortError> {
        let token = self.token.current()?;
        let mut req = self
            .http
            .ws(format!("{}{path}", self.ws_base))
            .max_frame_size(MAX_FRAME);
        if let Some(token) = &token {
            req = req.bearer_auth(token);
        }
        match tokio::time::timeout(self.timeouts.open, req.connect()).await {
            Err(_) => Err(ImpPortError::unreachable(format!(
                "{path} did not open within {:?}",
                self.timeouts.open
            ))),
            Ok(Ok((_, framed))) => Ok(framed),
            Ok(Err(awc::error::WsClientError::InvalidResponseStatus(status))) => {
                let status = status.as_u16();
                let err = if status == 401 {
                    ImpPortError::new(
                        ImpdCode::Unauthorized,
                        format!("impd refused the token on {path}"),
                    )
                } else {
                    ImpPortError::new(
                        ImpdCode::UpgradeRefused,
                        format!("impd refused to open {path} (HTTP {status})"),
                    )
                };
                Err(err.with_status(status))
            }
            Ok(Err(e)) => Err(ImpPortError::unreachable(e)),
        }
    }
}

/// Parses a procedure's output into its type; a mismatch is a bad message.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(output: Value) -> Result<T, ImpPortError> {
    serde_json::from_value(output).map_err(|e| {
        ImpPortError::bad_message(format!(
            "impd answered with an unexpected shape for {}: {e}",
            std::any::type_name::<T>()
                .rsplit("::")
                .next()
                .unwrap_or("a value")
        ))
    })
}

/// awc's TCP connector with `TCP_NODELAY` set on every connection: a keystroke or a resize
/// is a small write, and Nagle would hold the next one back until impd acknowledged the last
/// (up to a delayed ACK, ~40 ms).
fn no_delay_connector() -> impl actix_service::Service<
    actix_tls::connect::ConnectInfo<awc::http::Uri>,
    Response = actix_tls::connect::Connection<awc::http::Uri, actix_rt::net::TcpStream>,
    Error = actix_tls::connect::ConnectError,
> + Clone {
    use actix_service::ServiceExt;
    actix_tls::connect::Connector::new(actix_tls::connect::Resolver::default())
        .service()
        .map(
            |conn: actix_tls::connect::Connection<awc::http::Uri, actix_rt::net::TcpStream>| {
                // A socket that refuses the option still works, only with Nagle.
                let _ = conn.io_ref().set_nodelay(true);
                conn
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_keeps_its_prefix_and_maps_the_scheme() {
        let c = ImpdClient::new("http://impd:7070/api/", TokenSource::None);
        assert_eq!(c.base, "http://impd:7070/api");
        assert_eq!(c.ws_base, "ws://impd:7070/api");
        let s = ImpdClient::new("https://impd.example", TokenSource::None);
        assert_eq!(s.ws_base, "wss://impd.example");
    }
}
