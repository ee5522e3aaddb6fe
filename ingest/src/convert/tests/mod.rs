//! The converter's semantics (see the module documentation), by topic.
use std::collections::BTreeSet;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use arrow::record_batch::RecordBatch;
use serde_json::Value;

use super::{convert, Converted};

fn conv(payloads: &[&str]) -> Converted {
    let bytes: Vec<&[u8]> = payloads.iter().map(|p| p.as_bytes()).collect();
    let out = convert(&bytes);
    assert_eq!(out.rows + out.skipped.len(), payloads.len());
    match &out.batch {
        Some(b) => {
            assert_eq!(b.num_rows(), out.rows);
            assert_eq!(out.arrow_bytes, b.get_array_memory_size());
        }
        None => {
            assert_eq!(out.rows, 0);
            assert_eq!(out.arrow_bytes, 0);
        }
    }
    out
}

fn batch(payloads: &[&str]) -> RecordBatch {
    conv(payloads).batch.expect("a batch")
}

fn names(b: &RecordBatch) -> Vec<String> {
    b.schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect()
}

fn dtype(b: &RecordBatch, name: &str) -> DataType {
    b.schema()
        .field_with_name(name)
        .unwrap()
        .data_type()
        .clone()
}

fn ints(b: &RecordBatch, name: &str) -> Vec<Option<i64>> {
    let col = b.column_by_name(name).unwrap();
    col.as_primitive::<Int64Type>().iter().collect()
}

fn floats(b: &RecordBatch, name: &str) -> Vec<Option<f64>> {
    let col = b.column_by_name(name).unwrap();
    col.as_primitive::<Float64Type>().iter().collect()
}

fn bools(b: &RecordBatch, name: &str) -> Vec<Option<bool>> {
    b.column_by_name(name)
        .unwrap()
        .as_boolean()
        .iter()
        .collect()
}

fn strs(b: &RecordBatch, name: &str) -> Vec<Option<String>> {
    let col = b.column_by_name(name).unwrap();
    col.as_string::<i32>()
        .iter()
        .map(|s| s.map(str::to_owned))
        .collect()
}

fn s(v: &str) -> Option<String> {
    Some(v.to_owned())
}

/// What the reference parser says about one payload.
enum Oracle {
    Row(serde_json::Map<String, Value>),
    Skip,
    /// serde_json rejects out-of-range floats that we accept as ±inf.
    Unknown,
}

fn oracle(p: &[u8]) -> Oracle {
    match serde_json::from_slice::<Value>(p) {
        Ok(Value::Object(m)) => Oracle::Row(m),
        Ok(_) => Oracle::Skip,
        Err(e) if e.to_string().contains("out of range") => Oracle::Unknown,
        Err(_) => Oracle::Skip,
    }
}

mod properties;
mod skipped;
mod text;
mod types;
