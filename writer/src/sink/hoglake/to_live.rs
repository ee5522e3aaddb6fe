//! Bringing batch columns to the live hoglake column's type, value by value
//! and exactly. A value that would change (an integer out of range, 1.5 into
//! a long, "02134" into a long, text that is not a uuid) is NULL in the row
//! and a `type_mismatch` dead letter with its record's coordinates.
//!
//! The live type wins in both directions for uuid and text (neither hoglake
//! nor Iceberg promotes between them). Types `millpond_shared::exact` has
//! rules for convert by those rules; any other pair is cast by Arrow and a
//! value is kept only when casting it back gives the value sent. The
//! rewrite itself (dead letters, batches) is [`crate::sink::to_live`].
use arrow::array::{make_array, Array, ArrayRef};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, Field};
use millpond_hoglake::arrow_schema::arrow_schema;
use millpond_hoglake::schema::{ColumnType, Table};
use millpond_proto::OffsetRange;
use millpond_shared::exact::{self, Target};

use crate::sink::prepare::Prepared;
use crate::sink::to_live::{null_rows, Rewrite};

/// The exactness rule for a live hoglake type, when `millpond_shared::exact`
/// has one.
fn target(t: ColumnType) -> Option<Target> {
    use ColumnType as T;
    let int = |bits, signed| Some(Target::Int { bits, signed });
    match t {
        T::Int8 => int(8, true),
        T::Int16 => int(16, true),
        T::Int => int(32, true),
        T::Long => int(64, true),
        T::Uint8 => int(8, false),
        T::Uint16 => int(16, false),
        T::Uint32 => int(32, false),
        T::Uint64 => int(64, false),
        T::Float => Some(Target::Float32),
        T::Double => Some(Target::Float64),
        T::Boolean => Some(Target::Boolean),
        T::String => Some(Target::Text),
        T::Uuid => Some(Target::Uuid),
        T::Timestamptz => Some(Target::TimestampTz),
        _ => None,
    }
}

/// Numbers are never read as dates or times: Arrow would cast 1700000000
/// into a timestamp in 1970 and back unchanged.
fn reinterprets(from: &DataType, to: &DataType) -> bool {
    from.is_numeric()
        && matches!(
            to,
            DataType::Date32
                | DataType::Date64
                | DataType::Time32(_)
                | DataType::Time64(_)
                | DataType::Timestamp(..)
                | DataType::Duration(_)
                | DataType::Interval(_)
        )
}

/// Rows of a text column that are not a JSON object or array: a live
/// `json` column keeps only what is unambiguously JSON (a string "123"
/// must not become the number 123).
fn json_failures(source: &dyn Array) -> Option<Vec<usize>> {
    let text = source
        .as_any()
        .downcast_ref::<arrow::array::StringArray>()?;
    Some(
        (0..text.len())
            .filter(|&r| text.is_valid(r))
            .filter(|&r| {
                let v = text.value(r).trim_start();
                !(v.starts_with('{') || v.starts_with('['))
                    || serde_json::from_str::<serde::de::IgnoredAny>(v).is_err()
            })
            .collect(),
    )
}

/// Rows of `source` (valid there) that do not survive `source -> to ->
/// source` unchanged, and the converted array with those rows NULL.
fn round_trip(source: &dyn Array, to: &DataType) -> (ArrayRef, Vec<usize>) {
    let safe = CastOptions::default();
    if reinterprets(source.data_type(), to) {
        let all: Vec<usize> = (0..source.len()).filter(|&r| source.is_valid(r)).collect();
        return (arrow::array::new_null_array(to, source.len()), all);
    }
    let Ok(there) = cast_with_options(source, to, &safe) else {
        let all: Vec<usize> = (0..source.len()).filter(|&r| source.is_valid(r)).collect();
        return (arrow::array::new_null_array(to, source.len()), all);
    };
    let back = cast_with_options(&there, source.data_type(), &safe).ok();
    let failed: Vec<usize> = (0..source.len())
        .filter(|&r| source.is_valid(r))
        .filter(|&r| {
            there.is_null(r)
                || back
                    .as_ref()
                    .is_none_or(|b| b.slice(r, 1).to_data() != source.slice(r, 1).to_data())
        })
        .collect();
    let kept = null_rows(there.as_ref(), &failed).unwrap_or(there);
    (make_array(kept.to_data()), failed)
}

/// Columns whose values changed type: (name, live type, values lost).
pub type Converted = Vec<(String, ColumnType, usize)>;

/// One of the two rewrites the spec names (live uuid <- text, live text
/// <- uuid): counted every time and logged once per column and direction,
/// as on DuckLake.
pub fn is_uuid_rewrite(live: ColumnType, sent: &DataType) -> bool {
    match live {
        ColumnType::Uuid => matches!(
            sent,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ),
        ColumnType::String => sent == &DataType::FixedSizeBinary(16),
        _ => false,
    }
}

/// Rewrites every column of `p` whose Arrow type differs from its live
/// column's file type; values that do not convert exactly become NULL and
/// dead letters. Columns absent from `table` are left alone.
pub fn to_live(
    p: &mut Prepared,
    table: &Table,
    ranges: &[OffsetRange],
) -> Result<Converted, String> {
    let file_schema = arrow_schema(&table.columns).map_err(|e| e.to_string())?;
    let mut out = Converted::new();
    let schema = p.schema.clone();
    let mut rewrite = Rewrite::new(p, ranges);
    for (idx, field) in schema.fields().iter().enumerate() {
        let name = field.name();
        let Ok(live_field) = file_schema.field_with_name(name) else {
            continue;
        };
        let live = table
            .columns
            .iter()
            .find(|c| &c.name == name)
            .map(|c| c.column_type)
            .ok_or_else(|| format!("column {name} is in the file schema but not the table"))?;
        // Same Arrow type is not enough: a live uint32 or int column is
        // written as Int64, json as Utf8; their values still need checking.
        let narrower = matches!(
            live,
            ColumnType::Int8
                | ColumnType::Int16
                | ColumnType::Int
                | ColumnType::Uint8
                | ColumnType::Uint16
                | ColumnType::Uint32
                | ColumnType::Uint64
                | ColumnType::Json
        );
        if !narrower && field.data_type().equals_datatype(live_field.data_type()) {
            continue;
        }
        let lost = rewrite.column(idx, live.name(), |source| {
            Ok(if live == ColumnType::Json {
                match json_failures(source) {
                    Some(failed) => (null_rows(source, &failed)?, failed),
                    None => round_trip(source, live_field.data_type()),
                }
            } else {
                match target(live).and_then(|t| exact::convert(source, t)) {
                    Some(c) => (c.array, c.failed),
                    None => round_trip(source, live_field.data_type()),
                }
            })
        })?;
        if let Some(first) = rewrite.first(idx) {
            rewrite.fields[idx] = Field::new(name, first.data_type().clone(), true);
        }
        out.push((name.clone(), live, lost));
    }
    if out.is_empty() {
        return Ok(out);
    }
    rewrite.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::prepare::{prepare, NameCase, UnsafeNames};
    use crate::sink::Flush;
    use arrow::array::RecordBatch;
    use arrow::array::{AsArray, Date32Array, FixedSizeBinaryArray, StringArray};
    use arrow::datatypes::Int64Type;
    use millpond_proto::FlushTrigger;
    use millpond_shared::metrics::dead_letter_reason;
    use std::sync::Arc;

    fn table(columns: &str) -> Table {
        serde_json::from_str(&format!(
            r#"{{"name": "t", "namespace": "n", "table_uuid": "u", "columns": {columns}}}"#
        ))
        .unwrap()
    }

    fn flush(columns: Vec<(&str, ArrayRef)>) -> Flush {
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        Flush {
            id: "f".into(),
            trigger: FlushTrigger::Size,
            ranges: vec![OffsetRange::new("t", 0, 0, batch.num_rows() as i64 - 1)],
            schema: batch.schema(),
            batches: vec![batch],
            dead_letters: Default::default(),
            streamed: None,
        }
    }

    fn run(f: &Flush, t: &Table) -> (Prepared, Converted) {
        let mut p = prepare(f, &[], UnsafeNames::DeadLetter, NameCase::Sensitive).unwrap();
        let c = to_live(&mut p, t, &f.ranges).unwrap();
        (p, c)
    }

    #[test]
    fn text_into_a_live_long_keeps_only_exact_integers() {
        let f = flush(vec![(
            "n",
            Arc::new(StringArray::from(vec![
                Some("5"),
                Some("02134"),
                Some("1.5"),
                None,
                Some("9223372036854775808"),
            ])) as ArrayRef,
        )]);
        let t = table(r#"[{"name": "n", "type": "long", "field_id": 1, "ordinal": 0}]"#);
        let (p, c) = run(&f, &t);
        assert_eq!(c, vec![("n".to_string(), ColumnType::Long, 3)]);
        let n = p.batches[0].column(0).as_primitive::<Int64Type>();
        assert_eq!(
            n.iter().collect::<Vec<_>>(),
            [Some(5), None, None, None, None]
        );
        let originals: Vec<&[u8]> = p
            .dead_letters
            .iter()
            .map(|d| d.original.as_slice())
            .collect();
        assert_eq!(originals, [&b"02134"[..], b"1.5", b"9223372036854775808"]);
        assert!(p
            .dead_letters
            .iter()
            .all(|d| d.reason == dead_letter_reason::TYPE_MISMATCH && d.live_type == "long"));
    }

    #[test]
    fn uuid_and_text_follow_the_live_column_both_ways() {
        let u = uuid::Uuid::parse_str("f79c3e09-677c-4bbd-a479-3f349cb785e7").unwrap();
        let bytes = FixedSizeBinaryArray::try_from_sparse_iter_with_size(
            vec![Some(*u.as_bytes()), None].into_iter(),
            16,
        )
        .unwrap();
        let f = flush(vec![
            ("as_text", Arc::new(bytes) as ArrayRef),
            (
                "as_uuid",
                Arc::new(StringArray::from(vec![
                    Some("F79C3E09-677C-4BBD-A479-3F349CB785E7"),
                    Some("nope"),
                ])) as ArrayRef,
            ),
        ]);
        let t = table(
            r#"[{"name": "as_text", "type": "string", "field_id": 1, "ordinal": 0},
                {"name": "as_uuid", "type": "uuid", "field_id": 2, "ordinal": 1}]"#,
        );
        let (p, _) = run(&f, &t);
        let text = p.batches[0].column(0).as_string::<i32>();
        assert_eq!(text.value(0), "f79c3e09-677c-4bbd-a479-3f349cb785e7");
        let uuids = p.batches[0].column(1).as_fixed_size_binary();
        assert_eq!(uuids.value(0), u.as_bytes());
        assert!(uuids.is_null(1));
        assert_eq!(p.dead_letters.len(), 1);
        assert_eq!(p.dead_letters[0].original, b"nope");
    }

    #[test]
    fn other_types_keep_a_value_only_when_it_casts_back_unchanged() {
        let f = flush(vec![(
            "d",
            Arc::new(StringArray::from(vec!["2026-03-01", "2026-3-1", "soon"])) as ArrayRef,
        )]);
        let t = table(r#"[{"name": "d", "type": "date", "field_id": 1, "ordinal": 0}]"#);
        let (p, c) = run(&f, &t);
        assert_eq!(c[0].2, 2);
        let d = p.batches[0]
            .column(0)
            .as_any()
            .downcast_ref::<Date32Array>()
            .unwrap();
        assert!(d.is_valid(0) && d.is_null(1) && d.is_null(2));
        let originals: Vec<&[u8]> = p
            .dead_letters
            .iter()
            .map(|d| d.original.as_slice())
            .collect();
        assert_eq!(originals, [&b"2026-3-1"[..], b"soon"]);
    }

    #[test]
    fn narrow_live_integers_and_json_are_checked_and_numbers_never_become_times() {
        let f = flush(vec![
            (
                "u",
                Arc::new(arrow::array::Int64Array::from(vec![7, -1, 5_000_000_000])) as ArrayRef,
            ),
            (
                "j",
                Arc::new(StringArray::from(vec![r#"{"a": 1}"#, "123", "[1"])) as ArrayRef,
            ),
            (
                "t",
                Arc::new(arrow::array::Int64Array::from(vec![1_700_000_000, 1, 2])) as ArrayRef,
            ),
        ]);
        let t = table(
            r#"[{"name": "u", "type": "uint32", "field_id": 1, "ordinal": 0},
                {"name": "j", "type": "json", "field_id": 2, "ordinal": 1},
                {"name": "t", "type": "timestamp", "field_id": 3, "ordinal": 2}]"#,
        );
        let (p, c) = run(&f, &t);
        let lost: Vec<(&str, usize)> = c.iter().map(|(n, _, l)| (n.as_str(), *l)).collect();
        assert_eq!(lost, [("u", 2), ("j", 2), ("t", 3)]);
        let u = p.batches[0].column(0);
        assert!(u.is_valid(0) && u.is_null(1) && u.is_null(2));
        let j = p.batches[0].column(1).as_string::<i32>();
        assert_eq!(j.value(0), r#"{"a": 1}"#);
        assert!(j.is_null(1) && j.is_null(2));
        assert_eq!(p.batches[0].column(2).null_count(), 3);
    }

    #[test]
    fn matching_and_absent_columns_are_untouched() {
        let f = flush(vec![
            (
                "n",
                Arc::new(arrow::array::Int64Array::from(vec![1, 2])) as ArrayRef,
            ),
            (
                "new",
                Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef,
            ),
        ]);
        let t = table(r#"[{"name": "n", "type": "long", "field_id": 1, "ordinal": 0}]"#);
        let (p, c) = run(&f, &t);
        assert!(c.is_empty() && p.dead_letters.is_empty());
        assert_eq!(p.batches[0].num_columns(), 2);
    }
}
