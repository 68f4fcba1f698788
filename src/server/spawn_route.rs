//! `POST /v1/sessions`: a spawn's body checked in the order the spec gives (agent, cwd, name,
//! size, parent, the refusal chain, overrides, workspace, limits), then sent to the session manager,
//! or, under an `Idempotency-Key`, through the key's lock in the ledger.

use actix_web::{web, HttpRequest, HttpResponse};

use super::auth::AuthError;
use super::caller::Caller;
use super::routes::{mailbox, read_json};
use super::workspace_routes;
use super::AppState;
use crate::agents::spawn_options::{self, SpawnOption};
use crate::agents::AgentError;
use crate::ledger::idempotency_ledger::{Acquire, KeyGuard};
use crate::ledger::key_lock::{LedgerError, RunSpawn};
use crate::protocol::body;
use crate::protocol::RequestError;
use crate::server::error::Error;
use crate::sessions::messages::Spawn;
use crate::sessions::session_error::SessionError;
use crate::store::KeyId;
use atc_protocol::requests::SpawnRequest;
use atc_protocol::responses::SessionEnvelope;
use atc_protocol::{Descriptor, TermSize};

/// The route's handler.
pub(super) async fn spawn(
    req: HttpRequest,
    caller: Caller,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let p: SpawnRequest = read_json(payload, &state).await?;
    // Held until this spawn is answered, on either path below; taken once the body is in, so
    // a refusal leaves no body unread and the connection lives on.
    let _queued = state.spawn_queue.enter().map_err(SessionError::from)?;
    let agent = p.agent.as_deref().unwrap_or("claude");
    if agent.is_empty() {
        return Err(RequestError::Empty { field: "agent" }.into());
    }
    if p.cwd.is_empty() {
        return Err(RequestError::Missing {
            field: "cwd",
            hint: ": an absolute directory",
        }
        .into());
    }
    // Whether the name shadows another session's id is the manager's to say (it has the ids).
    let name = match p.name.as_deref().map(str::trim) {
        Some("") | None => None,
        Some(n) => {
            crate::sessions::session_name::check(n).map_err(SessionError::BadName)?;
            Some(n.to_string())
        }
    };
    let size = body::size(
        p.cols.unwrap_or(TermSize::DEFAULT.cols),
        p.rows.unwrap_or(TermSize::DEFAULT.rows),
    )?;
    // Spec §3.5 step 3, before the target: an unknown parent, or one out of the caller's
    // reach, is `no_such_session` (for a held key, the ledger's answer comes first, as for the
    // target chain's refusals). The manager replaces a sub-session by its own parent.
    let parent = match p.parent.as_deref() {
        Some(key) => super::find(&state, &caller, key)
            .await
            .map(|found| Some(found.descriptor.id)),
        None => Ok(None),
    };
    let target_param = p.target.as_deref();
    // The refusal chain runs before a fresh spawn; a replay of a held key answers from the
    // ledger whatever the targets say now (spec §7.4: params are not re-validated).
    let refusal = state
        .refusal
        .check_new(target_param)
        .and_then(|t| match p.workspace {
            Some(_) => state.refusal.check_workspace(target_param),
            None => Ok(t),
        });
    // Spec §3.5 step 4: after the chain, the principal's grant.
    if let (Ok(t), Some(reach)) = (&refusal, &caller.reach) {
        if !reach.grants(&t.id) {
            return Err(AuthError::TargetForbidden {
                target: t.id.clone(),
            }
            .into());
        }
    }
    let (target, target_identity) = match &refusal {
        Ok(t) => (t.id.clone(), t.identity.clone()),
        Err(_) => (
            target_param
                .or(state.targets.default_id())
                .unwrap_or_default()
                .to_string(),
            String::new(),
        ),
    };
    // Spec §9.2: overrides are checked before anything starts, in its order.
    let mut overrides = [(SpawnOption::Model, None), (SpawnOption::Effort, None)];
    for (option, slot) in overrides.iter_mut() {
        let given = match option {
            SpawnOption::Model => p.model.as_deref(),
            SpawnOption::Effort => p.effort.as_deref(),
        };
        if let Some(value) = given {
            let known = state
                .catalog
                .get(agent)
                .ok_or_else(|| AgentError::Unknown {
                    agent: agent.to_string(),
                })?;
            // A broker-backed agent's bin is resolved by its imp's guest, not here.
            let installed =
                known.auth.is_some() || crate::agents::resolve_program(&known.bin).is_some();
            spawn_options::validate(known.kind, agent, installed, *option, value)?;
            *slot = Some(value.to_string());
        }
    }
    let [(_, model), (_, effort)] = overrides;
    let workspace = p
        .workspace
        .as_ref()
        .map(workspace_routes::ask)
        .transpose()?;
    let limits = super::spawn_limits::resolve(
        &state,
        agent,
        refusal.as_ref().ok().copied(),
        p.limits.as_ref(),
    )
    .map_err(SessionError::Limits)?;
    let spawn = Spawn {
        id: None,
        agent: agent.to_string(),
        cwd: p.cwd.clone(),
        name,
        size,
        target,
        target_identity,
        model,
        effort,
        workspace,
        limits,
        parent: parent.as_ref().ok().copied().flatten(),
        reach: caller.reach.clone(),
    };
    let Some(key) = idempotency_key(&req)? else {
        parent?;
        refusal?;
        let session = mailbox(state.manager()?.send(spawn).await)??;
        return Ok(HttpResponse::Created().json(SessionEnvelope { session }));
    };
    // The parent as the client named it: one that is gone since still replays its key.
    let canonical = crate::ledger::spawn_payload(&spawn, p.parent.as_deref());
    let replay_only = req
        .headers()
        .get("Idempotency-Replay-Only")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let key = KeyId {
        principal: caller.principal.clone(),
        operation: "session.spawn".into(),
        key,
    };
    let ledger = state.ledger()?.clone();
    let lock = mailbox(ledger.send(Acquire(key.clone())).await)?;
    let _guard = KeyGuard::new(ledger, key.clone());
    let answer = mailbox(
        lock.send(RunSpawn {
            key,
            payload_hash: crate::ledger::payload_hash(&canonical),
            replay_only,
            refusal: match (parent, refusal) {
                (Err(e), _) => Some(LedgerError::Spawn(e)),
                (Ok(_), Err(e)) => Some(LedgerError::Refused(e)),
                (Ok(_), Ok(_)) => None,
            },
            spawn,
        })
        .await,
    )?;
    if let Some(kind) = crate::ledger::key_lock::answer_kind(&answer) {
        state.metrics.ledger_answered(kind);
    }
    let answer = answer?;
    // Spec §7.4: a principal's replay answers only a session still in its reach.
    if answer.replayed && caller.reach.is_some() {
        check_replay_in_reach(&state, &caller, &answer.session).await?;
    }
    let body = SessionEnvelope {
        session: answer.session,
    };
    Ok(if answer.replayed {
        HttpResponse::Ok()
            .insert_header(("Idempotent-Replayed", "true"))
            .json(body)
    } else {
        HttpResponse::Created().json(body)
    })
}

/// A replayed spawn's session must be in the caller's reach: its tree when it is listed, the
/// stored session alone when it is not; otherwise `target_forbidden`.
async fn check_replay_in_reach(
    state: &AppState,
    caller: &Caller,
    session: &Descriptor,
) -> Result<(), Error> {
    let id = session.id.to_string();
    if super::find(state, caller, &id).await.is_ok() {
        return Ok(());
    }
    let listed = super::find(state, &Caller::owner(), &id).await.is_ok();
    let covered = caller.reach.as_ref().is_none_or(|r| r.covers(session));
    if listed || !covered {
        return Err(AuthError::TargetForbidden {
            target: session.locator.target_id.clone(),
        }
        .into());
    }
    Ok(())
}

/// The `Idempotency-Key` header, if any: 1–200 characters.
fn idempotency_key(req: &HttpRequest) -> Result<Option<String>, Error> {
    let Some(v) = req.headers().get("Idempotency-Key") else {
        return Ok(None);
    };
    let bad = || RequestError::BadIdempotencyKey;
    let key = v.to_str().map_err(|_| bad())?;
    if key.is_empty() || key.chars().count() > 200 {
        return Err(bad().into());
    }
    Ok(Some(key.to_string()))
}
