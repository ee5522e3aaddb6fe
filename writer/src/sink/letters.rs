//! A flush's dead letters, held as the dead-letter table's columns from the
//! moment they are decoded: each costs about its bytes, not a heap object
//! per field. The wire form (a descriptor's repeated `dead_letters`) is
//! decoded one letter at a time into the column builders, so neither the
//! letters as structs nor the wire bytes outlive the decode.
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryBuilder, Int32Builder, Int64Builder, RecordBatch, StringArray,
    StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::datatypes::{DataType, Field, Int32Type, Int64Type, Schema, SchemaRef, TimeUnit};
use bytes::Bytes;
use millpond_proto::{DeadLetter, OffsetRange};
use millpond_shared::metrics::{dead_letter_reason, WriterMetrics};
use prost::Message;

use super::dead_letters::{COORDINATES, FLUSH_ID};
use super::prepare::topic_at;

/// Letters per batch: a builder's doubling overshoots by at most one
/// batch's worth.
const BATCH_ROWS: usize = 4096;

/// The letters of one flush, as batches of the table's columns without
/// `flush_id` (the flush they are written under adds it).
#[derive(Debug, Clone, Default)]
pub struct Letters {
    batches: Vec<RecordBatch>,
    len: usize,
}

impl Letters {
    /// The letters given (the writer's own, found while preparing rows).
    pub fn of<'a>(letters: impl IntoIterator<Item = &'a DeadLetter>) -> Letters {
        let mut b = Builder::default();
        for l in letters {
            b.push(l);
        }
        b.finish()
    }

    /// Decodes the wire form of each letter (one embedded `DeadLetter`
    /// message each) into columns.
    pub fn decode(wire: impl IntoIterator<Item = Bytes>) -> Result<Letters, prost::DecodeError> {
        let mut b = Builder::default();
        let mut one = DeadLetter::default();
        for bytes in wire {
            one.clear();
            one.merge(bytes)?;
            b.push(&one);
        }
        Ok(b.finish())
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap bytes the letters hold.
    pub fn bytes(&self) -> usize {
        self.batches
            .iter()
            .map(RecordBatch::get_array_memory_size)
            .sum()
    }

    /// These letters followed by `more`.
    pub fn and(&self, more: Letters) -> Letters {
        let mut batches = self.batches.clone();
        batches.extend(more.batches);
        Letters {
            batches,
            len: self.len + more.len,
        }
    }

    /// Adds `more` after these letters.
    pub fn append(&mut self, more: Letters) {
        self.batches.extend(more.batches);
        self.len += more.len;
    }

    /// Sets the topic of letters found before the flush's ranges were
    /// known (an empty topic) from the range holding each.
    pub fn fill_topics(&mut self, ranges: &[OffsetRange]) {
        for b in &mut self.batches {
            let topics = b.column(TOPIC).as_string::<i32>();
            if !topics.iter().any(|t| t == Some("")) {
                continue;
            }
            let partitions = b.column(PARTITION).as_primitive::<Int32Type>();
            let offsets = b.column(OFFSET).as_primitive::<Int64Type>();
            let filled: StringArray = (0..b.num_rows())
                .map(|row| match topics.value(row) {
                    "" => {
                        let p = partitions.value(row);
                        let at = (p >= 0).then(|| (p, offsets.value(row)));
                        Some(topic_at(ranges, at))
                    }
                    t => Some(t),
                })
                .collect();
            let mut columns = b.columns().to_vec();
            columns[TOPIC] = Arc::new(filled);
            *b = RecordBatch::try_new(b.schema(), columns).expect("same columns");
        }
    }

    /// The letters as the dead-letter table's rows, written by `flush_id`.
    pub fn rows(&self, flush_id: &str) -> (SchemaRef, Vec<RecordBatch>) {
        let schema = table_schema();
        let batches = self
            .batches
            .iter()
            .map(|b| {
                let mut columns: Vec<ArrayRef> = b.columns().to_vec();
                columns.push(Arc::new(StringArray::from_iter_values(
                    std::iter::repeat_n(flush_id, b.num_rows()),
                )));
                RecordBatch::try_new(schema.clone(), columns).expect("columns match the schema")
            })
            .collect();
        (schema, batches)
    }

    /// Counts every letter by reason, records and values apart.
    pub fn count(&self, metrics: &WriterMetrics) {
        for b in &self.batches {
            let reasons = b.column(REASON).as_string::<i32>();
            let columns = b.column(COLUMN);
            for row in 0..b.num_rows() {
                // A value-level letter names its column; a record's does not.
                let metric = if columns.is_valid(row) {
                    &metrics.dead_letter_values
                } else {
                    &metrics.dead_letters
                };
                metric
                    .with_label_values(&[dead_letter_reason::label(reasons.value(row))])
                    .inc();
            }
        }
    }
}

const TOPIC: usize = 0;
const PARTITION: usize = 1;
const OFFSET: usize = 2;
const REASON: usize = 5;
const COLUMN: usize = 6;

fn letter_fields() -> Vec<Field> {
    vec![
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
    ]
}

/// The dead-letter table's columns, in order.
pub fn table_schema() -> SchemaRef {
    let mut fields = letter_fields();
    fields.push(Field::new(FLUSH_ID, DataType::Utf8, false));
    Arc::new(Schema::new(fields))
}

#[derive(Default)]
struct Builder {
    done: Vec<RecordBatch>,
    len: usize,
    rows: usize,
    topic: StringBuilder,
    partition: Int32Builder,
    offset: Int64Builder,
    timestamp: TimestampMicrosecondBuilder,
    key: BinaryBuilder,
    reason: StringBuilder,
    column: StringBuilder,
    live_type: StringBuilder,
    original: BinaryBuilder,
}

impl Builder {
    fn push(&mut self, l: &DeadLetter) {
        self.topic.append_value(&l.topic);
        self.partition.append_value(l.partition);
        self.offset.append_value(l.offset);
        self.timestamp
            .append_option(l.timestamp_ms.and_then(|ms| ms.checked_mul(1000)));
        self.key.append_option(l.key.as_deref());
        self.reason.append_value(&l.reason);
        // A value-level letter names its column, even the empty key "".
        self.column
            .append_option(l.value_level.then_some(l.column.as_str()));
        self.live_type
            .append_option((!l.live_type.is_empty()).then_some(l.live_type.as_str()));
        self.original.append_value(&l.original);
        self.rows += 1;
        if self.rows == BATCH_ROWS {
            self.cut();
        }
    }

    fn cut(&mut self) {
        if self.rows == 0 {
            return;
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.topic.finish()),
            Arc::new(self.partition.finish()),
            Arc::new(self.offset.finish()),
            Arc::new(self.timestamp.finish().with_timezone("UTC")),
            Arc::new(self.key.finish()),
            Arc::new(self.reason.finish()),
            Arc::new(self.column.finish()),
            Arc::new(self.live_type.finish()),
            Arc::new(self.original.finish()),
        ];
        let schema = Arc::new(Schema::new(letter_fields()));
        self.done
            .push(RecordBatch::try_new(schema, columns).expect("columns match the schema"));
        self.len += self.rows;
        self.rows = 0;
    }

    fn finish(mut self) -> Letters {
        self.cut();
        Letters {
            batches: self.done,
            len: self.len,
        }
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{BinaryArray, Int64Array};

    use super::*;

    fn letters() -> [DeadLetter; 2] {
        [
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
                reason: "unsafe_field_name".into(),
                column: "".into(),
                original: vec![0xff, 0xfe],
                value_level: true,
                ..Default::default()
            },
        ]
    }

    #[test]
    fn rows_keep_coordinates_bytes_and_absent_fields() {
        let (schema, batches) = Letters::of(&letters()).rows("f9");
        assert_eq!(batches.len(), 1);
        let b = &batches[0];
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
        assert!(
            col("column_name").is_null(0),
            "a record's letter names no column"
        );
        assert!(col("column_name").is_valid(1), "the empty key is a name");
        assert_eq!(col(FLUSH_ID).as_string::<i32>().value(1), "f9");
    }

    #[test]
    fn the_wire_form_decodes_to_the_same_rows() {
        let given = letters();
        let wire = given.iter().map(|l| Bytes::from(l.encode_to_vec()));
        let decoded = Letters::decode(wire).unwrap();
        assert_eq!(decoded.len(), 2);
        assert_eq!(decoded.rows("f").1, Letters::of(&given).rows("f").1);
        assert!(Letters::decode([Bytes::from_static(b"\xff")]).is_err());
    }

    #[test]
    fn letters_found_before_the_ranges_get_their_topic() {
        let mut found = letters();
        found[1].topic = String::new();
        let mut l = Letters::of(&found);
        l.fill_topics(&[OffsetRange::new("orders", 0, 5, 9)]);
        let (_, rows) = l.rows("f");
        let topics = rows[0].column(TOPIC).as_string::<i32>();
        assert_eq!((topics.value(0), topics.value(1)), ("t", "orders"));
    }

    #[test]
    fn many_letters_cut_into_batches_and_count_once_each() {
        let one = &letters()[1];
        let many = Letters::of(std::iter::repeat_n(one, BATCH_ROWS + 1));
        assert_eq!(many.len(), BATCH_ROWS + 1);
        let (_, rows) = many.and(Letters::of(&letters()[..1])).rows("f");
        let counts: Vec<usize> = rows.iter().map(RecordBatch::num_rows).collect();
        assert_eq!(counts, [BATCH_ROWS, 1, 1]);
        let metrics = WriterMetrics::new(&millpond_shared::metrics::new_registry("p", "b"));
        many.count(&metrics);
        let values = metrics
            .dead_letter_values
            .with_label_values(&["unsafe_field_name"])
            .get();
        assert_eq!(values, (BATCH_ROWS + 1) as u64);
    }
}
