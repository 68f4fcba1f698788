//! The `drops` suite (issue 12, item 1): attached clients closed at random moments of a
//! checksummed output stream, each resuming by stream + offset, and every byte accounted for.
//!
//! A few sessions run `atc-proof emit` (a stream whose byte at offset k is known); each has a
//! couple of clients, all on raw sockets ([`crate::rawws`]). Every client loops: attach (the
//! first time plain, then with `stream` + `from` = the next offset it has not seen), read,
//! close. The drops are numbered across all clients and the number picks the kind, so every
//! run has the same mix:
//! - *plain*: read a random amount, then a clean close, a FIN or a reset between frames;
//! - *mid-frame*: read exactly into a binary frame and reset or FIN the connection there;
//! - *repaint*: an attach without `from`, closed at a random byte of its prelude;
//! - *desync*: stop reading until the daemon counts this client as overflowed (its
//!   `atc_client_desyncs_total` grows; one such drop at a time so the count is this
//!   client's), read the backlog up to the `desync` frame, and close there.
//!
//! When the drops are done every client resumes once more, the sessions are checked (alive,
//! screen showing the stream), the emitters are told to stop, and each client reads to the
//! stream's end. [`Reassembly`] says what each one lost, saw twice or saw wrong.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures_util::future::join_all;
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use crate::emitting::{self, Emitting};
use crate::rawws::{op, Frame, Options, RawWs, WsError};
use crate::reassembly::{Asked, Reassembly, Replay, Tally};
use crate::rng::Rng;
use crate::{Plan, Report, Want};
use atc_testkit::{ChildDaemon, DaemonSpec};

/// The figure.
const DEFAULT_DROPS: u64 = 1000;

/// The daemon's per-client queue. Larger than the ring, so a resume's tail (at most the ring)
/// always fits in a fresh client's queue; a resume is only reset when its offset is out of
/// the ring.
const QUEUE_BYTES: u64 = 1536 * 1024;

/// The daemon's per-session ring (its default).
const RING_BYTES: u64 = 1024 * 1024;

/// A desync client's receive buffer: small, so the daemon's queue is what fills.
const DESYNC_RCVBUF: u32 = 16 * 1024;

/// Longest wait for any one frame; the daemon sends output all the time, so a socket this
/// quiet is stuck.
const FRAME_WAIT: Duration = Duration::from_secs(15);

/// Longest wait for a stopped client to be counted as overflowed.
const DESYNC_WAIT: Duration = Duration::from_secs(30);

/// Time kept back from the limit for the final resumes and the stream's end.
const FINISH_RESERVE: Duration = Duration::from_secs(60);

/// A mid-frame drop cuts into a binary frame at least this large (the PTY reads of a steady
/// stream are a few KiB; resume tails and repaints are larger).
const MID_FRAME_MIN: u64 = 1024;

/// Failures quoted in the notes, at most.
const NOTED_FAILURES: usize = 8;

/// The shape of a run, from the count.
#[derive(Debug, Clone, Copy)]
struct Shape {
    sessions: usize,
    clients_per_session: usize,
    /// Each emitter's bytes a second.
    rate: u64,
}

impl Shape {
    fn for_count(count: u64) -> Shape {
        if count >= 200 {
            Shape {
                sessions: 4,
                clients_per_session: 2,
                rate: 1024 * 1024,
            }
        } else {
            // The short version, on a debug build beside a test run.
            Shape {
                sessions: 2,
                clients_per_session: 2,
                rate: 512 * 1024,
            }
        }
    }
}

/// What a drop does, chosen by its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    MidFrame,
    Repaint,
    Desync,
}

impl Kind {
    /// One in ten desyncs, two mid-frame, two repaints, five plain: the slowest kind (a
    /// desync waits for the queue to fill) is the rarest.
    fn of(number: u64) -> Kind {
        match number % 10 {
            0 => Kind::Desync,
            3 | 7 => Kind::MidFrame,
            5 | 9 => Kind::Repaint,
            _ => Kind::Plain,
        }
    }
}

/// How a drop went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Closed after reading, between frames.
    Plain,
    /// Closed inside a binary frame.
    MidFrame,
    /// Closed inside a repaint's prelude.
    Repaint,
    /// Closed at the `desync` frame after stopping on purpose.
    Desync,
    /// A desync the client did not ask for (it fell behind), closed there.
    Unplanned,
    /// A desync drop whose stop never made the daemon count an overflow; closed anyway.
    DesyncMissed,
    /// A repaint drop whose prelude was too short to close inside; closed after it.
    RepaintTooShort,
}

/// Counts shared by every client.
#[derive(Default)]
struct Counts {
    plain: u64,
    mid_frame: u64,
    repaint: u64,
    desync: u64,
    unplanned: u64,
    desync_missed: u64,
    repaint_too_short: u64,
    errors: u64,
    /// Payload bytes of the frames mid-frame drops cut into, added up.
    cut_frame_bytes: u64,
    resumes: Vec<Duration>,
    /// From the daemon counting a stopped client's overflow to its `desync` frame.
    desync_frames: Vec<Duration>,
    failures: Vec<String>,
    /// The first few gap resets, described.
    resets: Vec<String>,
}

impl Counts {
    fn record(&mut self, o: Outcome) {
        match o {
            Outcome::Plain => self.plain += 1,
            Outcome::MidFrame => self.mid_frame += 1,
            Outcome::Repaint => self.repaint += 1,
            Outcome::Desync => self.desync += 1,
            Outcome::Unplanned => self.unplanned += 1,
            Outcome::DesyncMissed => self.desync_missed += 1,
            Outcome::RepaintTooShort => self.repaint_too_short += 1,
        }
    }

    fn drops(&self) -> u64 {
        self.plain
            + self.mid_frame
            + self.repaint
            + self.desync
            + self.unplanned
            + self.desync_missed
            + self.repaint_too_short
    }

    fn reset(&mut self, what: String) {
        if self.resets.len() < NOTED_FAILURES {
            self.resets.push(what);
        }
    }

    fn fail(&mut self, who: &str, e: &anyhow::Error) {
        self.errors += 1;
        if self.failures.len() < NOTED_FAILURES {
            self.failures.push(format!("{who}: {e:#}"));
        }
    }
}

/// What every client task shares.
struct Shared {
    url: String,
    token: String,
    count: u64,
    /// Drops handed out so far (numbers `0..issued`).
    issued: Cell<u64>,
    /// When the suite began, for the progress lines.
    started: Instant,
    /// Cycles stop being handed out after this.
    cycles_until: Instant,
    /// The final phase must be over by this.
    finish_by: Instant,
    /// One desync drop at a time, so the daemon's global desync count is this client's.
    desync_turn: Semaphore,
    counts: RefCell<Counts>,
    /// Clients live on their final connection.
    ready: Cell<usize>,
    /// Each session's stream length, once its emitter has stopped.
    totals: RefCell<Vec<Option<u64>>>,
}

impl Shared {
    /// The next drop number, while there are any left and time for them.
    fn next_drop(&self) -> Option<u64> {
        let n = self.issued.get();
        if n >= self.count || Instant::now() >= self.cycles_until {
            return None;
        }
        self.issued.set(n + 1);
        // A full run takes minutes: a line on stderr every tenth of the drops says how far.
        let step = (self.count / 10).max(1);
        if n > 0 && n.is_multiple_of(step) {
            eprintln!(
                "atc-proof drops: {n} of {} drops begun, {:.0} s",
                self.count,
                self.started.elapsed().as_secs_f64()
            );
        }
        Some(n)
    }
}

/// Runs the suite.
pub async fn run(plan: &Plan) -> anyhow::Result<Report> {
    let count = plan.count_or(DEFAULT_DROPS);
    let shape = Shape::for_count(count);
    let started = Instant::now();
    let mut report = Report::new(plan.suite, plan.seed);
    // The emitter's own bound: far more than the run can write at its rate.
    let max = shape
        .rate
        .saturating_mul(plan.limit.as_secs().max(60) + 120);
    let config = json!({
        "agents": { emitting::AGENT: emitting::agent_entry(&plan.daemon_bin, shape.rate, max) },
        "limits": { "queueBytes": QUEUE_BYTES, "ringBytes": RING_BYTES },
    });
    let spec = DaemonSpec::new(plan.daemon_bin.clone(), config);
    let dir = plan.work_dir.join("drops");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let daemon = ChildDaemon::launch(&spec, &dir.join("state"), &dir.join("daemon.log")).await?;
    let client = daemon.client();
    let mut sessions = Vec::new();
    for i in 0..shape.sessions {
        match Emitting::spawn(
            &client,
            dir.join(format!("session-{i}")),
            &format!("drops-{i}"),
        )
        .await
        {
            Ok(s) => sessions.push(s),
            Err(e) => {
                teardown(daemon, &client, &sessions).await;
                return Err(e);
            }
        }
    }
    let shared = Rc::new(Shared {
        url: daemon.url().to_string(),
        token: daemon.token().to_string(),
        count,
        issued: Cell::new(0),
        started,
        cycles_until: started
            + plan
                .limit
                .saturating_sub(FINISH_RESERVE)
                .max(plan.limit / 2),
        finish_by: started + plan.limit,
        desync_turn: Semaphore::new(1),
        counts: RefCell::new(Counts::default()),
        ready: Cell::new(0),
        totals: RefCell::new(vec![None; sessions.len()]),
    });
    let clients: Vec<DropClient> = sessions
        .iter()
        .enumerate()
        .flat_map(|(s, session)| {
            (0..shape.clients_per_session).map(move |c| (s, c, session.clone()))
        })
        .enumerate()
        .map(|(i, (s, c, session))| DropClient {
            name: format!("session {s} client {c}"),
            session_index: s,
            session,
            stream: None,
            reassembly: Reassembly::new(),
            rng: Rng::new(plan.seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            finished: false,
            told: false,
        })
        .collect();
    let client_count = clients.len();
    let running = join_all(clients.into_iter().map(|c| c.run(shared.clone())));
    let coordinating = coordinate(&shared, &client, &sessions, client_count);
    let (clients, end) = tokio::join!(running, coordinating);

    let mut tally = Tally::default();
    for c in &clients {
        tally.add(&c.reassembly.tally());
    }
    let finished = clients.iter().filter(|c| c.finished).count();
    let counts = shared.counts.take();
    let drops = counts.drops();
    report.figure("drops", drops as f64, "count", Want::Equal(count as f64));
    // Every tenth drop is a desync, so from ten drops on each kind must have happened.
    let enough = if count >= 10 {
        Want::AtLeast(1.0)
    } else {
        Want::Info
    };
    report.figure("midFrameDrops", counts.mid_frame as f64, "count", enough);
    report.figure("repaintDrops", counts.repaint as f64, "count", enough);
    report.figure("desyncDrops", counts.desync as f64, "count", enough);
    if let Some(mean) = counts.cut_frame_bytes.checked_div(counts.mid_frame) {
        report.info("midFrameMeanFrameBytes", mean as f64, "bytes");
    }
    report.info("plainDrops", counts.plain as f64, "count");
    report.info("unplannedDesyncs", counts.unplanned as f64, "count");
    report.info("desyncsNotProvoked", counts.desync_missed as f64, "count");
    report.info("repaintsTooShort", counts.repaint_too_short as f64, "count");
    report.zero("bytesLost", tally.lost, "bytes");
    report.zero("bytesRepeated", tally.repeated, "bytes");
    report.zero("bytesWrong", tally.wrong, "bytes");
    report.info("gapResets", tally.gap_resets as f64, "count");
    report.info("gapBytes", tally.gap_bytes as f64, "bytes");
    report.info("bytesChecked", tally.received as f64, "bytes");
    report.zero("cycleErrors", counts.errors, "count");
    let mut resumes = counts.resumes;
    report.info("resumes", resumes.len() as f64, "count");
    report.latency("resume", &mut resumes);
    let mut desync_frames = counts.desync_frames;
    report.latency("desyncFrame", &mut desync_frames);
    report.figure(
        "clientsAtStreamEnd",
        finished as f64,
        "count",
        Want::Equal(client_count as f64),
    );
    let n = sessions.len() as f64;
    report.figure("sessionsAlive", end.alive as f64, "count", Want::Equal(n));
    report.figure(
        "screensAnswering",
        end.screens as f64,
        "count",
        Want::Equal(n),
    );
    report.info("streamBytes", end.stream_bytes as f64, "bytes");
    report.note(format!(
        "{} sessions × {} clients, each emitter at {} KiB/s; daemon queueBytes {} KiB, \
         ringBytes {} KiB",
        shape.sessions,
        shape.clients_per_session,
        shape.rate / 1024,
        QUEUE_BYTES / 1024,
        RING_BYTES / 1024
    ));
    if shared.issued.get() < count {
        report.note(format!(
            "cut short by the time limit: {} of {count} drops handed out",
            shared.issued.get()
        ));
    }
    if tally.gap_resets > 0 {
        report.note(
            "gap resets: a resume whose offset had left the ring was answered with a screen \
             replay (the documented reset), its skipped bytes counted in gapBytes",
        );
    }
    for r in &counts.resets {
        report.note(r.clone());
    }
    for f in &counts.failures {
        report.note(f.clone());
    }
    for e in &end.problems {
        report.note(e.clone());
    }
    teardown(daemon, &client, &sessions).await;
    Ok(report)
}

/// What the end of the run found.
#[derive(Debug, Default)]
struct End {
    alive: usize,
    screens: usize,
    stream_bytes: u64,
    problems: Vec<String>,
}

/// Waits for every client to be live on its final connection, checks the sessions, then
/// stops the emitters and publishes where each stream ended.
async fn coordinate(
    shared: &Shared,
    client: &atc_client::DaemonClient,
    sessions: &[Emitting],
    clients: usize,
) -> End {
    let mut end = End::default();
    while shared.ready.get() < clients && Instant::now() < shared.finish_by {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if shared.ready.get() < clients {
        end.problems.push(format!(
            "only {} of {clients} clients got back on before the limit",
            shared.ready.get()
        ));
    }
    for (i, s) in sessions.iter().enumerate() {
        let health = s.health(client).await;
        end.alive += usize::from(health.alive);
        end.screens += usize::from(health.screen);
        if s.ended_early() {
            end.problems.push(format!(
                "session {i}'s emitter reached its size bound before the drops were done"
            ));
        }
        match s.stop(client, Duration::from_secs(20)).await {
            Ok((len, _)) => {
                end.stream_bytes += len;
                if let Some(slot) = shared.totals.borrow_mut().get_mut(i) {
                    *slot = Some(len);
                }
            }
            Err(e) => end.problems.push(format!("session {i}: {e:#}")),
        }
    }
    end
}

/// Kills the sessions and stops the daemon.
async fn teardown(daemon: ChildDaemon, client: &atc_client::DaemonClient, sessions: &[Emitting]) {
    for s in sessions {
        s.kill(client).await;
    }
    if !daemon.stop_within(Duration::from_secs(15)).await {
        tracing_free_warn("the daemon did not stop within 15 s of SIGTERM and was killed");
    }
}

/// The suite has no logger; teardown trouble goes to stderr (the report is already made).
fn tracing_free_warn(text: &str) {
    eprintln!("atc-proof drops: {text}");
}

/// What one frame meant to a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Live bytes (how many).
    Live(u64),
    /// Bytes that were not live (prelude), or a frame with none.
    Quiet,
    /// `desync`: the bytes after it are a repaint, not the stream.
    Desync,
    /// `exit`, a close, or the connection ending.
    Ended,
}

/// One client of one session.
struct DropClient {
    name: String,
    session_index: usize,
    session: Emitting,
    /// The stream id, from the first `attached`.
    stream: Option<String>,
    reassembly: Reassembly,
    rng: Rng,
    /// It read its session's stream to the end.
    finished: bool,
    /// It told the coordinator it is on its final connection (or that it never will be).
    told: bool,
}

impl DropClient {
    /// Drops until there are none left, then reads to the stream's end.
    async fn run(mut self, shared: Rc<Shared>) -> DropClient {
        while let Some(number) = shared.next_drop() {
            let kind = if self.reassembly.resume_point().is_none() {
                // The first attach is plain and its live bytes start the client's stream.
                Kind::Plain
            } else {
                Kind::of(number)
            };
            match self.cycle(kind, &shared).await {
                Ok(outcome) => shared.counts.borrow_mut().record(outcome),
                Err(e) => {
                    self.reassembly.closed();
                    shared.counts.borrow_mut().fail(&self.name, &e);
                    // A failing daemon should not be hammered in a tight loop.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        if let Err(e) = self.finish(&shared).await {
            shared
                .counts
                .borrow_mut()
                .fail(&format!("{} (final)", self.name), &e);
            if !self.told {
                // It will not get back on; the coordinator need not wait for it.
                shared.ready.set(shared.ready.get() + 1);
            }
        }
        self
    }

    /// What the next attach asks for.
    fn asked(&self) -> Asked {
        match self.reassembly.resume_point() {
            Some(from) if self.stream.is_some() => Asked::Resume(from),
            _ => Asked::First,
        }
    }

    /// Opens an attach and reads to its `attached` frame; for a resume, also the latency.
    async fn open(
        &mut self,
        shared: &Shared,
        asked: Asked,
        options: Options,
    ) -> anyhow::Result<(RawWs, Duration)> {
        let resume = match asked {
            Asked::Resume(from) => self.stream.as_deref().map(|s| (s, from)),
            Asked::First | Asked::Repaint => None,
        };
        let path = self.session.attach_path(resume, false);
        let t0 = Instant::now();
        let mut ws = within(
            FRAME_WAIT,
            RawWs::connect(&shared.url, &path, &shared.token, options),
        )
        .await
        .context("opening the attach socket")?;
        loop {
            match within(FRAME_WAIT, ws.next_frame()).await? {
                Frame::Text(t) => {
                    let v: Value = serde_json::from_slice(&t).context("a text frame")?;
                    match v["type"].as_str() {
                        Some("attached") => {
                            let latency = t0.elapsed();
                            let offset = v["offset"].as_u64().context("attached.offset")?;
                            let prelude = v["prelude"].as_u64().context("attached.prelude")?;
                            let replay = v["replay"]
                                .as_str()
                                .and_then(Replay::parse)
                                .context("attached.replay")?;
                            if let Some(s) = v["stream"].as_str() {
                                self.stream = Some(s.to_string());
                            }
                            if let (Asked::Resume(from), Replay::Screen) = (asked, replay) {
                                shared.counts.borrow_mut().reset(format!(
                                    "{}: a resume from {from} was answered with a screen \
                                     replay at {offset} (the ring no longer held {} bytes \
                                     back), {latency:?} after the reconnect began",
                                    self.name,
                                    offset.saturating_sub(from)
                                ));
                            }
                            self.reassembly.attached(asked, offset, prelude, replay);
                            return Ok((ws, latency));
                        }
                        Some("error") => anyhow::bail!("attach refused: {v}"),
                        _ => anyhow::bail!("a frame before attached: {v}"),
                    }
                }
                Frame::Ping(p) => ws.pong(&p).await?,
                other => anyhow::bail!("{other:?} before attached"),
            }
        }
    }

    /// Reads one frame and takes it in.
    async fn step(&mut self, ws: &mut RawWs) -> anyhow::Result<Step> {
        let frame = match within(FRAME_WAIT, ws.next_frame()).await {
            Ok(f) => f,
            Err(e) if is_ended(&e) => return Ok(Step::Ended),
            Err(e) => return Err(e),
        };
        self.take(ws, frame).await
    }

    async fn take(&mut self, ws: &mut RawWs, frame: Frame) -> anyhow::Result<Step> {
        Ok(match frame {
            Frame::Binary(b) => match self.reassembly.binary(&b) {
                0 => Step::Quiet,
                n => Step::Live(n),
            },
            Frame::Text(t) => {
                let v: Value = serde_json::from_slice(&t).context("a text frame")?;
                match v["type"].as_str() {
                    Some("desync") => {
                        self.reassembly.closed();
                        Step::Desync
                    }
                    Some("exit") => Step::Ended,
                    Some("error") => anyhow::bail!("an error frame: {v}"),
                    _ => Step::Quiet,
                }
            }
            Frame::Ping(p) => {
                ws.pong(&p).await?;
                Step::Quiet
            }
            Frame::Close(_) => Step::Ended,
            Frame::Pong(_) | Frame::Other(_) => Step::Quiet,
        })
    }

    /// Reads until `want` live bytes came; `Some(outcome)` when a desync or the end came
    /// first (the connection is closed then).
    async fn read_live(&mut self, ws: &mut RawWs, want: u64) -> anyhow::Result<Option<Step>> {
        let mut got = 0;
        while got < want {
            match self.step(ws).await? {
                Step::Live(n) => got += n,
                Step::Quiet => {}
                s @ (Step::Desync | Step::Ended) => return Ok(Some(s)),
            }
        }
        Ok(None)
    }

    /// One drop of `kind`.
    async fn cycle(&mut self, kind: Kind, shared: &Shared) -> anyhow::Result<Outcome> {
        match kind {
            Kind::Plain => self.plain(shared).await,
            Kind::MidFrame => self.mid_frame(shared).await,
            Kind::Repaint => self.repaint(shared).await,
            Kind::Desync => self.desync(shared).await,
        }
    }

    /// Counts a resume's latency.
    fn timed(&self, shared: &Shared, asked: Asked, latency: Duration) {
        if matches!(asked, Asked::Resume(_)) {
            shared.counts.borrow_mut().resumes.push(latency);
        }
    }

    /// A desync or an end met while reading: the connection goes, and what it means.
    fn interrupted(&mut self, ws: RawWs, step: Step) -> anyhow::Result<Outcome> {
        ws.abort(true);
        self.reassembly.closed();
        match step {
            Step::Desync => Ok(Outcome::Unplanned),
            _ => anyhow::bail!("the attach socket ended while the stream was running"),
        }
    }

    async fn plain(&mut self, shared: &Shared) -> anyhow::Result<Outcome> {
        let asked = self.asked();
        let (mut ws, latency) = self.open(shared, asked, Options::default()).await?;
        self.timed(shared, asked, latency);
        let want = self.rng.between(1, 256 * 1024);
        if let Some(step) = self.read_live(&mut ws, want).await? {
            return self.interrupted(ws, step);
        }
        match self.rng.below(3) {
            0 => ws.close_clean().await,
            1 => ws.abort(false),
            _ => ws.abort(true),
        }
        self.reassembly.closed();
        Ok(Outcome::Plain)
    }

    async fn mid_frame(&mut self, shared: &Shared) -> anyhow::Result<Outcome> {
        let asked = self.asked();
        let exact = Options {
            exact: true,
            ..Options::default()
        };
        let (mut ws, latency) = self.open(shared, asked, exact).await?;
        self.timed(shared, asked, latency);
        let warm = self.rng.below(32 * 1024);
        if let Some(step) = self.read_live(&mut ws, warm).await? {
            return self.interrupted(ws, step);
        }
        let looking_until = Instant::now() + FRAME_WAIT;
        while Instant::now() < looking_until {
            let h = within(FRAME_WAIT, ws.next_header()).await?;
            if h.opcode == op::BINARY && h.len >= MID_FRAME_MIN {
                shared.counts.borrow_mut().cut_frame_bytes += h.len;
                let part = self.rng.between(1, h.len - 1);
                within(FRAME_WAIT, ws.read_into(h, part)).await?;
                ws.abort(self.rng.chance(0.5));
                self.reassembly.closed();
                return Ok(Outcome::MidFrame);
            }
            match self.step(&mut ws).await? {
                Step::Live(_) | Step::Quiet => {}
                s @ (Step::Desync | Step::Ended) => return self.interrupted(ws, s),
            }
        }
        anyhow::bail!("no binary frame of {MID_FRAME_MIN} bytes or more came in {FRAME_WAIT:?}")
    }

    async fn repaint(&mut self, shared: &Shared) -> anyhow::Result<Outcome> {
        let exact = Options {
            exact: true,
            ..Options::default()
        };
        let (mut ws, _) = self.open(shared, Asked::Repaint, exact).await?;
        let prelude = self.reassembly.prelude_left().unwrap_or(0);
        if prelude < 2 {
            ws.abort(true);
            self.reassembly.closed();
            return Ok(Outcome::RepaintTooShort);
        }
        let cut = self.rng.between(1, prelude - 1);
        loop {
            let left = self.reassembly.prelude_left().unwrap_or(0);
            let read = prelude - left;
            let h = within(FRAME_WAIT, ws.next_header()).await?;
            if h.opcode == op::BINARY && read + h.len > cut {
                within(FRAME_WAIT, ws.read_into(h, cut - read)).await?;
                ws.abort(self.rng.chance(0.5));
                self.reassembly.closed();
                return Ok(Outcome::Repaint);
            }
            match self.step(&mut ws).await? {
                Step::Live(_) | Step::Quiet => {}
                s @ (Step::Desync | Step::Ended) => return self.interrupted(ws, s),
            }
        }
    }

    async fn desync(&mut self, shared: &Shared) -> anyhow::Result<Outcome> {
        let asked = self.asked();
        let small = Options {
            recv_buffer: Some(DESYNC_RCVBUF),
            ..Options::default()
        };
        let (mut ws, latency) = self.open(shared, asked, small).await?;
        self.timed(shared, asked, latency);
        let warm = self.rng.below(64 * 1024);
        if let Some(step) = self.read_live(&mut ws, warm).await? {
            return self.interrupted(ws, step);
        }
        // Wait for the turn attached and reading: a client that waited detached would come
        // back with its offset out of the ring, a gap the suite made and not the daemon.
        let _turn = loop {
            match shared.desync_turn.try_acquire() {
                Ok(turn) => break turn,
                // Closed semaphores only come from `close()`, which nothing calls.
                Err(tokio::sync::TryAcquireError::Closed) => {
                    anyhow::bail!("the desync turn is closed")
                }
                Err(tokio::sync::TryAcquireError::NoPermits) => match self.step(&mut ws).await? {
                    Step::Live(_) | Step::Quiet => {}
                    s @ (Step::Desync | Step::Ended) => return self.interrupted(ws, s),
                },
            }
        };
        let before = desyncs(shared).await?;
        let stopped = Instant::now();
        let provoked = loop {
            tokio::time::sleep(Duration::from_millis(25)).await;
            if desyncs(shared).await? > before {
                break true;
            }
            if stopped.elapsed() > DESYNC_WAIT {
                break false;
            }
        };
        // Read the backlog up to the desync frame (it comes once the backlog has drained).
        let counted = Instant::now();
        let reading_until = counted + DESYNC_WAIT;
        while provoked && Instant::now() < reading_until {
            match self.step(&mut ws).await? {
                Step::Live(_) | Step::Quiet => {}
                Step::Desync => {
                    shared
                        .counts
                        .borrow_mut()
                        .desync_frames
                        .push(counted.elapsed());
                    ws.abort(true);
                    self.reassembly.closed();
                    return Ok(Outcome::Desync);
                }
                Step::Ended => anyhow::bail!("the socket ended before its desync frame"),
            }
        }
        ws.abort(true);
        self.reassembly.closed();
        Ok(Outcome::DesyncMissed)
    }

    /// The last connection: resume, tell the coordinator, read to the stream's end.
    async fn finish(&mut self, shared: &Shared) -> anyhow::Result<()> {
        while Instant::now() < shared.finish_by {
            let asked = self.asked();
            let (mut ws, latency) = self.open(shared, asked, Options::default()).await?;
            self.timed(shared, asked, latency);
            if !self.told {
                self.told = true;
                shared.ready.set(shared.ready.get() + 1);
            }
            loop {
                let total = shared
                    .totals
                    .borrow()
                    .get(self.session_index)
                    .copied()
                    .flatten();
                if let Some(total) = total {
                    if self.reassembly.next() >= total {
                        ws.close_clean().await;
                        self.reassembly.closed();
                        self.reassembly.finish(total);
                        self.finished = true;
                        return Ok(());
                    }
                }
                if Instant::now() >= shared.finish_by {
                    break;
                }
                // Short waits, so a stream that already ended is noticed without a frame.
                let frame =
                    match tokio::time::timeout(Duration::from_millis(100), ws.next_frame()).await {
                        Err(_) => continue,
                        Ok(Ok(f)) => f,
                        Ok(Err(WsError::Ended)) => break,
                        Ok(Err(e)) => return Err(e.into()),
                    };
                match self.take(&mut ws, frame).await? {
                    Step::Live(_) | Step::Quiet => {}
                    Step::Desync | Step::Ended => break,
                }
            }
            ws.abort(true);
            self.reassembly.closed();
        }
        if let Some(total) = shared
            .totals
            .borrow()
            .get(self.session_index)
            .copied()
            .flatten()
        {
            self.reassembly.finish(total);
        }
        anyhow::bail!("did not reach the stream's end before the limit")
    }
}

/// `fut`, or an error naming the wait once `limit` passes.
async fn within<T, E>(
    limit: Duration,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> anyhow::Result<T>
where
    E: Into<anyhow::Error>,
{
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r.map_err(Into::into),
        Err(_) => anyhow::bail!("nothing came within {limit:?}"),
    }
}

/// Whether an error is the connection ending (which a step reports as [`Step::Ended`]).
fn is_ended(e: &anyhow::Error) -> bool {
    matches!(e.downcast_ref::<WsError>(), Some(WsError::Ended))
}

/// The daemon's count of clients that began missing output.
async fn desyncs(shared: &Shared) -> anyhow::Result<u64> {
    crate::metrics::counter(&shared.url, &shared.token, "atc_client_desyncs_total").await
}
