//! `ScreenWorker`: one per session, holding its [`ScreenModel`], on the daemon's screen
//! arbiter (a thread of its own).
//!
//! Parsing terminal output is the most expensive thing a session does (measured: about two
//! thirds of the session thread's time at full PTY speed). Doing it on another thread lets the
//! session forward output to clients while the previous chunk is being parsed. Exactness is
//! kept with offsets: the worker counts the bytes it has parsed, and every snapshot says at
//! which offset it was taken, so the session sends the repaint and then the ring's bytes from
//! that offset. The worker's mailbox is bounded; a full mailbox slows the PTY reader, so the
//! model never lags the ring by more than the ring holds.
//!
//! The worker keeps a [`Screen`]: while the session's output is short, the bytes that drew it
//! rather than a model, whose cell grid would be most of the session's memory (32 bytes a
//! cell: 150 KiB at 120×40). `screen_log` says why that is exact.

use actix::prelude::*;
use bytes::Bytes;

use super::screen::{ScreenModel, ScreenText};
use super::screen_log::Screen;
use atc_protocol::TermSize;

/// Parse these output bytes (in order). Sent by the session for every chunk.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Feed(pub Bytes);

/// Follow a size change, in order with the output around it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ResizeScreen(pub TermSize);

/// A repaint of the screen and the stream offset it corresponds to.
#[derive(Message)]
#[rtype(result = "Snapshot")]
pub struct TakeSnapshot;

/// The visible screen as text.
#[derive(Message)]
#[rtype(result = "ScreenText")]
pub struct ScreenAsText;

/// Whether the program asked for bracketed paste, as of the output parsed so far.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct PasteMode;

/// What [`TakeSnapshot`] answers.
pub struct Snapshot {
    /// Bytes that repaint the screen.
    pub repaint: Vec<u8>,
    /// The offset of the first byte the repaint does not include.
    pub offset: u64,
}

/// One session's screen model.
pub struct ScreenWorker {
    screen: Screen,
    /// Stream offset of the next byte to parse.
    parsed: u64,
    mailbox: usize,
}

impl ScreenWorker {
    /// A worker whose model starts at `offset` of the stream, with room for `mailbox` chunks.
    pub fn new(size: TermSize, offset: u64, mailbox: usize) -> ScreenWorker {
        ScreenWorker {
            screen: Screen::new(size),
            parsed: offset,
            mailbox,
        }
    }
}

impl Actor for ScreenWorker {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(self.mailbox);
    }
}

impl Handler<Feed> for ScreenWorker {
    type Result = ();

    fn handle(&mut self, msg: Feed, _: &mut Self::Context) {
        self.screen.process(&msg.0);
        self.parsed += msg.0.len() as u64;
    }
}

impl Handler<ResizeScreen> for ScreenWorker {
    type Result = ();

    fn handle(&mut self, msg: ResizeScreen, _: &mut Self::Context) {
        self.screen.resize(msg.0);
    }
}

impl Handler<TakeSnapshot> for ScreenWorker {
    type Result = MessageResult<TakeSnapshot>;

    fn handle(&mut self, _: TakeSnapshot, _: &mut Self::Context) -> Self::Result {
        MessageResult(Snapshot {
            repaint: self.screen.look(ScreenModel::repaint),
            offset: self.parsed,
        })
    }
}

impl Handler<PasteMode> for ScreenWorker {
    type Result = bool;

    fn handle(&mut self, _: PasteMode, _: &mut Self::Context) -> bool {
        self.screen.look(ScreenModel::bracketed_paste)
    }
}

impl Handler<ScreenAsText> for ScreenWorker {
    type Result = MessageResult<ScreenAsText>;

    fn handle(&mut self, _: ScreenAsText, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.screen.look(ScreenModel::text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix_rt::test]
    async fn a_silent_session_has_a_blank_screen_and_offsets_count_fed_bytes() {
        let size = TermSize { cols: 30, rows: 4 };
        let worker = ScreenWorker::new(size, 0, 4).start();
        let blank = worker.send(ScreenAsText).await.unwrap();
        assert_eq!((blank.text.as_str(), blank.cols, blank.rows), ("", 30, 4));
        let snap = worker.send(TakeSnapshot).await.unwrap();
        assert_eq!(snap.offset, 0);
        assert!(!snap.repaint.is_empty());
        worker
            .send(Feed(Bytes::from_static(b"hello")))
            .await
            .unwrap();
        worker
            .send(ResizeScreen(TermSize { cols: 40, rows: 5 }))
            .await
            .unwrap();
        worker
            .send(Feed(Bytes::from_static(b" world")))
            .await
            .unwrap();
        let snap = worker.send(TakeSnapshot).await.unwrap();
        assert_eq!(snap.offset, 11);
        let text = worker.send(ScreenAsText).await.unwrap();
        assert_eq!(
            (text.text.as_str(), text.cols, text.rows),
            ("hello world", 40, 5)
        );
    }
}
