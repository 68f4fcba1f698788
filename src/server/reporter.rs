//! The reporter socket (spec §9.5): a unix socket where processes inside sessions
//! (`atc hook-report`) drop one JSON line per connection, `{"atcId","event","payload"}`. No
//! handshake and no answer. A line naming an unknown session, or malformed, is dropped and
//! counted; nothing a reporter sends can hurt the daemon.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::Addr;
use serde::Serialize;
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::net::UnixListener;

use crate::sessions::manager::SessionManager;
use crate::sessions::messages::{HookReported, RouteReport};

/// Longest line accepted; a hook payload is far smaller.
const MAX_LINE: usize = 1024 * 1024;

/// How long one reporter connection may take to send its line.
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// Counts of what the socket received, shown in `GET /v1/daemon`.
#[derive(Debug, Default, Serialize)]
pub struct ReporterStats {
    /// Lines routed to a session.
    pub accepted: AtomicU64,
    /// Lines dropped: malformed, too long, too slow, or naming no session.
    pub dropped: AtomicU64,
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
    actix_rt::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                continue;
            };
            let (manager, stats) = (manager.clone(), stats.clone());
            actix_rt::spawn(async move {
                let mut buf = Vec::new();
                let read = tokio::time::timeout(
                    READ_TIMEOUT,
                    (&mut conn).take(MAX_LINE as u64 + 1).read_to_end(&mut buf),
                )
                .await;
                let routed = match read {
                    Ok(Ok(_)) if buf.len() <= MAX_LINE => match parse(&buf) {
                        Some(msg) => manager.send(msg).await.unwrap_or(false),
                        None => false,
                    },
                    _ => false,
                };
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

/// One line: `atcId` and `event` strings, `payload` an object; anything else is malformed.
/// Public for the fuzz target and property tests, which feed it what a reporter could send.
pub fn parse(line: &[u8]) -> Option<RouteReport> {
    let v: Value = serde_json::from_slice(line.trim_ascii()).ok()?;
    let atc_id = v.get("atcId")?.as_str()?.to_string();
    let event = v.get("event")?.as_str()?.to_string();
    let payload = v.get("payload").filter(|p| p.is_object())?.clone();
    Some(RouteReport {
        atc_id,
        report: HookReported { event, payload },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_must_have_string_ids_and_an_object_payload() {
        assert!(parse(br#"{"atcId":"x","event":"Stop","payload":{}}"#).is_some());
        assert!(parse(br#"{"atcId":1,"event":"Stop","payload":{}}"#).is_none());
        assert!(parse(br#"{"atcId":"x","event":"Stop","payload":[]}"#).is_none());
        assert!(parse(br#"{"atcId":"x","payload":{}}"#).is_none());
        assert!(parse(b"not json").is_none());
    }
}
