//! The dead-letter table: records (or values) of a flush that could not be
//! written as sent, stored beside the target table in the same transaction
//! as the flush's rows and offsets, so a crash neither loses nor repeats one.
use std::sync::Arc;

use arrow::array::{ArrayRef, BinaryArray, Int32Array, Int64Array, StringArray};
use arrow::array::{RecordBatch, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use millpond_proto::DeadLetter;

/// Name of the Arrow scan view over a flush's dead letters.
pub const SCAN: &str = "millpond_dead_letters";

pub struct DeadLetterTable {
    /// Fully qualified: lake.<schema>.<name>
    pub name: String,
}

impl DeadLetterTable {
    pub fn create_sql(&self) -> String {
        format!(
            "CREATE TABLE IF NOT EXISTS {} (topic VARCHAR, kafka_partition INTEGER, kafka_offset BIGINT, \
             kafka_timestamp TIMESTAMP WITH TIME ZONE, kafka_key BLOB, reason VARCHAR, column_name VARCHAR, \
             live_type VARCHAR, original BLOB, flush_id VARCHAR, _inserted_at TIMESTAMP WITH TIME ZONE)",
            self.name
        )
    }

    /// Run inside the write transaction, reading the view [`SCAN`].
    pub fn insert_sql(&self) -> String {
        format!(
            "INSERT INTO {} BY NAME SELECT *, now() AS _inserted_at FROM {SCAN}",
            self.name
        )
    }
}

/// The Arrow form of a flush's dead letters, as the table's columns.
pub fn batch(flush_id: &str, letters: &[&DeadLetter]) -> (SchemaRef, RecordBatch) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("topic", DataType::Utf8, false),
        Field::new("kafka_partition", DataType::Int32, false),
        Field::new("kafka_offset", DataType::Int64, false),
        Field::new(
            "kafka_timestamp",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
        Field::new("kafka_key", DataType::Binary, true),
        Field::new("reason", DataType::Utf8, false),
        Field::new("column_name", DataType::Utf8, true),
        Field::new("live_type", DataType::Utf8, true),
        Field::new("original", DataType::Binary, false),
        Field::new("flush_id", DataType::Utf8, false),
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
            TimestampMillisecondArray::from_iter(letters.iter().map(|l| l.timestamp_ms))
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
