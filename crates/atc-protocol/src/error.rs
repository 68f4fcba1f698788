//! The closed set of error codes a client can see (behaviour spec §2.8), the HTTP status of
//! each (api.md), and the error body every refusal carries.
//!
//! Codes the spec reserves for later work (principals) are listed once that work lands; the
//! broker's `auth_*` codes follow issue 9's statuses: 422 for config, 412 for impd's
//! preconditions, 403 for the token's reach, 409 for the binding's state.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// A stable error code. The wire form is the snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// A parameter failed validation; `data.field` names it.
    BadArgs,
    /// Missing or wrong bearer token.
    Unauthorized,
    /// A WebSocket upgrade from an Origin that is not allowed.
    ForbiddenOrigin,
    /// The request's principal is not granted the target it asked for.
    TargetForbidden,
    /// The session id or name is not known.
    NoSuchSession,
    /// The session has no live harness to talk to.
    SessionDead,
    /// The agent is not registered or not installed.
    Unsupported,
    /// The target's provider lacks a capability.
    UnsupportedOperation,
    /// Target id not configured.
    UnknownTarget,
    /// Target identity changed since the session bound to it.
    TargetChanged,
    /// Target configuration invalid.
    TargetConfigInvalid,
    /// Target configured but not servable.
    TargetUnavailable,
    /// A permission request was already resolved.
    AlreadyAnswered,
    /// No permission request has this id (or it was resolved so long ago it was forgotten).
    NoSuchRequest,
    /// Same idempotency key, different payload.
    IdempotencyConflict,
    /// A keyed effect may or may not have happened; `data.effectRef` names it.
    OutcomeUnknown,
    /// `Idempotency-Replay-Only` for a key the daemon does not hold.
    IdempotencyKeyUnknown,
    /// The client (or the process behind a session) cannot keep up.
    TooSlow,
    /// The remote host could not be readied or reached; `data.problem` says why.
    HostUnavailable,
    /// The remote host is leased by someone else and will not sleep; `data` has impd's leases.
    HostLeased,
    /// A second kill of a dead session whose forgetting would destroy its host: forget it
    /// with the two-step `DELETE` instead (`data.session`).
    ConfirmationRequired,
    /// A broker-backed agent on a target without a broker, or a start env that sets a broker
    /// variable itself (`data.problem: guest_env_conflict`).
    AuthTargetUnsupported,
    /// An agent's `auth` is malformed, or names a placeholder impd sets itself.
    AuthBindingInvalid,
    /// impd lacks a feature the broker needs (`grantableTokens`, `secretRebind`,
    /// `execRequire`).
    AuthImpdTooOld,
    /// impd refused a start behind the broker (`data.detail` says why).
    BrokerNotReady,
    /// The agent's sign-in check failed inside the imp (`data: {agent, target}`).
    AuthNotConfigured,
    /// The daemon's impd token is below `manage` scope.
    AuthTokenScope,
    /// The daemon's impd token has no imp patterns, or a bare `*`.
    AuthTokenTooBroad,
    /// The imp's name matches none of the token's patterns.
    AuthImpOutOfScope,
    /// A bound secret is not in the token's `grantable` list.
    AuthSecretNotGrantable,
    /// A secret is missing at impd, or its rules differ from the bound ones.
    AuthSecretMismatch,
    /// The host's binding is not `ready` (`data.state`).
    AuthBlocked,
    /// The binding's hash is not the launch's, or a launch without auth meets a bound host.
    AuthRebindRequired,
    /// The binding belongs to another target or identity.
    AuthBindingMismatch,
    /// The imp under the binding's name is not the one it created.
    AuthRuntimeMismatch,
    /// An imp or grants already exist under the name a new binding would create.
    AuthRuntimeExists,
    /// A bound grant is missing at impd (`data.missing`).
    AuthGrantMissing,
    /// The imp holds grants the binding does not (`data.extra`).
    AuthGrantsMismatch,
    /// A revoke could not confirm every grant gone; retry it.
    AuthRevocationPending,
    /// An oauth secret's sign-in is not ready.
    AuthSigninNeeded,
    /// A workspace's `path` is not inside a git repository.
    NotAGitRepo,
    /// A workspace's repository has no commit to start from.
    NoCommits,
    /// A workspace's `ref` or `sha` names no commit of its repository.
    RefNotFound,
    /// The tree at the workspace's commit has submodules, which the copy could not include (`data.path`).
    HasSubmodules,
    /// The tree at the workspace's commit keeps files in Git LFS, which the copy could not include.
    LfsUnsupported,
    /// A workspace's `url` is not one git can clone from here.
    InvalidGitUrl,
    /// A workspace's `url` carries a credential; give it through a credential helper.
    CredentialInUrl,
    /// The workspace's directory or branch exists already.
    WorkspaceExists,
    /// Removing the workspace would lose work (`data.changedFiles`, `data.unkeptCommits`); `force` removes it anyway.
    WorkspaceDirty,
    /// A directory claimed overlaps another session's workspace.
    WorkspaceOverlap,
    /// The daemon stopped while the workspace was being made; nothing of it is left.
    WorkspaceInterrupted,
    /// Cloning the workspace's repository failed.
    CloneFailed,
    /// Sending the workspace into its remote host failed.
    TransferFailed,
    /// The workspace on its remote host is not what was sent.
    WorkspaceMismatch,
    /// No such route or method.
    UnknownMethod,
    /// Anything else; details are logged, never sent.
    Internal,
}

impl ErrorCode {
    /// Every code, in declaration order (for documents and tests that walk the set).
    pub const ALL: [ErrorCode; 56] = [
        ErrorCode::BadArgs,
        ErrorCode::Unauthorized,
        ErrorCode::ForbiddenOrigin,
        ErrorCode::TargetForbidden,
        ErrorCode::NoSuchSession,
        ErrorCode::SessionDead,
        ErrorCode::Unsupported,
        ErrorCode::UnsupportedOperation,
        ErrorCode::UnknownTarget,
        ErrorCode::TargetChanged,
        ErrorCode::TargetConfigInvalid,
        ErrorCode::TargetUnavailable,
        ErrorCode::AlreadyAnswered,
        ErrorCode::NoSuchRequest,
        ErrorCode::IdempotencyConflict,
        ErrorCode::OutcomeUnknown,
        ErrorCode::IdempotencyKeyUnknown,
        ErrorCode::TooSlow,
        ErrorCode::HostUnavailable,
        ErrorCode::HostLeased,
        ErrorCode::ConfirmationRequired,
        ErrorCode::AuthTargetUnsupported,
        ErrorCode::AuthBindingInvalid,
        ErrorCode::AuthImpdTooOld,
        ErrorCode::BrokerNotReady,
        ErrorCode::AuthNotConfigured,
        ErrorCode::AuthTokenScope,
        ErrorCode::AuthTokenTooBroad,
        ErrorCode::AuthImpOutOfScope,
        ErrorCode::AuthSecretNotGrantable,
        ErrorCode::AuthSecretMismatch,
        ErrorCode::AuthBlocked,
        ErrorCode::AuthRebindRequired,
        ErrorCode::AuthBindingMismatch,
        ErrorCode::AuthRuntimeMismatch,
        ErrorCode::AuthRuntimeExists,
        ErrorCode::AuthGrantMissing,
        ErrorCode::AuthGrantsMismatch,
        ErrorCode::AuthRevocationPending,
        ErrorCode::AuthSigninNeeded,
        ErrorCode::NotAGitRepo,
        ErrorCode::NoCommits,
        ErrorCode::RefNotFound,
        ErrorCode::HasSubmodules,
        ErrorCode::LfsUnsupported,
        ErrorCode::InvalidGitUrl,
        ErrorCode::CredentialInUrl,
        ErrorCode::WorkspaceExists,
        ErrorCode::WorkspaceDirty,
        ErrorCode::WorkspaceOverlap,
        ErrorCode::WorkspaceInterrupted,
        ErrorCode::CloneFailed,
        ErrorCode::TransferFailed,
        ErrorCode::WorkspaceMismatch,
        ErrorCode::UnknownMethod,
        ErrorCode::Internal,
    ];

    /// The wire name of the code.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadArgs => "bad_args",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::ForbiddenOrigin => "forbidden_origin",
            ErrorCode::TargetForbidden => "target_forbidden",
            ErrorCode::NoSuchSession => "no_such_session",
            ErrorCode::SessionDead => "session_dead",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::UnsupportedOperation => "unsupported_operation",
            ErrorCode::UnknownTarget => "unknown_target",
            ErrorCode::TargetChanged => "target_changed",
            ErrorCode::TargetConfigInvalid => "target_config_invalid",
            ErrorCode::TargetUnavailable => "target_unavailable",
            ErrorCode::AlreadyAnswered => "already_answered",
            ErrorCode::NoSuchRequest => "no_such_request",
            ErrorCode::IdempotencyConflict => "idempotency_conflict",
            ErrorCode::OutcomeUnknown => "outcome_unknown",
            ErrorCode::IdempotencyKeyUnknown => "idempotency_key_unknown",
            ErrorCode::TooSlow => "too_slow",
            ErrorCode::HostUnavailable => "host_unavailable",
            ErrorCode::HostLeased => "host_leased",
            ErrorCode::ConfirmationRequired => "confirmation_required",
            ErrorCode::AuthTargetUnsupported => "auth_target_unsupported",
            ErrorCode::AuthBindingInvalid => "auth_binding_invalid",
            ErrorCode::AuthImpdTooOld => "auth_impd_too_old",
            ErrorCode::BrokerNotReady => "broker_not_ready",
            ErrorCode::AuthNotConfigured => "auth_not_configured",
            ErrorCode::AuthTokenScope => "auth_token_scope",
            ErrorCode::AuthTokenTooBroad => "auth_token_too_broad",
            ErrorCode::AuthImpOutOfScope => "auth_imp_out_of_scope",
            ErrorCode::AuthSecretNotGrantable => "auth_secret_not_grantable",
            ErrorCode::AuthSecretMismatch => "auth_secret_mismatch",
            ErrorCode::AuthBlocked => "auth_blocked",
            ErrorCode::AuthRebindRequired => "auth_rebind_required",
            ErrorCode::AuthBindingMismatch => "auth_binding_mismatch",
            ErrorCode::AuthRuntimeMismatch => "auth_runtime_mismatch",
            ErrorCode::AuthRuntimeExists => "auth_runtime_exists",
            ErrorCode::AuthGrantMissing => "auth_grant_missing",
            ErrorCode::AuthGrantsMismatch => "auth_grants_mismatch",
            ErrorCode::AuthRevocationPending => "auth_revocation_pending",
            ErrorCode::AuthSigninNeeded => "auth_signin_needed",
            ErrorCode::NotAGitRepo => "not_a_git_repo",
            ErrorCode::NoCommits => "no_commits",
            ErrorCode::RefNotFound => "ref_not_found",
            ErrorCode::HasSubmodules => "has_submodules",
            ErrorCode::LfsUnsupported => "lfs_unsupported",
            ErrorCode::InvalidGitUrl => "invalid_git_url",
            ErrorCode::CredentialInUrl => "credential_in_url",
            ErrorCode::WorkspaceExists => "workspace_exists",
            ErrorCode::WorkspaceDirty => "workspace_dirty",
            ErrorCode::WorkspaceOverlap => "workspace_overlap",
            ErrorCode::WorkspaceInterrupted => "workspace_interrupted",
            ErrorCode::CloneFailed => "clone_failed",
            ErrorCode::TransferFailed => "transfer_failed",
            ErrorCode::WorkspaceMismatch => "workspace_mismatch",
            ErrorCode::UnknownMethod => "unknown_method",
            ErrorCode::Internal => "internal",
        }
    }

    /// The code with this wire name, if it is one of ours (a newer daemon may send others).
    pub fn parse(name: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// The HTTP status api.md assigns to the code. Exhaustive on purpose: a new code does not
    /// compile until someone decides its status.
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::BadArgs => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::ForbiddenOrigin | ErrorCode::TargetForbidden => 403,
            ErrorCode::NoSuchSession
            | ErrorCode::UnknownTarget
            | ErrorCode::UnknownMethod
            | ErrorCode::IdempotencyKeyUnknown
            | ErrorCode::NoSuchRequest => 404,
            ErrorCode::SessionDead
            | ErrorCode::AlreadyAnswered
            | ErrorCode::IdempotencyConflict
            | ErrorCode::OutcomeUnknown
            | ErrorCode::HostLeased
            | ErrorCode::ConfirmationRequired
            | ErrorCode::TargetChanged => 409,
            ErrorCode::TooSlow => 429,
            ErrorCode::AuthTargetUnsupported | ErrorCode::AuthBindingInvalid => 422,
            ErrorCode::AuthImpdTooOld
            | ErrorCode::BrokerNotReady
            | ErrorCode::AuthNotConfigured => 412,
            ErrorCode::AuthTokenScope
            | ErrorCode::AuthTokenTooBroad
            | ErrorCode::AuthImpOutOfScope
            | ErrorCode::AuthSecretNotGrantable => 403,
            ErrorCode::AuthSecretMismatch
            | ErrorCode::AuthBlocked
            | ErrorCode::AuthRebindRequired
            | ErrorCode::AuthBindingMismatch
            | ErrorCode::AuthRuntimeMismatch
            | ErrorCode::AuthRuntimeExists
            | ErrorCode::AuthGrantMissing
            | ErrorCode::AuthGrantsMismatch
            | ErrorCode::AuthRevocationPending
            | ErrorCode::AuthSigninNeeded => 409,
            ErrorCode::Unsupported | ErrorCode::UnsupportedOperation => 422,
            ErrorCode::TargetConfigInvalid
            | ErrorCode::TargetUnavailable
            | ErrorCode::HostUnavailable => 503,
            ErrorCode::NotAGitRepo
            | ErrorCode::NoCommits
            | ErrorCode::RefNotFound
            | ErrorCode::HasSubmodules
            | ErrorCode::LfsUnsupported
            | ErrorCode::InvalidGitUrl
            | ErrorCode::CredentialInUrl => 422,
            ErrorCode::WorkspaceExists
            | ErrorCode::WorkspaceDirty
            | ErrorCode::WorkspaceOverlap
            | ErrorCode::WorkspaceInterrupted => 409,
            ErrorCode::CloneFailed => 502,
            ErrorCode::TransferFailed | ErrorCode::WorkspaceMismatch => 502,
            ErrorCode::Internal => 500,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The body of every refusal: `{"error": {code, message, data}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// The refusal.
    pub error: ErrorDetail,
}

/// What an error body says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// The stable code; clients branch on it, never on the message.
    pub code: ErrorCode,
    /// Human text that says what to do next.
    #[serde(default)]
    pub message: String,
    /// The fields the code defines (`field` for `bad_args`, `session` for `no_such_session`…).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub data: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_api_md() {
        assert_eq!(ErrorCode::BadArgs.status(), 400);
        assert_eq!(ErrorCode::Unauthorized.status(), 401);
        assert_eq!(ErrorCode::ForbiddenOrigin.status(), 403);
        assert_eq!(ErrorCode::NoSuchSession.status(), 404);
        assert_eq!(ErrorCode::SessionDead.status(), 409);
        assert_eq!(ErrorCode::Unsupported.status(), 422);
        assert_eq!(ErrorCode::TooSlow.status(), 429);
        assert_eq!(ErrorCode::TargetUnavailable.status(), 503);
        assert_eq!(ErrorCode::Internal.status(), 500);
        assert_eq!(ErrorCode::AuthBindingInvalid.status(), 422);
        assert_eq!(ErrorCode::BrokerNotReady.status(), 412);
        assert_eq!(ErrorCode::AuthTokenScope.status(), 403);
        assert_eq!(ErrorCode::AuthBlocked.status(), 409);
    }

    #[test]
    fn wire_names_round_trip_through_serde_and_parse() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, code.as_str());
            assert_eq!(serde_json::from_value::<ErrorCode>(json).unwrap(), code);
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
        }
        assert_eq!(ErrorCode::parse("not_a_code"), None);
    }

    #[test]
    fn body_reads_back_what_it_wrote() {
        let body = ErrorBody {
            error: ErrorDetail {
                code: ErrorCode::BadArgs,
                message: "cols must be 1-4096".into(),
                data: [("field".to_string(), Value::from("cols"))]
                    .into_iter()
                    .collect(),
            },
        };
        let text = serde_json::to_string(&body).unwrap();
        assert_eq!(
            text,
            r#"{"error":{"code":"bad_args","message":"cols must be 1-4096","data":{"field":"cols"}}}"#
        );
        assert_eq!(serde_json::from_str::<ErrorBody>(&text).unwrap(), body);
    }
}
