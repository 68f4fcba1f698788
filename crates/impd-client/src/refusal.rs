//! impd's refusals read as types: the `data` of a `FORBIDDEN`, `NOT_FOUND` or
//! `PRECONDITION_FAILED` (spec §3, §9.10, §11), from an RPC answer or an `/exec` `error`
//! message alike. The error itself stays an [`ImpPortError`] with `code`, `status` and `data`
//! untouched; these only save every caller from picking at `data` by hand.

use serde_json::Value;

use super::error::{ImpPortError, ImpdCode};

/// Why impd refused a call with `FORBIDDEN` (`data.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForbiddenReason {
    /// The token's scope is too low for the call.
    Scope,
    /// The imp is outside the token's patterns.
    ImpOutOfScope,
    /// The secret is not in the token's `grantable` list.
    NotGrantable,
}

/// What a `NOT_FOUND` says is missing (`data.kind`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotFoundKind {
    /// No such imp.
    Imp,
    /// No such session.
    Session,
    /// No such secret.
    Secret,
    /// The imp does not hold that grant.
    Grant,
    /// Another kind (`image`, `checkpoint`, `token`, ...), as impd named it.
    Other(String),
}

/// Why an exec requirement failed (`PRECONDITION_FAILED.data.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreconditionReason {
    /// impd refused: the imp's broker is not ready for this start (or the session it would
    /// join was started without the requirement).
    BrokerNotReady,
    /// The impd is older than 0.30.0 and cannot check `require`; a client says so itself,
    /// before sending anything ([`ImpPortError::impd_outdated`]).
    ImpdOutdated,
}

/// A `PRECONDITION_FAILED` read as a requirement refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Precondition {
    /// `None` when impd gave no reason this client knows (a host not configured).
    pub reason: Option<PreconditionReason>,
    /// impd's detail (empty when it gave none), e.g. `no grant`.
    pub detail: String,
}

impl ImpPortError {
    /// The reason of a `FORBIDDEN`; `None` for another code, or a `FORBIDDEN` without a reason
    /// this client knows.
    pub fn forbidden_reason(&self) -> Option<ForbiddenReason> {
        if !self.is(ImpdCode::Forbidden) {
            return None;
        }
        match self.data.get("reason").and_then(Value::as_str)? {
            "scope" => Some(ForbiddenReason::Scope),
            "imp_out_of_scope" => Some(ForbiddenReason::ImpOutOfScope),
            "not_grantable" => Some(ForbiddenReason::NotGrantable),
            _ => None,
        }
    }

    /// What a `NOT_FOUND` says is missing; `None` for another code or one without a kind.
    pub fn not_found_kind(&self) -> Option<NotFoundKind> {
        if !self.is(ImpdCode::NotFound) {
            return None;
        }
        Some(match self.data.get("kind").and_then(Value::as_str)? {
            "imp" => NotFoundKind::Imp,
            "session" => NotFoundKind::Session,
            "secret" => NotFoundKind::Secret,
            "grant" => NotFoundKind::Grant,
            other => NotFoundKind::Other(other.to_string()),
        })
    }

    /// A `PRECONDITION_FAILED` as a requirement refusal; `None` for another code.
    pub fn precondition(&self) -> Option<Precondition> {
        if !self.is(ImpdCode::PreconditionFailed) {
            return None;
        }
        let reason = match self.data.get("reason").and_then(Value::as_str) {
            Some("broker_not_ready") => Some(PreconditionReason::BrokerNotReady),
            Some("impd_outdated") => Some(PreconditionReason::ImpdOutdated),
            _ => None,
        };
        let detail = self
            .data
            .get("detail")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        Some(Precondition { reason, detail })
    }

    /// The refusal a client gives itself, without sending the start, when `require` is set
    /// and impd's `features.execRequire` is not `true` (spec §9.10, §11).
    pub fn impd_outdated(version: &str) -> ImpPortError {
        let detail = format!("impd {version} is older than 0.30.0 and cannot check require");
        let mut e =
            ImpPortError::new(ImpdCode::PreconditionFailed, detail.clone()).with_status(412);
        e.data = serde_json::json!({"reason": "impd_outdated", "detail": detail});
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(code: ImpdCode, data: Value) -> ImpPortError {
        let mut e = ImpPortError::new(code, "m");
        e.data = data;
        e
    }

    #[test]
    fn forbidden_reasons() {
        for (wire, reason) in [
            ("scope", ForbiddenReason::Scope),
            ("imp_out_of_scope", ForbiddenReason::ImpOutOfScope),
            ("not_grantable", ForbiddenReason::NotGrantable),
        ] {
            let e = err(ImpdCode::Forbidden, json!({ "reason": wire }));
            assert_eq!(e.forbidden_reason(), Some(reason));
        }
        assert_eq!(
            err(ImpdCode::Forbidden, Value::Null).forbidden_reason(),
            None
        );
        assert_eq!(
            err(ImpdCode::Forbidden, json!({"reason": "new"})).forbidden_reason(),
            None
        );
        assert_eq!(
            err(ImpdCode::Conflict, json!({"reason": "scope"})).forbidden_reason(),
            None
        );
    }

    #[test]
    fn not_found_kinds() {
        let kind =
            |k: &str| err(ImpdCode::NotFound, json!({"kind": k, "name": "x"})).not_found_kind();
        assert_eq!(kind("grant"), Some(NotFoundKind::Grant));
        assert_eq!(kind("secret"), Some(NotFoundKind::Secret));
        assert_eq!(kind("imp"), Some(NotFoundKind::Imp));
        assert_eq!(kind("ssh-key"), Some(NotFoundKind::Other("ssh-key".into())));
        assert_eq!(err(ImpdCode::NotFound, Value::Null).not_found_kind(), None);
    }

    #[test]
    fn preconditions() {
        let e = err(
            ImpdCode::PreconditionFailed,
            json!({"reason": "broker_not_ready", "detail": "no grant"}),
        );
        assert_eq!(
            e.precondition(),
            Some(Precondition {
                reason: Some(PreconditionReason::BrokerNotReady),
                detail: "no grant".into()
            })
        );
        let bare = err(ImpdCode::PreconditionFailed, Value::Null)
            .precondition()
            .unwrap();
        assert_eq!((bare.reason, bare.detail.as_str()), (None, ""));
        assert_eq!(err(ImpdCode::Forbidden, Value::Null).precondition(), None);
        let old = ImpPortError::impd_outdated("0.29.4");
        assert_eq!(old.status, Some(412));
        let p = old.precondition().unwrap();
        assert_eq!(p.reason, Some(PreconditionReason::ImpdOutdated));
        assert!(p.detail.contains("0.29.4") && p.detail.contains("0.30.0"));
    }
}
