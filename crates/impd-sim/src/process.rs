//! Guest processes: a command run on this machine (the simulated guest), on a new pty or on
//! pipes, in its own process group so signals, freezes and kills reach all of it.
//!
//! A [`Process`] is driven by one task on the guest runtime. It reports output and then
//! exactly one exit through a bounded channel (a consumer that stops reading slows the process
//! down, as impd's agent stream does), and takes input, `stdin_eof` and resizes through one
//! ordered writer so a process that stops reading stdin never stalls its output.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use rustix::process::{Pid, Signal};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::runtime::Handle;
use tokio::sync::mpsc;

/// How long output is still collected after the process was reaped (protocol §10: 500 ms).
const EXIT_DRAIN: Duration = Duration::from_millis(500);

/// Largest output chunk read at once.
const READ_CHUNK: usize = 16 * 1024;

/// What to run.
#[derive(Clone, Debug)]
pub struct Command {
    pub argv: Vec<String>,
    /// The complete environment (already merged).
    pub env: BTreeMap<String, String>,
    pub cwd: PathBuf,
    /// `Some((cols, rows))`: run on a new pty.
    pub tty: Option<(u16, u16)>,
}

/// Input to the process, in order.
#[derive(Debug)]
pub enum Input {
    Data(Bytes),
    /// Closes stdin (pipes only; with a tty the client sends `0x04`).
    Eof,
    Resize {
        cols: u16,
        rows: u16,
    },
}

/// What the process reports.
#[derive(Debug)]
pub enum Event {
    /// Output on channel 1 (stdout, or the pty) or 2 (stderr).
    Output { channel: u8, bytes: Bytes },
    /// The last event: exit code, or the name of the signal that ended it.
    Exited {
        code: Option<i32>,
        signal: Option<&'static str>,
    },
}

/// A started process.
pub struct Process {
    pub pid: Pid,
    pub input: mpsc::Sender<Input>,
    pub events: mpsc::Receiver<Event>,
}

/// Starts `cmd` on the guest runtime.
pub fn spawn(guest: &Handle, cmd: &Command) -> std::io::Result<Process> {
    let _in_guest = guest.enter();
    let Some((program, args)) = cmd.argv.split_first() else {
        return Err(std::io::Error::other("empty argv"));
    };
    if !cmd.cwd.is_dir() {
        return Err(std::io::Error::other(format!(
            "cwd {} is not a directory",
            cmd.cwd.display()
        )));
    }
    // Queue bounds: impd's agent keeps up to 1024 stdin frames; 64 output events in flight
    // are enough to keep a reader busy without holding much.
    let (in_tx, in_rx) = mpsc::channel(1024);
    let (ev_tx, ev_rx) = mpsc::channel(64);
    let pid = match cmd.tty {
        Some((cols, rows)) => {
            let (pty, pts) = pty_process::open().map_err(std::io::Error::other)?;
            pty.resize(pty_process::Size::new(rows, cols))
                .map_err(std::io::Error::other)?;
            let command = pty_process::Command::new(program)
                .args(args)
                .env_clear()
                .envs(&cmd.env)
                .current_dir(&cmd.cwd);
            // SAFETY: `default_signals` calls only signal(2), which is async-signal-safe.
            let child = unsafe { command.pre_exec(default_signals) }
                .spawn(pts)
                .map_err(std::io::Error::other)?;
            let pid = child_pid(&child)?;
            let (read, write) = pty.into_split();
            guest.spawn(write_pty(write, in_rx));
            guest.spawn(supervise(child, vec![(1, Box::new(read))], ev_tx));
            pid
        }
        None => {
            let mut command = tokio::process::Command::new(program);
            command
                .args(args)
                .env_clear()
                .envs(&cmd.env)
                .current_dir(&cmd.cwd)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .process_group(0);
            // SAFETY: as above.
            let mut child = unsafe { command.pre_exec(default_signals) }.spawn()?;
            let pid = child_pid(&child)?;
            let stdin = child.stdin.take();
            let mut readers: Vec<(u8, Box<dyn AsyncRead + Send + Unpin>)> = Vec::new();
            if let Some(out) = child.stdout.take() {
                readers.push((1, Box::new(out)));
            }
            if let Some(err) = child.stderr.take() {
                readers.push((2, Box::new(err)));
            }
            guest.spawn(write_pipe(stdin, in_rx));
            guest.spawn(supervise(child, readers, ev_tx));
            pid
        }
    };
    Ok(Process {
        pid,
        input: in_tx,
        events: ev_rx,
    })
}

/// Every standard signal back to its default in a guest process before its exec, as a real
/// impd's are: a simulator started as a script's background job or under `nohup` has SIGINT
/// or SIGHUP ignored, an ignored signal survives an exec, and a guest's Ctrl-C would then do
/// nothing. Runs between fork and exec, so it may only make async-signal-safe calls.
fn default_signals() -> std::io::Result<()> {
    for sig in 1..32 {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
            // SAFETY: signal(2) with SIG_DFL installs no handler and is async-signal-safe.
            // It fails only for a signal that cannot be changed, which is left as it is.
            unsafe { libc::signal(sig, libc::SIG_DFL) };
        }
    }
    Ok(())
}

fn child_pid(child: &tokio::process::Child) -> std::io::Result<Pid> {
    child
        .id()
        .and_then(|p| Pid::from_raw(p as i32))
        .ok_or_else(|| std::io::Error::other("the child has no pid"))
}

/// Reads all output, reaps the child, drains late output for a bounded time, then reports the
/// exit. Exactly one `Exited`, always last.
async fn supervise(
    mut child: tokio::process::Child,
    readers: Vec<(u8, Box<dyn AsyncRead + Send + Unpin>)>,
    events: mpsc::Sender<Event>,
) {
    let reading = futures_util::future::join_all(
        readers
            .into_iter()
            .map(|(channel, r)| read_all(channel, r, events.clone())),
    );
    tokio::pin!(reading);
    let status = tokio::select! {
        status = child.wait() => {
            // A grandchild may keep the pty or a pipe open; stop reading after the drain.
            let _ = tokio::time::timeout(EXIT_DRAIN, &mut reading).await;
            status
        }
        _ = &mut reading => child.wait().await,
    };
    use std::os::unix::process::ExitStatusExt;
    let (code, signal) = match status {
        Ok(s) => (s.code(), s.signal().and_then(signal_name)),
        Err(_) => (None, None),
    };
    // The receiver may be gone (its socket closed); nobody is left to tell.
    let _ = events.send(Event::Exited { code, signal }).await;
}

async fn read_all(
    channel: u8,
    mut r: Box<dyn AsyncRead + Send + Unpin>,
    events: mpsc::Sender<Event>,
) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        match r.read(&mut buf).await {
            // EIO is how Linux reports a pty whose every slave fd closed: the normal end.
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let bytes = Bytes::copy_from_slice(&buf[..n]);
                if events.send(Event::Output { channel, bytes }).await.is_err() {
                    return;
                }
            }
        }
    }
}

async fn write_pty(mut pty: pty_process::OwnedWritePty, mut rx: mpsc::Receiver<Input>) {
    let mut broken = false;
    while let Some(cmd) = rx.recv().await {
        match cmd {
            // After a failed write the process is gone; keep draining so senders never block.
            Input::Data(b) if !broken => broken = pty.write_all(&b).await.is_err(),
            Input::Resize { cols, rows } if !broken => {
                // A failed resize means the pty is gone; the exit is on its way.
                let _ = pty.resize(pty_process::Size::new(rows, cols));
            }
            _ => {}
        }
    }
}

async fn write_pipe(stdin: Option<tokio::process::ChildStdin>, mut rx: mpsc::Receiver<Input>) {
    let mut stdin: Option<Box<dyn AsyncWrite + Send + Unpin>> =
        stdin.map(|s| Box::new(s) as Box<dyn AsyncWrite + Send + Unpin>);
    while let Some(cmd) = rx.recv().await {
        match cmd {
            Input::Data(b) => {
                if let Some(w) = stdin.as_mut() {
                    // EPIPE: the command exited before reading everything (protocol §10).
                    if w.write_all(&b).await.is_err() {
                        stdin = None;
                    }
                }
            }
            Input::Eof => {
                if let Some(mut w) = stdin.take() {
                    // The process may have closed its stdin already; then the eof is moot.
                    let _ = w.shutdown().await;
                }
            }
            Input::Resize { .. } => {}
        }
    }
}

/// Sends `sig` to the process group led by `pid` (each guest process leads its own group).
pub fn signal_group(pid: Pid, sig: Signal) {
    // ESRCH: the group is gone already, or the child has not reached setsid yet; try the
    // process alone, and then there is nothing left to signal.
    if rustix::process::kill_process_group(pid, sig).is_err() {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

/// Signal names impd accepts (`^SIG[A-Z0-9]+$`), as Linux numbers them.
const SIGNALS: &[(&str, Signal)] = &[
    ("SIGHUP", Signal::HUP),
    ("SIGINT", Signal::INT),
    ("SIGQUIT", Signal::QUIT),
    ("SIGILL", Signal::ILL),
    ("SIGTRAP", Signal::TRAP),
    ("SIGABRT", Signal::ABORT),
    ("SIGBUS", Signal::BUS),
    ("SIGFPE", Signal::FPE),
    ("SIGKILL", Signal::KILL),
    ("SIGUSR1", Signal::USR1),
    ("SIGSEGV", Signal::SEGV),
    ("SIGUSR2", Signal::USR2),
    ("SIGPIPE", Signal::PIPE),
    ("SIGALRM", Signal::ALARM),
    ("SIGTERM", Signal::TERM),
    ("SIGCHLD", Signal::CHILD),
    ("SIGCONT", Signal::CONT),
    ("SIGSTOP", Signal::STOP),
    ("SIGTSTP", Signal::TSTP),
    ("SIGTTIN", Signal::TTIN),
    ("SIGTTOU", Signal::TTOU),
    ("SIGWINCH", Signal::WINCH),
];

/// The signal with this name; unknown names are ignored by the caller (protocol §9.8).
pub fn signal_named(name: &str) -> Option<Signal> {
    SIGNALS.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

/// The name of a signal number, as `exit.signal` carries it.
pub fn signal_name(raw: i32) -> Option<&'static str> {
    SIGNALS
        .iter()
        .find(|(_, s)| s.as_raw() == raw)
        .map(|(n, _)| *n)
}
