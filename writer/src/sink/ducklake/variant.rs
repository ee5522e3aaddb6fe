//! MILLPOND_VARIANT_COLUMNS: each listed JSON text column is also written to
//! a companion `{name}_variant VARIANT` column, so DuckDB shreds its common
//! fields into typed Parquet columns. The text column always lands as sent;
//! malformed JSON leaves only the companion NULL.
//!
//! Integers in (INT64_MAX, UINT64_MAX] are the one poison: they cast into a
//! valid VARIANT and then overflow when DuckDB shreds it on Parquet write
//! (or later, in `ducklake_flush_inlined_data`), failing the write forever.
//! They are quoted as JSON strings in the companion's input only, found by
//! a vectorised scan of the text; rows are tokenised only when it matches.
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::compute::kernels::regexp::regexp_is_match_scalar;
use arrow::datatypes::DataType;
use millpond_shared::config::{is_safe_identifier, EnvReader};

/// The companion column's suffix.
pub const SUFFIX: &str = "_variant";

/// MILLPOND_VARIANT_COLUMNS: safe identifiers, none ending in `_variant`
/// (list the source, not the companion), none twice.
pub fn parse(r: &mut EnvReader<'_>) -> Vec<String> {
    const VAR: &str = "MILLPOND_VARIANT_COLUMNS";
    let Some(raw) = r.optional(VAR).filter(|v| !v.trim().is_empty()) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for name in raw.split(',').map(str::trim) {
        if !is_safe_identifier(name) {
            r.errors.push(
                VAR,
                format!("{name:?} is not a column name [A-Za-z_][A-Za-z0-9_]*"),
            );
        } else if name.to_ascii_lowercase().ends_with(SUFFIX) {
            r.errors.push(
                VAR,
                format!(
                    "{name:?} ends in {SUFFIX}: list the source column, its companion is derived"
                ),
            );
        } else if out.iter().any(|o| o.eq_ignore_ascii_case(name)) {
            r.errors.push(VAR, format!("{name:?} is listed twice"));
        } else {
            out.push(name.to_owned());
        }
    }
    out
}

/// The companion of `source`.
pub fn companion(source: &str) -> String {
    format!("{source}{SUFFIX}")
}

/// The scan column holding `source`'s text with poison integers quoted
/// (the `_millpond_` prefix is reserved, so no payload key can take it).
pub fn shadow(source: &str) -> String {
    format!("_millpond_variant_{source}")
}

/// Whether a batch column can feed a companion (JSON text).
pub fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8)
}

/// `text` with every integer in (INT64_MAX, UINT64_MAX] outside strings
/// turned into a JSON string of the same digits; `None` when there is none.
/// Every other byte is kept.
pub fn quote_poison(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                i += 1;
                while i < bytes.len()
                    && matches!(bytes[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
                {
                    i += 1;
                }
                let token = &text[start..i];
                // Leading zeros are not JSON: such text stays malformed.
                let poison = !token.starts_with('0')
                    && token.bytes().all(|c| c.is_ascii_digit())
                    && token.parse::<u64>().is_ok_and(|v| v > i64::MAX as u64);
                if poison {
                    let o = out.get_or_insert_with(|| String::with_capacity(text.len() + 8));
                    o.push_str(&text[copied..start]);
                    o.push('"');
                    o.push_str(token);
                    o.push('"');
                    copied = i;
                }
            }
            _ => i += 1,
        }
    }
    out.map(|mut o| {
        o.push_str(&text[copied..]);
        o
    })
}

/// The companion input for one text column: `None` when no row holds a
/// poison integer (the source column itself is cast), else the column with
/// those integers quoted and how many values were rewritten.
pub fn shadow_column(column: &dyn Array) -> Result<Option<(ArrayRef, u64)>, String> {
    let text = column.as_string::<i32>();
    // 19+ digits in a row: every integer above INT64_MAX has 19 or 20.
    let candidates = regexp_is_match_scalar(text, r"[0-9]{19}", None).map_err(|e| e.to_string())?;
    if candidates.true_count() == 0 {
        return Ok(None);
    }
    let mut rewritten = 0u64;
    let out: StringArray = (0..text.len())
        .map(|i| {
            if text.is_null(i) {
                return None;
            }
            let v = text.value(i);
            if !candidates.value(i) {
                return Some(v.to_owned());
            }
            match quote_poison(v) {
                Some(q) => {
                    rewritten += 1;
                    Some(q)
                }
                None => Some(v.to_owned()),
            }
        })
        .collect();
    if rewritten == 0 {
        return Ok(None);
    }
    Ok(Some((Arc::new(out), rewritten)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use millpond_shared::config::Env;

    #[test]
    fn only_integers_between_int64_and_uint64_max_are_quoted() {
        let over = "9223372036854775808"; // INT64_MAX + 1
        let max = "18446744073709551615"; // UINT64_MAX
        let text = format!(
            r#"{{"a": {over}, "b": "{over}", "c": 9223372036854775807, "d": -9223372036854775809, "e": 18446744073709551616, "f": {max}, "g": 1.5e300, "h": "x\"{over}"}}"#
        );
        let q = quote_poison(&text).unwrap();
        assert_eq!(
            q,
            format!(
                r#"{{"a": "{over}", "b": "{over}", "c": 9223372036854775807, "d": -9223372036854775809, "e": 18446744073709551616, "f": "{max}", "g": 1.5e300, "h": "x\"{over}"}}"#
            )
        );
        assert_eq!(quote_poison(r#"{"n": 12345678901234567890.5}"#), None);
        assert_eq!(quote_poison(r#"{"n": 09223372036854775808}"#), None);
        assert_eq!(
            quote_poison(r#"{"n": 5, "s": "9999999999999999999"}"#),
            None
        );
    }

    #[test]
    fn the_scan_rewrites_only_rows_that_need_it() {
        let col = StringArray::from(vec![
            Some(r#"{"id": 9223372036854775809}"#),
            Some(r#"{"ts": 1700000000000000000}"#),
            None,
            Some("{bad"),
        ]);
        let (out, n) = shadow_column(&col).unwrap().unwrap();
        assert_eq!(n, 1);
        let out = out.as_string::<i32>();
        assert_eq!(out.value(0), r#"{"id": "9223372036854775809"}"#);
        assert_eq!(out.value(1), r#"{"ts": 1700000000000000000}"#);
        assert!(out.is_null(2));
        assert_eq!(out.value(3), "{bad");
        let clean = StringArray::from(vec![r#"{"a": 1}"#]);
        assert!(shadow_column(&clean).unwrap().is_none());
    }

    #[test]
    fn the_setting_lists_sources_only() {
        let env = Env::from_pairs([("MILLPOND_VARIANT_COLUMNS", "properties, person_properties")]);
        let mut r = EnvReader::new(&env);
        assert_eq!(parse(&mut r), ["properties", "person_properties"]);
        assert!(r.finish().is_ok());
        for bad in ["properties_VARIANT", "a-b", "p,P"] {
            let env = Env::from_pairs([("MILLPOND_VARIANT_COLUMNS", bad)]);
            let mut r = EnvReader::new(&env);
            parse(&mut r);
            assert_eq!(
                r.finish().unwrap_err().vars(),
                ["MILLPOND_VARIANT_COLUMNS"],
                "{bad}"
            );
        }
    }
}
