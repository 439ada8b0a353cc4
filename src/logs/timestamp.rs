//! UTC timestamps, the crate's one time formatter (used by logs, records, pod annotations and
//! container status), computed from `SystemTime` with the civil-from-days algorithm
//! (no calendar crate): record timestamps in containerd's fixed-width RFC3339Nano form
//! (`2024-01-02T03:04:05.123456789Z`), rotation suffixes (`20240102-030405`), and the shape
//! check applied to timestamps read back from a log file.

use std::time::{SystemTime, UNIX_EPOCH};

const SECS_PER_DAY: i64 = 86_400;

/// Broken-down UTC time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    nanos: u32,
}

/// Splits a `SystemTime` into whole seconds since the epoch (floored, so negative before 1970)
/// and the nanoseconds within that second.
fn unix_parts(t: SystemTime) -> (i64, u32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            let secs = -(d.as_secs() as i64);
            match d.subsec_nanos() {
                0 => (secs, 0),
                n => (secs - 1, 1_000_000_000 - n),
            }
        }
    }
}

/// Converts days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March-based
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn civil(t: SystemTime) -> Civil {
    let (secs, nanos) = unix_parts(t);
    let (year, month, day) = civil_from_days(secs.div_euclid(SECS_PER_DAY));
    let sod = secs.rem_euclid(SECS_PER_DAY) as u32;
    Civil {
        year,
        month,
        day,
        hour: sod / 3600,
        minute: sod % 3600 / 60,
        second: sod % 60,
        nanos,
    }
}

/// Formats `t` like containerd's CRI logger: UTC, always nine fractional digits.
pub fn format_timestamp(t: SystemTime) -> String {
    let c = civil(t);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second, c.nanos
    )
}

/// The current time as [`format_timestamp`] gives it (RFC 3339 with nanoseconds, UTC): the
/// form of container and pod times and the static pods' `kubernetes.io/config.seen`.
pub fn now_rfc3339() -> String {
    format_timestamp(SystemTime::now())
}

/// Formats `t` as RFC 3339 UTC with whole seconds (`2024-01-02T03:04:05Z`), truncating.
pub fn format_timestamp_secs(t: SystemTime) -> String {
    let c = civil(t);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

/// Formats `t` as the kubelet's rotation suffix: `YYYYMMDD-HHMMSS`, UTC.
pub fn format_rotation_stamp(t: SystemTime) -> String {
    let c = civil(t);
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

fn digits(b: &[u8], range: std::ops::Range<usize>) -> Option<u32> {
    let part = b.get(range)?;
    if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        part.iter()
            .fold(0u32, |acc, d| acc * 10 + u32::from(d - b'0')),
    )
}

/// Checks that `ts` has the RFC 3339 shape `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` with
/// in-range fields; on failure says which part is wrong.
pub fn validate_timestamp(ts: &[u8]) -> Result<(), &'static str> {
    if ts.len() < 20 {
        return Err("too short for RFC 3339");
    }
    let sep = |i: usize, c: u8| ts.get(i) == Some(&c);
    if digits(ts, 0..4).is_none() || !sep(4, b'-') || !sep(7, b'-') {
        return Err("date is not YYYY-MM-DD");
    }
    match digits(ts, 5..7) {
        Some(1..=12) => {}
        _ => return Err("month out of range"),
    }
    match digits(ts, 8..10) {
        Some(1..=31) => {}
        _ => return Err("day out of range"),
    }
    if !(sep(10, b'T') || sep(10, b't')) {
        return Err("missing T between date and time");
    }
    if !sep(13, b':') || !sep(16, b':') {
        return Err("time is not HH:MM:SS");
    }
    match (digits(ts, 11..13), digits(ts, 14..16), digits(ts, 17..19)) {
        (Some(h), Some(m), Some(s)) if h < 24 && m < 60 && s <= 60 => {}
        _ => return Err("time out of range"),
    }
    let mut i = 19;
    if sep(i, b'.') {
        let frac = ts[i + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if frac == 0 {
            return Err("empty fractional seconds");
        }
        i += 1 + frac;
    }
    match &ts[i..] {
        b"Z" | b"z" => Ok(()),
        [b'+' | b'-', ..] if ts.len() - i == 6 => {
            match (
                digits(ts, i + 1..i + 3),
                sep(i + 3, b':'),
                digits(ts, i + 4..i + 6),
            ) {
                (Some(h), true, Some(m)) if h < 24 && m < 60 => Ok(()),
                _ => Err("zone offset is not ±HH:MM"),
            }
        }
        _ => Err("missing zone (Z or ±HH:MM)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn whole_second_timestamps() {
        let at = |secs| format_timestamp_secs(UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(
            format_timestamp_secs(UNIX_EPOCH + Duration::new(1_700_000_000, 999_999_999)),
            "2023-11-14T22:13:20Z"
        );
    }

    fn at(secs: i64, nanos: u32) -> SystemTime {
        if secs >= 0 {
            UNIX_EPOCH + Duration::new(secs as u64, nanos)
        } else {
            UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
                + Duration::from_nanos(nanos.into())
        }
    }

    #[test]
    fn formats_known_instants() {
        // Expected values computed with GNU `date -u -d @<secs>`.
        let cases = [
            (0, 0, "1970-01-01T00:00:00.000000000Z"),
            (1_704_164_645, 123_456_789, "2024-01-02T03:04:05.123456789Z"),
            (951_782_400, 1, "2000-02-29T00:00:00.000000001Z"), // leap year divisible by 400
            (951_868_799, 999_999_999, "2000-02-29T23:59:59.999999999Z"),
            (1_709_164_800, 500_000_000, "2024-02-29T00:00:00.500000000Z"),
            (4_107_542_399, 0, "2100-02-28T23:59:59.000000000Z"), // 2100 is not a leap year
            (4_107_542_400, 0, "2100-03-01T00:00:00.000000000Z"),
            (253_402_300_799, 0, "9999-12-31T23:59:59.000000000Z"),
            (-1, 0, "1969-12-31T23:59:59.000000000Z"),
            (-86_400, 0, "1969-12-31T00:00:00.000000000Z"),
        ];
        for (secs, nanos, want) in cases {
            assert_eq!(format_timestamp(at(secs, nanos)), want, "secs={secs}");
        }
    }

    #[test]
    fn pre_epoch_subsecond_instants_borrow_a_second() {
        let t = UNIX_EPOCH - Duration::from_nanos(1);
        assert_eq!(format_timestamp(t), "1969-12-31T23:59:59.999999999Z");
    }

    #[test]
    fn civil_from_days_is_consistent_day_by_day() {
        // Walk 1600-01-01 .. 2400-12-31 and check the calendar advances one day at a time.
        let start = -135_140; // 1600-01-01
        let mut prev = civil_from_days(start);
        assert_eq!(prev, (1600, 1, 1));
        for d in start + 1..start + 293_000 {
            let cur = civil_from_days(d);
            let (py, pm, pd) = prev;
            let leap = (py % 4 == 0 && py % 100 != 0) || py % 400 == 0;
            let month_len = match pm {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            let want = if pd < month_len {
                (py, pm, pd + 1)
            } else if pm < 12 {
                (py, pm + 1, 1)
            } else {
                (py + 1, 1, 1)
            };
            assert_eq!(cur, want, "day {d}");
            prev = cur;
        }
    }

    #[test]
    fn rotation_stamp_has_kubelet_shape() {
        assert_eq!(
            format_rotation_stamp(at(1_704_164_645, 999_999_999)),
            "20240102-030405"
        );
    }

    #[test]
    fn validates_timestamps() {
        for ok in [
            "2024-01-02T03:04:05.123456789Z",
            "2024-01-02T03:04:05Z",
            "2024-01-02T03:04:05.1+02:00",
            "2016-10-06T00:17:09.669794202Z",
            "2024-12-31T23:59:60.5-08:30",
        ] {
            assert_eq!(validate_timestamp(ok.as_bytes()), Ok(()), "{ok}");
        }
        let bad = [
            ("2024-01-02", "too short for RFC 3339"),
            ("2024/01/02T03:04:05Z", "date is not YYYY-MM-DD"),
            ("2024-13-02T03:04:05Z", "month out of range"),
            ("2024-01-00T03:04:05Z", "day out of range"),
            ("2024-01-02 03:04:05Z", "missing T between date and time"),
            ("2024-01-02T03-04-05Z", "time is not HH:MM:SS"),
            ("2024-01-02T24:04:05Z", "time out of range"),
            ("2024-01-02T03:04:05.Z", "empty fractional seconds"),
            ("2024-01-02T03:04:05.123", "missing zone (Z or ±HH:MM)"),
            ("2024-01-02T03:04:05+0200", "missing zone (Z or ±HH:MM)"),
            ("2024-01-02T03:04:05+02-00", "zone offset is not ±HH:MM"),
        ];
        for (ts, why) in bad {
            assert_eq!(validate_timestamp(ts.as_bytes()), Err(why), "{ts}");
        }
    }
}
