//! The pending flush: converted batches, their Arrow size, and the offset
//! range of every partition consumed since the last flush.
use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use millpond_proto::OffsetRange;

#[derive(Default)]
pub struct Pending {
    batches: Vec<RecordBatch>,
    bytes: usize,
    rows: usize,
    /// partition -> (first, last) offsets seen since the last flush,
    /// including skipped records and tombstones.
    ranges: BTreeMap<i32, (i64, i64)>,
}

impl Pending {
    pub fn track(&mut self, partition: i32, offset: i64) {
        self.ranges
            .entry(partition)
            .and_modify(|(_, last)| *last = (*last).max(offset))
            .or_insert((offset, offset));
    }

    pub fn push(&mut self, batch: RecordBatch, bytes: usize) {
        self.rows += batch.num_rows();
        self.bytes += bytes;
        self.batches.push(batch);
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// True when there is nothing to flush: no records consumed at all.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn ranges(&self, topic: &str) -> Vec<OffsetRange> {
        self.ranges
            .iter()
            .map(|(p, (first, last))| OffsetRange::new(topic, *p, *first, *last))
            .collect()
    }

    /// Takes the batches out, aligned to one schema, and resets the buffer.
    pub fn take(&mut self) -> Result<(SchemaRef, Vec<RecordBatch>), ArrowError> {
        let batches = std::mem::take(&mut self.batches);
        self.ranges.clear();
        self.bytes = 0;
        self.rows = 0;
        unify(batches)
    }
}

/// Merged type of a column seen with two types in one flush.
fn merge(a: &DataType, b: &DataType) -> DataType {
    match (a, b) {
        _ if a == b => a.clone(),
        (DataType::Int64, DataType::Float64) | (DataType::Float64, DataType::Int64) => {
            DataType::Float64
        }
        _ => DataType::Utf8,
    }
}

/// Aligns batches converted separately (each with its own inferred schema)
/// to the union schema: columns in first-seen order, missing ones null,
/// conflicting types merged as the converter merges them within a batch.
pub fn unify(batches: Vec<RecordBatch>) -> Result<(SchemaRef, Vec<RecordBatch>), ArrowError> {
    let mut fields: Vec<(String, DataType)> = Vec::new();
    for b in &batches {
        for f in b.schema().fields() {
            match fields.iter_mut().find(|(n, _)| n == f.name()) {
                Some((_, t)) => *t = merge(t, f.data_type()),
                None => fields.push((f.name().clone(), f.data_type().clone())),
            }
        }
    }
    let schema: SchemaRef = Arc::new(Schema::new(
        fields
            .iter()
            .map(|(n, t)| Field::new(n, t.clone(), true))
            .collect::<Vec<_>>(),
    ));
    let mut out = Vec::with_capacity(batches.len());
    for b in batches {
        if b.schema() == schema {
            out.push(b);
            continue;
        }
        let cols: Vec<ArrayRef> = fields
            .iter()
            .map(|(name, t)| match b.column_by_name(name) {
                Some(c) if c.data_type() == t => Ok(c.clone()),
                Some(c) => cast(c, t),
                None => Ok(new_null_array(t, b.num_rows())),
            })
            .collect::<Result<_, _>>()?;
        out.push(RecordBatch::try_new(schema.clone(), cols)?);
    }
    Ok((schema, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int64Array, StringArray};

    fn b(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(cols).unwrap()
    }

    #[test]
    fn unify_fills_missing_and_merges_types() {
        let b1 = b(vec![("a", Arc::new(Int64Array::from(vec![1])) as ArrayRef)]);
        let b2 = b(vec![
            ("b", Arc::new(StringArray::from(vec!["x"])) as ArrayRef),
            ("a", Arc::new(Float64Array::from(vec![1.5])) as ArrayRef),
        ]);
        let b3 = b(vec![("b", Arc::new(Int64Array::from(vec![7])) as ArrayRef)]);
        let (schema, out) = unify(vec![b1, b2, b3]).unwrap();
        let names: Vec<_> = schema
            .fields()
            .iter()
            .map(|f| (f.name().as_str(), f.data_type().clone()))
            .collect();
        assert_eq!(names, vec![("a", DataType::Float64), ("b", DataType::Utf8)]);
        assert_eq!(out.len(), 3);
        let b3b = out[2]
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(b3b.value(0), "7");
        assert!(out[2].column(0).is_null(0));
    }

    #[test]
    fn ranges_cover_every_tracked_offset() {
        let mut p = Pending::default();
        for (part, off) in [(1, 10), (0, 5), (1, 11), (0, 6), (1, 12)] {
            p.track(part, off);
        }
        assert_eq!(
            p.ranges("t"),
            vec![
                OffsetRange::new("t", 0, 5, 6),
                OffsetRange::new("t", 1, 10, 12)
            ]
        );
        p.take().unwrap();
        assert!(p.is_empty());
    }
}
