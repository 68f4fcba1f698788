//! The daemon's URL paths as the CLI builds them. Session names come from users and may hold
//! spaces, slashes or non-ASCII text, so every user-supplied segment is percent-encoded here
//! and nowhere else; callers pass the results to `DaemonClient` unchanged.

use std::fmt::Write as _;

/// `GET /v1/sessions`, `POST /v1/sessions`.
pub const SESSIONS: &str = "/v1/sessions";

/// `/v1/sessions/{id}`: the session itself (GET, PATCH, DELETE). `id` may be a uuid or a name.
pub fn session(id: impl std::fmt::Display) -> String {
    format!("{SESSIONS}/{}", encode_segment(&id.to_string()))
}

/// `/v1/sessions/{id}/{action}` for the per-session verbs (`kill`, `revive`, `screen`, ...).
/// `action` is one of our own literals and is not encoded.
pub fn session_action(id: impl std::fmt::Display, action: &str) -> String {
    format!("{}/{action}", session(id))
}

/// `DELETE /v1/sessions/{id}?confirm=TOKEN`, the second step of a forget that destroys a host.
pub fn forget_confirmed(id: impl std::fmt::Display, confirm_token: &str) -> String {
    format!("{}?confirm={}", session(id), encode_segment(confirm_token))
}

/// `/v1/sessions/{id}?force=true`: forget a session even when removing its workspace loses
/// work.
pub fn forget_forced(id: impl std::fmt::Display) -> String {
    format!("{}?force=true", session(id))
}

/// The attach WebSocket for a session at the given client size.
pub fn attach(id: impl std::fmt::Display, cols: u16, rows: u16) -> String {
    format!("{}?cols={cols}&rows={rows}", session_action(id, "attach"))
}

/// The attach WebSocket for a session at the given client size, in `mode` (a watcher's
/// input is refused and its size does not count).
pub fn attach_as(
    id: impl std::fmt::Display,
    cols: u16,
    rows: u16,
    mode: atc_protocol::AttachMode,
) -> String {
    let path = attach(id, cols, rows);
    match mode.query_value() {
        Some(value) => format!("{path}&mode={value}"),
        None => path,
    }
}

/// `GET /v1/events`: the fleet's events socket.
pub const EVENTS: &str = "/v1/events";

/// `GET /v1/events/trail`: the event trail from `cursor` (the start when `None`), at most
/// `limit` events, waiting up to `wait_ms` for one when there are none yet.
pub fn trail(cursor: Option<&str>, limit: u32, wait_ms: u64) -> String {
    let mut path = format!("/v1/events/trail?limit={limit}&waitMs={wait_ms}");
    if let Some(cursor) = cursor {
        path.push_str("&cursor=");
        path.push_str(&encode_segment(cursor));
    }
    path
}

/// `POST /v1/fleet/restore`: revive every session that died with an old daemon.
pub const FLEET_RESTORE: &str = "/v1/fleet/restore";

/// Percent-encodes everything but RFC 3986 unreserved characters. A segment that is exactly
/// `.` or `..` is encoded too, since a router would otherwise treat it as a path step.
pub fn encode_segment(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let dots_only = raw == "." || raw == "..";
    for byte in raw.bytes() {
        let unreserved = byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'~');
        if unreserved || (byte == b'.' && !dots_only) {
            out.push(char::from(byte));
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_passes_through() {
        let id = "5f0c2a1e-8b7d-4c3e-9f10-0123456789ab";
        assert_eq!(session(id), format!("/v1/sessions/{id}"));
    }

    #[test]
    fn trail_carries_its_cursor_encoded() {
        assert_eq!(trail(None, 100, 0), "/v1/events/trail?limit=100&waitMs=0");
        assert_eq!(
            trail(Some("a+b"), 5, 25_000),
            "/v1/events/trail?limit=5&waitMs=25000&cursor=a%2Bb"
        );
    }

    #[test]
    fn names_are_percent_encoded() {
        assert_eq!(encode_segment("my task/2"), "my%20task%2F2");
        assert_eq!(encode_segment("é"), "%C3%A9");
        assert_eq!(encode_segment("v1.2"), "v1.2");
        assert_eq!(encode_segment(".."), "%2E%2E");
    }

    #[test]
    fn attach_carries_size() {
        assert_eq!(
            attach("a b", 80, 24),
            "/v1/sessions/a%20b/attach?cols=80&rows=24"
        );
        assert_eq!(
            attach_as("x", 80, 24, atc_protocol::AttachMode::Watch),
            "/v1/sessions/x/attach?cols=80&rows=24&mode=watch"
        );
        assert_eq!(
            attach_as("x", 80, 24, atc_protocol::AttachMode::Interactive),
            "/v1/sessions/x/attach?cols=80&rows=24"
        );
        assert_eq!(session_action("x", "kill"), "/v1/sessions/x/kill");
        assert_eq!(forget_confirmed("x", "t+1"), "/v1/sessions/x?confirm=t%2B1");
    }
}
