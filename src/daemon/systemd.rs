//! The daemon's side of systemd's service protocol: notifications (`sd_notify(3)`: `READY=1`,
//! `STATUS=`, `STOPPING=1`, `WATCHDOG=1`) and socket activation (`sd_listen_fds(3)`).
//!
//! [`SystemdEnv::take`] reads what the service manager put in the environment, once, at start,
//! and removes it there: sessions inherit the daemon's environment, and none of them may think
//! it was handed our sockets or may speak for us on our notify socket. So the notify address is
//! kept here rather than re-read from `NOTIFY_SOCKET` per message, which is also why this
//! module sends its datagrams itself with std's `UnixDatagram` instead of using the
//! `sd-notify` crate (whose sender reads the variable on every call).
//!
//! [`SystemdNotifier`] is the actor that sends `STATUS=` and `WATCHDOG=1`. It is started on
//! the sessions' arbiter and pings only after a round trip through the session manager, so a
//! wedged arbiter or manager stops the pings and systemd restarts the daemon. Without a notify
//! socket nothing here runs; without a watchdog no timer is set.

use std::ffi::{OsStr, OsString};
use std::io;
use std::net::TcpListener;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

use actix::prelude::*;

use crate::sessions::messages::{FleetStatusChanged, Heartbeat};
use crate::sessions::status_file::FleetStatus;

/// The first fd a service manager hands over (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: i32 = 3;

/// The environment variables of the protocol; all are removed by [`SystemdEnv::take`].
const VARS: [&str; 6] = [
    "NOTIFY_SOCKET",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    "LISTEN_PID",
    "LISTEN_FDS",
    "LISTEN_FDNAMES",
];

/// What the service manager told the daemon through its environment, checked.
#[derive(Debug)]
pub struct SystemdEnv {
    /// Where notifications go; `None` when not started by a manager that listens.
    pub notify: Option<NotifySocket>,
    /// How long systemd waits for a `WATCHDOG=1` before it acts (`WATCHDOG_USEC`), when the
    /// watchdog is on for this process.
    pub watchdog: Option<Duration>,
    /// How many sockets were handed over, from fd 3 up (`LISTEN_FDS`, when `LISTEN_PID` is us).
    pub listen_fds: u32,
}

/// A variable of the protocol that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SystemdEnvError {
    /// Not a number where one is needed (or zero where zero means nothing).
    #[error("{var}={value:?} is not a usable number")]
    BadNumber {
        /// The variable.
        var: &'static str,
        /// What it held.
        value: String,
    },
    /// `NOTIFY_SOCKET` names no address we can send to.
    #[error("NOTIFY_SOCKET={addr:?}: {source}")]
    NotifySocket {
        /// What it held.
        addr: String,
        /// The cause.
        source: io::Error,
    },
    /// The socket handed over as fd 3 is not a listening TCP socket.
    #[error("the socket handed over as fd 3 is unusable: {0}")]
    ListenFd(String),
}

impl SystemdEnv {
    /// Reads the protocol's variables and removes them from the environment. Call it before
    /// any thread is started (removing a variable races with threads that read the
    /// environment). A variable that cannot be used is reported and left out: the daemon runs
    /// without that part of the protocol rather than not at all.
    pub fn take() -> (SystemdEnv, Vec<SystemdEnvError>) {
        let values: [Option<OsString>; 6] = VARS.map(std::env::var_os);
        for var in VARS {
            std::env::remove_var(var);
        }
        let [notify, usec, wd_pid, listen_pid, listen_fds, _names] = &values;
        fn text(v: &Option<OsString>) -> Option<std::borrow::Cow<'_, str>> {
            v.as_deref().map(OsStr::to_string_lossy)
        }
        let me = std::process::id();
        let mut problems = Vec::new();
        let watchdog = watchdog_from(text(usec).as_deref(), text(wd_pid).as_deref(), me)
            .unwrap_or_else(|e| {
                problems.push(e);
                None
            });
        let listen_fds =
            listen_fds_from(text(listen_pid).as_deref(), text(listen_fds).as_deref(), me)
                .unwrap_or_else(|e| {
                    problems.push(e);
                    0
                });
        let notify = match notify.as_deref().filter(|a| !a.is_empty()) {
            None => None,
            Some(addr) => match NotifySocket::connect(addr) {
                Ok(socket) => Some(socket),
                Err(e) => {
                    problems.push(e);
                    None
                }
            },
        };
        (
            SystemdEnv {
                notify,
                watchdog,
                listen_fds,
            },
            problems,
        )
    }

    /// The handed-over HTTP listener (fd 3), when there is one. Takes ownership of fd 3, so
    /// call it at most once; sockets past the first are left alone (they are close-on-exec
    /// like every inherited fd, see [`crate::providers::local::child_fds`]).
    pub fn take_listener(&self) -> Result<Option<TcpListener>, SystemdEnvError> {
        if self.listen_fds == 0 {
            return Ok(None);
        }
        // SAFETY: LISTEN_FDS says fd 3 was handed to this process; it is only borrowed for
        // the checks, and owned below only once it proved to be a socket.
        let fd = unsafe { BorrowedFd::borrow_raw(LISTEN_FDS_START) };
        let bad = |what: &str, e: rustix::io::Errno| {
            SystemdEnvError::ListenFd(format!("{what}: {}", io::Error::from(e)))
        };
        let kind = rustix::net::sockopt::socket_type(fd).map_err(|e| bad("socket type", e))?;
        if kind != rustix::net::SocketType::STREAM {
            return Err(SystemdEnvError::ListenFd(
                "not a stream socket (use ListenStream= in the socket unit)".into(),
            ));
        }
        let domain = rustix::net::sockopt::socket_domain(fd).map_err(|e| bad("domain", e))?;
        if domain != rustix::net::AddressFamily::INET && domain != rustix::net::AddressFamily::INET6
        {
            return Err(SystemdEnvError::ListenFd(
                "not a TCP socket (the daemon serves HTTP on IP only)".into(),
            ));
        }
        if !rustix::net::sockopt::socket_acceptconn(fd).map_err(|e| bad("listening", e))? {
            return Err(SystemdEnvError::ListenFd("not listening".into()));
        }
        // SAFETY: fd 3 is an open TCP listening socket handed to us, and nothing else in the
        // process owns it: only this function takes it, and it runs once at start.
        let owned = unsafe { OwnedFd::from_raw_fd(LISTEN_FDS_START) };
        Ok(Some(TcpListener::from(owned)))
    }
}

/// `WATCHDOG_USEC`/`WATCHDOG_PID` to the watchdog timeout, when the watchdog is on for the
/// process `me` (`sd_watchdog_enabled(3)`: a `WATCHDOG_PID` of another process means the
/// watchdog is not ours).
pub fn watchdog_from(
    usec: Option<&str>,
    pid: Option<&str>,
    me: u32,
) -> Result<Option<Duration>, SystemdEnvError> {
    let Some(usec) = usec else {
        return Ok(None);
    };
    let micros = usec
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| SystemdEnvError::BadNumber {
            var: "WATCHDOG_USEC",
            value: usec.to_string(),
        })?;
    if let Some(pid) = pid {
        let pid = parse_pid("WATCHDOG_PID", pid)?;
        if pid != me {
            return Ok(None);
        }
    }
    Ok(Some(Duration::from_micros(micros)))
}

/// `LISTEN_PID`/`LISTEN_FDS` to the number of sockets handed to the process `me`
/// (`sd_listen_fds(3)`: without a `LISTEN_PID` naming us, none were).
pub fn listen_fds_from(
    pid: Option<&str>,
    fds: Option<&str>,
    me: u32,
) -> Result<u32, SystemdEnvError> {
    let (Some(pid), Some(fds)) = (pid, fds) else {
        return Ok(0);
    };
    if parse_pid("LISTEN_PID", pid)? != me {
        return Ok(0);
    }
    fds.trim()
        .parse::<u32>()
        .map_err(|_| SystemdEnvError::BadNumber {
            var: "LISTEN_FDS",
            value: fds.to_string(),
        })
}

fn parse_pid(var: &'static str, value: &str) -> Result<u32, SystemdEnvError> {
    value
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| SystemdEnvError::BadNumber {
            var,
            value: value.to_string(),
        })
}

/// One notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice<'a> {
    /// Start-up is finished: listening, fleet loaded.
    Ready,
    /// Shutdown has begun.
    Stopping,
    /// Alive: the sessions' arbiter and manager answered.
    Watchdog,
    /// A line for `systemctl status`.
    Status(&'a str),
}

impl Notice<'_> {
    /// The datagram's text: one `KEY=value` line.
    pub fn line(&self) -> String {
        match self {
            Notice::Ready => "READY=1\n".into(),
            Notice::Stopping => "STOPPING=1\n".into(),
            Notice::Watchdog => "WATCHDOG=1\n".into(),
            // A newline would start another assignment.
            Notice::Status(text) => format!("STATUS={}\n", text.replace('\n', " ")),
        }
    }
}

/// The socket notifications go to, opened once at start.
#[derive(Debug)]
pub struct NotifySocket {
    socket: UnixDatagram,
    addr: SocketAddr,
}

impl NotifySocket {
    /// A socket that sends to `addr`: a path, or `@name` for the abstract namespace.
    pub fn connect(addr: &OsStr) -> Result<NotifySocket, SystemdEnvError> {
        let failed = |source| SystemdEnvError::NotifySocket {
            addr: addr.to_string_lossy().into_owned(),
            source,
        };
        let bytes = std::os::unix::ffi::OsStrExt::as_bytes(addr);
        let target = match bytes.strip_prefix(b"@") {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                SocketAddr::from_abstract_name(name)
            }
            None => SocketAddr::from_pathname(addr),
        }
        .map_err(failed)?;
        let socket = UnixDatagram::unbound().map_err(failed)?;
        // A full receive queue must cost a notification, never block the sessions' thread.
        socket.set_nonblocking(true).map_err(failed)?;
        Ok(NotifySocket {
            socket,
            addr: target,
        })
    }

    /// Sends one notification.
    pub fn send(&self, notice: Notice<'_>) -> io::Result<()> {
        self.socket
            .send_to_addr(notice.line().as_bytes(), &self.addr)
            .map(|_| ())
    }

    /// Sends one notification; a failure is logged, since nothing else can be done about it
    /// (systemd notices a missing `READY=1` or watchdog ping on its own).
    pub fn send_logged(&self, notice: Notice<'_>) {
        if let Err(e) = self.send(notice) {
            tracing::warn!(error = %e, notice = ?notice, "could not notify the service manager");
        }
    }
}

/// The `STATUS=` text for a fleet, e.g. `3 sessions: 1 running, 1 needs you, 1 done, 0 exited`.
pub fn status_text(status: &FleetStatus) -> String {
    let total = status.running + status.needs_you + status.done + status.exited;
    let noun = if total == 1 { "session" } else { "sessions" };
    format!(
        "{total} {noun}: {} running, {} needs you, {} done, {} exited",
        status.running, status.needs_you, status.done, status.exited
    )
}

/// How often the notifier may speak, injected by whoever starts it.
#[derive(Debug, Clone, Copy)]
pub struct NotifyTimings {
    /// Between two watchdog pings: half of `WATCHDOG_USEC`, as `sd_watchdog_enabled(3)`
    /// advises; `None`: no watchdog, no timer.
    pub watchdog_every: Option<Duration>,
    /// The least time between two `STATUS=` datagrams. The manager already folds fleet changes
    /// within its status debounce; this keeps a spawn storm to a datagram a second or so.
    pub status_every: Duration,
}

impl NotifyTimings {
    /// The timings for a watchdog timeout of `watchdog` (if any).
    pub fn for_watchdog(watchdog: Option<Duration>) -> NotifyTimings {
        NotifyTimings {
            watchdog_every: watchdog.map(|w| w / 2),
            status_every: Duration::from_secs(1),
        }
    }
}

/// Whether a watchdog round trip is out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ping {
    /// No heartbeat is waiting for the manager.
    Idle,
    /// A heartbeat was sent and the manager has not answered it yet; no other is sent meanwhile,
    /// so a wedged manager gets no pile of them and we send no `WATCHDOG=1`.
    Awaiting,
}

/// Whether a `STATUS=` datagram may go out now.
#[derive(Debug, Clone, PartialEq, Eq)]
enum StatusGate {
    /// None went out within `status_every`: the next change goes out at once.
    Open,
    /// One went out within `status_every`; the newest change since then waits for the end.
    Holding {
        /// The text to send when the hold ends, if it changed meanwhile.
        pending: Option<String>,
    },
}

/// Sends `STATUS=` when the fleet changes and `WATCHDOG=1` after each answered heartbeat. Lives
/// on the sessions' arbiter (see the module doc).
pub struct SystemdNotifier {
    socket: std::sync::Arc<NotifySocket>,
    /// The manager, asked for a heartbeat before each watchdog ping.
    manager: Recipient<Heartbeat>,
    timings: NotifyTimings,
    ping: Ping,
    gate: StatusGate,
    /// The last `STATUS=` text sent, so an unchanged fleet sends nothing.
    sent_status: Option<String>,
}

impl SystemdNotifier {
    /// A notifier sending on `socket`, pinging after heartbeats answered by `manager`.
    pub fn new(
        socket: std::sync::Arc<NotifySocket>,
        manager: Recipient<Heartbeat>,
        timings: NotifyTimings,
    ) -> SystemdNotifier {
        SystemdNotifier {
            socket,
            manager,
            timings,
            ping: Ping::Idle,
            gate: StatusGate::Open,
            sent_status: None,
        }
    }

    fn heartbeat(&mut self, ctx: &mut Context<Self>) {
        if self.ping == Ping::Awaiting {
            return;
        }
        self.ping = Ping::Awaiting;
        self.manager
            .send(Heartbeat)
            .into_actor(self)
            .map(|answered, act, _| {
                act.ping = Ping::Idle;
                match answered {
                    Ok(()) => act.socket.send_logged(Notice::Watchdog),
                    // The manager is gone: the daemon is stopping or broken; either way the
                    // watchdog should see silence.
                    Err(e) => tracing::warn!(error = %e, "no heartbeat from the session manager"),
                }
            })
            .spawn(ctx);
    }

    fn status_changed(&mut self, text: String, ctx: &mut Context<Self>) {
        match &mut self.gate {
            StatusGate::Holding { pending } => *pending = Some(text),
            StatusGate::Open => {
                if self.sent_status.as_deref() == Some(text.as_str()) {
                    return;
                }
                self.send_status(text, ctx);
            }
        }
    }

    fn send_status(&mut self, text: String, ctx: &mut Context<Self>) {
        self.socket.send_logged(Notice::Status(&text));
        self.sent_status = Some(text);
        self.gate = StatusGate::Holding { pending: None };
        ctx.run_later(self.timings.status_every, |act, ctx| {
            let pending = match std::mem::replace(&mut act.gate, StatusGate::Open) {
                StatusGate::Holding { pending } => pending,
                StatusGate::Open => None,
            };
            if let Some(text) = pending.filter(|t| act.sent_status.as_ref() != Some(t)) {
                act.send_status(text, ctx);
            }
        });
    }
}

impl Actor for SystemdNotifier {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        if let Some(every) = self.timings.watchdog_every {
            // At once, then every half timeout: a slow start must not eat into the first one.
            self.heartbeat(ctx);
            ctx.run_interval(every, |act, ctx| act.heartbeat(ctx));
        }
    }
}

impl Handler<FleetStatusChanged> for SystemdNotifier {
    type Result = ();

    fn handle(&mut self, msg: FleetStatusChanged, ctx: &mut Self::Context) {
        self.status_changed(status_text(&msg.0), ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchdog_is_off_without_usec() {
        assert_eq!(watchdog_from(None, None, 7).unwrap(), None);
        assert_eq!(watchdog_from(None, Some("7"), 7).unwrap(), None);
    }

    #[test]
    fn watchdog_usec_for_us_or_anyone_is_the_timeout() {
        let t = Some(Duration::from_millis(200));
        assert_eq!(watchdog_from(Some("200000"), None, 7).unwrap(), t);
        assert_eq!(watchdog_from(Some("200000"), Some("7"), 7).unwrap(), t);
        assert_eq!(watchdog_from(Some(" 200000\n"), Some("7"), 7).unwrap(), t);
    }

    #[test]
    fn a_watchdog_for_another_pid_is_not_ours() {
        assert_eq!(watchdog_from(Some("200000"), Some("8"), 7).unwrap(), None);
    }

    #[test]
    fn bad_watchdog_values_are_errors() {
        for (usec, pid) in [
            ("", None),
            ("0", None),
            ("-5", None),
            ("1.5", None),
            ("lots", None),
            ("200000", Some("x")),
            ("200000", Some("0")),
        ] {
            assert!(
                matches!(
                    watchdog_from(Some(usec), pid, 7),
                    Err(SystemdEnvError::BadNumber { .. })
                ),
                "{usec:?} {pid:?}"
            );
        }
    }

    #[test]
    fn listen_fds_count_only_for_our_pid() {
        assert_eq!(listen_fds_from(Some("7"), Some("1"), 7).unwrap(), 1);
        assert_eq!(listen_fds_from(Some("7"), Some("3"), 7).unwrap(), 3);
        assert_eq!(listen_fds_from(Some("8"), Some("1"), 7).unwrap(), 0);
        assert_eq!(listen_fds_from(None, Some("1"), 7).unwrap(), 0);
        assert_eq!(listen_fds_from(Some("7"), None, 7).unwrap(), 0);
        assert_eq!(listen_fds_from(None, None, 7).unwrap(), 0);
    }

    #[test]
    fn bad_listen_values_are_errors() {
        for (pid, fds) in [("x", "1"), ("0", "1"), ("7", "one"), ("7", "-1")] {
            assert!(
                matches!(
                    listen_fds_from(Some(pid), Some(fds), 7),
                    Err(SystemdEnvError::BadNumber { .. })
                ),
                "{pid:?} {fds:?}"
            );
        }
    }

    #[test]
    fn notices_are_single_assignments() {
        assert_eq!(Notice::Ready.line(), "READY=1\n");
        assert_eq!(Notice::Stopping.line(), "STOPPING=1\n");
        assert_eq!(Notice::Watchdog.line(), "WATCHDOG=1\n");
        assert_eq!(Notice::Status("a\nREADY=1").line(), "STATUS=a READY=1\n");
    }

    #[test]
    fn status_text_counts_the_fleet() {
        let mut s = FleetStatus::default();
        assert_eq!(
            status_text(&s),
            "0 sessions: 0 running, 0 needs you, 0 done, 0 exited"
        );
        s.running = 1;
        assert_eq!(
            status_text(&s),
            "1 session: 1 running, 0 needs you, 0 done, 0 exited"
        );
        s.needs_you = 2;
        s.exited = 1;
        assert_eq!(
            status_text(&s),
            "4 sessions: 1 running, 2 needs you, 0 done, 1 exited"
        );
    }

    /// A stand-in for the session manager that answers heartbeats, except while it is told
    /// to block its own thread (its arbiter is then as wedged as a real one can be).
    struct Manager;

    impl Actor for Manager {
        type Context = Context<Self>;
    }

    impl Handler<Heartbeat> for Manager {
        type Result = ();
        fn handle(&mut self, _: Heartbeat, _: &mut Self::Context) {}
    }

    #[derive(Message)]
    #[rtype(result = "()")]
    struct Wedge(Duration);

    impl Handler<Wedge> for Manager {
        type Result = ();
        fn handle(&mut self, msg: Wedge, _: &mut Self::Context) {
            std::thread::sleep(msg.0);
        }
    }

    struct Listener {
        socket: tokio::net::UnixDatagram,
        _dir: tempfile::TempDir,
    }

    impl Listener {
        fn bind() -> (Listener, std::sync::Arc<NotifySocket>) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("notify");
            let socket = tokio::net::UnixDatagram::bind(&path).unwrap();
            let notify = NotifySocket::connect(path.as_os_str()).unwrap();
            (Listener { socket, _dir: dir }, std::sync::Arc::new(notify))
        }

        /// The next datagram within `within`, if one comes.
        async fn next(&self, within: Duration) -> Option<String> {
            let mut buf = [0u8; 512];
            let n = tokio::time::timeout(within, self.socket.recv(&mut buf))
                .await
                .ok()?
                .unwrap();
            Some(String::from_utf8_lossy(&buf[..n]).into_owned())
        }

        /// Every datagram until none comes for `quiet`.
        async fn drain(&self, quiet: Duration) -> Vec<String> {
            let mut seen = Vec::new();
            while let Some(d) = self.next(quiet).await {
                seen.push(d);
            }
            seen
        }
    }

    #[actix_rt::test]
    async fn a_wedged_manager_stops_the_watchdog_pings_until_it_answers_again() {
        let (listener, socket) = Listener::bind();
        let manager_arbiter = Arbiter::new();
        let manager = Manager::start_in_arbiter(&manager_arbiter.handle(), |_| Manager);
        let every = Duration::from_millis(40);
        let timings = NotifyTimings {
            watchdog_every: Some(every),
            status_every: Duration::from_secs(1),
        };
        let _notifier = SystemdNotifier::new(socket, manager.clone().recipient(), timings).start();
        for _ in 0..3 {
            assert_eq!(
                listener.next(Duration::from_secs(5)).await.as_deref(),
                Some("WATCHDOG=1\n")
            );
        }
        manager.do_send(Wedge(Duration::from_millis(600)));
        // What was on its way when the manager wedged; then silence while it is stuck.
        let before = listener.drain(every * 3).await;
        assert!(before.len() <= 2, "pings while wedged: {before:?}");
        assert_eq!(listener.next(Duration::from_millis(250)).await, None);
        // Unwedged, it answers the heartbeat that waited, and pings resume.
        assert_eq!(
            listener.next(Duration::from_secs(5)).await.as_deref(),
            Some("WATCHDOG=1\n")
        );
        manager_arbiter.stop();
    }

    #[actix_rt::test]
    async fn a_status_storm_sends_the_first_change_and_then_the_last() {
        let (listener, socket) = Listener::bind();
        let manager = Manager.start();
        let timings = NotifyTimings {
            watchdog_every: None,
            status_every: Duration::from_millis(200),
        };
        let notifier = SystemdNotifier::new(socket, manager.recipient(), timings).start();
        for running in 1..=50 {
            notifier.do_send(FleetStatusChanged(FleetStatus {
                running,
                ..FleetStatus::default()
            }));
        }
        let seen = listener.drain(Duration::from_millis(600)).await;
        assert_eq!(
            seen,
            [
                "STATUS=1 session: 1 running, 0 needs you, 0 done, 0 exited\n",
                "STATUS=50 sessions: 50 running, 0 needs you, 0 done, 0 exited\n",
            ]
        );
        // The same counts again say nothing new.
        notifier.do_send(FleetStatusChanged(FleetStatus {
            running: 50,
            ..FleetStatus::default()
        }));
        assert_eq!(listener.next(Duration::from_millis(300)).await, None);
    }

    #[actix_rt::test]
    async fn no_watchdog_means_no_pings() {
        let (listener, socket) = Listener::bind();
        let timings = NotifyTimings::for_watchdog(None);
        let _notifier = SystemdNotifier::new(socket, Manager.start().recipient(), timings).start();
        assert_eq!(listener.next(Duration::from_millis(200)).await, None);
    }
}
