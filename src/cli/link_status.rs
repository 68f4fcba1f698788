//! The one-line status `atc attach` shows while a remote session cannot be reached: its link
//! to the harness is reattaching, or its host sleeps. Pure: [`LinkStatus::from_text`] reads
//! what the attach socket says (`state` frames, and `attachment` frames as api.md names
//! them), and [`overlay`] / [`clear_overlay`] are the bytes that draw and erase the line.
//!
//! The line is drawn over the terminal's bottom row with the cursor saved and restored around
//! it, so the session's own cursor does not move. Erasing it leaves that row blank until the
//! program redraws it; a full-screen program usually does as soon as its link is back.

use atc_client::atc_protocol::{AttachFrame, Attachment, Descriptor, VmState};
use serde::Deserialize;

/// Whether the session behind an attach can be reached right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkStatus {
    /// Local, or a remote link that is up: nothing to show.
    Up,
    /// The connection to the remote harness dropped; the daemon is reconnecting.
    Reattaching,
    /// The session's host sleeps with the process inside.
    HostAsleep,
}

/// `{"type":"attachment","state":...}`, which api.md lists among the attach socket's frames;
/// read here as well as `state`, so the CLI shows it whichever the daemon sends.
#[derive(Deserialize)]
struct AttachmentFrame {
    #[serde(rename = "type")]
    kind: String,
    state: Attachment,
}

impl LinkStatus {
    /// The status a descriptor shows.
    pub fn of(session: &Descriptor) -> LinkStatus {
        if session.lifecycle.vm == VmState::Asleep {
            return LinkStatus::HostAsleep;
        }
        match session.lifecycle.attachment {
            Attachment::Reattaching => LinkStatus::Reattaching,
            Attachment::Local | Attachment::Attached | Attachment::Detached => LinkStatus::Up,
        }
    }

    /// The status a text frame tells of, or `None` when it says nothing about the link.
    pub fn from_text(bytes: &[u8]) -> Option<LinkStatus> {
        if let Ok(AttachFrame::State { session }) = serde_json::from_slice::<AttachFrame>(bytes) {
            return Some(LinkStatus::of(&session));
        }
        let frame = serde_json::from_slice::<AttachmentFrame>(bytes).ok()?;
        (frame.kind == "attachment").then_some(match frame.state {
            Attachment::Reattaching => LinkStatus::Reattaching,
            Attachment::Local | Attachment::Attached | Attachment::Detached => LinkStatus::Up,
        })
    }

    /// What the line says; `None` when there is nothing to show.
    pub fn line(self) -> Option<&'static str> {
        match self {
            LinkStatus::Up => None,
            LinkStatus::Reattaching => {
                Some("atc: connection to the session lost; reattaching... (Ctrl-\\ detaches)")
            }
            LinkStatus::HostAsleep => {
                Some("atc: the session's host is asleep; `atc revive` wakes it (Ctrl-\\ detaches)")
            }
        }
    }
}

/// Draws `text` in reverse video over row `rows` (the bottom one), cut to `cols` characters,
/// and puts the cursor back where it was.
pub fn overlay(text: &str, cols: u16, rows: u16) -> String {
    let shown: String = text.chars().take(usize::from(cols)).collect();
    format!("\x1b7\x1b[{rows};1H\x1b[2K\x1b[7m{shown}\x1b[0m\x1b8")
}

/// Erases what [`overlay`] drew on row `rows`, putting the cursor back where it was.
pub fn clear_overlay(rows: u16) -> String {
    format!("\x1b7\x1b[{rows};1H\x1b[2K\x1b8")
}

#[cfg(test)]
mod tests {
    use super::*;

    use atc_client::atc_protocol::Lifecycle;

    fn with(vm: VmState, attachment: Attachment) -> Descriptor {
        Descriptor {
            lifecycle: Lifecycle {
                vm,
                attachment,
                ..Lifecycle::default()
            },
            ..Descriptor::default()
        }
    }

    #[test]
    fn the_descriptor_says_whether_the_link_is_up() {
        assert_eq!(
            LinkStatus::of(&with(VmState::None, Attachment::Local)),
            LinkStatus::Up
        );
        assert_eq!(
            LinkStatus::of(&with(VmState::Awake, Attachment::Attached)),
            LinkStatus::Up
        );
        assert_eq!(
            LinkStatus::of(&with(VmState::Unknown, Attachment::Reattaching)),
            LinkStatus::Reattaching
        );
        assert_eq!(
            LinkStatus::of(&with(VmState::Asleep, Attachment::Detached)),
            LinkStatus::HostAsleep
        );
    }

    #[test]
    fn state_and_attachment_frames_are_read_and_others_are_not() -> anyhow::Result<()> {
        let state = serde_json::to_vec(&AttachFrame::State {
            session: Box::new(with(VmState::Unknown, Attachment::Reattaching)),
        })?;
        assert_eq!(LinkStatus::from_text(&state), Some(LinkStatus::Reattaching));
        assert_eq!(
            LinkStatus::from_text(br#"{"type":"attachment","state":"attached"}"#),
            Some(LinkStatus::Up)
        );
        assert_eq!(
            LinkStatus::from_text(br#"{"type":"attachment","state":"reattaching"}"#),
            Some(LinkStatus::Reattaching)
        );
        assert_eq!(
            LinkStatus::from_text(br#"{"type":"resized","cols":80,"rows":24}"#),
            None
        );
        assert_eq!(LinkStatus::from_text(b"not json"), None);
        Ok(())
    }

    #[test]
    fn only_a_broken_link_has_a_line() {
        assert_eq!(LinkStatus::Up.line(), None);
        assert!(LinkStatus::Reattaching
            .line()
            .is_some_and(|l| l.contains("reattaching")));
        assert!(LinkStatus::HostAsleep
            .line()
            .is_some_and(|l| l.contains("asleep")));
    }

    #[test]
    fn the_overlay_saves_and_restores_the_cursor_and_fits_the_width() {
        assert_eq!(
            overlay("abcdef", 4, 24),
            "\x1b7\x1b[24;1H\x1b[2K\x1b[7mabcd\x1b[0m\x1b8"
        );
        assert_eq!(clear_overlay(24), "\x1b7\x1b[24;1H\x1b[2K\x1b8");
    }
}
