//! Client delivery for one session: the output ring with its stream id and offsets, and the
//! attached clients, each with its bounded queue, its size and its [`ClientDelivery`]. It
//! decides what each client is sent and in which order (a fresh attach's repaint, a resume's
//! tail, a desync and its resync, the exit and the close) and which size the clients agree
//! on. Invariant: offsets only grow, across revives too: the ring and the stream id outlive
//! every process, so a client resumes after a revive from where it was.
//!
//! Plain state: the session actor asks the screen worker for snapshots, runs the resize
//! debounce timer and applies sizes; this module never touches an actor.

use std::collections::HashMap;

use bytes::Bytes;
use uuid::Uuid;

use super::client_delivery::{ClientDelivery, Opening};
use crate::metrics::{Held, Metrics};
use crate::sessions::client_queue::{ClientQueue, Outgoing};
use crate::sessions::messages::{AttachMode, ClientId, ResumeFrom};
use crate::sessions::reach::Reach;
use crate::sessions::ring::OutputRing;
use crate::sessions::screen_worker::Snapshot;
use atc_protocol::{AttachFrame, Descriptor, SessionId, TermSize};
use std::sync::Arc;

/// One attached client. Everything the session sends it goes through `delivery`, which
/// keeps `attached` (or `resynced` and its repaint) ahead of anything else.
struct ClientSlot {
    queue: ClientQueue,
    /// The size it reported; always `None` for a watcher, whose size never counts.
    size: Option<TermSize>,
    mode: AttachMode,
    delivery: ClientDelivery,
    /// What the principal it attached as reaches (`None`: the owner).
    reach: Option<Arc<Reach>>,
    /// Its unit of the attached-clients gauge, given back with the slot.
    _attached: Held,
}

/// A client being attached: its queue, the size it reported, and whether it types.
pub struct Newcomer {
    /// Its outbound queue.
    pub queue: ClientQueue,
    /// The size it reported, if any (kept only if it counts, see [`counted_size`]).
    pub size: Option<TermSize>,
    /// Whether it types or only watches.
    pub mode: AttachMode,
    /// What the principal it attaches as reaches (`None`: the owner).
    pub reach: Option<Arc<Reach>>,
}

/// How a newly attached client gets its opening.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    /// Resumed from the ring: its `attached` and tail are queued already.
    Resumed,
    /// It waits for a screen snapshot; hand it to [`Clients::finish_repaint`].
    NeedsRepaint,
}

/// The output stream and the clients attached to it.
pub struct Clients {
    stream: String,
    ring: OutputRing,
    slots: HashMap<ClientId, ClientSlot>,
    /// Where attached clients, desyncs and dropped bytes are counted.
    metrics: Metrics,
}

/// The size the clients agree on, to apply when the resize debounce fires: the smallest of
/// every client's size (spec §3.6), or `None` when there is nothing to change (no client
/// gave a size, or it is the size the session has).
pub fn size_to_apply(
    sizes: impl IntoIterator<Item = TermSize>,
    current: TermSize,
) -> Option<TermSize> {
    sizes
        .into_iter()
        .reduce(TermSize::min)
        .filter(|s| *s != current)
}

/// The size a client with `mode` adds to the minimum: a watcher's never counts, so a phone
/// watching a session cannot shrink the terminal of the person typing into it.
pub fn counted_size(mode: AttachMode, size: Option<TermSize>) -> Option<TermSize> {
    match mode {
        AttachMode::Interactive => size,
        AttachMode::Watch => None,
    }
}

impl Clients {
    /// A new stream (a fresh id, offsets from 0) holding the last `ring_bytes` of output.
    pub fn new(ring_bytes: usize, metrics: Metrics) -> Clients {
        Clients {
            stream: Uuid::new_v4().simple().to_string()[..12].to_string(),
            ring: OutputRing::new(ring_bytes),
            slots: HashMap::new(),
            metrics,
        }
    }

    /// Counts output clients missed: `desyncs` clients began dropping, and `bytes` were
    /// dropped in all (added once, not per client).
    fn count_missed(&self, bytes: u64, desyncs: usize) {
        for _ in 0..desyncs {
            self.metrics.client_desynced();
        }
        if bytes > 0 {
            self.metrics
                .client_dropped(usize::try_from(bytes).unwrap_or(usize::MAX));
        }
    }

    /// The stream id clients resume on.
    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// The offset the next output byte gets.
    #[cfg(test)]
    fn end(&self) -> u64 {
        self.ring.end()
    }

    /// The smallest size of the clients that still count; `None` when none gave one.
    pub fn effective_size(&self) -> Option<TermSize> {
        self.sizes().reduce(TermSize::min)
    }

    /// What the debounce applies now that it fired: see [`size_to_apply`].
    pub fn size_to_apply(&self, current: TermSize) -> Option<TermSize> {
        size_to_apply(self.sizes(), current)
    }

    fn sizes(&self) -> impl Iterator<Item = TermSize> + '_ {
        self.slots
            .values()
            // A client closed by an exit only waits for its repaint; its size is history.
            .filter(|c| !c.delivery.is_closed())
            .filter_map(|c| c.size)
    }

    /// The size an attach applies before its replay (spec §3.6): the newcomer counts at once.
    pub fn size_on_attach(&self, newcomer: Option<TermSize>) -> Option<TermSize> {
        self.effective_size()
            .into_iter()
            .chain(newcomer)
            .reduce(TermSize::min)
    }

    /// Where a resume starts: only on this stream, and only while the ring still holds it.
    pub fn resume_point(&self, resume: Option<&ResumeFrom>) -> Option<u64> {
        resume
            .filter(|r| r.stream == self.stream)
            .map(|r| r.from)
            .filter(|from| self.ring.holds(*from))
    }

    /// A client's size changed. `false`: no such client, or a watcher (nothing to debounce).
    pub fn resized(&mut self, client: ClientId, size: TermSize) -> bool {
        match self.slots.get_mut(&client) {
            Some(slot) if slot.mode == AttachMode::Interactive => {
                slot.size = Some(size);
                true
            }
            Some(_) | None => false,
        }
    }

    /// A client left. `true` when it was attached (its size no longer counts).
    pub fn detach(&mut self, client: ClientId) -> bool {
        self.slots.remove(&client).is_some()
    }

    /// A text frame for every client, at the current offset.
    pub fn broadcast(&mut self, frame: &AttachFrame) {
        let text = frame.to_text();
        let at = self.ring.end();
        for c in self.slots.values_mut() {
            c.delivery.text(&c.queue, text.clone(), at);
        }
    }

    /// Output the process wrote: into the ring, and to every live client.
    pub fn output(&mut self, bytes: &Bytes) {
        self.ring.push(bytes);
        let (mut dropped, mut desyncs) = (0, 0);
        for slot in self.slots.values_mut() {
            let missed = slot.delivery.output(&slot.queue, bytes);
            dropped += missed.bytes;
            desyncs += usize::from(missed.began);
        }
        if dropped > 0 {
            self.count_missed(dropped, desyncs);
        }
    }

    /// Registers `client`, pending until its opening is out; anything meanwhile is held for
    /// it. A resume (from [`Clients::resume_point`]) opens it at once with `attached` at
    /// `size` and the ring's tail; otherwise it waits for a repaint.
    pub fn attach(
        &mut self,
        client: ClientId,
        newcomer: Newcomer,
        resume_from: Option<u64>,
        session: SessionId,
        current: TermSize,
    ) -> Opened {
        let Newcomer {
            queue,
            size,
            mode,
            reach,
        } = newcomer;
        let mut slot = ClientSlot {
            queue,
            size: counted_size(mode, size),
            mode,
            delivery: ClientDelivery::pending(Opening::Attach),
            reach,
            _attached: self.metrics.attached_client(),
        };
        let opened = match resume_from {
            Some(from) => {
                let attached = AttachFrame::Attached {
                    session,
                    stream: self.stream.clone(),
                    cols: current.cols,
                    rows: current.rows,
                    offset: from,
                    prelude: 0,
                    replay: atc_protocol::Replay::Resume,
                }
                .to_text();
                let tail = Bytes::from(self.ring.since(from).unwrap_or_default());
                slot.delivery
                    .open(&slot.queue, vec![attached], None, from, tail);
                Opened::Resumed
            }
            None => Opened::NeedsRepaint,
        };
        self.slots.insert(client, slot);
        opened
    }

    /// A client's backlog drained after an overflow. `true`: it now waits for a repaint.
    pub fn start_resync(&mut self, client: ClientId) -> bool {
        self.slots
            .get_mut(&client)
            .is_some_and(|slot| slot.delivery.start_resync())
    }

    /// Opens a client with its repaint (taken at `size`): `attached`, or `desync` and
    /// `resynced`, then the repaint, then the ring's bytes from the snapshot's offset with
    /// whatever was held for it meanwhile.
    pub fn finish_repaint(
        &mut self,
        client: ClientId,
        session: SessionId,
        size: TermSize,
        snapshot: Snapshot,
    ) {
        let tail = self.ring.since(snapshot.offset);
        let Some(slot) = self.slots.get_mut(&client) else {
            return;
        };
        let prelude = snapshot.repaint.len();
        let frames = match slot.delivery.opening() {
            None => return,
            Some(Opening::Attach) => vec![AttachFrame::Attached {
                session,
                stream: self.stream.clone(),
                cols: size.cols,
                rows: size.rows,
                offset: snapshot.offset,
                prelude,
                replay: atc_protocol::Replay::Screen,
            }
            .to_text()],
            Some(Opening::Resync { dropped }) => {
                tracing::debug!(session = %session, client = client.0, dropped, "client resynced");
                vec![
                    AttachFrame::Desync { dropped }.to_text(),
                    AttachFrame::Resynced {
                        offset: snapshot.offset,
                        prelude,
                    }
                    .to_text(),
                ]
            }
        };
        if tail.is_none() {
            // The bounded screen mailbox keeps the model within half a ring of the output.
            tracing::error!(session = %session, "screen snapshot older than the ring");
        }
        slot.delivery.open(
            &slot.queue,
            frames,
            Some(Bytes::from(snapshot.repaint)),
            snapshot.offset,
            Bytes::from(tail.unwrap_or_default()),
        );
        let closed = slot.delivery.is_closed();
        // An exit came while it waited: it has its exit and close now, and goes.
        if closed {
            self.slots.remove(&client);
        }
    }

    /// The process ended: every client gets `exit` and a close. A client still waiting for
    /// its repaint keeps its slot until the repaint lands, so it gets `attached` before the
    /// exit and the close.
    pub fn exited(&mut self, exit: &AttachFrame) {
        let exit = exit.to_text();
        let at = self.ring.end();
        self.slots.retain(|_, slot| {
            slot.delivery.text(&slot.queue, exit.clone(), at);
            !slot.delivery.close(&slot.queue, at)
        });
    }

    /// The session's tree is now `tree` (spec §2.5): a client attached as a principal that
    /// no longer reaches all of it is closed, as the session is gone for it. `true` when one
    /// was (its size no longer counts).
    pub fn close_out_of_reach(&mut self, tree: &[Descriptor]) -> bool {
        let before = self.slots.len();
        self.slots.retain(|_, slot| {
            let keeps = slot
                .reach
                .as_ref()
                .is_none_or(|r| tree.iter().all(|d| r.covers(d)));
            if !keeps {
                slot.queue.push(Outgoing::Close);
            }
            keeps
        });
        self.slots.len() != before
    }

    /// The session goes away: every client is closed now, opened or not.
    pub fn close_all(&mut self) {
        for (_, slot) in self.slots.drain() {
            slot.queue.push(Outgoing::Close);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::client_queue::{client_queue, QueueReceiver};
    use atc_protocol::ExitReason;
    use serde_json::Value;
    use std::future::poll_fn;

    fn size(cols: u16, rows: u16) -> TermSize {
        TermSize { cols, rows }
    }

    /// What the writer would see: a text frame's `type` (with its offset when it has one),
    /// `B:bytes`, `close`.
    async fn drain(rx: &mut QueueReceiver) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(p) = poll_fn(|cx| rx.poll_pop(cx)).await {
            out.push(match p.frame {
                Outgoing::Text(t) => {
                    let v: Value = serde_json::from_str(&t).unwrap();
                    match v.get("offset") {
                        Some(o) => format!("{}@{o}", v["type"].as_str().unwrap()),
                        None => v["type"].as_str().unwrap().to_string(),
                    }
                }
                Outgoing::Binary(b) => format!("B:{}", String::from_utf8_lossy(&b)),
                Outgoing::Close => "close".into(),
                Outgoing::Ping | Outgoing::Pong(_) => "ping".into(),
            });
        }
        out
    }

    fn snapshot(offset: u64, repaint: &str) -> Snapshot {
        Snapshot {
            repaint: repaint.as_bytes().to_vec(),
            offset,
        }
    }

    /// A client that types, reporting `size`.
    fn typist(queue: ClientQueue, size: Option<TermSize>) -> Newcomer {
        Newcomer {
            queue,
            size,
            mode: AttachMode::Interactive,
            reach: None,
        }
    }

    /// A watch-only client reporting `size`.
    fn watcher(queue: ClientQueue, size: Option<TermSize>) -> Newcomer {
        Newcomer {
            queue,
            size,
            mode: AttachMode::Watch,
            reach: None,
        }
    }

    const SESSION: SessionId = SessionId::NIL;
    const AT: TermSize = TermSize { cols: 80, rows: 24 };

    #[tokio::test]
    async fn a_repaint_opens_with_attached_then_the_screen_then_what_happened_meanwhile() {
        let mut c = Clients::new(1024, Metrics::new());
        c.output(&Bytes::from_static(b"old"));
        let (q, mut rx) = client_queue(1024);
        assert_eq!(
            c.attach(ClientId(1), typist(q, None), None, SESSION, AT),
            Opened::NeedsRepaint
        );
        // While the snapshot is on the way: output and a resize.
        c.output(&Bytes::from_static(b"new"));
        c.broadcast(&AttachFrame::Resized { cols: 70, rows: 20 });
        c.output(&Bytes::from_static(b"er"));
        c.finish_repaint(ClientId(1), SESSION, AT, snapshot(3, "PAINT"));
        assert!(c.detach(ClientId(1)));
        assert_eq!(
            drain(&mut rx).await,
            ["attached@3", "B:PAINT", "B:new", "resized", "B:er"]
        );
    }

    #[tokio::test]
    async fn a_resume_gets_the_tail_from_its_offset_and_a_foreign_stream_gets_a_repaint() {
        let mut c = Clients::new(1024, Metrics::new());
        c.output(&Bytes::from_static(b"abcdef"));
        let here = ResumeFrom {
            stream: c.stream().to_string(),
            from: 2,
        };
        let elsewhere = ResumeFrom {
            stream: "another".into(),
            from: 2,
        };
        assert_eq!(c.resume_point(Some(&elsewhere)), None);
        assert_eq!(
            c.resume_point(Some(&ResumeFrom {
                from: 99,
                ..here.clone()
            })),
            None,
            "an offset the ring does not hold cannot resume"
        );
        let from = c.resume_point(Some(&here));
        assert_eq!(from, Some(2));
        let (q, mut rx) = client_queue(1024);
        assert_eq!(
            c.attach(ClientId(7), typist(q, None), from, SESSION, AT),
            Opened::Resumed
        );
        c.output(&Bytes::from_static(b"g"));
        c.detach(ClientId(7));
        assert_eq!(drain(&mut rx).await, ["attached@2", "B:cdef", "B:g"]);
    }

    #[tokio::test]
    async fn a_desync_is_followed_by_resynced_and_its_repaint_with_nothing_between() {
        let mut c = Clients::new(4096, Metrics::new());
        let (q, mut rx) = client_queue(1024);
        c.attach(ClientId(1), typist(q, None), None, SESSION, AT);
        c.finish_repaint(ClientId(1), SESSION, AT, snapshot(0, ""));
        c.output(&Bytes::from(vec![b'x'; 100]));
        assert!(!c.start_resync(ClientId(1)), "nothing was dropped yet");
        c.output(&Bytes::from(vec![b'y'; 2000]));
        assert!(c.start_resync(ClientId(1)), "the second chunk overflowed");
        assert!(!c.start_resync(ClientId(1)), "one resync at a time");
        c.broadcast(&AttachFrame::Resized { cols: 70, rows: 20 });
        c.finish_repaint(ClientId(1), SESSION, AT, snapshot(2100, "P"));
        c.detach(ClientId(1));
        let seen = drain(&mut rx).await;
        assert_eq!(seen[0], "attached@0", "{seen:?}");
        let from_desync: Vec<&str> = seen
            .iter()
            .map(String::as_str)
            .skip_while(|f| *f != "desync")
            .collect();
        assert_eq!(
            from_desync,
            ["desync", "resynced@2100", "B:P", "resized"],
            "{seen:?}"
        );
    }

    #[tokio::test]
    async fn each_client_that_falls_behind_is_one_desync_and_every_missed_byte_counts() {
        let metrics = Metrics::new();
        let text = || {
            let mut t = String::new();
            prometheus_client::encoding::text::encode(&mut t, metrics.registry()).unwrap();
            t
        };
        let mut c = Clients::new(8192, metrics.clone());
        let (slow, _slow_rx) = client_queue(1024);
        let (other, _other_rx) = client_queue(1024);
        let (fast, _fast_rx) = client_queue(1 << 20);
        for (id, q) in [(1, slow), (2, other), (3, fast)] {
            let newcomer = typist(q, None);
            c.attach(ClientId(id), newcomer, None, SESSION, AT);
            c.finish_repaint(ClientId(id), SESSION, AT, snapshot(0, ""));
        }
        assert!(text().contains("atc_attached_clients 3\n"));
        c.output(&Bytes::from(vec![b'x'; 2000]));
        c.output(&Bytes::from(vec![b'y'; 300]));
        let t = text();
        assert!(t.contains("atc_client_desyncs_total 2\n"), "{t}");
        assert!(t.contains("atc_client_dropped_bytes_total 4600\n"), "{t}");
        c.detach(ClientId(2));
        assert!(text().contains("atc_attached_clients 2\n"));
        c.close_all();
        assert!(text().contains("atc_attached_clients 0\n"));
    }

    #[tokio::test]
    async fn a_principal_whose_reach_the_tree_left_is_closed_and_the_owner_stays() {
        let mut c = Clients::new(1024, Metrics::new());
        let reach = Arc::new(Reach::new(["vm"], [("vm", "V"), ("local", "L")]));
        let on = |target: &str, identity: &str| Descriptor {
            locator: atc_protocol::Locator {
                target_id: target.into(),
                ..Default::default()
            },
            target_identity: identity.into(),
            ..Descriptor::default()
        };
        let (owner_q, mut owner_rx) = client_queue(1024);
        let (principal_q, mut principal_rx) = client_queue(1024);
        c.attach(ClientId(1), typist(owner_q, None), None, SESSION, AT);
        let principal = Newcomer {
            reach: Some(reach),
            ..typist(principal_q, None)
        };
        c.attach(ClientId(2), principal, None, SESSION, AT);
        assert!(!c.close_out_of_reach(&[on("vm", "V")]), "still in reach");
        assert!(c.close_out_of_reach(&[on("vm", "V"), on("local", "L")]));
        assert_eq!(drain(&mut principal_rx).await, ["close"]);
        assert!(c.detach(ClientId(1)), "the owner's client stays");
        assert!(!c.detach(ClientId(2)));
        assert!(drain(&mut owner_rx).await.is_empty());
    }

    #[tokio::test]
    async fn an_exit_while_a_repaint_is_pending_follows_attached_and_the_slot_goes() {
        let mut c = Clients::new(1024, Metrics::new());
        let (q, mut rx) = client_queue(1024);
        c.attach(
            ClientId(1),
            typist(q, Some(size(50, 10))),
            None,
            SESSION,
            AT,
        );
        c.output(&Bytes::from_static(b"bye"));
        c.exited(&AttachFrame::Exit {
            code: Some(0),
            signal: None,
            reason: ExitReason::Exited,
            detail: "exited with status 0".into(),
        });
        assert_eq!(
            c.effective_size(),
            None,
            "a closed client's size is history"
        );
        c.finish_repaint(ClientId(1), SESSION, AT, snapshot(0, "P"));
        assert!(!c.detach(ClientId(1)), "the slot went with the repaint");
        assert_eq!(
            drain(&mut rx).await,
            ["attached@0", "B:P", "B:bye", "exit", "close"]
        );
    }

    #[test]
    fn the_debounce_applies_the_smallest_size_and_nothing_when_it_is_the_current_one() {
        assert_eq!(size_to_apply([], AT), None, "no client gave a size");
        assert_eq!(
            size_to_apply([size(100, 30), size(90, 40)], AT),
            Some(size(90, 30)),
            "each dimension is the smallest of any client's"
        );
        assert_eq!(size_to_apply([AT, size(100, 50)], AT), None);
    }

    #[tokio::test]
    async fn sizes_count_from_attach_until_detach() {
        let mut c = Clients::new(1024, Metrics::new());
        let (q1, _r1) = client_queue(1024);
        let (q2, _r2) = client_queue(1024);
        assert_eq!(c.size_on_attach(Some(size(100, 30))), Some(size(100, 30)));
        c.attach(
            ClientId(1),
            typist(q1, Some(size(100, 30))),
            None,
            SESSION,
            AT,
        );
        c.attach(ClientId(2), typist(q2, None), None, SESSION, AT);
        assert_eq!(c.size_on_attach(Some(size(120, 20))), Some(size(100, 20)));
        assert!(c.resized(ClientId(2), size(60, 50)));
        assert!(
            !c.resized(ClientId(9), size(1, 1)),
            "no such client: nothing to debounce"
        );
        assert_eq!(c.size_to_apply(AT), Some(size(60, 30)));
        assert!(c.detach(ClientId(2)));
        assert_eq!(c.size_to_apply(AT), Some(size(100, 30)));
        assert_eq!(c.size_to_apply(size(100, 30)), None);
    }

    #[tokio::test]
    async fn a_watchers_size_never_counts() {
        let mut c = Clients::new(1024, Metrics::new());
        let (q1, _r1) = client_queue(1024);
        let (q2, _r2) = client_queue(1024);
        c.attach(
            ClientId(1),
            typist(q1, Some(size(100, 30))),
            None,
            SESSION,
            AT,
        );
        c.attach(
            ClientId(2),
            watcher(q2, Some(size(10, 5))),
            None,
            SESSION,
            AT,
        );
        assert_eq!(c.effective_size(), Some(size(100, 30)));
        assert!(
            !c.resized(ClientId(2), size(20, 4)),
            "a watcher's resize has nothing to debounce"
        );
        assert_eq!(c.size_to_apply(AT), Some(size(100, 30)));
        assert!(c.detach(ClientId(1)));
        assert_eq!(c.effective_size(), None, "only a watcher is left");
        assert_eq!(counted_size(AttachMode::Watch, Some(AT)), None);
        assert_eq!(counted_size(AttachMode::Interactive, Some(AT)), Some(AT));
    }

    #[tokio::test]
    async fn offsets_and_the_stream_continue_across_a_revive() {
        let mut c = Clients::new(1024, Metrics::new());
        let (q, mut rx) = client_queue(1024);
        c.attach(ClientId(1), typist(q, None), None, SESSION, AT);
        c.finish_repaint(ClientId(1), SESSION, AT, snapshot(0, ""));
        c.output(&Bytes::from_static(b"first life"));
        c.exited(&AttachFrame::Exit {
            code: None,
            signal: Some(9),
            reason: ExitReason::Killed,
            detail: "ended by signal 9".into(),
        });
        let seen = drain(&mut rx).await;
        assert_eq!(seen.last().map(String::as_str), Some("close"), "{seen:?}");
        // A revive starts a process, not a stream: its output continues the offsets.
        let stream = c.stream().to_string();
        c.output(&Bytes::from_static(b"second"));
        assert_eq!(c.end(), 16);
        let back = ResumeFrom { stream, from: 10 };
        let from = c.resume_point(Some(&back));
        assert_eq!(from, Some(10), "the old stream resumes after the revive");
        let (q, mut rx) = client_queue(1024);
        c.attach(ClientId(2), typist(q, None), from, SESSION, AT);
        c.detach(ClientId(2));
        assert_eq!(drain(&mut rx).await, ["attached@10", "B:second"]);
    }
}
