//! The `/exec` WebSocket (protocol §9, §10, §11): one opening message (`start` or `attach`),
//! then `started`, then binary frames with a channel byte and JSON control frames, ending with
//! exactly one of `exit`, `detached` or `error` before the close (or a bare close for drops,
//! restarts and revoked tokens).
//!
//! A socket is one task on the HTTP worker. The opening is decided in one critical section
//! (imp state, requirements, which generation, where the viewer starts), so no sleep or reboot
//! can slip in between the decision and `started`. Messages the client sends meanwhile simply
//! wait in the socket, which is impd's "queued until started".
//!
//! This file owns the socket itself: the upgrade and its credentials, the `Conn` task, the
//! client messages after `started`, the error closes, and the cleanup when the socket goes.
//! The opening message's schema is in `message`, the decision it leads to in `open` (with the
//! start's environment and broker checks in `command`), the output loops in `stream`, and
//! the record tests read of every opening in `record`.

mod command;
mod message;
mod open;
mod record;
mod stream;

use std::sync::Arc;
use std::time::Duration;

use actix_web::{web, HttpRequest, HttpResponse};
use rustix::process::{Pid, Signal};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::auth::Caller;
use super::envelope::ImpdError;
use super::faults::{UpgradeFault, When};
use super::input::Fields;
use super::process::{signal_group, signal_named, Event, Input, Process};
use super::session::Generation;
use super::state::{ConnId, Ctl, Shared};
use super::ws::{upgrade, Inbound, ReadError, WsIn, WsOut};
use message::{parse_open, Open};
use open::Opened;

/// A plain exec that ignores SIGHUP after its socket closed is killed this much later.
const HANGUP_GRACE: Duration = Duration::from_secs(1);

/// `{"error":"unauthorized"}` with 401: impd's HTTP layer, not the oRPC envelope.
pub fn unauthorized() -> HttpResponse {
    HttpResponse::Unauthorized().json(json!({"error": "unauthorized"}))
}

/// `GET /exec` (upgrade).
pub async fn route(
    req: HttpRequest,
    payload: web::Payload,
    shared: web::Data<Shared>,
) -> HttpResponse {
    let shared = shared.into_inner();
    let caller = {
        let mut st = shared.lock();
        let bearer = req
            .headers()
            .get("authorization")
            // A header that is not visible ASCII is no bearer: the ticket, then 401, decide.
            .and_then(|h| h.to_str().ok());
        let caller = match st.auth.bearer(bearer) {
            Some(principal) => Some(Caller {
                principal,
                ticket_imp: None,
            }),
            None => ticket(&req).and_then(|t| st.auth.redeem(&t, shared.clock.now())),
        };
        match caller {
            Some(c) => c,
            None => {
                st.stats.upgrades_refused += 1;
                return unauthorized();
            }
        }
    };
    if let Some(r) = injected_upgrade_fault(&shared).await {
        return r;
    }
    let max = shared.lock().opts.max_message_bytes;
    let (response, inp, out) = match upgrade(&req, payload, max) {
        Ok(x) => x,
        Err(why) => return HttpResponse::BadRequest().body(why),
    };
    shared.mark_websocket(req.peer_addr());
    let (id, ctl) = {
        let mut st = shared.lock();
        st.stats.exec_connections += 1;
        st.register(caller.principal.clone())
    };
    let conn = Conn {
        shared,
        id,
        caller,
        inp,
        out,
        ctl,
        gen: None,
        plain: None,
    };
    actix_rt::spawn(conn.serve());
    response
}

fn ticket(req: &HttpRequest) -> Option<String> {
    req.query_string()
        .split('&')
        .find_map(|kv| kv.strip_prefix("ticket="))
        .map(str::to_string)
}

/// An injected refusal answers now; an injected hang never answers.
pub async fn injected_upgrade_fault(shared: &Shared) -> Option<HttpResponse> {
    let fault = shared.lock().faults.take_upgrade();
    match fault {
        None => None,
        Some(UpgradeFault::Refuse(status)) => {
            shared.lock().stats.upgrades_refused += 1;
            let status = actix_web::http::StatusCode::from_u16(status)
                .unwrap_or(actix_web::http::StatusCode::SERVICE_UNAVAILABLE);
            Some(HttpResponse::build(status).body("injected refusal"))
        }
        Some(UpgradeFault::Hang) => {
            std::future::pending::<()>().await;
            None
        }
    }
}

/// How handling a client message went.
enum Flow {
    Continue,
    Stop,
}

struct Conn {
    shared: Arc<Shared>,
    id: ConnId,
    caller: Caller,
    inp: WsIn,
    out: WsOut,
    ctl: mpsc::UnboundedReceiver<Ctl>,
    /// The generation this socket views.
    gen: Option<Arc<Generation>>,
    /// The plain exec this socket runs, while it runs.
    plain: Option<(Pid, mpsc::Receiver<Event>)>,
}

impl Conn {
    async fn serve(mut self) {
        self.run().await;
        self.finish();
    }

    async fn run(&mut self) {
        let Some(open) = self.opening().await else {
            return;
        };
        let (drop, garble) = {
            let mut st = self.shared.lock();
            let kind = match &open {
                Open::Start(_) => "start",
                Open::Attach(_) => "attach",
            };
            *st.stats.exec_opens.entry(kind.into()).or_default() += 1;
            st.broker.record_open(record::record(&open));
            (st.faults.take_exec_drop(), st.faults.take_garble())
        };
        if garble && !self.out.raw_text("{\"type\":\"started\",\"pid\":").await {
            return;
        }
        if let Some((When::BeforeStarted, code)) = drop {
            self.out.close(code, "injected drop").await;
            return;
        }
        let opened = match self.open(&open) {
            Ok(o) => o,
            Err(e) => return self.fail(&e).await,
        };
        let drop_after = drop.map(|(_, code)| code);
        match opened {
            Opened::Session { gen, plan, started } => {
                self.gen = Some(gen.clone());
                if !self.out.text(&started).await {
                    return;
                }
                if let Some(code) = drop_after {
                    return self.out.close(code, "injected drop").await;
                }
                self.view(gen, plan).await;
            }
            Opened::Plain {
                process,
                tty,
                started,
            } => {
                let Process { pid, input, events } = process;
                self.plain = Some((pid, events));
                if !self.out.text(&started).await {
                    return;
                }
                if let Some(code) = drop_after {
                    return self.out.close(code, "injected drop").await;
                }
                self.run_plain(input, tty).await;
            }
        }
    }

    /// Waits for the opening message; anything else first is an error.
    async fn opening(&mut self) -> Option<Open> {
        loop {
            match self.inp.next().await {
                Ok(Inbound::Text(t)) => {
                    let parsed = serde_json::from_slice::<Value>(&t)
                        .map_err(|e| format!("not JSON: {e}"))
                        .and_then(|v| parse_open(&v).map_err(|e| e.text()));
                    return match parsed {
                        Ok(o) => Some(o),
                        Err(why) => {
                            self.bad_message(&why).await;
                            None
                        }
                    };
                }
                Ok(Inbound::Binary(_)) => {
                    self.bad_message("data before the opening message").await;
                    return None;
                }
                Ok(Inbound::Ping(b)) => {
                    self.out.pong(b).await;
                }
                Ok(Inbound::Close) => return None,
                Err(e) => {
                    self.read_failed(e).await;
                    return None;
                }
            }
        }
    }
    /// One client message after `started`.
    async fn client_message(
        &mut self,
        msg: Result<Inbound, ReadError>,
        input: &mpsc::Sender<Input>,
        gen: Option<&Arc<Generation>>,
        tty: bool,
    ) -> Flow {
        match msg {
            Ok(Inbound::Binary(b)) => match b.first() {
                Some(0) => {
                    // The process may be gone; its exit is on the way.
                    let _ = input.send(Input::Data(b.slice(1..))).await;
                }
                Some(1 | 2) => {}
                _ => {
                    self.bad_message("unknown channel").await;
                    return Flow::Stop;
                }
            },
            Ok(Inbound::Text(t)) => {
                let Ok(v) = serde_json::from_slice::<Value>(&t) else {
                    self.bad_message("not JSON").await;
                    return Flow::Stop;
                };
                let f = Fields(&v);
                match v.get("type").and_then(Value::as_str) {
                    Some("resize") => match (f.int("cols", 1, 65535), f.int("rows", 1, 65535)) {
                        (Ok(cols), Ok(rows)) => {
                            // As with data: the send fails only once the process is gone.
                            let _ = input
                                .send(Input::Resize {
                                    cols: cols as u16,
                                    rows: rows as u16,
                                })
                                .await;
                        }
                        _ => {
                            self.bad_message("resize needs cols and rows 1–65535").await;
                            return Flow::Stop;
                        }
                    },
                    Some("signal") => {
                        // A signal that is not a string reads as "" and fails the check below.
                        let name = f.opt_str("signal").ok().flatten().unwrap_or_default();
                        let well_formed = name.len() > 3
                            && name.starts_with("SIG")
                            && name[3..]
                                .bytes()
                                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
                        if !well_formed {
                            self.bad_message("signal must match ^SIG[A-Z0-9]+$").await;
                            return Flow::Stop;
                        }
                        if let Some(sig) = signal_named(&name) {
                            match (gen, &self.plain) {
                                (Some(g), _) => g.signal(sig),
                                (None, Some((pid, _))) => signal_group(*pid, sig),
                                (None, None) => {}
                            }
                        }
                    }
                    Some("stdin_eof") => {
                        if !tty {
                            // As with data: the send fails only once the process is gone.
                            let _ = input.send(Input::Eof).await;
                        }
                    }
                    Some("stdout_ack") => {}
                    Some("start" | "attach") => {
                        self.bad_message("a second opening message").await;
                        return Flow::Stop;
                    }
                    _ => {
                        self.bad_message("unknown message type").await;
                        return Flow::Stop;
                    }
                }
            }
            Ok(Inbound::Ping(b)) => {
                self.out.pong(b).await;
            }
            Ok(Inbound::Close) => return Flow::Stop,
            Err(e) => {
                self.read_failed(e).await;
                return Flow::Stop;
            }
        }
        Flow::Continue
    }

    async fn send_output(&mut self, channel: u8, data: &[u8]) -> bool {
        self.shared.lock().stats.exec_bytes_sent += data.len() as u64;
        self.out.binary(Some(channel), data).await
    }

    /// A schema or protocol violation: `error` without code, then 1011.
    async fn bad_message(&mut self, why: &str) {
        self.out
            .text(&json!({"type": "error", "message": format!("bad exec message: {why}")}))
            .await;
        self.out.close(1011, "exec failed").await;
    }

    async fn read_failed(&mut self, e: ReadError) {
        match e {
            ReadError::TooBig => self.out.close(1009, "message too big").await,
            ReadError::Protocol => self.out.close(1002, "protocol error").await,
        }
    }

    /// A refusal: `error` with its code, then 1011.
    async fn fail(&mut self, e: &ImpdError) {
        self.out.text(&e.exec_message()).await;
        self.out.close(1011, "exec failed").await;
    }

    /// The socket is gone: it is no viewer any more, and a plain exec still running gets
    /// SIGHUP (then SIGKILL if it ignores it).
    fn finish(&mut self) {
        let mut st = self.shared.lock();
        let entry = st.conns.remove(&self.id);
        if let Some(gen) = &self.gen {
            let mut out = gen.out();
            if out.viewer == Some(self.id) {
                out.viewer = None;
            }
        }
        if let Some(imp) = entry
            .and_then(|e| e.imp)
            .and_then(|name| st.imps.get_mut(&name))
        {
            if let Some(boot) = imp.boot.as_mut() {
                boot.plain.remove(&self.id);
            }
        }
        drop(st);
        if let Some((pid, mut events)) = self.plain.take() {
            signal_group(pid, Signal::HUP);
            self.shared.guest.spawn(async move {
                let exited = tokio::time::timeout(HANGUP_GRACE, async {
                    while let Some(ev) = events.recv().await {
                        if let Event::Exited { .. } = ev {
                            return;
                        }
                    }
                })
                .await;
                if exited.is_err() {
                    signal_group(pid, Signal::KILL);
                }
            });
        }
    }
}
