//! A named session's generation: one run of its process on a pty, its output ring, its exit,
//! and its one viewer (protocol §9.6, §9.7, §13).
//!
//! A pump task on the guest runtime moves the process's output into the ring and never waits
//! for a viewer; viewers pull from the ring at their own pace, woken by `pulse`. A generation
//! stays under its name until it "leaves" it: its exit collected by a viewer, or an exited
//! generation replaced by a new start, or a running one replaced (a test control) and then
//! ended. Leaving writes `previous` for the name, once the end and exit code are final.

use std::sync::{Arc, Mutex, MutexGuard};

use rustix::process::{Pid, Signal};
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};

use super::clock::Millis;
use super::envelope::ImpdError;
use super::process::{self, signal_group, Command, Event, Input};
use super::ring::Ring;
use super::state::{ConnId, Previous, Shared, SimState};

/// How a generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<&'static str>,
}

/// The mutable part of a generation.
#[derive(Debug, Default)]
pub struct GenOut {
    pub ring: Ring,
    /// Set once the process ended and its output was drained.
    pub exit: Option<Exit>,
    /// The socket attached to it, if any (one viewer per session).
    pub viewer: Option<ConnId>,
}

/// One run of a session's process.
pub struct Generation {
    /// 32 lowercase hex.
    pub id: String,
    pub session: String,
    pub imp: String,
    pub imp_id: String,
    pub boot_id: String,
    pub pid: Pid,
    pub argv: Vec<String>,
    pub command: Command,
    pub started_at: Millis,
    /// Started with `require:["broker"]` (a later start with the requirement may join it).
    pub with_broker: bool,
    pub input: mpsc::Sender<Input>,
    out: Mutex<GenOut>,
    /// Bumped after every change of `out`; viewers wait on it.
    pub pulse: watch::Sender<u64>,
}

/// A `resumeFrom`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResumeFrom {
    pub generation: String,
    pub offset: u64,
}

/// Where a viewer starts and what `started.output` says about it.
#[derive(Debug)]
pub struct Plan {
    pub start: u64,
    pub prelude: Vec<u8>,
    pub resume: Option<Value>,
    pub buffer_start: u64,
    pub end: u64,
}

impl Generation {
    pub fn out(&self) -> MutexGuard<'_, GenOut> {
        self.out.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn exited(&self) -> bool {
        self.out().exit.is_some()
    }

    /// Ends the process for good (a cold boot, a stop): SIGKILL works on frozen ones too.
    pub fn kill(&self) {
        if !self.exited() {
            signal_group(self.pid, Signal::KILL);
        }
    }

    pub fn signal(&self, sig: Signal) {
        if !self.exited() {
            signal_group(self.pid, sig);
        }
    }

    /// What this generation leaves under its name.
    pub fn previous(&self) -> Previous {
        let out = self.out();
        Previous {
            generation: self.id.clone(),
            end: out.ring.end(),
            exit_code: out.exit.and_then(|e| e.code),
        }
    }

    /// Where a viewer starts (protocol §9.7). `offsets` false: an agent without offsets,
    /// which replays every time and ignores `resumeFrom`.
    pub fn plan(
        &self,
        resume: Option<&ResumeFrom>,
        overlap: u64,
        offsets: bool,
    ) -> Result<Plan, ImpdError> {
        let out = self.out();
        let (bs, end) = (out.ring.buffer_start(), out.ring.end());
        let plan = |start: u64, prelude: Vec<u8>, resume: Option<Value>| Plan {
            start,
            prelude,
            resume,
            buffer_start: bs,
            end,
        };
        match resume.filter(|_| offsets) {
            None => {
                let (start, prelude) = out.ring.replay_start();
                Ok(plan(start, prelude, None))
            }
            Some(r) if r.generation == self.id => {
                if r.offset > end {
                    Err(
                        ImpdError::new("INVALID_RESUME", "resume offset past the end")
                            .with_data(json!({"end": end, "bufferStart": bs})),
                    )
                } else if r.offset < bs {
                    Ok(plan(
                        bs,
                        Vec::new(),
                        Some(json!({"kind": "gap", "from": r.offset, "to": bs})),
                    ))
                } else {
                    let start = r.offset.saturating_sub(overlap).max(bs);
                    Ok(plan(start, Vec::new(), Some(json!({"kind": "exact"}))))
                }
            }
            Some(_) => Ok(plan(
                bs,
                Vec::new(),
                Some(
                    json!({"kind": "generation_changed", "executionGeneration": self.id, "firstOffset": bs}),
                ),
            )),
        }
    }
}

/// Starts a new generation of `session` on `imp`'s current boot and puts it under the name.
pub fn start_generation(
    shared: &Arc<Shared>,
    st: &mut SimState,
    imp: &str,
    session: &str,
    command: Command,
    with_broker: bool,
    now: Millis,
) -> Result<Arc<Generation>, ImpdError> {
    let Some(i) = st.imps.get_mut(imp) else {
        return Err(ImpdError::not_found("imp", imp));
    };
    let imp_id = i.id.clone();
    let Some(boot) = i.boot.as_mut() else {
        return Err(ImpdError::new(
            "INVALID_STATE",
            "the imp has no running guest",
        ));
    };
    let p = process::spawn(&shared.guest, &command).map_err(|e| {
        ImpdError::new(
            "EXEC_FAILED",
            format!("cannot start {:?}: {e}", command.argv),
        )
    })?;
    let (pulse, _) = watch::channel(0u64);
    let gen = Arc::new(Generation {
        id: super::auth::random_hex(16),
        session: session.to_string(),
        imp: imp.to_string(),
        imp_id,
        boot_id: boot.id.clone(),
        pid: p.pid,
        argv: command.argv.clone(),
        command,
        started_at: now,
        with_broker,
        input: p.input,
        out: Mutex::new(GenOut::default()),
        pulse,
    });
    boot.sessions.insert(session.to_string(), gen.clone());
    st.stats.processes_started += 1;
    shared
        .guest
        .spawn(pump(shared.clone(), gen.clone(), p.events));
    Ok(gen)
}

/// Moves output into the ring, then records the exit.
async fn pump(shared: Arc<Shared>, gen: Arc<Generation>, mut events: mpsc::Receiver<Event>) {
    while let Some(ev) = events.recv().await {
        match ev {
            Event::Output { bytes, .. } => gen.out().ring.push(&bytes),
            Event::Exited { code, signal } => {
                gen.out().exit = Some(Exit { code, signal });
                gen.pulse.send_modify(|n| *n += 1);
                ended(&shared, &gen);
                return;
            }
        }
        gen.pulse.send_modify(|n| *n += 1);
    }
}

/// A generation's process ended. If it is no longer the one under its name (replaced), it
/// leaves the name now; otherwise it waits, `exited`, for a viewer to collect it.
fn ended(shared: &Shared, gen: &Arc<Generation>) {
    let mut st = shared.lock();
    let Some(boot) = current_boot(&mut st, gen) else {
        return;
    };
    let current = boot
        .sessions
        .get(&gen.session)
        .is_some_and(|g| Arc::ptr_eq(g, gen));
    if !current {
        boot.set_previous(&gen.session, gen.previous());
    }
}

/// A viewer delivered the exit: the generation leaves its name, which is free again.
pub fn collect(st: &mut SimState, gen: &Arc<Generation>) {
    let Some(boot) = current_boot(st, gen) else {
        return;
    };
    let current = boot
        .sessions
        .get(&gen.session)
        .is_some_and(|g| Arc::ptr_eq(g, gen));
    if current {
        boot.sessions.remove(&gen.session);
        boot.set_previous(&gen.session, gen.previous());
    }
}

fn current_boot<'a>(st: &'a mut SimState, gen: &Generation) -> Option<&'a mut super::state::Boot> {
    st.imps
        .get_mut(&gen.imp)
        .filter(|i| i.id == gen.imp_id)
        .and_then(|i| i.boot.as_mut())
        .filter(|b| b.id == gen.boot_id)
}

/// `^[a-z0-9][a-z0-9-]{0,31}$`.
pub fn valid_session_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 32
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}
