//! How many hook reports a session may send: a token bucket of `limits.reportBurst` reports,
//! refilled at `limits.reportsPerSecond`. Agents report a few times per turn, and Claude's
//! statusline a few times a second at most; a process that reports faster is flooding the
//! store and the fleet's events, and what is over the rate is refused. The session's trail
//! says so once per flood: the first refusal asks for a trail row, and the flood is over only
//! once the session has been quiet long enough to fill its bucket again. (Ending it at the
//! next report taken would write a row for every refill in a flood that goes on.)
//!
//! Plain state over an injected instant; the session owns one and asks it for each report.

use std::time::Instant;

/// A session's report allowance.
#[derive(Debug)]
pub struct ReportBudget {
    /// Reports per second the bucket refills with.
    rate: f64,
    /// The most reports it holds.
    burst: f64,
    /// Reports that may be sent now.
    tokens: f64,
    /// When `tokens` was last brought up to date.
    at: Instant,
    /// A report was refused since the bucket was last full, so the flood was told already.
    refusing: bool,
}

/// What the budget answers one report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Within the rate.
    Taken,
    /// Over the rate; `first` for the first refusal of this flood (the one the trail tells).
    Refused {
        /// The first refusal since the bucket was last full.
        first: bool,
    },
}

impl ReportBudget {
    /// A full bucket of `burst` reports, refilled at `per_second`.
    pub fn new(per_second: u32, burst: u32, now: Instant) -> ReportBudget {
        ReportBudget {
            rate: f64::from(per_second),
            burst: f64::from(burst),
            tokens: f64::from(burst),
            at: now,
            refusing: false,
        }
    }

    /// Spends one report at `now`, if the bucket holds one.
    pub fn take(&mut self, now: Instant) -> Admission {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.at = now;
        if self.tokens >= self.burst {
            self.refusing = false;
        }
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Admission::Taken;
        }
        let first = !self.refusing;
        self.refusing = true;
        Admission::Refused { first }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_is_taken_then_reports_over_the_rate_are_refused_and_told_once() {
        let t0 = Instant::now();
        let mut b = ReportBudget::new(10, 5, t0);
        for _ in 0..5 {
            assert_eq!(b.take(t0), Admission::Taken);
        }
        assert_eq!(b.take(t0), Admission::Refused { first: true });
        assert_eq!(b.take(t0), Admission::Refused { first: false });
        // A tenth of a second refills one report; the flood goes on, told already.
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(b.take(t1), Admission::Taken);
        assert_eq!(b.take(t1), Admission::Refused { first: false });
        // Half a second of quiet fills the bucket: the next flood is told again.
        let t2 = t1 + Duration::from_millis(500);
        for _ in 0..5 {
            assert_eq!(b.take(t2), Admission::Taken);
        }
        assert_eq!(b.take(t2), Admission::Refused { first: true });
    }

    #[test]
    fn an_idle_session_refills_up_to_its_burst_only() {
        let t0 = Instant::now();
        let mut b = ReportBudget::new(10, 3, t0);
        let later = t0 + Duration::from_secs(3600);
        for _ in 0..3 {
            assert_eq!(b.take(later), Admission::Taken);
        }
        assert_eq!(b.take(later), Admission::Refused { first: true });
    }

    #[test]
    fn a_zero_rate_admits_the_burst_and_then_nothing() {
        let t0 = Instant::now();
        let mut b = ReportBudget::new(0, 1, t0);
        assert_eq!(b.take(t0), Admission::Taken);
        let later = t0 + Duration::from_secs(60);
        assert_eq!(b.take(later), Admission::Refused { first: true });
    }
}
