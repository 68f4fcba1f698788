//! The output loops after `started` (protocol §9.5, §9.9, §10): a viewer pulling its generation's
//! ring until exit, detach or a slow drop, and a plain exec forwarded until its exit. Client
//! messages on the way go to `Conn::client_message` beside the socket.

use std::sync::Arc;

use serde_json::json;
use tokio::sync::mpsc;

use super::{Conn, Flow};
use crate::envelope::ImpdError;
use crate::options::Flag;
use crate::process::{Event, Input};
use crate::session::{collect, Generation, Plan};
use crate::state::Ctl;

/// Output bytes per binary message.
const CHUNK: usize = 64 * 1024;

impl Conn {
    /// Streams a generation to this viewer until exit, detach, or the client leaves.
    pub(super) async fn view(&mut self, gen: Arc<Generation>, plan: Plan) {
        let offsets = self.offsets_on();
        let mut pulse = gen.pulse.subscribe();
        if !plan.prelude.is_empty() && !self.send_output(1, &plan.prelude).await {
            return;
        }
        let mut sent = plan.start;
        loop {
            while let Ok(ctl) = self.ctl.try_recv() {
                if let Flow::Stop = self.session_ctl(ctl, sent, offsets).await {
                    return;
                }
            }
            pulse.borrow_and_update();
            let (chunk, exit, behind) = {
                let out = gen.out();
                (
                    out.ring.read(sent, CHUNK),
                    out.exit,
                    sent < out.ring.buffer_start(),
                )
            };
            if behind {
                // The viewer fell out of the ring: impd drops it as too slow.
                return self.detach("slow", sent, offsets).await;
            }
            if !chunk.is_empty() {
                if !self.send_output(1, &chunk).await {
                    return;
                }
                sent += chunk.len() as u64;
                continue;
            }
            if let Some(exit) = exit {
                let mut m = json!({"type": "exit", "code": exit.code, "signal": exit.signal});
                if offsets {
                    m["offset"] = json!(sent);
                }
                if self.out.text(&m).await {
                    collect(&mut self.shared.lock(), &gen);
                }
                return self.out.close(1000, "exited").await;
            }
            tokio::select! {
                _ = pulse.changed() => {}
                ctl = self.ctl.recv() => {
                    let Some(ctl) = ctl else { return };
                    if let Flow::Stop = self.session_ctl(ctl, sent, offsets).await {
                        return;
                    }
                }
                msg = self.inp.next() => {
                    if let Flow::Stop = self.client_message(msg, &gen.input, Some(&gen), true).await {
                        return;
                    }
                }
            }
        }
    }

    fn offsets_on(&self) -> bool {
        let st = self.shared.lock();
        st.opts.agent_offsets && st.opts.has(Flag::SessionOffsets)
    }

    async fn session_ctl(&mut self, ctl: Ctl, sent: u64, offsets: bool) -> Flow {
        match ctl {
            Ctl::Detach(reason) => self.detach(reason, sent, offsets).await,
            Ctl::AgentLost => self.detach("lost", sent, offsets).await,
            Ctl::Close { code, reason } => self.out.close(code, &reason).await,
            Ctl::Connection(_) => return Flow::Continue,
        }
        Flow::Stop
    }

    async fn detach(&mut self, reason: &str, sent: u64, offsets: bool) {
        let mut m = json!({"type": "detached", "reason": reason});
        if offsets {
            m["offset"] = json!(sent);
        }
        self.out.text(&m).await;
        self.out.close(1000, "detached").await;
    }

    /// Runs a command to completion (protocol §10).
    pub(super) async fn run_plain(&mut self, input: mpsc::Sender<Input>, tty: bool) {
        loop {
            let Some((_, events)) = self.plain.as_mut() else {
                return;
            };
            // Biased toward the control channel: a sleep tells the socket before it kills the
            // process, so the socket reports the lost agent rather than the kill's exit.
            tokio::select! {
                biased;
                ctl = self.ctl.recv() => match ctl {
                    Some(Ctl::Close { code, reason }) => return self.out.close(code, &reason).await,
                    Some(Ctl::Connection(_)) => {}
                    Some(Ctl::AgentLost | Ctl::Detach(_)) | None => {
                        self.out
                            .text(&json!({"type": "error", "message": "the agent connection ended before the exit"}))
                            .await;
                        return self.out.close(1011, "exec failed").await;
                    }
                },
                ev = events.recv() => match ev {
                    Some(Event::Output { channel, bytes }) => {
                        if !self.send_output(channel, &bytes).await {
                            return;
                        }
                    }
                    Some(Event::Exited { code, signal }) => {
                        self.plain = None;
                        self.out.text(&json!({"type": "exit", "code": code, "signal": signal})).await;
                        return self.out.close(1000, "exited").await;
                    }
                    None => {
                        self.plain = None;
                        return self.fail(&ImpdError::new("EXEC_FAILED", "the process vanished")).await;
                    }
                },
                msg = self.inp.next() => {
                    if let Flow::Stop = self.client_message(msg, &input, None, tty).await {
                        return;
                    }
                }
            }
        }
    }
}
