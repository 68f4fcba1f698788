//! The atc client of the `remote` suite: one attach WebSocket to the session under test,
//! read on its own task. Live bytes go through a [`LineCheck`] (after the repaint prelude,
//! which carries no offset); link changes and the session's exit come back to the suite as
//! [`Seen`] events, stamped when they arrived. When its own socket is lost, or the suite drops
//! it, it attaches again with `stream` + `from` (the offset after the last byte it has), and
//! counts any byte of the daemon's stream the resume skipped or sent twice.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use atc_client::frame_reader::{AttachReader, Incoming, ReadError};
use atc_client::DaemonClient;
use atc_protocol::frames::{AttachFrame, LinkState, Replay};
use atc_protocol::session::ExitReason;
use tokio::sync::mpsc;

use super::lines::{LineCheck, LineCounts};

/// How long a polite close may take before the socket is simply dropped.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// What the client saw, in order.
#[derive(Debug, Clone)]
pub enum Seen {
    /// The remote harness's link changed.
    Link(LinkState, Instant),
    /// The session ended; the socket closes after it.
    Exit {
        reason: ExitReason,
        detail: String,
        at: Instant,
    },
    /// The client could not attach (again).
    Failed(String),
}

/// What the suite tells the client.
#[derive(Debug)]
enum Command {
    /// Close the socket now and resume by stream + offset.
    Drop,
    /// After an exit: attach again (the session was revived), resuming by stream + offset.
    Reattach,
    /// Close and end the task.
    Stop,
}

/// What the client counted over its whole life.
#[derive(Debug, Default)]
pub struct Tally {
    pub check: LineCheck,
    /// Stream id and the offset after the last byte had, once attached.
    stream: Option<String>,
    high: u64,
    /// Stream bytes a resume skipped (its first live byte past `from`), or repeated (before it).
    pub stream_lost: u64,
    pub stream_repeated: u64,
    /// Attaches by stream + offset, and those the daemon answered with a screen repaint.
    pub resumes: u64,
    pub resume_repaints: u64,
    /// Desync notices (this client fell behind; a repaint follows).
    pub desyncs: u64,
}

/// The handle the suite keeps.
pub struct Watcher {
    commands: mpsc::UnboundedSender<Command>,
    events: mpsc::UnboundedReceiver<Seen>,
    tally: Rc<RefCell<Tally>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Watcher {
    /// Attaches to session `id` and starts reading.
    pub fn start(client: DaemonClient, id: String) -> Watcher {
        let (commands, command_rx) = mpsc::unbounded_channel();
        let (event_tx, events) = mpsc::unbounded_channel();
        let tally = Rc::new(RefCell::new(Tally::default()));
        let task = actix_rt::spawn(read_loop(client, id, tally.clone(), command_rx, event_tx));
        Watcher {
            commands,
            events,
            tally,
            task: Some(task),
        }
    }

    /// The line counts so far.
    pub fn counts(&self) -> LineCounts {
        self.tally.borrow().check.counts()
    }

    /// The last good line number read.
    pub fn last_line(&self) -> Option<u64> {
        self.tally.borrow().check.last()
    }

    /// Reads the tally.
    pub fn with_tally<T>(&self, f: impl FnOnce(&Tally) -> T) -> T {
        f(&self.tally.borrow())
    }

    /// Forgets events seen so far.
    pub fn drain(&mut self) {
        while self.events.try_recv().is_ok() {}
    }

    /// The next event already there.
    pub fn try_next(&mut self) -> Option<Seen> {
        self.events.try_recv().ok()
    }

    /// The next event, if one comes by `deadline`.
    pub async fn next_by(&mut self, deadline: Instant) -> Option<Seen> {
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::timeout(left, self.events.recv())
            .await
            .ok()
            .flatten()
    }

    /// Waits until the last good line is at least `n`; false if `deadline` passes first.
    pub async fn wait_line(&self, n: u64, deadline: Instant) -> bool {
        // The reader runs on this thread; polling its tally between its reads is a wait
        // on its state with a deadline, not a sleep hoping for it.
        while self.last_line().is_none_or(|l| l < n) {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    /// Drops the socket; the client resumes by stream + offset at once.
    pub fn drop_socket(&self) {
        // A send fails only when the task ended, which its events say.
        let _ = self.commands.send(Command::Drop);
    }

    /// Attaches again after an exit (the session was revived).
    pub fn reattach(&self) {
        // As above: a task that ended has said so.
        let _ = self.commands.send(Command::Reattach);
    }

    /// Closes the socket and waits for the task to end.
    pub async fn stop(mut self) {
        // As above.
        let _ = self.commands.send(Command::Stop);
        if let Some(task) = self.task.take() {
            if tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .is_err()
            {
                tracing_free_note("the attach client did not stop within 5 s");
            }
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The suite has no logger; a stuck client shows in its figures anyway.
fn tracing_free_note(text: &str) {
    eprintln!("atc-proof remote: {text}");
}

/// How one socket's life ended.
enum SocketEnd {
    /// The session ended (an `exit` frame came).
    Exited,
    /// The socket closed or was dropped with the session still there: resume.
    Lost,
    /// Told to stop.
    Stop,
}

async fn read_loop(
    client: DaemonClient,
    id: String,
    tally: Rc<RefCell<Tally>>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    events: mpsc::UnboundedSender<Seen>,
) {
    let mut failures = 0;
    loop {
        let path = {
            let t = tally.borrow();
            match &t.stream {
                Some(stream) => format!(
                    "/v1/sessions/{id}/attach?cols=100&rows=30&stream={stream}&from={}",
                    t.high
                ),
                None => format!("/v1/sessions/{id}/attach?cols=100&rows=30"),
            }
        };
        let end = match client.ws_connect(&path).await {
            Ok(socket) => {
                failures = 0;
                let link = LinkProbe {
                    client: &client,
                    id: &id,
                };
                one_socket(socket, &tally, &mut commands, &events, link).await
            }
            Err(e) => {
                failures += 1;
                if failures >= 3 {
                    // The suite stops the client on this; nothing else to tell.
                    let _ = events.send(Seen::Failed(format!("attach: {e}")));
                    return;
                }
                SocketEnd::Lost
            }
        };
        match end {
            SocketEnd::Stop => return,
            SocketEnd::Lost => {}
            SocketEnd::Exited => loop {
                match commands.recv().await {
                    Some(Command::Reattach) => break,
                    Some(Command::Drop) => {}
                    Some(Command::Stop) | None => return,
                }
            },
        }
    }
}

/// Reads the session's link state from its descriptor.
struct LinkProbe<'a> {
    client: &'a DaemonClient,
    id: &'a str,
}

impl LinkProbe<'_> {
    /// Whether the descriptor says the remote harness is attached.
    async fn attached(&self) -> bool {
        match self
            .client
            .get_json(&format!("/v1/sessions/{}", self.id))
            .await
        {
            Ok(v) => v["session"]["lifecycle"]["attachment"] == "attached",
            // A failed read tells nothing; the link frames still will.
            Err(_) => false,
        }
    }
}

/// Reads one socket until it ends.
async fn one_socket(
    socket: atc_client::WsConnection,
    tally: &Rc<RefCell<Tally>>,
    commands: &mut mpsc::UnboundedReceiver<Command>,
    events: &mpsc::UnboundedSender<Seen>,
    link: LinkProbe<'_>,
) -> SocketEnd {
    // Repaint bytes still to skip, and the offset of the next live byte (None until
    // `attached`).
    let mut skip: usize = 0;
    let mut next: Option<u64> = None;
    let mut exited = false;
    let mut reader = AttachReader::new(socket);
    loop {
        let frame = tokio::select! {
            frame = reader.next() => frame,
            command = commands.recv() => match command {
                Some(Command::Drop) => {
                    reader.close(CLOSE_WAIT).await;
                    return SocketEnd::Lost;
                }
                Some(Command::Reattach) => continue,
                Some(Command::Stop) | None => {
                    reader.close(CLOSE_WAIT).await;
                    return SocketEnd::Stop;
                }
            },
        };
        let frame = match frame {
            Ok(f) => f,
            // What is not an attach frame is skipped; the line check sees only output.
            Err(ReadError::NotAFrame { .. } | ReadError::Fragmented) => continue,
            // A failed read, or a pong that could not be sent: the socket is gone.
            Err(ReadError::Socket(_)) => return ended(exited),
        };
        match frame {
            Incoming::Text(parsed) => {
                match parsed {
                    AttachFrame::Attached {
                        stream,
                        offset,
                        prelude,
                        replay,
                        ..
                    } => {
                        let was_attached = tally.borrow().stream.is_some();
                        if was_attached && link.attached().await {
                            // A client that comes back while the harness reconnects misses the
                            // link's change if it happened before it was in; the descriptor,
                            // read once it is in (so no later change is missed either), says.
                            let _ = events.send(Seen::Link(LinkState::Attached, Instant::now()));
                        }
                        let mut t = tally.borrow_mut();
                        let resuming = t.stream.as_deref() == Some(stream.as_str());
                        if t.stream.is_some() {
                            t.resumes += 1;
                        }
                        if resuming && replay == Replay::Resume {
                            if offset > t.high {
                                t.stream_lost += offset - t.high;
                            } else if offset < t.high {
                                t.stream_repeated += t.high - offset;
                            }
                        } else if t.stream.is_some() {
                            // The daemon could not resume: the repaint replaces the bytes in
                            // between, so the line numbering restarts.
                            t.resume_repaints += 1;
                            t.check.resync();
                        }
                        t.stream = Some(stream);
                        t.high = t.high.max(offset);
                        if !resuming {
                            t.high = offset;
                        }
                        skip = prelude;
                        next = Some(offset);
                    }
                    AttachFrame::Resynced { offset, prelude } => {
                        let mut t = tally.borrow_mut();
                        t.check.resync();
                        t.high = offset;
                        skip = prelude;
                        next = Some(offset);
                    }
                    AttachFrame::Desync { .. } => tally.borrow_mut().desyncs += 1,
                    AttachFrame::Attachment { state } => {
                        // The suite may have stopped listening; then nobody needs it.
                        let _ = events.send(Seen::Link(state, Instant::now()));
                    }
                    AttachFrame::Exit { reason, detail, .. } => {
                        exited = true;
                        // As above.
                        let _ = events.send(Seen::Exit {
                            reason,
                            detail,
                            at: Instant::now(),
                        });
                    }
                    AttachFrame::Resized { .. }
                    | AttachFrame::State { .. }
                    | AttachFrame::Error { .. } => {}
                }
            }
            Incoming::Binary(data) => {
                let Some(at) = next else { continue };
                let from_prelude = skip.min(data.len());
                skip -= from_prelude;
                let live = &data[from_prelude..];
                if live.is_empty() {
                    continue;
                }
                let mut t = tally.borrow_mut();
                // Bytes below what the client has are dropped, as a resuming client does;
                // the daemon was asked for none of them, so the resume check above counted
                // them already.
                let fresh_from = t.high.saturating_sub(at).min(live.len() as u64) as usize;
                t.check.feed(&live[fresh_from..]);
                let after = at + live.len() as u64;
                t.high = t.high.max(after);
                next = Some(after);
            }
            Incoming::Closed(_) | Incoming::Ended => return ended(exited),
        }
    }
}

fn ended(exited: bool) -> SocketEnd {
    if exited {
        SocketEnd::Exited
    } else {
        SocketEnd::Lost
    }
}
