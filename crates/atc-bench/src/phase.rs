//! Bounding a phase in time and recording how it ended.
//!
//! Every phase gets a [`Deadline`]. Waits inside a phase go through [`Deadline::within`], which
//! turns "the deadline passed" into a [`DeadlinePassed`] error naming what was being waited for;
//! [`run_bounded`] also puts a hard limit (the deadline plus a short grace) around the whole
//! phase, so a wait someone forgot to bound still ends. Either way the phase is reported as timed
//! out instead of hanging the run. Ctrl-C ends the phase the same way, as interrupted. Cleanup is
//! not part of the bounded body: the caller runs it afterwards with its own deadline, so a
//! timed-out or interrupted phase still ends its sessions.

use std::future::Future;
use std::time::Duration;

use serde::Serialize;
use thiserror::Error;
use tokio::time::Instant;

use super::cleanup::CleanupReport;
use super::stats::millis;

/// Extra time past the deadline before the whole phase future is dropped. Inner waits see the
/// deadline first and return partial figures; this only catches a wait that is not bounded.
const HARD_LIMIT_GRACE: Duration = Duration::from_secs(5);

/// The instant by which a phase must have finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline(Instant);

/// A wait inside a phase ran past its deadline.
#[derive(Debug, Error)]
#[error("timed out while {0}")]
pub struct DeadlinePassed(pub &'static str);

impl Deadline {
    /// A deadline `limit` from now.
    pub fn after(limit: Duration) -> Deadline {
        Deadline(Instant::now() + limit)
    }

    /// The instant itself, for `tokio::time::timeout_at` and `sleep_until`.
    pub fn instant(self) -> Instant {
        self.0
    }

    /// Runs `fut` unless the deadline passes first; `what` names the wait in the error.
    pub async fn within<F: Future>(
        self,
        what: &'static str,
        fut: F,
    ) -> Result<F::Output, DeadlinePassed> {
        tokio::time::timeout_at(self.0, fut)
            .await
            .map_err(|_| DeadlinePassed(what))
    }
}

/// How a phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// It ran to the end; its figures are complete.
    Ok,
    /// Its deadline passed; figures, if any, are partial.
    TimedOut,
    /// Something went wrong (daemon refused, connection lost); see `error`.
    Failed,
    /// The user pressed Ctrl-C; the phase's sessions are still cleaned up and later phases are
    /// skipped.
    Interrupted,
}

/// One phase's result as it appears in the report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseReport<T> {
    /// How it ended.
    pub outcome: Outcome,
    /// Wall time of the phase body, without cleanup.
    pub elapsed_ms: f64,
    /// What went wrong, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The measurements, when the phase got far enough to have any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub figures: Option<T>,
    /// How ending its sessions went (daemon phases only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupReport>,
}

impl<T> PhaseReport<T> {
    /// The figures, when the phase produced them.
    pub fn figures(&self) -> Option<&T> {
        self.figures.as_ref()
    }

    /// Whether the user interrupted this phase, so the run should stop after its cleanup.
    pub fn was_interrupted(&self) -> bool {
        self.outcome == Outcome::Interrupted
    }
}

/// A phase's figures, which may show that the phase fell short even though it produced them.
///
/// The throughput-type phases return figures for every reader, including one that was still
/// reading when the deadline passed; those figures are worth keeping, but the phase must still
/// be reported as timed out (or failed) rather than "ok".
pub trait Figures {
    /// How the phase fell short, if it did; `None` means the figures are complete.
    fn shortfall(&self) -> Option<(Outcome, String)> {
        None
    }
}

/// Runs a phase body under `limit` and records its outcome (cleanup is added by the caller).
pub async fn run_bounded<T: Figures, F, Fut>(limit: Duration, body: F) -> PhaseReport<T>
where
    F: FnOnce(Deadline) -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let started = Instant::now();
    let deadline = Deadline::after(limit);
    let hard = deadline.instant() + HARD_LIMIT_GRACE;
    let bounded = tokio::time::timeout_at(hard, body(deadline));
    let result = tokio::select! {
        result = bounded => result,
        // Dropping the body here is what stops it; cleanup runs next in the caller. If the
        // handler cannot be installed the phase simply runs without Ctrl-C handling.
        Ok(()) = tokio::signal::ctrl_c() => {
            return PhaseReport {
                outcome: Outcome::Interrupted,
                elapsed_ms: millis(started.elapsed()),
                error: Some("interrupted".into()),
                figures: None,
                cleanup: None,
            };
        }
    };
    let elapsed_ms = millis(started.elapsed());
    let (outcome, error, figures) = match result {
        Ok(Ok(figures)) => match figures.shortfall() {
            None => (Outcome::Ok, None, Some(figures)),
            Some((outcome, why)) => (outcome, Some(why), Some(figures)),
        },
        Ok(Err(err)) if err.downcast_ref::<DeadlinePassed>().is_some() => {
            (Outcome::TimedOut, Some(format!("{err:#}")), None)
        }
        Ok(Err(err)) => (Outcome::Failed, Some(format!("{err:#}")), None),
        Err(_) => (
            Outcome::TimedOut,
            Some(format!("timed out after {:.0} s", limit.as_secs_f64())),
            None,
        ),
    };
    PhaseReport {
        outcome,
        elapsed_ms,
        error,
        figures,
        cleanup: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Figures for i32 {}

    #[derive(Debug, PartialEq)]
    struct Partial;

    impl Figures for Partial {
        fn shortfall(&self) -> Option<(Outcome, String)> {
            Some((Outcome::TimedOut, "1 of 2 readers unfinished".into()))
        }
    }

    impl Figures for () {}

    #[actix_rt::test]
    async fn figures_that_fell_short_keep_their_figures_and_say_why() {
        let r = run_bounded(Duration::from_secs(5), |_| async { Ok(Partial) }).await;
        assert_eq!(r.outcome, Outcome::TimedOut);
        assert_eq!(r.figures, Some(Partial));
        assert_eq!(r.error.as_deref(), Some("1 of 2 readers unfinished"));
    }

    #[actix_rt::test]
    async fn a_body_that_finishes_is_ok() {
        let r = run_bounded(Duration::from_secs(5), |_| async { Ok(7) }).await;
        assert_eq!(r.outcome, Outcome::Ok);
        assert_eq!(r.figures, Some(7));
    }

    #[actix_rt::test]
    async fn a_bounded_wait_past_the_deadline_is_a_timeout_naming_the_wait() {
        let r: PhaseReport<()> = run_bounded(Duration::from_millis(20), |d| async move {
            d.within("waiting for nothing", std::future::pending::<()>())
                .await?;
            Ok(())
        })
        .await;
        assert_eq!(r.outcome, Outcome::TimedOut);
        assert_eq!(
            r.error.as_deref(),
            Some("timed out while waiting for nothing")
        );
    }

    #[actix_rt::test]
    async fn an_error_is_a_failure() {
        let r: PhaseReport<()> = run_bounded(Duration::from_secs(5), |_| async {
            Err(anyhow::anyhow!("refused"))
        })
        .await;
        assert_eq!(r.outcome, Outcome::Failed);
        assert_eq!(r.error.as_deref(), Some("refused"));
    }
}
