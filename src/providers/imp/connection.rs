//! One [`ImpConnection`] actor per connection attempt of a remote harness: it opens impd's
//! `/exec` socket with the opening message the harness chose, hands the socket's writer to
//! the harness once impd answers `started`, passes output on (waiting until the harness took
//! each chunk, so a slow session slows the socket instead of growing a queue), and reports
//! how the connection ended exactly once. The harness ignores every report of an attempt
//! that is no longer its current one.

use actix::prelude::*;
use bytes::Bytes;

use super::harness::ImpHarness;
use super::outcome::ConnectionEnd;
use crate::providers::imp::broker::host_binding::Ticket;
use impd_client::{
    ExecEvent, ExecWriter, GatedOpenError, ImpPortError, ImpdClient, ImpdCode, Opening, Started,
};

/// impd answered `started` on attempt `attempt`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ConnStarted {
    /// Which attempt.
    pub attempt: u64,
    /// impd's answer.
    pub started: Started,
    /// How to write to the socket.
    pub writer: ExecWriter,
}

/// Output read on attempt `attempt`. The harness takes no other message until it has handed
/// these bytes to its session, so the connection's next message waits for that.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ConnData {
    /// Which attempt.
    pub attempt: u64,
    /// The bytes, as impd sent them.
    pub bytes: Bytes,
}

/// Attempt `attempt` is over.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ConnEnded {
    /// Which attempt.
    pub attempt: u64,
    /// Its first terminal event.
    pub end: ConnectionEnd,
    /// Whether impd had answered `started` on it.
    pub started: bool,
}

/// One `/exec` connection.
pub struct ImpConnection {
    attempt: u64,
    harness: Addr<ImpHarness>,
    client: ImpdClient,
    opening: Option<Opening>,
    writer: Option<ExecWriter>,
    started: bool,
    end: Option<ConnectionEnd>,
    /// A broker-backed launch's admission: checked before the opening is written, given
    /// back when this connection ends (dropping it releases it).
    ticket: Option<Ticket>,
}

/// The host's binding refused this attempt's launch at the last moment; the socket closed
/// with nothing sent. Sent before the attempt's [`ConnEnded`].
#[derive(Message)]
#[rtype(result = "()")]
pub struct ConnLaunchRefused {
    /// Which attempt.
    pub attempt: u64,
    /// The refusal.
    pub error: crate::providers::ProviderError,
}

impl ImpConnection {
    /// A connection that will open with `opening`.
    pub fn new(
        attempt: u64,
        harness: Addr<ImpHarness>,
        client: ImpdClient,
        opening: Opening,
        ticket: Option<Ticket>,
    ) -> ImpConnection {
        ImpConnection {
            attempt,
            harness,
            client,
            opening: Some(opening),
            writer: None,
            started: false,
            end: None,
            ticket,
        }
    }

    fn report_end(&mut self, ctx: &mut Context<Self>) {
        let end = self
            .end
            .take()
            .unwrap_or(ConnectionEnd::Closed { code: None });
        self.harness.do_send(ConnEnded {
            attempt: self.attempt,
            end,
            started: self.started,
        });
        ctx.stop();
    }
}

/// How an error answering the open reads as a connection end.
fn open_failure(e: ImpPortError) -> ConnectionEnd {
    match e.code {
        ImpdCode::Unauthorized => ConnectionEnd::Unauthorized,
        ImpdCode::Unreachable | ImpdCode::UpgradeRefused => ConnectionEnd::Unreachable(e.message),
        _ => ConnectionEnd::Refused {
            code: e.code,
            message: e.message,
            data: e.data,
        },
    }
}

impl Actor for ImpConnection {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let Some(opening) = self.opening.take() else {
            return;
        };
        let client = self.client.clone();
        let requires = match &opening {
            Opening::Start(m) => !m.require.is_empty(),
            Opening::Attach(m) => !m.require.is_empty(),
        };
        let ticket = self.ticket.take();
        ctx.wait(
            async move {
                if requires {
                    // Spec §11: an impd before 0.30 drops `require` and runs the command
                    // anyway, so its features are read on this attempt first and, without
                    // `execRequire`, nothing is sent. Unreadable features are "unreachable",
                    // retried on the usual delays.
                    let info = match client.system_info().await {
                        Ok(info) => info,
                        Err(e) => {
                            let e = ImpPortError::new(ImpdCode::Unreachable, e.message);
                            return (Err(GatedOpenError::Port(e)), ticket);
                        }
                    };
                    if !info.features.exec_require {
                        let e = ImpPortError::impd_outdated(&info.version);
                        return (Err(GatedOpenError::Port(e)), ticket);
                    }
                }
                // The ticket's last-moment check runs with the socket open and the opening
                // not yet written (spec §6.4).
                let gate = async {
                    match &ticket {
                        Some(t) => t.check().await,
                        None => Ok(()),
                    }
                };
                (client.open_exec_gated(opening, gate).await, ticket)
            }
            .into_actor(self)
            .map(|(res, ticket), act, ctx| {
                act.ticket = ticket;
                match res {
                    Ok(socket) => {
                        act.writer = Some(socket.writer);
                        ctx.add_stream(socket.events);
                    }
                    Err(GatedOpenError::Port(e)) => {
                        act.end = Some(open_failure(e));
                        act.report_end(ctx);
                    }
                    Err(GatedOpenError::Gate(error)) => {
                        act.end = Some(ConnectionEnd::LaunchRefused(error.to_string()));
                        act.harness.do_send(ConnLaunchRefused {
                            attempt: act.attempt,
                            error,
                        });
                        act.report_end(ctx);
                    }
                }
            }),
        );
    }
}

impl StreamHandler<ExecEvent> for ImpConnection {
    fn handle(&mut self, event: ExecEvent, ctx: &mut Self::Context) {
        match event {
            ExecEvent::Started(started) => {
                let Some(writer) = self.writer.clone() else {
                    return;
                };
                self.started = true;
                let sent = self.harness.send(ConnStarted {
                    attempt: self.attempt,
                    started,
                    writer,
                });
                ctx.wait(sent.into_actor(self).map(|_, _, _| ()));
            }
            ExecEvent::Data { bytes, .. } => {
                let sent = self.harness.send(ConnData {
                    attempt: self.attempt,
                    bytes,
                });
                ctx.wait(sent.into_actor(self).map(|_, _, _| ()));
            }
            ExecEvent::Exit { code, signal, .. } => {
                self.end.get_or_insert(ConnectionEnd::Exit { code, signal });
            }
            ExecEvent::Detached { reason, .. } => {
                self.end.get_or_insert(ConnectionEnd::Detached { reason });
            }
            ExecEvent::Error(e) => {
                self.end.get_or_insert(ConnectionEnd::Refused {
                    code: e.code,
                    message: e.message,
                    data: e.data,
                });
            }
            ExecEvent::Closed { code, .. } => {
                self.end.get_or_insert(ConnectionEnd::Closed { code });
            }
        }
    }

    fn finished(&mut self, ctx: &mut Self::Context) {
        self.report_end(ctx);
    }
}
