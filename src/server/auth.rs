//! Who may talk to the daemon: the bearer token on every route but the public ones (health,
//! the OpenAPI document and the browser page, marked in `route_table.rs`), and the Origin
//! check on WebSocket upgrades. The daemon types into shells, so both are on by default.
//! Which tokens are accepted right now is `tokens.rs`'s business; a browser's WebSocket
//! upgrade may instead spend a single-use ticket (`tickets.rs`), and only a socket route's
//! upgrade may.

use std::time::Instant;

use actix_web::http::header;
use actix_web::{HttpMessage, HttpRequest};

use super::tickets::Tickets;
use super::tokens::{TokenState, Tokens, Who};

/// Why a request or socket is refused before any route runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The token file could not be used at the last (re-)read: fail closed.
    #[error(
        "no token is accepted until the daemon's token file is fixed and re-read (SIGHUP); \
         the daemon log says what is wrong with it"
    )]
    TokenFileInvalid,
    /// No token was presented.
    #[error("a token is required: send 'Authorization: Bearer <token>' with the token from <state dir>/token")]
    Missing,
    /// A token that is not accepted.
    #[error("the token is wrong: send 'Authorization: Bearer <token>' with the token from <state dir>/token")]
    Wrong,
    /// An open socket whose token was rotated out (sent as its last `error` frame).
    #[error(
        "the token this socket opened with is no longer accepted; reconnect with the current one"
    )]
    Revoked,
    /// A `?ticket=` that is unknown, already used or expired (or whose token was rotated out).
    #[error(
        "the ticket is unknown, used or expired: a ticket opens one socket, soon after \
         POST /v1/tickets gave it; ask for a fresh one"
    )]
    TicketRefused,
    /// A `?ticket=` on a request that is not a socket route's upgrade.
    #[error(
        "a ticket only opens a WebSocket (attach, events); send 'Authorization: Bearer <token>' \
         with the token from <state dir>/token"
    )]
    TicketNotHere,
    /// A WebSocket upgrade from an Origin that may not open sockets.
    #[error("this Origin may not open sockets here; add it to allowedOrigins in the config")]
    ForbiddenOrigin,
    /// A route only the owner's token may use, asked by (or as) a principal.
    #[error("only the owner's token may use this route, and not through X-Atc-As")]
    OwnerOnly,
    /// `X-Atc-As` names no principal.
    #[error("'{id}' is not a principal of this daemon: X-Atc-As takes an id from config's principals (atc principals lists them)")]
    UnknownPrincipal {
        /// What was asked for (at most 64 characters of it).
        id: String,
    },
    /// `X-Atc-As` is not a principal's id.
    #[error(
        "X-Atc-As takes a principal's id: 1 to 64 lower-case letters, digits, '-' and '_', starting with a letter or a digit"
    )]
    BadActAs,
    /// A spawn on a target not granted to the request's principal.
    #[error("target '{target}' is not granted to this principal; config's principals lists what each may use")]
    TargetForbidden {
        /// The target asked for.
        target: String,
    },
}

/// Routes reachable without a token.
pub fn is_public(path: &str) -> bool {
    super::route_table::is_public(path)
}

/// The token a request presents: from `Authorization` or (for WebSocket upgrades, which
/// browsers cannot give headers) the `access_token` query parameter.
pub fn presented_token<'a>(headers: &'a header::HeaderMap, query: &'a str) -> Option<&'a str> {
    let from_header = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_credentials);
    let from_query = || {
        if !headers.contains_key(header::UPGRADE) {
            return None;
        }
        query_param(query, "access_token")
    };
    from_header.or_else(from_query)
}

/// The token of a `Bearer` credential, per RFC 7235 §2.1: the scheme is case-insensitive, it
/// is separated from the token by one or more spaces, and the field value may have optional
/// whitespace (spaces, tabs) around it. `None` for another scheme or no token.
pub fn bearer_credentials(value: &str) -> Option<&str> {
    let ows = |c: char| c == ' ' || c == '\t';
    let value = value.trim_matches(ows);
    let (scheme, rest) = value.split_once(ows)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim_start_matches(ows);
    // A token68 has no whitespace inside; anything after one is not a bearer credential.
    if token.is_empty() || token.contains(ows) {
        return None;
    }
    Some(token)
}

/// The `ticket` query parameter, if any.
pub fn presented_ticket(query: &str) -> Option<&str> {
    query_param(query, "ticket")
}

/// The raw value of the first `name=` pair of a query string.
fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|kv| {
        kv.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('='))
    })
}

/// What a request got in with: the bearer token it presented, or the one that asked for the
/// ticket it spent, and for a ticket the principal it was asked as. The auth middleware puts
/// it in the request's extensions; a socket watches the token, to close when it is rotated
/// out. `Debug` never shows the token.
#[derive(Clone)]
pub struct Admitted {
    token: String,
    /// Whom the token speaks for, as the check found it.
    who: Who,
    /// `Some` when a ticket let it in: the `X-Atc-As` the ticket was asked with.
    ticket_as: Option<Option<String>>,
}

impl std::fmt::Debug for Admitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Admitted(redacted)")
    }
}

impl Admitted {
    /// The token a request got in with; empty for a public route's request, which presented
    /// none (an empty token is accepted by nothing, so a socket holding it closes at once).
    pub fn of(req: &HttpRequest) -> String {
        req.extensions()
            .get::<Admitted>()
            .map(|a| a.token.clone())
            .unwrap_or_default()
    }

    /// Whom its token speaks for.
    pub fn who(&self) -> &Who {
        &self.who
    }

    /// The principal the request asks to act as: the ticket's, when a ticket let it in,
    /// else the `X-Atc-As` header's.
    pub fn acting_as(&self, headers: &header::HeaderMap) -> Result<Option<String>, AuthError> {
        match &self.ticket_as {
            Some(acting_as) => Ok(acting_as.clone()),
            None => super::caller::act_as(headers),
        }
    }
}

/// Checks the request's token against the tokens accepted now (the owner's or any
/// principal's, see [`TokenState::who`]), or spends its ticket when it is the upgrade of a
/// socket route and presents no token.
pub fn check_token(
    req: &actix_web::dev::ServiceRequest,
    tokens: &Tokens,
    tickets: &Tickets,
) -> Result<Admitted, AuthError> {
    let given = presented_token(req.headers(), req.query_string());
    let ticket = match (given, presented_ticket(req.query_string())) {
        (None, Some(ticket)) => {
            let upgrade = req.headers().contains_key(header::UPGRADE);
            if !upgrade || !super::route_table::is_socket(req.path()) {
                return Err(AuthError::TicketNotHere);
            }
            // Spent whatever follows: a ticket is good for one try.
            Some(tickets.redeem(ticket, Instant::now()))
        }
        _ => None,
    };
    tokens.with_current(|current| {
        let TokenState::Valid(set) = current else {
            return Err(AuthError::TokenFileInvalid);
        };
        match (given, ticket) {
            (Some(given), _) => match set.who(given.as_bytes()) {
                Some(who) => Ok(Admitted {
                    token: given.to_string(),
                    who,
                    ticket_as: None,
                }),
                None => Err(AuthError::Wrong),
            },
            (None, Some(Some(spent))) => match set.who(spent.token.as_bytes()) {
                Some(who) => Ok(Admitted {
                    token: spent.token,
                    who,
                    ticket_as: Some(spent.acting_as),
                }),
                None => Err(AuthError::TicketRefused),
            },
            (None, Some(None)) => Err(AuthError::TicketRefused),
            (None, None) => Err(AuthError::Missing),
        }
    })
}

/// Lets the request in, carrying what it got in with.
pub fn admit(req: &actix_web::dev::ServiceRequest, admitted: Admitted) {
    req.extensions_mut().insert(admitted);
}

/// A WebSocket upgrade may come with no Origin (non-browser clients), an Origin naming the
/// host the request was sent to, or one listed in config `allowedOrigins`.
pub fn check_origin(req: &HttpRequest, allowed: &[String]) -> Result<(), AuthError> {
    let Some(origin) = req.headers().get(header::ORIGIN) else {
        return Ok(());
    };
    let refuse = || AuthError::ForbiddenOrigin;
    let origin = origin.to_str().map_err(|_| refuse())?;
    if allowed.iter().any(|a| a == origin) {
        return Ok(());
    }
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .ok_or_else(refuse)?;
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .ok_or_else(refuse)?;
    if authority.eq_ignore_ascii_case(host) {
        Ok(())
    } else {
        Err(refuse())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    #[test]
    fn origin_rules() {
        let allowed = vec!["https://ui.example".to_string()];
        let req = |origin: Option<&str>| {
            let mut r = TestRequest::default().insert_header((header::HOST, "127.0.0.1:7767"));
            if let Some(o) = origin {
                r = r.insert_header((header::ORIGIN, o));
            }
            r.to_http_request()
        };
        assert!(check_origin(&req(None), &allowed).is_ok());
        assert!(check_origin(&req(Some("http://127.0.0.1:7767")), &allowed).is_ok());
        assert!(check_origin(&req(Some("https://ui.example")), &allowed).is_ok());
        for bad in [
            "http://evil.example",
            "http://127.0.0.1:9999",
            "null",
            "file://",
        ] {
            let e = check_origin(&req(Some(bad)), &allowed).unwrap_err();
            assert_eq!(e, AuthError::ForbiddenOrigin, "{bad}");
        }
    }

    #[test]
    fn bearer_scheme_is_case_insensitive_and_whitespace_tolerant() {
        let t = "abc123";
        for ok in [
            "Bearer abc123",
            "bearer abc123",
            "BEARER abc123",
            "bEaReR abc123",
            "Bearer   abc123",
            "  Bearer abc123  ",
            "\tbearer\tabc123\t",
        ] {
            assert_eq!(bearer_credentials(ok), Some(t), "{ok:?}");
        }
        for bad in [
            "Basic abc123",
            "Bearer",
            "Bearer ",
            "Bearerabc123",
            "Bearer abc 123",
            "Bear abc123",
            "",
        ] {
            assert_eq!(bearer_credentials(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_ticket_is_one_query_parameter() {
        assert_eq!(presented_ticket("cols=80&ticket=abc&rows=2"), Some("abc"));
        assert_eq!(presented_ticket("xticket=abc"), None);
        assert_eq!(presented_ticket(""), None);
        let admitted = Admitted {
            token: "secret".into(),
            who: Who::Owner,
            ticket_as: None,
        };
        assert!(!format!("{admitted:?}").contains("secret"));
    }

    #[test]
    fn the_query_token_counts_only_on_upgrades() {
        let plain = TestRequest::default().to_http_request();
        assert_eq!(presented_token(plain.headers(), "access_token=x"), None);
        let upgrade = TestRequest::default()
            .insert_header((header::UPGRADE, "websocket"))
            .to_http_request();
        assert_eq!(
            presented_token(upgrade.headers(), "a=1&access_token=x"),
            Some("x")
        );
        let both = TestRequest::default()
            .insert_header((header::UPGRADE, "websocket"))
            .insert_header((header::AUTHORIZATION, "bearer y"))
            .to_http_request();
        assert_eq!(presented_token(both.headers(), "access_token=x"), Some("y"));
    }
}
