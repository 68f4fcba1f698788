//! Input: how bytes reach the session's process. `POST .../input` and `POST .../submit` come
//! through the session, which writes through its harness; an interactive attach socket of a
//! local process gets an [`InputPort`] at attach and types through that, past the session.
//! Both end in the same ordered queue of the PTY (`providers::local::pty_input`).

use actix::prelude::*;
use bytes::Bytes;

use super::Session;
use crate::agents::AgentKind;
use crate::providers::refusal::Operation;
use crate::providers::{HarnessHandle, WriteInput};
use crate::sessions::input_port::InputPort;
use crate::sessions::screen_worker::PasteMode;
use crate::sessions::session_error::SessionError;
use atc_protocol::AttachMode;

impl Session {
    /// The port a client attaching in `mode` types through, where `harness` gives one. Input
    /// the refusal chain refuses gets none, and keeps going through `Input`, which says why.
    pub(super) fn input_port(
        &self,
        harness: &HarnessHandle,
        mode: AttachMode,
        me: &Addr<Session>,
    ) -> Option<InputPort> {
        match (&harness.direct_input, mode) {
            (Some(pty), AttachMode::Interactive) if self.refuse(Operation::Input).is_ok() => {
                let submitted = self.activity_watched().then(|| me.clone().recipient());
                Some(InputPort::new(
                    pty.clone(),
                    self.deps.metrics.clone(),
                    submitted,
                ))
            }
            _ => None,
        }
    }

    /// Types `text` as the agent's line plan says, reading the paste mode first where the plan
    /// depends on it.
    pub(super) fn submit(
        &mut self,
        text: String,
    ) -> ResponseActFuture<Self, Result<(), SessionError>> {
        let agent = self.agent_kind();
        if !crate::agents::line_plan_reads_paste_mode(agent) {
            let writes = plan_writes(agent, &text, false);
            return Box::pin(fut::wrap_future(self.write_together(writes)));
        }
        let screen = self.screen.worker().clone();
        Box::pin(
            async move { screen.send(PasteMode).await.unwrap_or(false) }
                .into_actor(self)
                .then(move |bracketed, act, _| {
                    let writes = plan_writes(agent, &text, bracketed);
                    fut::wrap_future(act.write_together(writes))
                }),
        )
    }

    /// Issues every write to the harness now, in order, so nothing lands between them, and
    /// resolves once all are written.
    pub(super) fn write_together(
        &self,
        writes: Vec<Bytes>,
    ) -> impl std::future::Future<Output = Result<(), SessionError>> + 'static {
        let id = self.record.id;
        let metrics = self.deps.metrics.clone();
        let sent: Option<Vec<_>> = self.harness.as_ref().map(|h| {
            writes
                .into_iter()
                .map(|w| (w.len(), h.input.send(WriteInput(w))))
                .collect()
        });
        async move {
            let Some(sent) = sent else {
                return Err(SessionError::Dead { id });
            };
            for (len, write) in sent {
                write.await.map_err(|_| SessionError::Dead { id })??;
                metrics.input_written(len);
            }
            Ok(())
        }
    }
}

/// The agent's line plan for a submit, as harness writes.
fn plan_writes(kind: Option<AgentKind>, text: &str, bracketed_paste: bool) -> Vec<Bytes> {
    crate::agents::line_plan(kind, text, bracketed_paste)
        .into_iter()
        .map(Bytes::from)
        .collect()
}
