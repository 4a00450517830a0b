//! The age limit of an expiry, as an age (`5d`) or a point in time (Spark's
//! `expire_snapshots(older_than => TIMESTAMP '2026-11-30 10:00:00')`).

use std::time::Duration;

use chrono::{DateTime, NaiveDate, NaiveDateTime};

use crate::base::error::{Error, Result};
use crate::base::properties::parse_duration;

/// Snapshots older than this may expire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OlderThan {
    /// Older than this age when the expiry runs.
    Age(Duration),
    /// Committed before this instant (epoch milliseconds).
    TimestampMs(i64),
}

/// The forms [`OlderThan::parse`] accepts, for error messages and help.
pub const OLDER_THAN_FORMS: &str = "expected a duration (5d, 12h, 30m, 0s), an RFC 3339 timestamp \
     (2026-11-30T10:00:00Z, 2026-11-30T10:00:00+01:00), a UTC time '2026-11-30 10:00:00', a date \
     2026-11-30 (midnight UTC) or epoch milliseconds (1796032800000)";

/// Bare integers with at least this many digits are epoch milliseconds (from 1973 on); shorter
/// ones are durations missing their unit.
const EPOCH_MS_MIN_DIGITS: usize = 12;

impl OlderThan {
    /// Reads `s`, the value of `option`: a duration, or a timestamp in one of the forms of
    /// [`OLDER_THAN_FORMS`]. A timestamp without an offset is UTC. An error names the option,
    /// the value and every accepted form.
    pub fn parse(option: &str, s: &str) -> Result<Self> {
        let t = s.trim();
        let bad =
            |extra: &str| Error::invalid_option(option, s, format!("{extra}{OLDER_THAN_FORMS}"));
        if t.is_empty() {
            return Err(bad(""));
        }
        if t.bytes().all(|b| b.is_ascii_digit()) {
            if t.len() >= EPOCH_MS_MIN_DIGITS {
                return t.parse().map(Self::TimestampMs).map_err(|_| bad(""));
            }
            return Err(bad(&format!(
                "a duration needs a unit ({t}s, {t}d); epoch milliseconds have {EPOCH_MS_MIN_DIGITS} or more digits; "
            )));
        }
        let b = t.as_bytes();
        let date_like = b.len() >= 10 && b[4] == b'-' && b[7] == b'-';
        if !date_like {
            return parse_duration(option, t)
                .map(Self::Age)
                .map_err(|_| bad(""));
        }
        timestamp_ms(t)
            .map(Self::TimestampMs)
            .ok_or_else(|| bad(""))
    }

    /// The cutoff in epoch milliseconds for an expiry running at `now_ms`.
    pub fn cutoff_ms(&self, now_ms: i64) -> i64 {
        match self {
            Self::Age(d) => now_ms.saturating_sub(d.as_millis().min(i64::MAX as u128) as i64),
            Self::TimestampMs(ms) => *ms,
        }
    }
}

/// A timestamp `t` (starting with a date) in epoch milliseconds: RFC 3339 with `T` or a space,
/// a time without offset (UTC), or a date alone (midnight UTC).
fn timestamp_ms(t: &str) -> Option<i64> {
    // RFC 3339 allows a space for the `T`; Spark's TIMESTAMP literal uses one.
    let norm = match t.as_bytes().get(10) {
        Some(b' ') | Some(b't') => format!("{}T{}", &t[..10], t[11..].trim_start()),
        _ => t.to_string(),
    };
    if let Ok(dt) = DateTime::parse_from_rfc3339(&norm) {
        return Some(dt.timestamp_millis());
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(&norm, format) {
            return Some(dt.and_utc().timestamp_millis());
        }
    }
    NaiveDate::parse_from_str(t, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|dt| dt.and_utc().timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT_10: i64 = 1_796_032_800_000; // 2026-11-30T10:00:00Z

    fn ts(s: &str) -> i64 {
        match OlderThan::parse("--older-than", s).unwrap() {
            OlderThan::TimestampMs(ms) => ms,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn durations_stay_ages() {
        assert_eq!(
            OlderThan::parse("--older-than", "5d").unwrap(),
            OlderThan::Age(Duration::from_secs(5 * 86_400))
        );
        assert_eq!(
            OlderThan::parse("--older-than", " 0s ").unwrap(),
            OlderThan::Age(Duration::ZERO)
        );
        assert_eq!(
            OlderThan::Age(Duration::from_secs(3600)).cutoff_ms(AT_10),
            AT_10 - 3_600_000
        );
    }

    #[test]
    fn timestamps_in_every_accepted_form() {
        assert_eq!(ts("2026-11-30T10:00:00Z"), AT_10);
        assert_eq!(ts("2026-11-30T10:00:00.000Z"), AT_10);
        assert_eq!(ts("2026-11-30T11:00:00+01:00"), AT_10);
        assert_eq!(ts("2026-11-30 10:00:00"), AT_10, "Spark's literal, UTC");
        assert_eq!(ts("2026-11-30 10:00:00Z"), AT_10);
        assert_eq!(ts("2026-11-30T10:00:00"), AT_10, "no offset: UTC");
        assert_eq!(ts("2026-11-30 10:00"), AT_10);
        assert_eq!(ts("2026-11-30 10:00:00.250"), AT_10 + 250);
        assert_eq!(ts("2026-11-30"), AT_10 - 10 * 3_600_000, "midnight UTC");
        assert_eq!(ts("1796032800000"), AT_10, "epoch milliseconds");
        assert_eq!(OlderThan::TimestampMs(AT_10).cutoff_ms(0), AT_10);
    }

    #[test]
    fn bad_values_name_the_option_the_value_and_the_forms() {
        for bad in [
            "",
            "5",
            "yesterday",
            "2026-13-01",
            "2026-11-30 25:00:00",
            "2026-11-30T10:00:00+25:00",
            "5 days",
            "-5d",
        ] {
            let e = OlderThan::parse("--older-than", bad)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("--older-than") && e.contains(&format!("'{bad}'")),
                "{bad}: {e}"
            );
            assert!(e.contains("RFC 3339") && e.contains("5d"), "{bad}: {e}");
        }
        let e = OlderThan::parse("--older-than", "30")
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs a unit (30s, 30d)"), "{e}");
    }
}
