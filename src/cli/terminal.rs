//! The local terminal the CLI runs in: its size (for `spawn`, `revive` and `attach`), raw mode
//! and a reader of its keys for `attach` and `top`, and the escape sequences that hand a clean
//! terminal back after a detach.
//!
//! Invariant: while a [`RawMode`] guard exists the terminal is raw, and once it is gone the
//! settings saved when it was made are back. Drop covers return, `?` and unwinding panics; a
//! panic hook additionally restores before the panic message is printed, so the message is
//! readable. Signals are the caller's part: `attach` turns SIGTERM/SIGHUP/SIGINT into an
//! ordinary return so the guard drops.

use std::io::{IsTerminal, Read, Write};
use std::sync::{Mutex, Once};

use rustix::termios::{self, OptionalActions, Termios};
use tokio::sync::mpsc;

/// Size used when neither stdin nor stdout is a terminal, the classic VT100 default.
pub const FALLBACK_SIZE: TermSize = TermSize { cols: 80, rows: 24 };

/// A terminal size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermSize {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

/// The size of the terminal on stdout, if stdout is a terminal that reports a non-zero size.
pub fn stdout_size() -> Option<TermSize> {
    let stdout = std::io::stdout();
    if !stdout.is_terminal() {
        return None;
    }
    size_of(termios::tcgetwinsize(&stdout).ok()?)
}

/// The size of whichever of stdout and stdin is a terminal (stdout first), for `attach`,
/// which may run with output redirected but typing on a terminal, or the other way round.
pub fn tty_size() -> Option<TermSize> {
    stdout_size().or_else(|| {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return None;
        }
        size_of(termios::tcgetwinsize(&stdin).ok()?)
    })
}

/// A zero dimension means "unknown" (e.g. a pty nobody sized yet), not a real size.
fn size_of(winsize: termios::Winsize) -> Option<TermSize> {
    (winsize.ws_col > 0 && winsize.ws_row > 0).then_some(TermSize {
        cols: winsize.ws_col,
        rows: winsize.ws_row,
    })
}

/// The settings to restore from the panic hook. Global because a panic hook cannot reach the
/// guard on the stack; written only by `RawMode::enter` (set) and `RawMode::drop` (clear).
static SAVED_FOR_PANIC: Mutex<Option<Termios>> = Mutex::new(None);
static PANIC_HOOK: Once = Once::new();

/// Stdin in raw mode (no echo, no line editing, no signal keys, no output processing) for as
/// long as this guard lives; dropping it restores the settings found when it was made.
pub struct RawMode {
    saved: Termios,
    raw: Termios,
}

impl RawMode {
    /// Puts the terminal on stdin into raw mode. Fails when stdin is not a terminal.
    pub fn enter() -> anyhow::Result<RawMode> {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(&stdin)
            .map_err(|err| anyhow::anyhow!("cannot read the terminal settings of stdin: {err}"))?;
        let mut raw = saved.clone();
        raw.make_raw();
        install_panic_hook();
        set_saved_for_panic(Some(saved.clone()));
        if let Err(err) = termios::tcsetattr(&stdin, OptionalActions::Now, &raw) {
            set_saved_for_panic(None);
            anyhow::bail!("cannot put the terminal into raw mode: {err}");
        }
        Ok(RawMode { saved, raw })
    }

    /// Puts raw mode back after the process was stopped and continued (SIGTSTP/SIGSTOP from
    /// outside, then `fg`): the shell restores its own settings while a job is stopped.
    pub fn reapply(&self) -> anyhow::Result<()> {
        termios::tcsetattr(std::io::stdin(), OptionalActions::Now, &self.raw)
            .map_err(|err| anyhow::anyhow!("cannot put the terminal back into raw mode: {err}"))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        set_saved_for_panic(None);
        // Nothing useful can be done if this fails: it fails when the terminal is gone
        // (hangup), and then there is nothing left to restore.
        let _ = termios::tcsetattr(std::io::stdin(), OptionalActions::Now, &self.saved);
    }
}

fn set_saved_for_panic(value: Option<Termios>) {
    // A poisoned lock only means a panic happened while it was held; the value is still the
    // right one to overwrite.
    let mut slot = SAVED_FOR_PANIC
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    *slot = value;
}

fn install_panic_hook() {
    PANIC_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let saved = SAVED_FOR_PANIC
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .clone();
            if let Some(saved) = saved {
                // Best effort, as in Drop: a failed restore cannot be reported from a hook.
                let _ = termios::tcsetattr(std::io::stdin(), OptionalActions::Now, &saved);
            }
            previous(info);
        }));
    });
}

/// Turns off the terminal modes a session's program may have left on and that would make the
/// user's shell unusable after a detach: mouse reporting, focus events, colour-scheme reports
/// (Claude Code 2.1 sets 2031), bracketed paste, application cursor/keypad keys, the kitty
/// keyboard protocol; shows the cursor and resets colours. Each is a "set to default" sequence, harmless when the mode was already off.
/// Leaving the alternate screen is separate ([`LEAVE_ALT_SCREEN`]) because on a terminal not
/// in it, xterm's `?1049l` also moves the cursor to a stale saved position.
pub const RESET_INPUT_MODES: &[u8] = b"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\
\x1b[?1015l\x1b[?1004l\x1b[?2031l\x1b[?2004l\x1b[?1l\x1b>\x1b[<u\x1b[?25h\x1b[0m";

/// Leaves the alternate screen, showing what was on the terminal before `attach`.
pub const LEAVE_ALT_SCREEN: &[u8] = b"\x1b[?1049l";

/// Follows whether the session's output has switched the terminal to the alternate screen,
/// so a detach leaves it only when needed. It looks for the private-mode sequences 47, 1047
/// and 1049 set/reset; the last one seen wins. Sequences split across frames are caught by
/// keeping the tail of the previous chunk.
#[derive(Debug, Default)]
pub struct AltScreenTracker {
    in_alt: bool,
    tail: Vec<u8>,
}

/// Longest sequence searched for (`ESC [ ? 1 0 4 9 h`), minus one: the most of a split
/// sequence that can sit at the end of a chunk.
const TAIL_KEEP: usize = 7;

impl AltScreenTracker {
    /// Feeds output bytes in the order they are written to the terminal.
    pub fn feed(&mut self, chunk: &[u8]) {
        let mut window = std::mem::take(&mut self.tail);
        window.extend_from_slice(chunk);
        let mut last: Option<(usize, bool)> = None;
        for (pattern, enters) in ALT_SCREEN_SEQUENCES {
            if let Some(pos) = rfind(&window, pattern) {
                let end = pos + pattern.len();
                if last.is_none_or(|(best, _)| end > best) {
                    last = Some((end, *enters));
                }
            }
        }
        if let Some((_, enters)) = last {
            self.in_alt = enters;
        }
        let keep_from = window.len().saturating_sub(TAIL_KEEP);
        self.tail = window.split_off(keep_from);
    }

    /// Whether the terminal is on the alternate screen as far as the output so far says.
    pub fn in_alt_screen(&self) -> bool {
        self.in_alt
    }
}

const ALT_SCREEN_SEQUENCES: &[(&[u8], bool)] = &[
    (b"\x1b[?1049h", true),
    (b"\x1b[?1049l", false),
    (b"\x1b[?1047h", true),
    (b"\x1b[?1047l", false),
    (b"\x1b[?47h", true),
    (b"\x1b[?47l", false),
];

fn rfind(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|w| w == needle)
}

/// Writes the sequences that leave the terminal usable after a detach (see
/// [`RESET_INPUT_MODES`]), when stdout is a terminal. Failure is ignored: it only happens
/// when the terminal is gone.
pub fn hand_back_terminal(alt_screen: bool) {
    let mut stdout = std::io::stdout();
    if !stdout.is_terminal() {
        return;
    }
    let mut bytes = RESET_INPUT_MODES.to_vec();
    if alt_screen {
        bytes.extend_from_slice(LEAVE_ALT_SCREEN);
    }
    // See the doc comment: the only failure is a terminal that no longer exists.
    let _ = stdout.write_all(&bytes).and_then(|()| stdout.flush());
}

/// Reads stdin on a plain thread (a blocking read cannot be cancelled, and a tokio blocking
/// task would hold up runtime shutdown until the next keystroke). Each `read()` result, of at
/// most `read_size` bytes, is one message, and at most `queue` wait unread, so a reader that
/// stops taking them stops the thread (through `blocking_send`) instead of filling memory. The
/// channel closes at EOF or on a read error.
pub fn spawn_stdin_reader(queue: usize, read_size: usize) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel(queue);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; read_size];
        loop {
            let chunk = match stdin.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => buf.get(..n).map(<[u8]>::to_vec).unwrap_or_default(),
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            if tx.blocking_send(chunk).is_err() {
                break;
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracker_follows_enter_and_leave() {
        let mut t = AltScreenTracker::default();
        t.feed(b"hello \x1b[?1049h vim");
        assert!(t.in_alt_screen());
        t.feed(b"bye \x1b[?1049l$ ");
        assert!(!t.in_alt_screen());
    }

    #[test]
    fn tracker_takes_the_last_sequence_in_a_chunk() {
        let mut t = AltScreenTracker::default();
        t.feed(b"\x1b[?1049h...\x1b[?1049l...\x1b[?47h");
        assert!(t.in_alt_screen());
    }

    #[test]
    fn tracker_catches_sequences_split_across_chunks() {
        let mut t = AltScreenTracker::default();
        t.feed(b"abc\x1b[?10");
        assert!(!t.in_alt_screen());
        t.feed(b"49hxyz");
        assert!(t.in_alt_screen());
        // The same sequence must not count twice once it is in the tail.
        t.feed(b"\x1b[?1049");
        t.feed(b"l");
        assert!(!t.in_alt_screen());
    }

    #[test]
    fn zero_size_is_unknown() {
        let ws = termios::Winsize {
            ws_row: 0,
            ws_col: 80,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        assert_eq!(size_of(ws), None);
    }
}
