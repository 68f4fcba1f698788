//! [`ScreenLink`]: the session's line to its screen worker, which holds each output chunk back
//! until the clients' frames of it are on their way.
//!
//! Why hold it. Handing a chunk to the worker wakes the screen thread (an eventfd write, and
//! on a 2-core machine often a context switch), and doing that before the clients' socket
//! writes put both costs inside every echo's round trip. Measured with `atc-bench --phases
//! echo,throughput` in four alternating pairs of runs (before and after, each beside its
//! floor): the median echo p50 went from 1.53× to 1.38× the floor's, p99 from 1.65× to 1.24×,
//! and one client's throughput did not fall (0.73× and 0.90× the floor's). So the session
//! queues the clients' frames first, holds the chunk here, and hands it on once the socket
//! writers have had their turn (the session yields to the runtime once in between).
//!
//! Why it stays exact. The worker must see output, resizes and questions in the order the
//! session had them: a resize applies to the bytes after it, and a question (the paste mode a
//! submit reads, a snapshot) must see every byte before it. So every other message to the
//! worker goes through [`ScreenLink::worker`], which first sends what is held.

use actix::prelude::*;
use bytes::Bytes;

use crate::sessions::screen_worker::{Feed, ScreenWorker};

/// The screen worker's address and the output chunk held back for it, if any.
pub struct ScreenLink {
    worker: Addr<ScreenWorker>,
    held: Option<Bytes>,
}

impl ScreenLink {
    /// A link to `worker`, holding nothing.
    pub fn new(worker: Addr<ScreenWorker>) -> ScreenLink {
        ScreenLink { worker, held: None }
    }

    /// The worker, once everything held for it has been sent: for every message but output.
    pub fn worker(&mut self) -> &Addr<ScreenWorker> {
        self.release();
        &self.worker
    }

    /// Holds `chunk` until [`ScreenLink::hand_on`] or the next [`ScreenLink::worker`].
    pub fn hold(&mut self, chunk: Bytes) {
        // A harness sends its next chunk only once the last was taken, so nothing is held
        // here; if something is, it goes first.
        self.release();
        self.held = Some(chunk);
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
    /// within half the ring of the output (see `Session::new`); one chunk over it still leaves
    /// the other half.
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

        link.hold(Bytes::from_static(b"held"));
        // A question sent while the chunk is held sees it.
        let text = link.worker().send(ScreenAsText).await.unwrap();
        assert_eq!(text.text, "held");
        // It went once: handing on afterwards sends nothing more.
        link.hand_on().await;
        assert_eq!(link.worker().send(TakeSnapshot).await.unwrap().offset, 4);

        // A resize after held output applies after it: the held bytes are parsed at the old
        // width and wrap there.
        link.hold(Bytes::from_static(b" and wrapped at twenty"));
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
        link.hold(Bytes::from_static(b"abc"));
        link.hand_on().await;
        assert_eq!(link.worker.send(TakeSnapshot).await.unwrap().offset, 3);
    }
}
