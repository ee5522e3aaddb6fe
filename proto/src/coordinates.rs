//! Per-row Kafka coordinates carried inside a flush's Arrow batches.
//!
//! Ingest appends four columns to every batch so the writer can name the
//! record behind any value it cannot store exactly (a value-level dead
//! letter). They are part of the Flight contract but optional: a batch
//! without them is valid, and its value-level dead letters then carry the
//! flush's topic only. The writer never writes them as table columns.
//!
//! | column                | Arrow type | nulls |
//! |-----------------------|------------|-------|
//! | `_millpond_partition` | Int32      | no    |
//! | `_millpond_offset`    | Int64      | no    |
//! | `_millpond_timestamp` | Int64 (ms since the epoch) | when unknown |
//! | `_millpond_key`       | Binary     | when the record had no key |
//!
//! Every name starting with [`PREFIX`] (ASCII case-insensitive) is reserved:
//! a payload key with that prefix is not a column.
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BinaryArray, Int32Array, Int64Array};
use arrow::datatypes::{DataType, Field};
use arrow::record_batch::RecordBatch;

pub const PREFIX: &str = "_millpond_";
pub const PARTITION: &str = "_millpond_partition";
pub const OFFSET: &str = "_millpond_offset";
pub const TIMESTAMP: &str = "_millpond_timestamp";
pub const KEY: &str = "_millpond_key";

/// True for names in the reserved `_millpond_` namespace.
pub fn is_reserved(name: &str) -> bool {
    name.len() >= PREFIX.len()
        && name.as_bytes()[..PREFIX.len()].eq_ignore_ascii_case(PREFIX.as_bytes())
}

/// Where one row came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coordinate<'a> {
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: Option<i64>,
    pub key: Option<&'a [u8]>,
}

/// The four coordinate columns for `rows`, in contract order.
pub fn columns<'a>(
    rows: impl ExactSizeIterator<Item = Coordinate<'a>> + Clone,
) -> [(Field, ArrayRef); 4] {
    let partition: Int32Array = rows.clone().map(|c| c.partition).collect();
    let offset: Int64Array = rows.clone().map(|c| c.offset).collect();
    let timestamp: Int64Array = rows.clone().map(|c| c.timestamp_ms).collect();
    let key: BinaryArray = rows.map(|c| c.key).collect();
    [
        (
            Field::new(PARTITION, DataType::Int32, true),
            Arc::new(partition),
        ),
        (Field::new(OFFSET, DataType::Int64, true), Arc::new(offset)),
        (
            Field::new(TIMESTAMP, DataType::Int64, true),
            Arc::new(timestamp),
        ),
        (Field::new(KEY, DataType::Binary, true), Arc::new(key)),
    ]
}

/// The coordinate columns of one batch, read back.
#[derive(Debug, Clone)]
pub struct Coordinates {
    partition: Int32Array,
    offset: Int64Array,
    timestamp: Option<Int64Array>,
    key: Option<BinaryArray>,
}

impl Coordinates {
    /// `Ok(None)` when the batch carries no coordinates (partition and
    /// offset are both required for any); an error names a column of the
    /// wrong type or with nulls.
    pub fn read(batch: &RecordBatch) -> Result<Option<Coordinates>, String> {
        fn typed<A: Array + Clone + 'static>(
            batch: &RecordBatch,
            name: &str,
            want: &DataType,
        ) -> Result<Option<A>, String> {
            let Some(col) = batch.column_by_name(name) else {
                return Ok(None);
            };
            if col.data_type() != want {
                return Err(format!(
                    "coordinate column {name} must be {want}, got {}",
                    col.data_type()
                ));
            }
            Ok(col.as_any().downcast_ref::<A>().cloned())
        }
        let partition = typed::<Int32Array>(batch, PARTITION, &DataType::Int32)?;
        let offset = typed::<Int64Array>(batch, OFFSET, &DataType::Int64)?;
        let timestamp = typed::<Int64Array>(batch, TIMESTAMP, &DataType::Int64)?;
        let key = typed::<BinaryArray>(batch, KEY, &DataType::Binary)?;
        let (partition, offset) = match (partition, offset) {
            (Some(p), Some(o)) => (p, o),
            (None, None) if timestamp.is_none() && key.is_none() => return Ok(None),
            _ => {
                return Err(format!(
                    "coordinate columns need both {PARTITION} and {OFFSET}"
                ))
            }
        };
        if partition.null_count() > 0 || offset.null_count() > 0 {
            return Err(format!("{PARTITION} and {OFFSET} must not hold nulls"));
        }
        Ok(Some(Coordinates {
            partition,
            offset,
            timestamp,
            key,
        }))
    }

    pub fn get(&self, row: usize) -> Coordinate<'_> {
        Coordinate {
            partition: self.partition.value(row),
            offset: self.offset.value(row),
            timestamp_ms: self
                .timestamp
                .as_ref()
                .and_then(|t| t.is_valid(row).then(|| t.value(row))),
            key: self
                .key
                .as_ref()
                .and_then(|k| k.is_valid(row).then(|| k.value(row))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::Schema;

    #[test]
    fn columns_read_back() {
        let rows = [
            Coordinate {
                partition: 3,
                offset: 10,
                timestamp_ms: Some(1_700_000_000_000),
                key: Some(b"k1"),
            },
            Coordinate {
                partition: 0,
                offset: 11,
                timestamp_ms: None,
                key: None,
            },
        ];
        let (fields, arrays): (Vec<_>, Vec<_>) = columns(rows.iter().copied()).into_iter().unzip();
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).unwrap();
        let c = Coordinates::read(&batch).unwrap().unwrap();
        assert_eq!(c.get(0), rows[0]);
        assert_eq!(c.get(1), rows[1]);
    }

    #[test]
    fn absent_is_none_and_wrong_types_are_named() {
        let batch =
            RecordBatch::try_from_iter([("a", Arc::new(Int64Array::from(vec![1])) as ArrayRef)])
                .unwrap();
        assert!(Coordinates::read(&batch).unwrap().is_none());
        let bad = RecordBatch::try_from_iter([(
            PARTITION,
            Arc::new(Int64Array::from(vec![1])) as ArrayRef,
        )])
        .unwrap();
        let e = Coordinates::read(&bad).unwrap_err();
        assert!(e.contains(PARTITION), "{e}");
    }

    #[test]
    fn reserved_prefix_ignores_case() {
        assert!(is_reserved("_millpond_offset"));
        assert!(is_reserved("_MillPond_x"));
        assert!(!is_reserved("_millpond"));
        assert!(!is_reserved("millpond_x"));
    }
}
