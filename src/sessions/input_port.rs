//! `InputPort`: how an interactive attach socket types into a local session's PTY without a
//! hop through the session actor.
//!
//! The session hands one out on attach, after the refusal chain has allowed input; the socket
//! then writes each binary frame from its own thread ([`PtyInput`] says why that is safe and
//! keeps order). Sessions whose process runs elsewhere give none, and their input still goes
//! through the session and its harness.

use bytes::Bytes;

use super::session_error::SessionError;
use crate::metrics::Metrics;
use crate::providers::local::pty_input::PtyInput;

/// The PTY input of one session, for one attached client.
pub struct InputPort {
    pty: PtyInput,
    metrics: Metrics,
}

impl InputPort {
    /// A port onto `pty`, counting what it writes in `metrics`.
    pub fn new(pty: PtyInput, metrics: Metrics) -> InputPort {
        InputPort { pty, metrics }
    }

    /// Writes `bytes` whole, after everything written to this session before; fails as the
    /// session's own input would (`session_dead` once the process is gone, `too_slow` when the
    /// child has stopped reading and the backlog is full).
    pub fn write(&self, bytes: Bytes) -> Result<(), SessionError> {
        let len = bytes.len();
        self.pty.write(bytes)?;
        self.metrics.input_written(len);
        Ok(())
    }
}
