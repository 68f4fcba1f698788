//! Another provider behind another name and another capability set: a test double for
//! targets whose provider lacks something (`input`) or has something the real one does not
//! claim yet (`brokerAuth`), while its processes stay real. Every call goes to `inner`.

use std::sync::Arc;

use atc::providers::{
    Capabilities, ExecutionProvider, HarnessEvents, HostLifecycle, ProviderError, RunOutput,
    RunRequest, StartSpec, StartedHarness,
};
use bytes::Bytes;
use futures_util::future::LocalBoxFuture;

/// Serves targets whose provider is `kind`, with `inner`'s capabilities passed through
/// `adjust`.
pub struct CapsProvider {
    /// The provider kind targets name.
    pub kind: &'static str,
    /// What really runs the processes.
    pub inner: Arc<dyn ExecutionProvider>,
    /// The capabilities it claims, from `inner`'s.
    pub adjust: fn(Capabilities) -> Capabilities,
}

impl ExecutionProvider for CapsProvider {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn capabilities(&self) -> Capabilities {
        (self.adjust)(self.inner.capabilities())
    }

    fn remote(&self) -> bool {
        self.inner.remote()
    }

    fn guest_atc(&self) -> Option<std::path::PathBuf> {
        self.inner.guest_atc()
    }

    fn hosts(&self) -> Option<&dyn HostLifecycle> {
        self.inner.hosts()
    }

    fn shutdown(&self) -> LocalBoxFuture<'static, ()> {
        self.inner.shutdown()
    }

    fn start(
        &self,
        spec: StartSpec,
        events: HarnessEvents,
    ) -> Result<StartedHarness, ProviderError> {
        self.inner.start(spec, events)
    }

    fn run_command(
        &self,
        req: RunRequest,
    ) -> LocalBoxFuture<'static, Result<RunOutput, ProviderError>> {
        self.inner.run_command(req)
    }

    fn transfer_archive(
        &self,
        archive: Bytes,
        dir: std::path::PathBuf,
        host_key: Option<String>,
    ) -> LocalBoxFuture<'static, Result<(), ProviderError>> {
        self.inner.transfer_archive(archive, dir, host_key)
    }
}
