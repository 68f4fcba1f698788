//! The daemon's clock: epoch milliseconds for the times it records and compares (leases,
//! tickets, idempotency keys, bindings), and RFC 3339 stamps for the rows and answers people
//! read. Every module that needs the time of day asks here, so none reaches into another's
//! internals for it.

/// Now as RFC 3339 UTC with milliseconds (`2026-11-30T06:04:05.123Z`), for trail rows.
pub fn rfc3339_now() -> String {
    rfc3339_at(now_ms())
}

/// Epoch milliseconds `ms` as RFC 3339 UTC with milliseconds; the text order of two stamps is
/// their time order (for years 0 to 9999).
pub fn rfc3339_at(ms: i64) -> String {
    let (secs, millis) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Epoch milliseconds now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc_with_milliseconds() {
        assert_eq!(rfc3339_at(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_at(1_796_018_645_123), "2026-11-30T06:04:05.123Z");
        assert!(rfc3339_at(1_796_018_645_123) < rfc3339_at(1_796_018_645_124));
        let ts = rfc3339_now();
        assert_eq!(ts.len(), "2026-11-30T06:04:05.123Z".len(), "{ts}");
        assert!(ts.ends_with('Z') && ts.as_bytes()[10] == b'T', "{ts}");
    }
}
