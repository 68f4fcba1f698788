//! HTTP routes: which handler answers each entry of `route_table.rs`, and the handlers. Each
//! handler reads its body into its `atc-protocol` request type ([`body::read`]) and its query
//! through [`Params`], asks the actor that owns the state, and shapes the answer; no handler
//! keeps state of its own.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use futures_util::StreamExt;

use super::caller::Caller;
use super::route_table::{self, Endpoint, ScopedPath};
use super::workspace_routes;
use super::{lookup, AppState};
use crate::agents::AgentError;
use crate::permissions::registry::{ListPending, Respond};
use crate::protocol::body;
use crate::protocol::params::Params;
use crate::protocol::RequestError;
use crate::server::error::Error;
use crate::sessions::messages::*;
use atc_protocol::requests::{
    PermissionDecision, RequestBody, ResizeRequest, ReviveRequest, SubmitRequest, SuspendRequest,
    UpdateRequest,
};
use atc_protocol::responses::{
    AgentsListing, AuthEnvelope, DaemonInfo, Dirs, Empty, FleetEntry, FleetList, ForgetAnswer,
    ForgetConfirmation, Forgotten, Health, HealthStatus, KillAnswer, PermissionList, Restored,
    ResumeCommand, SessionEnvelope, SpawnDefaults, TargetEntry, Trail,
};
use atc_protocol::Descriptor;

/// Registers every route of the table, gathered as [`route_table::scopes`] says: one
/// resource per path, with a route per method, and one scope per dynamic prefix. A wrong
/// method on a known path answers [`not_found`] (`unknown_method`), as an unknown path does.
pub fn configure(cfg: &mut web::ServiceConfig) {
    for scope in route_table::scopes() {
        match scope.prefix {
            None => {
                for path in &scope.paths {
                    cfg.service(resource(path));
                }
            }
            Some(prefix) => {
                let mut s = web::scope(prefix).default_service(web::to(not_found));
                for path in &scope.paths {
                    s = s.service(resource(path));
                }
                cfg.service(s);
            }
        }
    }
}

fn resource(path: &ScopedPath) -> actix_web::Resource {
    path.routes.iter().fold(
        web::resource(path.rest).default_service(web::to(not_found)),
        |res, r| res.route(handler(r.endpoint).method(r.method.http())),
    )
}

/// The handler of each endpoint.
fn handler(endpoint: Endpoint) -> actix_web::Route {
    let r = web::route();
    match endpoint {
        Endpoint::Health => r.to(health),
        Endpoint::OpenApi => r.to(super::openapi::serve),
        Endpoint::Daemon => r.to(daemon),
        Endpoint::Quit => r.to(quit),
        Endpoint::Agents => r.to(agents),
        Endpoint::ListSessions => r.to(list),
        Endpoint::Spawn => r.to(super::spawn_route::spawn),
        Endpoint::GetSession => r.to(get),
        Endpoint::UpdateSession => r.to(update),
        Endpoint::Forget => r.to(forget),
        Endpoint::Input => r.to(input),
        Endpoint::Submit => r.to(submit),
        Endpoint::Resize => r.to(resize),
        Endpoint::Ack => r.to(ack),
        Endpoint::Screen => r.to(screen),
        Endpoint::Workspace => r.to(workspace_routes::status),
        Endpoint::Orphans => r.to(workspace_routes::orphans),
        Endpoint::Prune => r.to(workspace_routes::prune),
        Endpoint::ResumeCommand => r.to(resume_command),
        Endpoint::Kill => r.to(kill),
        Endpoint::Revive => r.to(revive),
        Endpoint::Suspend => r.to(suspend),
        Endpoint::AuthStatus => r.to(auth_status),
        Endpoint::AuthRevoke => r.to(auth_revoke),
        Endpoint::AuthRebind => r.to(auth_rebind),
        Endpoint::Attach => r.to(super::attach::attach),
        Endpoint::Fleet => r.to(fleet),
        Endpoint::Restore => r.to(restore),
        Endpoint::Dirs => r.to(dirs),
        Endpoint::Permissions => r.to(permissions),
        Endpoint::Respond => r.to(respond),
        Endpoint::Events => r.to(super::events::events),
        Endpoint::Trail => r.to(trail),
        Endpoint::Tickets => r.to(ticket),
        Endpoint::Principals => r.to(super::principal_routes::list),
        Endpoint::Metrics => r.to(super::metrics_http::metrics),
    }
}

/// Reads a request body, refusing more than the configured cap and a body that takes longer
/// than `timings.body_read` to arrive. actix-http bounds only the wait for a head; after the
/// refusal it closes the connection, since the body is left unread.
async fn read_body(mut payload: web::Payload, state: &AppState) -> Result<Bytes, Error> {
    let cap = state.limits.body_cap_bytes;
    let within = state.timings.body_read;
    let read = async {
        let mut body = web::BytesMut::new();
        while let Some(chunk) = payload.next().await {
            let chunk = chunk.map_err(|e| RequestError::BodyUnreadable(e.to_string()))?;
            if body.len() + chunk.len() > cap {
                return Err(RequestError::BodyTooLarge { cap }.into());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body.freeze())
    };
    tokio::time::timeout(within, read).await.map_err(|_| {
        Error::from(RequestError::BodyTooSlow {
            within_ms: within.as_millis(),
        })
    })?
}

/// Reads a JSON body as its request type (see [`body::read`]).
pub(super) async fn read_json<T: RequestBody>(
    payload: web::Payload,
    state: &AppState,
) -> Result<T, Error> {
    Ok(body::read(&read_body(payload, state).await?)?)
}

/// `{session}`: what get, update, ack, revive and suspend answer.
fn session_answer(session: Descriptor) -> HttpResponse {
    HttpResponse::Ok().json(SessionEnvelope { session })
}

/// `{forgotten: true, destroyed}`.
fn forgotten(destroyed: bool) -> HttpResponse {
    HttpResponse::Ok().json(ForgetAnswer::Forgotten(Forgotten {
        forgotten: true,
        destroyed,
    }))
}

pub(super) fn mailbox<T>(r: Result<T, actix::MailboxError>) -> Result<T, Error> {
    r.map_err(|e| {
        tracing::error!(error = %e, "actor mailbox failed");
        Error::Internal
    })
}

async fn health(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok().json(Health {
        status: HealthStatus::Ok,
        version: env!("CARGO_PKG_VERSION").to_string(),
        daemon_id: state.daemon_id,
    })
}

async fn daemon(state: web::Data<AppState>) -> Result<HttpResponse, Error> {
    // Spec §2.4: the agent of the last deliberate spawn that reported its start, kept in prefs
    // (a session's `started` report writes it); `claude` until one has.
    let last_used_agent = state
        .store
        .pref("last_used_agent")
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "could not read prefs");
            Error::Internal
        })?
        .unwrap_or_else(|| "claude".to_string());
    Ok(HttpResponse::Ok().json(DaemonInfo {
        build: concat!("atc/", env!("CARGO_PKG_VERSION")).to_string(),
        daemon_id: state.daemon_id,
        pid: std::process::id(),
        listen: state.listen.to_string(),
        state_dir: state.state_dir.display().to_string(),
        limits: state.limits.listed(),
        features: ["session.forget", "session.submit", "daemon.id"]
            .map(String::from)
            .to_vec(),
        last_used_agent,
        config_problems: state.config_problems.iter().map(|p| p.listed()).collect(),
        reporter: state.reporter.counts(),
    }))
}

async fn quit(state: web::Data<AppState>) -> HttpResponse {
    tracing::info!("quit requested over HTTP");
    // The receiver lives as long as the daemon; a send can only fail while it is stopping.
    let _ = state.quit.send(());
    HttpResponse::Ok().json(Empty {})
}

async fn agents(state: web::Data<AppState>) -> HttpResponse {
    // Targets as spec §9.1 lists them: never their options (they may name secrets' homes).
    let mut broker_target = false;
    let targets: Vec<_> = state
        .targets
        .list()
        .iter()
        .map(|t| {
            // Listed as unavailable, with no capabilities, when this daemon lacks the provider,
            // the target cannot reach it, or its entry has a problem (spec §4.1): the provider
            // registry holds none for those.
            let caps = state.providers.get(&t.id).map(|p| p.capabilities());
            broker_target |= caps.is_some_and(|c| c.broker_auth);
            TargetEntry {
                id: t.id.clone(),
                provider: t.provider.clone(),
                identity: t.identity.clone(),
                available: caps.is_some(),
                default: state.targets.default_id() == Some(t.id.as_str()),
                capabilities: caps.unwrap_or(crate::providers::Capabilities::NONE),
                broker_auth: caps.is_some_and(|c| c.broker_auth),
            }
        })
        .collect();
    let default_target = state.targets.default_id().map(str::to_string);
    HttpResponse::Ok().json(AgentsListing {
        agents: state.catalog.listing(broker_target),
        targets,
        default_target: default_target.clone(),
        spawn_defaults: SpawnDefaults {
            agent: "claude".to_string(),
            target: default_target,
        },
        config_revision: state.targets.revision().to_string(),
        target_errors: state.targets.problems().to_vec(),
        agent_errors: state.catalog.problems(),
    })
}

/// `GET /v1/sessions`: the manager keeps the body serialized, so the answer is its bytes.
async fn list(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, Error> {
    let reach = caller.reach;
    let body = mailbox(state.manager()?.send(ListSessions { reach }).await)?;
    Ok(HttpResponse::Ok()
        .content_type(header::ContentType::json())
        .body(body))
}

async fn get(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let mut descriptor = lookup(&state, &caller, &path).await?.descriptor;
    // Four small files in the kernel's memory, read here: one session's is not worth a hop
    // to a blocking thread.
    descriptor.usage = crate::sessions::usage::cgroups_of(&descriptor, &state.providers)
        .and_then(|c| c.group(descriptor.id).usage());
    Ok(session_answer(descriptor))
}

async fn update(
    caller: Caller,
    path: web::Path<String>,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let p: UpdateRequest = read_json(payload, &state).await?;
    let msg = Update {
        name: p.name,
        pinned: p.pinned,
    };
    let found = lookup(&state, &caller, &path).await?;
    let session = mailbox(found.addr.send(msg).await)??;
    Ok(session_answer(session))
}

/// `DELETE /v1/sessions/{id}[?confirm=TOKEN]`. On a target that destroys hosts (imp) it takes
/// two steps (spec §3.7): without `confirm` it answers `{confirmToken, expiresAt}` (60 s);
/// with it, the host is destroyed and the session forgotten.
async fn forget(
    caller: Caller,
    query: web::Query<Vec<(String, String)>>,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let found = lookup(&state, &caller, &path).await?;
    let query = Params::from_query(query.into_inner());
    if !state.destroys_host(&found.descriptor) {
        let force = query.opt_bool("force")?.unwrap_or(false);
        mailbox(found.addr.send(Forget { force }).await)??;
        return Ok(forgotten(false));
    }
    let confirm = query.opt_str("confirm").map(str::to_string);
    match confirm {
        None => {
            let (token, expires_at) = mailbox(found.addr.send(MintForgetToken).await)??;
            Ok(
                HttpResponse::Ok().json(ForgetAnswer::Confirm(ForgetConfirmation {
                    confirm_token: token,
                    expires_at,
                    destroys: "the session's imp and everything on it".to_string(),
                })),
            )
        }
        Some(token) => {
            mailbox(found.addr.send(ForgetDestroying { token }).await)??;
            // A sub-session on its parent's host ends its own harness only (spec §3.7).
            let d = &found.descriptor;
            Ok(forgotten(d.host_key == d.id))
        }
    }
}

async fn input(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let raw = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/octet-stream"));
    let body = read_body(payload, &state).await?;
    let bytes = if raw {
        body
    } else {
        let p: atc_protocol::requests::InputRequest = body::read(&body)?;
        Bytes::from(p.data)
    };
    let found = lookup(&state, &caller, &path).await?;
    mailbox(found.addr.send(Input(bytes)).await)??;
    Ok(HttpResponse::Ok().json(Empty {}))
}

async fn submit(
    caller: Caller,
    path: web::Path<String>,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let SubmitRequest { text } = read_json(payload, &state).await?;
    let found = lookup(&state, &caller, &path).await?;
    mailbox(found.addr.send(Submit(text)).await)??;
    Ok(HttpResponse::Ok().json(Empty {}))
}

async fn resize(
    caller: Caller,
    path: web::Path<String>,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let ResizeRequest { cols, rows } = read_json(payload, &state).await?;
    let size = body::size(cols, rows)?;
    let found = lookup(&state, &caller, &path).await?;
    let size = mailbox(found.addr.send(ResizeSession(size)).await)??;
    Ok(HttpResponse::Ok().json(size))
}

async fn ack(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let found = lookup(&state, &caller, &path).await?;
    let session = mailbox(found.addr.send(Ack).await)?;
    Ok(session_answer(session))
}

async fn screen(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let found = lookup(&state, &caller, &path).await?;
    let screen = mailbox(found.addr.send(GetScreen).await)??;
    Ok(HttpResponse::Ok().json(screen))
}

async fn resume_command(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let d = lookup(&state, &caller, &path).await?.descriptor;
    let agent = state
        .catalog
        .get(&d.agent)
        .ok_or_else(|| AgentError::NoLongerConfigured {
            agent: d.agent.clone(),
        })?;
    // Claude resumes with atc's settings file when the session has one, so its hooks keep
    // reporting to this daemon from a terminal outside it.
    let settings = crate::agents::claude_settings::path(&state.state_dir, &d.id);
    let command = crate::agents::resume_command(
        agent.kind,
        &agent.bin,
        &agent.args,
        &d.cwd,
        d.agent_session_id.as_deref(),
        settings.is_file().then_some(settings.as_path()),
    );
    Ok(HttpResponse::Ok().json(ResumeCommand { command }))
}

async fn kill(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let found = lookup(&state, &caller, &path).await?;
    Ok(match mailbox(found.addr.send(Kill).await)?? {
        Killed::Ended(session) => HttpResponse::Ok().json(KillAnswer {
            session,
            forgotten: None,
        }),
        Killed::Forgotten(session) => HttpResponse::Ok().json(KillAnswer {
            session,
            forgotten: Some(true),
        }),
    })
}

async fn revive(
    caller: Caller,
    path: web::Path<String>,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let ReviveRequest { cols, rows } = read_json(payload, &state).await?;
    // Both or neither: without them the session keeps its last size.
    let size = match (cols, rows) {
        (None, None) => None,
        (cols, rows) => Some(body::size(
            cols.ok_or_else(|| missing("cols"))?,
            rows.ok_or_else(|| missing("rows"))?,
        )?),
    };
    let found = lookup(&state, &caller, &path).await?;
    let session = mailbox(found.addr.send(Revive { size }).await)??;
    Ok(session_answer(session))
}

/// `POST /v1/sessions/{id}/suspend` `{force?}`: sleep the session's host with the process
/// inside (imp targets). A busy session keeps its host awake (`host_unavailable`, `problem:
/// busy`) unless `force`; another owner's lease answers `host_leased`.
async fn suspend(
    caller: Caller,
    path: web::Path<String>,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let p: SuspendRequest = read_json(payload, &state).await?;
    let force = p.force.unwrap_or(false);
    let found = lookup(&state, &caller, &path).await?;
    let session = mailbox(found.addr.send(Suspend { force }).await)??;
    Ok(session_answer(session))
}

async fn auth_status(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let found = lookup(&state, &caller, &path).await?;
    let auth = mailbox(found.addr.send(AuthStatusOf).await)??;
    Ok(HttpResponse::Ok().json(AuthEnvelope { auth }))
}

async fn auth_revoke(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let found = lookup(&state, &caller, &path).await?;
    let auth = mailbox(found.addr.send(RevokeAuth).await)??;
    Ok(HttpResponse::Ok().json(AuthEnvelope { auth }))
}

/// `POST /v1/sessions/{id}/auth/rebind`: the host's binding follows the agent's `auth` as
/// the daemon's config has it now; answers `{revision}`.
async fn auth_rebind(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let found = lookup(&state, &caller, &path).await?;
    let revision = mailbox(found.addr.send(RebindAuth).await)??;
    Ok(HttpResponse::Ok().json(atc_protocol::responses::AuthRebound { revision }))
}

async fn fleet(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, Error> {
    let mut rows = state.store.load_fleet().await.map_err(|e| {
        tracing::error!(error = %e, "could not read the fleet");
        Error::Internal
    })?;
    if let Some(reach) = &caller.reach {
        // A row is a session; it is shown when that session is in reach.
        let seen = in_reach(&state, reach).await?;
        rows.retain(|r| seen.contains(&r.session_id));
    }
    Ok(HttpResponse::Ok().json(FleetList {
        fleet: rows.into_iter().map(FleetEntry::from).collect(),
    }))
}

/// The sessions in `reach`.
async fn in_reach(
    state: &AppState,
    reach: &std::sync::Arc<crate::sessions::reach::Reach>,
) -> Result<std::collections::HashSet<atc_protocol::SessionId>, Error> {
    mailbox(state.manager()?.send(InReach(reach.clone())).await)
}

async fn restore(state: web::Data<AppState>) -> Result<HttpResponse, Error> {
    let restored = mailbox(state.manager()?.send(RestoreFleet).await)??;
    Ok(HttpResponse::Ok().json(Restored {
        restored: restored as u64,
    }))
}

async fn dirs(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, Error> {
    const SHOWN: u32 = 50;
    let failed = |e: crate::store::StoreError| {
        tracing::error!(error = %e, "could not read spawn history");
        Error::Internal
    };
    let Some(reach) = &caller.reach else {
        let dirs = state.store.recent_dirs(SHOWN).await.map_err(failed)?;
        return Ok(HttpResponse::Ok().json(Dirs { dirs }));
    };
    // A principal sees the directories last spawned on a target it is granted, at the
    // identity that target has now (a row older than targets was on `local`).
    let placed = state
        .store
        .recent_dirs_placed(4 * SHOWN)
        .await
        .map_err(failed)?;
    let dirs = placed
        .into_iter()
        .filter(|(_, target, identity)| {
            let target = target.as_deref().unwrap_or("local");
            match identity {
                Some(identity) => reach.holds(target, identity),
                None => reach.grants(target),
            }
        })
        .map(|(cwd, _, _)| cwd)
        .take(SHOWN as usize)
        .collect();
    Ok(HttpResponse::Ok().json(Dirs { dirs }))
}

/// `POST /v1/tickets`: a single-use ticket for one WebSocket upgrade, tied to the token this
/// request came with (`tickets.rs`).
async fn ticket(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let token = super::auth::Admitted::of(&req);
    // The socket it opens acts as this request does.
    let issued = state
        .tickets
        .issue(
            &token,
            caller.asked_as.as_deref(),
            std::time::Instant::now(),
        )
        .map_err(|e| {
            tracing::error!(error = %e, "could not issue a ticket");
            Error::Internal
        })?;
    let left = issued
        .expires
        .saturating_duration_since(std::time::Instant::now());
    Ok(HttpResponse::Ok()
        // A ticket is a credential for a while: no cache may keep it.
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(atc_protocol::responses::Ticket {
            ticket: issued.ticket,
            expires_at: crate::clock::now_ms() + left.as_millis() as i64,
        }))
}

async fn permissions(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, Error> {
    let registry = state.permissions.as_ref().ok_or(Error::Internal)?;
    let mut pending = mailbox(registry.send(ListPending).await)?;
    if let Some(reach) = &caller.reach {
        let seen = in_reach(&state, reach).await?;
        pending.retain(|p| seen.contains(&p.session));
    }
    Ok(HttpResponse::Ok().json(PermissionList {
        permissions: pending,
    }))
}

async fn respond(
    caller: Caller,
    path: web::Path<String>,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let PermissionDecision { decision } = read_json(payload, &state).await?;
    if decision.is_empty() {
        return Err(missing("decision"));
    }
    let registry = state.permissions.as_ref().ok_or(Error::Internal)?;
    if let Some(reach) = &caller.reach {
        // A request of a session out of reach is answered as one that does not exist.
        let pending = mailbox(registry.send(ListPending).await)?;
        let session = pending
            .iter()
            .find(|p| p.request == *path)
            .map(|p| p.session);
        let seen = in_reach(&state, reach).await?;
        if session.is_some_and(|s| !seen.contains(&s)) {
            return Err(
                crate::permissions::registry::PermissionError::NoSuchRequest {
                    request: path.into_inner(),
                }
                .into(),
            );
        }
    }
    mailbox(
        registry
            .send(Respond {
                request: path.into_inner(),
                decision,
            })
            .await,
    )??;
    Ok(HttpResponse::Ok().json(Empty {}))
}

/// What a trail cursor holds: its kind (`ev`, an event row) and the row id it points after.
/// Clients see only base64url of its JSON, `{"k":"ev","i":<row id>}` (spec §10).
#[derive(serde::Serialize, serde::Deserialize)]
struct TrailCursor {
    k: String,
    i: i64,
}

/// The kind of a cursor into the event trail.
const EVENT_CURSOR: &str = "ev";

fn encode_cursor(id: i64) -> String {
    use base64::Engine;
    let cursor = TrailCursor {
        k: EVENT_CURSOR.to_string(),
        i: id,
    };
    let text = serde_json::to_vec(&cursor).expect("a word and a number always serialize");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

fn decode_cursor(cursor: &str) -> Result<i64, RequestError> {
    use base64::Engine;
    let bad = || RequestError::BadCursor;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor.trim_end_matches('='))
        .map_err(|_| bad())?;
    let v = crate::protocol::strict_json::parse(&bytes).map_err(|_| bad())?;
    match serde_json::from_value::<TrailCursor>(v).map_err(|_| bad())? {
        TrailCursor { k, i } if k == EVENT_CURSOR && i >= 0 => Ok(i),
        _ => Err(bad()),
    }
}

async fn trail(
    caller: Caller,
    query: web::Query<Vec<(String, String)>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let p = Params::from_query(query.into_inner());
    let limit = match p.opt_u64("limit")? {
        None => 50,
        Some(n @ 1..=200) => n as u32,
        Some(_) => {
            return Err(RequestError::OutOfRange {
                field: "limit",
                range: "1 to 200",
            }
            .into())
        }
    };
    let wait = match p.opt_u64("waitMs")? {
        None => 0,
        Some(n @ 0..=30_000) => n,
        Some(_) => {
            return Err(RequestError::OutOfRange {
                field: "waitMs",
                range: "0 to 30000",
            }
            .into())
        }
    };
    let store_failed = |e: crate::store::StoreError| {
        tracing::error!(error = %e, "could not read the trail");
        Error::Internal
    };
    let (events, more, last) = match p.opt_str("cursor") {
        None => {
            let events = state
                .store
                .trail_latest(limit)
                .await
                .map_err(store_failed)?;
            let last = events.last().map(|e| e.id).unwrap_or(0);
            (events, false, last)
        }
        Some(cursor) => {
            let after = decode_cursor(cursor)?;
            let mut events = state
                .store
                .trail_after(after, limit + 1, std::time::Duration::from_millis(wait))
                .await
                .map_err(store_failed)?;
            let more = events.len() > limit as usize;
            events.truncate(limit as usize);
            let last = events.last().map(|e| e.id).unwrap_or(after);
            (events, more, last)
        }
    };
    // A principal reads the events of sessions in its reach; the cursor still moves past
    // what it is not shown, so its next read does not find those again.
    let events = match &caller.reach {
        None => events,
        Some(reach) => {
            let seen = in_reach(&state, reach).await?;
            events
                .into_iter()
                .filter(|e| seen.contains(&e.atc_id))
                .collect()
        }
    };
    Ok(HttpResponse::Ok().json(Trail {
        events,
        more,
        cursor: encode_cursor(last),
    }))
}

/// The refusal of a required body field left out (or given empty).
fn missing(field: &'static str) -> Error {
    RequestError::Missing { field, hint: "" }.into()
}

/// Anything not routed.
pub async fn not_found(req: HttpRequest) -> Result<HttpResponse, Error> {
    Err(RequestError::NoRoute {
        method: req.method().to_string(),
        path: req.path().to_string(),
    }
    .into())
}
