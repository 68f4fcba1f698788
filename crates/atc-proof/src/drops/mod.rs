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
//! stream's end. [`Reassembly`](crate::reassembly::Reassembly) says what each one lost, saw
//! twice or saw wrong.
//!
//! This module runs the suite (the daemon, the sessions, the counts, the figures); `client`
//! is one client's loop of drops.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures_util::future::join_all;
use serde_json::json;
use tokio::sync::Semaphore;

use crate::emitting::{self, Emitting};
use crate::reassembly::Tally;
use crate::rng::Rng;
use crate::{Plan, Report, Want};
use atc_testkit::{ChildDaemon, DaemonSpec};

mod client;

use client::DropClient;

/// The figure.
const DEFAULT_DROPS: u64 = 1000;

/// The daemon's per-client queue. Larger than the ring, so a resume's tail (at most the ring)
/// always fits in a fresh client's queue; a resume is only reset when its offset is out of
/// the ring.
const QUEUE_BYTES: u64 = 1536 * 1024;

/// The daemon's per-session ring (its default).
const RING_BYTES: u64 = 1024 * 1024;

/// Time kept back from the limit for the final resumes and the stream's end.
const FINISH_RESERVE: Duration = Duration::from_secs(60);

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
        .map(|(i, (s, c, session))| {
            DropClient::new(
                format!("session {s} client {c}"),
                s,
                session,
                Rng::new(plan.seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            )
        })
        .collect();
    let client_count = clients.len();
    let running = join_all(clients.into_iter().map(|c| c.run(shared.clone())));
    let coordinating = coordinate(&shared, &client, &sessions, client_count);
    let (clients, end) = tokio::join!(running, coordinating);

    let mut tally = Tally::default();
    for c in &clients {
        tally.add(&c.reassembly().tally());
    }
    let finished = clients.iter().filter(|c| c.finished()).count();
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
