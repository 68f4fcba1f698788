//! The events socket: `GET /v1/events`. A snapshot of `session.added` frames, then every
//! fleet event as JSON text. Anything the client sends is ignored except pings, close and
//! protocol violations (closed with their code, as on the attach socket). A subscriber that
//! falls a queue behind is disconnected and reconnects for a fresh snapshot.

use std::time::Instant;

use actix::prelude::*;
use actix_http::ws::CloseCode;
use actix_web::{web, HttpRequest, HttpResponse};

use super::conn_socket::ConnSocket;
use super::keep_alive::{keep_alive, SocketPeer};
use super::tokens::{drop_when_revoked, Tokens};
use super::ws_transport::{Hangup, Inbound, InboundError, InboundMessages, OutboundStream};
use super::{auth, next_client_id, AppState};
use crate::config::Timings;
use crate::protocol::RequestError;
use crate::server::error::Error;
use crate::sessions::client_queue::{client_queue, ClientQueue, Outgoing};
use crate::sessions::manager::SessionManager;
use crate::sessions::messages::{ClientId, Subscribe, Unsubscribe};

/// Upgrades the request and subscribes it.
pub async fn events(
    req: HttpRequest,
    caller: super::caller::Caller,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    auth::check_origin(&req, &state.allowed_origins)?;
    let mut response = actix_web_actors::ws::handshake(&req)
        .map_err(|e| RequestError::NotUpgrade(e.to_string()))?;
    let client = next_client_id();
    let (queue, rx) = client_queue(state.limits.queue_bytes);
    state
        .manager()?
        .send(Subscribe {
            client,
            queue: queue.clone(),
            reach: caller.reach,
        })
        .await
        .map_err(|_| Error::Internal)?;
    // Events never desync: an overflowing subscriber is closed instead.
    let (outbound, hangup) =
        OutboundStream::new(rx, req.conn_data::<ConnSocket>().cloned(), Box::new(|| {}));
    EventsClient {
        client,
        manager: state.manager()?.clone(),
        queue,
        hangup,
        last_heard: Instant::now(),
        timings: state.timings.clone(),
        payload: Some(InboundMessages::new(payload, 64 * 1024)),
        tokens: state.tokens.clone(),
        // The auth middleware let this request through with a token (or its ticket).
        token: auth::Admitted::of(&req),
    }
    .start();
    Ok(response.streaming(outbound))
}

struct EventsClient {
    client: ClientId,
    manager: Addr<SessionManager>,
    queue: ClientQueue,
    hangup: Hangup,
    last_heard: Instant,
    timings: Timings,
    payload: Option<InboundMessages<web::Payload>>,
    /// The accepted tokens, watched so the socket closes when its own is rotated out.
    tokens: Tokens,
    /// The token this connection opened with.
    token: String,
}

impl SocketPeer for EventsClient {
    fn last_heard(&self) -> Instant {
        self.last_heard
    }

    fn queue(&self) -> &ClientQueue {
        &self.queue
    }
}

impl Actor for EventsClient {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        if let Some(payload) = self.payload.take() {
            ctx.add_stream(payload);
        }
        keep_alive(ctx, &self.timings);
        // Events frames are fleet events only; a subscriber learns of the revocation from the
        // close and reconnects with the current token.
        let token = std::mem::take(&mut self.token);
        drop_when_revoked(ctx, &self.tokens, token, self.client, None);
    }

    fn stopping(&mut self, _: &mut Self::Context) -> Running {
        self.manager.do_send(Unsubscribe {
            client: self.client,
        });
        Running::Stop
    }
}

impl StreamHandler<Result<Inbound, InboundError>> for EventsClient {
    fn handle(&mut self, item: Result<Inbound, InboundError>, ctx: &mut Self::Context) {
        self.last_heard = Instant::now();
        match item {
            Ok(Inbound::Ping(p)) => self.queue.push(Outgoing::Pong(p)),
            Ok(Inbound::Close) => {
                self.hangup.hang_up(CloseCode::Normal);
                ctx.stop();
            }
            Err(InboundError::Violation(v)) => {
                tracing::warn!(client = self.client.0, error = %v, "events socket protocol error");
                self.hangup.hang_up(v.close_code());
                ctx.stop();
            }
            Err(e @ InboundError::Failed(_)) => {
                tracing::debug!(client = self.client.0, error = %e, "events socket ended");
                self.queue.push(Outgoing::Close);
                ctx.stop();
            }
            Ok(Inbound::Binary(_) | Inbound::Text(_) | Inbound::Pong) => {}
        }
    }

    fn finished(&mut self, ctx: &mut Self::Context) {
        ctx.stop();
    }
}
