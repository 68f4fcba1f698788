//! The bench's progress line on stderr: which phase runs (numbered in run order) and for how
//! long, drawn by indicatif and only when stderr is a terminal. A log, a pipe or CI gets no
//! progress output at all, only the report on stdout.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressFinish, ProgressStyle};

/// How often the spinner and the elapsed time move.
const TICK: Duration = Duration::from_millis(120);

/// The phase line. Cheap to clone: every clone draws the same line.
#[derive(Clone)]
pub struct PhaseProgress {
    bar: ProgressBar,
}

impl PhaseProgress {
    /// A spinner when stderr is a terminal, else nothing drawn.
    pub fn for_stderr() -> PhaseProgress {
        if !std::io::stderr().is_terminal() {
            return PhaseProgress::hidden();
        }
        let bar = ProgressBar::new_spinner().with_finish(ProgressFinish::AndClear);
        // The template is a literal; a mistake in it would show in the first run.
        if let Ok(style) =
            ProgressStyle::with_template("{spinner} atc bench: phase {pos}, {msg} ({elapsed})")
        {
            bar.set_style(style);
        }
        bar.enable_steady_tick(TICK);
        PhaseProgress { bar }
    }

    /// Draws nothing (tests, `--json` into a file).
    pub fn hidden() -> PhaseProgress {
        PhaseProgress {
            bar: ProgressBar::hidden(),
        }
    }

    /// A new phase starts: the next number, its label, the clock from zero.
    pub fn start(&self, label: &str) {
        self.bar.inc(1);
        self.bar.set_message(label.to_string());
        self.bar.reset_elapsed();
    }

    /// A step inside the current phase (scale's session counts): a new label and clock, the
    /// same number.
    pub fn step(&self, label: &str) {
        self.bar.set_message(label.to_string());
        self.bar.reset_elapsed();
    }

    /// Phases so far (what the line numbers the current one).
    #[cfg(test)]
    fn started(&self) -> u64 {
        self.bar.position()
    }

    /// Removes the line, before the report is printed.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_numbered_in_run_order() {
        let progress = PhaseProgress::hidden();
        progress.start("spawn");
        progress.clone().start("echo");
        assert_eq!(progress.started(), 2);
        progress.finish();
    }
}
