//! The one shared sweep of the activity rule (issue 38): every `sweep` it reads the CPU
//! seconds of each watched session (sessions whose attention is `activity` and whose process
//! runs) and sends each its sample. It is the only clock the rule has; sessions keep no timer
//! of their own. The reads (one pass over `/proc`, a cgroup file a session) run on the
//! daemon's blocking threads, and a sweep whose reads are still out when the next one is due
//! is skipped rather than stacked.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use atc_protocol::SessionId;

use super::process_cpu::ProcTable;
use crate::config::attention::ActivityConfig;
use crate::providers::local::cgroup::SessionCgroups;

/// The sweep's sample for one session (sent by [`ActivitySweep`] to the session).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct CpuSampled {
    /// When it was read.
    pub at: Instant,
    /// CPU seconds its processes used so far; `None` when it cannot be measured.
    pub cpu_seconds: Option<f64>,
}

/// Where a session's CPU figure comes from.
#[derive(Clone)]
pub enum CpuSource {
    /// Its cgroup.
    Cgroup(Arc<SessionCgroups>),
    /// The process tree under this pid (its process-group leader).
    Tree(i32),
    /// Nowhere (a process on another host): the rule goes by output alone.
    Unmeasured,
}

/// Sent by a session whose process started under the activity rule: sample it on every sweep
/// (replacing an earlier watch of the same session).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Watch {
    /// The session.
    pub id: SessionId,
    /// Where its CPU is read.
    pub source: CpuSource,
    /// Where samples go.
    pub to: Recipient<CpuSampled>,
}

/// Sent by a session whose process ended: stop sampling it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Unwatch(pub SessionId);

/// What sessions hold to be watched: the sweep, and the thresholds their rules use.
#[derive(Clone)]
pub struct ActivityWatch {
    /// The sweep.
    pub sweep: Addr<ActivitySweep>,
    /// The thresholds.
    pub config: ActivityConfig,
}

impl ActivityWatch {
    /// Starts the sweep on the current arbiter (the sessions').
    pub fn start(config: ActivityConfig) -> ActivityWatch {
        ActivityWatch {
            sweep: ActivitySweep::new(config.sweep).start(),
            config,
        }
    }
}

struct Watched {
    source: CpuSource,
    to: Recipient<CpuSampled>,
}

/// The sweep actor.
pub struct ActivitySweep {
    every: Duration,
    watched: HashMap<SessionId, Watched>,
    /// A sweep's reads are out.
    reading: bool,
}

impl ActivitySweep {
    fn new(every: Duration) -> ActivitySweep {
        ActivitySweep {
            every,
            watched: HashMap::new(),
            reading: false,
        }
    }

    fn sweep(&mut self, ctx: &mut Context<Self>) {
        if self.reading || self.watched.is_empty() {
            return;
        }
        self.reading = true;
        let sources: Vec<(SessionId, CpuSource)> = self
            .watched
            .iter()
            .map(|(id, w)| (*id, w.source.clone()))
            .collect();
        let read = super::blocking_threads::run(move || read_all(sources));
        ctx.spawn(fut::wrap_future::<_, Self>(read).map(|read, act, _| {
            act.reading = false;
            let Ok((at, samples)) = read else {
                tracing::error!("an activity sweep's reads did not finish");
                return;
            };
            for (id, cpu_seconds) in samples {
                let Some(w) = act.watched.get(&id) else {
                    // Unwatched while the reads were out.
                    continue;
                };
                match w.to.try_send(CpuSampled { at, cpu_seconds }) {
                    Ok(()) => {}
                    // A session whose mailbox is full gets the next sweep's sample instead.
                    Err(SendError::Full(_)) => {}
                    Err(SendError::Closed(_)) => {
                        act.watched.remove(&id);
                    }
                }
            }
        }));
    }
}

/// Reads every source; blocking.
fn read_all(sources: Vec<(SessionId, CpuSource)>) -> (Instant, Vec<(SessionId, Option<f64>)>) {
    let table = sources
        .iter()
        .any(|(_, s)| matches!(s, CpuSource::Tree(_)))
        .then(ProcTable::read);
    let at = Instant::now();
    let samples = sources
        .into_iter()
        .map(|(id, source)| {
            let cpu = match source {
                CpuSource::Cgroup(cgroups) => cgroups.group(id).cpu_seconds(),
                CpuSource::Tree(pid) => table.as_ref().and_then(|t| t.tree_seconds(pid)),
                CpuSource::Unmeasured => None,
            };
            (id, cpu)
        })
        .collect();
    (at, samples)
}

impl Actor for ActivitySweep {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_interval(self.every, |act, ctx| act.sweep(ctx));
    }
}

impl Handler<Watch> for ActivitySweep {
    type Result = ();

    fn handle(&mut self, msg: Watch, _: &mut Self::Context) {
        self.watched.insert(
            msg.id,
            Watched {
                source: msg.source,
                to: msg.to,
            },
        );
    }
}

impl Handler<Unwatch> for ActivitySweep {
    type Result = ();

    fn handle(&mut self, msg: Unwatch, _: &mut Self::Context) {
        self.watched.remove(&msg.0);
    }
}
