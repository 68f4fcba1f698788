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

use super::launch::Launched;
use super::pty_input::PtyInput;
use crate::providers::{
    DetachHarness, Hangup, HarnessEvents, HarnessExited, OutputArrived, ProviderError,
    ResizeTerminal, WriteInput,
};

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
    /// The cgroup its processes run in, emptied and removed once the child is reaped.
    cgroup: Option<super::cgroup::session_group::SessionGroup>,
}

impl LocalPtyHarness {
    /// The harness of a child started by [`launch`]; its PTY joins this thread's runtime.
    pub(super) fn adopt(
        launched: Launched,
        events: HarnessEvents,
        exit_drain: Duration,
    ) -> Result<(Addr<LocalPtyHarness>, PtyInput), ProviderError> {
        // Its times were counted by whoever launched it (a spawn, in the daemon's metrics).
        let Launched {
            master,
            mut child,
            cgroup,
            ..
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
                    if let Some(group) = cgroup {
                        // Whatever it left goes with it; a failure is the next sweep's.
                        let _ = tokio::task::spawn_blocking(move || group.remove()).await;
                    }
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
            cgroup,
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

    /// The child was reaped: whatever it left in its cgroup is ended and the cgroup removed
    /// (off this thread: the kernel takes a moment to let killed processes go), then the exit
    /// is reported.
    fn on_reaped(
        &mut self,
        status: std::io::Result<super::pty_spawn::ExitStatus>,
        ctx: &mut Context<Self>,
    ) {
        self.pid = None;
        if let Some(t) = self.kill_timer.take() {
            ctx.cancel_future(t);
        }
        let Some(group) = self.cgroup.take() else {
            self.on_ended(status, false, ctx);
            return;
        };
        let emptied = tokio::task::spawn_blocking(move || {
            // Read before the cgroup goes: the count goes with it.
            let oom = group.oom_kills() > 0;
            if let Err(e) = group.remove() {
                tracing::warn!(error = %e, "a session's cgroup stays until the next sweep");
            }
            oom
        });
        // Spawned, not waited on: output still buffered keeps flowing meanwhile.
        ctx.spawn(
            async move { emptied.await.unwrap_or(false) }
                .into_actor(self)
                .map(move |oom, act, ctx| act.on_ended(status, oom, ctx)),
        );
    }

    /// The child's end, told: `oom`, the kernel killed a process of its cgroup at the memory
    /// limit, so a SIGKILL that ended the child was the limit's.
    fn on_ended(
        &mut self,
        status: std::io::Result<super::pty_spawn::ExitStatus>,
        oom: bool,
        ctx: &mut Context<Self>,
    ) {
        self.status = Some(match status {
            Ok(s) => {
                let mut exited = HarnessExited::exited(s.code(), s.signal());
                if oom && s.signal() == Some(libc::SIGKILL) {
                    exited.end = crate::providers::HarnessEnd::MemoryLimit;
                }
                exited
            }
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
