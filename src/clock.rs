//! The daemon's clock: epoch milliseconds for the times it records and compares (leases,
//! tickets, idempotency keys, bindings), and RFC 3339 stamps for the rows and answers people
//! read. Every module that needs the time of day asks here, so none reaches into another's
//! internals for it.

/// Now as RFC 3339 UTC with milliseconds (`2026-11-30T06:04:05.123Z`), for trail rows.
pub fn rfc3339_now() -> String {
    rfc3339_at(now_ms())
}

/// Epoch milliseconds `ms` as RFC 3339 UTC with milliseconds (humantime's fixed-width form);
/// the text order of two stamps is their time order. Clamped to what the form can write, from
/// the epoch to the end of year 9999 (humantime refuses the rest).
pub fn rfc3339_at(ms: i64) -> String {
    const LAST_MS: u64 = 253_402_300_799_999;
    let ms = u64::try_from(ms).unwrap_or(0).min(LAST_MS);
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_millis(at).to_string()
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
        // Outside what the form can write, a stamp is clamped rather than a panic.
        assert_eq!(rfc3339_at(-5), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_at(i64::MAX), "9999-12-31T23:59:59.999Z");
        let ts = rfc3339_now();
        assert_eq!(ts.len(), "2026-11-30T06:04:05.123Z".len(), "{ts}");
        assert!(ts.ends_with('Z') && ts.as_bytes()[10] == b'T', "{ts}");
    }
}
