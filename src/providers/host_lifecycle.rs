//! The host lifecycle: what a provider whose sessions run on hosts of their own (an imp, a
//! microVM per session) can do with those hosts, beside starting harnesses on them. Put a host
//! to sleep with its harnesses inside, delete it, and keep the broker binding that lets its
//! agent use a credential it never sees (spec §5.5, §6.3).
//!
//! A provider has one only if it answers [`ExecutionProvider::hosts`]; only `imp` does. The
//! session code asks for it by capability ([`host_lifecycle`]), so a provider without hosts
//! carries no methods that mean nothing for it.

use std::collections::BTreeSet;

use actix::Recipient;
use futures_util::future::LocalBoxFuture;

use super::imp::broker::binder::{Launcher, ReconcileSummary};
use super::imp::broker::binding::Binding;
use super::{CheckIdle, ExecutionProvider, ProviderError};
use atc_protocol::capabilities::Capability;

/// A host's broker binding as a client sees it, or why not.
pub type AuthAnswer = Result<atc_protocol::responses::AuthStatus, ProviderError>;

/// The hosts of a provider, each named by its host key (the owning session's id).
pub trait HostLifecycle {
    /// Puts the host `host_key` to sleep with its harnesses inside (spec §5.5). `idle`: the
    /// session to ask whether the host may sleep (`None`: an operator's kill, not checked).
    fn suspend_host(
        &self,
        host_key: &str,
        idle: Option<Recipient<CheckIdle>>,
    ) -> LocalBoxFuture<'static, Result<(), ProviderError>>;
    /// Readies the host `host_key` (created when missing, woken, leased) for work before its
    /// first harness starts, such as a workspace sent in; answers the directory on the host
    /// where that session's files go (`<guestDir>/sessions/<host_key>`).
    fn prepare_host(
        &self,
        host_key: &str,
    ) -> LocalBoxFuture<'static, Result<std::path::PathBuf, ProviderError>>;
    /// Deletes the host `host_key` and everything on it.
    fn destroy_host(&self, host_key: &str) -> LocalBoxFuture<'static, Result<(), ProviderError>>;
    /// What the host's broker binding is (spec §6.3).
    fn auth_status(&self, host_key: &str) -> LocalBoxFuture<'static, AuthAnswer>;
    /// Revokes every grant of the host's broker binding, and answers what it is then.
    fn auth_revoke(&self, host_key: &str) -> LocalBoxFuture<'static, AuthAnswer>;
    /// Rebinds the host's broker binding to `launcher`'s `auth` as configured now, and
    /// answers the new revision.
    fn auth_rebind(
        &self,
        host_key: &str,
        launcher: Launcher,
    ) -> LocalBoxFuture<'static, Result<u32, ProviderError>>;
    /// Start-up reconciliation (spec §6.3) of `bindings`, the broker bindings recorded for
    /// this provider's target, before the daemon serves or restores a session; `listed_hosts`
    /// are the host keys listed sessions use.
    fn reconcile_bindings(
        &self,
        bindings: Vec<Binding>,
        listed_hosts: &BTreeSet<String>,
    ) -> LocalBoxFuture<'static, ReconcileSummary>;
}

/// `provider`'s host lifecycle, for an operation that needs `capability` (`suspend` or
/// `destroy`); a provider that has none, or cannot do that, is refused with
/// [`ProviderError::NoHostLifecycle`].
pub fn host_lifecycle(
    provider: &dyn ExecutionProvider,
    capability: Capability,
) -> Result<&dyn HostLifecycle, ProviderError> {
    match provider.hosts() {
        Some(hosts) if provider.capabilities().has(capability) => Ok(hosts),
        _ => Err(ProviderError::NoHostLifecycle {
            kind: provider.kind(),
            capability: capability.as_str(),
        }),
    }
}

/// An operation on the host's broker binding (its status, a revoke, a rebind) through
/// `provider`'s host lifecycle; a provider without hosts holds no binding.
pub fn auth_of<T: 'static>(
    provider: &dyn ExecutionProvider,
    ask: impl FnOnce(&dyn HostLifecycle) -> LocalBoxFuture<'static, Result<T, ProviderError>>,
) -> LocalBoxFuture<'static, Result<T, ProviderError>> {
    match provider.hosts() {
        Some(hosts) => ask(hosts),
        None => Box::pin(std::future::ready(Err(
            super::imp::broker::BrokerError::NotBound.into(),
        ))),
    }
}
