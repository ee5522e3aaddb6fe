//! The record stages' configuration group: limits on what the buffer holds
//! and the pre-write sort.
use millpond_shared::config::{is_safe_identifier, EnvReader, DEFAULT_MAX_COLUMNS};

use super::coerce::{Coercion, PinType};
use super::filter::{Filter, Values};
use crate::buffer::Limits;
use millpond_shared::metrics::matched::DEFAULT_MAX_VALUES as DEFAULT_MATCHED_VALUES;

/// Default of MILLPOND_MAX_RECORD_BYTES: 16 MiB, above Kafka's usual message
/// limits; a larger message is a dead letter, not a row.
pub const DEFAULT_MAX_RECORD_BYTES: u64 = 16 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageConfig {
    /// MILLPOND_MAX_COLUMNS and MILLPOND_MAX_RECORD_BYTES.
    pub limits: Limits,
    /// MILLPOND_SORT_BY: keys, left to right; empty for no sort.
    pub sort_by: Vec<String>,
    /// MILLPOND_TYPED_COLUMNS.
    pub coercion: Coercion,
    /// MILLPOND_FILTER_KEEP_FIELD_NAME + MILLPOND_FILTER_VALUES.
    pub keep: Option<Filter>,
    /// MILLPOND_FILTER_DROP_FIELD_NAME + MILLPOND_FILTER_DROP_VALUES.
    pub drop: Option<Filter>,
    /// MILLPOND_INCLUDE_VALUES_*: the dynamic allowlist source.
    pub include: Option<super::include::IncludeConfig>,
    /// MILLPOND_FILTER_MATCHED_MAX_VALUES: allowlist values with a
    /// `filter_matched_total` series of their own; the rest count as `_other`.
    pub matched_values_cap: usize,
}

impl Default for StageConfig {
    fn default() -> Self {
        StageConfig {
            limits: Limits {
                max_columns: DEFAULT_MAX_COLUMNS,
                max_record_bytes: DEFAULT_MAX_RECORD_BYTES as usize,
            },
            sort_by: Vec::new(),
            coercion: Coercion::default(),
            keep: None,
            drop: None,
            include: None,
            matched_values_cap: DEFAULT_MATCHED_VALUES,
        }
    }
}

impl StageConfig {
    /// Reads the group; every problem is recorded in `r` with its variable.
    pub fn from_env(r: &mut EnvReader<'_>) -> StageConfig {
        let max_columns =
            r.positive_u64("MILLPOND_MAX_COLUMNS", DEFAULT_MAX_COLUMNS as u64) as usize;
        let max_record_bytes =
            r.positive_u64("MILLPOND_MAX_RECORD_BYTES", DEFAULT_MAX_RECORD_BYTES) as usize;
        let sort_by = millpond_shared::config::sort_by(r);
        let keep = filter(
            r,
            "MILLPOND_FILTER_KEEP_FIELD_NAME",
            "MILLPOND_FILTER_VALUES",
        );
        let drop = filter(
            r,
            "MILLPOND_FILTER_DROP_FIELD_NAME",
            "MILLPOND_FILTER_DROP_VALUES",
        );
        let coercion = typed_columns(r);
        uuid_values(r, &coercion, keep.as_ref(), "MILLPOND_FILTER_VALUES");
        uuid_values(r, &coercion, drop.as_ref(), "MILLPOND_FILTER_DROP_VALUES");
        let include = super::include::config::from_env(r, keep.is_some());
        let matched_values_cap = r.parse_or(
            "MILLPOND_FILTER_MATCHED_MAX_VALUES",
            DEFAULT_MATCHED_VALUES,
            |_| Ok(()),
        );
        StageConfig {
            limits: Limits {
                max_columns,
                max_record_bytes,
            },
            sort_by,
            coercion,
            keep,
            drop,
            include,
            matched_values_cap,
        }
    }
}

/// On a uuid-pinned column every static value must be a uuid, or the
/// allowlist would drop everything and the denylist deny nothing.
fn uuid_values(r: &mut EnvReader<'_>, coercion: &Coercion, f: Option<&Filter>, var: &str) {
    let Some(f) = f else { return };
    if coercion.pin_of(&f.field) != Some(PinType::Uuid) {
        return;
    }
    let bad: Vec<String> = match &f.values {
        Values::Int(l) => l.iter().map(i64::to_string).collect(),
        Values::Text(l) => l
            .iter()
            .filter(|v| millpond_shared::uuid_text::parse(v).is_none())
            .cloned()
            .collect(),
    };
    if !bad.is_empty() {
        r.errors.push(
            var,
            format!("{} is uuid-pinned; not uuids: {}", f.field, bad.join(", ")),
        );
    }
}

/// `column:type` pairs; names safe identifiers, types known, one type per
/// column.
fn typed_columns(r: &mut EnvReader<'_>) -> Coercion {
    const VAR: &str = "MILLPOND_TYPED_COLUMNS";
    let mut pins: Vec<(String, PinType)> = Vec::new();
    let Some(raw) = r.optional(VAR).filter(|v| !v.trim().is_empty()) else {
        return Coercion::default();
    };
    for pair in raw.split(',').map(str::trim) {
        let Some((col, ty)) = pair.split_once(':') else {
            r.errors.push(VAR, format!("{pair:?} is not column:type"));
            continue;
        };
        let (col, ty) = (col.trim(), ty.trim().to_ascii_lowercase());
        if !is_safe_identifier(col) {
            r.errors.push(
                VAR,
                format!("{col:?} is not a column name [A-Za-z_][A-Za-z0-9_]*"),
            );
            continue;
        }
        let Some(pin) = PinType::parse(&ty) else {
            r.errors.push(
                VAR,
                format!(
                    "{ty:?} for {col} is not one of {}",
                    PinType::NAMES.join(", ")
                ),
            );
            continue;
        };
        match pins.iter().find(|(c, _)| c == col) {
            Some((_, other)) if *other != pin => r.errors.push(
                VAR,
                format!(
                    "{col} is pinned to both {} and {}",
                    other.label(),
                    pin.label()
                ),
            ),
            Some(_) => {}
            None => pins.push((col.to_owned(), pin)),
        }
    }
    Coercion { pins }
}

/// A filter's field and values, set together or not at all.
fn filter(r: &mut EnvReader<'_>, field_var: &str, values_var: &str) -> Option<Filter> {
    let field = r.optional(field_var).filter(|v| !v.trim().is_empty());
    let values = r.optional(values_var).filter(|v| !v.trim().is_empty());
    match (field, values) {
        (None, None) => None,
        (Some(_), None) => {
            r.errors
                .push(values_var, format!("is required when {field_var} is set"));
            None
        }
        (None, Some(_)) => {
            r.errors
                .push(field_var, format!("is required when {values_var} is set"));
            None
        }
        (Some(field), Some(raw)) => {
            let field = r.safe_identifier(field_var, Some(field.trim().to_owned()))?;
            match Values::parse(&raw) {
                Some(values) => Some(Filter { field, values }),
                None => {
                    r.errors
                        .push(values_var, format!("has an empty value in {raw:?}"));
                    None
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use millpond_shared::config::Env;

    fn read(pairs: &[(&str, &str)]) -> Result<StageConfig, String> {
        let env = Env::from_pairs(pairs.iter().copied());
        let mut r = EnvReader::new(&env);
        let cfg = StageConfig::from_env(&mut r);
        r.finish().map(|()| cfg).map_err(|e| e.to_string())
    }

    #[test]
    fn sort_keys_are_names_listed_once() {
        assert_eq!(read(&[]).unwrap(), StageConfig::default());
        let cfg = read(&[("MILLPOND_SORT_BY", "team_id, timestamp")]).unwrap();
        assert_eq!(cfg.sort_by, ["team_id", "timestamp"]);
        let e = read(&[("MILLPOND_SORT_BY", "a,b-c,A")]).unwrap_err();
        assert!(
            e.contains("MILLPOND_SORT_BY") && e.contains("b-c") && e.contains("twice"),
            "{e}"
        );
    }
}
