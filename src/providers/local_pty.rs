//! `local-pty`: sessions whose process runs on this machine in a pseudo-terminal.
//!
//! One [`LocalPtyHarness`] actor per process owns the child and its PTY. The PTY's read half
//! is a stream added to the actor's context ([`PtyChunks`](super::pty_reader::PtyChunks):
//! one `read` a chunk); each chunk goes on whole to the session as
//! [`OutputArrived`], and the next read waits until the session has taken it. Input goes
//! through a [`PtyInput`], apart from reads: written at once where the PTY takes it, else queued
//! for its own writer task, so a child that stops reading its stdin never stalls its output
//! (zellij's `pty_writer` makes the same split). Kill is
//! SIGHUP to the process group, then SIGKILL when the grace runs out. The child is always
//! reaped, and exactly one [`HarnessExited`] is sent, after the last output chunk.

use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;
use rustix::process::{Pid, Signal};

use super::local_launch::Launched;
use super::pty_input::PtyInput;
use super::{
    Capabilities, DetachHarness, ExecutionProvider, Hangup, HarnessEvents, HarnessExited,
    HarnessHandle, OutputArrived, ProviderError, ResizeTerminal, RunOutput, RunRequest, StartSpec,
    StartedHarness, WriteInput,
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
        Box::pin(super::local_command::run(req, self.withheld.clone()))
    }

    fn transfer_archive(
        &self,
        archive: Bytes,
        dir: std::path::PathBuf,
        _host_key: Option<String>,
    ) -> LocalBoxFuture<'static, Result<(), ProviderError>> {
        Box::pin(super::local_command::unpack(
            archive,
            dir,
            self.withheld.clone(),
        ))
    }

    fn launcher(&self, spec: &StartSpec) -> Option<super::Launcher> {
        let (plan, size) = (spawn_plan(spec, &self.withheld), spec.size);
        Some(Box::new(move || launch(&plan, size)))
    }

    fn start(
        &self,
        mut spec: StartSpec,
        events: HarnessEvents,
    ) -> Result<StartedHarness, ProviderError> {
        let launched = match spec.launched.take() {
            Some(launched) => launched,
            // A revive starts here, on the sessions' thread: rare enough not to hand off.
            None => launch(&spawn_plan(&spec, &self.withheld), spec.size)?,
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

/// Starts `plan` on a fresh PTY of `size`, in its working directory, which must exist.
fn launch(plan: &super::pty_spawn::Plan, size: TermSize) -> Result<Launched, ProviderError> {
    if !plan.cwd.is_dir() {
        return Err(ProviderError::BadCwd(plan.cwd.display().to_string()));
    }
    super::local_launch::launch(plan, size)
}

/// One local process in a PTY.
pub struct LocalPtyHarness {
    pid: Option<Pid>,
    events: HarnessEvents,
    /// Closed when this actor stops, so sockets typing into a gone process hear so.
    input: PtyInput,
    reader: Option<super::pty_output::PtyOutput>,
    child: Option<super::pty_spawn::Child>,
    /// Set once the child is reaped.
    status: Option<HarnessExited>,
    output_done: bool,
    reported: bool,
    exit_drain: Duration,
    kill_timer: Option<SpawnHandle>,
}

impl LocalPtyHarness {
    /// The harness of a child started by [`launch`]; its PTY joins this thread's runtime.
    fn adopt(
        launched: Launched,
        events: HarnessEvents,
        exit_drain: Duration,
    ) -> Result<(Addr<LocalPtyHarness>, PtyInput), ProviderError> {
        // Its times were counted by whoever launched it (a spawn, in the daemon's metrics).
        let Launched {
            master, mut child, ..
        } = launched;
        let pid = child.pid();
        let (input, output, writer) = match PtyInput::split(master) {
            Ok(split) => split,
            Err(e) => {
                // A child nobody reads would run unsupervised: end it, and reap it. The kill
                // fails only if it is gone already.
                let _ = rustix::process::kill_process_group(pid, Signal::KILL);
                actix_rt::spawn(async move {
                    // Reaping is all that is left to do; its answer has no one to go to.
                    let _ = child.wait().await;
                });
                return Err(ProviderError::Pty(pty_process::Error::Io(e)));
            }
        };
        actix_rt::spawn(writer);
        let harness = LocalPtyHarness {
            pid: Some(pid),
            events,
            input: input.clone(),
            reader: Some(output),
            child: Some(child),
            status: None,
            output_done: false,
            reported: false,
            exit_drain,
            kill_timer: None,
        };
        Ok((harness.start(), input))
    }

    fn signal(&self, sig: Signal) {
        if let Some(pid) = self.pid {
            // The child leads its own session and group from before its exec, and a session
            // leader cannot leave its group, so the group exists until the child is reaped.
            if let Err(e) = rustix::process::kill_process_group(pid, sig) {
                if e != rustix::io::Errno::SRCH {
                    tracing::warn!(pid = pid.as_raw_nonzero().get(), error = %e, "signal failed");
                }
            }
        }
    }

    fn maybe_report(&mut self, ctx: &mut Context<Self>) {
        if self.reported || !self.output_done {
            return;
        }
        let Some(status) = self.status.clone() else {
            return;
        };
        self.reported = true;
        self.events.exited.do_send(status);
        ctx.stop();
    }

    fn on_reaped(
        &mut self,
        status: std::io::Result<super::pty_spawn::ExitStatus>,
        ctx: &mut Context<Self>,
    ) {
        self.pid = None;
        if let Some(t) = self.kill_timer.take() {
            ctx.cancel_future(t);
        }
        self.status = Some(match status {
            Ok(s) => HarnessExited::exited(s.code(), s.signal()),
            Err(e) => {
                tracing::warn!(error = %e, "waiting for the child failed");
                HarnessExited::exited(None, None)
            }
        });
        if self.output_done {
            self.maybe_report(ctx);
        } else {
            // A grandchild may hold the PTY open forever; stop reading after the drain window.
            ctx.run_later(self.exit_drain, |act, ctx| {
                act.output_done = true;
                act.maybe_report(ctx);
            });
        }
    }
}

impl Actor for LocalPtyHarness {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        if let Some(reader) = self.reader.take() {
            ctx.add_stream(super::pty_reader::PtyChunks::new(reader));
        }
        if let Some(mut child) = self.child.take() {
            ctx.spawn(
                async move { child.wait().await }
                    .into_actor(self)
                    .map(|status, act, ctx| act.on_reaped(status, ctx)),
            );
        }
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        self.input.close();
    }
}

impl StreamHandler<std::io::Result<Bytes>> for LocalPtyHarness {
    fn handle(&mut self, item: std::io::Result<Bytes>, ctx: &mut Self::Context) {
        match item {
            Ok(bytes) if !self.output_done => {
                // Waiting for the session paces the reader: a session that falls behind slows
                // this stream down instead of filling its mailbox.
                ctx.wait(
                    self.events
                        .output
                        .send(OutputArrived(bytes))
                        .into_actor(self)
                        .map(|_, _, _| ()),
                );
            }
            Ok(_) => {}
            // EIO is how Linux says every slave fd closed: the normal end of output.
            Err(_) => self.output_done = true,
        }
    }

    fn finished(&mut self, ctx: &mut Self::Context) {
        self.output_done = true;
        self.maybe_report(ctx);
    }
}

impl Handler<WriteInput> for LocalPtyHarness {
    type Result = Result<(), ProviderError>;

    fn handle(&mut self, msg: WriteInput, _: &mut Self::Context) -> Self::Result {
        self.input.write(msg.0)
    }
}

impl Handler<ResizeTerminal> for LocalPtyHarness {
    type Result = ();

    fn handle(&mut self, msg: ResizeTerminal, _: &mut Self::Context) {
        self.input.resize(msg.0);
    }
}

impl Handler<Hangup> for LocalPtyHarness {
    type Result = ();

    fn handle(&mut self, msg: Hangup, ctx: &mut Self::Context) {
        if self.pid.is_none() || self.kill_timer.is_some() {
            return;
        }
        if msg.grace.is_zero() {
            self.signal(Signal::KILL);
            return;
        }
        self.signal(Signal::HUP);
        self.kill_timer = Some(ctx.run_later(msg.grace, |act, _| act.signal(Signal::KILL)));
    }
}

impl Handler<DetachHarness> for LocalPtyHarness {
    type Result = ();

    /// Nothing on this machine outlives the daemon's hold on it (spec §4.3): a detached local
    /// process is hung up, and killed a second later if it ignores that.
    fn handle(&mut self, _: DetachHarness, ctx: &mut Self::Context) {
        <Self as Handler<Hangup>>::handle(
            self,
            Hangup {
                grace: Duration::from_secs(1),
            },
            ctx,
        );
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
    }
}
