//! The `local-pty` provider: what it can do, and where its starts, commands and archives go.

use std::time::Duration;

use bytes::Bytes;

use super::harness::LocalPtyHarness;
use super::launch::Launched;
use crate::providers::{
    Capabilities, ExecutionProvider, HarnessEvents, HarnessHandle, ProviderError, RunOutput,
    RunRequest, StartSpec, StartedHarness,
};
use atc_protocol::TermSize;
use futures_util::future::LocalBoxFuture;

/// The `local-pty` provider.
pub struct LocalPty {
    /// After the child is reaped, how long to keep draining output before reporting the exit.
    pub exit_drain: Duration,
    /// Variables of the daemon's environment no local process gets: the ones that hold
    /// credentials (every imp target's `tokenEnv`). A local session starts from the daemon's
    /// environment, so without this an impd token given by variable reached every shell.
    pub withheld: Vec<String>,
    /// The cgroups its sessions run in; `None` where the machine has none for the daemon
    /// (sessions then run without limits, and a spawn asking for some is refused).
    pub cgroups: Option<std::sync::Arc<super::cgroup::SessionCgroups>>,
}

/// The provider's kind, as targets name it.
pub const KIND: &str = "local-pty";

impl ExecutionProvider for LocalPty {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            spawn: true,
            attach: true,
            input: true,
            resize: true,
            kill: true,
            transfer: true,
            run: true,
            headless: true,
            suspend: false,
            destroy: false,
            broker_auth: false,
        }
    }

    fn run_command(
        &self,
        req: RunRequest,
    ) -> LocalBoxFuture<'static, Result<RunOutput, ProviderError>> {
        Box::pin(super::command::run(req, self.withheld.clone()))
    }

    fn transfer_archive(
        &self,
        archive: Bytes,
        dir: std::path::PathBuf,
        _host_key: Option<String>,
    ) -> LocalBoxFuture<'static, Result<(), ProviderError>> {
        Box::pin(super::command::unpack(archive, dir, self.withheld.clone()))
    }

    fn session_cgroups(&self) -> Option<&std::sync::Arc<super::cgroup::SessionCgroups>> {
        self.cgroups.as_ref()
    }

    fn launcher(&self, spec: &StartSpec) -> Option<crate::providers::Launcher> {
        let (plan, size) = (self.spawn_plan(spec), spec.size);
        let limits = spec.limits;
        Some(Box::new(move || launch(&plan, size, &limits)))
    }

    fn start(
        &self,
        mut spec: StartSpec,
        events: HarnessEvents,
    ) -> Result<StartedHarness, ProviderError> {
        let launched = match spec.launched.take() {
            Some(launched) => launched,
            // A revive starts here, on the sessions' thread: rare enough not to hand off.
            None => launch(&self.spawn_plan(&spec), spec.size, &spec.limits)?,
        };
        let leader = launched.leader.clone();
        let (addr, input) = LocalPtyHarness::adopt(launched, events, self.exit_drain)?;
        Ok(StartedHarness {
            handle: HarnessHandle {
                input: addr.clone().recipient(),
                resize: addr.clone().recipient(),
                hangup: addr.clone().recipient(),
                detach: addr.recipient(),
                direct_input: Some(input),
            },
            ready: None,
            leader,
        })
    }
}

/// Starts `plan` on a fresh PTY of `size`, in its working directory, which must exist, and
/// in its cgroup, made here with `limits`.
fn launch(
    plan: &super::pty_spawn::Plan,
    size: TermSize,
    limits: &atc_protocol::SessionLimits,
) -> Result<Launched, ProviderError> {
    if !plan.cwd.is_dir() {
        return Err(ProviderError::BadCwd(plan.cwd.display().to_string()));
    }
    if let Some(group) = &plan.cgroup {
        group.create(limits).map_err(|e| {
            tracing::error!(error = %e, "a session's cgroup could not be made");
            ProviderError::Os(std::io::Error::other(e.to_string()))
        })?;
    }
    let launched = super::launch::launch(plan, size);
    if let (Err(_), Some(group)) = (&launched, &plan.cgroup) {
        // Nothing started in it. A removal that fails leaves it to the next sweep.
        let _ = group.remove();
    }
    launched
}

impl LocalPty {
    /// What the child runs: the launch plan with the variables every local process gets,
    /// less the daemon's withheld ones, in the session's cgroup if the daemon has cgroups.
    fn spawn_plan(&self, spec: &StartSpec) -> super::pty_spawn::Plan {
        let mut plan = spawn_plan(spec, &self.withheld);
        plan.cgroup = self.cgroups.as_ref().map(|c| c.group(spec.session_id));
        plan
    }
}

/// What the child runs: the launch plan with the variables every local process gets, less
/// the daemon's `withheld` ones.
fn spawn_plan(spec: &StartSpec, withheld: &[String]) -> super::pty_spawn::Plan {
    let plan = &spec.plan;
    let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> =
        plan.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
    env.push(("TERM".into(), "xterm-256color".into()));
    env.push(("ATC_SESSION_ID".into(), spec.session_id.to_string().into()));
    super::pty_spawn::Plan {
        program: plan.program.clone(),
        args: plan.args.iter().map(Into::into).collect(),
        cwd: plan.cwd.clone(),
        env,
        withheld: withheld.iter().map(Into::into).collect(),
        cgroup: None,
    }
}
