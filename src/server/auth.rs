//! Who may talk to the daemon: the bearer token on every route but health, and the Origin
//! check on WebSocket upgrades. The daemon types into shells, so both are on by default.

use actix_web::http::header;
use actix_web::HttpRequest;

use crate::protocol::{DaemonError, ErrorCode};

/// Routes reachable without a token.
pub fn is_public(path: &str) -> bool {
    path == "/v1/health"
}

/// Checks the bearer token, from `Authorization` or (for WebSocket upgrades, which browsers
/// cannot give headers) the `access_token` query parameter.
pub fn check_token(req: &actix_web::dev::ServiceRequest, token: &str) -> Result<(), DaemonError> {
    let from_header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let from_query = || {
        if !req.headers().contains_key(header::UPGRADE) {
            return None;
        }
        req.query_string()
            .split('&')
            .find_map(|kv| kv.strip_prefix("access_token="))
    };
    match from_header.or_else(from_query) {
        Some(given) if constant_time_eq(given.as_bytes(), token.as_bytes()) => Ok(()),
        Some(_) => Err(unauthorized("the token is wrong")),
        None => Err(unauthorized("a token is required")),
    }
}

fn unauthorized(why: &str) -> DaemonError {
    DaemonError::new(
        ErrorCode::Unauthorized,
        format!(
            "{why}: send 'Authorization: Bearer <token>' with the token from <state dir>/token"
        ),
    )
}

/// Compares without an early exit, so timing does not tell how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A WebSocket upgrade may come with no Origin (non-browser clients), an Origin naming the
/// host the request was sent to, or one listed in config `allowedOrigins`.
pub fn check_origin(req: &HttpRequest, allowed: &[String]) -> Result<(), DaemonError> {
    let Some(origin) = req.headers().get(header::ORIGIN) else {
        return Ok(());
    };
    let refuse = || {
        DaemonError::new(
            ErrorCode::ForbiddenOrigin,
            "this Origin may not open sockets here; add it to allowedOrigins in the config",
        )
    };
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
            assert_eq!(e.code, ErrorCode::ForbiddenOrigin, "{bad}");
        }
    }

    #[test]
    fn token_compare() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
