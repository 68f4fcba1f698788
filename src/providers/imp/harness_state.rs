//! The state of one remote harness as a phase machine, with no actor in it: [`HarnessState`]
//! takes each event the [`super::harness::ImpHarness`] actor receives (host readied, a
//! connection started, sent data, ended; input, a resize, a signal, a detach) and answers with
//! the [`Effect`]s the actor carries out (open a connection, now or later; reset the screen;
//! report the attachment; ask for the host's lease; end).
//!
//! One [`Phase`] at a time: readying the host, opening a `start`, opening an `attach`,
//! started, waiting to reconnect, ended. What to open is [`super::opening::choose`], from the
//! harness's [`Origin`] and whether impd has answered yet; what follows a connection's end is
//! [`super::outcome::decide`]. Input lives in an [`InputQueue`]: bounded, and never dropped
//! while the harness lives.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;

use super::cursor::{Continuity, Cursor, Feed};
use super::host_error::HostError;
use super::input_queue::{InputQueue, Link, Signal};
use super::opening::{choose, Choice, Kind, Origin, Progress, Screen};
use super::outcome::{decide, ConnectionEnd, Next};
use crate::providers::{AttachmentChanged, HarnessEnd, HarnessExited, RemotePosition};
use atc_protocol::TermSize;
use impd_client::{
    AttachMsg, Opening, Previous, Requirement, Resume, ResumeFrom, StartMsg, Started,
};

/// What a `start` runs: fixed for the harness's life.
#[derive(Debug, Clone)]
pub struct StartParams {
    /// The imp.
    pub imp: String,
    /// impd's session name for the process.
    pub session: String,
    /// Program and arguments.
    pub argv: Vec<String>,
    /// The process's environment overrides.
    pub env: BTreeMap<String, String>,
    /// Its working directory in the guest.
    pub cwd: String,
    /// Every start and attach requires impd's broker (spec §11).
    pub require_broker: bool,
}

/// An opening on its way: what the connection was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dialing {
    /// Its attempt number; reports of other attempts are stale.
    pub attempt: u64,
    /// Whether its bytes come under a screen reset.
    pub screen: Screen,
    /// The size the opening asked for.
    pub size: TermSize,
}

/// Where the harness is.
pub enum Phase<W> {
    /// The host is being readied (and the report socket set up); nothing opened yet.
    Readying,
    /// A `start` is out; impd has not answered it.
    OpeningStart(Dialing),
    /// An `attach` is out; impd has not answered it.
    OpeningAttach(Dialing),
    /// impd answered: the connection streams, and input goes to `link`.
    Started {
        /// The connection's attempt number.
        attempt: u64,
        /// Its writer.
        link: W,
        /// Its reading position.
        feed: Feed,
    },
    /// A connection ended and the next is not open yet (a delay, or a sleep's decision).
    WaitingToReconnect,
    /// Over; every later report is ignored.
    Ended,
}

/// The phase's name, for tests and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseKind {
    /// [`Phase::Readying`].
    Readying,
    /// [`Phase::OpeningStart`].
    OpeningStart,
    /// [`Phase::OpeningAttach`].
    OpeningAttach,
    /// [`Phase::Started`].
    Started,
    /// [`Phase::WaitingToReconnect`].
    WaitingToReconnect,
    /// [`Phase::Ended`].
    Ended,
}

/// Whether the harness holds a count on its host (a `HarnessGone` is owed once it does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    /// Not held: a daemon restart attaches before it takes the lease, since taking a lease
    /// wakes a sleeping imp.
    Unheld,
    /// Asked for after a restart's attach; not asked again whatever the answer.
    Asked,
    /// Held.
    Held,
}

/// What the actor does for the state.
#[derive(Debug, Clone)]
pub enum Effect {
    /// Open connection `attempt` with `opening`.
    Open {
        /// Its attempt number.
        attempt: u64,
        /// The first message.
        opening: Opening,
    },
    /// Call [`HarnessState::open`] after this delay.
    OpenAfter(Duration),
    /// Write [`super::harness::SCREEN_RESET`] to the session before the connection's bytes.
    ResetScreen,
    /// The connection dropped and is being re-established.
    Reattaching,
    /// A connection started, at this position: report it, and answer a waiting spawn.
    Attached(Option<RemotePosition>),
    /// Ask the host to count this harness (a restart's attach found it awake).
    AskLease,
    /// Let the report socket listen again if it was lost.
    Relisten,
    /// End the harness with `exit`; `give_back_lease`: the host counted it.
    Finish {
        /// How it ended.
        exit: HarnessExited,
        /// Whether a `HarnessGone` is owed.
        give_back_lease: bool,
    },
}

impl Effect {
    /// The attachment change this effect reports, if any.
    pub fn attachment(&self) -> Option<AttachmentChanged> {
        match self {
            Effect::Reattaching => Some(AttachmentChanged::Reattaching),
            Effect::Attached(p) => Some(AttachmentChanged::Attached(p.clone())),
            _ => None,
        }
    }
}

/// One remote harness's state.
pub struct HarnessState<W> {
    params: StartParams,
    origin: Origin,
    progress: Progress,
    phase: Phase<W>,
    lease: Lease,
    /// The host's agent keeps output offsets (its readying said so, or a restart assumes it).
    offsets: bool,
    cursor: Cursor,
    /// The size wanted now.
    size: TermSize,
    input: InputQueue,
    /// A signal to send once a connection starts.
    pending_signal: Option<Signal>,
    /// Failures since the last start, and our own handler's failures, each with the delays.
    failures: usize,
    handler_failures: usize,
    delays: Vec<Duration>,
    /// Attempts made so far; the current one is the phase's.
    attempts: u64,
}

impl<W: Link> HarnessState<W> {
    /// A harness from `origin` running `params` at `size`, resuming `position` when a revive
    /// or restart has one; `delays` space reconnects after failures.
    pub fn new(
        params: StartParams,
        origin: Origin,
        size: TermSize,
        position: Option<&RemotePosition>,
        delays: Vec<Duration>,
    ) -> HarnessState<W> {
        let mut cursor = Cursor::default();
        if let Some(p) = position {
            cursor.restore(p);
        }
        HarnessState {
            params,
            // A restart checks the generation before it knows the host: it must have offsets.
            offsets: matches!(origin, Origin::Restart { .. }),
            lease: Lease::Unheld,
            origin,
            progress: Progress::Unanswered,
            phase: Phase::Readying,
            cursor,
            size,
            input: InputQueue::default(),
            pending_signal: None,
            failures: 0,
            handler_failures: 0,
            delays,
            attempts: 0,
        }
    }

    /// Sets variables of the start's environment. Only while readying: nothing has been
    /// opened with the old ones yet.
    pub fn set_env(&mut self, vars: impl IntoIterator<Item = (String, String)>) {
        debug_assert!(
            matches!(self.phase, Phase::Readying),
            "env set after an opening"
        );
        self.params.env.extend(vars);
    }

    /// The phase's name.
    pub fn phase(&self) -> PhaseKind {
        match &self.phase {
            Phase::Readying => PhaseKind::Readying,
            Phase::OpeningStart(_) => PhaseKind::OpeningStart,
            Phase::OpeningAttach(_) => PhaseKind::OpeningAttach,
            Phase::Started { .. } => PhaseKind::Started,
            Phase::WaitingToReconnect => PhaseKind::WaitingToReconnect,
            Phase::Ended => PhaseKind::Ended,
        }
    }

    /// Where the harness came from.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// The imp and session, for logs.
    pub fn names(&self) -> (&str, &str) {
        (&self.params.imp, &self.params.session)
    }

    /// The host counts this harness now; `offsets` says whether its agent keeps offsets.
    /// Returns whether the count must be given back at once (the harness ended meanwhile).
    pub fn lease_held(&mut self, offsets: bool) -> bool {
        self.lease = Lease::Held;
        self.offsets = offsets;
        matches!(self.phase, Phase::Ended)
    }

    /// Opens the next connection, as [`choose`] says.
    pub fn open(&mut self) -> Vec<Effect> {
        if matches!(self.phase, Phase::Ended) {
            return Vec::new();
        }
        self.attempts += 1;
        let choice = choose(&self.origin, self.progress, self.offsets, &self.cursor);
        let dialing = Dialing {
            attempt: self.attempts,
            screen: choice.screen,
            size: self.size,
        };
        let opening = self.opening(&choice);
        self.phase = match choice.kind {
            Kind::Start => Phase::OpeningStart(dialing),
            Kind::Attach => Phase::OpeningAttach(dialing),
        };
        vec![Effect::Open {
            attempt: self.attempts,
            opening,
        }]
    }

    fn opening(&self, choice: &Choice) -> Opening {
        let p = &self.params;
        let require = if p.require_broker {
            vec![Requirement::Broker]
        } else {
            Vec::new()
        };
        let resume_from = choice
            .resume_from
            .clone()
            .map(|(execution_generation, offset)| ResumeFrom {
                execution_generation,
                offset,
            });
        match choice.kind {
            Kind::Start => Opening::Start(StartMsg {
                name: p.imp.clone(),
                argv: p.argv.clone(),
                tty: true,
                env: p.env.clone(),
                cwd: Some(p.cwd.clone()),
                cols: self.size.cols,
                rows: self.size.rows,
                session: Some(p.session.clone()),
                resume_from,
                require,
            }),
            Kind::Attach => Opening::Attach(AttachMsg {
                name: p.imp.clone(),
                session: p.session.clone(),
                cols: self.size.cols,
                rows: self.size.rows,
                resume_from,
                wake: false,
                // impd's attach schema has no `require` (impd spec §9.4); it is sent anyway,
                // as the daemon's spec asks, for an impd that honours it.
                require,
            }),
        }
    }

    /// impd answered `started` on `attempt`, writable through `link`.
    pub fn started(&mut self, attempt: u64, started: Started, link: W) -> Vec<Effect> {
        let (kind, dialing) = match &self.phase {
            Phase::OpeningStart(d) if d.attempt == attempt => (Kind::Start, d.clone()),
            Phase::OpeningAttach(d) if d.attempt == attempt => (Kind::Attach, d.clone()),
            _ => {
                link.close();
                return Vec::new();
            }
        };
        let mut screen = dialing.screen;
        let output = started.output.filter(|o| o.has_offsets() && self.offsets);
        if let Some(o) = &output {
            match &o.resume {
                Some(Resume::Gap { from, to }) => {
                    // Bytes we never had are gone: start over with a replay under a clean
                    // screen.
                    tracing::info!(imp = %self.params.imp, session = %self.params.session,
                        from, to, "output gap; attaching fresh");
                    link.close();
                    self.cursor.clear();
                    return self.open();
                }
                // A revive's start found the old process gone and started a new one.
                Some(Resume::GenerationChanged { .. }) if kind == Kind::Start => {
                    screen = Screen::Reset;
                }
                Some(Resume::GenerationChanged { .. }) => {
                    link.close();
                    let ours = self.cursor.generation().unwrap_or_default().to_string();
                    return self.generation_gone(o.previous.as_ref(), &ours);
                }
                Some(Resume::Exact) | None => {}
            }
            // After a daemon restart: the process must still be the one we knew (when the
            // last daemon lived to record it).
            if let (Progress::Unanswered, Origin::Restart { generation }) =
                (self.progress, &self.origin)
            {
                if let Some(generation) = generation
                    .as_ref()
                    .filter(|g| **g != o.execution_generation)
                {
                    link.close();
                    let expected = generation.clone();
                    return self.generation_gone(o.previous.as_ref(), &expected);
                }
                screen = Screen::Reset;
            }
        }
        let continuity = output.as_ref().map(|o| Continuity {
            boot_id: o.boot_id.clone(),
            generation: o.execution_generation.clone(),
            offset: o.offset,
            prelude: o.prelude,
        });
        // Without offsets every connection replays, except the very start of a process.
        let first_start = matches!(
            (self.progress, &self.origin),
            (Progress::Unanswered, Origin::Spawn | Origin::Revive)
        );
        if continuity.is_none() && !first_start {
            screen = Screen::Reset;
        }
        let feed = self
            .cursor
            .begin(continuity.as_ref(), screen == Screen::Reset);
        let mut effects = Vec::new();
        if screen == Screen::Reset {
            effects.push(Effect::ResetScreen);
        }
        if self.input.flush(&link).is_err() {
            // The socket went between `started` and now; its end is on the way, and the
            // input waits for the connection after it.
            tracing::info!(imp = %self.params.imp, session = %self.params.session,
                waiting = self.input.waiting(), "the new connection's writer failed; input waits");
        }
        if self.size != dialing.size && link.resize(self.size).is_err() {
            // The next opening asks for `self.size` anyway.
            tracing::debug!(imp = %self.params.imp, "resize after start failed: socket gone");
        }
        if let Some(sig) = self.pending_signal.take() {
            if link.signal(sig).is_err() {
                self.pending_signal = Some(sig);
            }
        }
        self.phase = Phase::Started {
            attempt,
            link,
            feed,
        };
        if self.lease == Lease::Unheld {
            // Re-attached after a daemon restart: now hold the host's lease again.
            self.lease = Lease::Asked;
            effects.push(Effect::AskLease);
        }
        self.progress = Progress::Answered;
        self.failures = 0;
        self.handler_failures = 0;
        // The imp runs: a report socket lost meanwhile (a sleep, impd losing it) can listen
        // again without waking anything.
        effects.push(Effect::Relisten);
        // Every start is reported with the process's position; the session announces the
        // change and records a new generation.
        effects.push(Effect::Attached(self.cursor.position()));
        effects
    }

    /// The generation `ours` no longer runs under the session's name: its recorded exit when
    /// impd's `previous` is ours, else someone else's process took the name.
    fn generation_gone(&mut self, previous: Option<&Previous>, ours: &str) -> Vec<Effect> {
        match previous.filter(|p| p.execution_generation == ours) {
            Some(p) => self.finish(HarnessExited::exited(Some(p.exit_code.unwrap_or(1)), None)),
            None => self.ended_with("imp replaced the process".into()),
        }
    }

    /// Output read on `attempt`: the part the session has not had (empty when stale).
    pub fn data(&mut self, attempt: u64, bytes: Bytes) -> Bytes {
        match &mut self.phase {
            Phase::Started {
                attempt: current,
                feed,
                ..
            } if *current == attempt => self.cursor.take(feed, bytes),
            _ => Bytes::new(),
        }
    }

    /// Whether `attempt` is the connection the harness waits on or streams from now.
    pub fn is_current(&self, attempt: u64) -> bool {
        match &self.phase {
            Phase::OpeningStart(d) | Phase::OpeningAttach(d) => d.attempt == attempt,
            Phase::Started { attempt: a, .. } => *a == attempt,
            _ => false,
        }
    }

    /// Connection `attempt` ended: what follows, or `None` for a stale report. The phase is
    /// waiting to reconnect until [`HarnessState::after`] hears the decision.
    pub fn ended(&mut self, attempt: u64, end: &ConnectionEnd, started: bool) -> Option<Next> {
        if !self.is_current(attempt) {
            return None;
        }
        if let Phase::Started { link, .. } =
            std::mem::replace(&mut self.phase, Phase::WaitingToReconnect)
        {
            self.input.connection_ended(&link);
        }
        Some(decide(end, started, &self.cursor))
    }

    /// Carries out the decision on a connection's end.
    pub fn after(&mut self, next: Next) -> Vec<Effect> {
        if matches!(self.phase, Phase::Ended) {
            return Vec::new();
        }
        match next {
            Next::Exited { code, signal } => self.finish(HarnessExited::exited(code, signal)),
            Next::Ended(detail) => self.ended_with(detail),
            Next::Suspended => self.suspended(),
            Next::FreshAttach => {
                self.cursor.clear();
                self.open()
            }
            Next::ReconnectNow => {
                let mut effects = vec![Effect::Reattaching];
                effects.extend(self.open());
                effects
            }
            Next::Retry { handler, why } => {
                let counter = if handler {
                    &mut self.handler_failures
                } else {
                    &mut self.failures
                };
                *counter += 1;
                let n = *counter;
                match self.delays.get(n - 1).copied() {
                    Some(delay) => {
                        tracing::info!(imp = %self.params.imp, session = %self.params.session,
                            attempt = n, ?delay, why = %why, "reconnecting");
                        vec![Effect::Reattaching, Effect::OpenAfter(delay)]
                    }
                    None => self.ended_with(why),
                }
            }
        }
    }

    /// Input for the process: to the connection when one is up, else kept for the next;
    /// refused with `too_slow` past the cap either way.
    pub fn input(&mut self, bytes: Bytes) -> Result<(), HostError> {
        let link = match &self.phase {
            Phase::Started { link, .. } => Some(link),
            _ => None,
        };
        let up = link.is_some();
        self.input.write(link, bytes).map_err(|full| {
            tracing::debug!(imp = %self.params.imp, waiting = full.waiting, up, "input refused");
            HostError::InputFull { connected: up }
        })
    }

    /// The size wanted now: sent at once when a connection is up, else after the next start
    /// if the opening asked for another.
    pub fn resize(&mut self, size: TermSize) {
        self.size = size;
        if let Phase::Started { link, .. } = &self.phase {
            if link.resize(size).is_err() {
                // The socket is gone; the next opening asks for this size.
                tracing::debug!(imp = %self.params.imp, "resize failed: socket gone");
            }
        }
    }

    /// A signal for the process, now or once the next connection starts.
    pub fn signal(&mut self, signal: Signal) {
        match &self.phase {
            Phase::Started { link, .. } if link.signal(signal).is_ok() => {}
            _ => self.pending_signal = Some(signal),
        }
    }

    /// The harness is let go: the host slept with the process inside, or it runs on alone.
    pub fn detach(&mut self, host_asleep: bool) -> Vec<Effect> {
        if host_asleep {
            self.suspended()
        } else {
            self.ended_with("detached; the process runs on in its imp".into())
        }
    }

    fn suspended(&mut self) -> Vec<Effect> {
        self.finish(HarnessExited {
            code: None,
            signal: None,
            end: HarnessEnd::Suspended,
            detail: Some("asleep".into()),
            position: None,
        })
    }

    /// Ends the harness without a confirmed exit; `detail` says why.
    pub fn ended_with(&mut self, detail: String) -> Vec<Effect> {
        self.finish(HarnessExited {
            code: None,
            signal: None,
            end: HarnessEnd::Ended,
            detail: Some(detail),
            position: None,
        })
    }

    /// Ends the harness once, with the position it reached, saying so when input it accepted
    /// never went out.
    pub fn finish(&mut self, mut exit: HarnessExited) -> Vec<Effect> {
        if matches!(self.phase, Phase::Ended) {
            return Vec::new();
        }
        if exit.position.is_none() {
            exit.position = self.cursor.position();
        }
        if let Phase::Started { link, .. } = std::mem::replace(&mut self.phase, Phase::Ended) {
            // What the writer holds goes out ahead of the close.
            link.close();
        }
        let undelivered = self.input.pending_bytes();
        // An exit needs no note: a process that ended reads no more input.
        if undelivered > 0 && !matches!(exit.end, HarnessEnd::Exited) {
            let why = exit.detail.take().unwrap_or_else(|| "ended".into());
            exit.detail = Some(format!(
                "{why}; {undelivered} bytes of input were not delivered"
            ));
        }
        vec![Effect::Finish {
            exit,
            give_back_lease: self.lease == Lease::Held,
        }]
    }
}

#[cfg(test)]
#[path = "harness_state_tests.rs"]
mod tests;
