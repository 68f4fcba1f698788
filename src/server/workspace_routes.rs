//! The workspace routes: a spawn's `workspace` read into what the sessions make of it, where a
//! session's copy stands (`GET /v1/sessions/{id}/workspace`), and the copies no session owns
//! (`GET /v1/workspaces/orphans`, `POST /v1/workspaces/prune`). Like every handler, these
//! only turn requests into messages.

use std::path::{Path, PathBuf};

use actix_web::{web, HttpResponse};

use super::caller::Caller;
use super::routes::{mailbox, read_json};
use super::{lookup, AppState};
use crate::protocol::RequestError;
use crate::server::error::Error;
use crate::sessions::messages::{ListOrphans, PruneOrphans, ReadWorkspace};
use crate::workspaces::source::{check_url, Ask, Pick, Source};
use atc_protocol::workspace::{PruneRequest, WorkspaceRequest};

/// A spawn's `workspace` checked for its shape: one of `path` (absolute) and `url` (a
/// transport git clones over, without a credential), and at most one of `ref` and `sha`.
pub(super) fn ask(w: &WorkspaceRequest) -> Result<Ask, Error> {
    let bad = |field: &str, problem: &str| -> Error {
        RequestError::BadField {
            field: field.to_string(),
            problem: problem.to_string(),
        }
        .into()
    };
    let source = match (&w.path, &w.url) {
        (Some(_), Some(_)) => return Err(bad("workspace", "takes 'path' or 'url', not both")),
        (None, None) => return Err(bad("workspace.path", "is required (or 'url')")),
        (None, Some(url)) => {
            check_url(url)?;
            Source::Url(url.clone())
        }
        (Some(path), None) if !Path::new(path).is_absolute() => {
            return Err(bad("workspace.path", "must be an absolute path"))
        }
        (Some(path), None) => Source::Path(PathBuf::from(path)),
    };
    let pick = Pick::from_fields(w.git_ref.as_deref(), w.sha.as_deref()).map_err(|problem| {
        let field = if w.sha.is_some() {
            "workspace.sha"
        } else {
            "workspace.ref"
        };
        bad(field, problem)
    })?;
    Ok(Ask { source, pick })
}

/// `GET /v1/sessions/{id}/workspace`.
pub(super) async fn status(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let found = lookup(&state, &caller, &path).await?;
    let status = mailbox(found.addr.send(ReadWorkspace).await)??;
    Ok(HttpResponse::Ok().json(status))
}

/// `GET /v1/workspaces/orphans`.
pub(super) async fn orphans(state: web::Data<AppState>) -> Result<HttpResponse, Error> {
    let list = mailbox(state.manager()?.send(ListOrphans).await)??;
    Ok(HttpResponse::Ok().json(list))
}

/// `POST /v1/workspaces/prune`.
pub(super) async fn prune(
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let p: PruneRequest = read_json(payload, &state).await?;
    let force = p.force.unwrap_or(false);
    let done = mailbox(state.manager()?.send(PruneOrphans { force }).await)??;
    Ok(HttpResponse::Ok().json(done))
}
