//! The attach socket: `GET /v1/sessions/{id}/attach`. One [`AttachClient`] actor per
//! connection decodes what the client sends and forwards it to the session; what the session
//! sends comes out of the client's bounded queue through the response body. The actor is kept
//! thin (decode, forward) so a move to another WebSocket crate stays inside `server/`.

use std::time::Instant;

use actix::prelude::*;
use actix_http::ws::CloseCode;
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use serde::Deserialize;

use super::caller::Caller;
use super::conn_socket::ConnSocket;
use super::keep_alive::{keep_alive, SocketPeer};
use super::tokens::{drop_when_revoked, Tokens};
use super::ws_transport::{Hangup, Inbound, InboundError, InboundMessages, OutboundStream};
use super::{auth, lookup, next_client_id, AppState};
use crate::config::Timings;
use crate::protocol::params::Params;
use crate::protocol::strict_json::{self, StrictJsonError};
use crate::protocol::RequestError;
use crate::server::auth::AuthError;
use crate::server::error::Error;
use crate::sessions::client_queue::{client_queue, ClientQueue, Outgoing};
use crate::sessions::input_port::InputPort;
use crate::sessions::messages::{
    Attach, AttachMode, ClientId, ClientResized, Detach, Input, ResumeFrom,
};
use crate::sessions::session::Session;
use crate::sessions::session_error::SessionError;

use atc_protocol::{TermSize, DIM_RANGE};

/// Upgrades the request and attaches the new client to the session.
pub async fn attach(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    query: web::Query<Vec<(String, String)>>,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    auth::check_origin(&req, &state.allowed_origins)?;
    let params = Params::from_query(query.into_inner());
    let size = match (params.opt_dim("cols")?, params.opt_dim("rows")?) {
        (Some(cols), Some(rows)) => Some(TermSize { cols, rows }),
        (None, None) => None,
        (None, Some(_)) => {
            return Err(RequestError::Unpaired {
                field: "cols",
                with: "rows",
            }
            .into())
        }
        (Some(_), None) => {
            return Err(RequestError::Unpaired {
                field: "rows",
                with: "cols",
            }
            .into())
        }
    };
    let resume = match (params.opt_str("stream"), params.opt_u64("from")?) {
        (Some(stream), Some(from)) => Some(ResumeFrom {
            stream: stream.to_string(),
            from,
        }),
        _ => None,
    };
    let mode = attach_mode(params.opt_str("mode"))?;
    let found = lookup(&state, &caller, &path).await?;
    // The session answers the refusal chain and `session_dead` from its `Attach` handler.
    let mut response = actix_web_actors::ws::handshake(&req)
        .map_err(|e| RequestError::NotUpgrade(e.to_string()))?;
    let client = next_client_id();
    let (queue, rx) = client_queue(state.limits.queue_bytes);
    let input = found
        .addr
        .send(Attach {
            client,
            queue: queue.clone(),
            size,
            mode,
            resume,
            reach: caller.reach.clone(),
        })
        .await
        .map_err(|_| SessionError::Dead {
            id: found.descriptor.id,
        })??;
    let session = found.addr.clone();
    let on_drained = Box::new(move || {
        session.do_send(crate::sessions::messages::ClientDrained { client });
    });
    let (outbound, hangup) =
        OutboundStream::new(rx, req.conn_data::<ConnSocket>().cloned(), on_drained);
    AttachClient {
        client,
        mode,
        session: found.addr,
        input,
        queue,
        hangup,
        last_heard: Instant::now(),
        timings: state.timings.clone(),
        payload: Some(InboundMessages::new(payload, state.limits.body_cap_bytes)),
        tokens: state.tokens.clone(),
        // The auth middleware let this request through with a token (or its ticket).
        token: auth::Admitted::of(&req),
    }
    .start();
    Ok(response.streaming(outbound))
}

/// `?mode=`: absent is an interactive attach, `watch` a read-only one; anything else is a
/// mistake worth telling the client about rather than attaching it with more rights than meant.
fn attach_mode(given: Option<&str>) -> Result<AttachMode, RequestError> {
    AttachMode::from_query(given).ok_or(RequestError::OutOfRange {
        field: "mode",
        range: "\"watch\" (or absent, to type into the session)",
    })
}

/// One attached client connection.
struct AttachClient {
    client: ClientId,
    /// A watcher's input is refused here, before it reaches the session.
    mode: AttachMode,
    session: Addr<Session>,
    /// Where the session gave one: typing goes straight to its PTY, not through `session`.
    input: Option<InputPort>,
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

#[derive(Deserialize)]
struct ControlFrame {
    #[serde(rename = "type")]
    kind: String,
    cols: Option<u64>,
    rows: Option<u64>,
}

/// Decodes a client's text frame on the attach socket: the one control frame it takes,
/// `{"type":"resize","cols":C,"rows":R}`, becomes the size asked for; anything else is the
/// error frame's cause. Public so the fuzz targets and property tests drive the very decoder
/// the socket uses.
pub fn control_frame(text: &[u8]) -> Result<TermSize, RequestError> {
    let value = strict_json::parse(text).map_err(|e| match e {
        StrictJsonError::DuplicateKey(field) => RequestError::DuplicateKey { field },
        StrictJsonError::Syntax(_) => RequestError::FrameNotJson,
    })?;
    let frame =
        serde_json::from_value::<ControlFrame>(value).map_err(|_| RequestError::FrameNotJson)?;
    if frame.kind != "resize" {
        return Err(RequestError::UnknownFrame(frame.kind));
    }
    let dim = |v: Option<u64>, name: &'static str| match v {
        Some(n) if DIM_RANGE.contains(&n) => Ok(n as u16),
        _ => Err(RequestError::OutOfRange {
            field: name,
            range: "an integer from 1 to 4096",
        }),
    };
    Ok(TermSize {
        cols: dim(frame.cols, "cols")?,
        rows: dim(frame.rows, "rows")?,
    })
}

impl AttachClient {
    fn refuse(&self, e: impl Into<Error>) {
        self.queue.push_text(e.into().attach_frame().to_text());
    }

    fn on_text(&mut self, text: &[u8]) {
        match control_frame(text) {
            // A watcher's size never counts (the session ignores it too); it is not an
            // error for a terminal to report its size, so it is dropped without a word.
            Ok(_) if self.mode == AttachMode::Watch => {}
            Ok(size) => self.session.do_send(ClientResized {
                client: self.client,
                size,
            }),
            Err(e) => self.refuse(e),
        }
    }

    fn on_binary(&mut self, bytes: Bytes, ctx: &mut Context<Self>) {
        if self.mode == AttachMode::Watch {
            return self.refuse(RequestError::WatchOnly);
        }
        if let Some(port) = &self.input {
            if let Err(e) = port.write(bytes) {
                self.refuse(e);
            }
            return;
        }
        // Wait for the write before reading the next frame: input stays in order and a child
        // that does not read its stdin slows this client down instead of filling memory.
        ctx.wait(
            self.session
                .send(Input(bytes))
                .into_actor(self)
                .map(|res, act, _| match res {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => act.refuse(e),
                    Err(_) => act.refuse(SessionError::Gone),
                }),
        );
    }
}

impl SocketPeer for AttachClient {
    fn last_heard(&self) -> Instant {
        self.last_heard
    }

    fn queue(&self) -> &ClientQueue {
        &self.queue
    }
}

impl Actor for AttachClient {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        if let Some(payload) = self.payload.take() {
            ctx.add_stream(payload);
        }
        keep_alive(ctx, &self.timings);
        let notice = Error::from(AuthError::Revoked).attach_frame().to_text();
        let token = std::mem::take(&mut self.token);
        drop_when_revoked(ctx, &self.tokens, token, self.client, Some(notice));
    }

    fn stopping(&mut self, _: &mut Self::Context) -> Running {
        // Every way this actor ends detaches the client, and nothing more.
        self.session.do_send(Detach {
            client: self.client,
        });
        Running::Stop
    }
}

impl StreamHandler<Result<Inbound, InboundError>> for AttachClient {
    fn handle(&mut self, item: Result<Inbound, InboundError>, ctx: &mut Self::Context) {
        self.last_heard = Instant::now();
        match item {
            Ok(Inbound::Binary(bytes)) => self.on_binary(bytes, ctx),
            Ok(Inbound::Text(text)) => self.on_text(&text),
            Ok(Inbound::Ping(p)) => self.queue.push(Outgoing::Pong(p)),
            Ok(Inbound::Pong) => {}
            Ok(Inbound::Close) => {
                self.hangup.hang_up(CloseCode::Normal);
                ctx.stop();
            }
            Err(InboundError::Violation(v)) => {
                tracing::warn!(client = self.client.0, error = %v, "attach socket protocol error");
                self.hangup.hang_up(v.close_code());
                ctx.stop();
            }
            Err(e @ InboundError::Failed(_)) => {
                // Almost always the connection ending under us (the body finished after an
                // exit, or the peer vanished): nobody is left to read a close code.
                tracing::debug!(client = self.client.0, error = %e, "attach socket ended");
                self.queue.push(Outgoing::Close);
                ctx.stop();
            }
        }
    }

    fn finished(&mut self, ctx: &mut Self::Context) {
        ctx.stop();
    }
}
