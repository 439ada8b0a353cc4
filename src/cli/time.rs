//! cli::time: durations and timestamps as kubectl prints them — `HumanDuration` ages
//! (`5s`, `3m20s`, `2d`), `<unknown>` for missing times, RFC 1123 dates in `describe`.

use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::jiff::Timestamp;

/// The current time.
pub fn now() -> Timestamp {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    // Seconds since 1970 fit i64 and jiff's range until the year 9999.
    let secs = i64::try_from(since.as_secs()).unwrap_or(i64::MAX);
    let nanos = i32::try_from(since.subsec_nanos()).unwrap_or(0);
    Timestamp::new(secs, nanos).unwrap_or(Timestamp::MAX)
}

/// kubectl's `duration.HumanDuration` for a duration of `secs` whole seconds (truncated
/// toward zero); up to 2 s in the future counts as now.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 60 * 2 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// kubectl's `translateTimestampSince`: the age of `t` at `now`, `<unknown>` without a time.
pub fn since(t: Option<Timestamp>, now: Timestamp) -> String {
    match t {
        Some(t) => human_duration(now.duration_since(t).as_secs()),
        None => "<unknown>".into(),
    }
}

/// [`since`] for an RFC 3339 string (events keep their times as text).
pub fn since_str(rfc3339: &str, now: Timestamp) -> String {
    since(parse(rfc3339), now)
}

/// Parses an RFC 3339 time; `None` if empty or invalid.
pub fn parse(rfc3339: &str) -> Option<Timestamp> {
    rfc3339.parse().ok()
}

/// Go's `time.RFC1123Z` in UTC: `Mon, 02 Jan 2006 15:04:05 +0000`.
pub fn rfc1123z(t: Timestamp) -> String {
    t.strftime("%a, %d %b %Y %H:%M:%S %z").to_string()
}

/// An event's age as kubectl shows it: `<last>`, or `<last> (xN over <first>)` when repeated.
pub fn event_age(e: &crate::status::EventRecord, now: Timestamp) -> String {
    if e.count > 1 {
        format!(
            "{} (x{} over {})",
            since_str(&e.last_timestamp, now),
            e.count,
            since_str(&e.first_timestamp, now)
        )
    } else {
        since_str(&e.last_timestamp, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_match_kubectl() {
        let cases = [
            (-5, "<invalid>"),
            (-2, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (5, "5s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (599, "9m59s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60 * 25, "3h25m"),
            (8 * 3600, "8h"),
            (47 * 3600 + 3599, "47h"),
            (48 * 3600, "2d"),
            (50 * 3600, "2d2h"),
            (8 * 86400, "8d"),
            (400 * 86400, "400d"),
            (730 * 86400, "2y"),
            (800 * 86400, "2y70d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
    }

    #[test]
    fn ages_and_dates() {
        let now: Timestamp = "2024-01-02T03:04:05Z".parse().expect("now");
        assert_eq!(since_str("2024-01-02T03:00:45Z", now), "3m20s");
        assert_eq!(since_str("2024-01-02T03:04:06.5Z", now), "0s");
        assert_eq!(since_str("", now), "<unknown>");
        assert_eq!(since_str("yesterday", now), "<unknown>");
        assert_eq!(since(None, now), "<unknown>");
        assert_eq!(rfc1123z(now), "Tue, 02 Jan 2024 03:04:05 +0000");
        let real_now = super::now();
        assert!(real_now > now);
    }
}
