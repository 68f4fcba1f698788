//! Whether a new spawn is let in now, so a storm of them cannot starve the daemon or the
//! machine: a bounded queue of spawns in flight (`limits.spawnQueue`) and a floor under the
//! machine's available memory (`limits.memoryFloorMiB`). Both refusals are `host_unavailable`
//! with a hint of when to try again; neither leaves anything behind, so a retry (with the same
//! `Idempotency-Key` or without) runs fresh.
//!
//! The queue counts what `POST /v1/sessions` accepted and has not answered yet, on either of its
//! paths (plain or keyed); revives and restores are not spawns and are not counted. A place is a
//! [`QueuePlace`] held by the request's handler, so a request that fails early, or whose client
//! goes away, gives its place back when the handler is dropped. The count is shared by every
//! HTTP worker; like `live_slots`, it is a counter and holds no domain state.
//!
//! The memory floor is read at each spawn whose process runs on this machine (the manager
//! decides which, since it knows the providers): one read of `/proc/meminfo`, a few dozen
//! microseconds. A remote session's memory is its host's, which this machine cannot see. A
//! machine without the figure (not Linux, or a kernel older than 3.14) is not refused: the floor
//! is a guard, and a missing reading is no evidence of pressure.
//!
//! The cap on running sessions is `live_slots`'; the wire form of these refusals is
//! `server::error`'s.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A spawn refused for the state of the daemon or the machine, not for what it asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    /// The queue of spawns in flight is full.
    #[error("{limit} spawns are in flight, the daemon's queue (limits.spawnQueue {limit}); retry after Retry-After seconds")]
    Busy {
        /// The queue's bound.
        limit: usize,
    },
    /// The machine's available memory is below the configured floor.
    #[error("the machine has {available_mib} MiB of memory available, below the floor of {floor_mib} MiB (limits.memoryFloorMiB); end a session or free memory, then retry")]
    MemoryLow {
        /// MemAvailable when the spawn was refused, in MiB.
        available_mib: u64,
        /// The floor.
        floor_mib: u64,
    },
}

impl AdmissionError {
    /// When a retry is worth making (the wire's `Retry-After`). A queue place comes back as
    /// soon as any spawn in flight is answered, which takes well under a second unless the
    /// machine is starved; memory comes back when a session ends or shrinks, which people and
    /// agents do on a scale of seconds, so asking sooner would only add to the load.
    pub fn retry_after(&self) -> Duration {
        match self {
            AdmissionError::Busy { .. } => Duration::from_secs(1),
            AdmissionError::MemoryLow { .. } => Duration::from_secs(10),
        }
    }
}

/// The bounded queue of spawns in flight, shared by every HTTP worker.
#[derive(Debug, Clone)]
pub struct SpawnQueue {
    in_flight: Arc<AtomicUsize>,
    limit: usize,
}

/// One spawn's place in the queue; dropping it gives the place back.
#[derive(Debug)]
#[must_use = "the place is given back as soon as it is dropped"]
pub struct QueuePlace {
    in_flight: Arc<AtomicUsize>,
}

impl SpawnQueue {
    /// A queue of at most `limit` spawns (at least one: a queue of none would refuse all).
    pub fn new(limit: usize) -> SpawnQueue {
        SpawnQueue {
            in_flight: Arc::new(AtomicUsize::new(0)),
            limit: limit.max(1),
        }
    }

    /// A place, or `Busy` when all are taken. The count never passes the bound, even for an
    /// instant, so a storm on several workers cannot slip past it between a check and a take.
    pub fn enter(&self) -> Result<QueuePlace, AdmissionError> {
        let limit = self.limit;
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .map(|_| QueuePlace {
                in_flight: self.in_flight.clone(),
            })
            .map_err(|_| AdmissionError::Busy { limit })
    }

    /// Spawns in flight now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }
}

impl Drop for QueuePlace {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Where the kernel says how much memory a new process could have without swapping.
const MEMINFO: &str = "/proc/meminfo";

/// Refuses a spawn when `available_mib` (the machine's, `None` when it could not be read) is
/// below `floor_mib` (`None`: no floor).
pub fn check_memory(
    floor_mib: Option<u64>,
    available_mib: impl FnOnce() -> Option<u64>,
) -> Result<(), AdmissionError> {
    let Some(floor_mib) = floor_mib else {
        return Ok(());
    };
    match available_mib() {
        Some(available_mib) if available_mib < floor_mib => Err(AdmissionError::MemoryLow {
            available_mib,
            floor_mib,
        }),
        _ => Ok(()),
    }
}

/// The machine's available memory in MiB, from `/proc/meminfo`; `None` when it has no such
/// figure (said once in the log, so a storm does not repeat it).
pub fn available_mib() -> Option<u64> {
    static SAID: AtomicBool = AtomicBool::new(false);
    let read = std::fs::read_to_string(MEMINFO)
        .ok()
        .and_then(|text| mem_available_kib(&text));
    if read.is_none() && !SAID.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            file = MEMINFO,
            "no MemAvailable figure; limits.memoryFloorMiB is not checked"
        );
    }
    read.map(|kib| kib / 1024)
}

/// The `MemAvailable:` figure of `/proc/meminfo` text, in KiB (the kernel writes `kB` and
/// means 1024 bytes).
pub fn mem_available_kib(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|line| {
        let rest = line.strip_prefix("MemAvailable:")?;
        let mut words = rest.split_whitespace();
        let kib = words.next()?.parse().ok()?;
        matches!(words.next(), Some("kB") | None).then_some(kib)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_is_full_at_its_bound_and_a_dropped_place_comes_back() {
        let queue = SpawnQueue::new(2);
        let a = queue.enter().unwrap();
        let b = queue.enter().unwrap();
        assert_eq!(
            queue.enter().unwrap_err(),
            AdmissionError::Busy { limit: 2 }
        );
        assert_eq!(queue.in_flight(), 2, "a refusal takes no place");
        drop(a);
        let c = queue.enter().unwrap();
        drop((b, c));
        assert_eq!(queue.in_flight(), 0);
    }

    #[test]
    fn a_clone_shares_the_count_and_a_bound_of_none_is_one() {
        let queue = SpawnQueue::new(0);
        let other = queue.clone();
        let held = queue.enter().unwrap();
        assert_eq!(
            other.enter().unwrap_err(),
            AdmissionError::Busy { limit: 1 }
        );
        drop(held);
        assert!(other.enter().is_ok());
    }

    #[test]
    fn places_taken_from_many_threads_never_pass_the_bound() {
        let queue = SpawnQueue::new(3);
        let most = Arc::new(AtomicUsize::new(0));
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        if let Ok(place) = queue.enter() {
                            most.fetch_max(queue.in_flight(), Ordering::AcqRel);
                            drop(place);
                        }
                    }
                });
            }
        });
        assert!(most.load(Ordering::Acquire) <= 3);
        assert_eq!(queue.in_flight(), 0);
    }

    #[test]
    fn mem_available_is_read_from_meminfo_text() {
        let text = "MemTotal:       24683772 kB\nMemFree:         4099008 kB\n\
                    MemAvailable:   24049872 kB\nBuffers:           62968 kB\n";
        assert_eq!(mem_available_kib(text), Some(24_049_872));
        assert_eq!(mem_available_kib("MemAvailable: 7\n"), Some(7));
        // Not there (an old kernel), another field that ends the same, or not a number.
        assert_eq!(mem_available_kib("MemTotal: 1 kB\nMemFree: 1 kB\n"), None);
        assert_eq!(mem_available_kib("XMemAvailable: 5 kB\n"), None);
        assert_eq!(mem_available_kib("MemAvailable: lots kB\n"), None);
        assert_eq!(mem_available_kib("MemAvailable: 5 MB\n"), None);
        assert_eq!(mem_available_kib(""), None);
    }

    #[test]
    fn this_machine_has_a_reading() {
        if cfg!(target_os = "linux") {
            assert!(available_mib().is_some_and(|m| m > 0));
        }
    }

    #[test]
    fn memory_below_the_floor_is_refused_naming_both_figures() {
        assert_eq!(
            check_memory(Some(256), || Some(100)),
            Err(AdmissionError::MemoryLow {
                available_mib: 100,
                floor_mib: 256
            })
        );
        assert_eq!(check_memory(Some(256), || Some(256)), Ok(()));
        // No floor: memory is not even read.
        assert_eq!(
            check_memory(None, || panic!("read without a floor")),
            Ok(())
        );
        // No reading: let in.
        assert_eq!(check_memory(Some(256), || None), Ok(()));
        let e = check_memory(Some(256), || Some(100)).unwrap_err();
        assert!(e.to_string().contains("100 MiB") && e.to_string().contains("256 MiB"));
        assert!(e.retry_after() > AdmissionError::Busy { limit: 1 }.retry_after());
    }
}
