//! Waiting for a state with a deadline: the one poll loop of the tests. A test never sleeps
//! hoping a state has arrived; it names the state, polls it, and fails naming it when the
//! deadline passes. The deadline only bounds a failure: a state that arrives in a millisecond
//! ends the wait in a millisecond.

use std::fmt::Display;
use std::time::Duration;

/// Generous bound for things that should happen quickly; it only bounds failure.
pub const WITHIN: Duration = Duration::from_secs(10);

/// How often a wait looks again.
pub const POLL: Duration = Duration::from_millis(20);

/// Runs `check` every `every` until it answers `Some`, and answers that; `None` once `within`
/// has passed. `check` runs at least once, and once more after the deadline, so a state that
/// arrived during the last interval is not missed.
pub async fn poll_every<T>(
    every: Duration,
    within: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> Option<T> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let past = tokio::time::Instant::now() >= deadline;
        if let Some(found) = check().await {
            return Some(found);
        }
        if past {
            return None;
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        tokio::time::sleep(every.min(left)).await;
    }
}

/// [`poll_every`] at [`POLL`].
pub async fn poll<T>(within: Duration, check: impl AsyncFnMut() -> Option<T>) -> Option<T> {
    poll_every(POLL, within, check).await
}

/// Runs `check` every [`POLL`] until it answers `Ok`, and answers that; once `within` has
/// passed, the `Err` of its last look: what the state was at the deadline, for the failure
/// message.
pub async fn poll_ok<T, E>(
    within: Duration,
    mut check: impl AsyncFnMut() -> Result<T, E>,
) -> Result<T, E> {
    let mut last = None;
    let found = poll(within, async || match check().await {
        Ok(found) => Some(found),
        Err(seen) => {
            last = Some(seen);
            None
        }
    })
    .await;
    match (found, last) {
        (Some(found), _) => Ok(found),
        (None, Some(seen)) => Err(seen),
        // `poll` looks at least once, and that look was an `Err`.
        (None, None) => unreachable!("poll_ok looked at nothing"),
    }
}

/// Waits until `condition` holds, or panics naming `what` once `within` has passed.
pub async fn wait_until(
    within: Duration,
    what: impl Display,
    mut condition: impl AsyncFnMut() -> bool,
) {
    if poll(within, async || condition().await.then_some(()))
        .await
        .is_none()
    {
        panic!("{what}: not within {within:?}");
    }
}

/// Waits until `check` answers `Some`, and answers that; panics naming `what` once `within`
/// has passed.
pub async fn wait_for<T>(
    within: Duration,
    what: impl Display,
    check: impl AsyncFnMut() -> Option<T>,
) -> T {
    match poll(within, check).await {
        Some(found) => found,
        None => panic!("{what}: not within {within:?}"),
    }
}
