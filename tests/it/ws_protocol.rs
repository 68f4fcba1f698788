//! What the attach and events sockets do with frames a careless or hostile client sends
//! (RFC 6455): a frame over the cap is refused from its header (1009), protocol violations close
//! with 1002, text that is not UTF-8 with 1007, and a clean close ends the TCP connection at
//! once. Frames are hand-made on a raw TCP stream, after an upgrade done by hand.

use std::time::{Duration, Instant};

use atc_testkit::{id_of, ChildDaemon, TestDaemon};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// Bounds a wait that should end quickly; only a failure waits this long.
const PROMPT: Duration = Duration::from_secs(5);

/// After a clean close the server's EOF must come well inside this window; the old lingering
/// close took 0.5 to 1 s.
const AT_ONCE: Duration = Duration::from_millis(300);

/// A frame from the server: its opcode and payload.
#[derive(Debug)]
struct ServerFrame {
    opcode: u8,
    payload: Vec<u8>,
}

/// What the client saw when it read for a close frame.
#[derive(Debug, PartialEq, Eq)]
enum Ending {
    /// A close frame with this code.
    Closed(u16),
    /// A close frame without a code.
    ClosedNoCode,
    /// The connection ended without a close frame.
    Eof,
    /// Nothing within the deadline.
    TimedOut,
}

/// A WebSocket on a raw TCP stream.
struct RawWs {
    incoming: Incoming,
    wr: OwnedWriteHalf,
}

/// The read half of a [`RawWs`] and what it buffered.
struct Incoming {
    rd: OwnedReadHalf,
    buf: Vec<u8>,
}

impl RawWs {
    /// Upgrades `path` with the daemon's token.
    async fn open(d: &TestDaemon, path: &str) -> RawWs {
        let addr = d.url.trim_start_matches("http://").to_string();
        let mut stream = TcpStream::connect(&addr).await.expect("connect");
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Authorization: Bearer {}\r\n\r\n",
            d.token
        );
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut buf = Vec::new();
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout(PROMPT, stream.read(&mut chunk))
                .await
                .expect("upgrade answered in time")
                .expect("read upgrade answer");
            assert!(n > 0, "connection closed during the upgrade");
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        assert!(head.starts_with("HTTP/1.1 101"), "not upgraded: {head}");
        let rest = buf.split_off(head_end);
        let (rd, wr) = stream.into_split();
        RawWs {
            incoming: Incoming { rd, buf: rest },
            wr,
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.wr.write_all(bytes).await.expect("send frame");
    }
}

impl Incoming {
    /// Reads more bytes; false on EOF or a reset.
    async fn fill(&mut self, until: Instant) -> Option<bool> {
        let mut chunk = [0u8; 64 * 1024];
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, self.rd.read(&mut chunk)).await {
            Err(_) => None,
            Ok(Ok(0)) | Ok(Err(_)) => Some(false),
            Ok(Ok(n)) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Some(true)
            }
        }
    }

    /// The next whole server frame, if one is buffered.
    fn take_frame(&mut self) -> Option<ServerFrame> {
        let b = &self.buf;
        if b.len() < 2 {
            return None;
        }
        assert_eq!(b[1] & 0x80, 0, "the server masked a frame");
        let (len, at) = match b[1] & 0x7f {
            126 if b.len() >= 4 => (u16::from_be_bytes([b[2], b[3]]) as usize, 4),
            127 if b.len() >= 10 => {
                let mut n = [0u8; 8];
                n.copy_from_slice(&b[2..10]);
                (u64::from_be_bytes(n) as usize, 10)
            }
            126 | 127 => return None,
            n => (n as usize, 2),
        };
        if b.len() < at + len {
            return None;
        }
        let frame = ServerFrame {
            opcode: b[0] & 0x0f,
            payload: b[at..at + len].to_vec(),
        };
        self.buf.drain(..at + len);
        Some(frame)
    }

    /// Skips frames until the server's close frame (or the end), within `within`.
    async fn close_code(&mut self, within: Duration) -> Ending {
        let until = Instant::now() + within;
        loop {
            while let Some(f) = self.take_frame() {
                if f.opcode == 0x8 {
                    return match f.payload.get(..2) {
                        Some(c) => Ending::Closed(u16::from_be_bytes([c[0], c[1]])),
                        None => Ending::ClosedNoCode,
                    };
                }
            }
            match self.fill(until).await {
                None => return Ending::TimedOut,
                Some(false) => return Ending::Eof,
                Some(true) => {}
            }
        }
    }

    /// Whether the server ends the connection within `within`, reading (and dropping) what it
    /// still sends.
    async fn eof_within(&mut self, within: Duration) -> bool {
        let until = Instant::now() + within;
        loop {
            self.buf.clear();
            match self.fill(until).await {
                None => return false,
                Some(false) => return true,
                Some(true) => {}
            }
        }
    }
}

/// A client frame: `first` is FIN, RSV and opcode; masked unless `masked` is false.
fn frame(first: u8, payload: &[u8], masked: bool) -> Vec<u8> {
    let mut out = vec![first];
    let mask_bit = if masked { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.push(mask_bit | n as u8),
        n if n <= 0xffff => {
            out.push(mask_bit | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(mask_bit | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    if masked {
        let key = [0x37, 0xfa, 0x21, 0x3d];
        out.extend_from_slice(&key);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    } else {
        out.extend_from_slice(payload);
    }
    out
}

const FIN: u8 = 0x80;
const TEXT: u8 = 0x1;
const BINARY: u8 = 0x2;
const CLOSE: u8 = 0x8;
const PING: u8 = 0x9;

/// Process `pid`'s resident set in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("read /proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in the status")
}

async fn attach_path(d: &TestDaemon) -> String {
    let id = id_of(&d.spawn("cat").await);
    format!("/v1/sessions/{id}/attach")
}

/// Declares a 2^32-byte binary frame and streams payload behind it (at most 192 MiB, stopping
/// once the server hangs up): the server, process `pid`, must answer 1009 from the header
/// alone.
async fn huge_frame_is_refused_from_its_header(d: &TestDaemon, pid: u32, path: &str) {
    let mut ws = RawWs::open(d, path).await;
    let before = rss_kib(pid);
    let mut header = vec![FIN | BINARY, 0x80 | 127];
    header.extend_from_slice(&(1u64 << 32).to_be_bytes());
    header.extend_from_slice(&[1, 2, 3, 4]);
    ws.send(&header).await;
    ws.send(&[0u8; 16]).await;
    let RawWs {
        mut incoming,
        mut wr,
    } = ws;
    let writer = tokio::spawn(async move {
        let chunk = vec![0x5au8; 64 * 1024];
        for _ in 0..(192 * 16) {
            if wr.write_all(&chunk).await.is_err() {
                break;
            }
        }
        wr
    });
    let ending = incoming.close_code(PROMPT).await;
    let grown_mib = rss_kib(pid).saturating_sub(before) / 1024;
    assert!(
        grown_mib < 100,
        "{path}: RSS grew by {grown_mib} MiB for one declared frame"
    );
    assert_eq!(ending, Ending::Closed(1009), "{path}: a 4 GiB frame header");
    assert!(
        incoming.eof_within(PROMPT).await,
        "{path}: the connection stays up after 1009"
    );
    let _writer = tokio::time::timeout(PROMPT, writer)
        .await
        .expect("the writer stops once the server hung up")
        .expect("writer task");
}

#[actix_rt::test]
async fn a_frame_declaring_four_gib_is_refused_with_1009_on_both_sockets() {
    // A daemon of its own process: the tests share this one, and its memory moves with
    // whatever the others do meanwhile.
    let tmp = tempfile::tempdir().unwrap();
    let config = serde_json::json!({"agents": {"cat": {"bin": "cat"}}});
    let d = ChildDaemon::start(
        &tmp.path().join("state"),
        &config,
        &tmp.path().join("d.log"),
    )
    .await;
    let attach = attach_path(d.api()).await;
    huge_frame_is_refused_from_its_header(d.api(), d.pid(), &attach).await;
    huge_frame_is_refused_from_its_header(d.api(), d.pid(), "/v1/events").await;
    d.stop().await;
}

/// Sends `frame` on a fresh socket at `path` and returns how the server ended it, checking
/// that the TCP connection ends right after the close frame.
async fn ending_for(d: &TestDaemon, path: &str, bytes: &[u8]) -> Ending {
    let mut ws = RawWs::open(d, path).await;
    ws.send(bytes).await;
    let ending = ws.incoming.close_code(PROMPT).await;
    if matches!(ending, Ending::Closed(_)) {
        assert!(
            ws.incoming.eof_within(PROMPT).await,
            "{path}: the connection stays up after {ending:?}"
        );
    }
    ending
}

#[actix_rt::test]
async fn protocol_violations_close_with_1002_and_bad_utf8_with_1007() {
    let d = TestDaemon::start().await;
    let attach = attach_path(&d).await;
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("RSV1 set", frame(FIN | 0x40 | BINARY, b"x", true), 1002),
        ("RSV3 set", frame(FIN | 0x10 | TEXT, b"{}", true), 1002),
        (
            "reserved data opcode 0x3",
            frame(FIN | 0x3, b"x", true),
            1002,
        ),
        (
            "reserved control opcode 0xB",
            frame(FIN | 0xb, b"", true),
            1002,
        ),
        ("unmasked frame", frame(FIN | BINARY, b"x", false), 1002),
        (
            "ping over 125 bytes",
            frame(FIN | PING, &[7u8; 126], true),
            1002,
        ),
        ("fragmented ping", frame(PING, b"p", true), 1002),
        ("continuation without a start", frame(FIN, b"x", true), 1002),
        (
            "text that is not UTF-8",
            frame(FIN | TEXT, b"\xff\xfe{}", true),
            1007,
        ),
        (
            "fragmented text that is not UTF-8",
            [frame(TEXT, b"ok \xce", true), frame(FIN, b"\x28", true)].concat(),
            1007,
        ),
    ];
    for (what, bytes, code) in &cases {
        assert_eq!(
            ending_for(&d, &attach, bytes).await,
            Ending::Closed(*code),
            "attach socket: {what}"
        );
    }
    // The events socket reads the same way; text it ignores must still be UTF-8.
    for (what, bytes, code) in &cases {
        assert_eq!(
            ending_for(&d, "/v1/events", bytes).await,
            Ending::Closed(*code),
            "events socket: {what}"
        );
    }
    // A session survives a client that broke the protocol.
    let (status, _) = d
        .call("GET", attach.trim_end_matches("/attach"), None)
        .await;
    assert_eq!(status, 200);
    d.stop().await;
}

/// The client closes, the server answers, and the server then ends the TCP connection itself.
async fn clean_close_ends_at_once(d: &TestDaemon, path: &str) {
    let mut ws = RawWs::open(d, path).await;
    ws.send(&frame(FIN | CLOSE, &1000u16.to_be_bytes(), true))
        .await;
    assert_eq!(
        ws.incoming.close_code(PROMPT).await,
        Ending::Closed(1000),
        "{path}: close answered"
    );
    let answered = Instant::now();
    let ended = ws.incoming.eof_within(PROMPT).await;
    let took = answered.elapsed();
    assert!(ended, "{path}: the server never ended the connection");
    assert!(
        took < AT_ONCE,
        "{path}: the connection ended {took:?} after the close handshake"
    );
}

#[actix_rt::test]
async fn a_clean_close_ends_the_connection_at_once() {
    let d = TestDaemon::start().await;
    let attach = attach_path(&d).await;
    for _ in 0..3 {
        clean_close_ends_at_once(&d, &attach).await;
        clean_close_ends_at_once(&d, "/v1/events").await;
    }
    d.stop().await;
}
