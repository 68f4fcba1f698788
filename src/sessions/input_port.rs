//! `InputPort`: how an interactive attach socket types into a local session's PTY without a
//! hop through the session actor.
//!
//! The session hands one out on attach, after the refusal chain has allowed input; the socket
//! then writes each binary frame from its own thread ([`PtyInput`] says why that is safe and
//! keeps order). Sessions whose process runs elsewhere give none, and their input still goes
//! through the session and its harness.

use actix::Recipient;
use bytes::Bytes;

use super::messages::LineSubmitted;
use super::session_error::SessionError;
use crate::metrics::Metrics;
use crate::providers::local::pty_input::PtyInput;

/// The PTY input of one session, for one attached client.
pub struct InputPort {
    pty: PtyInput,
    metrics: Metrics,
    /// The session, told when this client presses Enter, for a session whose attention the
    /// activity rule judges (input past the session is otherwise invisible to it).
    submitted: Option<Recipient<LineSubmitted>>,
}

impl InputPort {
    /// A port onto `pty`, counting what it writes in `metrics`, telling `submitted` (if any)
    /// of each write that holds an Enter.
    pub fn new(
        pty: PtyInput,
        metrics: Metrics,
        submitted: Option<Recipient<LineSubmitted>>,
    ) -> InputPort {
        InputPort {
            pty,
            metrics,
            submitted,
        }
    }

    /// Writes `bytes` whole, after everything written to this session before; fails as the
    /// session's own input would (`session_dead` once the process is gone, `too_slow` when the
    /// child has stopped reading and the backlog is full).
    pub fn write(&self, bytes: Bytes) -> Result<(), SessionError> {
        let len = bytes.len();
        let enter = self.submitted.is_some() && holds_enter(&bytes);
        self.pty.write(bytes)?;
        self.metrics.input_written(len);
        if let (true, Some(session)) = (enter, &self.submitted) {
            session.do_send(LineSubmitted);
        }
        Ok(())
    }
}

/// Whether typed `bytes` press Enter: a terminal sends CR for it (and LF is a newline in a
/// paste or a script's input).
pub fn holds_enter(bytes: &[u8]) -> bool {
    bytes.iter().any(|&b| b == b'\r' || b == b'\n')
}
