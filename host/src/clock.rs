//! Time as the service records it (Unix milliseconds) and shows it (ISO 8601 UTC).

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub fn now_ms() -> i64 {
    (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

/// The variable naming the test clock's file (debug builds only).
pub const TEST_CLOCK: &str = "AGENT_HOST_TEST_CLOCK";

/// The time schedules and remote OAuth grants' expiry are read against: the real time,
/// except in a debug build run with `AGENT_HOST_TEST_CLOCK`, where it is the Unix
/// milliseconds written in that file, so a test can stand at 08:59 and then step to 09:00
/// (on every host that reads the file), or past a token's end.
pub fn controllable_now_ms() -> i64 {
    #[cfg(debug_assertions)]
    if let Some(path) = std::env::var_os(TEST_CLOCK)
        && let Some(ms) = std::fs::read_to_string(path).ok().and_then(|t| t.trim().parse().ok())
    {
        return ms;
    }
    now_ms()
}

/// `2026-11-22T04:31:01.123Z`: ISO 8601, UTC, millisecond precision.
pub fn iso(ms: i64) -> String {
    let at = OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let text = at.format(&Rfc3339).unwrap_or_default();
    // Rfc3339 prints nanoseconds when present; keep milliseconds and a `Z`.
    match text.split_once('.') {
        Some((head, _)) => format!("{head}.{:03}Z", ms.rem_euclid(1000)),
        None => format!("{}.{:03}Z", text.trim_end_matches('Z'), ms.rem_euclid(1000)),
    }
}

/// Reads an RFC 3339 time (any offset) as Unix milliseconds.
pub fn parse_iso(text: &str) -> Option<i64> {
    let at = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).ok()
}

pub fn now_iso() -> String {
    iso(now_ms())
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_utc_with_millis() {
        assert_eq!(super::iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(super::iso(1_763_785_861_123), "2025-11-22T04:31:01.123Z");
        assert_eq!(super::iso(1_763_785_861_000), "2025-11-22T04:31:01.000Z");
    }

    #[test]
    fn reads_rfc3339_with_any_offset() {
        assert_eq!(super::parse_iso("2025-11-22T04:31:01.123Z"), Some(1_763_785_861_123));
        assert_eq!(
            super::parse_iso("2025-11-22T05:31:01.123+01:00"),
            Some(1_763_785_861_123)
        );
        assert_eq!(super::parse_iso("2025-11-22"), None);
    }
}
