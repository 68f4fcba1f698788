//! The daemon's one error type, and the one place its errors become the wire's, at the
//! server's edge: nothing below the server imports it.
//!
//! Each module says what went wrong in its own terms, with an enum that carries what the
//! message needs, and its messages and traits return it: [`RequestError`] (a request's head, body and parameters), [`AuthError`],
//! [`AgentError`], [`TargetError`] (the refusal chain), [`ProviderError`] and its
//! [`HostError`] (imp hosts), [`SessionError`] (with a spawn's [`AdmissionError`]),
//! [`LedgerError`] and [`PermissionError`].
//! A module's error carries the whole error of a lower one it met (a session's refusal may
//! be its target's, a provider's, an agent's). [`Error`] gathers them, and [`Error::wire`] turns each variant into the stable code, the
//! HTTP status and the `data` fields its code defines, in one exhaustive match: adding a
//! variant anywhere does not compile until it has its wire form here. The message is the
//! variant's `Display`, written beside it, and says what to do next.
//!
//! Nothing outside this file builds a wire error.

use atc_protocol::{AttachFrame, ErrorBody, ErrorDetail};
use serde_json::{Map, Value};

pub use atc_protocol::ErrorCode;

pub use super::auth::AuthError;
pub use crate::agents::AgentError;
pub use crate::ledger::key_lock::LedgerError;
pub use crate::permissions::registry::PermissionError;
pub use crate::protocol::request_error::{HeadProblem, RequestError};
pub use crate::providers::imp::broker::BrokerError;
pub use crate::providers::imp::host_error::HostError;
pub use crate::providers::refusal::TargetError;
pub use crate::providers::ProviderError;
pub use crate::sessions::admission::AdmissionError;
pub use crate::sessions::session_error::SessionError;
pub use crate::workspaces::{WorkspaceError, WorkspaceProblem};

/// Every refusal or failure a client can be answered with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request itself.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// Who is asking.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The agent, or a spawn override.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The target refusal chain.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The provider or its host.
    #[error(transparent)]
    Provider(ProviderError),
    /// The session.
    #[error(transparent)]
    Session(SessionError),
    /// Broker authentication.
    #[error(transparent)]
    Broker(#[from] BrokerError),
    /// The idempotency ledger.
    #[error(transparent)]
    Ledger(LedgerError),
    /// A session's workspace.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// A permission answer.
    #[error(transparent)]
    Permission(#[from] PermissionError),
    /// A failure inside the daemon; whoever hit it logged the cause.
    #[error("internal error; the daemon log has details under this request id")]
    Internal,
}

// A lower module's error that carries another module's whole is gathered under that module's
// own variant, so a caller (and a test) finds e.g. every target refusal as `Error::Target`
// however deep it was raised; the wire mapping below handles the nested forms all the same.

impl From<ProviderError> for Error {
    fn from(e: ProviderError) -> Self {
        match e {
            ProviderError::Internal => Error::Internal,
            e => Error::Provider(e),
        }
    }
}

impl From<SessionError> for Error {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::Agent(e) => Error::Agent(e),
            SessionError::Target(e) => Error::Target(e),
            SessionError::Provider(e) => Error::from(e),
            SessionError::Workspace(e) => Error::Workspace(e),
            SessionError::Internal => Error::Internal,
            e => Error::Session(e),
        }
    }
}

impl From<LedgerError> for Error {
    fn from(e: LedgerError) -> Self {
        match e {
            LedgerError::Refused(e) => Error::Target(e),
            LedgerError::Spawn(e) => Error::from(e),
            LedgerError::Internal => Error::Internal,
            e => Error::Ledger(e),
        }
    }
}

impl From<HostError> for Error {
    fn from(e: HostError) -> Self {
        Error::Provider(ProviderError::Host(e))
    }
}

/// An error in its wire form: code, status and code-defined data. The message is the
/// error's `Display`.
#[derive(Debug, Clone, PartialEq)]
pub struct Wire {
    /// The stable code.
    pub code: ErrorCode,
    /// The HTTP status; the code's own, except where noted in [`Error::wire`].
    pub status: u16,
    /// Fields the code defines (e.g. `field` for `bad_args`).
    pub data: Map<String, Value>,
    /// Seconds after which a retry is worth making, for a refusal that passes (HTTP's
    /// `Retry-After`, set by `error_response`).
    pub retry_after_secs: Option<u64>,
}

/// The HTTP status of a body past the cap, refused from its declared length.
const PAYLOAD_TOO_LARGE: u16 = 413;
const REQUEST_TIMEOUT: u16 = 408;
/// The HTTP status of a request head past the limits.
const HEADER_FIELDS_TOO_LARGE: u16 = 431;

impl Wire {
    fn new(code: ErrorCode) -> Wire {
        Wire {
            code,
            status: code.status(),
            data: Map::new(),
            retry_after_secs: None,
        }
    }

    fn with(mut self, key: &str, value: impl Into<Value>) -> Wire {
        self.data.insert(key.to_string(), value.into());
        self
    }

    fn with_opt(self, key: &str, value: &Option<String>) -> Wire {
        match value {
            Some(v) => self.with(key, v.clone()),
            None => self,
        }
    }

    fn field(self, field: &str) -> Wire {
        self.with("field", field)
    }

    fn status(mut self, status: u16) -> Wire {
        self.status = status;
        self
    }

    fn retry_after(mut self, after: std::time::Duration) -> Wire {
        // At least a second: `Retry-After: 0` would invite a retry at once.
        self.retry_after_secs = Some(after.as_secs().max(1));
        self
    }
}

impl Error {
    /// The one mapping: code, status and data of every error the daemon answers with.
    pub fn wire(&self) -> Wire {
        use ErrorCode as C;
        match self {
            Error::Request(e) => request_wire(e),
            Error::Auth(e) => auth_wire(e),
            Error::Agent(e) => agent_wire(e),
            Error::Target(e) => target_wire(e),
            Error::Provider(e) => provider_wire(e),
            Error::Session(e) => session_wire(e),
            Error::Broker(e) => broker_wire(e),
            Error::Ledger(e) => ledger_wire(e),
            Error::Permission(e) => permission_wire(e),
            Error::Workspace(e) => workspace_wire(e),
            Error::Internal => Wire::new(C::Internal),
        }
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        self.wire().code
    }

    /// The wire body `{"error": {...}}`.
    pub fn body(&self) -> ErrorBody {
        let wire = self.wire();
        ErrorBody {
            error: ErrorDetail {
                code: wire.code,
                message: self.to_string(),
                data: wire.data,
            },
        }
    }

    /// The attach socket's `error` frame for it (the socket stays open).
    pub fn attach_frame(&self) -> AttachFrame {
        AttachFrame::Error {
            code: self.code(),
            message: self.to_string(),
        }
    }
}

/// The wire form of one module's own error, for a caller (or a test) that holds it by
/// reference rather than gathered into an [`Error`]; the same mapping as [`Error::wire`].
pub trait WireForm {
    /// Code, status and data.
    fn wire(&self) -> Wire;
    /// The stable code.
    fn code(&self) -> ErrorCode {
        self.wire().code
    }
}

macro_rules! wire_form {
    ($($error:ty => $map:ident),* $(,)?) => {
        $(impl WireForm for $error {
            fn wire(&self) -> Wire {
                $map(self)
            }
        })*
    };
}

wire_form!(
    Error => error_wire,
    RequestError => request_wire,
    AuthError => auth_wire,
    AgentError => agent_wire,
    TargetError => target_wire,
    ProviderError => provider_wire,
    HostError => host_wire,
    BrokerError => broker_wire,
    SessionError => session_wire,
    LedgerError => ledger_wire,
    PermissionError => permission_wire,
    WorkspaceError => workspace_wire,
    AdmissionError => admission_wire,
);

fn error_wire(e: &Error) -> Wire {
    e.wire()
}

/// The request part of the mapping.
fn request_wire(e: &RequestError) -> Wire {
    use ErrorCode as C;
    let bad_args = |field: &str| Wire::new(C::BadArgs).field(field);
    match e {
        RequestError::Head(p) => {
            let w = bad_args(head_field(*p));
            match p {
                HeadProblem::TooLarge { .. } => w.status(HEADER_FIELDS_TOO_LARGE),
                HeadProblem::TooSlow { within_ms } => {
                    w.with("withinMs", *within_ms).status(REQUEST_TIMEOUT)
                }
                HeadProblem::Method
                | HeadProblem::Uri
                | HeadProblem::Version
                | HeadProblem::Headers => w,
            }
        }
        RequestError::BodyNotObject
        | RequestError::BodyNotJson(_)
        | RequestError::BodyUnreadable(_)
        | RequestError::BodyTooLarge { .. } => bad_args("body"),
        RequestError::BodyTooSlow { within_ms } => bad_args("body")
            .with("withinMs", *within_ms as u64)
            .status(REQUEST_TIMEOUT),
        RequestError::DeclaredTooLarge { cap, .. } => bad_args("body")
            .with("limit", *cap)
            .status(PAYLOAD_TOO_LARGE),
        RequestError::BadQuery(_) => bad_args("query"),
        RequestError::NotUpgrade(_) => bad_args("upgrade"),
        RequestError::WrongType { field, .. }
        | RequestError::UnknownField { field }
        | RequestError::BadField { field, .. } => bad_args(field),
        RequestError::Reserved { field } => Wire::new(C::Unsupported).field(field),
        RequestError::DuplicateKey { field } => bad_args(field),
        RequestError::Missing { field, .. }
        | RequestError::Empty { field }
        | RequestError::Unpaired { field, .. }
        | RequestError::OutOfRange { field, .. } => bad_args(field),
        RequestError::BadCursor => bad_args("cursor"),
        RequestError::BadIdempotencyKey => bad_args("idempotencyKey"),
        RequestError::FrameNotJson | RequestError::UnknownFrame(_) => bad_args("type"),
        RequestError::WatchOnly => Wire::new(C::Unsupported),
        RequestError::NoRoute { .. } => Wire::new(C::UnknownMethod),
    }
}

/// The auth part of the mapping.
fn auth_wire(e: &AuthError) -> Wire {
    use ErrorCode as C;
    match e {
        AuthError::TokenFileInvalid
        | AuthError::Missing
        | AuthError::Wrong
        | AuthError::Revoked
        | AuthError::TicketRefused
        | AuthError::TicketNotHere
        | AuthError::OwnerOnly => Wire::new(C::Unauthorized),
        AuthError::ForbiddenOrigin => Wire::new(C::ForbiddenOrigin),
        AuthError::UnknownPrincipal { .. } | AuthError::BadActAs => {
            Wire::new(C::BadArgs).field("X-Atc-As")
        }
        AuthError::TargetForbidden { target } => {
            Wire::new(C::TargetForbidden).with("target", target.as_str())
        }
    }
}

/// The agent part of the mapping.
fn agent_wire(e: &AgentError) -> Wire {
    use ErrorCode as C;
    let bad_args = |field: &str| Wire::new(C::BadArgs).field(field);
    match e {
        AgentError::Misconfigured {
            agent,
            problem,
            detail,
        } => Wire::new(C::Unsupported)
            .with("agent", agent.clone())
            .with("problem", *problem)
            .with("detail", detail.clone()),
        AgentError::AuthInvalid { agent, detail } => Wire::new(C::AuthBindingInvalid)
            .with("agent", agent.clone())
            .with("detail", detail.clone()),
        AgentError::Unknown { agent }
        | AgentError::NotInstalled { agent, .. }
        | AgentError::NoLongerConfigured { agent } => {
            Wire::new(C::Unsupported).with("agent", agent.clone())
        }
        AgentError::NoSuchOption { agent, option }
        | AgentError::OptionForUninstalled { agent, option } => Wire::new(C::Unsupported)
            .with("agent", agent.clone())
            .with("option", *option),
        AgentError::OptionLength { option }
        | AgentError::OptionUnsafe { option }
        | AgentError::OptionNotOneOf { option, .. } => bad_args(option),
    }
}

/// The target part of the mapping.
fn target_wire(e: &TargetError) -> Wire {
    use ErrorCode as C;
    match e {
        TargetError::ConfigUnusable {
            problem,
            detail,
            target,
        }
        | TargetError::Misconfigured {
            problem,
            detail,
            target,
            ..
        } => Wire::new(C::TargetConfigInvalid)
            .with("problem", problem.clone())
            .with("detail", detail.clone())
            .with_opt("target", target),
        TargetError::NoDefault { problem } => {
            Wire::new(C::TargetConfigInvalid).with("problem", problem.clone())
        }
        TargetError::Unknown { id } => Wire::new(C::UnknownTarget).with("target", id.clone()),
        TargetError::Changed { id, bound, current } => Wire::new(C::TargetChanged)
            .with("target", id.clone())
            .with("boundIdentity", bound.clone())
            .with("currentIdentity", current.clone()),
        TargetError::Unavailable { id, provider, .. }
        | TargetError::NoProvider { id, provider } => Wire::new(C::TargetUnavailable)
            .with("target", id.clone())
            .with("provider", provider.clone()),
        TargetError::CannotDo {
            provider,
            capability,
            ..
        } => Wire::new(C::UnsupportedOperation)
            .with("provider", provider.clone())
            .with("capability", capability.as_str()),
        TargetError::NotServed { id } => Wire::new(C::TargetUnavailable).with("target", id.clone()),
    }
}

/// The provider part of the mapping.
fn provider_wire(e: &ProviderError) -> Wire {
    use ErrorCode as C;
    let bad_args = |field: &str| Wire::new(C::BadArgs).field(field);
    match e {
        ProviderError::BadCwd(_) => bad_args("cwd"),
        ProviderError::Os(_)
        | ProviderError::Spawn(_)
        | ProviderError::Pty(_)
        | ProviderError::CommandFailed { .. } => Wire::new(C::Internal),
        ProviderError::NoHostLifecycle { kind, capability } => Wire::new(C::UnsupportedOperation)
            .with("provider", *kind)
            .with("capability", *capability),
        ProviderError::LimitReached { limit, .. } => Wire::new(C::HostUnavailable)
            .with("provider", crate::providers::local::KIND)
            .with("problem", limit.problem()),
        ProviderError::InputBacklogFull => Wire::new(C::TooSlow),
        ProviderError::ProcessGone => Wire::new(C::SessionDead),
        ProviderError::Host(e) => host_wire(e),
        ProviderError::Broker(e) => broker_wire(e),
        ProviderError::Internal => Wire::new(C::Internal),
    }
}

/// The limits part of the mapping: a value config does not allow names its ceiling.
fn limits_wire(e: &crate::config::session_limits::LimitsError) -> Wire {
    use crate::config::session_limits::LimitsError as L;
    use ErrorCode as C;
    match e {
        L::AboveCeiling { field, ceiling, .. } => Wire::new(C::BadArgs)
            .field(&format!("limits.{field}"))
            .with("ceiling", *ceiling),
        L::OutOfBounds { field, min, max } => Wire::new(C::BadArgs)
            .field(&format!("limits.{field}"))
            .with("min", *min)
            .with("max", *max),
        L::NoCgroups { target, .. } => Wire::new(C::UnsupportedOperation)
            .with("problem", "no_cgroups")
            .with("target", target.clone()),
    }
}

/// The session part of the mapping.
fn session_wire(e: &SessionError) -> Wire {
    use ErrorCode as C;
    let bad_args = |field: &str| Wire::new(C::BadArgs).field(field);
    match e {
        SessionError::NoSuch { key } => Wire::new(C::NoSuchSession).with("session", key.clone()),
        SessionError::AmbiguousName { .. } => bad_args("session"),
        SessionError::Dead { id } => Wire::new(C::SessionDead).with("session", id.to_string()),
        SessionError::Gone => Wire::new(C::SessionDead),
        SessionError::StillRunning { id } => {
            Wire::new(C::NoSuchSession).with("session", id.to_string())
        }
        SessionError::ConfirmationRequired { id } => {
            Wire::new(C::ConfirmationRequired).with("session", id.to_string())
        }
        SessionError::BadConfirmation(p) => bad_args("confirm").with("reason", p.as_str()),
        SessionError::BadName(p) => bad_args("name").with("reason", p.as_str()),
        SessionError::CwdNotAbsolute | SessionError::CwdNotDirectory(_) => bad_args("cwd"),
        SessionError::RestoreRunning => bad_args("fleet"),
        SessionError::Limits(e) => limits_wire(e),
        SessionError::CapReached { cap, .. } => Wire::new(C::HostUnavailable)
            .with("problem", "session_cap")
            .with("limit", *cap),
        SessionError::NoWorkspace { id } => Wire::new(C::UnsupportedOperation)
            .with("problem", "no_workspace")
            .with("session", id.to_string()),
        SessionError::RemoteWorkspace { id } => Wire::new(C::UnsupportedOperation)
            .with("problem", "remote_workspace")
            .with("session", id.to_string()),
        SessionError::EndedBeforeStart => {
            Wire::new(C::HostUnavailable).with("problem", "not_started")
        }
        SessionError::HostAsleep { id } => Wire::new(C::UnsupportedOperation)
            .with("problem", "host_asleep")
            .with("session", id.to_string()),
        SessionError::SharedHostWorkspace { parent } => Wire::new(C::UnsupportedOperation)
            .with("problem", "shared_host_workspace")
            .with("parent", parent.to_string()),
        SessionError::HostShared { id, parent } => Wire::new(C::UnsupportedOperation)
            .with("problem", "host_shared")
            .with("session", id.to_string())
            .with("parent", parent.to_string()),
        SessionError::Admission(e) => admission_wire(e),
        SessionError::Agent(e) => agent_wire(e),
        SessionError::Target(e) => target_wire(e),
        SessionError::Provider(e) => provider_wire(e),
        SessionError::Workspace(e) => workspace_wire(e),
        SessionError::Internal => Wire::new(C::Internal),
    }
}

/// A spawn's admission: the daemon's or the machine's state, each with its retry hint.
fn admission_wire(e: &AdmissionError) -> Wire {
    use ErrorCode as C;
    let wire = match e {
        AdmissionError::Busy { limit } => Wire::new(C::HostUnavailable)
            .with("problem", "busy")
            .with("limit", *limit),
        AdmissionError::MemoryLow {
            available_mib,
            floor_mib,
        } => Wire::new(C::HostUnavailable)
            .with("problem", "memory_low")
            .with("availableMiB", *available_mib)
            .with("floorMiB", *floor_mib),
    };
    wire.retry_after(e.retry_after())
}

/// The workspace part of the mapping: each problem's code, with the phase it stopped in.
fn workspace_wire(e: &WorkspaceError) -> Wire {
    use ErrorCode as C;
    use WorkspaceProblem as P;
    let wire = match &e.problem {
        P::NotAGitRepo(_) => Wire::new(C::NotAGitRepo),
        P::NoCommits => Wire::new(C::NoCommits),
        P::RefNotFound(r) => Wire::new(C::RefNotFound).with("ref", r.clone()),
        P::HasSubmodules(path) => Wire::new(C::HasSubmodules).with("path", path.clone()),
        P::LfsUnsupported => Wire::new(C::LfsUnsupported),
        P::Exists(what) => Wire::new(C::WorkspaceExists).with("what", what.clone()),
        P::Dirty(loss) => Wire::new(C::WorkspaceDirty)
            .with("changedFiles", loss.changed_files)
            .with("unkeptCommits", loss.unkept_commits),
        P::CredentialInUrl => Wire::new(C::CredentialInUrl),
        P::InvalidUrl(_) => Wire::new(C::InvalidGitUrl),
        P::CloneFailed(_) => Wire::new(C::CloneFailed),
        P::TransferFailed(_) => Wire::new(C::TransferFailed),
        P::Mismatch(_) => Wire::new(C::WorkspaceMismatch),
        P::Overlap(_) => Wire::new(C::WorkspaceOverlap),
        P::Interrupted => Wire::new(C::WorkspaceInterrupted),
        P::Git(_) => Wire::new(C::Internal),
    };
    wire.with("phase", e.phase.as_str())
}

/// The ledger part of the mapping.
fn ledger_wire(e: &LedgerError) -> Wire {
    use ErrorCode as C;
    match e {
        LedgerError::OutcomeUnknown { effect_ref } => {
            Wire::new(C::OutcomeUnknown).with("effectRef", effect_ref.clone())
        }
        LedgerError::Conflict => Wire::new(C::IdempotencyConflict),
        LedgerError::SessionNotListed { effect_ref } => {
            Wire::new(C::NoSuchSession).with("effectRef", effect_ref.clone())
        }
        LedgerError::KeyUnknown => Wire::new(C::IdempotencyKeyUnknown),
        LedgerError::Refused(e) => target_wire(e),
        LedgerError::Spawn(e) => session_wire(e),
        LedgerError::Internal => Wire::new(C::Internal),
    }
}

/// The permission part of the mapping.
fn permission_wire(e: &PermissionError) -> Wire {
    use ErrorCode as C;
    match e {
        PermissionError::NotRespondable { request } => {
            Wire::new(C::Unsupported).with("request", request.clone())
        }
        PermissionError::AlreadyAnswered { request } => {
            Wire::new(C::AlreadyAnswered).with("request", request.clone())
        }
        PermissionError::NoSuchRequest { request } => {
            Wire::new(C::NoSuchRequest).with("request", request.clone())
        }
    }
}

/// The part of a refused head at fault (`data.field`).
fn head_field(p: HeadProblem) -> &'static str {
    match p {
        HeadProblem::TooLarge { .. } | HeadProblem::Headers => "headers",
        HeadProblem::Method => "method",
        HeadProblem::Uri => "uri",
        HeadProblem::Version => "version",
        HeadProblem::TooSlow { .. } => "head",
    }
}

/// The broker's part of the mapping.
fn broker_wire(e: &BrokerError) -> Wire {
    use ErrorCode as C;
    match e {
        BrokerError::TargetUnsupported { agent, target } => Wire::new(C::AuthTargetUnsupported)
            .with("agent", agent.clone())
            .with("target", target.clone()),
        BrokerError::GuestEnvConflict { agent, variable } => Wire::new(C::AuthTargetUnsupported)
            .with("agent", agent.clone())
            .with("problem", "guest_env_conflict")
            .with("variable", variable.clone()),
        BrokerError::ImpdTooOld { imp, missing } => Wire::new(C::AuthImpdTooOld)
            .with("imp", imp.clone())
            .with("missing", missing.clone()),
        BrokerError::ExecRequireMissing { imp } => Wire::new(C::AuthImpdTooOld)
            .with("imp", imp.clone())
            .with("execRequire", false),
        BrokerError::BrokerNotReady { imp, detail } => Wire::new(C::BrokerNotReady)
            .with("imp", imp.clone())
            .with("detail", detail.clone()),
        BrokerError::NotConfigured { agent, target, .. } => Wire::new(C::AuthNotConfigured)
            .with("agent", agent.clone())
            .with("target", target.clone()),
        BrokerError::TokenScope { scope } => {
            Wire::new(C::AuthTokenScope).with("scope", scope.clone())
        }
        BrokerError::TokenTooBroad => Wire::new(C::AuthTokenTooBroad),
        BrokerError::ImpOutOfScope { imp } => {
            Wire::new(C::AuthImpOutOfScope).with("imp", imp.clone())
        }
        BrokerError::SecretNotGrantable { secret } => {
            Wire::new(C::AuthSecretNotGrantable).with("secret", secret.clone())
        }
        BrokerError::SecretMissing { secret } => Wire::new(C::AuthSecretMismatch)
            .with("secret", secret.clone())
            .with("problem", "missing"),
        BrokerError::SecretMismatch { secret } => Wire::new(C::AuthSecretMismatch)
            .with("secret", secret.clone())
            .with("problem", "rules_changed"),
        BrokerError::SigninNeeded { secret, status } => Wire::new(C::AuthSigninNeeded)
            .with("secret", secret.clone())
            .with("status", status.clone()),
        BrokerError::RuntimeExists { imp } => {
            Wire::new(C::AuthRuntimeExists).with("imp", imp.clone())
        }
        BrokerError::Blocked { state } => Wire::new(C::AuthBlocked).with("state", *state),
        BrokerError::RebindRequired { .. } => Wire::new(C::AuthRebindRequired),
        BrokerError::BindingMismatch { parent } => {
            Wire::new(C::AuthBindingMismatch).with("parent", parent.to_string())
        }
        BrokerError::RuntimeMismatch { imp } => {
            Wire::new(C::AuthRuntimeMismatch).with("imp", imp.clone())
        }
        BrokerError::GrantMissing { missing } => {
            Wire::new(C::AuthGrantMissing).with("missing", missing.clone())
        }
        BrokerError::GrantsMismatch { extra } => {
            Wire::new(C::AuthGrantsMismatch).with("extra", extra.clone())
        }
        BrokerError::RevocationPending { unconfirmed } => {
            Wire::new(C::AuthRevocationPending).with("unconfirmed", unconfirmed.clone())
        }
        BrokerError::NotBound => Wire::new(C::AuthBlocked).with("state", "unbound"),
        BrokerError::BindingInvalid { agent, problem, .. } => Wire::new(C::AuthBindingInvalid)
            .with("agent", agent.clone())
            .with("problem", *problem),
    }
}

/// The imp host's part of the mapping.
fn host_wire(e: &HostError) -> Wire {
    use ErrorCode as C;
    let unavailable = |target: &str, problem: &str| {
        Wire::new(C::HostUnavailable)
            .with("target", target)
            .with("problem", problem)
    };
    match e {
        HostError::LeaseGone => Wire::new(C::HostUnavailable).with("problem", "stopping"),
        HostError::Impd { target, code, .. } => unavailable(target, &code.as_str().to_lowercase()),
        HostError::Busy { target } => unavailable(target, "busy"),
        HostError::Leased { target, leases } => {
            let mut w = Wire::new(C::HostLeased).with("target", target.clone());
            w.data.extend(leases.clone());
            w
        }
        HostError::NotStarted { target, .. } => unavailable(target, "not_started"),
        HostError::ReportSocketRefused {
            target,
            code,
            message,
        } => unavailable(target, &code.as_str().to_lowercase()).with("detail", message.clone()),
        HostError::NoHostNamed => Wire::new(C::BadArgs).field("host"),
        HostError::NoGuestAtc {
            target,
            image_version,
            copied_version,
        } => Wire::new(C::UnsupportedOperation)
            .with("target", target.clone())
            .with("problem", "no_guest_atc")
            .with(
                "daemonVersion",
                crate::providers::imp::guest_atc::DAEMON_VERSION,
            )
            .with_opt("imageVersion", image_version)
            .with_opt("copiedVersion", copied_version),
        HostError::InputFull { .. } => Wire::new(C::TooSlow),
        HostError::EffectRemains(inner) => host_wire(inner),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_carries_code_message_and_data() {
        let e = Error::from(RequestError::OutOfRange {
            field: "cols",
            range: "1 to 4096",
        });
        let b = e.body();
        assert_eq!(b.error.code, ErrorCode::BadArgs);
        assert_eq!(b.error.data["field"], "cols");
        assert_eq!(b.error.message, "'cols' must be 1 to 4096");
    }

    #[test]
    fn statuses_are_the_codes_except_the_size_refusals() {
        let declared = Error::from(RequestError::DeclaredTooLarge {
            declared: 10,
            cap: 5,
        })
        .wire();
        assert_eq!((declared.code, declared.status), (ErrorCode::BadArgs, 413));
        assert_eq!(declared.data["limit"], 5);
        let head = Error::from(RequestError::Head(HeadProblem::TooLarge { max_bytes: 1 })).wire();
        assert_eq!(
            (head.status, &head.data["field"]),
            (431, &Value::from("headers"))
        );
        let late = Error::from(RequestError::Head(HeadProblem::TooSlow { within_ms: 9 })).wire();
        assert_eq!((late.code, late.status), (ErrorCode::BadArgs, 408));
        assert_eq!(
            (&late.data["field"], &late.data["withinMs"]),
            (&Value::from("head"), &Value::from(9))
        );
        let slow = Error::from(RequestError::BodyTooSlow { within_ms: 7 }).wire();
        assert_eq!((slow.code, slow.status), (ErrorCode::BadArgs, 408));
        assert_eq!(slow.data["withinMs"], 7);
        let gone = Error::from(SessionError::Gone).wire();
        assert_eq!(gone.status, ErrorCode::SessionDead.status());
    }

    #[test]
    fn an_effect_left_standing_is_seen_through_the_host_error() {
        let e = HostError::Busy { target: "t".into() };
        // The ledger asks a spawn's error (`LedgerError` reaches the wire through it).
        assert!(!SessionError::from(e.clone()).effect_remains());
        let standing = SessionError::from(e.effect_remains().effect_remains());
        assert!(standing.effect_remains());
        let standing = Error::from(standing);
        assert_eq!(standing.wire().data["problem"], "busy");
        assert!(
            !standing.to_string().is_empty(),
            "the message is the inner error's"
        );
    }

    /// A start past one of the machine's limits is the host's refusal, named, and its
    /// message says which limit and what to raise; not `internal`.
    #[test]
    fn a_limit_reached_is_the_host_unavailable_with_the_limit_named() {
        let e = Error::from(ProviderError::LimitReached {
            limit: crate::providers::local::host_limit::HostLimit::OpenFiles,
            detail: "the new terminal did not fit".into(),
        });
        let body = e.body();
        assert_eq!(body.error.code, ErrorCode::HostUnavailable);
        assert_eq!(body.error.data["provider"], "local-pty");
        assert_eq!(body.error.data["problem"], "open_files_exhausted");
        assert!(
            body.error.message.contains("open-file limit"),
            "{}",
            body.error.message
        );
    }

    /// A spawn the daemon cannot take now is the host's refusal naming its figures, with a
    /// `Retry-After`, however deep it was raised (a keyed spawn's comes through the ledger);
    /// no other refusal carries one.
    #[test]
    fn an_admission_refusal_names_its_figures_and_when_to_retry() {
        let busy = Error::from(SessionError::from(AdmissionError::Busy { limit: 3 })).wire();
        assert_eq!((busy.code, busy.status), (ErrorCode::HostUnavailable, 503));
        assert_eq!(
            (&busy.data["problem"], &busy.data["limit"]),
            (&"busy".into(), &3.into())
        );
        assert_eq!(busy.retry_after_secs, Some(1));
        let low = AdmissionError::MemoryLow {
            available_mib: 100,
            floor_mib: 256,
        };
        let keyed = Error::from(LedgerError::Spawn(SessionError::from(low.clone())));
        let wire = keyed.wire();
        assert_eq!(wire.data["problem"], "memory_low");
        assert_eq!(
            (&wire.data["availableMiB"], &wire.data["floorMiB"]),
            (&100.into(), &256.into())
        );
        assert_eq!(wire.retry_after_secs, Some(low.retry_after().as_secs()));
        assert!(keyed.to_string().contains("100 MiB"), "{keyed}");
        let cap = Error::from(SessionError::CapReached { cap: 1, live: 1 }).wire();
        assert_eq!(cap.retry_after_secs, None);
    }

    /// The rule this file exists for: no daemon code but this mapping builds a wire error
    /// body or an attach `error` frame. (The CLI only reads them, so it is not walked.)
    #[test]
    fn only_this_file_builds_wire_errors() {
        fn walk(dir: &std::path::Path, found: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    if !path.ends_with("cli") {
                        walk(&path, found);
                    }
                    continue;
                }
                if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("error.rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for needle in ["ErrorDetail {", "AttachFrame::Error {", "ErrorBody {"] {
                        if text.contains(needle) {
                            found.push(format!("{}: {needle}", path.display()));
                        }
                    }
                }
            }
        }
        let mut found = Vec::new();
        walk(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut found,
        );
        assert!(
            found.is_empty(),
            "wire errors built outside crate::server::error: {found:?}"
        );
    }
}
