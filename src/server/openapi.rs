//! The OpenAPI 3.1 document of the API (`GET /v1/openapi.json`): its paths and methods are
//! [`ROUTES`], its schemas are the `atc-protocol` types (through `utoipa::ToSchema`), and what
//! each endpoint takes and answers is [`operation`]'s exhaustive match. It owns no behaviour;
//! `tests/it/openapi.rs` checks the document against the live daemon, route by route.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use actix_web::HttpResponse;
use atc_protocol::{requests, responses, ErrorCode};
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::extensions::ExtensionsBuilder;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    InfoBuilder, ObjectBuilder, OpenApi, Paths, Ref, Required, ResponseBuilder, Type,
};
use utoipa::OpenApi as _;

use super::route_table::{Endpoint, Method, Route, ROUTES};
use crate::server::error::Error;

/// Every schema the document names; utoipa adds the ones they contain.
#[derive(utoipa::OpenApi)]
#[openapi(components(schemas(
    atc_protocol::ErrorBody,
    atc_protocol::ErrorCode,
    atc_protocol::Descriptor,
    atc_protocol::TermSize,
    atc_protocol::AttachFrame,
    atc_protocol::ClientFrame,
    atc_protocol::FleetEvent,
    requests::SpawnRequest,
    requests::UpdateRequest,
    requests::InputRequest,
    requests::SubmitRequest,
    requests::ResizeRequest,
    requests::ReviveRequest,
    requests::SuspendRequest,
    requests::PermissionDecision,
    responses::Health,
    responses::Empty,
    responses::DaemonInfo,
    responses::AgentsListing,
    responses::SessionList,
    responses::SessionEnvelope,
    responses::AuthEnvelope,
    responses::AuthRebound,
    responses::KillAnswer,
    responses::ForgetAnswer,
    responses::ScreenText,
    atc_protocol::workspace::WorkspaceStatus,
    atc_protocol::workspace::ChangedFile,
    atc_protocol::workspace::DiffStat,
    atc_protocol::workspace::WorkspaceRequest,
    atc_protocol::workspace::WorkspaceInfo,
    atc_protocol::workspace::Orphan,
    atc_protocol::workspace::OrphanList,
    atc_protocol::workspace::PruneRequest,
    atc_protocol::workspace::PruneAnswer,
    responses::ResumeCommand,
    responses::FleetList,
    responses::Restored,
    responses::Dirs,
    responses::PermissionList,
    responses::Trail,
    responses::Ticket,
    responses::PrincipalList,
    responses::PrincipalEntry,
)))]
struct Schemas;

/// The security scheme every non-public route requires.
const BEARER: &str = "bearer";

/// What one endpoint takes and answers.
struct Operation {
    summary: &'static str,
    /// The JSON request body's schema, and whether a body is required.
    body: Option<(&'static str, bool)>,
    /// Success statuses and the schema each answers.
    ok: &'static [(u16, &'static str)],
    /// Query parameters: name, type, description.
    query: &'static [(&'static str, Type, &'static str)],
    /// The socket's frames (server → client, client → server), for WebSocket routes.
    socket: Option<(&'static str, Option<&'static str>)>,
}

const fn op(summary: &'static str, ok: &'static [(u16, &'static str)]) -> Operation {
    Operation {
        summary,
        body: None,
        ok,
        query: &[],
        socket: None,
    }
}

/// The spawn's own `host_unavailable` problems (`crate::sessions::admission`).
const SPAWN_ADMISSION: &str =
    "A spawn the daemon cannot take now answers `host_unavailable` with a `Retry-After` \
     header: `data.problem` `busy` when `data.limit` spawns are already in flight \
     (limits.spawnQueue), `memory_low` when this machine's available memory \
     (`data.availableMiB`) is below `data.floorMiB` (limits.memoryFloorMiB)";

/// The spawn's limits refusals (`crate::config::session_limits`).
const SPAWN_LIMITS: &str =
    "A spawn whose `limits` its target cannot enforce (no writable cgroups on this machine, \
     or a remote target) answers `unsupported_operation` with `data.problem` `no_cgroups` \
     and `data.target`; a limit above what config allows answers `bad_args` with \
     `data.field` (`limits.memoryMiB`, ...) and `data.ceiling`";

/// The `ticket` query parameter of the socket routes.
const TICKET_PARAM: &str =
    "A single-use ticket from POST /v1/tickets, instead of the token (no Authorization header)";

/// What `endpoint` takes and answers. Exhaustive: a new endpoint is not served until it is
/// described.
fn operation(endpoint: Endpoint) -> Operation {
    const SESSION: &[(u16, &str)] = &[(200, "SessionEnvelope")];
    const EMPTY: &[(u16, &str)] = &[(200, "Empty")];
    match endpoint {
        Endpoint::Health => op(
            "Liveness and the daemon id; no token needed",
            &[(200, "Health")],
        ),
        Endpoint::OpenApi => Operation {
            summary: "This document (OpenAPI 3.1); no token needed",
            ..op("", &[(200, "")])
        },
        Endpoint::Daemon => op(
            "Build, daemon id, limits, features, last used agent",
            &[(200, "DaemonInfo")],
        ),
        Endpoint::Quit => op("Stop the daemon", EMPTY),
        Endpoint::Agents => op(
            "Agents with spawn options, targets, spawn defaults, config revision, config errors",
            &[(200, "AgentsListing")],
        ),
        Endpoint::ListSessions => op("Every session", &[(200, "SessionList")]),
        Endpoint::Spawn => Operation {
            body: Some(("SpawnRequest", true)),
            ..op(
                "Spawn a session (201); a replay of an Idempotency-Key answers 200 with \
                 `Idempotent-Replayed: true`",
                &[(201, "SessionEnvelope"), (200, "SessionEnvelope")],
            )
        },
        Endpoint::GetSession => op("One session, by id or name", SESSION),
        Endpoint::UpdateSession => Operation {
            body: Some(("UpdateRequest", true)),
            ..op("Rename or (un)pin a session", SESSION)
        },
        Endpoint::Forget => Operation {
            query: &[
                (
                    "confirm",
                    Type::String,
                    "The confirmToken of step one, on a target that destroys hosts",
                ),
                (
                    "force",
                    Type::Boolean,
                    "Remove the session's workspace even when that loses work \
                     (otherwise refused as workspace_dirty)",
                ),
            ],
            ..op(
                "Forget a session, removing its workspace; two steps when forgetting destroys \
                 its host",
                &[(200, "ForgetAnswer")],
            )
        },
        Endpoint::Input => Operation {
            body: Some(("InputRequest", true)),
            ..op(
                "Type into a session: `{data}` as JSON, or raw bytes as application/octet-stream",
                EMPTY,
            )
        },
        Endpoint::Submit => Operation {
            body: Some(("SubmitRequest", true)),
            ..op("Type text, then Enter", EMPTY)
        },
        Endpoint::Resize => Operation {
            body: Some(("ResizeRequest", true)),
            ..op(
                "Resize for a client not attached by WebSocket; answers the effective size",
                &[(200, "TermSize")],
            )
        },
        Endpoint::Ack => op("Clear the unread flag", SESSION),
        Endpoint::Screen => op("The visible screen as text", &[(200, "ScreenText")]),
        Endpoint::Orphans => op(
            "Workspace directories no session owns, each with the work it holds",
            &[(200, "OrphanList")],
        ),
        Endpoint::Prune => Operation {
            body: Some(("PruneRequest", false)),
            ..op(
                "Remove orphaned workspaces that hold no work (all of them with force)",
                &[(200, "PruneAnswer")],
            )
        },
        Endpoint::Workspace => op(
            "Where the session's workspace stands: branch, base, ahead and behind, the files \
             changed and a diff stat",
            &[(200, "WorkspaceStatus")],
        ),
        Endpoint::ResumeCommand => op(
            "A command line that resumes the agent's session outside atc",
            &[(200, "ResumeCommand")],
        ),
        Endpoint::Kill => op(
            "End the harness (SIGHUP, then SIGKILL after the grace); a dead session is forgotten",
            &[(200, "KillAnswer")],
        ),
        Endpoint::Revive => Operation {
            body: Some(("ReviveRequest", false)),
            ..op("A fresh harness resumes the session in place", SESSION)
        },
        Endpoint::Suspend => Operation {
            body: Some(("SuspendRequest", false)),
            ..op(
                "Sleep the session's host with the harness inside (imp)",
                SESSION,
            )
        },
        Endpoint::AuthStatus => op(
            "The session's host's broker binding: state, revision, hash, imp, grants and \
             the launch tickets it issued and released",
            &[(200, "AuthEnvelope")],
        ),
        Endpoint::AuthRevoke => op(
            "Revoke the grants of the session's host's broker binding; retry on \
             auth_revocation_pending. A running harness keeps running",
            &[(200, "AuthEnvelope")],
        ),
        Endpoint::AuthRebind => op(
            "Rebind the session's host's broker binding to its agent's auth as configured now: \
             adds new grants, removes dropped ones, answers the new revision. From ready, \
             revoked or rebind_failed; a failure removes only the grants it added",
            &[(200, "AuthRebound")],
        ),
        Endpoint::Attach => Operation {
            query: &[
                (
                    "cols",
                    Type::Integer,
                    "This client's columns, 1-4096 (with rows)",
                ),
                (
                    "rows",
                    Type::Integer,
                    "This client's rows, 1-4096 (with cols)",
                ),
                ("stream", Type::String, "Resume: the stream id of `from`"),
                ("from", Type::Integer, "Resume: the offset to replay from"),
                (
                    "access_token",
                    Type::String,
                    "The token, for browsers that cannot send headers",
                ),
                ("ticket", Type::String, TICKET_PARAM),
            ],
            socket: Some(("AttachFrame", Some("ClientFrame"))),
            ..op(
                "WebSocket: the session's terminal. Text frames are AttachFrame (server) and \
                 ClientFrame (client); binary frames are terminal bytes both ways",
                &[],
            )
        },
        Endpoint::Fleet => op("The persisted session rows", &[(200, "FleetList")]),
        Endpoint::Restore => op(
            "Revive every session that died with an old daemon",
            &[(200, "Restored")],
        ),
        Endpoint::Dirs => op("Recent spawn directories", &[(200, "Dirs")]),
        Endpoint::Permissions => op("Pending permission requests", &[(200, "PermissionList")]),
        Endpoint::Respond => Operation {
            body: Some(("PermissionDecision", true)),
            ..op("Answer a permission request", EMPTY)
        },
        Endpoint::Events => Operation {
            query: &[
                (
                    "access_token",
                    Type::String,
                    "The token, for browsers that cannot send headers",
                ),
                ("ticket", Type::String, TICKET_PARAM),
            ],
            socket: Some(("FleetEvent", None)),
            ..op(
                "WebSocket: one session.added per session, then every fleet event; each text \
                 frame is a FleetEvent",
                &[],
            )
        },
        Endpoint::Trail => Operation {
            query: &[
                ("cursor", Type::String, "Opaque: from the previous page"),
                ("limit", Type::Integer, "1-200 (50)"),
                (
                    "waitMs",
                    Type::Integer,
                    "0-30000: how long to wait for a first event",
                ),
            ],
            ..op("Long-poll read of the event trail", &[(200, "Trail")])
        },
        Endpoint::Tickets => op(
            "A single-use ticket (30 s) that opens one WebSocket (attach or events) as \
             `?ticket=`, instead of the token",
            &[(200, "Ticket")],
        ),
        Endpoint::Principals => op(
            "The principals config declares: each id, the target names it is granted and the \
             absolute path of its token file (never the token)",
            &[(200, "PrincipalList")],
        ),
        Endpoint::Metrics => Operation {
            summary: "Prometheus metrics in the OpenMetrics text format; also served without a \
                      token on the optional --metrics-listen address",
            ..op("", &[(200, "")])
        },
    }
}

/// The `x-websocket-frames` extension of a socket route: the schema of the text frames each
/// way (the server's, and the client's where it sends any).
#[derive(serde::Serialize)]
struct SocketFrames {
    server: Ref,
    #[serde(skip_serializing_if = "Option::is_none")]
    client: Option<Ref>,
}

fn schema_ref(name: &str) -> Ref {
    Ref::from_schema_name(name)
}

fn json_content(name: &str) -> utoipa::openapi::Content {
    ContentBuilder::new().schema(Some(schema_ref(name))).build()
}

/// The error responses: each status with the codes that answer it (spec §2.8), all with the
/// `ErrorBody` shape. `unauthorized` is left out of public routes.
fn error_responses(public: bool) -> Vec<(u16, String)> {
    let mut by_status: BTreeMap<u16, Vec<&str>> = BTreeMap::new();
    for code in ErrorCode::ALL {
        if public && code == ErrorCode::Unauthorized {
            continue;
        }
        by_status
            .entry(code.status())
            .or_default()
            .push(code.as_str());
    }
    // `bad_args` answers three statuses of its own on any route (crate::server::error's mapping): a
    // request head or body that did not arrive in time (408), a declared body past the cap
    // (413) and a request head past the limits (431).
    for status in [408, 413, 431] {
        by_status
            .entry(status)
            .or_default()
            .push(ErrorCode::BadArgs.as_str());
    }
    by_status
        .into_iter()
        .map(|(status, codes)| {
            (
                status,
                format!("error.code is one of: {}", codes.join(", ")),
            )
        })
        .collect()
}

fn build_operation(route: &Route) -> utoipa::openapi::path::Operation {
    let spec = operation(route.endpoint);
    let mut b = OperationBuilder::new()
        .summary(Some(spec.summary))
        .operation_id(Some(format!("{:?}", route.endpoint)));
    if route.path.contains("{id}") {
        b = b.parameter(
            ParameterBuilder::new()
                .name("id")
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .description(Some(if route.path.starts_with("/v1/permissions") {
                    "Permission request id"
                } else {
                    "Session id or name"
                }))
                .schema(Some(ObjectBuilder::new().schema_type(Type::String))),
        );
    }
    for (name, ty, description) in spec.query {
        b = b.parameter(
            ParameterBuilder::new()
                .name(*name)
                .parameter_in(ParameterIn::Query)
                .required(Required::False)
                .description(Some(*description))
                .schema(Some(ObjectBuilder::new().schema_type(ty.clone()))),
        );
    }
    if route.endpoint == Endpoint::Attach {
        // A closed set of one: only `watch` is accepted, and absent means interactive.
        b = b.parameter(
            ParameterBuilder::new()
                .name("mode")
                .parameter_in(ParameterIn::Query)
                .required(Required::False)
                .description(Some(
                    "`watch`: read-only; input frames get an `unsupported` error frame and \
                     are never written, and this client's size does not count toward the \
                     session's. Absent: interactive",
                ))
                .schema(Some(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .enum_values(Some(["watch"])),
                )),
        );
    }
    if !route.public() {
        b = b.parameter(
            ParameterBuilder::new()
                .name("X-Atc-As")
                .parameter_in(ParameterIn::Header)
                .required(Required::False)
                .description(Some(
                    "Act as this principal (an id from config's `principals`): the request then \
                     reaches only the sessions on the targets granted to it, and a session out \
                     of its reach answers as a missing one. On a principal's own token it only \
                     narrows what that principal reaches. A ticket asked for with it opens its \
                     socket as that principal",
                ))
                .schema(Some(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .pattern(Some("^[a-z0-9_-]{1,64}$")),
                )),
        );
    }
    if route.access == crate::server::route_table::Access::Owner {
        b = b.description(Some(
            "Owner only: a principal's token, or the owner's with X-Atc-As, answers 401 \
             `unauthorized`.",
        ));
    }
    if route.endpoint == Endpoint::Spawn {
        b = b.description(Some(
            "A spawn on a target not granted to the request's principal answers 403 \
             `target_forbidden` with `data.target`; a `parent` out of its reach answers 404 \
             `no_such_session`.",
        ));
        for (name, description) in [
            (
                "Idempotency-Key",
                "1-200 characters: a retry with the same key and payload replays",
            ),
            (
                "Idempotency-Replay-Only",
                "`true`: only replay a held key, never spawn",
            ),
        ] {
            b = b.parameter(
                ParameterBuilder::new()
                    .name(name)
                    .parameter_in(ParameterIn::Header)
                    .required(Required::False)
                    .description(Some(description))
                    .schema(Some(ObjectBuilder::new().schema_type(Type::String))),
            );
        }
    }
    if let Some((name, required)) = spec.body {
        let mut body = RequestBodyBuilder::new()
            .required(Some(if required {
                Required::True
            } else {
                Required::False
            }))
            .content("application/json", json_content(name));
        if route.endpoint == Endpoint::Input {
            body = body.content(
                "application/octet-stream",
                ContentBuilder::new()
                    .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                    .build(),
            );
        }
        b = b.request_body(Some(body.build()));
    }
    for (status, name) in spec.ok {
        let response = if route.endpoint == Endpoint::OpenApi {
            ResponseBuilder::new()
                .description("The OpenAPI 3.1 document")
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(ObjectBuilder::new().schema_type(Type::Object)))
                        .build(),
                )
        } else if route.endpoint == Endpoint::Metrics {
            ResponseBuilder::new()
                .description("Every atc_ family, ending in `# EOF`")
                .content(
                    crate::metrics::scrape::CONTENT_TYPE,
                    ContentBuilder::new()
                        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                        .build(),
                )
        } else {
            ResponseBuilder::new()
                .description(*name)
                .content("application/json", json_content(name))
        };
        b = b.response(status.to_string(), response.build());
    }
    if let Some((server, client)) = spec.socket {
        let frames = SocketFrames {
            server: schema_ref(server),
            client: client.map(schema_ref),
        };
        let frames = serde_json::to_value(frames).expect("two schema refs always serialize");
        b = b
            .response(
                "101",
                ResponseBuilder::new()
                    .description(format!(
                        "Switching Protocols: a WebSocket whose text frames the server sends are \
                         each one {server} (see x-websocket-frames)"
                    ))
                    .build(),
            )
            .extensions(Some(
                ExtensionsBuilder::new()
                    .add("x-websocket-frames", frames)
                    .build(),
            ));
    }
    for (status, description) in error_responses(route.public()) {
        let mut response = ResponseBuilder::new()
            .description(description.clone())
            .content("application/json", json_content("ErrorBody"));
        if route.endpoint == Endpoint::Spawn && status == ErrorCode::HostUnavailable.status() {
            response = response
                .description(format!("{description}. {SPAWN_ADMISSION}"))
                .header(
                    "Retry-After",
                    HeaderBuilder::new()
                        .schema(ObjectBuilder::new().schema_type(Type::Integer))
                        .description(Some(
                            "Seconds to wait before retrying; sent with `busy` and `memory_low`",
                        ))
                        .build(),
                );
        }
        if route.endpoint == Endpoint::Spawn && status == ErrorCode::UnsupportedOperation.status() {
            response = response.description(format!("{description}. {SPAWN_LIMITS}"));
        }
        b = b.response(status.to_string(), response.build());
    }
    if route.public() {
        // An empty requirement list overrides the document's bearer requirement.
        b = b.securities(Some(Vec::<SecurityRequirement>::new()));
    }
    b.build()
}

fn http_method(m: Method) -> HttpMethod {
    match m {
        Method::Get => HttpMethod::Get,
        Method::Post => HttpMethod::Post,
        Method::Patch => HttpMethod::Patch,
        Method::Delete => HttpMethod::Delete,
    }
}

/// Builds the document.
pub fn document() -> OpenApi {
    let mut doc = Schemas::openapi();
    doc.info = InfoBuilder::new()
        .title("atc")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(
            "The client API of atc, a daemon that hosts coding-agent CLIs in pseudo-terminals. \
             Every error answers its status with an ErrorBody; its code is from the closed \
             ErrorCode set.",
        ))
        .build();
    let mut paths = Paths::new();
    for route in ROUTES {
        let item = PathItem::new(http_method(route.method), build_operation(route));
        match paths.paths.get_mut(route.path) {
            Some(existing) => existing.merge_operations(item),
            None => {
                paths.paths.insert(route.path.to_string(), item);
            }
        }
    }
    doc.paths = paths;
    if let Some(components) = doc.components.as_mut() {
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
    doc.security = Some(vec![SecurityRequirement::new::<_, [&str; 0], &str>(
        BEARER,
        [],
    )]);
    // The closed code set with each code's status, for clients that map codes themselves.
    let statuses: serde_json::Map<String, serde_json::Value> = ErrorCode::ALL
        .into_iter()
        .map(|c| (c.as_str().to_string(), c.status().into()))
        .collect();
    doc.extensions = Some(
        ExtensionsBuilder::new()
            .add("x-error-status", serde_json::Value::Object(statuses))
            .build(),
    );
    doc
}

/// The document as JSON text, built once.
pub fn document_json() -> Result<&'static str, serde_json::Error> {
    static TEXT: OnceLock<String> = OnceLock::new();
    if let Some(text) = TEXT.get() {
        return Ok(text);
    }
    let text = serde_json::to_string(&document())?;
    Ok(TEXT.get_or_init(|| text))
}

/// `GET /v1/openapi.json`.
pub async fn serve() -> Result<HttpResponse, Error> {
    let text = document_json().map_err(|e| {
        tracing::error!(error = %e, "could not serialize the OpenAPI document");
        Error::Internal
    })?;
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_in_the_document_and_nothing_else() {
        let doc = serde_json::to_value(document()).expect("document serializes");
        let mut in_doc = Vec::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for method in item.as_object().expect("path item").keys() {
                if [
                    "get", "post", "patch", "delete", "put", "head", "options", "trace",
                ]
                .contains(&method.as_str())
                {
                    in_doc.push((method.to_uppercase(), path.clone()));
                }
            }
        }
        let mut in_table: Vec<_> = ROUTES
            .iter()
            .map(|r| (r.method.as_str().to_string(), r.path.to_string()))
            .collect();
        in_doc.sort();
        in_table.sort();
        assert_eq!(in_doc, in_table);
        assert_eq!(doc["openapi"], "3.1.0");
    }

    #[test]
    fn every_error_code_is_documented_with_its_status() {
        let doc = serde_json::to_value(document()).expect("document serializes");
        let op = &doc["paths"]["/v1/sessions/{id}"]["get"]["responses"];
        for code in ErrorCode::ALL {
            let description = op[code.status().to_string()]["description"]
                .as_str()
                .unwrap_or_default();
            assert!(
                description.contains(code.as_str()),
                "{code} is not under {}",
                code.status()
            );
        }
        let codes = doc["components"]["schemas"]["ErrorCode"]["enum"]
            .as_array()
            .expect("ErrorCode is an enum");
        assert_eq!(codes.len(), ErrorCode::ALL.len());
        for code in ErrorCode::ALL {
            assert_eq!(doc["x-error-status"][code.as_str()], code.status());
        }
    }

    #[test]
    fn the_spawns_refusals_that_pass_are_documented_with_retry_after() {
        let doc = serde_json::to_value(document()).expect("document serializes");
        let spawn = &doc["paths"]["/v1/sessions"]["post"]["responses"]["503"];
        assert_eq!(
            spawn["headers"]["Retry-After"]["schema"]["type"], "integer",
            "{spawn}"
        );
        let description = spawn["description"].as_str().unwrap_or_default();
        for word in [
            "host_unavailable",
            "busy",
            "memory_low",
            "availableMiB",
            "floorMiB",
        ] {
            assert!(description.contains(word), "{word}: {description}");
        }
        let get = &doc["paths"]["/v1/sessions/{id}"]["get"]["responses"]["503"];
        assert!(get["headers"].is_null(), "only a spawn is admitted: {get}");
    }
}
