//! Python's text forms of values, which pyhoglake uses for identity partition
//! values: `repr(float)`, `str(Decimal)`, `date/time/datetime.isoformat()`.
//! A Rust writer must print the same strings to share partitions with
//! Python writers.

use chrono::{Datelike, NaiveDate};

/// `repr(x)` of a Python float: shortest round-trip digits, positional
/// between 1e-4 and 1e16, otherwise `d.ddde±XX`.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    if x == 0.0 {
        return format!("{sign}0.0");
    }
    // Rust's `{:e}` prints the shortest digits that round-trip, as Python does.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exponent) = sci.split_once('e').expect("`{:e}` always has an exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exponent: i32 = exponent.parse().expect("`{:e}` exponent is an integer");
    // Python's decpt: the value is 0.DIGITS x 10^decpt.
    let decpt = exponent + 1;
    let n = digits.len() as i32;
    let body = if decpt <= -4 || decpt > 16 {
        let (first, rest) = digits.split_at(1);
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let e = decpt - 1;
        format!(
            "{first}{fraction}e{}{:02}",
            if e < 0 { '-' } else { '+' },
            e.abs()
        )
    } else if decpt <= 0 {
        format!("0.{}{digits}", "0".repeat((-decpt) as usize))
    } else if decpt < n {
        let (int, frac) = digits.split_at(decpt as usize);
        format!("{int}.{frac}")
    } else {
        format!("{digits}{}.0", "0".repeat((decpt - n) as usize))
    };
    format!("{sign}{body}")
}

/// `str(Decimal)` of `unscaled x 10^-scale` (Python's to-scientific-string:
/// positional unless the exponent is positive or the value is below 1e-6).
pub fn decimal_str(unscaled: i128, scale: i8) -> String {
    let sign = if unscaled < 0 { "-" } else { "" };
    let digits = unscaled.unsigned_abs().to_string();
    let exp = -i32::from(scale);
    let n = digits.len() as i32;
    let leftdigits = exp + n;
    let dotplace = if exp <= 0 && leftdigits > -6 {
        leftdigits
    } else {
        1
    };
    let (int, frac) = if dotplace <= 0 {
        (
            "0".to_string(),
            format!(".{}{digits}", "0".repeat((-dotplace) as usize)),
        )
    } else if dotplace >= n {
        (
            format!("{digits}{}", "0".repeat((dotplace - n) as usize)),
            String::new(),
        )
    } else {
        let (i, f) = digits.split_at(dotplace as usize);
        (i.to_string(), format!(".{f}"))
    };
    let e = leftdigits - dotplace;
    let exponent = if e == 0 {
        String::new()
    } else {
        format!("E{e:+}")
    };
    format!("{sign}{int}{frac}{exponent}")
}

const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

/// The calendar date `days` after 1970-01-01, if Python can hold it
/// (years 1..=9999).
pub fn date_from_days(days: i64) -> Option<NaiveDate> {
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    let date = epoch.checked_add_signed(chrono::TimeDelta::try_days(days)?)?;
    (1..=9999).contains(&date.year()).then_some(date)
}

/// `date.isoformat()`: `YYYY-MM-DD`.
pub fn iso_date(days: i64) -> Option<String> {
    let d = date_from_days(days)?;
    Some(format!("{:04}-{:02}-{:02}", d.year(), d.month(), d.day()))
}

/// `time.isoformat()` of microseconds since midnight: `HH:MM:SS`, plus
/// `.ffffff` only when the fraction is non-zero.
pub fn iso_time(micros: i64) -> Option<String> {
    if !(0..MICROS_PER_DAY).contains(&micros) {
        return None;
    }
    let (secs, frac) = (micros / MICROS_PER_SECOND, micros % MICROS_PER_SECOND);
    let hms = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    Some(if frac == 0 {
        hms
    } else {
        format!("{hms}.{frac:06}")
    })
}

/// `datetime.isoformat()` of microseconds since the epoch; `utc` appends
/// the `+00:00` offset a tz-aware UTC datetime prints.
pub fn iso_datetime(micros: i64, utc: bool) -> Option<String> {
    let date = iso_date(micros.div_euclid(MICROS_PER_DAY))?;
    let time = iso_time(micros.rem_euclid(MICROS_PER_DAY))?;
    Some(format!("{date}T{time}{}", if utc { "+00:00" } else { "" }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        let cases: [(f64, &str); 18] = [
            (1.5, "1.5"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (100.0, "100.0"),
            (0.1, "0.1"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456789.125, "123456789.125"),
            (-2.5e-7, "-2.5e-07"),
            (1e300, "1e+300"),
            (f64::from(0.1f32), "0.10000000149011612"),
            (5e-324, "5e-324"),
        ];
        for (x, want) in cases {
            assert_eq!(float_repr(x), want, "{x:?}");
        }
    }

    #[test]
    fn decimal_str_matches_python() {
        assert_eq!(decimal_str(150, 2), "1.50");
        assert_eq!(decimal_str(-225, 2), "-2.25");
        assert_eq!(decimal_str(0, 2), "0.00");
        assert_eq!(decimal_str(5, 0), "5");
        assert_eq!(decimal_str(1, 6), "0.000001");
        assert_eq!(decimal_str(1, 7), "1E-7");
        assert_eq!(decimal_str(0, 8), "0E-8");
        assert_eq!(decimal_str(-12345, 9), "-0.000012345");
        assert_eq!(decimal_str(12, -2), "1.2E+3");
    }

    #[test]
    fn isoformat_matches_python() {
        assert_eq!(iso_date(20458).as_deref(), Some("2026-01-05"));
        assert_eq!(iso_date(-1).as_deref(), Some("1969-12-31"));
        assert_eq!(
            iso_time(12 * 3600 * MICROS_PER_SECOND).as_deref(),
            Some("12:00:00")
        );
        assert_eq!(iso_time(1_500).as_deref(), Some("00:00:00.001500"));
        let noon = 20458 * MICROS_PER_DAY + 12 * 3600 * MICROS_PER_SECOND;
        assert_eq!(
            iso_datetime(noon, false).as_deref(),
            Some("2026-01-05T12:00:00")
        );
        assert_eq!(
            iso_datetime(noon + 7, true).as_deref(),
            Some("2026-01-05T12:00:00.000007+00:00")
        );
        assert_eq!(
            iso_datetime(-1, false).as_deref(),
            Some("1969-12-31T23:59:59.999999")
        );
        // Outside Python's years 1..=9999 there is no isoformat.
        assert_eq!(iso_date(3_000_000), None);
    }
}
