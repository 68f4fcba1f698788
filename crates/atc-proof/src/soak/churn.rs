//! The churn across the held fleet while it is held: clients attaching for a few seconds,
//! reading, resizing and detaching; echo round trips typed into `cat` sessions; `GET
//! /v1/sessions` once a second; kill + respawn at a steady rate so the fleet turns over; and
//! the sampler. Each is a loop that ends by itself at the hold's end; they all run as futures
//! of one task on the suite's thread and share a [`Tally`] of what happened.
//!
//! What counts as an error: any refused or failed call, an attach that breaks, an echo that
//! does not come back within [`ECHO_LIMIT`], a ticker whose attached client sees no output for
//! [`SILENCE_LIMIT`]. A session the soak did not end that is seen dead or missing is lost.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::time::Duration;

use atc_client::DaemonClient;
use atc_protocol::{AttachFrame, SessionId};
use bytes::Bytes;
use tokio::time::Instant;

use super::attach::{Attach, Event};
use super::fleet::{end_one, Fleet, Kind, Member};
use super::sample::{Probe, Sample};
use crate::rng::Rng;

/// Longest an echo may take before it counts as lost.
const ECHO_LIMIT: Duration = Duration::from_secs(10);

/// Longest an attached ticker client may go without output (tickers print 4 times a second).
const SILENCE_LIMIT: Duration = Duration::from_secs(5);

/// Round trips an echo client types before moving to another session.
const TRIPS_PER_ATTACH: u32 = 20;

/// Pause between round trips, so the echo clients measure latency rather than saturate.
const TRIP_PAUSE: Duration = Duration::from_millis(100);

/// How often the list worker times `GET /v1/sessions`.
const LIST_EVERY: Duration = Duration::from_secs(1);

/// Pause after a failed attach before the next try.
const ERROR_PAUSE: Duration = Duration::from_millis(200);

/// Errors kept in full for the notes.
const ERRORS_KEPT: usize = 10;

/// What the churn did, and what it measured, as it goes.
#[derive(Default)]
pub struct Tally {
    errors: Cell<u64>,
    first_errors: RefCell<Vec<String>>,
    lost: RefCell<HashSet<SessionId>>,
    pub attaches: Cell<u64>,
    pub resizes: Cell<u64>,
    pub resized_frames: Cell<u64>,
    pub desyncs: Cell<u64>,
    pub echo_trips: Cell<u64>,
    pub lists: Cell<u64>,
    pub turnovers: Cell<u64>,
    pub live_bytes: Cell<u64>,
    /// `(seconds since the hold began, latency)` of each kind.
    pub spawn: RefCell<Vec<(f64, Duration)>>,
    pub echo: RefCell<Vec<(f64, Duration)>>,
    pub list: RefCell<Vec<(f64, Duration)>>,
    pub samples: RefCell<Vec<Sample>>,
}

impl Tally {
    /// Counts an error and keeps the first few.
    pub fn error(&self, what: impl Into<String>) {
        self.errors.set(self.errors.get() + 1);
        let mut kept = self.first_errors.borrow_mut();
        if kept.len() < ERRORS_KEPT {
            kept.push(what.into());
        }
    }

    pub fn errors(&self) -> u64 {
        self.errors.get()
    }

    pub fn first_errors(&self) -> Vec<String> {
        self.first_errors.borrow().clone()
    }

    /// Counts `id` lost (once however often it is seen so).
    pub fn lost(&self, id: SessionId, how: &str) {
        if self.lost.borrow_mut().insert(id) {
            self.error(format!("session {id} lost: {how}"));
        }
    }

    pub fn lost_count(&self) -> u64 {
        self.lost.borrow().len() as u64
    }

    fn bump(c: &Cell<u64>) {
        c.set(c.get() + 1);
    }
}

/// What every worker shares.
pub struct Ctx<'a> {
    pub client: &'a DaemonClient,
    pub fleet: &'a Fleet,
    pub tally: &'a Tally,
    pub probe: &'a Probe,
    /// The hold's start: sample times are seconds since it.
    pub start: Instant,
    /// The hold's end: every loop stops there.
    pub end: Instant,
    pub seed: u64,
}

impl Ctx<'_> {
    fn now_secs(&self) -> f64 {
        Instant::now()
            .saturating_duration_since(self.start)
            .as_secs_f64()
            - self
                .start
                .saturating_duration_since(Instant::now())
                .as_secs_f64()
    }

    fn over(&self) -> bool {
        Instant::now() >= self.end
    }

    /// Sleeps `d`, or until the hold ends; false when it has.
    async fn pause(&self, d: Duration) -> bool {
        tokio::time::sleep_until(self.end.min(Instant::now() + d)).await;
        !self.over()
    }
}

/// How many of each worker, and how often the fleet turns over.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub attach_slots: u32,
    pub echo_clients: u32,
    /// Time between two kill + respawns.
    pub turnover_every: Duration,
    pub sample_every: Duration,
}

impl Rates {
    /// For `n` sessions held `hold`: an attach slot per 40 sessions (2 to 100), an echo client
    /// per 500 (1 to 8), and 15 % of the fleet (at least 10) turned over in the hold.
    pub fn for_fleet(n: u64, hold: Duration, sample_every: Duration) -> Rates {
        let turnovers = (n * 15 / 100).max(10);
        Rates {
            attach_slots: (n / 40).clamp(2, 100) as u32,
            echo_clients: (n / 500).clamp(1, 8) as u32,
            turnover_every: hold.div_f64(turnovers as f64),
            sample_every,
        }
    }
}

/// A kind of churn, as `--churn` names it (all of them by default). Leaving some out splits
/// a growth the full churn shows into the parts that cause it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ChurnKind {
    /// Clients attaching, reading, resizing and detaching.
    Attach,
    /// Echo round trips typed into `cat`s.
    Echo,
    /// `GET /v1/sessions` once a second, timed.
    List,
    /// Kill + respawn.
    Turnover,
}

impl ChurnKind {
    /// Every kind.
    pub const ALL: [ChurnKind; 4] = [
        ChurnKind::Attach,
        ChurnKind::Echo,
        ChurnKind::List,
        ChurnKind::Turnover,
    ];
}

/// Runs the workers of the `kinds` asked for, and the sampler, until the hold ends.
pub async fn run(cx: &Ctx<'_>, rates: Rates, kinds: &[ChurnKind]) {
    let on = |k: ChurnKind| kinds.contains(&k);
    let count = |k: ChurnKind, n: u32| if on(k) { n } else { 0 };
    let attach = futures_util::future::join_all(
        (0..count(ChurnKind::Attach, rates.attach_slots))
            .map(|slot| attach_loop(cx, u64::from(slot))),
    );
    let echo = futures_util::future::join_all(
        (0..count(ChurnKind::Echo, rates.echo_clients))
            .map(|k| echo_loop(cx, k, rates.echo_clients)),
    );
    let list = async {
        if on(ChurnKind::List) {
            list_loop(cx).await;
        }
    };
    let turnover = async {
        if on(ChurnKind::Turnover) {
            turnover_loop(cx, rates.turnover_every).await;
        }
    };
    tokio::join!(
        attach,
        echo,
        list,
        turnover,
        sample_loop(cx, rates.sample_every)
    );
}

/// A client that attaches to a random session (a ticker every other time) for 1–8 s, reads, resizes once at a random
/// moment, and detaches; again and again.
async fn attach_loop(cx: &Ctx<'_>, slot: u64) {
    let mut rng = Rng::new(cx.seed ^ (0xa77a_c400 + slot));
    while !cx.over() {
        // Half the attaches go to tickers, so live output reaches clients as well as rings.
        let kind = rng.chance(0.5).then_some(Kind::Ticker);
        let Some(member) = cx.fleet.pick(&mut rng, kind) else {
            if !cx.pause(Duration::from_millis(100)).await {
                return;
            }
            continue;
        };
        let (cols, rows) = random_size(&mut rng);
        let mut attach = match Attach::open(cx.client, member.id, cols, rows).await {
            Ok(a) => a,
            Err(e) => {
                if !cx.fleet.is_retired(member.id) {
                    cx.tally.error(format!("attach to {}: {e}", member.id));
                }
                // A daemon that refuses every attach must not be hammered in a tight loop.
                cx.pause(ERROR_PAUSE).await;
                continue;
            }
        };
        Tally::bump(&cx.tally.attaches);
        let held = Duration::from_millis(rng.between(1000, 8000));
        let leave = cx.end.min(Instant::now() + held);
        let resize_at = Instant::now() + held.mul_f64(rng.between(10, 90) as f64 / 100.0);
        let mut resized = false;
        let mut last_output = Instant::now();
        loop {
            let wake = if resized { leave } else { leave.min(resize_at) };
            let event = tokio::time::timeout_at(wake, attach.next()).await;
            match event {
                Err(_) if Instant::now() >= leave => break,
                Err(_) => {
                    resized = true;
                    let (cols, rows) = random_size(&mut rng);
                    match attach.resize(cols, rows).await {
                        Ok(()) => Tally::bump(&cx.tally.resizes),
                        Err(e) => cx.tally.error(format!("resize of {}: {e}", member.id)),
                    }
                }
                Ok(Ok(Event::Live(bytes))) => {
                    last_output = Instant::now();
                    cx.tally
                        .live_bytes
                        .set(cx.tally.live_bytes.get() + bytes.len() as u64);
                }
                Ok(Ok(Event::Frame(frame))) => {
                    if !on_frame(cx, member, &frame) {
                        break;
                    }
                }
                Ok(Ok(Event::Closed(why))) => {
                    if !cx.fleet.is_retired(member.id) {
                        cx.tally
                            .error(format!("attach socket of {} {why}", member.id));
                    }
                    break;
                }
                Ok(Err(e)) => {
                    if !cx.fleet.is_retired(member.id) {
                        cx.tally
                            .error(format!("attach socket of {}: {e}", member.id));
                    }
                    break;
                }
            }
            if member.kind == Kind::Ticker
                && last_output.elapsed() > SILENCE_LIMIT
                && !cx.fleet.is_retired(member.id)
            {
                cx.tally.error(format!(
                    "ticker {} printed nothing for {SILENCE_LIMIT:?} while attached",
                    member.id
                ));
                break;
            }
        }
        attach.close().await;
    }
}

/// Handles a text frame on a churn client; false when the socket is done.
fn on_frame(cx: &Ctx<'_>, member: Member, frame: &AttachFrame) -> bool {
    match frame {
        AttachFrame::Resized { .. } => Tally::bump(&cx.tally.resized_frames),
        AttachFrame::Desync { .. } => Tally::bump(&cx.tally.desyncs),
        AttachFrame::Exit { reason, detail, .. } => {
            if !cx.fleet.is_retired(member.id) {
                cx.tally
                    .lost(member.id, &format!("exited ({reason:?}) {detail}"));
            }
            return false;
        }
        AttachFrame::Error { code, message } => {
            cx.tally
                .error(format!("error frame on {}: {code:?}: {message}", member.id));
        }
        AttachFrame::Attached { .. }
        | AttachFrame::Resynced { .. }
        | AttachFrame::State { .. }
        | AttachFrame::Attachment { .. } => {}
    }
    true
}

/// The sizes [`random_size`] draws from: columns and rows, each inclusive.
const COLS: (u16, u16) = (80, 160);
/// See [`COLS`].
const ROWS: (u16, u16) = (24, 50);

/// A client size: 80–160 columns, 24–50 rows.
fn random_size(rng: &mut Rng) -> (u16, u16) {
    (
        rng.between(u64::from(COLS.0), u64::from(COLS.1)) as u16,
        rng.between(u64::from(ROWS.0), u64::from(ROWS.1)) as u16,
    )
}

/// Uses a session once the way the churn will: attached at the widest width the churn asks
/// for and a random height, with output on its screen (an echo typed into a `cat`; a ticker
/// prints by itself).
///
/// A session's screen is allocated on its first output, and each of its rows keeps the
/// widest width it was given (vt100 truncates a row without giving memory back). So the
/// first use of a session costs memory once, and so does its first widening: the soak
/// primes every session before the hold, and every respawned one at once, so that the steady
/// state measures growth rather than first uses spread over the hold. Heights stay random,
/// since rows a shrink drops are freed and a later grow makes them again.
pub async fn prime(client: &DaemonClient, member: Member, rng: &mut Rng) -> Result<(), String> {
    let rows = rng.between(u64::from(ROWS.0), u64::from(ROWS.1)) as u16;
    let mut attach = Attach::open(client, member.id, COLS.1, rows)
        .await
        .map_err(|e| format!("priming {}: {e}", member.id))?;
    let deadline = Instant::now() + ECHO_LIMIT;
    let wanted = match member.kind {
        Kind::Quiet => {
            attach
                .input(Bytes::from_static(b"=\r"))
                .await
                .map_err(|e| format!("priming {}: {e}", member.id))?;
            Some(b'=')
        }
        Kind::Ticker => None,
    };
    let outcome = loop {
        match tokio::time::timeout_at(deadline, attach.next()).await {
            Err(_) => {
                break Err(format!(
                    "priming {}: no output in {ECHO_LIMIT:?}",
                    member.id
                ))
            }
            Ok(Ok(Event::Live(bytes))) => {
                if wanted.is_none_or(|b| bytes.contains(&b)) {
                    break Ok(());
                }
            }
            Ok(Ok(Event::Frame(_))) => {}
            Ok(Ok(Event::Closed(why))) => break Err(format!("priming {}: {why}", member.id)),
            Ok(Err(e)) => break Err(format!("priming {}: {e}", member.id)),
        }
    };
    attach.close().await;
    outcome
}

/// Echo client `k` of `of`: attaches to one of its share of the `cat` sessions (ids ≡ k mod
/// `of`, so two echo clients never type into one session), times [`TRIPS_PER_ATTACH`] round
/// trips, detaches, and moves on.
async fn echo_loop(cx: &Ctx<'_>, k: u32, of: u32) {
    let mut rng = Rng::new(cx.seed ^ (0xec40_0000 + u64::from(k)));
    let mut next_byte = 0u8;
    while !cx.over() {
        let mine = (0..32)
            .filter_map(|_| cx.fleet.pick(&mut rng, Some(Kind::Quiet)))
            .find(|m| (m.id.as_uuid().as_u128() % u128::from(of)) as u32 == k);
        let Some(member) = mine else {
            if !cx.pause(Duration::from_millis(100)).await {
                return;
            }
            continue;
        };
        let mut attach = match Attach::open(cx.client, member.id, 80, 24).await {
            Ok(a) => a,
            Err(e) => {
                if !cx.fleet.is_retired(member.id) {
                    cx.tally.error(format!("echo attach to {}: {e}", member.id));
                }
                cx.pause(ERROR_PAUSE).await;
                continue;
            }
        };
        for _ in 0..TRIPS_PER_ATTACH {
            if cx.over() {
                break;
            }
            // a..z in turn: the one awaited is never the one before it, whose copy from
            // `cat` (after the line's end) may still be on its way.
            let byte = b'a' + next_byte % 26;
            next_byte = next_byte.wrapping_add(1);
            match round_trip(cx, member, &mut attach, byte).await {
                Ok(Some(rtt)) => {
                    Tally::bump(&cx.tally.echo_trips);
                    cx.tally.echo.borrow_mut().push((cx.now_secs(), rtt));
                }
                Ok(None) => break,
                Err(e) => {
                    if !cx.fleet.is_retired(member.id) {
                        cx.tally.error(e);
                    }
                    break;
                }
            }
            if !cx.pause(TRIP_PAUSE).await {
                break;
            }
        }
        attach.close().await;
    }
}

/// Types `byte` and Enter into a `cat` and waits for the terminal's echo of `byte`; `None`
/// when the session ended because the soak ended it.
async fn round_trip(
    cx: &Ctx<'_>,
    member: Member,
    attach: &mut Attach,
    byte: u8,
) -> Result<Option<Duration>, String> {
    let sent = Instant::now();
    attach
        .input(Bytes::from(vec![byte, b'\r']))
        .await
        .map_err(|e| format!("echo input to {}: {e}", member.id))?;
    let deadline = sent + ECHO_LIMIT;
    loop {
        let event = tokio::time::timeout_at(deadline, attach.next())
            .await
            .map_err(|_| {
                format!(
                    "echo of {:?} from {} not back in {ECHO_LIMIT:?}",
                    byte as char, member.id
                )
            })?
            .map_err(|e| format!("echo socket of {}: {e}", member.id))?;
        match event {
            Event::Live(bytes) => {
                if bytes.contains(&byte) {
                    return Ok(Some(sent.elapsed()));
                }
            }
            Event::Frame(frame) => {
                if !on_frame(cx, member, &frame) {
                    return Ok(None);
                }
            }
            Event::Closed(why) => {
                if cx.fleet.is_retired(member.id) {
                    return Ok(None);
                }
                return Err(format!("echo socket of {} {why}", member.id));
            }
        }
    }
}

/// Times `GET /v1/sessions` every [`LIST_EVERY`].
async fn list_loop(cx: &Ctx<'_>) {
    while !cx.over() {
        let sent = Instant::now();
        match cx.client.list_sessions().await {
            Ok(_) => {
                Tally::bump(&cx.tally.lists);
                cx.tally
                    .list
                    .borrow_mut()
                    .push((cx.now_secs(), sent.elapsed()));
            }
            Err(e) => cx.tally.error(format!("GET /v1/sessions: {e}")),
        }
        if !cx.pause(LIST_EVERY.saturating_sub(sent.elapsed())).await {
            return;
        }
    }
}

/// Every `every`, ends a random held session (kill, wait for it to go, forget) and spawns
/// one of the same kind in its place, primed like the rest.
async fn turnover_loop(cx: &Ctx<'_>, every: Duration) {
    let mut rng = Rng::new(cx.seed ^ 0x7e57_0e55);
    let mut next = Instant::now() + every;
    loop {
        tokio::time::sleep_until(next.min(cx.end)).await;
        if cx.over() {
            return;
        }
        next += every;
        let Some(member) = cx.fleet.pick(&mut rng, None) else {
            continue;
        };
        cx.fleet.start_turning(member);
        let ended = end_one(cx.client, member.id).await;
        cx.fleet.retire(member);
        if let Err(e) = ended {
            cx.tally.error(format!("turnover: {e}"));
        }
        match cx.fleet.spawn(cx.client, member.kind).await {
            Ok((fresh, latency)) => {
                Tally::bump(&cx.tally.turnovers);
                cx.tally.spawn.borrow_mut().push((cx.now_secs(), latency));
                if let Err(e) = prime(cx.client, fresh, &mut rng).await {
                    if !cx.fleet.is_retired(fresh.id) {
                        cx.tally.error(e);
                    }
                }
            }
            Err(e) => cx.tally.error(format!("turnover spawn: {e}")),
        }
    }
}

/// Every `every` (and once at the very end), a reading and a census of the held sessions.
async fn sample_loop(cx: &Ctx<'_>, every: Duration) {
    let mut next = Instant::now();
    loop {
        take_sample(cx).await;
        if cx.over() {
            return;
        }
        next += every;
        tokio::time::sleep_until(next.min(cx.end)).await;
    }
}

/// One reading with its census; held sessions missing or dead in the listing are lost.
pub async fn take_sample(cx: &Ctx<'_>) {
    let mut sample = cx.probe.read(cx.now_secs());
    // The held set before the listing is asked for: a session spawned while the answer is on
    // its way is not in it yet, and must not count as missing.
    let held = cx.fleet.members();
    match cx.client.list_sessions().await {
        Ok(listed) => {
            let alive: HashMap<SessionId, bool> = listed.iter().map(|d| (d.id, d.alive)).collect();
            sample.held = held.len();
            for m in &held {
                match alive.get(&m.id) {
                    Some(true) => sample.alive += 1,
                    _ if cx.fleet.is_retired(m.id) => {}
                    Some(false) => cx.tally.lost(m.id, "listed dead"),
                    None => cx.tally.lost(m.id, "not listed"),
                }
            }
        }
        Err(e) => cx
            .tally
            .error(format!("GET /v1/sessions for a sample: {e}")),
    }
    // The hold is minutes long: every sample is also a progress line on stderr.
    eprintln!(
        "atc-proof soak: {:.0} s held, {} of {} sessions alive, RSS {} KiB, {} fds",
        sample.t_secs,
        sample.alive,
        sample.held,
        sample.rss_kib.map_or("?".into(), |k| k.to_string()),
        sample.fds.map_or("?".into(), |f| f.to_string()),
    );
    cx.tally.samples.borrow_mut().push(sample);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_follow_the_fleet() {
        let r = Rates::for_fleet(4000, Duration::from_secs(600), Duration::from_secs(10));
        assert_eq!(r.attach_slots, 100);
        assert_eq!(r.echo_clients, 8);
        assert_eq!(r.turnover_every, Duration::from_secs(1));
        let r = Rates::for_fleet(50, Duration::from_secs(20), Duration::from_secs(2));
        assert_eq!((r.attach_slots, r.echo_clients), (2, 1));
        assert_eq!(r.turnover_every, Duration::from_secs(2));
    }

    #[test]
    fn errors_are_counted_all_and_kept_few() {
        let t = Tally::default();
        for i in 0..25 {
            t.error(format!("e{i}"));
        }
        assert_eq!(t.errors(), 25);
        assert_eq!(t.first_errors().len(), ERRORS_KEPT);
        let id = SessionId::from(uuid::Uuid::from_u128(7));
        t.lost(id, "gone");
        t.lost(id, "gone again");
        assert_eq!(t.lost_count(), 1);
        assert_eq!(t.errors(), 26);
    }
}
