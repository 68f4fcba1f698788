//! The threads a session's start and end block on, in place of the runtime's blocking pool.
//!
//! A spawn writes its files and waits for a launcher to start its process
//! ([`crate::providers::local::launcher`]); a forget removes a file. Neither may block the sessions'
//! thread, and both ran on tokio's blocking pool (`spawn_blocking`) until that pool was seen
//! stalling the sessions' thread in a spawn storm. The pool keeps its queue and its idle
//! threads under one `parking_lot` mutex, which the spawning thread takes to hand over a job
//! and every blocking thread takes as it picks a job up and finishes one. On a saturated
//! machine a holder is preempted inside it, and the sessions' thread, wanting it next, spun in
//! `sched_yield` (1,874 calls over 1,000 spawns) and parked until the holder ran again, with
//! every session, socket and request of the daemon waiting behind it (docs/performance-log.md,
//! "Spawn stalls").
//!
//! Here the caller hands a job over through a channel whose sender takes no lock the
//! threads hold while they work, and hears back on a oneshot. The threads share the
//! daemon's descriptor table, so unlike a launcher they may wake a runtime. Jobs start in the
//! order given, on the first thread free.

use std::panic::AssertUnwindSafe;
use std::sync::{mpsc, Arc, Mutex, OnceLock, PoisonError};

/// A job as the threads take it.
type Job = Box<dyn FnOnce() + Send>;

/// Why a job gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum JobLost {
    /// It panicked; the panic was logged where it happened.
    #[error("the job panicked")]
    Panicked,
    /// No thread could be started to run it.
    #[error("no blocking thread could be started: {0}")]
    NoThread(String),
}

/// Runs `job` on one of the threads and answers what it returned.
pub async fn run<T, F>(job: F) -> Result<T, JobLost>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (answer, answered) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        // A panic drops `answer` unsent, which is how the caller hears of it.
        if let Ok(value) = std::panic::catch_unwind(AssertUnwindSafe(job)) {
            // The caller may have stopped waiting (its actor stopped); nothing is owed it.
            let _ = answer.send(value);
        }
    });
    threads()?
        .send(job)
        .map_err(|_| JobLost::NoThread("every blocking thread stopped".into()))?;
    answered.await.map_err(|_| JobLost::Panicked)
}

/// Starts the threads now, if they are not running yet, rather than on the first job (see
/// [`crate::providers::local::launcher::prestart`], which is why).
pub fn prestart() {
    if let Err(e) = threads() {
        tracing::error!(error = %e, "no blocking thread; spawns and forgets will fail");
    }
}

/// How many threads there are: twice the launchers, so a launcher never waits for its next job
/// while the one before writes its files, and eight at least. On 2 cores (two launchers), 4, 8
/// and 16 threads gave spawn p99s of 19.3–19.8, 16.7–17.8 and 18.8–19.7 ms
/// (docs/performance-log.md, "Spawn stalls").
fn count() -> usize {
    (2 * crate::providers::local::launcher::count()).max(8)
}

/// The senders of the process's threads, started on first use; `Err` if none could start.
fn threads() -> Result<&'static mpsc::Sender<Job>, JobLost> {
    static THREADS: OnceLock<Result<mpsc::Sender<Job>, String>> = OnceLock::new();
    THREADS
        .get_or_init(|| start(count()).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| JobLost::NoThread(e.clone()))
}

/// Starts `count` threads taking jobs from one queue; answers its sender.
fn start(count: usize) -> std::io::Result<mpsc::Sender<Job>> {
    let (jobs, queue) = mpsc::channel::<Job>();
    let queue = Arc::new(Mutex::new(queue));
    for i in 0..count.max(1) {
        let queue = Arc::clone(&queue);
        std::thread::Builder::new()
            .name(format!("atc-blocking-{i}"))
            .spawn(move || loop {
                // Held only while waiting for the next job; a job never runs under it, and
                // nothing panics while it is held, so a poisoned lock is whole.
                let next = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
                match next {
                    Ok(job) => job(),
                    // The sender is static: it goes only with the process.
                    Err(_) => return,
                }
            })?;
    }
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix_rt::test]
    async fn a_job_runs_on_a_blocking_thread_and_answers() {
        let name = run(|| std::thread::current().name().map(str::to_owned))
            .await
            .expect("answer");
        assert!(
            name.as_deref()
                .is_some_and(|n| n.starts_with("atc-blocking-")),
            "ran on {name:?}"
        );
    }

    #[actix_rt::test]
    async fn a_panicking_job_is_reported_and_the_threads_go_on() {
        let lost = run(|| -> u32 { panic!("the job fails") }).await;
        assert!(matches!(lost, Err(JobLost::Panicked)), "{lost:?}");
        // Every thread still takes jobs, the one that ran the panic included.
        let answers =
            futures_util::future::join_all((0..2 * count()).map(|i| run(move || i * 2))).await;
        let answers: Vec<usize> = answers.into_iter().map(|a| a.expect("answer")).collect();
        assert_eq!(answers, (0..2 * count()).map(|i| i * 2).collect::<Vec<_>>());
    }

    #[actix_rt::test]
    async fn jobs_blocked_on_each_other_all_run_at_once_up_to_the_thread_count() {
        // Each job waits until all have started: they finish only if that many run at once.
        let n = count();
        let barrier = Arc::new(std::sync::Barrier::new(n));
        let all = (0..n).map(|_| {
            let barrier = Arc::clone(&barrier);
            run(move || {
                barrier.wait();
            })
        });
        let done = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            futures_util::future::join_all(all),
        )
        .await
        .expect("every job ran at once");
        assert!(done.iter().all(Result::is_ok));
    }
}
