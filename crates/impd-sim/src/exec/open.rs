//! Deciding an opening under the state lock (protocol §9.3–§9.7, §9.10, §11): the ticket and scope,
//! the imp's state (waking it if asked), the broker requirement, which generation a session
//! start or attach joins, and the `started` message. It starts processes but never streams;
//! `stream` does that once `started` is out.

use std::sync::Arc;

use serde_json::{json, Value};

use super::command::{broker_check, broker_refusal, command};
use super::message::Open;
use super::Conn;
use crate::auth::Scope;
use crate::envelope::ImpdError;
use crate::options::Flag;
use crate::process::{self, Input, Process};
use crate::session::{start_generation, Generation, Plan, ResumeFrom};
use crate::state::{Ctl, Imp, ImpState, Role, SimState};

/// What an opening decided.
pub(super) enum Opened {
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

impl Conn {
    /// Decides the opening under the lock.
    pub(super) fn open(&mut self, open: &Open) -> Result<Opened, ImpdError> {
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
        let checks_require = st.opts.has(Flag::ExecRequire);
        match open {
            Open::Start(s) if s.session.is_none() => {
                if checks_require && s.require_broker {
                    broker_check(&st, &name, &s.env)?;
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
                        if checks_require && s.require_broker {
                            // impd records requiring generations; an agent without offsets
                            // has none to record, so nothing running there ever passes.
                            if !st.opts.agent_offsets {
                                return Err(broker_refusal(&format!(
                                    "session {session} has no execution generation"
                                )));
                            }
                            if !g.with_broker {
                                return Err(broker_refusal(&format!(
                                    "session {session} was started without the broker requirement"
                                )));
                            }
                        }
                        (g, false)
                    }
                    existing => {
                        if checks_require && s.require_broker {
                            broker_check(&st, &name, &s.env)?;
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
                    // The agent resizes to the start's size like an attach would. Under the
                    // lock there is no waiting: a full queue or an ended process loses only
                    // this resize, and an ended one's exit reaches the viewer anyway.
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
                    // two resizes always produce at least one SIGWINCH. As for a start, a
                    // full queue or an ended process loses only these resizes.
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
        if st.opts.has(Flag::SessionOffsets) {
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

fn previous_wire(p: &crate::state::Previous) -> Value {
    json!({"executionGeneration": p.generation, "end": p.end, "exitCode": p.exit_code})
}
