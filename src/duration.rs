//! duration: Go's `time.ParseDuration` grammar, used by every `metav1.Duration` field of the
//! KubeletConfiguration ("20s", "1m30s", "500ms", "2h45m0.5s", "0"), and of podvisor's duration
//! annotations (`podvisor.io/rollback-after`). A leaf (layer 0): config and pod validation use it.
//!
//! The grammar is `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+` with the units `ns`, `us` (also `µs` U+00B5
//! and `μs` U+03BC), `ms`, `s`, `m`, `h`, plus the bare `0`. Fractions are converted with the same
//! float64 arithmetic Go uses, so results are bit-for-bit the ones the kubelet reads; values above
//! the int64 nanosecond range are rejected like Go rejects them. Unlike Go, a negative duration
//! is an error: no kubelet setting podvisor reads may be negative.

use std::time::Duration;

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The text does not follow the grammar or does not fit in int64 nanoseconds.
    #[error("invalid duration {value:?}")]
    Invalid { value: String },
    /// A number is not followed by a unit ("3").
    #[error("missing unit in duration {value:?}")]
    MissingUnit { value: String },
    /// The unit is not one of ns, us, µs, μs, ms, s, m, h ("1d").
    #[error("unknown unit {unit:?} in duration {value:?}")]
    UnknownUnit { unit: String, value: String },
    /// The duration is below zero ("-5s").
    #[error("duration {value:?} is negative")]
    Negative { value: String },
}

const NANOSECOND: u64 = 1;
const MICROSECOND: u64 = 1_000 * NANOSECOND;
const MILLISECOND: u64 = 1_000 * MICROSECOND;
const SECOND: u64 = 1_000 * MILLISECOND;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;

/// 1 << 63: the overflow bound Go's parser checks against.
const LIMIT: u64 = 1 << 63;

fn unit_nanos(unit: &[u8]) -> Option<u64> {
    match unit {
        b"ns" => Some(NANOSECOND),
        b"us" => Some(MICROSECOND),
        b"\xc2\xb5s" => Some(MICROSECOND), // "µs", U+00B5 micro sign
        b"\xce\xbcs" => Some(MICROSECOND), // "μs", U+03BC Greek small letter mu
        b"ms" => Some(MILLISECOND),
        b"s" => Some(SECOND),
        b"m" => Some(MINUTE),
        b"h" => Some(HOUR),
        _ => None,
    }
}

/// Consumes leading ASCII digits; `None` when the value overflows Go's bound.
fn leading_int(s: &[u8]) -> Option<(u64, &[u8])> {
    let mut x: u64 = 0;
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        if x > LIMIT / 10 {
            return None;
        }
        x = x * 10 + u64::from(s[i] - b'0');
        if x > LIMIT {
            return None;
        }
        i += 1;
    }
    Some((x, &s[i..]))
}

/// Consumes leading ASCII digits of a fraction; digits beyond the representable precision are
/// dropped (not an error), exactly like Go's `leadingFraction`.
fn leading_fraction(s: &[u8]) -> (u64, f64, &[u8]) {
    let mut x: u64 = 0;
    let mut scale = 1.0_f64;
    let mut overflow = false;
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        if !overflow {
            if x > (LIMIT - 1) / 10 {
                overflow = true;
            } else {
                let y = x * 10 + u64::from(s[i] - b'0');
                if y > LIMIT {
                    overflow = true;
                } else {
                    x = y;
                    scale *= 10.0;
                }
            }
        }
        i += 1;
    }
    (x, scale, &s[i..])
}

/// Parses a Go duration string ("20s", "1m30s", "500ms", "1h", "2h45m0.5s", "0").
///
/// Accepts exactly what Go's `time.ParseDuration` accepts, except negative values; `-0` and
/// `-0s` are zero and accepted.
pub fn parse_go_duration(value: &str) -> Result<Duration, DurationError> {
    let invalid = || DurationError::Invalid {
        value: value.to_string(),
    };
    let mut s = value.as_bytes();
    let mut negative = false;
    if let Some(&c) = s.first() {
        if c == b'-' || c == b'+' {
            negative = c == b'-';
            s = &s[1..];
        }
    }
    if s == b"0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err(invalid());
        }
        let before = s.len();
        let (mut v, rest) = leading_int(s).ok_or_else(invalid)?;
        s = rest;
        let pre = before != s.len();

        let mut fraction = 0;
        let mut scale = 1.0;
        let mut post = false;
        if let Some(rest) = s.strip_prefix(b".") {
            let (f, sc, rest2) = leading_fraction(rest);
            post = rest.len() != rest2.len();
            fraction = f;
            scale = sc;
            s = rest2;
        }
        if !pre && !post {
            return Err(invalid());
        }

        let unit_len = s
            .iter()
            .position(|&c| c == b'.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if unit_len == 0 {
            return Err(DurationError::MissingUnit {
                value: value.to_string(),
            });
        }
        let (unit_text, rest) = s.split_at(unit_len);
        s = rest;
        let unit = unit_nanos(unit_text).ok_or_else(|| DurationError::UnknownUnit {
            unit: String::from_utf8_lossy(unit_text).into_owned(),
            value: value.to_string(),
        })?;
        if v > LIMIT / unit {
            return Err(invalid());
        }
        v *= unit;
        if fraction > 0 {
            // Go computes the fraction in float64 (exact to the nanosecond for fractions of
            // hours); the conversion truncates toward zero like Go's uint64(float64).
            v += (fraction as f64 * (unit as f64 / scale)) as u64;
            if v > LIMIT {
                return Err(invalid());
            }
        }
        // Both terms are at most 1 << 63, so the sum cannot overflow u64 before the check
        // except at exactly 1 << 64, which checked_add catches.
        total = total.checked_add(v).ok_or_else(invalid)?;
        if total > LIMIT {
            return Err(invalid());
        }
    }
    if negative {
        if total == 0 {
            return Ok(Duration::ZERO);
        }
        return Err(DurationError::Negative {
            value: value.to_string(),
        });
    }
    if total > LIMIT - 1 {
        return Err(invalid());
    }
    Ok(Duration::from_nanos(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: u64 = NANOSECOND;
    const US: u64 = MICROSECOND;
    const MS: u64 = MILLISECOND;
    const S: u64 = SECOND;
    const M: u64 = MINUTE;
    const H: u64 = HOUR;

    /// The valid, non-negative cases of Go's `parseDurationTests` (src/time/time_test.go),
    /// with the nanosecond values Go returns.
    #[test]
    fn matches_go_on_valid_inputs() {
        let cases: &[(&str, u64)] = &[
            ("0", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            ("+5s", 5 * S),
            ("-0", 0),
            ("+0", 0),
            ("-0s", 0),
            ("0s", 0),
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600 * MS),
            ("5.s", 5 * S),
            (".5s", 500 * MS),
            ("1.0s", S),
            ("1.00s", S),
            ("1.004s", S + 4 * MS),
            ("1.0040s", S + 4 * MS),
            ("100.00100s", 100 * S + MS),
            ("10ns", 10 * NS),
            ("11us", 11 * US),
            ("12µs", 12 * US),
            ("12μs", 12 * US),
            ("13ms", 13 * MS),
            ("14s", 14 * S),
            ("15m", 15 * M),
            ("16h", 16 * H),
            ("3h30m", 3 * H + 30 * M),
            ("10.5s4m", 4 * M + 10 * S + 500 * MS),
            (
                "1h2m3s4ms5us6ns",
                H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS,
            ),
            ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
            ("52763797000ns", 52_763_797_000),
            ("0.3333333333333333333h", 20 * M),
            ("9007199254740993ns", (1 << 53) + 1),
            ("9223372036854775807ns", (1 << 63) - 1),
            ("9223372036854775.807us", (1 << 63) - 1),
            ("9223372036s854ms775us807ns", (1 << 63) - 1),
            ("0.100000000000000000000h", 6 * M),
            ("0.830103483285477580700h", 49 * M + 48 * S + 372_539_827),
            // The kubelet's own defaults and common config values.
            ("20s", 20 * S),
            ("1m", M),
            ("1m30s", 90 * S),
            ("500ms", 500 * MS),
            ("1h", H),
            ("2h45m0.5s", 2 * H + 45 * M + 500 * MS),
            ("4h0m0s", 4 * H),
        ];
        for &(input, nanos) in cases {
            assert_eq!(
                parse_go_duration(input),
                Ok(Duration::from_nanos(nanos)),
                "{input}"
            );
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        let invalid = [
            "",
            "-",
            "+",
            ".",
            "-.",
            "s",
            ".s",
            "+.s",
            " 1s",
            "9223372036854775808ns",
            "9223372036854775.808us",
            "9223372036854ms775us808ns",
            "99999999999999999999s",
        ];
        for input in invalid {
            assert_eq!(
                parse_go_duration(input),
                Err(DurationError::Invalid {
                    value: input.to_string()
                }),
                "{input:?}"
            );
        }
        assert_eq!(
            parse_go_duration("3"),
            Err(DurationError::MissingUnit { value: "3".into() })
        );
        for input in ["1s2", "1.5.s"] {
            assert_eq!(
                parse_go_duration(input),
                Err(DurationError::MissingUnit {
                    value: input.into()
                }),
                "{input}"
            );
        }
        for (input, unit) in [
            ("1d", "d"),
            ("1sm", "sm"),
            ("5S", "S"),
            ("1h 2m", "h "),
            ("1 s", " s"),
            ("1s ", "s "),
            ("2secs", "secs"),
        ] {
            assert_eq!(
                parse_go_duration(input),
                Err(DurationError::UnknownUnit {
                    unit: unit.into(),
                    value: input.into()
                }),
                "{input}"
            );
        }
    }

    #[test]
    fn rejects_negative_durations() {
        for input in ["-5s", "-2m3.4s", "-1ns", "-9223372036854775808ns"] {
            assert_eq!(
                parse_go_duration(input),
                Err(DurationError::Negative {
                    value: input.into()
                }),
                "{input}"
            );
        }
    }

    #[test]
    fn error_messages_name_the_value() {
        let err = parse_go_duration("10x").expect_err("unknown unit");
        assert_eq!(err.to_string(), "unknown unit \"x\" in duration \"10x\"");
    }
}
