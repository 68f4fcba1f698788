//! Execution providers: where a session's process runs, behind one trait.
//!
//! A provider starts a harness and hands back a [`HarnessHandle`]: recipients for the commands
//! a session sends its harness. The harness reports back through [`HarnessEvents`], so this
//! module never imports `sessions/` and a test can pass a probe actor in their place.
//!
//! Besides harnesses, a provider runs commands to completion ([`ExecutionProvider::run_command`])
//! and unpacks tar archives into a directory ([`ExecutionProvider::transfer_archive`]): the two
//! things a workspace hand-off needs on whatever machine the session runs on.
//!
//! Providers: `local-pty`, and `imp` (sessions inside microVMs on an impd host). Targets name
//! a provider by kind, and the refusal chain ([`refusal`]) asks the provider's
//! [`Capabilities`] whether it can do what a request needs.

pub mod host_lifecycle;
pub mod imp;
pub mod local;
pub mod provider_error;
pub mod refusal;
pub mod registry;
pub mod targets;

pub use host_lifecycle::{AuthAnswer, HostLifecycle};
pub use provider_error::ProviderError;

/// Largest output chunk any harness hands to its session at once. The session sizes its screen
/// model's backlog in these, which is what keeps a repaint's offset inside the ring. A local
/// harness reads into a buffer this large (a PTY gives at most 4 KiB a read); a remote one
/// cuts impd's frames, which reach 256 KiB on a replay, with [`output_pieces`].
pub const MAX_OUTPUT_CHUNK: usize = 32 * 1024;

/// `bytes` as consecutive pieces of at most [`MAX_OUTPUT_CHUNK`], sharing its buffer.
pub fn output_pieces(bytes: Bytes) -> impl Iterator<Item = Bytes> {
    let len = bytes.len();
    (0..len)
        .step_by(MAX_OUTPUT_CHUNK)
        .map(move |at| bytes.slice(at..len.min(at + MAX_OUTPUT_CHUNK)))
}

use actix::prelude::*;
use bytes::Bytes;
use futures_util::future::LocalBoxFuture;

use crate::agents::LaunchPlan;
use atc_protocol::TermSize;

/// Bytes a harness read from its process. Sent by the harness to its session; the reply is
/// awaited, so a session that falls behind slows the reader instead of growing a mailbox.
#[derive(Message)]
#[rtype(result = "()")]
pub struct OutputArrived(pub Bytes);

/// How a harness ended (spec §4.3 `onExit` reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HarnessEnd {
    /// The process exited; its status is known.
    #[default]
    Exited,
    /// The host went to sleep with the process inside; a revive can reach it again.
    Suspended,
    /// The harness ended without an exit its provider could confirm (a remote process that
    /// was replaced, a host that rebooted, a connection that could not be re-established).
    Ended,
    /// The kernel killed the process at its session's memory limit (its cgroup counted an
    /// out-of-memory kill, and SIGKILL ended the process).
    MemoryLimit,
}

/// The harness's process is gone and all its output has been delivered. Sent exactly once.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct HarnessExited {
    /// Exit status, when it exited.
    pub code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub signal: Option<i32>,
    /// How it ended.
    pub end: HarnessEnd,
    /// What the user should read about it ("imp rebooted (watchdog)"), when the status alone
    /// does not say.
    pub detail: Option<String>,
    /// A remote process's position when its harness ended, kept for a revive.
    pub position: Option<RemotePosition>,
}

impl HarnessExited {
    /// A process that exited with this status or signal.
    pub fn exited(code: Option<i32>, signal: Option<i32>) -> HarnessExited {
        HarnessExited {
            code,
            signal,
            end: HarnessEnd::Exited,
            detail: None,
            position: None,
        }
    }
}

/// A remote harness's connection state changed (spec §3.3 `attachment`).
#[derive(Message, Debug, Clone, PartialEq, Eq)]
#[rtype(result = "()")]
pub enum AttachmentChanged {
    /// Connected and streaming, to the process at this position (when impd reports offsets).
    Attached(Option<RemotePosition>),
    /// The connection dropped; the harness is reconnecting.
    Reattaching,
}

/// Let the harness go without ending what it runs where that outlives the daemon (a remote
/// process keeps running in its imp); a local process is ended, since nothing would own it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct DetachHarness {
    /// The host went to sleep with the process inside (end as suspended), rather than the
    /// daemon stopping.
    pub host_asleep: bool,
}

/// Whether a session considers itself idle (no agent turn under way, no recent output): a
/// host sleep checks it before and right before it sleeps.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct CheckIdle;

/// Write these bytes to the process's terminal, whole. Sent by the session.
#[derive(Message)]
#[rtype(result = "Result<(), ProviderError>")]
pub struct WriteInput(pub Bytes);

/// Resize the process's terminal. Sent by the session only when the size changes.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ResizeTerminal(pub TermSize);

/// End the process: SIGHUP now, SIGKILL once `grace` runs out (zero: SIGKILL at once).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Hangup {
    /// Time between the two signals.
    pub grace: std::time::Duration,
}

/// A hook report for one session: from the reporter socket (the reporter finds the session
/// through the manager), or from a remote harness's session bridge (spec §5.7), which reaches
/// its session directly. The session answers whether it took the report: it refuses one whose
/// values break `agents::report_check`'s rules or that is over its report rate, and stores
/// nothing of it.
#[derive(Message)]
#[rtype(result = "Result<(), crate::agents::report_check::ReportRefused>")]
pub struct HookReported {
    /// The hook's name, PascalCase.
    pub event: String,
    /// The agent's hook JSON.
    pub payload: serde_json::Value,
    /// Where it came from, which decides whether paths it names may be opened.
    pub origin: ReportOrigin,
}

/// Where a hook report came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportOrigin {
    /// The daemon's reporter socket: a process on this host, whose paths are this host's.
    Local,
    /// A remote harness's session bridge: a process inside an imp. The paths it names are the
    /// guest's, and are never opened on the host.
    Guest,
}

/// Asks a session how it stands now. Sent by a remote harness's session bridge before each
/// line it serves, to re-check the connection's binding and to answer `status.read`
/// (spec §5.7); a session that is gone answers nothing (the send fails).
#[derive(Message)]
#[rtype(result = "SessionView")]
pub struct ReadSessionView;

/// A session's own view of itself, as its bridge needs it.
#[derive(Debug, Clone)]
pub struct SessionView {
    /// The target it runs on now.
    pub target: String,
    /// That target's identity when the session bound to it.
    pub target_identity: String,
    /// Its listed state.
    pub state: atc_protocol::SessionState,
    /// Its `lastMsg`.
    pub last_msg: String,
}

/// Where a harness reports.
#[derive(Clone)]
pub struct HarnessEvents {
    /// Output chunks, in order.
    pub output: Recipient<OutputArrived>,
    /// The one exit notice.
    pub exited: Recipient<HarnessExited>,
    /// Connection state changes of remote harnesses.
    pub attachment: Recipient<AttachmentChanged>,
    /// Hook reports that reach the harness itself (a remote harness's report forward).
    pub hook: Recipient<HookReported>,
    /// The session's view of itself (a remote harness's session bridge).
    pub view: Recipient<ReadSessionView>,
}

/// How a session talks to its harness.
#[derive(Clone)]
pub struct HarnessHandle {
    /// Input bytes.
    pub input: Recipient<WriteInput>,
    /// Size changes.
    pub resize: Recipient<ResizeTerminal>,
    /// Kill.
    pub hangup: Recipient<Hangup>,
    /// Let go (daemon shutdown).
    pub detach: Recipient<DetachHarness>,
    /// The PTY's input itself, where the process runs on this machine: an attach socket
    /// types into it without a hop through the session and the harness.
    pub direct_input: Option<local::pty_input::PtyInput>,
}

/// A harness that was handed to its session, and whether its process is known to run yet.
pub struct StartedHarness {
    /// How the session talks to it.
    pub handle: HarnessHandle,
    /// `None` when the process runs already (local); else resolves once the remote start or
    /// attach succeeded, or with the refusal that ended the harness first (spec §5.6
    /// `waitForStart`). A spawn answers only after it.
    pub ready: Option<tokio::sync::oneshot::Receiver<Result<(), crate::providers::ProviderError>>>,
    /// The leader of the local process's group, to be recorded with the session
    /// ([`group_leader`]); `None` for a process elsewhere, or one gone before it was read.
    pub leader: Option<local::group_leader::GroupLeader>,
}

/// What a harness is started with.
#[derive(Debug)]
pub struct StartSpec {
    /// The session it belongs to (goes into `ATC_SESSION_ID`). Everything of one session on
    /// its host (files, report socket, exec session) is named after it.
    pub session_id: atc_protocol::SessionId,
    /// The host it runs on (spec §4.5): the session's own id, or its parent's when it joined
    /// the parent's host. The host itself (imp, lease, broker binding) is named after it.
    pub host_key: atc_protocol::SessionId,
    /// Program, argv, environment and cwd.
    pub plan: LaunchPlan,
    /// Initial terminal size.
    pub size: TermSize,
    /// Where a remote process was when its last harness let go of it (remote providers
    /// resume from it; local ones ignore it).
    pub remote: Option<RemotePosition>,
    /// Join the process that runs already instead of starting one: a daemon restart
    /// re-attaching its remote sessions. Local providers never get it.
    pub attach_only: bool,
    /// Whether this start makes its host (a spawn) or finds it made (a revive, a restore, a
    /// restart's re-attach). Said outright rather than guessed from `remote`: a revive of a
    /// session whose harness never reported a position has none, and is still no spawn.
    pub host: HostUse,
    /// The process already started by the provider's [`ExecutionProvider::launcher`] off the
    /// sessions' thread (a spawn's); the start adopts it instead of starting one.
    pub launched: Option<local::launch::Launched>,
    /// The limits its processes run under (checked already against what the provider can
    /// enforce: empty for one that cannot).
    pub limits: atc_protocol::SessionLimits,
}

/// The blocking half of a start, to run on a blocking thread before
/// [`ExecutionProvider::start`] (see [`local::launch`]).
pub type Launcher = Box<dyn FnOnce() -> Result<local::launch::Launched, ProviderError> + Send>;

/// Whether a start makes the host it runs on (see [`StartSpec::host`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostUse {
    /// The spawn of a new host: a broker-backed one creates its binding.
    Creates,
    /// The spawn of a sub-session onto its parent's host: a broker-backed one verifies the
    /// parent's binding, never makes a second one.
    Joins,
    /// The host was made before: a broker-backed start verifies its binding.
    Existing,
}

/// A remote process's position (spec §5.6): the guest boot it runs in, its execution
/// generation, and the offset after the last byte of its output the session has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotePosition {
    /// Guest boot id.
    pub boot_id: String,
    /// Execution generation.
    pub generation: String,
    /// High-water mark.
    pub offset: u64,
}

/// Input bytes allowed to wait for a session's process, on every provider: a local child that
/// is not reading its stdin, or an impd connection that is down or not sending. Beyond this,
/// input is refused with `too_slow` rather than buffered without bound or dropped silently.
pub const INPUT_BACKLOG_BYTES: usize = 4 * 1024 * 1024;

// What a provider can do is listed to clients (`GET /v1/agents`) and named in refusals, so
// the capability set is the protocol's.
pub use atc_protocol::capabilities::{Capabilities, Capability};

/// A command to run to completion, without a terminal (spec §4.3 `runCommand`).
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// Program and arguments; the program is looked up on `PATH`. Never passed through a shell.
    pub argv: Vec<String>,
    /// Working directory.
    pub cwd: std::path::PathBuf,
    /// Bytes written to the command's stdin, which is then closed.
    pub stdin: Bytes,
    /// The host key of the host to run on (the owning session's id): remote providers need
    /// it to find the host; local ones run on this machine and ignore it.
    pub host_key: Option<String>,
}

/// How a command run to completion ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutput {
    /// Exit status; `None` when a signal ended it.
    pub code: Option<i32>,
    /// Everything it wrote to stdout.
    pub stdout: Bytes,
    /// Everything it wrote to stderr.
    pub stderr: Bytes,
}

impl RunOutput {
    /// Whether it exited with status 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// A place sessions can run.
pub trait ExecutionProvider: Send + Sync {
    /// The provider's kind, e.g. `local-pty`.
    fn kind(&self) -> &'static str;
    /// What it can do.
    fn capabilities(&self) -> Capabilities;
    /// Whether its processes run elsewhere and outlive the daemon (a daemon stop detaches
    /// them instead of ending them).
    fn remote(&self) -> bool {
        false
    }
    /// The part of a start of `spec` that blocks its thread (a local fork and exec), for the
    /// caller to run on a blocking thread and hand to [`ExecutionProvider::start`] in
    /// `spec.launched`. `None`: its start never blocks (a remote one only sends messages).
    fn launcher(&self, spec: &StartSpec) -> Option<Launcher> {
        let _ = spec;
        None
    }
    /// The atc program inside its hosts that a harness's hooks run (`<guestDir>/bin/atc` of
    /// an imp, spec §9.3); `None`: hooks run on this machine.
    fn guest_atc(&self) -> Option<std::path::PathBuf> {
        None
    }
    /// Its host lifecycle, where its sessions run on hosts of their own (see
    /// [`host_lifecycle`]); `None`: its sessions run here and have no host to sleep, delete
    /// or bind.
    fn hosts(&self) -> Option<&dyn HostLifecycle> {
        None
    }
    /// The cgroups its sessions run in, where it puts them in cgroups on this machine (see
    /// [`local::cgroup`]); `None`: it cannot enforce limits or read usage.
    fn session_cgroups(&self) -> Option<&std::sync::Arc<local::cgroup::SessionCgroups>> {
        None
    }
    /// Lets go of what the provider holds for the daemon (leases) once every harness is
    /// gone; the daemon awaits it when it stops.
    fn shutdown(&self) -> LocalBoxFuture<'static, ()> {
        Box::pin(std::future::ready(()))
    }
    /// Starts a harness on the current arbiter. A refusal here means nothing was started.
    fn start(
        &self,
        spec: StartSpec,
        events: HarnessEvents,
    ) -> Result<StartedHarness, ProviderError>;
    /// Runs a command to completion and collects its output. A command that runs and fails
    /// is an `Ok` with its exit code; `Err` means it could not be run at all.
    fn run_command(
        &self,
        req: RunRequest,
    ) -> LocalBoxFuture<'static, Result<RunOutput, ProviderError>>;
    /// Unpacks the tar archive `archive` into the directory `dir` of the host `host_key` (see
    /// [`RunRequest::host_key`]).
    fn transfer_archive(
        &self,
        archive: Bytes,
        dir: std::path::PathBuf,
        host_key: Option<String>,
    ) -> LocalBoxFuture<'static, Result<(), ProviderError>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_pieces_are_bounded_in_order_and_share_the_buffer() {
        let whole: Bytes = (0..(2 * MAX_OUTPUT_CHUNK + 5)).map(|i| i as u8).collect();
        let pieces: Vec<Bytes> = output_pieces(whole.clone()).collect();
        let lens: Vec<usize> = pieces.iter().map(Bytes::len).collect();
        assert_eq!(lens, [MAX_OUTPUT_CHUNK, MAX_OUTPUT_CHUNK, 5]);
        assert_eq!(pieces.concat(), whole.to_vec());
        assert_eq!(pieces[1].as_ptr(), whole[MAX_OUTPUT_CHUNK..].as_ptr());

        let small = Bytes::from_static(b"ab");
        assert_eq!(output_pieces(small.clone()).collect::<Vec<_>>(), [small]);
        let exact = Bytes::from(vec![1u8; MAX_OUTPUT_CHUNK]);
        assert_eq!(output_pieces(exact).count(), 1);
        assert_eq!(output_pieces(Bytes::new()).count(), 0);
    }
}
