//! Timestamps as producers send them, to microseconds since the epoch (UTC).
//! Accepted: `YYYY-MM-DD HH:MM:SS` with 0 to 6 fractional digits (UTC
//! implied), the same with `T` instead of the space, and either followed by
//! `Z` or a `+HH:MM`/`-HH:MM` offset. More than 6 fractional digits are
//! accepted only when the extra ones are zeros: a timestamp column holds
//! microseconds, and nothing is rounded. A leap second (`:60`) is refused:
//! no microsecond count since the epoch names it, and moving it to `:59`
//! or the next minute would change it.
use chrono::{DateTime, NaiveDateTime, Timelike};

pub fn parse_micros(s: &str) -> Option<i64> {
    let (body, frac) = split_fraction(s)?;
    let micros_frac = frac.micros?;
    let naive_or_offset = format!("{body}{}", frac.rest);
    let normalized = naive_or_offset.replacen('T', " ", 1);
    let naive = match DateTime::parse_from_str(
        &normalized.replace('Z', "+00:00"),
        "%Y-%m-%d %H:%M:%S%:z",
    ) {
        Ok(dt) => dt.naive_utc(),
        Err(_) => NaiveDateTime::parse_from_str(&normalized, "%Y-%m-%d %H:%M:%S").ok()?,
    };
    // chrono reads second 60 as second 59 plus a whole second of nanos.
    if naive.nanosecond() >= 1_000_000_000 {
        return None;
    }
    naive
        .and_utc()
        .timestamp()
        .checked_mul(1_000_000)?
        .checked_add(micros_frac)
}

struct Fraction<'a> {
    /// None when the digits do not fit microseconds exactly.
    micros: Option<i64>,
    /// What follows the digits (zone), empty if none.
    rest: &'a str,
}

/// "2024-01-01 12:00:00.123Z" -> ("2024-01-01 12:00:00", 123000 us, "Z").
fn split_fraction(s: &str) -> Option<(&str, Fraction<'_>)> {
    if s.len() < 19 || !s.is_char_boundary(19) {
        return None;
    }
    let (body, tail) = s.split_at(19);
    let Some(after_dot) = tail.strip_prefix('.') else {
        return Some((
            body,
            Fraction {
                micros: Some(0),
                rest: tail,
            },
        ));
    };
    let digits = after_dot.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let (d, rest) = after_dot.split_at(digits);
    let micros = if digits <= 6 {
        format!("{d:0<6}").parse().ok()
    } else if d[6..].bytes().all(|c| c == b'0') {
        d[..6].parse().ok()
    } else {
        None
    };
    Some((body, Fraction { micros, rest }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producer_forms_parse_exactly() {
        let base = 1_704_110_400_000_000; // 2024-01-01 12:00:00 UTC
        assert_eq!(parse_micros("2024-01-01 12:00:00"), Some(base));
        assert_eq!(
            parse_micros("2024-01-01 12:00:00.123"),
            Some(base + 123_000)
        );
        assert_eq!(
            parse_micros("2024-01-01 12:00:00.123456"),
            Some(base + 123_456)
        );
        assert_eq!(parse_micros("2024-01-01T12:00:00Z"), Some(base));
        assert_eq!(
            parse_micros("2024-01-01T14:00:00.5+02:00"),
            Some(base + 500_000)
        );
        assert_eq!(
            parse_micros("2024-01-01 12:00:00.123456000"),
            Some(base + 123_456)
        );
    }

    #[test]
    fn anything_else_or_finer_than_microseconds_is_refused() {
        for s in [
            "2024-01-01 12:00:00.1234567",
            "2024-01-01",
            "2024-13-01 12:00:00",
            "yesterday",
            "2024-01-01 12:00:00.",
            "2024-01-01 12:00:00 UTC",
            "1704110400",
        ] {
            assert_eq!(parse_micros(s), None, "{s}");
        }
    }

    #[test]
    fn a_leap_second_is_refused_never_moved() {
        for s in [
            "2024-01-01 12:00:60",
            "2024-01-01 12:00:60.5",
            "2024-01-01 12:00:60.000000",
            "2016-12-31 23:59:60",
            "2016-12-31T23:59:60Z",
            "2016-12-31T23:59:60.999999Z",
            "2017-01-01T01:59:60+02:00",
            "2016-12-31T22:59:60.5-01:00",
            "2024-01-01 12:00:61",
        ] {
            assert_eq!(parse_micros(s), None, "{s}");
        }
        // The seconds either side still parse.
        let base = 1_704_110_400_000_000; // 2024-01-01 12:00:00 UTC
        assert_eq!(
            parse_micros("2024-01-01 12:00:59.5"),
            Some(base + 59_500_000)
        );
        assert_eq!(parse_micros("2024-01-01 12:01:00"), Some(base + 60_000_000));
    }
}
