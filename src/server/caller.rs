//! Who a request acts as (spec §2.5). A request carrying the owner's token acts as the owner,
//! who reaches everything; one carrying a principal's token acts as that principal, who
//! reaches only the targets config grants it. `X-Atc-As: <id>` (or the same, remembered by a
//! ticket) lets the owner act as a principal, and only ever narrows: on a principal's own
//! token it intersects the two grants, and idempotency keys stay the token's principal's.
//!
//! The middleware in `mod.rs` resolves the [`Caller`] once per request and puts it in the
//! request's extensions; handlers take it as an extractor, and every session lookup needs it
//! (`super::lookup`), so no route can reach a session without asking.

use std::collections::HashMap;
use std::sync::Arc;

use actix_web::{dev::Payload, FromRequest, HttpMessage, HttpRequest};

use super::auth::AuthError;
pub use super::tokens::Who;
use crate::config::principals::Principals;
use crate::providers::targets::Targets;
use crate::sessions::reach::Reach;

/// The header by which the owner acts as a principal (looked up case-insensitively).
pub use atc_protocol::ACT_AS_HEADER;

/// The principal idempotency keys of the owner are stored under (spec §7.2).
pub const OWNER_PRINCIPAL: &str = "local";

/// Ids no principal may have: the owner's in the ledger, and the word for the owner.
const RESERVED_IDS: &[&str] = &[OWNER_PRINCIPAL, "owner"];

/// What a request acts as, resolved once by the middleware.
#[derive(Debug, Clone)]
pub struct Caller {
    /// `None` for the owner (everything is in reach); a principal's granted targets.
    pub reach: Option<Arc<Reach>>,
    /// The principal its idempotency keys are kept under.
    pub principal: String,
    /// The `X-Atc-As` it asked with (a ticket it mints remembers it).
    pub asked_as: Option<String>,
}

impl Caller {
    /// The owner, acting as itself.
    pub fn owner() -> Caller {
        Caller {
            reach: None,
            principal: OWNER_PRINCIPAL.to_string(),
            asked_as: None,
        }
    }

    /// Whether this is the owner acting as itself (owner-only routes need that).
    pub fn is_owner(&self) -> bool {
        self.reach.is_none()
    }
}

/// The principals' reaches, built from config and the targets once at start.
#[derive(Debug, Clone)]
pub struct Reaches {
    /// The config has a `principals` key.
    declared: bool,
    reaches: HashMap<String, Arc<Reach>>,
    /// Without a `principals` key every principal may use only `local` (spec §2.5).
    implicit: Arc<Reach>,
}

impl Reaches {
    /// The reaches of config's `principals` over `targets`. Without a `principals` key any
    /// id names a principal that reaches `local` only.
    pub fn new(principals: &Principals, targets: &Targets) -> Self {
        let current = || {
            targets
                .list()
                .iter()
                .map(|t| (t.id.as_str(), t.identity.as_str()))
        };
        let reaches = principals
            .ids()
            .map(|id| {
                let names = principals.targets_of(id).unwrap_or_default();
                let reach = Reach::new(names.iter().map(String::as_str), current());
                (id.to_string(), Arc::new(reach))
            })
            .collect();
        Reaches {
            declared: principals.declared(),
            reaches,
            implicit: Arc::new(Reach::new([OWNER_PRINCIPAL], current())),
        }
    }

    /// The reach of principal `id`, if there is one by that id.
    fn reach_of(&self, id: &str) -> Option<Arc<Reach>> {
        if RESERVED_IDS.contains(&id) {
            return None;
        }
        if self.declared {
            return self.reaches.get(id).cloned();
        }
        Some(self.implicit.clone())
    }

    /// What a request by `who`, asking to act as `acting_as`, acts as.
    pub fn caller(&self, who: &Who, acting_as: Option<&str>) -> Result<Caller, AuthError> {
        let unknown = |id: &str| AuthError::UnknownPrincipal {
            id: id.chars().take(64).collect(),
        };
        let asked = acting_as
            .map(|id| self.reach_of(id).ok_or_else(|| unknown(id)))
            .transpose()?;
        match (who, acting_as, asked) {
            (Who::Owner, Some(id), Some(reach)) => Ok(Caller {
                reach: Some(reach),
                principal: id.to_string(),
                asked_as: Some(id.to_string()),
            }),
            (Who::Owner, _, _) => Ok(Caller::owner()),
            (Who::Principal(p), _, asked) => {
                let own = self.reach_of(p).ok_or_else(|| unknown(p))?;
                let reach = match asked {
                    Some(other) => Arc::new(own.narrowed(&other)),
                    None => own,
                };
                Ok(Caller {
                    reach: Some(reach),
                    principal: p.clone(),
                    asked_as: acting_as.map(str::to_string),
                })
            }
        }
    }
}

/// The `X-Atc-As` header of a request: `Ok(None)` when absent.
pub fn act_as(headers: &actix_web::http::header::HeaderMap) -> Result<Option<String>, AuthError> {
    let Some(value) = headers.get(ACT_AS_HEADER) else {
        return Ok(None);
    };
    let id = value.to_str().map_err(|_| AuthError::BadActAs)?.trim();
    if !atc_protocol::is_principal_id(id) {
        return Err(AuthError::BadActAs);
    }
    Ok(Some(id.to_string()))
}

impl FromRequest for Caller {
    type Error = actix_web::Error;
    type Future = std::future::Ready<Result<Caller, actix_web::Error>>;

    /// The caller the middleware resolved. A request that has none never passed the token
    /// check (a public route's): it reaches nothing.
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let caller = req.extensions().get::<Caller>().cloned();
        std::future::ready(Ok(caller.unwrap_or(Caller {
            reach: Some(Arc::new(Reach::default())),
            principal: String::new(),
            asked_as: None,
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn targets() -> Targets {
        let entries = serde_json::from_value(json!({
            "local": {"provider": "local-pty"},
            "vm": {"provider": "imp", "url": "http://impd:7070", "image": "x",
                   "tokenEnv": "ATC_TEST_SURELY_UNSET_VAR"},
        }))
        .expect("targets");
        Targets::from_config(Some(&entries), None, None)
    }

    fn reaches(principals: serde_json::Value) -> Reaches {
        let mut problems = Vec::new();
        let config = Principals::from_config(Some(principals), &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        Reaches::new(&config, &targets())
    }

    #[test]
    fn the_owner_reaches_everything_and_acts_as_a_principal_only_narrower() {
        let p = reaches(json!({"ci": {"targets": ["vm"]}, "bot": {"targets": ["local"]}}));
        let owner = p.caller(&Who::Owner, None).unwrap();
        assert!(owner.is_owner());
        assert_eq!(owner.principal, "local");
        let as_ci = p.caller(&Who::Owner, Some("ci")).unwrap();
        assert!(!as_ci.is_owner());
        assert_eq!(as_ci.principal, "ci");
        assert_eq!(as_ci.reach.unwrap().target_ids(), vec!["vm"]);
        assert!(matches!(
            p.caller(&Who::Owner, Some("nobody")),
            Err(AuthError::UnknownPrincipal { .. })
        ));
        assert!(matches!(
            p.caller(&Who::Owner, Some("local")),
            Err(AuthError::UnknownPrincipal { .. })
        ));
    }

    #[test]
    fn a_principal_acting_as_another_gets_the_intersection_and_keeps_its_keys() {
        let p = reaches(json!({
            "ci": {"targets": ["vm", "local"]},
            "bot": {"targets": ["local"]},
        }));
        let ci = Who::Principal("ci".into());
        let plain = p.caller(&ci, None).unwrap();
        assert_eq!(plain.reach.unwrap().target_ids(), vec!["local", "vm"]);
        let narrowed = p.caller(&ci, Some("bot")).unwrap();
        assert_eq!(
            narrowed.principal, "ci",
            "keys stay the token's principal's"
        );
        assert_eq!(narrowed.reach.unwrap().target_ids(), vec!["local"]);
        let bot = Who::Principal("bot".into());
        let never_wider = p.caller(&bot, Some("ci")).unwrap();
        assert_eq!(never_wider.reach.unwrap().target_ids(), vec!["local"]);
    }

    #[test]
    fn without_a_principals_key_every_principal_reaches_local_only() {
        let p = Reaches::new(&Principals::default(), &targets());
        let any = p.caller(&Who::Owner, Some("script")).unwrap();
        assert_eq!(any.reach.unwrap().target_ids(), vec!["local"]);
    }

    #[test]
    fn the_header_is_an_id() {
        use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(
                HeaderName::from_static("x-atc-as"),
                HeaderValue::from_str(v).unwrap(),
            );
            act_as(&h)
        };
        assert_eq!(act_as(&HeaderMap::new()), Ok(None));
        assert_eq!(with("ci-1_x"), Ok(Some("ci-1_x".into())));
        for bad in ["", "CI", "a b", "../x", "-x", &"a".repeat(65)] {
            assert_eq!(with(bad), Err(AuthError::BadActAs), "{bad:?}");
        }
    }
}
