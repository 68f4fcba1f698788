//! The `/exec` WebSocket (protocol §9, §10, §11): one opening message (`start` or `attach`),
//! then `started`, then binary frames with a channel byte and JSON control frames, ending with
//! exactly one of `exit`, `detached` or `error` before the close (or a bare close for drops,
//! restarts and revoked tokens).
//!
//! A socket is one task on the HTTP worker. The opening is decided in one critical section
//! (imp state, requirements, which generation, where the viewer starts), so no sleep or reboot
//! can slip in between the decision and `started`. Messages the client sends meanwhile simply
//! wait in the socket, which is impd's "queued until started".

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{web, HttpRequest, HttpResponse};
use rustix::process::{Pid, Signal};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::auth::{Caller, Scope};
use super::envelope::ImpdError;
use super::faults::{UpgradeFault, When};
use super::input::{FieldError, Fields};
use super::process::{self, signal_group, signal_named, Command, Event, Input, Process};
use super::session::{collect, start_generation, valid_session_name, Generation, Plan, ResumeFrom};
use super::state::{ConnId, Ctl, Imp, ImpState, Role, Shared, SimState};
use super::ws::{upgrade, Inbound, ReadError, WsIn, WsOut};

/// Output bytes per binary message.
const CHUNK: usize = 64 * 1024;

/// A plain exec that ignores SIGHUP after its socket closed is killed this much later.
const HANGUP_GRACE: Duration = Duration::from_secs(1);

/// Variables impd's broker sets in a guest whose imp holds a grant (protocol §11).
const BROKER_VARS: &[&str] = &[
    "HTTPS_PROXY",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
    "NODE_USE_ENV_PROXY",
    "SSL_CERT_FILE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
];

/// Placeholder variables per granted secret kind, which a `require` start may not override.
fn placeholder_vars(kind: &str) -> &'static [&'static str] {
    match kind {
        "github" => &["GH_TOKEN", "GITHUB_TOKEN"],
        "anthropic" => &["ANTHROPIC_API_KEY"],
        "npm" => &["NPM_TOKEN"],
        _ => &[],
    }
}

/// `{"error":"unauthorized"}` with 401: impd's HTTP layer, not the oRPC envelope.
pub fn unauthorized() -> HttpResponse {
    HttpResponse::Unauthorized().json(json!({"error": "unauthorized"}))
}

/// A `start` message.
#[derive(Debug)]
struct Start {
    name: String,
    argv: Vec<String>,
    tty: bool,
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    cols: u16,
    rows: u16,
    session: Option<String>,
    resume: Option<ResumeFrom>,
    require_broker: bool,
    tool: bool,
}

/// An `attach` message.
#[derive(Debug)]
struct Attach {
    name: String,
    session: String,
    size: Option<(u16, u16)>,
    resume: Option<ResumeFrom>,
    wake: bool,
    require_broker: bool,
}

#[derive(Debug)]
enum Open {
    Start(Start),
    Attach(Attach),
}

impl Open {
    fn name(&self) -> &str {
        match self {
            Open::Start(s) => &s.name,
            Open::Attach(a) => &a.name,
        }
    }
}

fn resume_from(f: &Fields) -> Result<Option<ResumeFrom>, FieldError> {
    let Some(r) = f.opt_obj("resumeFrom")? else {
        return Ok(None);
    };
    Ok(Some(ResumeFrom {
        generation: r.str("executionGeneration")?,
        offset: r.int("offset", 0, i64::MAX)? as u64,
    }))
}

fn require_broker(f: &Fields) -> Result<bool, FieldError> {
    let list = f.opt_str_list("require")?.unwrap_or_default();
    if list.iter().any(|r| r != "broker") {
        return Err(FieldError {
            field: "require".into(),
            message: "only \"broker\" is known".into(),
        });
    }
    Ok(!list.is_empty())
}

fn bad(field: &str, message: &str) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

/// Parses an opening message against impd's schema.
fn parse_open(v: &Value) -> Result<Open, FieldError> {
    let f = Fields(v);
    let name = f.str("name")?;
    let session = f.opt_str("session")?;
    if let Some(s) = &session {
        if !valid_session_name(s) {
            return Err(bad("session", "must match ^[a-z0-9][a-z0-9-]{0,31}$"));
        }
    }
    let resume = resume_from(&f)?;
    if resume.is_some() && session.is_none() {
        return Err(bad("resumeFrom", "needs session"));
    }
    let cols = f.opt_int("cols", 1, 65535)?.map(|c| c as u16);
    let rows = f.opt_int("rows", 1, 65535)?.map(|r| r as u16);
    match v.get("type").and_then(Value::as_str) {
        Some("start") => {
            let tty = f.opt_bool("tty")?.ok_or_else(|| bad("tty", "required"))?;
            let argv = f.opt_str_list("argv")?.unwrap_or_default();
            let tool = match f.opt_str("tool")?.as_deref() {
                None => false,
                Some("tar") => true,
                Some(_) => return Err(bad("tool", "only \"tar\" is known")),
            };
            if argv.is_empty() && !tool {
                return Err(bad("argv", "needs at least one element"));
            }
            if session.is_some() && !tty {
                return Err(bad("session", "a session needs tty:true"));
            }
            let require_broker = require_broker(&f)?;
            if tool && (tty || session.is_some() || require_broker) {
                return Err(bad("tool", "takes no tty, session, env, cwd or require"));
            }
            if f.opt_bool("outer")? == Some(true) && (session.is_some() || require_broker) {
                return Err(bad("outer", "takes no session or require"));
            }
            f.opt_int("killGraceMs", 1, 60000)?;
            f.opt_bool("log")?;
            Ok(Open::Start(Start {
                name,
                argv,
                tty,
                env: f.opt_str_map("env")?.unwrap_or_default(),
                cwd: f.opt_str("cwd")?,
                cols: cols.unwrap_or(80),
                rows: rows.unwrap_or(24),
                session,
                resume,
                require_broker,
                tool,
            }))
        }
        Some("attach") => Ok(Open::Attach(Attach {
            name,
            session: session.ok_or_else(|| bad("session", "required"))?,
            size: cols.zip(rows),
            resume,
            wake: f.opt_bool("wake")?.unwrap_or(true),
            require_broker: require_broker(&f)?,
        })),
        _ => Err(bad("type", "the first message must be start or attach")),
    }
}

/// What an opening decided.
enum Opened {
    Session {
        gen: Arc<Generation>,
        plan: Plan,
        started: Value,
    },
    Plain {
        process: Process,
        tty: bool,
        started: Value,
    },
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

    /// Decides the opening under the lock.
    fn open(&mut self, open: &Open) -> Result<Opened, ImpdError> {
        let shared = self.shared.clone();
        let now = shared.clock.now();
        let mut st = shared.lock();
        let p = self.caller.principal.clone();
        let name = open.name().to_string();
        if self.caller.ticket_imp.as_ref().is_some_and(|t| *t != name) {
            return Err(ImpdError::new("FORBIDDEN", "the ticket names another imp"));
        }
        let tool = matches!(open, Open::Start(s) if s.tool);
        if tool && self.caller.ticket_imp.is_some() {
            return Err(ImpdError::new("FORBIDDEN", "tickets cannot start a tool"));
        }
        p.require(if tool { Scope::Manage } else { Scope::Exec }, Some(&name))?;
        let imp = st.imp(&name)?;
        if let Open::Attach(a) = open {
            if !a.wake && imp.state != ImpState::Running {
                let mut data = json!({"state": imp.state.wire(), "allowed": ["running"]});
                if imp.state != ImpState::Creating {
                    data["coldBoots"] = imp.cold_boots_wire();
                }
                return Err(ImpdError::new(
                    "INVALID_STATE",
                    format!("{name} is {}", imp.state.wire()),
                )
                .with_data(data));
            }
        }
        st.ensure_running(&name, &p, now)?;
        if tool {
            return Err(ImpdError::new(
                "AGENT_OUTDATED",
                "tool execs are not simulated",
            ));
        }
        if let Some(c) = st.conns.get_mut(&self.id) {
            c.imp = Some(name.clone());
        }
        let checks_require = st.opts.flag(|f| f.exec_require);
        match open {
            Open::Start(s) if s.session.is_none() => {
                if checks_require && s.require_broker {
                    broker_check(st.imp(&name)?, &s.env)?;
                }
                let cmd = command(&st, &name, s)?;
                let process = process::spawn(&shared.guest, &cmd).map_err(|e| {
                    ImpdError::new("EXEC_FAILED", format!("cannot start {:?}: {e}", s.argv))
                })?;
                st.stats.processes_started += 1;
                if let Some(boot) = st.imps.get_mut(&name).and_then(|i| i.boot.as_mut()) {
                    boot.plain.insert(self.id, process.pid);
                }
                if let Some(c) = st.conns.get_mut(&self.id) {
                    c.role = Role::Plain;
                }
                let started = json!({"type": "started", "pid": process.pid.as_raw_nonzero().get()});
                Ok(Opened::Plain {
                    process,
                    tty: s.tty,
                    started,
                })
            }
            Open::Start(s) => {
                let session = s.session.clone().unwrap_or_default();
                let existing = st
                    .imp(&name)?
                    .boot
                    .as_ref()
                    .and_then(|b| b.sessions.get(&session))
                    .cloned();
                let resumes_it =
                    |g: &Generation| s.resume.as_ref().is_some_and(|r| r.generation == g.id);
                let (gen, created) = match existing {
                    Some(g) if !g.exited() || resumes_it(&g) => {
                        if checks_require && s.require_broker && !g.with_broker {
                            return Err(broker_refusal(&format!(
                                "session {session} was started without the broker requirement"
                            )));
                        }
                        (g, false)
                    }
                    existing => {
                        if checks_require && s.require_broker {
                            broker_check(st.imp(&name)?, &s.env)?;
                        }
                        let count = st
                            .imp(&name)?
                            .boot
                            .as_ref()
                            .map(|b| b.sessions.len())
                            .unwrap_or(0);
                        if existing.is_none() && count >= 16 {
                            return Err(ImpdError::new(
                                "SESSION_LIMIT",
                                "the agent keeps at most 16 sessions",
                            ));
                        }
                        if let Some(old) = existing {
                            // An exited, uncollected generation is replaced: it leaves the name.
                            if let Some(boot) = st.imps.get_mut(&name).and_then(|i| i.boot.as_mut())
                            {
                                boot.sessions.remove(&session);
                                boot.set_previous(&session, old.previous());
                            }
                        }
                        let cmd = command(&st, &name, s)?;
                        let gen = start_generation(
                            &shared,
                            &mut st,
                            &name,
                            &session,
                            cmd,
                            checks_require && s.require_broker,
                            now,
                        )?;
                        (gen, true)
                    }
                };
                if !created {
                    // The agent resizes to the start's size like an attach would.
                    let _ = gen.input.try_send(Input::Resize {
                        cols: s.cols,
                        rows: s.rows,
                    });
                }
                self.join(&mut st, &name, gen, created, s.resume.as_ref())
            }
            Open::Attach(a) => {
                if st.opts.require_on_attach && checks_require && a.require_broker {
                    let g = st
                        .imp(&name)?
                        .boot
                        .as_ref()
                        .and_then(|b| b.sessions.get(&a.session))
                        .cloned();
                    if let Some(g) = g.filter(|g| !g.with_broker) {
                        return Err(broker_refusal(&format!(
                            "session {} was started without the broker requirement",
                            g.session
                        )));
                    }
                }
                let imp = st.imp(&name)?;
                let Some(gen) = imp
                    .boot
                    .as_ref()
                    .and_then(|b| b.sessions.get(&a.session))
                    .cloned()
                else {
                    return Err(no_session(&st, imp, &a.session));
                };
                if let Some((cols, rows)) = a.size {
                    // "if unchanged it first sets one row fewer so the program gets SIGWINCH":
                    // two resizes always produce at least one SIGWINCH.
                    let _ = gen.input.try_send(Input::Resize {
                        cols,
                        rows: rows.saturating_sub(1).max(1),
                    });
                    let _ = gen.input.try_send(Input::Resize { cols, rows });
                }
                self.join(&mut st, &name, gen, false, a.resume.as_ref())
            }
        }
    }

    /// Becomes the generation's viewer (taking it over from another) and builds `started`.
    fn join(
        &mut self,
        st: &mut SimState,
        imp_name: &str,
        gen: Arc<Generation>,
        created: bool,
        resume: Option<&ResumeFrom>,
    ) -> Result<Opened, ImpdError> {
        let offsets = st.opts.agent_offsets;
        let plan = gen.plan(resume, st.resume_overlap, offsets)?;
        let old = gen.out().viewer.replace(self.id);
        if let Some(old) = old.filter(|o| *o != self.id) {
            st.tell(old, Ctl::Detach("taken_over"));
        }
        if let Some(c) = st.conns.get_mut(&self.id) {
            c.role = Role::Session {
                session: gen.session.clone(),
                generation: gen.id.clone(),
            };
        }
        let imp = st.imp(imp_name)?;
        let mut started = json!({
            "type": "started",
            "pid": gen.pid.as_raw_nonzero().get(),
            "session": gen.session,
            "created": created,
        });
        if st.opts.flag(|f| f.session_offsets) {
            started["output"] = if offsets {
                let mut o = json!({
                    "continuity": "offsets",
                    "bootId": gen.boot_id,
                    "executionGeneration": gen.id,
                    "bufferStart": plan.buffer_start,
                    "end": plan.end,
                    "offset": plan.start,
                    "prelude": plan.prelude.len(),
                    "coldBoots": imp.cold_boots_wire(),
                });
                if let Some(p) = imp.boot.as_ref().and_then(|b| b.previous_of(&gen.session)) {
                    o["previous"] = previous_wire(p);
                }
                if let Some(r) = &plan.resume {
                    o["resume"] = r.clone();
                }
                o
            } else {
                json!({"continuity": "none"})
            };
        }
        Ok(Opened::Session { gen, plan, started })
    }

    /// Streams a generation to this viewer until exit, detach, or the client leaves.
    async fn view(&mut self, gen: Arc<Generation>, plan: Plan) {
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
        st.opts.agent_offsets && st.opts.flag(|f| f.session_offsets)
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
    async fn run_plain(&mut self, input: mpsc::Sender<Input>, tty: bool) {
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

/// `PRECONDITION_FAILED {reason:"broker_not_ready", detail}`.
fn broker_refusal(detail: &str) -> ImpdError {
    ImpdError::new(
        "PRECONDITION_FAILED",
        format!("the broker is not ready: {detail}"),
    )
    .with_data(json!({"reason": "broker_not_ready", "detail": detail}))
}

/// impd's checks for `require:["broker"]` on a start that creates a process (§11).
fn broker_check(imp: &Imp, env: &BTreeMap<String, String>) -> Result<(), ImpdError> {
    if imp.grants.is_empty() {
        return Err(broker_refusal("the imp holds no grant"));
    }
    if !imp.broker_ready {
        return Err(broker_refusal("the CA bundle step failed this boot"));
    }
    if let Some(var) = env.keys().find(|k| BROKER_VARS.contains(&k.as_str())) {
        return Err(broker_refusal(&format!("the start's env sets {var}")));
    }
    Ok(())
}

/// The final environment and cwd of a start: the image env (this machine's), the broker's
/// variables when the imp holds a grant, then the start's own env, which wins.
fn command(st: &SimState, imp: &str, s: &Start) -> Result<Command, ImpdError> {
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    let i = st.imp(imp)?;
    if !i.grants.is_empty() {
        for (k, v) in [
            ("HTTPS_PROXY", "http://127.0.0.1:9"),
            ("https_proxy", "http://127.0.0.1:9"),
            ("NO_PROXY", "localhost,127.0.0.1"),
            ("NODE_USE_ENV_PROXY", "1"),
        ] {
            env.insert(k.into(), v.into());
        }
        for k in &BROKER_VARS[5..] {
            env.insert(k.to_string(), "/etc/imp/broker-ca.pem".into());
        }
        let kinds: Vec<String> = i
            .grants
            .iter()
            .filter_map(|g| st.secrets.get(g).map(|(kind, _)| kind.clone()))
            .collect();
        if s.require_broker {
            for kind in &kinds {
                if let Some(var) = s
                    .env
                    .keys()
                    .find(|k| placeholder_vars(kind).contains(&k.as_str()))
                {
                    return Err(broker_refusal(&format!("the start's env sets {var}")));
                }
            }
        }
    }
    env.extend(s.env.clone());
    let cwd = s
        .cwd
        .clone()
        .or_else(|| env.get("HOME").cloned())
        .unwrap_or_else(|| "/".into());
    Ok(Command {
        argv: s.argv.clone(),
        env,
        cwd: PathBuf::from(cwd),
        tty: s.tty.then_some((s.cols, s.rows)),
    })
}

/// `NO_SESSION {bootId, coldBoots, previous?}` (data only from offset-capable agents).
fn no_session(st: &SimState, imp: &Imp, session: &str) -> ImpdError {
    let e = ImpdError::new("NO_SESSION", format!("no session {session} in this boot"));
    if !st.opts.agent_offsets {
        return e;
    }
    let Some(boot) = imp.boot.as_ref() else {
        return e;
    };
    let mut data = json!({"bootId": boot.id, "coldBoots": imp.cold_boots_wire()});
    if let Some(p) = boot.previous_of(session) {
        data["previous"] = previous_wire(p);
    }
    e.with_data(data)
}

fn previous_wire(p: &super::state::Previous) -> Value {
    json!({"executionGeneration": p.generation, "end": p.end, "exitCode": p.exit_code})
}
