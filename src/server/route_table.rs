//! The one table of HTTP routes: every (method, path) the daemon serves, and which endpoint
//! answers it. `routes::configure` registers exactly these with actix, the OpenAPI document
//! (`openapi.rs`) describes exactly these, and the auth middleware reads the public ones from
//! here, so the three cannot disagree. The table owns no behaviour: `routes::handler` maps each
//! [`Endpoint`] onto its handler with an exhaustive match, and `openapi::operation` onto its
//! description the same way, so a new endpoint does not compile until both exist.

/// The HTTP methods the API uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET (WebSocket upgrades too).
    Get,
    /// POST.
    Post,
    /// PATCH.
    Patch,
    /// DELETE.
    Delete,
}

impl Method {
    /// The actix method.
    pub fn http(self) -> actix_web::http::Method {
        match self {
            Method::Get => actix_web::http::Method::GET,
            Method::Post => actix_web::http::Method::POST,
            Method::Patch => actix_web::http::Method::PATCH,
            Method::Delete => actix_web::http::Method::DELETE,
        }
    }

    /// The upper-case name (`GET`).
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }
}

/// What answers a route: one per handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `GET /v1/health`.
    Health,
    /// `GET /v1/openapi.json`.
    OpenApi,
    /// `GET /v1/daemon`.
    Daemon,
    /// `POST /v1/daemon/quit`.
    Quit,
    /// `GET /v1/agents`.
    Agents,
    /// `GET /v1/sessions`.
    ListSessions,
    /// `POST /v1/sessions`.
    Spawn,
    /// `GET /v1/sessions/{id}`.
    GetSession,
    /// `PATCH /v1/sessions/{id}`.
    UpdateSession,
    /// `DELETE /v1/sessions/{id}`.
    Forget,
    /// `POST /v1/sessions/{id}/input`.
    Input,
    /// `POST /v1/sessions/{id}/submit`.
    Submit,
    /// `POST /v1/sessions/{id}/resize`.
    Resize,
    /// `POST /v1/sessions/{id}/ack`.
    Ack,
    /// `GET /v1/sessions/{id}/screen`.
    Screen,
    /// `GET /v1/sessions/{id}/workspace`.
    Workspace,
    /// `GET /v1/sessions/{id}/resume-command`.
    ResumeCommand,
    /// `POST /v1/sessions/{id}/kill`.
    Kill,
    /// `POST /v1/sessions/{id}/revive`.
    Revive,
    /// `POST /v1/sessions/{id}/suspend`.
    Suspend,
    /// `GET /v1/sessions/{id}/auth`.
    AuthStatus,
    /// `POST /v1/sessions/{id}/auth/revoke`.
    AuthRevoke,
    /// `POST /v1/sessions/{id}/auth/rebind`.
    AuthRebind,
    /// `GET /v1/sessions/{id}/attach` (WebSocket).
    Attach,
    /// `GET /v1/fleet`.
    Fleet,
    /// `POST /v1/fleet/restore`.
    Restore,
    /// `GET /v1/workspaces/orphans`.
    Orphans,
    /// `POST /v1/workspaces/prune`.
    Prune,
    /// `GET /v1/dirs`.
    Dirs,
    /// `GET /v1/permissions`.
    Permissions,
    /// `POST /v1/permissions/{id}`.
    Respond,
    /// `GET /v1/events` (WebSocket).
    Events,
    /// `GET /v1/events/trail`.
    Trail,
    /// `POST /v1/tickets`.
    Tickets,
    /// `GET /v1/principals`.
    Principals,
    /// `GET /metrics` (Prometheus; outside `/v1`, where scrapers look).
    Metrics,
}

/// One route: a method on a path (actix's `{name}` segments, which are also OpenAPI's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The method.
    pub method: Method,
    /// The full path, `/v1/...` (or `/metrics`).
    pub path: &'static str,
    /// What answers it.
    pub endpoint: Endpoint,
    /// Who may call it.
    pub access: Access,
}

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, without a token.
    Public,
    /// The owner and principals (who see only what is in their reach).
    Token,
    /// Only the owner's token, acting as itself (spec §2.5): the daemon's own controls,
    /// broker bindings, metrics, the principal listing, and the workspaces no listed session
    /// owns (no principal's reach holds them).
    Owner,
}

impl Route {
    /// Served without a token.
    pub fn public(&self) -> bool {
        self.access == Access::Public
    }
}

const fn route(method: Method, path: &'static str, endpoint: Endpoint) -> Route {
    Route {
        method,
        path,
        endpoint,
        access: Access::Token,
    }
}

const fn public(method: Method, path: &'static str, endpoint: Endpoint) -> Route {
    Route {
        method,
        path,
        endpoint,
        access: Access::Public,
    }
}

const fn owner(method: Method, path: &'static str, endpoint: Endpoint) -> Route {
    Route {
        method,
        path,
        endpoint,
        access: Access::Owner,
    }
}

use Endpoint as E;
use Method::{Delete, Get, Patch, Post};

/// Every route, in registration order.
pub const ROUTES: &[Route] = &[
    public(Get, "/v1/health", E::Health),
    public(Get, "/v1/openapi.json", E::OpenApi),
    route(Get, "/v1/daemon", E::Daemon),
    owner(Post, "/v1/daemon/quit", E::Quit),
    route(Get, "/v1/agents", E::Agents),
    route(Get, "/v1/sessions", E::ListSessions),
    route(Post, "/v1/sessions", E::Spawn),
    route(Get, "/v1/sessions/{id}", E::GetSession),
    route(Patch, "/v1/sessions/{id}", E::UpdateSession),
    route(Delete, "/v1/sessions/{id}", E::Forget),
    route(Post, "/v1/sessions/{id}/input", E::Input),
    route(Post, "/v1/sessions/{id}/submit", E::Submit),
    route(Post, "/v1/sessions/{id}/resize", E::Resize),
    route(Post, "/v1/sessions/{id}/ack", E::Ack),
    route(Get, "/v1/sessions/{id}/screen", E::Screen),
    route(Get, "/v1/sessions/{id}/workspace", E::Workspace),
    route(Get, "/v1/sessions/{id}/resume-command", E::ResumeCommand),
    route(Post, "/v1/sessions/{id}/kill", E::Kill),
    route(Post, "/v1/sessions/{id}/revive", E::Revive),
    route(Post, "/v1/sessions/{id}/suspend", E::Suspend),
    owner(Get, "/v1/sessions/{id}/auth", E::AuthStatus),
    owner(Post, "/v1/sessions/{id}/auth/revoke", E::AuthRevoke),
    owner(Post, "/v1/sessions/{id}/auth/rebind", E::AuthRebind),
    route(Get, "/v1/sessions/{id}/attach", E::Attach),
    route(Get, "/v1/fleet", E::Fleet),
    owner(Post, "/v1/fleet/restore", E::Restore),
    owner(Get, "/v1/workspaces/orphans", E::Orphans),
    owner(Post, "/v1/workspaces/prune", E::Prune),
    route(Get, "/v1/dirs", E::Dirs),
    route(Get, "/v1/permissions", E::Permissions),
    route(Post, "/v1/permissions/{id}", E::Respond),
    route(Get, "/v1/events", E::Events),
    route(Get, "/v1/events/trail", E::Trail),
    route(Post, "/v1/tickets", E::Tickets),
    owner(Get, "/v1/principals", E::Principals),
    owner(Get, "/metrics", E::Metrics),
];

/// Whether `path` is served without a token (whatever the method: a wrong one answers
/// `unknown_method`, which needs no token either).
pub fn is_public(path: &str) -> bool {
    ROUTES.iter().any(|r| r.public() && r.path == path) || is_page(path)
}

/// Whether the route `method` `path` is one only the owner may call.
pub fn is_owner_only(method: &actix_web::http::Method, path: &str) -> bool {
    ROUTES.iter().any(|r| {
        r.access == Access::Owner && r.method.http() == method && template_matches(r.path, path)
    })
}

/// Where the browser page's files are served from (`page.rs`).
pub const PAGE_ASSETS: &str = "/assets/";

/// Whether `path` is the browser page (`/`) or one of its files. They are outside the API
/// and its document, and public: they carry no data, and the token is typed into the page.
pub fn is_page(path: &str) -> bool {
    path == "/" || path.starts_with(PAGE_ASSETS)
}

/// Whether `path` is a WebSocket route's (attach, events): the only upgrades a ticket opens.
pub fn is_socket(path: &str) -> bool {
    ROUTES
        .iter()
        .filter(|r| matches!(r.endpoint, Endpoint::Attach | Endpoint::Events))
        .any(|r| template_matches(r.path, path))
}

/// Whether `path` fills `template`, each `{name}` segment with one non-empty segment.
fn template_matches(template: &str, path: &str) -> bool {
    let (mut t, mut p) = (template.split('/'), path.split('/'));
    loop {
        match (t.next(), p.next()) {
            (None, None) => return true,
            (Some(ts), Some(ps)) if ts.starts_with('{') && !ps.is_empty() => {}
            (Some(ts), Some(ps)) if ts == ps => {}
            _ => return false,
        }
    }
}

/// Routes gathered as the router registers them: the routes of one path together, and the
/// paths under one dynamic segment (`/v1/sessions/{id}/...`) under that segment's prefix.
///
/// actix matches a path with a `{name}` segment by running a regex, one per registered resource
/// it tries, in order; with a resource per route a `POST /v1/sessions/{id}/kill` ran a dozen
/// before it matched, about a third of such a request's CPU (docs/performance-log.md, "Spawns
/// and requests, 2026-12-03"). Under a scope the prefix's regex runs once and the rest are
/// plain comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteScope {
    /// The dynamic prefix (`/v1/sessions/{id}`), or `None` for the paths with no `{name}`.
    pub prefix: Option<&'static str>,
    /// The paths, relative to `prefix` (`""` for the prefix itself), in table order.
    pub paths: Vec<ScopedPath>,
}

/// One path of a [`RouteScope`] and every route on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopedPath {
    /// The path after the scope's prefix (the whole path when there is none).
    pub rest: &'static str,
    /// The routes on it, one per method.
    pub routes: Vec<Route>,
}

/// [`ROUTES`] gathered into scopes, each in the order of its first route.
pub fn scopes() -> Vec<RouteScope> {
    gather(ROUTES)
}

fn gather(routes: &[Route]) -> Vec<RouteScope> {
    let mut scopes: Vec<RouteScope> = Vec::new();
    for r in routes {
        let (prefix, rest) = split_at_first_name(r.path);
        let at = match scopes.iter().position(|s| s.prefix == prefix) {
            Some(at) => at,
            None => {
                scopes.push(RouteScope {
                    prefix,
                    paths: Vec::new(),
                });
                scopes.len() - 1
            }
        };
        let paths = &mut scopes[at].paths;
        match paths.iter_mut().find(|p| p.rest == rest) {
            Some(path) => path.routes.push(*r),
            None => paths.push(ScopedPath {
                rest,
                routes: vec![*r],
            }),
        }
    }
    scopes
}

/// Splits a template after its first `{name}` segment: `/v1/sessions/{id}/input` is
/// (`/v1/sessions/{id}`, `/input`); a template without one is all rest.
fn split_at_first_name(path: &'static str) -> (Option<&'static str>, &'static str) {
    let Some(open) = path.find("/{") else {
        return (None, path);
    };
    let end = path[open + 1..]
        .find('/')
        .map_or(path.len(), |slash| open + 1 + slash);
    (Some(&path[..end]), &path[end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_method_and_path_is_listed_twice() {
        for (i, a) in ROUTES.iter().enumerate() {
            for b in &ROUTES[i + 1..] {
                assert!(
                    (a.method, a.path) != (b.method, b.path),
                    "{} {} is listed twice",
                    a.method.as_str(),
                    a.path
                );
            }
        }
    }

    #[test]
    fn only_health_the_document_and_the_page_are_public() {
        assert!(is_public("/v1/health"));
        assert!(is_public("/v1/openapi.json"));
        assert!(is_public("/"));
        assert!(is_public("/assets/app.js"));
        assert!(!is_public("/v1/daemon"));
        assert!(!is_public("/v1/sessions"));
        assert!(!is_public("/v1/tickets"));
        assert!(!is_public("/v1/openapi.json/x"));
        assert!(!is_public("/v1/assets/x"));
        assert!(!is_public("/assets"));
        assert!(!is_public("/metrics"));
    }

    #[test]
    fn the_owner_only_routes_are_the_daemons_controls_bindings_and_metrics() {
        use actix_web::http::Method as M;
        assert!(is_owner_only(&M::POST, "/v1/daemon/quit"));
        assert!(is_owner_only(&M::POST, "/v1/fleet/restore"));
        assert!(is_owner_only(&M::GET, "/v1/sessions/x/auth"));
        assert!(is_owner_only(&M::POST, "/v1/sessions/x/auth/revoke"));
        assert!(is_owner_only(&M::POST, "/v1/sessions/x/auth/rebind"));
        assert!(is_owner_only(&M::GET, "/metrics"));
        assert!(!is_owner_only(&M::GET, "/v1/fleet"));
        assert!(!is_owner_only(&M::GET, "/v1/sessions/x"));
        assert!(!is_owner_only(&M::POST, "/v1/sessions"));
    }

    #[test]
    fn only_the_two_sockets_are_socket_routes() {
        assert!(is_socket("/v1/events"));
        assert!(is_socket("/v1/sessions/abc/attach"));
        assert!(!is_socket("/v1/sessions//attach"));
        assert!(!is_socket("/v1/sessions/abc/attach/x"));
        assert!(!is_socket("/v1/sessions/abc"));
        assert!(!is_socket("/v1/events/trail"));
        assert!(!is_socket("/v1/tickets"));
    }

    #[test]
    fn a_template_splits_after_its_first_name() {
        assert_eq!(split_at_first_name("/v1/sessions"), (None, "/v1/sessions"));
        assert_eq!(
            split_at_first_name("/v1/sessions/{id}"),
            (Some("/v1/sessions/{id}"), "")
        );
        assert_eq!(
            split_at_first_name("/v1/sessions/{id}/auth/revoke"),
            (Some("/v1/sessions/{id}"), "/auth/revoke")
        );
        assert_eq!(
            split_at_first_name("/a/{x}/b/{y}"),
            (Some("/a/{x}"), "/b/{y}")
        );
    }

    #[test]
    fn gathering_keeps_every_route_once_and_the_table_order() {
        let scopes = scopes();
        let mut regathered = Vec::new();
        for scope in &scopes {
            for path in &scope.paths {
                for r in &path.routes {
                    assert_eq!(
                        format!("{}{}", scope.prefix.unwrap_or(""), path.rest),
                        r.path
                    );
                    regathered.push(*r);
                }
            }
        }
        assert_eq!(regathered.len(), ROUTES.len());
        for r in ROUTES {
            assert!(
                regathered.contains(r),
                "{} {} was lost",
                r.method.as_str(),
                r.path
            );
        }
        // Each prefix and each path appears once, so no request has two candidates.
        for (i, a) in scopes.iter().enumerate() {
            assert!(scopes[i + 1..].iter().all(|b| b.prefix != a.prefix));
            for (j, p) in a.paths.iter().enumerate() {
                assert!(a.paths[j + 1..].iter().all(|q| q.rest != p.rest));
            }
        }
    }

    #[test]
    fn the_session_routes_share_one_scope() {
        let scopes = gather(&[
            route(Get, "/v1/sessions", E::ListSessions),
            route(Get, "/v1/sessions/{id}", E::GetSession),
            route(Post, "/v1/sessions", E::Spawn),
            route(Post, "/v1/sessions/{id}/kill", E::Kill),
            route(Delete, "/v1/sessions/{id}", E::Forget),
            route(Post, "/v1/permissions/{id}", E::Respond),
        ]);
        // Each scope as its prefix and its paths, each path with how many routes it has.
        type Shape<'a> = Vec<(Option<&'a str>, Vec<(&'a str, usize)>)>;
        let shape: Shape = scopes
            .iter()
            .map(|s| {
                let paths = s.paths.iter().map(|p| (p.rest, p.routes.len())).collect();
                (s.prefix, paths)
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                (None, vec![("/v1/sessions", 2)]),
                (Some("/v1/sessions/{id}"), vec![("", 2), ("/kill", 1)]),
                (Some("/v1/permissions/{id}"), vec![("", 1)]),
            ]
        );
    }
}
