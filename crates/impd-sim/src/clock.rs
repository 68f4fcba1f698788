//! The simulator's clock: leases, tickets and every date impd puts on the wire read it.
//!
//! A system clock follows real time; a manual clock stands still until a test advances it, so
//! lease expiry is tested by moving time instead of sleeping. Clones share one time.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, as impd's dates carry them.
pub type Millis = i64;

/// Where "now" comes from. Cheap to clone; clones share the same time.
#[derive(Clone, Debug)]
pub struct Clock {
    /// `None`: real time. `Some`: a manual time only `advance`/`set` move.
    manual: Option<Arc<AtomicI64>>,
}

impl Clock {
    /// Real time.
    pub fn system() -> Clock {
        Clock { manual: None }
    }

    /// A clock that starts at the current real time and then only moves when told.
    pub fn manual() -> Clock {
        Clock {
            manual: Some(Arc::new(AtomicI64::new(real_now()))),
        }
    }

    /// The current time in epoch milliseconds.
    pub fn now(&self) -> Millis {
        match &self.manual {
            Some(t) => t.load(Ordering::Acquire),
            None => real_now(),
        }
    }

    /// Moves a manual clock forward. On a system clock this is a programming error in the test.
    pub fn advance(&self, by: Duration) {
        let t = self
            .manual
            .as_ref()
            .expect("advance() needs a manual clock (SimOptions::clock = Clock::manual())");
        t.fetch_add(by.as_millis() as i64, Ordering::AcqRel);
    }

    /// True when time only moves on `advance`.
    pub fn is_manual(&self) -> bool {
        self.manual.is_some()
    }
}

fn real_now() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// RFC 3339 / ISO-8601 in UTC with milliseconds, the form JavaScript's `toISOString` writes
/// (impd's dates come from there). Clamped to what the form can write, from the epoch to the
/// end of year 9999.
pub fn iso(ms: Millis) -> String {
    const LAST_MS: u64 = 253_402_300_799_999;
    let ms = u64::try_from(ms).unwrap_or(0).min(LAST_MS);
    humantime::format_rfc3339_millis(UNIX_EPOCH + std::time::Duration::from_millis(ms)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_written_as_to_iso_string_writes_them() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1_796_018_645_123), "2026-11-30T06:04:05.123Z");
        assert_eq!(iso(-1), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(i64::MAX), "9999-12-31T23:59:59.999Z");
    }
}
