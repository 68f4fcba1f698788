//! The wire types of atc's client API (`shared/design/api.md`), both ways: what the daemon
//! serializes is what every client deserializes, from this one declaration.
//!
//! - [`capabilities`]: what a target's provider can do.
//! - [`error`]: the closed [`ErrorCode`] set, each code's HTTP status, and the
//!   `{"error": {code, message, data}}` body.
//! - [`session`]: the session [`Descriptor`] and the closed sets inside it (state, exit
//!   reason, the lifecycle layers, attachment, who named it).
//! - [`session_id`]: [`SessionId`], the one type a session's id has, on the wire and inside
//!   the daemon.
//! - [`limits`]: a local session's resource limits and what it uses.
//! - [`frames`]: the attach socket's frames both ways and the events socket's frames.
//! - [`size`]: terminal sizes and their bounds.
//! - [`state_dir`]: where the state dir is and what `daemon.json` and `token` in it say.
//! - [`requests`] and [`responses`]: the JSON bodies of the HTTP routes, both ways.
//!
//! Every type derives `utoipa::ToSchema`, so the daemon's OpenAPI document is generated from
//! these declarations (`GET /v1/openapi.json`).
//!
//! Closed sets are enums; a string on the wire becomes one only through serde here. Unknown
//! fields of an answer or a frame are ignored when reading, so a client keeps working with a
//! newer daemon; a request body is closed instead ([`requests`]): the daemon refuses a field
//! it does not know rather than drop what a client asked for.

pub mod capabilities;
pub mod error;
pub mod frames;
pub mod limits;
pub mod requests;
pub mod responses;
pub mod session;
pub mod session_id;
pub mod size;
pub mod state_dir;
pub mod workspace;

pub use error::{ErrorBody, ErrorCode, ErrorDetail};
pub use frames::{AttachFrame, AttachMode, ClientFrame, FleetEvent, LinkState, Replay};
pub use limits::{SessionLimits, Usage};
pub use session::{
    Attachment, Descriptor, Desired, ExitReason, HarnessLayer, Lifecycle, Locator, NamedBy,
    OutputKind, SessionState, StateSource, VmState,
};
pub use session_id::{BadSessionId, SessionId};
pub use size::{TermSize, DIM_RANGE};

/// The request header by which the owner acts as a principal (spec §2.5; on a principal's own
/// token it narrows). Header names are case-insensitive; this is how clients spell it.
pub const ACT_AS_HEADER: &str = "X-Atc-As";

/// Whether `id` may name a principal (config's `principals` keys, `X-Atc-As`): 1 to 64
/// characters of `a-z`, `0-9`, `_` and `-`, starting with a letter or a digit.
pub fn is_principal_id(id: &str) -> bool {
    let first = id
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let rest = id
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    first && rest && id.len() <= 64
}

/// How long the daemon keeps an idle HTTP/1.1 connection open before closing it. A client
/// that pools connections must drop idle ones sooner: a request sent on a connection as the
/// daemon closes it gets no answer.
pub const HTTP_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(5);
