//! Running a command to completion over `/exec` (spec §10): a plain start without a tty, stdin
//! in 1 MiB messages followed by `stdin_eof`, stdout and stderr collected until `exit`. Output
//! is read while stdin is still being written, so a command that writes before it has read
//! all its input cannot deadlock against us; and a command that exits early simply ends the
//! writing (what was not sent is lost, as impd would drop it anyway).

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;

use super::client::ImpdClient;
use super::error::ImpPortError;
use super::exec::{ExecWriter, STDIN_CHUNK};
use super::exec_messages::{ExecEvent, Opening, StartMsg, STDERR};

/// A command to run to completion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSpec {
    /// The imp.
    pub name: String,
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Working directory; impd's default when absent.
    pub cwd: Option<String>,
    /// Environment overrides.
    pub env: BTreeMap<String, String>,
    /// Everything the command reads on stdin (empty: stdin is closed at once).
    pub stdin: Bytes,
}

/// How a command ended and what it printed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunResult {
    /// Exit status; `None` when a signal ended it (the daemon counts that as failure).
    pub code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<String>,
    /// Everything on channel 1.
    pub stdout: Bytes,
    /// Everything on channel 2.
    pub stderr: Bytes,
}

impl RunResult {
    /// Whether it exited with status 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// The script of the file transfer (spec §10): `$1` is the target directory.
const UNPACK_SCRIPT: &str = "mkdir -p \"$1\" && tar -x -f - -C \"$1\"";

impl ImpdClient {
    /// Runs a command to completion. An `error` message (refusal, or the imp slept under it)
    /// is returned as that error; a socket that closes without `exit` is `CLOSED`.
    pub async fn run(&self, spec: RunSpec) -> Result<RunResult, ImpPortError> {
        let opening = Opening::Start(StartMsg {
            name: spec.name,
            argv: spec.argv,
            tty: false,
            env: spec.env,
            cwd: spec.cwd,
            cols: 80,
            rows: 24,
            ..StartMsg::default()
        });
        let socket = self.open_exec(opening).await?;
        let writer = socket.writer;
        let mut events = socket.events;
        let feed = feed_stdin(&writer, spec.stdin);
        tokio::pin!(feed);
        let mut fed = false;
        let mut stdout = BytesMut::new();
        let mut stderr = BytesMut::new();
        loop {
            let event = tokio::select! {
                event = events.next() => event,
                // A feed that failed means the socket went away; the events say why.
                _ = &mut feed, if !fed => { fed = true; continue; }
            };
            match event {
                Some(ExecEvent::Data { channel, bytes }) if channel == STDERR => {
                    stderr.extend_from_slice(&bytes)
                }
                Some(ExecEvent::Data { bytes, .. }) => stdout.extend_from_slice(&bytes),
                Some(ExecEvent::Exit { code, signal, .. }) => {
                    // The command is done; impd closes the socket itself.
                    return Ok(RunResult {
                        code,
                        signal,
                        stdout: stdout.freeze(),
                        stderr: stderr.freeze(),
                    });
                }
                Some(ExecEvent::Error(e)) => return Err(e),
                Some(ExecEvent::Closed { code, reason }) => {
                    return Err(ImpPortError::closed(code, &reason))
                }
                Some(ExecEvent::Started(_)) | Some(ExecEvent::Detached { .. }) => {}
                None => return Err(ImpPortError::closed(None, "the event stream ended")),
            }
        }
    }

    /// Unpacks a tar archive into `dir` inside the imp (created if missing), as a plain exec
    /// of `sh -c 'mkdir -p "$1" && tar -x -f - -C "$1"'` with the archive on stdin.
    pub async fn unpack_tar(
        &self,
        name: &str,
        dir: &str,
        archive: Bytes,
    ) -> Result<RunResult, ImpPortError> {
        self.run(RunSpec {
            name: name.to_string(),
            argv: ["sh", "-c", UNPACK_SCRIPT, "sh", dir]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            cwd: Some("/".into()),
            env: BTreeMap::new(),
            stdin: archive,
        })
        .await
    }
}

/// Writes stdin in [`STDIN_CHUNK`] messages, never holding more than one chunk queued, then
/// `stdin_eof`.
async fn feed_stdin(writer: &ExecWriter, stdin: Bytes) -> Result<(), ImpPortError> {
    let mut rest = stdin;
    while !rest.is_empty() {
        writer.wait_queued_below(STDIN_CHUNK).await?;
        let chunk = rest.split_to(rest.len().min(STDIN_CHUNK));
        writer.input(chunk)?;
    }
    writer.stdin_eof()
}
