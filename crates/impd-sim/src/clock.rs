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
/// (impd's dates come from there).
pub fn iso(ms: Millis) -> String {
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}
