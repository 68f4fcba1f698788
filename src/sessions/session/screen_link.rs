//! [`ScreenLink`]: the session's line to its screen worker, which holds output back from the
//! worker until the clients' frames of it are on their way, and gathers small chunks.
//!
//! Why hold a chunk. Handing a chunk to the worker wakes the screen thread (an eventfd write,
//! and on a 2-core machine often a context switch), and doing that before the clients' socket
//! writes put both costs inside every echo's round trip. Measured with `atc-bench --phases
//! echo,throughput` in four alternating pairs of runs (before and after, each beside its
//! floor): the median echo p50 went from 1.53× to 1.38× the floor's, p99 from 1.65× to 1.24×,
//! and one client's throughput did not fall (0.73× and 0.90× the floor's). So the session
//! queues the clients' frames first, holds the chunk here, and hands it on once the socket
//! writers have had their turn (the session yields to the runtime once in between).
//!
//! Why gather small ones. Typing makes a chunk of a few bytes per keystroke, and a flood one of
//! about 4 KiB per PTY read (`providers/local/pty_reader.rs` says why it reads no more at once).
//! Waking the screen thread for each cost more than parsing it, and the screen model's fast
//! path only skips the text that scrolls off within one chunk, so it needs large ones. Chunks
//! are gathered until [`GATHER_BYTES`] are held, and only then handed on; until then the
//! screen thread sleeps. Measured over 256 MiB (`atc-bench --phases throughput`, three
//! alternating pairs), with 4 KiB reads: gathering 4 KiB cost the screen thread 2.4–2.5 s of
//! CPU, gathering 32 KiB 0.7–0.9 s. Gathering 64 KiB brought it from 0.65–0.69 s to 0.38–0.45 s
//! in three more pairs (the thread's CPU from `/proc/<pid>/task`); the one-client rate moved
//! less than the noise. The fast path draws about a screenful per hand-on, so the larger the
//! hand-on, the fewer rows drawn per byte.
//!
//! Why it stays exact. The worker must see output, resizes and questions in the order the
//! session had them: a resize applies to the bytes after it, and a question (the paste mode a
//! submit reads, a snapshot, the screen's text) must see every byte before it. So every other
//! message to the worker goes through [`ScreenLink::worker`], which first sends what is held:
//! whenever the model is looked at, it has parsed everything. What is held is far less than
//! the ring keeps, so a snapshot's offset is always still in the ring.

use actix::prelude::*;
use bytes::{Bytes, BytesMut};

use crate::sessions::screen_worker::{Feed, ScreenWorker};

/// Output held back is handed on once it reaches this many bytes (a chunk at least this
/// large goes on by itself).
pub const GATHER_BYTES: usize = 64 * 1024;

/// The most one hand-on sends: under [`GATHER_BYTES`] held, and then a chunk of at most
/// [`MAX_OUTPUT_CHUNK`](crate::providers::MAX_OUTPUT_CHUNK). The session sizes the worker's
/// mailbox in these.
pub const MAX_FEED_BYTES: usize = GATHER_BYTES + crate::providers::MAX_OUTPUT_CHUNK;

/// The screen worker's address and the output held back for it.
pub struct ScreenLink {
    worker: Addr<ScreenWorker>,
    held: Held,
}

/// Output not yet sent to the worker.
#[derive(Default)]
enum Held {
    #[default]
    Nothing,
    /// One chunk as the harness read it (not copied).
    Chunk(Bytes),
    /// Several small chunks copied together.
    Gathered(BytesMut),
}

impl Held {
    fn len(&self) -> usize {
        match self {
            Held::Nothing => 0,
            Held::Chunk(b) => b.len(),
            Held::Gathered(b) => b.len(),
        }
    }

    fn take(&mut self) -> Option<Bytes> {
        match std::mem::take(self) {
            Held::Nothing => None,
            Held::Chunk(b) => Some(b),
            Held::Gathered(b) => Some(b.freeze()),
        }
    }
}

impl ScreenLink {
    /// A link to `worker`, holding nothing.
    pub fn new(worker: Addr<ScreenWorker>) -> ScreenLink {
        ScreenLink {
            worker,
            held: Held::Nothing,
        }
    }

    /// The worker, once everything held for it has been sent: for every message but output.
    pub fn worker(&mut self) -> &Addr<ScreenWorker> {
        self.release();
        &self.worker
    }

    /// Holds `chunk` after whatever is held already. `true` when enough is held that it should
    /// be handed on ([`ScreenLink::hand_on`]) once the clients' frames are out.
    #[must_use]
    pub fn hold(&mut self, chunk: Bytes) -> bool {
        self.held = match std::mem::take(&mut self.held) {
            Held::Nothing => Held::Chunk(chunk),
            Held::Chunk(first) => {
                let mut gathered = BytesMut::with_capacity(first.len() + chunk.len());
                gathered.extend_from_slice(&first);
                gathered.extend_from_slice(&chunk);
                Held::Gathered(gathered)
            }
            Held::Gathered(mut gathered) => {
                gathered.extend_from_slice(&chunk);
                Held::Gathered(gathered)
            }
        };
        self.held.len() >= GATHER_BYTES
    }

    /// Sends what is held; the future resolves once the worker's mailbox has taken it. That
    /// wait is what paces the PTY reader. Resolves at once if something else sent it already.
    pub fn hand_on(&mut self) -> impl std::future::Future<Output = ()> + 'static {
        // Always through the same sender: actix parks a sender that filled the mailbox, and
        // only a parked sender is refused. A fresh clone per chunk would never be, and the
        // model would fall behind the ring without bound.
        let waiting = self.held.take().and_then(|chunk| {
            match self.worker.try_send(Feed(chunk)) {
                Ok(()) => None,
                Err(SendError::Full(feed)) => Some(self.worker.send(feed)),
                // A closed worker means the session is stopping; nothing to pace.
                Err(SendError::Closed(_)) => None,
            }
        });
        async move {
            if let Some(request) = waiting {
                // Only a stopping worker fails to take it; nothing is left to pace then.
                let _ = request.await;
            }
        }
    }

    /// Sends what is held now, past the mailbox's bound if need be. That bound keeps the model
    /// within half the ring of the output (see `Session::new`); what is held over it (a chunk,
    /// or under [`GATHER_BYTES`]: at most [`MAX_FEED_BYTES`]) still leaves the other half.
    fn release(&mut self) {
        if let Some(chunk) = self.held.take() {
            self.worker.do_send(Feed(chunk));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::screen_worker::{ResizeScreen, ScreenAsText, TakeSnapshot};
    use atc_protocol::TermSize;

    #[actix_rt::test]
    async fn held_output_reaches_the_worker_before_any_later_message() {
        let size = TermSize { cols: 20, rows: 3 };
        let mut link = ScreenLink::new(ScreenWorker::new(size, 0, 4).start());

        assert!(
            !link.hold(Bytes::from_static(b"held")),
            "too little to hand on"
        );
        // A question sent while the chunk is held sees it.
        let text = link.worker().send(ScreenAsText).await.unwrap();
        assert_eq!(text.text, "held");
        // It went once: handing on afterwards sends nothing more.
        link.hand_on().await;
        assert_eq!(link.worker().send(TakeSnapshot).await.unwrap().offset, 4);

        // A resize after held output applies after it: the held bytes are parsed at the old
        // width and wrap there.
        let _ = link.hold(Bytes::from_static(b" and wrapped at twenty"));
        link.worker()
            .send(ResizeScreen(TermSize { cols: 40, rows: 3 }))
            .await
            .unwrap();
        let text = link.worker().send(ScreenAsText).await.unwrap();
        assert_eq!(text.text, "held and wrapped at\ntwenty");
    }

    #[actix_rt::test]
    async fn handing_on_sends_the_held_chunk() {
        let size = TermSize { cols: 20, rows: 3 };
        let mut link = ScreenLink::new(ScreenWorker::new(size, 0, 4).start());
        let _ = link.hold(Bytes::from_static(b"abc"));
        link.hand_on().await;
        assert_eq!(link.worker.send(TakeSnapshot).await.unwrap().offset, 3);
    }

    #[actix_rt::test]
    async fn small_chunks_are_gathered_and_handed_on_together_in_order() {
        let size = TermSize { cols: 80, rows: 3 };
        let mut link = ScreenLink::new(ScreenWorker::new(size, 0, 4).start());
        let mut held = 0;
        let mut due = false;
        for c in (b'a'..=b'z').cycle() {
            due = link.hold(Bytes::copy_from_slice(&[c]));
            held += 1;
            if due {
                break;
            }
        }
        assert!(
            due && held == GATHER_BYTES,
            "due once {GATHER_BYTES} bytes are held"
        );
        link.hand_on().await;
        // Sent as it was held: the worker has parsed it all, in order, without a release.
        let snapshot = link.worker.send(TakeSnapshot).await.unwrap();
        assert_eq!(snapshot.offset, GATHER_BYTES as u64);
        let text = link.worker.send(ScreenAsText).await.unwrap();
        let last_row: String = (b'a'..=b'z')
            .cycle()
            .take(GATHER_BYTES)
            .skip(GATHER_BYTES - GATHER_BYTES % 80)
            .map(char::from)
            .collect();
        assert!(text.text.ends_with(&last_row), "{:?}", text.text);
        // A large chunk is due by itself.
        assert!(link.hold(Bytes::from(vec![b'x'; GATHER_BYTES])));
    }
}
