//! The floor: the thinnest server on the path atc's attach takes, started inside the bench so
//! every echo, throughput and fan-out figure of atc has it beside it from the same run.
//!
//! It is loopback TCP, an HTTP/1.1 upgrade to WebSocket, and a PTY with the same shell atc's
//! `shell` agent runs, on blocking threads: one acceptor, one thread per connection (reading
//! input frames and writing them to the PTY), and one reader per PTY that writes each chunk as
//! one binary frame straight to every attached socket, header and bytes in one vectored write.
//! There is no screen model, no store, no ring and no flow control: a socket that is slow to
//! read holds the PTY back. It answers atc's attach route and `attached` frame and atc's input
//! route (`http.rs`, `ws.rs`), so the bench's own attach client and input call drive it
//! unchanged; sessions are spawned in-process by [`Floor::spawn_shell`].
//!
//! Its CPU is that of its own threads, from `/proc/self/task/<tid>/stat` while a thread runs and
//! from `/proc/thread-self/stat` as it ends ([`Floor::cpu_ticks`]), the counterpart of the
//! daemon's `/proc/<pid>/stat`.

mod http;
mod ws;

use std::collections::{HashMap, HashSet};
use std::io::{self, IoSlice, Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use atc_protocol::{AttachFrame, Replay, SessionId, TermSize};
use pty_process::blocking::{Command, Pty};
use thiserror::Error;

use super::cpu::{read_ticks, Ticks};
use http::Route;
use ws::{Opcode, MAX_HEADER};

/// PTY read size; larger than the kernel hands out per read, so one read is one chunk.
const READ_BUF: usize = 64 << 10;

/// The largest input frame or input body the floor takes.
const MAX_INPUT: usize = 1 << 20;

/// How long ending a session waits for its reader to see the PTY close.
const READER_EXIT_WAIT: Duration = Duration::from_secs(2);

/// A close frame with status 1000 (normal), sent when a session's PTY closes.
const CLOSE_NORMAL: [u8; 4] = [0x88, 0x02, 0x03, 0xE8];

/// The floor could not start, or could not start a session.
#[derive(Debug, Error)]
pub enum FloorError {
    /// Binding or reading the loopback listener.
    #[error("binding the floor's loopback listener: {0}")]
    Bind(io::Error),
    /// Opening or sizing a PTY.
    #[error("opening a PTY for the floor: {0}")]
    Pty(pty_process::Error),
    /// Spawning the shell.
    #[error("spawning {program} on the floor's PTY: {source}")]
    Spawn {
        /// The shell.
        program: String,
        /// Why.
        source: pty_process::Error,
    },
    /// Starting a thread.
    #[error("starting a floor thread: {0}")]
    Thread(io::Error),
}

/// The shell atc's `shell` agent runs: `$SHELL`, else `/bin/sh`.
pub fn default_shell() -> String {
    std::env::var("SHELL")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/bin/sh".to_string())
}

/// A running floor server; dropping it ends its sessions, connections and threads.
pub struct Floor {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

/// What the floor's threads share.
struct Shared {
    sessions: Mutex<HashMap<SessionId, Arc<Session>>>,
    /// Every accepted connection (a handle to shut it down, and its thread), so that dropping
    /// the floor ends them all.
    conns: Mutex<Vec<Conn>>,
    /// CPU of the floor's threads.
    cpu: Mutex<CpuBook>,
    next_outlet: AtomicU64,
    stopping: AtomicBool,
}

struct Conn {
    stream: TcpStream,
    thread: JoinHandle<()>,
}

/// Threads of the floor that are running, and the CPU of those that ended.
#[derive(Default)]
struct CpuBook {
    live: HashSet<i32>,
    ended: u64,
}

/// One PTY, its shell, and the sockets attached to it.
struct Session {
    id: SessionId,
    size: TermSize,
    pty: Pty,
    out: Mutex<Outlets>,
    /// A second handle on each attached socket, outside `out`: the reader holds that lock while
    /// it is blocked writing to a socket that is not read, and this is how ending the session
    /// unblocks it.
    handles: Mutex<Vec<(u64, TcpStream)>>,
    child: Mutex<Option<std::process::Child>>,
    /// The reader thread and the channel it drops when it ends.
    reader: Mutex<Option<(mpsc::Receiver<()>, JoinHandle<()>)>>,
}

/// Where a session's output goes. The reader holds this lock while it writes a chunk to every
/// socket, so a socket attached under it starts exactly at `offset`.
struct Outlets {
    /// Bytes read from the PTY so far.
    offset: u64,
    sockets: Vec<Outlet>,
    /// The PTY closed; nothing more will be written.
    ended: bool,
}

struct Outlet {
    id: u64,
    stream: TcpStream,
}

/// A lock that survives a floor thread having panicked while holding it: the data is counters
/// and socket lists that stay consistent, and the bench reports what it measured either way.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Floor {
    /// Binds an ephemeral loopback port and starts accepting.
    pub fn start() -> Result<Floor, FloorError> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).map_err(FloorError::Bind)?;
        let addr = listener.local_addr().map_err(FloorError::Bind)?;
        let shared = Arc::new(Shared {
            sessions: Mutex::new(HashMap::new()),
            conns: Mutex::new(Vec::new()),
            cpu: Mutex::new(CpuBook::default()),
            next_outlet: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
        });
        let s = Arc::clone(&shared);
        let acceptor = spawn_counted(&shared, "floor-accept", move || accept(&s, &listener))?;
        Ok(Floor {
            addr,
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// The base URL, as a daemon's would be (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Spawns `shell` (see [`default_shell`]) on a fresh PTY of `size` in `cwd`, with the
    /// `TERM` atc sets, and starts its reader.
    pub fn spawn_shell(
        &self,
        shell: &str,
        cwd: &str,
        size: TermSize,
    ) -> Result<SessionId, FloorError> {
        let (pty, pts) = pty_process::blocking::open().map_err(FloorError::Pty)?;
        pty.resize(pty_process::Size::new(size.rows, size.cols))
            .map_err(FloorError::Pty)?;
        let child = Command::new(shell)
            .current_dir(cwd)
            .env("TERM", "xterm-256color")
            .spawn(pts)
            .map_err(|source| FloorError::Spawn {
                program: shell.to_string(),
                source,
            })?;
        let id = SessionId::new();
        let session = Arc::new(Session {
            id,
            size,
            pty,
            out: Mutex::new(Outlets {
                offset: 0,
                sockets: Vec::new(),
                ended: false,
            }),
            handles: Mutex::new(Vec::new()),
            child: Mutex::new(Some(child)),
            reader: Mutex::new(None),
        });
        let (done, ended) = mpsc::channel::<()>();
        let s = Arc::clone(&session);
        let reader = spawn_counted(&self.shared, "floor-pty", move || {
            read_pty(&s);
            drop(done);
        });
        let reader = match reader {
            Ok(r) => r,
            Err(e) => {
                session.end();
                return Err(e);
            }
        };
        *lock(&session.reader) = Some((ended, reader));
        lock(&self.shared.sessions).insert(id, session);
        Ok(id)
    }

    /// Ends these sessions: kills each shell, lets its reader close the attached sockets, and
    /// waits for the reader (briefly; see [`READER_EXIT_WAIT`]). Unknown ids are skipped.
    pub fn end_sessions(&self, ids: &[SessionId]) {
        for id in ids {
            let session = lock(&self.shared.sessions).remove(id);
            if let Some(s) = session {
                s.end();
            }
        }
    }

    /// CPU the floor's threads have used so far (those still running and those that ended),
    /// or `None` when procfs cannot be read.
    pub fn cpu_ticks(&self) -> Option<Ticks> {
        // A probe, so that an unreadable /proc is "unknown" rather than zero.
        read_ticks("/proc/thread-self/stat")?;
        let book = lock(&self.shared.cpu);
        let pid = std::process::id();
        let live: u64 = book
            .live
            .iter()
            .filter_map(|tid| read_ticks(&format!("/proc/{pid}/task/{tid}/stat")))
            .map(|t| t.0)
            .sum();
        Some(Ticks(book.ended + live))
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // The acceptor is blocked in accept(); a connection wakes it to see `stopping`. If even
        // that fails it is left blocked (detached) rather than joined forever.
        let woke = TcpStream::connect(self.addr).is_ok();
        // Joined first, so no connection is added to `conns` after they are ended below.
        if let (true, Some(a)) = (woke, self.acceptor.take()) {
            // A panicked acceptor leaves nothing behind.
            let _ = a.join();
        }
        let sessions: Vec<SessionId> = lock(&self.shared.sessions).keys().copied().collect();
        self.end_sessions(&sessions);
        let conns = std::mem::take(&mut *lock(&self.shared.conns));
        for c in conns {
            // Already closed is fine: the point is that its thread's read returns.
            let _ = c.stream.shutdown(Shutdown::Both);
            // A connection thread that panicked has nothing left to clean up.
            let _ = c.thread.join();
        }
    }
}

impl Session {
    /// Kills the shell and waits for the reader to see the PTY close and close the sockets.
    /// A reader still running after [`READER_EXIT_WAIT`] is blocked on a socket nobody reads
    /// (the sockets are shut, which fails that write) or on a PTY some escaped process still
    /// holds (it is left behind, detached).
    fn end(&self) {
        if let Some(mut child) = lock(&self.child).take() {
            // Either may fail only because the shell already exited and was reaped.
            let _ = child.kill();
            let _ = child.wait();
        }
        let reader = lock(&self.reader).take();
        if let Some((ended, thread)) = reader {
            let mut finished = matches!(
                ended.recv_timeout(READER_EXIT_WAIT),
                Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected)
            );
            if !finished {
                self.shut_sockets();
                finished = matches!(
                    ended.recv_timeout(READER_EXIT_WAIT),
                    Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected)
                );
            }
            if finished {
                // A reader that panicked has no more output to write.
                let _ = thread.join();
            }
        }
        self.shut_sockets();
        let mut out = lock(&self.out);
        out.ended = true;
        for o in out.sockets.drain(..) {
            close_socket(&o.stream);
        }
    }

    /// Shuts every attached socket down, without taking the reader's lock.
    fn shut_sockets(&self) {
        for (_, stream) in lock(&self.handles).drain(..) {
            // Already closed by its client is fine.
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

/// Starts a thread whose CPU is counted as the floor's.
fn spawn_counted(
    shared: &Arc<Shared>,
    name: &str,
    body: impl FnOnce() + Send + 'static,
) -> Result<JoinHandle<()>, FloorError> {
    let s = Arc::clone(shared);
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            let tid = rustix::thread::gettid().as_raw_nonzero().get();
            lock(&s.cpu).live.insert(tid);
            body();
            let mut book = lock(&s.cpu);
            book.live.remove(&tid);
            if let Some(t) = read_ticks("/proc/thread-self/stat") {
                book.ended += t.0;
            }
        })
        .map_err(FloorError::Thread)
}

/// The acceptor: one thread per connection, until the floor is dropped.
fn accept(shared: &Arc<Shared>, listener: &TcpListener) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        // A failed accept (a reset connection, no fds left) loses only that connection.
        let Ok(stream) = stream else { continue };
        // atc's server sets no-delay too; without it a small echo waits on delayed ACKs.
        let _ = stream.set_nodelay(true);
        let Ok(handle) = stream.try_clone() else {
            continue;
        };
        let s = Arc::clone(shared);
        let spawned = spawn_counted(shared, "floor-conn", move || {
            // A connection that fails just ends; its client sees the socket close.
            let _ = serve(&s, stream);
        });
        let mut conns = lock(&shared.conns);
        conns.retain(|c| !c.thread.is_finished());
        if let Ok(thread) = spawned {
            conns.push(Conn {
                stream: handle,
                thread,
            });
        }
    }
}

/// Reads more bytes from `stream` onto `buf`; 0 at end of stream.
fn read_more(mut stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut chunk = [0u8; 16 << 10];
    loop {
        match stream.read(&mut chunk) {
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return Ok(n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn invalid(e: impl std::error::Error + Send + Sync + 'static) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// One connection: its request head, then the attach socket or the input request.
fn serve(shared: &Shared, stream: TcpStream) -> io::Result<()> {
    let mut buf = Vec::with_capacity(4096);
    let (head, used) = loop {
        if let Some(parsed) = http::parse_head(&buf).map_err(invalid)? {
            break parsed;
        }
        if read_more(&stream, &mut buf)? == 0 {
            return Ok(());
        }
    };
    buf.drain(..used);
    let session = |id: &SessionId| lock(&shared.sessions).get(id).cloned();
    match http::route(&head) {
        Route::Attach { session: id, key } => match session(&id) {
            Some(s) => attach(shared, &s, stream, &key, buf),
            None => (&stream).write_all(http::NOT_FOUND.as_bytes()),
        },
        Route::Input(id) => {
            let len = head.content_length().map_err(invalid)?;
            match session(&id) {
                Some(s) if len <= MAX_INPUT => {
                    while buf.len() < len {
                        if read_more(&stream, &mut buf)? == 0 {
                            return Ok(());
                        }
                    }
                    (&s.pty).write_all(&buf[..len])?;
                    (&stream).write_all(http::NO_CONTENT.as_bytes())
                }
                Some(_) => (&stream).write_all(http::TOO_LARGE.as_bytes()),
                None => (&stream).write_all(http::NOT_FOUND.as_bytes()),
            }
        }
        Route::Unknown => (&stream).write_all(http::NOT_FOUND.as_bytes()),
    }
}

/// An attach socket: the upgrade, the `attached` frame at the session's current offset, then
/// input frames to the PTY until the client closes.
fn attach(
    shared: &Shared,
    session: &Session,
    stream: TcpStream,
    key: &str,
    mut buf: Vec<u8>,
) -> io::Result<()> {
    (&stream).write_all(http::upgrade_response(key).as_bytes())?;
    let outlet = shared.next_outlet.fetch_add(1, Ordering::Relaxed);
    {
        let mut out = lock(&session.out);
        let attached = AttachFrame::Attached {
            session: session.id,
            stream: "floor".into(),
            cols: session.size.cols,
            rows: session.size.rows,
            offset: out.offset,
            prelude: 0,
            replay: Replay::Resume,
        }
        .to_text();
        let mut header = [0u8; MAX_HEADER];
        let n = ws::server_header(Opcode::Text, attached.len(), &mut header);
        write_frame(&stream, &header[..n], attached.as_bytes())?;
        if out.ended {
            close_socket(&stream);
            return Ok(());
        }
        out.sockets.push(Outlet {
            id: outlet,
            stream: stream.try_clone()?,
        });
        lock(&session.handles).push((outlet, stream.try_clone()?));
    }
    let read = read_input(session, &stream, &mut buf);
    lock(&session.out).sockets.retain(|o| o.id != outlet);
    lock(&session.handles).retain(|(id, _)| *id != outlet);
    // The client may be gone already; either way this socket is done.
    let _ = stream.shutdown(Shutdown::Both);
    read
}

/// Writes every binary frame's payload to the PTY until a close frame or the end of stream.
fn read_input(session: &Session, stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<()> {
    loop {
        while let Some((frame, used)) = ws::parse_client_frame(buf, MAX_INPUT).map_err(invalid)? {
            buf.drain(..used);
            match frame.opcode {
                Opcode::Binary => (&session.pty).write_all(&frame.payload)?,
                Opcode::Close => return Ok(()),
                // Control frames (resize and the like) and keep-alives change nothing here.
                Opcode::Text | Opcode::Ping | Opcode::Pong => {}
            }
        }
        if read_more(stream, buf)? == 0 {
            return Ok(());
        }
    }
}

/// The reader: each PTY chunk as one binary frame to every attached socket, until the PTY
/// closes; then a normal close to each.
fn read_pty(session: &Session) {
    let mut buf = vec![0u8; READ_BUF];
    loop {
        let n = match (&session.pty).read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // EIO once the shell side is closed (Linux says that instead of end of file); any
            // other error ends the session's output the same way.
            Err(_) => break,
        };
        let chunk = &buf[..n];
        let mut header = [0u8; MAX_HEADER];
        let h = ws::server_header(Opcode::Binary, n, &mut header);
        let mut out = lock(&session.out);
        out.sockets.retain(|o| {
            let sent = write_frame(&o.stream, &header[..h], chunk).is_ok();
            if !sent {
                // Its client went away; the shutdown ends its connection thread too.
                let _ = o.stream.shutdown(Shutdown::Both);
            }
            sent
        });
        out.offset += n as u64;
    }
    let mut out = lock(&session.out);
    out.ended = true;
    for o in out.sockets.drain(..) {
        close_socket(&o.stream);
    }
}

/// Writes one frame, header and payload, without copying them together.
fn write_frame(mut stream: &TcpStream, header: &[u8], payload: &[u8]) -> io::Result<()> {
    let mut slices = [IoSlice::new(header), IoSlice::new(payload)];
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        match stream.write_vectored(rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A normal close frame, then the socket is shut.
fn close_socket(mut stream: &TcpStream) {
    // Best effort: a client that is gone needs neither.
    let _ = stream.write_all(&CLOSE_NORMAL);
    let _ = stream.shutdown(Shutdown::Both);
}
