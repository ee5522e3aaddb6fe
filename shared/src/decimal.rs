//! The exact value of a JSON number literal, and whether a float type holds
//! it. One rule for the converter (which keeps a literal as text when a
//! float column would change it) and the writer (which stores text in a
//! float column only when it reads back equal).
//!
//! A literal is held exactly by a float type when the shortest decimal that
//! reads back as the parsed float denotes the same number: `0.1` and
//! `1.50` are held by f64; `9007199254740993`, `1e400` and
//! `3.14159265358979323846` are not.

/// The exact value of a JSON number literal: `digits x 10^exp`, with no
/// leading or trailing zeros in `digits` (zero is empty digits, no sign).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Decimal {
    negative: bool,
    digits: Vec<u8>,
    exp: i64,
}

impl Decimal {
    /// Parses RFC 8259 number syntax only: no `+`, no leading zeros, no
    /// whitespace, no `.5` or `5.`, no `NaN`/`Infinity`.
    pub fn parse(s: &str) -> Option<Decimal> {
        let b = s.as_bytes();
        let mut i = 0;
        let negative = b.first() == Some(&b'-');
        if negative {
            i += 1;
        }
        let int_start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let int = &b[int_start..i];
        if int.is_empty() || (int.len() > 1 && int[0] == b'0') {
            return None;
        }
        let mut frac: &[u8] = &[];
        if b.get(i) == Some(&b'.') {
            let start = i + 1;
            i = start;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            frac = &b[start..i];
            if frac.is_empty() {
                return None;
            }
        }
        let mut exp: i64 = 0;
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            let neg_exp = match b.get(i) {
                Some(b'-') => {
                    i += 1;
                    true
                }
                Some(b'+') => {
                    i += 1;
                    false
                }
                _ => false,
            };
            let start = i;
            while let Some(d) = b.get(i).filter(|d| d.is_ascii_digit()) {
                // Saturates far beyond any representable magnitude.
                exp = (exp * 10 + i64::from(d - b'0')).min(1 << 40);
                i += 1;
            }
            if i == start {
                return None;
            }
            if neg_exp {
                exp = -exp;
            }
        }
        if i != b.len() {
            return None;
        }
        let mut digits: Vec<u8> = int.iter().chain(frac).map(|d| d - b'0').collect();
        exp -= frac.len() as i64;
        let lead = digits.iter().take_while(|&&d| d == 0).count();
        digits.drain(..lead);
        while digits.last() == Some(&0) {
            digits.pop();
            exp += 1;
        }
        if digits.is_empty() {
            return Some(Decimal {
                negative: false,
                digits,
                exp: 0,
            });
        }
        Some(Decimal {
            negative,
            digits,
            exp,
        })
    }

    /// The integer it denotes, when it is one and fits in i128.
    pub fn to_int(&self) -> Option<i128> {
        if self.exp < 0 || self.digits.len() as i64 + self.exp > 38 {
            return None;
        }
        let mut v: i128 = 0;
        for &d in &self.digits {
            v = v * 10 + i128::from(d);
        }
        for _ in 0..self.exp {
            v *= 10;
        }
        Some(if self.negative { -v } else { v })
    }
}

/// Up to 15 significant digits in the normal range always round-trip
/// through f64, so most literals skip the slow check.
fn fast_f64(s: &str) -> bool {
    let mut sig = 0;
    let mut started = false;
    for c in s.bytes() {
        match c {
            b'e' | b'E' => return false,
            b'1'..=b'9' => {
                started = true;
                sig += 1;
            }
            b'0' if started => sig += 1,
            _ => {}
        }
    }
    // Trailing zeros of an integer part count, which only errs to the slow path.
    sig <= 15 && s.len() <= 300
}

/// The f64 a JSON number literal denotes, when f64 holds it exactly.
pub fn exact_f64(s: &str) -> Option<f64> {
    let d = Decimal::parse(s)?;
    let f: f64 = s.parse().ok().filter(|f: &f64| f.is_finite())?;
    if fast_f64(s) {
        return Some(f);
    }
    (Decimal::parse(&format!("{f:e}")) == Some(d)).then_some(f)
}

/// Whether f64 holds `s` exactly, for `s` already known to be a valid JSON
/// number literal: the common case costs one pass over its bytes.
pub fn f64_holds(s: &str) -> bool {
    fast_f64(s) || exact_f64(s).is_some()
}

/// The f32 a JSON number literal denotes, when f32 holds it exactly.
pub fn exact_f32(s: &str) -> Option<f32> {
    let d = Decimal::parse(s)?;
    let f: f32 = s.parse().ok().filter(|f: &f32| f.is_finite())?;
    (Decimal::parse(&format!("{f:e}")) == Some(d)).then_some(f)
}

/// How a number is written in a text column: the shortest decimal that
/// reads back as the same f64, without an exponent. The converter (a number
/// among strings in one batch) and unify (a float column meeting a text
/// column across batches) both write numbers this way, so a value's text
/// never depends on the batch it arrived in.
pub fn number_text(f: f64) -> String {
    if f.is_finite() {
        format!("{f}")
    } else {
        format!("{f:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_f64_holds() {
        for s in [
            "0.1",
            "1.50",
            "-0",
            "1e3",
            "123456789012345",
            "2.5e-300",
            "9007199254740992",
        ] {
            assert!(exact_f64(s).is_some(), "{s}");
        }
        for s in [
            "9007199254740993",
            "1e400",
            "3.14159265358979323846",
            "0.1000000000000000055511151231257827",
            "02",
            "1.",
            "+1",
            "NaN",
        ] {
            assert!(exact_f64(s).is_none(), "{s}");
        }
    }

    #[test]
    fn decimal_normalises_and_rejects_non_json_spellings() {
        assert_eq!(Decimal::parse("1.50"), Decimal::parse("15e-1"));
        assert_eq!(Decimal::parse("-0.0"), Decimal::parse("0"));
        assert_eq!(Decimal::parse("1e3").unwrap().to_int(), Some(1000));
        assert_eq!(Decimal::parse("1.5").unwrap().to_int(), None);
        for s in ["", "-", ".5", "5.", "1e", "0x1", " 1", "1 ", "01"] {
            assert!(Decimal::parse(s).is_none(), "{s:?}");
        }
    }
}
