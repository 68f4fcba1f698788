//! `atc attach ID|NAME`: connects this terminal to a session over the attach WebSocket.
//! Output bytes go to stdout as they arrive, every `read()` of stdin goes to the session as
//! one binary frame, and window size changes are sent as `resize` messages. `Ctrl-\` (0x1c)
//! detaches and is not forwarded. With `--watch` the attach is watch-only (`?mode=watch`):
//! keys other than `Ctrl-\` are dropped here and the window's size is not sent.
//!
//! Invariant: the terminal is raw only inside [`attach_to`]'s [`RawMode`] guard, and nothing
//! is printed to the user while it is raw except session output and the link status line
//! (`link_status`: drawn over the bottom row while a remote link is down, erased when it is
//! back); the `[detached]` / `[session exited: ..]` notes and any error are printed after the
//! guard is dropped. Every
//! way out of the pump (detach, exit frame, SIGTERM/SIGHUP/SIGINT, daemon gone, protocol error)
//! is an ordinary return, so the guard always drops; a panic drops it while unwinding.
//!
//! When stdin is not a terminal (a script), raw mode is skipped and the session keeps its own
//! size (a script must not shrink it to 80x24). Stdin reaching EOF stops input but not output:
//! the stream continues until the session exits, the daemon closes, or a signal arrives, like
//! `cmd | ssh host`. A script that wants to leave earlier sends byte 0x1c.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use actix_http::ws::Item;
use atc_client::atc_protocol::{AttachFrame, ClientFrame, ErrorCode, ExitReason};
use awc::ws::{CloseCode, CloseReason, Frame, Message};
use bytes::Bytes;
use clap::Args;
use futures_util::{SinkExt, StreamExt};
use rustix::process::Signal as Sig;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::mpsc;

use super::link_status::{self, LinkStatus};
use super::output;
use super::terminal::{self, AltScreenTracker, RawMode, TermSize};
use atc_client::atc_protocol::AttachMode;
use atc_client::{routes, DaemonClient, Descriptor, SessionLabels, WsConnection};

/// Arguments of `atc attach`.
#[derive(Debug, Args)]
pub struct AttachArgs {
    /// Session id (or the short id from `atc ls`) or name.
    pub session: String,
    /// Watch only: keys are not sent (Ctrl-\ still detaches) and this terminal's size does not
    /// change the session's.
    #[arg(long)]
    pub watch: bool,
}

impl AttachArgs {
    /// How to attach.
    pub fn mode(&self) -> AttachMode {
        if self.watch {
            AttachMode::Watch
        } else {
            AttachMode::Interactive
        }
    }
}

/// The input byte that detaches: `Ctrl-\`, which few programs use (it is SIGQUIT in a cooked
/// terminal), so taking it from the session costs little.
pub const DETACH_BYTE: u8 = 0x1c;

/// How many stdin reads may wait for the socket. Small, so a stalled connection stops the
/// reader thread (through `blocking_send`) instead of queueing keystrokes in memory.
const INPUT_QUEUE: usize = 16;

/// Bytes asked for per stdin read. Keystrokes arrive a few bytes at a time; pastes come in
/// pieces of at most this size, each one frame.
const INPUT_READ_SIZE: usize = 8 * 1024;

/// How long to wait for our close frame to be written when leaving; the daemon may already be
/// gone, and leaving must not hang on it.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// How an attach ended without an error.
#[derive(Debug, PartialEq)]
enum Ended {
    /// The user pressed `Ctrl-\` (or a script sent 0x1c).
    Detached,
    /// The session's harness exited; the daemon's `exit` frame says how.
    Exited(ExitInfo),
    /// The CLI received a terminating signal; its number.
    Signalled(i32),
}

/// What an `exit` frame says, as the CLI reports it.
#[derive(Debug, Default, PartialEq)]
struct ExitInfo {
    code: Option<i32>,
    signal: Option<i32>,
    reason: Option<ExitReason>,
}

/// What the CLI does with a text frame from the attach socket. `exit` and `error` end or
/// explain the attach, and `state` / `attachment` may change the link status line; the bytes
/// that follow a desync repaint the screen by themselves, and `attached` and `resized`
/// change nothing for a raw terminal.
#[derive(Debug, PartialEq)]
enum ServerText {
    Exit(ExitInfo),
    Error { code: ErrorCode, message: String },
    Link(LinkStatus),
    Other,
}

/// Attaches to the session until detach, exit, signal or failure. Exit code 0 for detach and
/// session exit, 128+N for signal N, and an error (exit 1 from `main`) otherwise.
pub async fn run(client: &DaemonClient, args: AttachArgs) -> anyhow::Result<i32> {
    let session = client.find_session(&args.session).await?;
    attach_to(client, session, args.mode()).await
}

/// [`run`] for a session already looked up (`atc spawn --attach` has its descriptor).
pub async fn attach_to(
    client: &DaemonClient,
    session: Descriptor,
    mode: AttachMode,
) -> anyhow::Result<i32> {
    if !session.alive {
        anyhow::bail!(
            "session {} has exited; revive it with `atc revive {}`, or see its last screen with \
             `atc screen {}`",
            session.label(),
            session.short_id(),
            session.short_id()
        );
    }
    let stdin_is_tty = std::io::stdin().is_terminal();
    let size = terminal::tty_size().unwrap_or_else(|| keep_session_size(&session));
    // Registered before raw mode so that a registration failure leaves the terminal alone,
    // and so that from raw mode on, these signals end the pump instead of the process.
    let mut signals = Signals::register()?;
    let mut ws = client
        .ws_connect(&routes::attach_as(session.id, size.cols, size.rows, mode))
        .await?;
    let input = terminal::spawn_stdin_reader(INPUT_QUEUE, INPUT_READ_SIZE);

    let raw = if stdin_is_tty {
        Some(RawMode::enter()?)
    } else {
        None
    };
    let mut alt_screen = AltScreenTracker::default();
    let mut status = StatusLine::new(std::io::stdout().is_terminal());
    // Drawn now and again after the repaint, which clears the screen.
    status.show(LinkStatus::of(&session), &mut std::io::stdout())?;
    let ended = pump(
        &mut ws,
        Pumped {
            input,
            signals: &mut signals,
            raw: raw.as_ref(),
            alt_screen: &mut alt_screen,
            status: &mut status,
            mode,
        },
        size,
    )
    .await;
    status.leave();
    if ended.is_ok() {
        say_goodbye(&mut ws).await;
    }
    terminal::hand_back_terminal(alt_screen.in_alt_screen());
    drop(raw);

    if ended.is_err() {
        // The error is printed by the caller; start it on a line of its own, since the
        // session's output may have left the cursor mid-line.
        output::note("\r");
    }
    match ended? {
        Ended::Detached => {
            output::note("\r\n[detached]");
            Ok(0)
        }
        Ended::Exited(info) => {
            output::note(&format!("\r\n{}", exit_note(&info)));
            Ok(0)
        }
        Ended::Signalled(signo) => {
            output::note(&format!("\r\n[detached: received signal {signo}]"));
            Ok(128 + signo)
        }
    }
}

/// The size a client without a terminal reports: the session's own, since the session's size
/// is the minimum over attached clients and a script must not shrink it to 80x24.
fn keep_session_size(session: &Descriptor) -> TermSize {
    match (session.cols, session.rows) {
        (cols, rows) if cols > 0 && rows > 0 => TermSize { cols, rows },
        _ => terminal::FALLBACK_SIZE,
    }
}

/// What [`pump`] reads from and writes to besides the socket.
struct Pumped<'a> {
    input: mpsc::Receiver<Vec<u8>>,
    signals: &'a mut Signals,
    raw: Option<&'a RawMode>,
    alt_screen: &'a mut AltScreenTracker,
    status: &'a mut StatusLine,
    mode: AttachMode,
}

/// The link status as the user sees it: drawn over the bottom row when stdout is a terminal,
/// else one note on stderr per change.
struct StatusLine {
    overlay: bool,
    /// What the user is being shown.
    shown: LinkStatus,
    /// The row the line was drawn on, to erase that one even if the window changed since.
    drawn_on: Option<u16>,
}

impl StatusLine {
    fn new(overlay: bool) -> StatusLine {
        StatusLine {
            overlay,
            shown: LinkStatus::Up,
            drawn_on: None,
        }
    }

    /// Shows `status` if it is news.
    fn show(&mut self, status: LinkStatus, out: &mut impl Write) -> std::io::Result<()> {
        if status == self.shown {
            return Ok(());
        }
        self.shown = status;
        if !self.overlay {
            // `\r` first: stdin may be raw, and the note must start at the left edge.
            output::note(&format!(
                "\r[{}]\r",
                status
                    .line()
                    .unwrap_or("atc: the session is reachable again")
            ));
            return Ok(());
        }
        self.paint(out)
    }

    /// Session output may have painted over the line: draw it again while it is up.
    fn after_output(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        if self.overlay && self.shown != LinkStatus::Up {
            self.paint(out)?;
        }
        Ok(())
    }

    fn paint(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        let size = terminal::tty_size().unwrap_or(terminal::FALLBACK_SIZE);
        match self.shown.line() {
            Some(text) => {
                out.write_all(link_status::overlay(text, size.cols, size.rows).as_bytes())?;
                self.drawn_on = Some(size.rows);
            }
            None => {
                if let Some(row) = self.drawn_on.take() {
                    out.write_all(link_status::clear_overlay(row).as_bytes())?;
                }
            }
        }
        out.flush()
    }

    /// Erases the line on the way out, so the shell prompt does not sit under a stale one.
    fn leave(&mut self) {
        if let Some(row) = self.drawn_on.take() {
            let mut stdout = std::io::stdout().lock();
            // Best effort on the way out: a terminal that is gone has no line to erase.
            let _ = stdout
                .write_all(link_status::clear_overlay(row).as_bytes())
                .and_then(|()| stdout.flush());
        }
    }
}

/// Moves bytes both ways until something ends the attach. Returns instead of exiting on every
/// path so the caller can restore the terminal.
async fn pump(
    ws: &mut WsConnection,
    pumped: Pumped<'_>,
    initial: TermSize,
) -> anyhow::Result<Ended> {
    let Pumped {
        mut input,
        signals,
        raw,
        alt_screen,
        status,
        mode,
    } = pumped;
    let mut stdout = std::io::stdout().lock();
    let write_err = |err: std::io::Error| anyhow::anyhow!("cannot write to stdout: {err}");
    let mut input_open = true;
    let mut last_size = initial;
    let mut fragment: Option<Fragment> = None;
    let mut daemon_error: Option<String> = None;
    loop {
        tokio::select! {
            frame = ws.next() => {
                let frame = match frame {
                    Some(Ok(frame)) => frame,
                    Some(Err(err)) => anyhow::bail!(
                        "the attach connection broke ({err}); check the daemon with `atc ls`"
                    ),
                    None => anyhow::bail!(
                        "lost the connection to the daemon; if it stopped, start it again with \
                         `atc daemon`, otherwise attach again"
                    ),
                };
                let step = match frame {
                    Frame::Binary(bytes) => Step::Output(bytes),
                    Frame::Text(bytes) => Step::Text(bytes),
                    Frame::Continuation(item) => reassemble(&mut fragment, item)?,
                    Frame::Ping(payload) => {
                        send(ws, Message::Pong(payload)).await?;
                        Step::Nothing
                    }
                    Frame::Pong(_) => Step::Nothing,
                    Frame::Close(reason) => {
                        anyhow::bail!("{}", close_message(reason, daemon_error.take()))
                    }
                };
                match step {
                    Step::Output(bytes) => {
                        alt_screen.feed(&bytes);
                        stdout
                            .write_all(&bytes)
                            .and_then(|()| stdout.flush())
                            .map_err(write_err)?;
                        status.after_output(&mut stdout).map_err(write_err)?;
                    }
                    Step::Text(bytes) => match parse_text(&bytes) {
                        ServerText::Exit(info) => return Ok(Ended::Exited(info)),
                        ServerText::Error { code, message } => {
                            daemon_error = Some(format!("{code}: {message}"));
                        }
                        ServerText::Link(link) => {
                            status.show(link, &mut stdout).map_err(write_err)?;
                        }
                        ServerText::Other => {}
                    },
                    Step::Nothing => {}
                }
            }
            chunk = input.recv(), if input_open => match chunk {
                Some(chunk) => {
                    let (before, detach) = split_at_detach(&chunk);
                    // A watcher's keys stay here: the daemon would refuse them anyway, and
                    // each refusal would be an error frame to read.
                    if !before.is_empty() && mode == AttachMode::Interactive {
                        send(ws, Message::Binary(Bytes::copy_from_slice(before))).await?;
                    }
                    if detach {
                        return Ok(Ended::Detached);
                    }
                }
                None => input_open = false,
            },
            _ = signals.winch.recv() => {
                if mode == AttachMode::Interactive {
                    send_size_if_changed(ws, &mut last_size).await?;
                }
            }
            _ = signals.cont.recv() => {
                if let Some(raw) = raw {
                    raw.reapply()?;
                }
                // The window may have been resized while we were stopped.
                if mode == AttachMode::Interactive {
                    send_size_if_changed(ws, &mut last_size).await?;
                }
            }
            _ = signals.term.recv() => return Ok(Ended::Signalled(Sig::TERM.as_raw())),
            _ = signals.hup.recv() => return Ok(Ended::Signalled(Sig::HUP.as_raw())),
            _ = signals.int.recv() => return Ok(Ended::Signalled(Sig::INT.as_raw())),
        }
    }
}

/// What one received frame amounts to once fragments are joined.
enum Step {
    Output(Bytes),
    Text(Bytes),
    Nothing,
}

/// A message the daemon split into continuation frames. Binary pieces are written as they
/// come (output has no message boundaries); text pieces are collected until the last.
enum Fragment {
    Binary,
    Text(Vec<u8>),
}

fn reassemble(fragment: &mut Option<Fragment>, item: Item) -> anyhow::Result<Step> {
    let step = match (fragment.take(), item) {
        (None, Item::FirstBinary(bytes)) => {
            *fragment = Some(Fragment::Binary);
            Step::Output(bytes)
        }
        (None, Item::FirstText(bytes)) => {
            *fragment = Some(Fragment::Text(bytes.to_vec()));
            Step::Nothing
        }
        (Some(Fragment::Binary), Item::Continue(bytes)) => {
            *fragment = Some(Fragment::Binary);
            Step::Output(bytes)
        }
        (Some(Fragment::Binary), Item::Last(bytes)) => Step::Output(bytes),
        (Some(Fragment::Text(mut text)), Item::Continue(bytes)) => {
            text.extend_from_slice(&bytes);
            *fragment = Some(Fragment::Text(text));
            Step::Nothing
        }
        (Some(Fragment::Text(mut text)), Item::Last(bytes)) => {
            text.extend_from_slice(&bytes);
            Step::Text(Bytes::from(text))
        }
        _ => anyhow::bail!(
            "the daemon sent a malformed fragmented WebSocket message; check that `atc` and \
             the daemon are the same version"
        ),
    };
    Ok(step)
}

/// Sends a `resize` when the terminal's size differs from the last one sent.
async fn send_size_if_changed(ws: &mut WsConnection, last: &mut TermSize) -> anyhow::Result<()> {
    match terminal::tty_size() {
        Some(size) if size != *last => {
            *last = size;
            send(ws, Message::Text(resize_message(size).into())).await
        }
        _ => Ok(()),
    }
}

async fn send(ws: &mut WsConnection, message: Message) -> anyhow::Result<()> {
    ws.send(message)
        .await
        .map_err(|err| anyhow::anyhow!("cannot send to the daemon ({err}); check it with `atc ls`"))
}

/// Closes the socket with the WebSocket close handshake: our `Close`, then the daemon's (which
/// it also sends by itself after an `exit` frame), so the daemon sees a clean detach rather
/// than a connection cut mid-stream. Frames arriving meanwhile are dropped: the user has left.
/// Bounded by [`CLOSE_GRACE`] and best effort: on a dead connection there is no one to tell.
async fn say_goodbye(ws: &mut WsConnection) {
    let handshake = async {
        let close = Message::Close(Some(CloseReason::from(CloseCode::Normal)));
        if ws.send(close).await.is_err() {
            return;
        }
        while let Some(Ok(frame)) = ws.next().await {
            if matches!(frame, Frame::Close(_)) {
                return;
            }
        }
    };
    // A timeout means the daemon did not answer in time; leaving anyway is the point.
    let _ = tokio::time::timeout(CLOSE_GRACE, handshake).await;
}

/// Splits an input chunk at the detach byte: the bytes before it (to forward) and whether it
/// was there. Bytes after it are dropped: the user asked to leave.
pub fn split_at_detach(chunk: &[u8]) -> (&[u8], bool) {
    let mut parts = chunk.splitn(2, |byte| *byte == DETACH_BYTE);
    let before = parts.next().unwrap_or_default();
    (before, parts.next().is_some())
}

/// The `resize` text frame for a new window size.
fn resize_message(size: TermSize) -> String {
    serde_json::to_string(&ClientFrame::Resize {
        cols: size.cols,
        rows: size.rows,
    })
    // A two-integer tagged struct always serializes.
    .unwrap_or_default()
}

/// A text frame that does not parse is treated like one we do not act on: the daemon may add
/// frame types, and none of the ones we need can be mistaken for it.
fn parse_text(bytes: &[u8]) -> ServerText {
    match serde_json::from_slice::<AttachFrame>(bytes) {
        Ok(AttachFrame::Exit {
            code,
            signal,
            reason,
            ..
        }) => ServerText::Exit(ExitInfo {
            code,
            signal,
            reason: Some(reason),
        }),
        Ok(AttachFrame::Error { code, message }) => ServerText::Error { code, message },
        Ok(_) | Err(_) => LinkStatus::from_text(bytes).map_or(ServerText::Other, ServerText::Link),
    }
}

/// `[session exited: code X / signal Y]`, naming only what the exit frame carries, plus the
/// reason when it is not a plain exit (e.g. `killed`).
fn exit_note(info: &ExitInfo) -> String {
    let mut parts = Vec::new();
    if let Some(code) = info.code {
        parts.push(format!("code {code}"));
    }
    if let Some(signal) = info.signal {
        parts.push(format!("signal {signal}"));
    }
    let mut note = if parts.is_empty() {
        "[session exited".to_string()
    } else {
        format!("[session exited: {}", parts.join(" / "))
    };
    if let Some(reason) = info.reason.filter(|r| *r != ExitReason::Exited) {
        let reason = reason.as_str();
        note.push_str(&format!(" ({reason})"));
    }
    note.push(']');
    note
}

/// Why the daemon closed the socket, for the error message. A close without an `exit` frame
/// means the attach ended for another reason (daemon stopping, session forgotten, an error).
fn close_message(reason: Option<CloseReason>, daemon_error: Option<String>) -> String {
    if let Some(error) = daemon_error {
        return format!("the daemon ended the attach: {error}");
    }
    let detail = reason
        .and_then(|r| r.description)
        .filter(|d| !d.is_empty())
        .map(|d| format!(" ({d})"))
        .unwrap_or_default();
    format!("the daemon closed the attach connection{detail}; see `atc ls` for the session's state")
}

/// The signals that end an attach cleanly, plus SIGWINCH for resizes and SIGCONT for coming
/// back from a stop.
struct Signals {
    winch: Signal,
    cont: Signal,
    term: Signal,
    hup: Signal,
    int: Signal,
}

impl Signals {
    fn register() -> anyhow::Result<Signals> {
        let register = |kind: SignalKind| {
            signal(kind).map_err(|err| anyhow::anyhow!("cannot watch for signals: {err}"))
        };
        Ok(Signals {
            winch: register(SignalKind::window_change())?,
            cont: register(SignalKind::from_raw(Sig::CONT.as_raw()))?,
            term: register(SignalKind::terminate())?,
            hup: register(SignalKind::hangup())?,
            int: register(SignalKind::interrupt())?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detach_byte_splits_input() {
        assert_eq!(split_at_detach(b"abc"), (&b"abc"[..], false));
        assert_eq!(split_at_detach(b"ab\x1ccd"), (&b"ab"[..], true));
        assert_eq!(split_at_detach(b"\x1c"), (&b""[..], true));
        assert_eq!(split_at_detach(b""), (&b""[..], false));
    }

    #[test]
    fn exit_frame_is_recognised() {
        let text = br#"{"type":"exit","code":0,"signal":null,"reason":"exited","detail":""}"#;
        assert_eq!(
            parse_text(text),
            ServerText::Exit(ExitInfo {
                code: Some(0),
                signal: None,
                reason: Some(ExitReason::Exited),
            })
        );
    }

    #[test]
    fn other_and_unknown_frames_are_ignored() {
        for text in [
            &br#"{"type":"attached","session":"x","stream":"s","cols":80,"rows":24,"offset":0,"prelude":10,"replay":"screen"}"#[..],
            br#"{"type":"desync","dropped":100}"#,
            br#"{"type":"resynced","offset":5,"prelude":3}"#,
            br#"{"type":"brand-new"}"#,
            b"not json",
        ] {
            assert_eq!(parse_text(text), ServerText::Other);
        }
    }

    #[test]
    fn error_frame_carries_code_and_message() {
        let text = br#"{"type":"error","code":"session_dead","message":"gone"}"#;
        assert_eq!(
            parse_text(text),
            ServerText::Error {
                code: ErrorCode::SessionDead,
                message: "gone".into()
            }
        );
    }

    #[test]
    fn exit_note_names_what_is_known() {
        let code = ExitInfo {
            code: Some(3),
            ..ExitInfo::default()
        };
        assert_eq!(exit_note(&code), "[session exited: code 3]");
        let killed = ExitInfo {
            signal: Some(9),
            reason: Some(ExitReason::Killed),
            ..ExitInfo::default()
        };
        assert_eq!(exit_note(&killed), "[session exited: signal 9 (killed)]");
        let both = ExitInfo {
            code: Some(1),
            signal: Some(2),
            reason: Some(ExitReason::Exited),
        };
        assert_eq!(exit_note(&both), "[session exited: code 1 / signal 2]");
        assert_eq!(exit_note(&ExitInfo::default()), "[session exited]");
    }

    #[test]
    fn scripts_keep_the_session_size() {
        let session = Descriptor {
            cols: 132,
            rows: 50,
            ..Descriptor::default()
        };
        assert_eq!(
            keep_session_size(&session),
            TermSize {
                cols: 132,
                rows: 50
            }
        );
        assert_eq!(
            keep_session_size(&Descriptor::default()),
            terminal::FALLBACK_SIZE
        );
    }

    #[test]
    fn resize_message_shape() -> anyhow::Result<()> {
        let value: serde_json::Value =
            serde_json::from_str(&resize_message(TermSize { cols: 90, rows: 30 }))?;
        assert_eq!(
            value,
            serde_json::json!({"type": "resize", "cols": 90, "rows": 30})
        );
        Ok(())
    }

    #[test]
    fn fragments_are_reassembled() -> anyhow::Result<()> {
        let mut fragment = None;
        assert!(matches!(
            reassemble(
                &mut fragment,
                Item::FirstText(Bytes::from_static(b"{\"type\":"))
            )?,
            Step::Nothing
        ));
        match reassemble(&mut fragment, Item::Last(Bytes::from_static(b"\"exit\"}")))? {
            Step::Text(text) => assert_eq!(&text[..], br#"{"type":"exit"}"#),
            _ => anyhow::bail!("expected the joined text"),
        }
        assert!(matches!(
            reassemble(&mut fragment, Item::FirstBinary(Bytes::from_static(b"ab")))?,
            Step::Output(_)
        ));
        assert!(matches!(
            reassemble(&mut fragment, Item::Last(Bytes::from_static(b"cd")))?,
            Step::Output(_)
        ));
        assert!(reassemble(&mut fragment, Item::Continue(Bytes::new())).is_err());
        Ok(())
    }
}
