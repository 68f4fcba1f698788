//! One client of the `drops` suite: it attaches, reads, and drops its connection the way its
//! drop's [`Kind`] says (a clean close, a FIN or a reset between frames or inside one, a
//! repaint cut short, a desync), resumes by stream and offset, and at the end reads its
//! session's stream to the end; its [`Reassembly`] says what it lost, saw twice or saw wrong.

use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::Value;

use super::{Kind, Outcome, Shared};
use crate::emitting::Emitting;
use crate::rawws::{op, Frame, Options, RawWs, WsError};
use crate::reassembly::{Asked, Reassembly, Replay};
use crate::rng::Rng;

/// Longest wait for any one frame; the daemon sends output all the time, so a socket this
/// quiet is stuck.
const FRAME_WAIT: Duration = Duration::from_secs(15);

/// Longest wait for a stopped client to be counted as overflowed.
const DESYNC_WAIT: Duration = Duration::from_secs(30);

/// A desync client's receive buffer: small, so the daemon's queue is what fills.
const DESYNC_RCVBUF: u32 = 16 * 1024;

/// A mid-frame drop cuts into a binary frame at least this large (the PTY reads of a steady
/// stream are a few KiB; resume tails and repaints are larger).
const MID_FRAME_MIN: u64 = 1024;

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
pub(super) struct DropClient {
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
    /// Client `name` of session number `session_index`, its random moments from `rng`.
    pub(super) fn new(
        name: String,
        session_index: usize,
        session: Emitting,
        rng: Rng,
    ) -> DropClient {
        DropClient {
            name,
            session_index,
            session,
            stream: None,
            reassembly: Reassembly::new(),
            rng,
            finished: false,
            told: false,
        }
    }

    /// What it lost, saw twice or saw wrong.
    pub(super) fn reassembly(&self) -> &Reassembly {
        &self.reassembly
    }

    /// Whether it read its session's stream to the end.
    pub(super) fn finished(&self) -> bool {
        self.finished
    }

    /// Drops until there are none left, then reads to the stream's end.
    pub(super) async fn run(mut self, shared: Rc<Shared>) -> DropClient {
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
