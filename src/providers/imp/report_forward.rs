//! [`ReportForward`]: the report socket of one remote harness (spec §5.1, §5.6, §5.7). Hooks
//! inside the imp run `atc hook-report`, which writes to `ATC_SOCKET`; for an imp session that
//! is a guest path ([`super::naming::guest_socket`]) on which impd listens for us (a reverse
//! forward, impd §12). The daemon never exposes its own sockets to an imp.
//!
//! The harness owns one forward actor. It asks [`Listen`] before its first `start` and gets
//! the refusal back if impd will not listen (the harness then ends with it). The listener
//! ends when the imp sleeps or impd loses it (4000); the harness sends [`Relisten`] each time
//! a connection of its attaches, since only a running imp can listen without being woken for
//! it. [`CloseForward`] ends it with the harness.
//!
//! Each guest connection is accepted and served on a task of its own as a session bridge
//! (`super::bridge` holds the rules): lines in, one answer per request out, in order, nothing
//! after a close. Connections outlive their listener and even their harness (a hook may
//! report while its agent exits); the binding check on every line is what retires them.
//! Payloads are never logged.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use actix::prelude::*;
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::Value;

use super::bridge::{self, Answer, Binding, BridgeCode, Bridges, Line, Op};
use super::host_error::HostError;
use super::settings::ImpSettings;
use crate::providers::{HookReported, ReadSessionView, ReportOrigin};
use atc_protocol::SessionId;
use impd_client::{ImpPortError, Relay, RelayWriter, ReverseForward};

/// Listen on the guest socket unless already listening. Answers once impd listens, or with
/// its refusal.
#[derive(Message)]
#[rtype(result = "Result<(), ImpPortError>")]
pub struct Listen;

/// A connection of the harness attached: listen again if the listener was lost meanwhile
/// (a failure is logged; the next attach tries again).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Relisten;

/// The harness is over: stop listening (open connections serve on until the binding check
/// retires them or the guest closes them).
#[derive(Message)]
#[rtype(result = "()")]
pub struct CloseForward;

/// How a bridge reaches its session.
#[derive(Clone)]
pub struct SessionLink {
    /// Where hook lines and reports go.
    pub hook: Recipient<HookReported>,
    /// The session's own view, read before each line.
    pub view: Recipient<ReadSessionView>,
}

/// What every connection of one forward shares.
struct Served {
    binding: Binding,
    link: SessionLink,
    bridges: Arc<Bridges>,
}

/// The report socket of one harness.
pub struct ReportForward {
    settings: ImpSettings,
    imp: String,
    path: String,
    served: Rc<Served>,
    /// Listening: the task that owns the listener and accepts its connections. Dropping it
    /// (cancelling, or the actor stopping) ends the listener.
    listening: Option<SpawnHandle>,
    /// A listen is under way.
    opening: bool,
}

impl ReportForward {
    /// A forward on guest path `path` in imp `imp`, serving `binding` for the session behind
    /// `link`.
    pub fn new(
        settings: ImpSettings,
        imp: String,
        path: String,
        binding: Binding,
        link: SessionLink,
        bridges: Arc<Bridges>,
    ) -> ReportForward {
        ReportForward {
            settings,
            imp,
            path,
            served: Rc::new(Served {
                binding,
                link,
                bridges,
            }),
            listening: None,
            opening: false,
        }
    }
}

impl ReportForward {
    /// The guest path it listens on (`ATC_SOCKET` inside the imp).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Listens unless listening already (or about to): resolves once impd listens, or with
    /// its refusal.
    fn listen(&mut self) -> ResponseActFuture<Self, Result<(), ImpPortError>> {
        if self.listening.is_some() || self.opening {
            return Box::pin(fut::ready(Ok(())));
        }
        self.opening = true;
        let client = self.settings.client();
        let (imp, path) = (self.imp.clone(), self.path.clone());
        Box::pin(
            async move { client.listen_unix(&imp, &path).await }
                .into_actor(self)
                .map(|res, act, ctx| {
                    act.opening = false;
                    let forward = res?;
                    tracing::info!(imp = %act.imp, session = %act.served.binding.session,
                        epoch = act.served.binding.epoch, "report socket listening");
                    let accepting = accept_all(forward, act.served.clone())
                        .into_actor(act)
                        .map(|end, act, _| {
                            act.listening = None;
                            tracing::info!(imp = %act.imp, session = %act.served.binding.session,
                                code = %end.code, "report socket listener ended; it listens again on the next attach");
                        });
                    act.listening = Some(ctx.spawn(accepting));
                    Ok(())
                }),
        )
    }
}

/// The spawn's answer when impd will not listen on the report socket (spec §5.6).
pub fn refused(target: &str, e: &ImpPortError) -> HostError {
    HostError::ReportSocketRefused {
        target: target.to_string(),
        code: e.code.clone(),
        message: e.message.clone(),
    }
}

impl Actor for ReportForward {
    type Context = Context<Self>;
}

impl Handler<Listen> for ReportForward {
    type Result = ResponseActFuture<Self, Result<(), ImpPortError>>;

    fn handle(&mut self, _: Listen, _: &mut Self::Context) -> Self::Result {
        self.listen()
    }
}

impl Handler<Relisten> for ReportForward {
    type Result = ();

    fn handle(&mut self, _: Relisten, ctx: &mut Self::Context) {
        let listening = self.listen().map(|res, act, _| {
            if let Err(e) = res {
                // Hooks lose their reports until the next attach tries again; the session
                // itself runs on.
                tracing::warn!(imp = %act.imp, session = %act.served.binding.session,
                    code = %e.code, "the report socket could not listen again");
            }
        });
        ctx.spawn(listening);
    }
}

impl Handler<CloseForward> for ReportForward {
    type Result = ();

    fn handle(&mut self, _: CloseForward, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

/// Guest connections one harness serves at once. Each may buffer a line of up to
/// [`bridge::MAX_LINE`], so the bound is what one imp can make the daemon hold; a hook
/// reporter opens one connection per report and closes it, so a few are plenty.
const CONNECTIONS_AT_ONCE: usize = 8;

/// Accepts every guest connection until the listener ends, and returns why it ended. Accepts
/// run one at a time (each is one round trip, bounded by the client's call timeout), and only
/// while fewer than [`CONNECTIONS_AT_ONCE`] are served; impd queues the connections announced
/// meanwhile.
async fn accept_all(mut forward: ReverseForward, served: Rc<Served>) -> ImpPortError {
    let slots = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_AT_ONCE));
    while let Some(next) = forward.next().await {
        let id = match next {
            Ok(id) => id,
            Err(e) => return e,
        };
        let Ok(slot) = slots.clone().acquire_owned().await else {
            // The semaphore is never closed; an error here would mean it was.
            return ImpPortError::closed(None, "the listener ended");
        };
        match forward.accept(id).await {
            Ok(relay) => {
                let served = served.clone();
                actix_rt::spawn(async move {
                    serve(relay, served).await;
                    drop(slot);
                });
            }
            // That one guest client is lost (its reporter resends); the listener goes on.
            Err(e) => tracing::warn!(session = %served.binding.session, connection = id,
                code = %e.code, "could not accept a report socket connection"),
        }
    }
    ImpPortError::closed(None, "the listener ended")
}

/// What serving one line leads to.
enum Step {
    /// Go on, after writing this answer if any.
    Continue(Option<Answer>),
    /// Write this answer and close the connection.
    Close(Answer),
}

/// Serves one guest connection: line framed both ways, lines one at a time, answers in order.
/// A line without its newline at the guest's eof is served too (the reporter socket takes
/// such a line as well).
async fn serve(relay: Relay, served: Rc<Served>) {
    let (mut reader, mut writer) = relay.into_split();
    let mut buf: Vec<u8> = Vec::new();
    let mut eof = false;
    loop {
        while let Some(end) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            if !run_step(serve_line(&line, &served).await, &mut writer).await {
                return;
            }
        }
        if buf.len() > bridge::MAX_LINE {
            served
                .bridges
                .stats()
                .dropped
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!(session = %served.binding.session, "report socket line too long");
            let refused = Answer::refusal(None, BridgeCode::Forbidden);
            run_step(Step::Close(refused), &mut writer).await;
            return;
        }
        if eof {
            break;
        }
        match reader.read().await {
            Some(bytes) => buf.extend_from_slice(&bytes),
            None => {
                eof = true;
                if buf.trim_ascii().is_empty() {
                    break;
                }
                // The last line, without its newline.
                buf.push(b'\n');
            }
        }
    }
    // Both sides done: impd closes the relay once it has our eof too. A relay that is gone
    // already has nothing left to half-close.
    let _ = writer.eof();
}

/// Writes a step's answer; `false` when the connection is over (closed by the step, or the
/// relay is gone).
async fn run_step(step: Step, writer: &mut RelayWriter) -> bool {
    let (answer, close) = match step {
        Step::Continue(answer) => (answer, false),
        Step::Close(answer) => (Some(answer), true),
    };
    if let Some(answer) = answer {
        let mut line = answer.to_line();
        line.push(b'\n');
        if writer.write(Bytes::from(line)).await.is_err() {
            return false;
        }
    }
    if close {
        // Nothing after a close: our eof, then the socket itself. Either failing means the
        // relay is gone already, which is the same end.
        let _ = writer.eof();
        let _ = writer.close();
        return false;
    }
    true
}

/// One line: re-check the binding, then parse and apply it.
async fn serve_line(line: &[u8], served: &Served) -> Step {
    let binding = &served.binding;
    let parsed = bridge::parse(line);
    let id = match &parsed {
        Ok(Line::Request { id, .. }) => Some(id.clone()),
        Ok(Line::Hook { .. }) => None,
        Err(m) => m.id.clone(),
    };
    let view = served.link.view.send(ReadSessionView).await.ok();
    let current = served.bridges.current(binding.session);
    let holds = bridge::binding_holds(
        binding,
        view.as_ref(),
        current.as_ref().map(|(e, h)| (*e, h.as_str())),
    );
    let Some(view) = view.filter(|_| holds) else {
        if served.link.view.connected() {
            tracing::info!(session = %binding.session, epoch = binding.epoch,
                "report socket line on a stale binding");
        } else {
            // The session is gone: nothing of it is served again.
            served.bridges.forget(binding.session);
        }
        return refuse(served, id.as_ref(), BridgeCode::StaleBinding);
    };
    let Ok(line) = parsed else {
        tracing::warn!(session = %binding.session, "malformed report socket line");
        return refuse(served, id.as_ref(), BridgeCode::Forbidden);
    };
    match line {
        Line::Hook {
            atc_id,
            event,
            payload,
        } => {
            let names_bound = atc_id
                .parse::<SessionId>()
                .is_ok_and(|id| id == binding.session);
            if !names_bound {
                tracing::warn!(session = %binding.session,
                    "report socket hook line for another session");
                return refuse(served, None, BridgeCode::Forbidden);
            }
            match deliver(served, event, payload).await {
                Delivery::Taken => Step::Continue(None),
                // A hook line has no answer; the refusal is counted and logged.
                Delivery::Refused => Step::Continue(None),
                Delivery::Gone => refuse(served, None, BridgeCode::StaleBinding),
            }
        }
        Line::Request { id, op } => match op {
            Op::Report { report_id, payload } => {
                if !served.bridges.first_report(binding.session, &report_id) {
                    let stats = served.bridges.stats();
                    stats.repeated.fetch_add(1, Ordering::Relaxed);
                    return Step::Continue(Some(Answer::duplicate(&id)));
                }
                match deliver(served, "Report".into(), payload).await {
                    Delivery::Taken => Step::Continue(Some(Answer::ok(&id))),
                    Delivery::Refused => {
                        Step::Continue(Some(Answer::refusal(Some(&id), BridgeCode::Refused)))
                    }
                    Delivery::Gone => refuse(served, Some(&id), BridgeCode::StaleBinding),
                }
            }
            Op::StatusRead => Step::Continue(Some(Answer::status(&id, &view))),
            Op::TapOpen | Op::TapAck => {
                Step::Continue(Some(Answer::refusal(Some(&id), BridgeCode::Unsupported)))
            }
        },
    }
}

/// What became of a report handed to the session.
enum Delivery {
    /// Applied.
    Taken,
    /// Refused by the session (a bad value, or over its report rate); counted and logged.
    Refused,
    /// The session is gone.
    Gone,
}

/// Hands a hook to the session and waits until it took it, so an answer written after it (or
/// a `status.read` that follows) sees it applied.
async fn deliver(served: &Served, event: String, payload: Value) -> Delivery {
    let sent = served
        .link
        .hook
        .send(HookReported {
            event,
            payload,
            origin: ReportOrigin::Guest,
        })
        .await;
    let stats = served.bridges.stats();
    match sent {
        Ok(Ok(())) => {
            stats.accepted.fetch_add(1, Ordering::Relaxed);
            Delivery::Taken
        }
        Ok(Err(e)) => {
            stats.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(session = %served.binding.session, reason = e.reason(),
                "report socket report refused");
            Delivery::Refused
        }
        Err(_) => Delivery::Gone,
    }
}

/// Counts a refused line; `forbidden` and `stale_binding` close the connection.
fn refuse(served: &Served, id: Option<&Value>, code: BridgeCode) -> Step {
    let stats = served.bridges.stats();
    stats.dropped.fetch_add(1, Ordering::Relaxed);
    Step::Close(Answer::refusal(id, code))
}
