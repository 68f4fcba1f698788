//! The one refusal point (spec §4.4): every operation that starts or touches work on a target
//! asks [`Refusal::check`] (or [`Refusal::check_new`] for a spawn) once, on its path, before
//! anything reaches the target. It owns the map from an [`Operation`] to the capability it
//! needs; the chain itself (config, default, entry, identity, provider, capability, in that
//! order) is [`Targets::check`]. Host failures, agent refusals and session state (a dead
//! session, say) come after it and belong to whoever runs the operation.

use std::sync::Arc;

use super::registry::Providers;
use super::Capability;
use crate::config::targets::{Target, Targets};
use crate::config::TargetError;

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
        self.targets.check(target, bound, capability, |t| {
            self.providers.get(&t.id).map(|p| p.capabilities())
        })
    }
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
            .map(|e| crate::error::Error::from(e).code().as_str().to_string())
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
            let e = crate::error::Error::from(r.check(op, "mute", &bound).unwrap_err()).wire();
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
                .map(|e| crate::error::Error::from(e).code().as_str()),
            Some("target_unavailable")
        );
    }
}
