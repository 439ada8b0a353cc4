//! Kubernetes resource quantities ("500m", "1.5Gi", "1e3"): parsing into exact integer values.
//!
//! The grammar and rounding follow apimachinery's `resource.ParseQuantity`:
//! `<sign>?<digits>[.<digits>]<suffix>` where the suffix is a binary SI suffix
//! (`Ki Mi Gi Ti Pi Ei`), a decimal SI suffix (`n u m "" k M G T P E`) or a decimal exponent
//! (`e<int>` / `E<int>`). Non-zero values are rounded UP to the nano unit, and
//! [`parse_cpu_millis`] / [`parse_bytes`] round up again to milli / whole units, like
//! `Quantity.MilliValue()` and `Quantity.Value()`. Negative quantities are rejected: no
//! resource amount podvisor reads may be negative.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Why a quantity could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The text does not follow the quantity grammar.
    #[error("invalid quantity {value:?}: {reason}")]
    Invalid { value: String, reason: &'static str },
    /// The quantity is below zero.
    #[error("quantity {value:?} is negative")]
    Negative { value: String },
    /// The quantity does not fit the integer type it is converted to.
    #[error("quantity {value:?} is out of range")]
    OutOfRange { value: String },
}

const NANOS_PER_UNIT: u128 = 1_000_000_000;

/// Parses `q` into nano units (1 = 10^-9), rounding non-zero values up like Kubernetes does.
/// The result is exact for every quantity Kubernetes can represent below ~3.4e29.
pub fn parse_nanos(q: &Quantity) -> Result<u128, QuantityError> {
    parse_str_nanos(&q.0)
}

/// Parses a CPU quantity into millicores, rounding up ("0.1m" -> 1, "2.25" -> 2250).
pub fn parse_cpu_millis(q: &Quantity) -> Result<u64, QuantityError> {
    let nanos = parse_nanos(q)?;
    to_u64(nanos.div_ceil(1_000_000), &q.0)
}

/// Parses a memory or storage quantity into bytes, rounding up ("1.5Gi" -> 1610612736,
/// "129M" -> 129000000, "0.5" -> 1).
pub fn parse_bytes(q: &Quantity) -> Result<u64, QuantityError> {
    let nanos = parse_nanos(q)?;
    to_u64(nanos.div_ceil(NANOS_PER_UNIT), &q.0)
}

/// A byte count as Kubernetes prints a BinarySI quantity: the largest binary suffix that
/// divides it exactly (`104857600` -> `100Mi`, `1536` -> `1536`... `1536Ki` for 1.5Mi).
pub fn format_binary_si(n: u64) -> String {
    const SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if n == 0 {
        return "0".into();
    }
    let mut v = n;
    let mut i = 0;
    while i < SUFFIXES.len() && v % 1024 == 0 {
        v /= 1024;
        i += 1;
    }
    if i == 0 {
        v.to_string()
    } else {
        format!("{v}{}", SUFFIXES[i - 1])
    }
}

fn to_u64(v: u128, value: &str) -> Result<u64, QuantityError> {
    u64::try_from(v).map_err(|_| QuantityError::OutOfRange {
        value: value.to_string(),
    })
}

enum Suffix {
    /// Multiply by 2^(10*n).
    Binary(u32),
    /// Multiply by 10^n.
    Decimal(i32),
}

fn parse_str_nanos(value: &str) -> Result<u128, QuantityError> {
    let invalid = |reason| QuantityError::Invalid {
        value: value.to_string(),
        reason,
    };
    let out_of_range = || QuantityError::OutOfRange {
        value: value.to_string(),
    };
    if value.is_empty() {
        return Err(invalid("empty string"));
    }
    let (negative, rest) = match value.as_bytes()[0] {
        b'-' => (true, &value[1..]),
        b'+' => (false, &value[1..]),
        _ => (false, value),
    };
    let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (int_part, rest) = rest.split_at(int_len);
    let (frac_part, suffix) = match rest.strip_prefix('.') {
        Some(after) => {
            let n = after.bytes().take_while(u8::is_ascii_digit).count();
            after.split_at(n)
        }
        None => ("", rest),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(invalid("no digits"));
    }
    let suffix = match suffix {
        "" => Suffix::Decimal(0),
        "n" => Suffix::Decimal(-9),
        "u" => Suffix::Decimal(-6),
        "m" => Suffix::Decimal(-3),
        "k" => Suffix::Decimal(3),
        "M" => Suffix::Decimal(6),
        "G" => Suffix::Decimal(9),
        "T" => Suffix::Decimal(12),
        "P" => Suffix::Decimal(15),
        "E" => Suffix::Decimal(18),
        "Ki" => Suffix::Binary(1),
        "Mi" => Suffix::Binary(2),
        "Gi" => Suffix::Binary(3),
        "Ti" => Suffix::Binary(4),
        "Pi" => Suffix::Binary(5),
        "Ei" => Suffix::Binary(6),
        s if s.starts_with(['e', 'E']) => {
            let exp = &s[1..];
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid("bad exponent"));
            }
            Suffix::Decimal(exp.parse::<i32>().map_err(|_| out_of_range())?)
        }
        _ => return Err(invalid("unknown suffix")),
    };

    let mut mantissa: u128 = 0;
    for b in int_part.bytes().chain(frac_part.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(u128::from(b - b'0')))
            .ok_or_else(out_of_range)?;
    }
    if mantissa == 0 {
        return Ok(0);
    }
    if negative {
        return Err(QuantityError::Negative {
            value: value.to_string(),
        });
    }
    let frac_len = i64::try_from(frac_part.len()).map_err(|_| out_of_range())?;
    let (mantissa, exp10) = match suffix {
        Suffix::Binary(n) => (
            mantissa
                .checked_mul(1u128 << (10 * n))
                .ok_or_else(out_of_range)?,
            9 - frac_len,
        ),
        Suffix::Decimal(e) => (mantissa, i64::from(e) + 9 - frac_len),
    };
    if exp10 >= 0 {
        let factor = u32::try_from(exp10)
            .ok()
            .and_then(|e| 10u128.checked_pow(e))
            .ok_or_else(out_of_range)?;
        mantissa.checked_mul(factor).ok_or_else(out_of_range)
    } else {
        // Dividing by more than 10^38 leaves a non-zero value below one nano: round up to 1.
        match u32::try_from(-exp10)
            .ok()
            .and_then(|e| 10u128.checked_pow(e))
        {
            Some(divisor) => Ok(mantissa.div_ceil(divisor)),
            None => Ok(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity(s.to_string())
    }

    #[test]
    fn cpu_millis_table() {
        // Values from "Resource Management for Pods and Containers" and the quantity docs.
        let cases = [
            ("500m", 500),
            ("1", 1000),
            ("0.5", 500),
            ("0.1", 100),
            ("2.25", 2250),
            ("1e3", 1_000_000),
            ("100m", 100),
            ("0.1m", 1),
            ("1u", 1),
            ("250000u", 250),
            ("0", 0),
            ("0m", 0),
            ("+2", 2000),
            (".5", 500),
            ("1.", 1000),
            ("1k", 1_000_000),
            ("1E-3", 1),
            ("5e-1", 500),
        ];
        for (input, want) in cases {
            assert_eq!(parse_cpu_millis(&q(input)), Ok(want), "cpu {input}");
        }
    }

    #[test]
    fn bytes_table() {
        let cases = [
            ("128974848", 128_974_848),
            ("129e6", 129_000_000),
            ("129M", 129_000_000),
            ("128974848000m", 128_974_848),
            ("123Mi", 128_974_848),
            ("1Ki", 1024),
            ("1.5Gi", 1_610_612_736),
            ("64Mi", 67_108_864),
            ("1Ti", 1 << 40),
            ("1Pi", 1 << 50),
            ("1Ei", 1 << 60),
            ("1k", 1000),
            ("1G", 1_000_000_000),
            ("2T", 2_000_000_000_000),
            ("1P", 1_000_000_000_000_000),
            ("1E", 1_000_000_000_000_000_000),
            ("0.5", 1),
            ("400m", 1),
            ("1E3", 1000),
            ("1e+3", 1000),
            ("0.0001Ki", 1),
        ];
        for (input, want) in cases {
            assert_eq!(parse_bytes(&q(input)), Ok(want), "bytes {input}");
        }
    }

    #[test]
    fn nanos_are_exact_and_round_up() {
        assert_eq!(parse_nanos(&q("1n")), Ok(1));
        assert_eq!(parse_nanos(&q("0.1n")), Ok(1));
        assert_eq!(parse_nanos(&q("1e-40")), Ok(1));
        assert_eq!(parse_nanos(&q("1.000000001")), Ok(1_000_000_001));
        assert_eq!(parse_nanos(&q("500m")), parse_nanos(&q("0.5")));
        assert_eq!(parse_nanos(&q("-0")), Ok(0));
    }

    #[test]
    fn invalid_quantities_name_the_value() {
        for bad in [
            "", "m", ".", "Ki", "1Qi", "1.5.5", "1 Gi", " 1", "1e", "1e+", "1ee3", "1Gb", "0x10",
            "1,5",
        ] {
            match parse_bytes(&q(bad)) {
                Err(QuantityError::Invalid { value, .. }) => assert_eq!(value, bad),
                other => panic!("{bad:?}: expected invalid, got {other:?}"),
            }
        }
        let err = parse_bytes(&q("12Gb")).expect_err("bad suffix");
        assert_eq!(err.to_string(), "invalid quantity \"12Gb\": unknown suffix");
    }

    #[test]
    fn negative_and_out_of_range_are_errors() {
        assert_eq!(
            parse_cpu_millis(&q("-1")),
            Err(QuantityError::Negative { value: "-1".into() })
        );
        assert_eq!(
            parse_bytes(&q("1e30")),
            Err(QuantityError::OutOfRange {
                value: "1e30".into()
            })
        );
        assert_eq!(
            parse_bytes(&q("16Ei")),
            Err(QuantityError::OutOfRange {
                value: "16Ei".into()
            })
        );
        assert!(matches!(
            parse_bytes(&q("99999999999999999999999999999999999999999")),
            Err(QuantityError::OutOfRange { .. })
        ));
    }
}
