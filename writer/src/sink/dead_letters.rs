//! A flush's dead letters as rows, for every sink: records (or values) that
//! could not be written as sent, with their Kafka coordinates, the reason
//! and the original bytes. Each sink commits them beside its table in the
//! same transaction (DuckLake) or commit (hoglake) as the flush's rows.
use std::sync::Arc;

use arrow::array::{ArrayRef, BinaryArray, Int32Array, Int64Array, StringArray};
use arrow::array::{RecordBatch, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use millpond_proto::DeadLetter;
use millpond_shared::config::EnvReader;

/// `<VAR>` (default `<table>_dead_letters`; `off` turns the table off, and
/// dead letters are then counted and discarded): `Some(None)` when off,
/// `None` after a config error. `taken` are names the sink already uses.
pub fn table_setting(
    r: &mut EnvReader<'_>,
    var: &str,
    table: Option<&str>,
    taken: &[&str],
) -> Option<Option<String>> {
    let name = match r.optional(var) {
        Some(v) if v.eq_ignore_ascii_case("off") => return Some(None),
        Some(v) => v,
        None => format!("{}_dead_letters", table?),
    };
    let name = r.safe_identifier(var, Some(name))?;
    if Some(name.as_str()) == table || taken.contains(&name.as_str()) {
        r.errors.push(
            var,
            format!("{name} is already used (the target table or the offsets table)"),
        );
        return None;
    }
    Some(Some(name))
}

/// The columns that say which Kafka record a dead letter is: one record's
/// letters (one per bad value, or one for the record) share them, and a
/// flush written again under a new flush id repeats them.
pub const COORDINATES: [&str; 3] = ["topic", "kafka_partition", "kafka_offset"];
/// The column naming the flush that wrote a dead letter.
pub const FLUSH_ID: &str = "flush_id";

/// The Arrow form of a flush's dead letters, as the table's columns.
pub fn batch(flush_id: &str, letters: &[&DeadLetter]) -> (SchemaRef, RecordBatch) {
    let schema = Arc::new(Schema::new(vec![
        Field::new(COORDINATES[0], DataType::Utf8, false),
        Field::new(COORDINATES[1], DataType::Int32, false),
        Field::new(COORDINATES[2], DataType::Int64, false),
        Field::new(
            "kafka_timestamp",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("kafka_key", DataType::Binary, true),
        Field::new("reason", DataType::Utf8, false),
        Field::new("column_name", DataType::Utf8, true),
        Field::new("live_type", DataType::Utf8, true),
        Field::new("original", DataType::Binary, false),
        Field::new(FLUSH_ID, DataType::Utf8, false),
    ]));
    let text = |f: fn(&DeadLetter) -> &str| -> ArrayRef {
        Arc::new(StringArray::from_iter(letters.iter().map(|l| {
            let v = f(l);
            (!v.is_empty()).then_some(v)
        })))
    };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            letters.iter().map(|l| l.topic.as_str()),
        )),
        Arc::new(Int32Array::from_iter_values(
            letters.iter().map(|l| l.partition),
        )),
        Arc::new(Int64Array::from_iter_values(
            letters.iter().map(|l| l.offset),
        )),
        Arc::new(
            TimestampMicrosecondArray::from_iter(
                letters
                    .iter()
                    .map(|l| l.timestamp_ms.and_then(|ms| ms.checked_mul(1000))),
            )
            .with_timezone("UTC"),
        ),
        Arc::new(BinaryArray::from_iter(
            letters.iter().map(|l| l.key.as_deref()),
        )),
        Arc::new(StringArray::from_iter_values(
            letters.iter().map(|l| l.reason.as_str()),
        )),
        // A value-level letter names its column, even the empty key "".
        Arc::new(StringArray::from_iter(
            letters
                .iter()
                .map(|l| l.value_level.then_some(l.column.as_str())),
        )),
        text(|l| l.live_type.as_str()),
        Arc::new(BinaryArray::from_iter_values(
            letters.iter().map(|l| l.original.as_slice()),
        )),
        Arc::new(StringArray::from_iter_values(
            letters.iter().map(|_| flush_id),
        )),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns).expect("columns match the schema");
    (schema, batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_keeps_coordinates_bytes_and_absent_fields() {
        let letters = [
            DeadLetter {
                topic: "t".into(),
                partition: 3,
                offset: 42,
                timestamp_ms: Some(1_700_000_000_123),
                key: Some(b"k1".to_vec()),
                reason: "invalid_json".into(),
                original: b"{oops".to_vec(),
                ..Default::default()
            },
            DeadLetter {
                topic: "t".into(),
                partition: 0,
                offset: 7,
                reason: "invalid_utf8".into(),
                original: vec![0xff, 0xfe],
                ..Default::default()
            },
        ];
        let (schema, b) = batch("f9", &letters.iter().collect::<Vec<_>>());
        assert_eq!(b.schema(), schema);
        assert_eq!(b.num_rows(), 2);
        let col = |n: &str| b.column_by_name(n).unwrap().clone();
        let offsets = col("kafka_offset");
        let offsets = offsets.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(offsets.values(), &[42, 7]);
        let original = col("original");
        let original = original.as_any().downcast_ref::<BinaryArray>().unwrap();
        assert_eq!(original.value(1), [0xff, 0xfe]);
        assert!(col("kafka_key").is_null(1) && !col("kafka_key").is_null(0));
        assert!(col("kafka_timestamp").is_null(1));
        assert!(col("column_name").is_null(0), "empty column means none");
    }
}
