//! The one refusal point (spec §4.4): every operation that starts or touches work on a target
//! asks [`Refusal::check`] (or [`Refusal::check_new`] for a spawn) once, on its path, before
//! anything reaches the target. It owns the map from an [`Operation`] to the capability it
//! needs, and the chain itself ([`chain`]: config, default, entry, identity, provider,
//! capability, in that order), whose refusals are [`TargetError`]s. Host failures, agent
//! refusals and session state (a dead session, say) come after it and belong to whoever runs
//! the operation.

pub mod target_error;

pub use target_error::TargetError;

use std::sync::Arc;

use super::registry::Providers;
use super::targets::{Target, Targets};
use super::{Capabilities, Capability};
use atc_protocol::responses::TargetProblemScope;

/// An operation that reaches a session or its target, as the refusal chain tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A new session.
    Spawn,
    /// A client's revive of an exited session.
    Revive,
    /// A fleet restore starting a session again.
    Restore,
    /// A restarted daemon joining a remote process that kept running.
    Reattach,
    /// A client attaching.
    Attach,
    /// Raw input, over HTTP or the attach socket.
    Input,
    /// A line typed as the agent reads it.
    Submit,
    /// A size change, from a client or over HTTP.
    Resize,
    /// Ending the process.
    Kill,
    /// Sleeping the host with the process inside.
    Suspend,
    /// Forgetting the session (and, on a target that destroys hosts, its host).
    Forget,
}

impl Operation {
    /// The capability the operation needs; `None`: it is never refused (spec §4.4: a resize
    /// is skipped, not refused, where unsupported). `destroys`: whether the target's provider
    /// deletes hosts, which makes a forget a destroy.
    pub fn capability(self, destroys: bool) -> Option<Capability> {
        match self {
            Operation::Spawn | Operation::Revive | Operation::Restore => Some(Capability::Spawn),
            // Joining a running process streams its output; nothing is started.
            Operation::Reattach | Operation::Attach => Some(Capability::Attach),
            Operation::Input | Operation::Submit => Some(Capability::Input),
            Operation::Resize => None,
            Operation::Kill => Some(Capability::Kill),
            Operation::Suspend => Some(Capability::Suspend),
            Operation::Forget if destroys => Some(Capability::Destroy),
            Operation::Forget => Some(Capability::Kill),
        }
    }
}

/// The targets and the providers this daemon built for them: what the chain needs. Cheap to
/// clone; every session holds one in its deps.
#[derive(Clone)]
pub struct Refusal {
    targets: Arc<Targets>,
    providers: Providers,
}

impl Refusal {
    /// The chain over these targets and providers.
    pub fn new(targets: Arc<Targets>, providers: Providers) -> Refusal {
        Refusal { targets, providers }
    }

    /// Whether `op` may run on a session bound to `target` with identity `bound`.
    pub fn check(&self, op: Operation, target: &str, bound: &str) -> Result<(), TargetError> {
        let Some(capability) = op.capability(self.destroys_host(target)) else {
            return Ok(());
        };
        self.chain(Some(target), Some(bound), capability)
            .map(|_| ())
    }

    /// Whether a new session may be spawned on `target` (`None`: the default); answers the
    /// target it resolves to, whose id and identity the session binds to.
    pub fn check_new(&self, target: Option<&str>) -> Result<&Target, TargetError> {
        self.chain(target, None, Capability::Spawn)
    }

    /// Whether a new session on `target` (`None`: the default) may have a workspace: its
    /// provider must both unpack archives and run commands there (spec §4.4, `transfer` and
    /// `run`), asked before any git runs.
    pub fn check_workspace(&self, target: Option<&str>) -> Result<&Target, TargetError> {
        self.chain(target, None, Capability::Transfer)?;
        self.chain(target, None, Capability::Run)
    }

    /// Whether forgetting a session of `target` destroys its host (its provider can).
    pub fn destroys_host(&self, target: &str) -> bool {
        self.providers
            .get(target)
            .is_some_and(|p| p.capabilities().destroy)
    }

    fn chain(
        &self,
        target: Option<&str>,
        bound: Option<&str>,
        capability: Capability,
    ) -> Result<&Target, TargetError> {
        chain(&self.targets, target, bound, capability, |t| {
            self.providers.get(&t.id).map(|p| p.capabilities())
        })
    }
}

/// The refusal chain of spec §4.4 over `targets`. `target` is the session's (or the request's)
/// target, `None` meaning the default; `bound` the identity a session bound to at spawn;
/// `provider_caps` answers whether this daemon has a provider for a target, and what it can
/// do.
pub fn chain<'a>(
    targets: &'a Targets,
    target: Option<&str>,
    bound: Option<&str>,
    capability: Capability,
    provider_caps: impl Fn(&Target) -> Option<Capabilities>,
) -> Result<&'a Target, TargetError> {
    // 1. The file itself.
    if let Some(p) = targets
        .problems()
        .iter()
        .find(|p| p.scope == TargetProblemScope::Config)
    {
        return Err(TargetError::ConfigUnusable {
            problem: p.problem.clone(),
            detail: p.detail.clone(),
            target: p.target.clone(),
        });
    }
    // 2. No target named and no default.
    let Some(id) = target.or(targets.default_id()) else {
        let problem = targets
            .problems()
            .iter()
            .find(|p| p.scope != TargetProblemScope::Target)
            .map(|p| p.problem.clone())
            .unwrap_or_else(|| "no local target and no defaultTarget".into());
        return Err(TargetError::NoDefault { problem });
    };
    // 3. The map, or this entry.
    if let Some(p) = targets.problems().iter().find(|p| {
        p.scope == TargetProblemScope::Targets
            || (p.scope == TargetProblemScope::Target && p.target.as_deref() == Some(id))
    }) {
        return Err(TargetError::Misconfigured {
            id: id.to_string(),
            problem: p.problem.clone(),
            detail: p.detail.clone(),
            target: p.target.clone(),
        });
    }
    // 4. Unknown.
    let Some(t) = targets.list().iter().find(|t| t.id == id) else {
        return Err(TargetError::Unknown { id: id.to_string() });
    };
    // 5. Changed since the session bound to it.
    if let Some(bound) = bound {
        if bound != t.identity {
            return Err(TargetError::Changed {
                id: id.to_string(),
                bound: bound.to_string(),
                current: t.identity.clone(),
            });
        }
    }
    // 6. No provider of that kind here, or the target cannot reach it.
    if let Some(why) = &t.unavailable {
        return Err(TargetError::Unavailable {
            id: id.to_string(),
            provider: t.provider.clone(),
            why: why.clone(),
        });
    }
    let Some(caps) = provider_caps(t) else {
        return Err(TargetError::NoProvider {
            id: id.to_string(),
            provider: t.provider.clone(),
        });
    };
    // 7. The provider cannot do this.
    if !caps.has(capability) {
        return Err(TargetError::CannotDo {
            id: id.to_string(),
            provider: t.provider.clone(),
            capability,
        });
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::{
        Capabilities, ExecutionProvider, HarnessEvents, ProviderError, RunOutput, RunRequest,
        StartSpec, StartedHarness,
    };
    use bytes::Bytes;
    use futures_util::future::LocalBoxFuture;
    use serde_json::json;

    /// A provider that only answers what it can do.
    struct Caps(&'static str, Capabilities);

    impl ExecutionProvider for Caps {
        fn kind(&self) -> &'static str {
            self.0
        }
        fn capabilities(&self) -> Capabilities {
            self.1
        }
        fn start(&self, _: StartSpec, _: HarnessEvents) -> Result<StartedHarness, ProviderError> {
            unreachable!("the refusal chain never starts anything")
        }
        fn run_command(
            &self,
            _: RunRequest,
        ) -> LocalBoxFuture<'static, Result<RunOutput, ProviderError>> {
            unreachable!("the refusal chain never runs anything")
        }
        fn transfer_archive(
            &self,
            _: Bytes,
            _: std::path::PathBuf,
            _: Option<String>,
        ) -> LocalBoxFuture<'static, Result<(), ProviderError>> {
            unreachable!("the refusal chain never transfers anything")
        }
    }

    const PTY: Capabilities = Capabilities {
        spawn: true,
        attach: true,
        input: true,
        resize: true,
        kill: true,
        ..Capabilities::NONE
    };

    /// Targets `local` (a full pty provider), `mute` (no input) and `vm` (destroys hosts,
    /// cannot kill), plus `ghost`, configured with a provider this daemon lacks.
    fn refusal() -> Refusal {
        let raw = serde_json::from_value(json!({
            "local": {"provider": "local-pty"},
            "mute": {"provider": "mute-pty"},
            "vm": {"provider": "vm"},
            "ghost": {"provider": "nobody"},
        }))
        .unwrap();
        let targets = Targets::from_config(Some(&raw), Some(&json!("local")), None);
        let local: Arc<dyn ExecutionProvider> = Arc::new(Caps("local-pty", PTY));
        let providers = Providers::build(&targets, local, |t| match t.provider.as_str() {
            "mute-pty" => Some(Arc::new(Caps(
                "mute-pty",
                Capabilities {
                    input: false,
                    ..PTY
                },
            )) as Arc<dyn ExecutionProvider>),
            "vm" => Some(Arc::new(Caps(
                "vm",
                Capabilities {
                    kill: false,
                    destroy: true,
                    broker_auth: false,
                    ..PTY
                },
            )) as Arc<dyn ExecutionProvider>),
            _ => None,
        });
        Refusal::new(Arc::new(targets), providers)
    }

    fn identity(r: &Refusal, id: &str) -> String {
        r.targets
            .list()
            .iter()
            .find(|t| t.id == id)
            .map(|t| t.identity.clone())
            .unwrap()
    }

    fn code(r: Result<(), TargetError>) -> String {
        r.err()
            .map(|e| {
                crate::server::error::Error::from(e)
                    .code()
                    .as_str()
                    .to_string()
            })
            .unwrap_or_else(|| "ok".into())
    }

    #[test]
    fn each_operation_needs_its_capability() {
        use Operation::*;
        let needs = |op: Operation| op.capability(false);
        assert_eq!(needs(Spawn), Some(Capability::Spawn));
        assert_eq!(needs(Revive), Some(Capability::Spawn));
        assert_eq!(needs(Restore), Some(Capability::Spawn));
        assert_eq!(needs(Reattach), Some(Capability::Attach));
        assert_eq!(needs(Attach), Some(Capability::Attach));
        assert_eq!(needs(Input), Some(Capability::Input));
        assert_eq!(needs(Submit), Some(Capability::Input));
        assert_eq!(needs(Resize), None, "spec §4.4: resize is not refused");
        assert_eq!(needs(Kill), Some(Capability::Kill));
        assert_eq!(needs(Suspend), Some(Capability::Suspend));
        assert_eq!(needs(Forget), Some(Capability::Kill));
        assert_eq!(Forget.capability(true), Some(Capability::Destroy));
    }

    #[test]
    fn a_provider_without_input_refuses_input_and_submit_only() {
        let r = refusal();
        let bound = identity(&r, "mute");
        for op in [Operation::Input, Operation::Submit] {
            let e =
                crate::server::error::Error::from(r.check(op, "mute", &bound).unwrap_err()).wire();
            assert_eq!(e.code.as_str(), "unsupported_operation");
            assert_eq!(e.data.get("capability"), Some(&json!("input")), "{op:?}");
        }
        for op in [
            Operation::Attach,
            Operation::Resize,
            Operation::Kill,
            Operation::Revive,
        ] {
            assert_eq!(code(r.check(op, "mute", &bound)), "ok", "{op:?}");
        }
        assert_eq!(
            code(r.check(Operation::Input, "local", &identity(&r, "local"))),
            "ok"
        );
    }

    #[test]
    fn forget_is_a_destroy_where_the_provider_destroys_hosts() {
        let r = refusal();
        let vm = identity(&r, "vm");
        assert!(r.destroys_host("vm") && !r.destroys_host("local"));
        // The vm provider cannot kill, yet forgetting there needs only `destroy`.
        assert_eq!(
            code(r.check(Operation::Kill, "vm", &vm)),
            "unsupported_operation"
        );
        assert_eq!(code(r.check(Operation::Forget, "vm", &vm)), "ok");
        let local = identity(&r, "local");
        assert_eq!(code(r.check(Operation::Forget, "local", &local)), "ok");
    }

    #[test]
    fn the_chain_runs_in_the_spec_order_for_sessions_and_spawns() {
        let r = refusal();
        // A changed identity is refused before the provider's capabilities are asked.
        assert_eq!(
            code(r.check(Operation::Input, "mute", "mute-pty:old")),
            "target_changed"
        );
        assert_eq!(
            code(r.check(Operation::Kill, "ghost", &identity(&r, "ghost"))),
            "target_unavailable"
        );
        assert_eq!(
            code(r.check(Operation::Attach, "gone", "x")),
            "unknown_target"
        );
        // Resize is never refused, whatever the target.
        assert_eq!(code(r.check(Operation::Resize, "gone", "x")), "ok");
        assert_eq!(r.check_new(None).map(|t| t.id.as_str()).ok(), Some("local"));
        assert_eq!(
            r.check_new(Some("ghost"))
                .err()
                .map(|e| crate::server::error::Error::from(e).code().as_str()),
            Some("target_unavailable")
        );
    }

    const LOCAL_CAPS: Capabilities = Capabilities {
        spawn: true,
        attach: true,
        input: true,
        resize: true,
        kill: true,
        ..Capabilities::NONE
    };

    fn local_only(t: &Target) -> Option<Capabilities> {
        (t.provider == "local-pty").then_some(LOCAL_CAPS)
    }

    fn raw(v: serde_json::Value) -> crate::config::raw::RawTargets {
        serde_json::from_value(v).unwrap()
    }

    fn chain_code(r: Result<&Target, TargetError>) -> String {
        r.err()
            .map(|e| {
                crate::server::error::Error::from(e)
                    .code()
                    .as_str()
                    .to_string()
            })
            .unwrap_or_default()
    }

    #[test]
    fn the_refusal_chain_gives_codes_in_order() {
        let file = Some(crate::config::targets::TargetProblem {
            scope: TargetProblemScope::Config,
            target: None,
            problem: "config_malformed".into(),
            detail: "line 1".into(),
        });
        let broken_file = Targets::from_config(None, None, file);
        assert_eq!(
            chain_code(chain(
                &broken_file,
                Some("local"),
                None,
                Capability::Spawn,
                local_only
            )),
            "target_config_invalid"
        );

        // Text, not json!: json! sorts keys, and the order of the file is what is kept.
        let text = r#"{"local": {"provider": "local-pty"}, "box": {"provider": "imp", "url": "http://impd"}, "broken": {"url": "x"}, "odd": 7}"#;
        let targets: crate::config::raw::RawTargets = serde_json::from_str(text).unwrap();
        let t = Targets::from_config(Some(&targets), Some(&json!("local")), None);
        assert_eq!(t.list()[0].id, "local", "config order is kept");
        assert_eq!(t.list()[1].id, "box");
        assert_eq!(t.list().len(), 2);
        assert_eq!(t.problems().len(), 2);
        assert_eq!(
            chain_code(chain(
                &t,
                Some("broken"),
                None,
                Capability::Spawn,
                local_only
            )),
            "target_config_invalid"
        );
        assert_eq!(
            chain_code(chain(&t, Some("odd"), None, Capability::Spawn, local_only)),
            "target_config_invalid"
        );
        assert_eq!(
            chain_code(chain(&t, Some("nope"), None, Capability::Spawn, local_only)),
            "unknown_target"
        );
        assert_eq!(
            chain_code(chain(
                &t,
                Some("local"),
                Some("local-pty:0000000000000000"),
                Capability::Attach,
                local_only
            )),
            "target_changed"
        );
        assert_eq!(
            chain_code(chain(&t, Some("box"), None, Capability::Spawn, local_only)),
            "target_unavailable"
        );
        let no_kill = |t: &Target| local_only(t).map(|c| Capabilities { kill: false, ..c });
        let e = chain(&t, Some("local"), None, Capability::Kill, no_kill).unwrap_err();
        let wire = crate::server::error::Error::from(e).wire();
        assert_eq!(
            wire.code,
            crate::server::error::ErrorCode::UnsupportedOperation
        );
        assert_eq!(wire.data["capability"], "kill");
        assert!(chain(
            &t,
            None,
            Some(crate::providers::targets::IMPLICIT_LOCAL_IDENTITY),
            Capability::Input,
            local_only
        )
        .is_ok());
        // Earlier rules win: an unknown target on a broken file is still a config error.
        let broken = Targets::from_config(Some(&raw(json!([]))), None, None);
        assert_eq!(
            chain_code(chain(
                &broken,
                Some("nope"),
                None,
                Capability::Spawn,
                local_only
            )),
            "target_config_invalid"
        );
        // No default and none named.
        let no_default = Targets::from_config(
            Some(&raw(json!({"a": {"provider": "local-pty"}}))),
            None,
            None,
        );
        assert_eq!(
            chain_code(chain(
                &no_default,
                None,
                None,
                Capability::Spawn,
                local_only
            )),
            "target_config_invalid"
        );
        let bad_default = Targets::from_config(Some(&targets), Some(&json!("ghost")), None);
        assert!(bad_default.default_id().is_none());
        assert_ne!(bad_default.revision(), t.revision());
    }

    #[test]
    fn imp_entries_with_problems_are_refused_by_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "imp_1.secret-value\n").unwrap();
        let path = token.display().to_string();
        let t = Targets::from_config(
            Some(&raw(json!({
                "ok": {"provider": "imp", "url": "http://impd:7070", "tokenFile": path},
                "nourl": {"provider": "imp", "tokenFile": path},
                "both": {"provider": "imp", "url": "http://i", "tokenFile": path, "tokenEnv": "X"},
            }))),
            None,
            None,
        );
        let imp_caps = |t: &Target| (t.provider == "imp").then_some(LOCAL_CAPS);
        assert_eq!(
            chain_code(chain(&t, Some("nourl"), None, Capability::Spawn, imp_caps)),
            "target_unavailable"
        );
        assert_eq!(
            chain_code(chain(&t, Some("both"), None, Capability::Spawn, imp_caps)),
            "target_config_invalid"
        );
        assert!(chain(&t, Some("ok"), None, Capability::Spawn, imp_caps).is_ok());
    }
}
