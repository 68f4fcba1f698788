//! A short hot wait after input reaches a PTY, so the echo is picked up without a wake-up.
//!
//! Input written to a PTY is usually answered within tens of microseconds (a shell's echo, an
//! agent's redraw). If the daemon's thread sleeps in `epoll_wait` meanwhile, its CPU may idle,
//! and waking an idle CPU costs more than the answer itself on a virtual machine: on the 2-core
//! machine README's figures come from, an echo round trip took about 95 µs with the CPUs left
//! to idle and 24 µs with them kept busy (docs/performance-log.md, "Echo, late on 2026-12-04").
//! So after each write to a PTY the thread that wrote it keeps polling for [`WINDOW`]: a task
//! yields to the runtime (which then polls epoll without sleeping) and gives the CPU to
//! anything else runnable (`sched_yield`), so the `cat`, the kernel's workers and the client it
//! waits for are not held up. A thread without input never spins, so idle sessions cost
//! nothing; a keystroke costs at most the window of CPU.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// How long a thread stays hot after its last write to a PTY. With 150 µs the echo p50 went
/// from 1.10–1.11× the floor's to 0.61–0.66×, and p99 from 1.08–1.19× to 0.54–0.84×
/// (`atc-bench --phases echo --rounds 3`, two runs each).
pub const WINDOW: Duration = Duration::from_micros(150);

/// One thread's hot window: until when it stays hot, if it is.
#[derive(Debug, Default)]
pub struct Window {
    until: Option<Instant>,
}

impl Window {
    /// Input was written at `now`: the window runs to `now + WINDOW`. Answers whether a
    /// spinner must start (none is running).
    pub fn arm(&mut self, now: Instant) -> bool {
        let idle = self.until.is_none();
        self.until = Some(now + WINDOW);
        idle
    }

    /// Whether the spinner goes on at `now`; once the window has passed it stops, and the
    /// next input starts a new one.
    pub fn keep_on(&mut self, now: Instant) -> bool {
        match self.until {
            Some(until) if now < until => true,
            _ => {
                self.until = None;
                false
            }
        }
    }
}

thread_local! {
    static WINDOW_HERE: Cell<Window> = Cell::new(Window::default());
}

/// Called on the thread that just wrote input to a PTY: keeps it hot for [`WINDOW`]. Off an
/// actix thread (no runtime to spin in) it does nothing.
pub fn after_input() {
    let start = WINDOW_HERE.with(|w| with_window(w, |w| w.arm(Instant::now())));
    if !start {
        return;
    }
    let Some(arbiter) = actix_rt::Arbiter::try_current() else {
        // Nothing will run the spinner; the window must not look armed.
        WINDOW_HERE.with(|w| w.set(Window::default()));
        return;
    };
    arbiter.spawn(async {
        while WINDOW_HERE.with(|w| with_window(w, |w| w.keep_on(Instant::now()))) {
            // The CPU goes to whatever else is runnable here (the echo's writer among them),
            // then the runtime polls its sockets and PTYs without sleeping.
            std::thread::yield_now();
            tokio::task::yield_now().await;
        }
    });
}

fn with_window<T>(cell: &Cell<Window>, f: impl FnOnce(&mut Window) -> T) -> T {
    let mut w = cell.take();
    let out = f(&mut w);
    cell.set(w);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_starts_one_spinner_and_more_input_only_extends_its_window() {
        let t0 = Instant::now();
        let mut w = Window::default();
        assert!(w.arm(t0), "the first input starts a spinner");
        assert!(w.keep_on(t0 + WINDOW / 2));
        assert!(!w.arm(t0 + WINDOW / 2), "a running spinner is extended");
        assert!(
            w.keep_on(t0 + WINDOW),
            "the window runs from the last input"
        );
        assert!(!w.keep_on(t0 + WINDOW * 2), "and ends after it");
        assert!(
            w.arm(t0 + WINDOW * 3),
            "input after it starts a new spinner"
        );
    }

    #[actix_rt::test]
    async fn the_spinner_stops_once_its_window_has_passed() {
        after_input();
        let armed = WINDOW_HERE.with(|w| with_window(w, |w| w.until.is_some()));
        assert!(armed, "input arms this thread's window");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            tokio::task::yield_now().await;
            if WINDOW_HERE.with(|w| with_window(w, |w| w.until.is_none())) {
                break;
            }
            assert!(Instant::now() < deadline, "the spinner never stopped");
        }
    }
}
