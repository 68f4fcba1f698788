//! The reporter socket (spec §9.5): a unix socket where processes inside sessions
//! (`atc hook-report`) drop one JSON line per connection, `{"atcId","key","event","payload"}`.
//! No handshake and no answer. A line is taken only when its `key` is the session's own
//! (`sessions::report_key`: each start of a session's process gets one in `ATC_REPORT_KEY`),
//! so one session cannot report as another; the session then checks the report's values and
//! its rate. Everything else is dropped and counted, and nothing a reporter sends can hurt the
//! daemon: lines are bounded ([`MAX_LINE`]), connections are read at most
//! [`CONNECTIONS_AT_ONCE`] at a time and each within [`READ_TIMEOUT`], and accepting backs off
//! when the daemon is out of descriptors instead of spinning.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::Addr;
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::net::UnixListener;

use crate::providers::{HookReported, ReportOrigin};
use crate::sessions::manager::SessionManager;
use crate::sessions::messages::HookRecipient;
use crate::sessions::report_key::ReportKeys;
use atc_protocol::SessionId;

/// Longest line accepted; a hook payload is far smaller (a turn's last message is its
/// largest part, and only 16 KiB of that is kept).
const MAX_LINE: usize = 1024 * 1024;

/// How long one reporter connection may take to send its line.
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// Connections read at once. Each may hold a line of up to [`MAX_LINE`], so this bounds what
/// the socket can make the daemon buffer (32 MiB); a hook reporter opens one connection per
/// report and closes it within milliseconds, and further connections wait in the listen
/// backlog, unread and costing no descriptor, until one is done.
const CONNECTIONS_AT_ONCE: usize = 32;

/// Counts of what the socket received, shown in `GET /v1/daemon`.
#[derive(Debug, Default)]
pub struct ReporterStats {
    /// Lines routed to a session.
    pub accepted: AtomicU64,
    /// Lines dropped: malformed, too long, too slow, or naming no session.
    pub dropped: AtomicU64,
}

impl ReporterStats {
    /// The counts as `GET /v1/daemon` shows them.
    pub fn counts(&self) -> atc_protocol::responses::ReporterCounts {
        atc_protocol::responses::ReporterCounts {
            accepted: self.accepted.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }
}

/// The socket file this daemon bound, known by its inode so that a clean stop removes only
/// its own: a daemon started on another state dir may have replaced the file meanwhile (the
/// path can be in the shared runtime dir, see `daemon::reporter_socket_path`).
#[derive(Debug)]
pub struct BoundSocket {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl BoundSocket {
    /// Where the socket is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the socket file if it is still the one we bound. Called once the listener's
    /// arbiter has stopped, so no new reporter can connect to a file about to vanish.
    pub fn remove_if_ours(&self) {
        use std::os::unix::fs::MetadataExt;
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| m.dev() == self.dev && m.ino() == self.ino);
        if !ours {
            return;
        }
        if let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!(socket = %self.path.display(), error = %e,
                "could not remove the reporter socket");
        }
    }
}

/// Binds the socket at `path` (replacing a stale one) and serves it on the current arbiter.
pub fn serve(
    path: &Path,
    manager: Addr<SessionManager>,
    stats: Arc<ReporterStats>,
    keys: ReportKeys,
) -> std::io::Result<BoundSocket> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = UnixListener::bind(path)?;
    // Only the user's own processes may report. bind() leaves the socket 0777 less the umask;
    // connecting needs write permission on it, and a socket outside the state dir (a long
    // state dir's path puts it in the runtime dir, or the temp dir) has no private dir
    // around it, so the mode is narrowed here rather than left to the umask.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    let meta = std::fs::symlink_metadata(path)?;
    let bound = BoundSocket {
        path: path.to_path_buf(),
        dev: meta.dev(),
        ino: meta.ino(),
    };
    let slots = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_AT_ONCE));
    actix_rt::spawn(async move {
        let mut backoff = AcceptBackoff::default();
        loop {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                // Never closed; an error would mean it was, and nothing could be read.
                return;
            };
            let mut conn = match listener.accept().await {
                Ok((conn, _)) => {
                    backoff.accepted();
                    conn
                }
                Err(e) => {
                    // Out of descriptors (or another passing failure): the connection stays in
                    // the backlog and the listener stays readable, so accepting again at once
                    // would spin a core until a descriptor frees up.
                    let wait = backoff.failed();
                    if backoff.first_failure() {
                        tracing::warn!(error = %e, "the reporter socket cannot accept; backing off");
                    }
                    tokio::time::sleep(wait).await;
                    continue;
                }
            };
            let (manager, stats, keys) = (manager.clone(), stats.clone(), keys.clone());
            actix_rt::spawn(async move {
                // Room for the longest line at once: grown by doubling, a line just under the
                // cap would take twice its size. Pages never written cost no memory.
                let mut buf = Vec::with_capacity(MAX_LINE + 1);
                let read = tokio::time::timeout(
                    READ_TIMEOUT,
                    (&mut conn).take(MAX_LINE as u64 + 1).read_to_end(&mut buf),
                )
                .await;
                // The slot holds while the line is in memory.
                drop(conn);
                let routed = match read {
                    Ok(Ok(_)) if buf.len() <= MAX_LINE => route(&buf, &manager, &keys).await,
                    _ => false,
                };
                drop(slot);
                let counter = if routed {
                    &stats.accepted
                } else {
                    &stats.dropped
                };
                counter.fetch_add(1, Ordering::Relaxed);
            });
        }
    });
    Ok(bound)
}

/// Hands one line's report to the session it names, if the line carries that session's key.
/// Answers whether the session took it.
async fn route(line: &[u8], manager: &Addr<SessionManager>, keys: &ReportKeys) -> bool {
    let Some(line) = parse(line) else {
        return false;
    };
    if !keys.holds(line.atc_id, &line.key) {
        tracing::warn!(session = %line.atc_id,
            "reporter line without the session's key dropped");
        return false;
    }
    let Ok(Some(session)) = manager.send(HookRecipient(line.atc_id)).await else {
        return false;
    };
    let report = HookReported {
        event: line.event,
        payload: line.payload,
        origin: ReportOrigin::Local,
    };
    // The session logs its own refusals.
    matches!(session.send(report).await, Ok(Ok(())))
}

/// How long accepting waits after failures: 10 ms after the first, doubling to one second,
/// and nothing once a connection is accepted again.
#[derive(Debug, Default)]
struct AcceptBackoff {
    failures: u32,
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MOST: Duration = Duration::from_secs(1);

    fn accepted(&mut self) {
        self.failures = 0;
    }

    /// Counts a failure and answers the wait before the next accept.
    fn failed(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let doublings = self.failures.saturating_sub(1).min(16);
        Self::FIRST.saturating_mul(1 << doublings).min(Self::MOST)
    }

    /// The failure just counted is the first of a run (the one worth a log line).
    fn first_failure(&self) -> bool {
        self.failures == 1
    }
}

/// One reporter line, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct ReporterLine {
    /// The session it names (`ATC_SESSION_ID`).
    pub atc_id: SessionId,
    /// The key it carries (`ATC_REPORT_KEY`), checked against the session's.
    pub key: String,
    /// The hook's name.
    pub event: String,
    /// The agent's hook JSON (an object).
    pub payload: Value,
}

/// One line: `atcId` a session uuid, `key` and `event` strings, `payload` an object; anything
/// else is malformed. Public for the fuzz target and property tests, which feed it what a
/// reporter could send.
pub fn parse(line: &[u8]) -> Option<ReporterLine> {
    // A key given twice is malformed here as in a request body: what the line names must not
    // depend on which reader kept which copy.
    let v: Value = crate::protocol::strict_json::parse(line.trim_ascii()).ok()?;
    let atc_id = v.get("atcId")?.as_str()?.parse::<SessionId>().ok()?;
    let key = v.get("key")?.as_str()?.to_string();
    let event = v.get("event")?.as_str()?.to_string();
    let payload = v.get("payload").filter(|p| p.is_object())?.clone();
    Some(ReporterLine {
        atc_id,
        key,
        event,
        payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_must_have_a_session_id_a_key_and_an_object_payload() {
        let id = "0f8fad5b-d9cb-469f-a165-70867728950e";
        let line = |atc: &str, rest: &str| format!(r#"{{"atcId":{atc},{rest}}}"#).into_bytes();
        let ok = parse(&line(
            &format!("\"{id}\""),
            r#""key":"k","event":"Stop","payload":{}"#,
        ))
        .unwrap();
        assert_eq!((ok.atc_id.to_string(), ok.key.as_str()), (id.into(), "k"));
        let good = format!("\"{id}\"");
        for (atc, rest) in [
            ("\"x\"", r#""key":"k","event":"Stop","payload":{}"#),
            ("1", r#""key":"k","event":"Stop","payload":{}"#),
            (good.as_str(), r#""event":"Stop","payload":{}"#),
            (good.as_str(), r#""key":"k","event":"Stop","payload":[]"#),
            (good.as_str(), r#""key":"k","payload":{}"#),
        ] {
            assert!(parse(&line(atc, rest)).is_none(), "{atc} {rest}");
        }
        assert!(parse(b"not json").is_none());
        let twice = format!(
            r#"{{"atcId":"{id}","key":"k","event":"Stop","event":"Notification","payload":{{}}}}"#
        );
        assert!(parse(twice.as_bytes()).is_none());
    }

    #[test]
    fn accepting_backs_off_from_10_ms_to_a_second_and_starts_over_after_a_success() {
        let mut b = AcceptBackoff::default();
        let waits: Vec<u128> = (0..10).map(|_| b.failed().as_millis()).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        for _ in 0..100 {
            assert_eq!(b.failed(), AcceptBackoff::MOST);
        }
        b.accepted();
        assert_eq!(b.failed(), AcceptBackoff::FIRST);
        assert!(b.first_failure());
    }
}
