//! The slice of HTTP/1.1 the floor answers: a request head, the two routes the bench's clients
//! use (the attach upgrade and input), and the answers to them.
//!
//! The routes are atc's own (`/v1/sessions/{id}/attach?cols=&rows=` and
//! `/v1/sessions/{id}/input`), so the bench's attach client and input call reach the floor
//! unchanged. The bearer token is not checked: the floor listens on loopback for the length of
//! one run. Pure parsing, no I/O.

use atc_protocol::SessionId;
use thiserror::Error;

/// The largest request head the floor reads; atc's clients send a few hundred bytes.
pub const MAX_HEAD: usize = 8 << 10;

/// A request head the floor cannot read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum HeadError {
    /// No blank line within [`MAX_HEAD`] bytes.
    #[error("request head over {MAX_HEAD} bytes")]
    TooLong,
    /// Not `METHOD TARGET HTTP/1.x` followed by `name: value` lines.
    #[error("malformed request head")]
    Malformed,
}

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    /// `GET`, `POST`, …
    pub method: String,
    /// Path and query as sent.
    pub target: String,
    /// Header names lower-cased, values trimmed.
    headers: Vec<(String, String)>,
}

impl RequestHead {
    /// The first value of header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether a comma-separated header lists `token` (case-insensitive), as `Connection: keep-alive, Upgrade` does.
    fn lists(&self, name: &str, token: &str) -> bool {
        self.header(name)
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    }

    /// The body length, 0 without a `Content-Length`.
    pub fn content_length(&self) -> Result<usize, HeadError> {
        self.header("content-length")
            .map_or(Ok(0), |v| v.parse().map_err(|_| HeadError::Malformed))
    }
}

/// Parses the request head at the start of `buf`: `Ok(None)` until its blank line has arrived,
/// else the head and its length in bytes (the body, or WebSocket frames, follow).
pub fn parse_head(buf: &[u8]) -> Result<Option<(RequestHead, usize)>, HeadError> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if buf.len() > MAX_HEAD {
            Err(HeadError::TooLong)
        } else {
            Ok(None)
        };
    };
    if end > MAX_HEAD {
        return Err(HeadError::TooLong);
    }
    let text = std::str::from_utf8(&buf[..end]).map_err(|_| HeadError::Malformed)?;
    let mut lines = text.split("\r\n");
    let mut start = lines.next().unwrap_or_default().split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (start.next(), start.next(), start.next(), start.next())
    else {
        return Err(HeadError::Malformed);
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || !target.starts_with('/') {
        return Err(HeadError::Malformed);
    }
    let headers = lines
        .map(|line| {
            let (name, value) = line.split_once(':').ok_or(HeadError::Malformed)?;
            Ok((name.trim().to_ascii_lowercase(), value.trim().to_string()))
        })
        .collect::<Result<Vec<_>, HeadError>>()?;
    let head = RequestHead {
        method: method.to_string(),
        target: target.to_string(),
        headers,
    };
    Ok(Some((head, end + 4)))
}

/// What a request asks of the floor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `GET /v1/sessions/{id}/attach` as a WebSocket upgrade with this `Sec-WebSocket-Key`.
    Attach {
        /// The session.
        session: SessionId,
        /// The client's key, answered in `Sec-WebSocket-Accept`.
        key: String,
    },
    /// `POST /v1/sessions/{id}/input`: the body goes to the PTY.
    Input(SessionId),
    /// Anything else: 404.
    Unknown,
}

/// Routes a request by method and path (the query, cols and rows, is ignored: a floor session
/// keeps the size it was spawned at, which is the size the bench attaches at).
pub fn route(head: &RequestHead) -> Route {
    let path = head.target.split('?').next().unwrap_or_default();
    let Some(rest) = path.strip_prefix("/v1/sessions/") else {
        return Route::Unknown;
    };
    let Some((id, action)) = rest.split_once('/') else {
        return Route::Unknown;
    };
    let Ok(session) = id.parse::<SessionId>() else {
        return Route::Unknown;
    };
    match (head.method.as_str(), action) {
        ("GET", "attach")
            if head.lists("upgrade", "websocket") && head.lists("connection", "upgrade") =>
        {
            match head.header("sec-websocket-key") {
                Some(key) if !key.is_empty() => Route::Attach {
                    session,
                    key: key.to_string(),
                },
                _ => Route::Unknown,
            }
        }
        ("POST", "input") => Route::Input(session),
        _ => Route::Unknown,
    }
}

/// The 101 answer to an upgrade with `key`.
pub fn upgrade_response(key: &str) -> String {
    let accept = actix_http::ws::hash_key(key.as_bytes());
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        String::from_utf8_lossy(&accept)
    )
}

/// The answer to input that reached the PTY; the connection closes after it.
pub const NO_CONTENT: &str = "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n";

/// The answer to input over the floor's limit; the connection closes after it.
pub const TOO_LARGE: &str =
    "HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// The answer to anything else; the connection closes after it.
pub const NOT_FOUND: &str =
    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "5f0c2a1e-8b7d-4c3e-9f10-0123456789ab";

    fn head(text: &str) -> RequestHead {
        parse_head(text.as_bytes())
            .expect("parses")
            .expect("complete")
            .0
    }

    #[test]
    fn a_head_is_read_only_once_its_blank_line_is_there() {
        let text = format!(
            "GET /v1/sessions/{ID}/attach?cols=120&rows=40 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\nFRAMES"
        );
        let end = text.find("FRAMES").expect("marker");
        assert_eq!(parse_head(&text.as_bytes()[..end - 1]), Ok(None));
        let (h, used) = parse_head(text.as_bytes()).expect("ok").expect("complete");
        assert_eq!(used, end);
        assert_eq!(h.method, "GET");
        assert_eq!(h.header("upgrade"), Some("websocket"));
        assert_eq!(h.header("host"), Some("x"));
    }

    #[test]
    fn bad_heads_are_refused() {
        assert_eq!(parse_head(b"GET\r\n\r\n"), Err(HeadError::Malformed));
        assert_eq!(parse_head(b"GET / SPDY\r\n\r\n"), Err(HeadError::Malformed));
        assert_eq!(
            parse_head(b"GET / HTTP/1.1\r\nno colon\r\n\r\n"),
            Err(HeadError::Malformed)
        );
        assert_eq!(parse_head(&[b'a'; MAX_HEAD + 1]), Err(HeadError::TooLong));
        let h = head("POST / HTTP/1.1\r\nContent-Length: nope\r\n\r\n");
        assert_eq!(h.content_length(), Err(HeadError::Malformed));
    }

    #[test]
    fn routes_are_atcs_attach_and_input() {
        let id: SessionId = ID.parse().expect("a session id");
        let attach = head(&format!(
            "GET /v1/sessions/{ID}/attach?cols=120&rows=40 HTTP/1.1\r\nUpgrade: WebSocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        ));
        assert_eq!(
            route(&attach),
            Route::Attach {
                session: id,
                key: "dGhlIHNhbXBsZSBub25jZQ==".into()
            }
        );
        let no_upgrade = head(&format!("GET /v1/sessions/{ID}/attach HTTP/1.1\r\n\r\n"));
        assert_eq!(route(&no_upgrade), Route::Unknown);
        let input = head(&format!(
            "POST /v1/sessions/{ID}/input HTTP/1.1\r\nContent-Length: 3\r\n\r\n"
        ));
        assert_eq!(route(&input), Route::Input(id));
        assert_eq!(input.content_length(), Ok(3));
        assert_eq!(
            route(&head("POST /v1/sessions/nope/input HTTP/1.1\r\n\r\n")),
            Route::Unknown
        );
        assert_eq!(
            route(&head("GET /v1/daemon HTTP/1.1\r\n\r\n")),
            Route::Unknown
        );
    }

    #[test]
    fn the_upgrade_answer_carries_the_rfc_accept_key() {
        // The worked example of RFC 6455 §1.3.
        let r = upgrade_response("dGhlIHNhbXBsZSBub25jZQ==");
        assert!(r.starts_with("HTTP/1.1 101 "), "{r}");
        assert!(
            r.contains("\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"),
            "{r}"
        );
        assert!(r.ends_with("\r\n\r\n"));
    }
}
