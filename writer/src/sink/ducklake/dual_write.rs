//! One flush's VARIANT dual-write (rules in `variant`): which payload
//! columns must not reach the table, the companion columns, and the INSERT
//! terms that fill them.
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use duckdb::Connection;
use millpond_proto::{value_text, DeadLetter, OffsetRange};
use millpond_shared::metrics::dead_letter_reason;

use super::config::DuckLakeConfig;
use super::sql::ident;
use super::table::LiveColumns;
use super::variant::{companion, is_text, shadow, shadow_column};
use crate::sink::prepare::{topic_of, Prepared};

/// A companion filled by this flush.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Companion {
    pub source: String,
    pub companion: String,
    /// The scan column cast into it: the source, or its shadow when some
    /// values carried a poison integer.
    pub input: String,
}

/// What dual-write does to one flush.
#[derive(Debug, Default)]
pub struct DualWrite {
    pub companions: Vec<Companion>,
    /// Values whose poison integers were quoted (companion only).
    pub coerced: u64,
    /// Sources left out: (source, why).
    pub omitted: Vec<(String, String)>,
}

/// Payload columns that must not be written: `{source}_variant` of a
/// configured source (any case), and any column whose live type is
/// VARIANT (a writer with a stale or unset list must not cast text into a
/// companion).
pub fn collisions(schema: &Schema, sources: &[String], live: &LiveColumns) -> Vec<String> {
    schema
        .fields()
        .iter()
        .map(|f| f.name())
        .filter(|name| {
            let lower = name.to_ascii_lowercase();
            sources
                .iter()
                .any(|s| companion(s).eq_ignore_ascii_case(&lower))
                || live.get(&lower).is_some_and(|t| t == "VARIANT")
        })
        .cloned()
        .collect()
}

/// When stripping the colliding columns would leave no payload column,
/// the records are dead letters as a whole: one per row, its stripped
/// values as a JSON object. Their rows are removed from `p`.
pub fn rows_as_dead_letters(
    p: &mut Prepared,
    names: &[String],
    ranges: &[OffsetRange],
) -> Vec<DeadLetter> {
    let mut out = Vec::new();
    for (b, batch) in p.batches.iter().enumerate() {
        let coords = p.coordinates.get(b).and_then(Option::as_ref);
        for row in 0..batch.num_rows() {
            let mut object = serde_json::Map::new();
            for name in names {
                if let Some(col) = batch.column_by_name(name) {
                    if col.is_valid(row) {
                        let text =
                            String::from_utf8_lossy(&value_text(col.as_ref(), row)).into_owned();
                        object.insert(name.clone(), serde_json::Value::String(text));
                    }
                }
            }
            let at = coords.map(|c| c.get(row));
            let mut letter = DeadLetter::value(
                topic_of(ranges, at),
                at,
                dead_letter_reason::VARIANT_COMPANION_COLLISION,
                "",
                "",
                serde_json::Value::Object(object).to_string().into_bytes(),
            );
            letter.value_level = false;
            out.push(letter);
        }
    }
    p.batches.clear();
    p.coordinates.clear();
    p.schema = Arc::new(Schema::empty());
    out
}

/// Makes each configured source present in `p` (as text) a companion:
/// the `{source}_variant VARIANT` column exists (added when missing), and
/// sources with poison integers get a shadow scan column in `p`. A
/// companion that exists with another type, or cannot be added, leaves its
/// source out (the text column still lands).
pub fn companions(
    conn: &Connection,
    cfg: &DuckLakeConfig,
    live: &mut LiveColumns,
    p: &mut Prepared,
) -> Result<DualWrite, String> {
    let mut out = DualWrite::default();
    let table = cfg.sql_table();
    for source in &cfg.variant_columns {
        let Some(field) = p
            .schema
            .fields()
            .iter()
            .find(|f| f.name().eq_ignore_ascii_case(source))
        else {
            continue;
        };
        let source = field.name().clone();
        if !is_text(field.data_type()) {
            out.omitted.push((
                source,
                format!("is {} in this flush, not JSON text", field.data_type()),
            ));
            continue;
        }
        let name = companion(&source);
        match live.get(&name.to_ascii_lowercase()).map(String::as_str) {
            Some("VARIANT") => {}
            Some(other) => {
                out.omitted.push((source, format!("{name} exists as {other}, not VARIANT (DuckLake cannot alter it to VARIANT)")));
                continue;
            }
            None => {
                let sql = format!(
                    "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {} VARIANT",
                    ident(&name)
                );
                if let Err(e) = conn.execute_batch(&sql) {
                    out.omitted
                        .push((source, format!("adding {name} failed: {e}")));
                    continue;
                }
                tracing::info!(column = %name, "VARIANT companion column added");
                live.insert(name.to_ascii_lowercase(), "VARIANT".into());
            }
        }
        out.companions.push(Companion {
            source: source.clone(),
            companion: name,
            input: source,
        });
    }
    add_shadows(p, &mut out)?;
    Ok(out)
}

/// Adds a shadow column for every companion whose source holds a poison
/// integer in some batch (every batch gets it, so the scan has one schema).
fn add_shadows(p: &mut Prepared, dw: &mut DualWrite) -> Result<(), String> {
    for c in &mut dw.companions {
        let idx = p.schema.index_of(&c.source).map_err(|e| e.to_string())?;
        let mut shadows: Vec<Option<ArrayRef>> = Vec::with_capacity(p.batches.len());
        for batch in &p.batches {
            let found = shadow_column(batch.column(idx).as_ref())?;
            if let Some((_, n)) = &found {
                dw.coerced += n;
            }
            shadows.push(found.map(|(a, _)| a));
        }
        if shadows.iter().all(Option::is_none) {
            continue;
        }
        c.input = shadow(&c.source);
        let mut fields: Vec<Field> = p
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new(&c.input, DataType::Utf8, true));
        let schema = Arc::new(Schema::new(fields));
        let batches = p
            .batches
            .iter()
            .zip(shadows)
            .map(|(b, s)| {
                let mut cols = b.columns().to_vec();
                cols.push(s.unwrap_or_else(|| b.column(idx).clone()));
                RecordBatch::try_new(schema.clone(), cols).map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        p.schema = schema;
        p.batches = batches;
    }
    Ok(())
}

/// The INSERT terms that fill the companions.
pub fn terms(dw: &DualWrite) -> Vec<String> {
    dw.companions
        .iter()
        .map(|c| {
            format!(
                "try_cast(try_cast({} AS JSON) AS VARIANT) AS {}",
                ident(&c.input),
                ident(&c.companion)
            )
        })
        .collect()
}

/// Scan columns that are not table columns (the shadows).
pub fn scan_only(dw: &DualWrite) -> Vec<String> {
    dw.companions
        .iter()
        .filter(|c| c.input != c.source)
        .map(|c| c.input.clone())
        .collect()
}

/// Whether a failed INSERT is a shredding failure dual-write can fall back
/// from (a string-only retry); nothing else is absorbed. DuckDB 1.5.5
/// fails shredding two ways on values the pre-scan does not rewrite:
/// - an integer overflowing its shredded type ("… out of range for the
///   destination type INT64");
/// - an object with an empty key (`{"": 1}`), for which it builds a
///   shredded type it cannot parse back ("Could not parse type string
///   'STRUCT(metadata BLOB, "value" BLOB, typed_value …)'").
///
/// The message is matched after its quoted literals were masked
/// (`millpond_shared::redact`), so by its class phrase alone: no other
/// statement of the INSERT parses a type from text.
pub fn is_shredding_failure(message: &str) -> bool {
    message.contains("out of range for the destination type")
        || message.contains("Could not parse type string")
}

#[cfg(test)]
mod tests {
    use super::is_shredding_failure;

    #[test]
    fn only_shredding_failures_are_absorbed() {
        assert!(is_shredding_failure("Invalid Input Error: Type UINT64 with value 9223372036854775809 can't be cast because the value is out of range for the destination type INT64"));
        assert!(is_shredding_failure(
            r#"Invalid Input Error: Could not parse type string 'STRUCT(metadata BLOB, "value" BLOB, typed_value STRUCT(STRUCT("value" BLOB, typed_value BIGINT)))'"#
        ));
        assert!(is_shredding_failure(
            "Invalid Input Error: Could not parse type string '***'"
        ));
        assert!(!is_shredding_failure("IO Error: connection refused"));
    }
}
