//! Reverse forwards over `/tunnel` (spec §12): a socket inside the imp whose clients are
//! relayed to us. [`ImpdClient::listen_unix`] opens the control socket and resolves once impd
//! says `listening`; the [`ReverseForward`] then yields one connection id per guest client,
//! and [`ReverseForward::accept`] opens that client's relay socket.
//!
//! A [`Relay`] carries raw bytes both ways under impd's flow control: each side keeps at most
//! 1 MiB unacknowledged, and we send at most 64 KiB per message (impd closes a socket that
//! breaks either rule with 1002). We acknowledge bytes when the caller has taken them from
//! [`Relay::read`], so a caller that stops reading stops the guest, not our memory.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};

use super::client::ImpdClient;
use super::error::{ImpPortError, ImpdCode};
use super::ws_link::{self, Incoming, LinkReader, LinkWriter};

/// Unacknowledged bytes allowed each way (spec §12, §14).
pub const TUNNEL_WINDOW: usize = 1024 * 1024;

/// Largest binary message we send on a relay.
pub const TUNNEL_MESSAGE: usize = 64 * 1024;

/// Close code for a message we cannot parse.
const PROTOCOL_ERROR: u16 = 1002;

/// A listening reverse forward. As a [`Stream`] it yields the id of each guest connection and
/// ends with one `Err` when the control socket closes: impd's `error` if it sent one, `LOST`
/// for close 4000 (the imp slept or the listener ended: wait for the imp to run, then listen
/// again), `UNAUTHORIZED` for 1008 (token revoked), otherwise `CLOSED` (`data.closeCode`).
/// Dropping it (or [`ReverseForward::close`]) ends the listener.
pub struct ReverseForward {
    client: ImpdClient,
    name: String,
    listener: String,
    path: String,
    link: LinkWriter,
    rx: mpsc::UnboundedReceiver<Result<u64, ImpPortError>>,
}

impl ReverseForward {
    /// impd's id of this listener.
    pub fn listener(&self) -> &str {
        &self.listener
    }

    /// The guest path that listens.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Ends the listener (closes the control socket with 1000).
    pub fn close(&self) -> Result<(), ImpPortError> {
        self.link.close(1000)
    }

    /// Opens the relay for guest connection `connection` and resolves once impd says
    /// `opened`. `NOT_FOUND` means the listener or imp is gone; `TUNNEL_LIMIT` that 64 relays
    /// are open already.
    pub async fn accept(&self, connection: u64) -> Result<Relay, ImpPortError> {
        let framed = self.client.open_socket("/tunnel").await?;
        let (link, mut reader) = ws_link::split(framed);
        link.send_json(&json!({
            "type": "accept",
            "name": self.name,
            "listener": self.listener,
            "connection": connection,
        }))?;
        let limit = self.client.timeouts().call;
        tokio::time::timeout(limit, handshake(&mut reader, "opened"))
            .await
            .map_err(|_| ImpPortError::unreachable(format!("no `opened` within {limit:?}")))??;
        let window = Arc::new(Window {
            unacked: AtomicUsize::new(0),
            ended: AtomicBool::new(false),
            changed: Notify::new(),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        actix_rt::spawn(relay_pump(reader, tx, window.clone()));
        Ok(Relay {
            reader: RelayReader {
                rx,
                link: link.clone(),
                done: false,
                end: None,
            },
            writer: RelayWriter { link, window },
        })
    }
}

impl Stream for ReverseForward {
    type Item = Result<u64, ImpPortError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

impl ImpdClient {
    /// Listens on the unix socket `path` (absolute) inside imp `name` and forwards its clients
    /// to us. Resolves after `listening`; impd's refusal (`LISTEN_FAILED`, `AGENT_OUTDATED`,
    /// `NOT_FOUND`, ...) is the error.
    pub async fn listen_unix(
        &self,
        name: &str,
        path: &str,
    ) -> Result<ReverseForward, ImpPortError> {
        let framed = self.open_socket("/tunnel").await?;
        let (link, mut reader) = ws_link::split(framed);
        link.send_json(&json!({"type": "listen", "name": name, "network": "unix", "path": path}))?;
        // The first listen wakes the imp, so it gets a call's time, not an open's.
        let limit = self.timeouts().call;
        let listening = tokio::time::timeout(limit, handshake(&mut reader, "listening"))
            .await
            .map_err(|_| ImpPortError::unreachable(format!("no `listening` within {limit:?}")))??;
        let listener = listening["listener"]
            .as_str()
            .ok_or_else(|| ImpPortError::bad_message("`listening` without a listener id"))?
            .to_string();
        let path = listening["path"].as_str().unwrap_or(path).to_string();
        let (tx, rx) = mpsc::unbounded_channel();
        actix_rt::spawn(control_pump(reader, tx));
        Ok(ReverseForward {
            client: self.clone(),
            name: name.to_string(),
            listener,
            path,
            link,
            rx,
        })
    }
}

/// Reads until the message of type `want`; an `error` message, a close or garbage first is
/// the error.
async fn handshake(reader: &mut LinkReader, want: &str) -> Result<Value, ImpPortError> {
    let mut refusal = None;
    loop {
        match reader.next().await {
            Some(Incoming::Text(text)) => match parse_text(&text) {
                Ok((kind, value)) if kind == want => return Ok(value),
                Ok((kind, value)) if kind == "error" => refusal = Some(tunnel_error(&value)),
                Ok(_) => {}
                Err(e) => {
                    reader.close(PROTOCOL_ERROR);
                    return Err(e);
                }
            },
            Some(Incoming::Binary(_)) => {
                reader.close(PROTOCOL_ERROR);
                return Err(ImpPortError::bad_message(format!("data before `{want}`")));
            }
            Some(Incoming::Closed { code, reason }) => {
                return Err(refusal.unwrap_or_else(|| close_error(code, &reason)))
            }
            None => return Err(close_error(None, "ended")),
        }
    }
}

/// Forwards connection ids until the control socket ends, then its end as one error.
async fn control_pump(
    mut reader: LinkReader,
    tx: mpsc::UnboundedSender<Result<u64, ImpPortError>>,
) {
    let mut refusal = None;
    while let Some(incoming) = reader.next().await {
        let item = match incoming {
            Incoming::Text(text) => match parse_text(&text) {
                Ok((kind, value)) if kind == "connection" => match value["id"].as_u64() {
                    Some(id) => Ok(id),
                    None => {
                        reader.close(PROTOCOL_ERROR);
                        Err(ImpPortError::bad_message("`connection` without an id"))
                    }
                },
                Ok((kind, value)) if kind == "error" => {
                    refusal = Some(tunnel_error(&value));
                    continue;
                }
                Ok(_) => continue,
                Err(e) => {
                    reader.close(PROTOCOL_ERROR);
                    Err(e)
                }
            },
            Incoming::Binary(_) => {
                reader.close(PROTOCOL_ERROR);
                Err(ImpPortError::bad_message("data on a control socket"))
            }
            Incoming::Closed { code, reason } => {
                Err(refusal.take().unwrap_or_else(|| close_error(code, &reason)))
            }
        };
        let last = item.is_err();
        if tx.send(item).is_err() || last {
            // Nobody listens any more, or the forward has ended: one error ends the stream.
            return;
        }
    }
}

/// A `{type, ...}` text message.
fn parse_text(text: &[u8]) -> Result<(String, Value), ImpPortError> {
    let value: Value = serde_json::from_slice(text).map_err(|e| {
        ImpPortError::bad_message(format!("a tunnel message that is not JSON: {e}"))
    })?;
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| ImpPortError::bad_message("a tunnel message without a type"))?
        .to_string();
    Ok((kind, value))
}

/// A tunnel `error` message (no `data` on tunnels; code may be absent).
fn tunnel_error(value: &Value) -> ImpPortError {
    ImpPortError::new(
        ImpdCode::parse(value["code"].as_str().unwrap_or_default()),
        value["message"].as_str().unwrap_or_default(),
    )
}

/// What a tunnel close without an `error` means.
fn close_error(code: Option<u16>, reason: &str) -> ImpPortError {
    let mut e = ImpPortError::closed(code, reason);
    match code {
        Some(4000) => {
            e.code = ImpdCode::Lost;
            e.message = format!("the guest side was lost ({reason})");
        }
        Some(1008) => {
            e.code = ImpdCode::Unauthorized;
            e.message = format!("impd closed the tunnel: the token was revoked ({reason})");
        }
        _ => {}
    }
    e
}

/// Flow-control state of one relay's sending side.
struct Window {
    /// Bytes sent and not yet acknowledged by impd.
    unacked: AtomicUsize,
    /// The relay socket ended: writers stop waiting.
    ended: AtomicBool,
    /// Woken on every ack and at the end.
    changed: Notify,
}

/// What the relay pump hands to the reader.
enum RelayItem {
    Data(Bytes),
    /// The guest half-closed its side.
    Eof,
    /// The socket ended; `None` after a clean close (1000) without an error.
    End(Option<ImpPortError>),
}

/// One relayed guest connection. Read and write from one task, or split it with
/// [`Relay::into_split`] to do both at once.
pub struct Relay {
    reader: RelayReader,
    writer: RelayWriter,
}

/// The receiving half of a relay.
pub struct RelayReader {
    rx: mpsc::UnboundedReceiver<RelayItem>,
    /// For acks.
    link: LinkWriter,
    done: bool,
    end: Option<ImpPortError>,
}

/// The sending half of a relay.
pub struct RelayWriter {
    link: LinkWriter,
    window: Arc<Window>,
}

impl Relay {
    /// Sends bytes to the guest connection (see [`RelayWriter::write`]).
    pub async fn write(&mut self, bytes: Bytes) -> Result<(), ImpPortError> {
        self.writer.write(bytes).await
    }

    /// The next bytes from the guest (see [`RelayReader::read`]).
    pub async fn read(&mut self) -> Option<Bytes> {
        self.reader.read().await
    }

    /// Half-closes our side: the guest reads end of file.
    pub fn eof(&self) -> Result<(), ImpPortError> {
        self.writer.eof()
    }

    /// Closes the relay socket.
    pub fn close(&self) -> Result<(), ImpPortError> {
        self.writer.close()
    }

    /// Why reading ended, when it was not the guest's eof or a clean close.
    pub fn end_error(&self) -> Option<&ImpPortError> {
        self.reader.end_error()
    }

    /// The two halves, for reading and writing at the same time.
    pub fn into_split(self) -> (RelayReader, RelayWriter) {
        (self.reader, self.writer)
    }
}

impl RelayReader {
    /// The next bytes from the guest, acknowledged to impd as they are handed over; `None` at
    /// the guest's eof or when the socket ended (then [`RelayReader::end_error`] says why if it
    /// was not clean).
    pub async fn read(&mut self) -> Option<Bytes> {
        while !self.done {
            match self.rx.recv().await {
                Some(RelayItem::Data(bytes)) if bytes.is_empty() => {}
                Some(RelayItem::Data(bytes)) => {
                    // A failed ack means the socket is gone; the bytes still count as read.
                    let _ = self
                        .link
                        .send_json(&json!({"type": "ack", "bytes": bytes.len()}));
                    return Some(bytes);
                }
                Some(RelayItem::Eof) | None => self.done = true,
                Some(RelayItem::End(e)) => {
                    self.done = true;
                    self.end = e;
                }
            }
        }
        None
    }

    /// Why reading ended, when it was not the guest's eof or a clean close.
    pub fn end_error(&self) -> Option<&ImpPortError> {
        self.end.as_ref()
    }
}

impl RelayWriter {
    /// Sends bytes in messages of at most 64 KiB, waiting while 1 MiB is unacknowledged.
    /// Fails with the relay's end (`CLOSED`, `LOST`) once the socket is gone.
    pub async fn write(&mut self, bytes: Bytes) -> Result<(), ImpPortError> {
        let mut rest = bytes;
        while !rest.is_empty() {
            let chunk = rest.split_to(rest.len().min(TUNNEL_MESSAGE));
            self.wait_for_room(chunk.len()).await?;
            self.window.unacked.fetch_add(chunk.len(), Ordering::SeqCst);
            self.link.send_binary(chunk)?;
        }
        Ok(())
    }

    /// Half-closes our side.
    pub fn eof(&self) -> Result<(), ImpPortError> {
        self.link.send_json(&json!({"type": "eof"}))
    }

    /// Closes the relay socket.
    pub fn close(&self) -> Result<(), ImpPortError> {
        self.link.close(1000)
    }

    /// Bytes sent and not yet acknowledged.
    pub fn unacked(&self) -> usize {
        self.window.unacked.load(Ordering::SeqCst)
    }

    async fn wait_for_room(&self, len: usize) -> Result<(), ImpPortError> {
        loop {
            let changed = self.window.changed.notified();
            if self.window.ended.load(Ordering::SeqCst) || self.link.is_gone() {
                return Err(ImpPortError::closed(None, "the relay is gone"));
            }
            if self.unacked() + len <= TUNNEL_WINDOW {
                return Ok(());
            }
            changed.await;
        }
    }
}

/// Reads a relay socket: data to the reader, acks to the window, the end to both.
async fn relay_pump(
    mut reader: LinkReader,
    tx: mpsc::UnboundedSender<RelayItem>,
    window: Arc<Window>,
) {
    let mut refusal = None;
    while let Some(incoming) = reader.next().await {
        let item = match incoming {
            Incoming::Binary(bytes) => RelayItem::Data(bytes),
            Incoming::Text(text) => match parse_text(&text) {
                Ok((kind, value)) => match kind.as_str() {
                    "ack" => {
                        let n = value["bytes"].as_u64().unwrap_or(0);
                        let n = usize::try_from(n).unwrap_or(usize::MAX);
                        // Saturating: an over-ack from impd must not wrap the counter. The closure always
                        // answers Some, so the update cannot fail.
                        let _ =
                            window
                                .unacked
                                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |u| {
                                    Some(u.saturating_sub(n))
                                });
                        window.changed.notify_waiters();
                        continue;
                    }
                    "eof" => RelayItem::Eof,
                    "error" => {
                        refusal = Some(tunnel_error(&value));
                        continue;
                    }
                    _ => continue,
                },
                Err(e) => {
                    reader.close(PROTOCOL_ERROR);
                    refusal = Some(e);
                    continue;
                }
            },
            Incoming::Closed { code, reason } => {
                let end = match refusal.take() {
                    Some(e) => Some(e),
                    None if code == Some(1000) => None,
                    None => Some(close_error(code, &reason)),
                };
                RelayItem::End(end)
            }
        };
        // The reader may be gone (dropped half); the pump still tracks acks for the writer.
        let _ = tx.send(item);
    }
    window.ended.store(true, Ordering::SeqCst);
    window.changed.notify_waiters();
}
