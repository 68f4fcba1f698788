//! The local PTY provider behind another name and another capability set: a test double for
//! targets whose provider lacks something (`input`) or has something local-pty does not
//! (`brokerAuth`), while its processes stay real.

use atc::providers::local_pty::LocalPty;
use atc::providers::{
    Capabilities, ExecutionProvider, HarnessEvents, ProviderError, RunOutput, RunRequest,
    StartSpec, StartedHarness,
};
use bytes::Bytes;
use futures_util::future::LocalBoxFuture;

/// Serves targets whose provider is `kind`, with local-pty's capabilities passed through
/// `adjust`.
pub struct CapsProvider {
    /// The provider kind targets name.
    pub kind: &'static str,
    /// What really runs the processes.
    pub inner: LocalPty,
    /// The capabilities it claims, from local-pty's.
    pub adjust: fn(Capabilities) -> Capabilities,
}

impl ExecutionProvider for CapsProvider {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn capabilities(&self) -> Capabilities {
        (self.adjust)(self.inner.capabilities())
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
