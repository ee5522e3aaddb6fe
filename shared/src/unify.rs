//! One schema for batches converted separately: ingest aligns a flush it
//! sends whole, the writer aligns a flush streamed to it. Both use this, so
//! a flush lands the same either way.
use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, AsArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

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

/// A column cast to the flush's merged type; floats into text go through
/// the converter's own rule (`number_text`), so a number reads the same
/// whichever batch it came in.
fn to_type(c: &ArrayRef, t: &DataType) -> Result<ArrayRef, ArrowError> {
    match (c.data_type(), t) {
        (DataType::Float64, DataType::Utf8) => {
            let floats = c.as_primitive::<arrow::datatypes::Float64Type>();
            let text: arrow::array::StringArray = floats
                .iter()
                .map(|v| v.map(crate::decimal::number_text))
                .collect();
            Ok(Arc::new(text))
        }
        _ => cast(c, t),
    }
}

/// False for an Int64 column holding a value beyond 2^53.
fn ints_fit_f64(c: &ArrayRef) -> bool {
    const EXACT: u64 = 1 << 53;
    c.as_primitive_opt::<Int64Type>()
        .is_none_or(|a| a.iter().flatten().all(|v| v.unsigned_abs() <= EXACT))
}

/// `batches` as one schema: as they are when they already share one,
/// otherwise [`unify`]d. `None` for no batches.
#[allow(clippy::type_complexity)]
pub fn aligned(
    batches: Vec<RecordBatch>,
) -> Result<Option<(SchemaRef, Vec<RecordBatch>)>, ArrowError> {
    match batches.first() {
        None => Ok(None),
        Some(first) if batches.iter().all(|b| b.schema() == first.schema()) => {
            Ok(Some((first.schema(), batches)))
        }
        Some(_) => unify(batches).map(Some),
    }
}

/// Aligns batches converted separately (each with its own inferred schema)
/// to the union schema: columns in first-seen order, missing ones null,
/// conflicting types merged as the converter merges them within a batch.
pub fn unify(batches: Vec<RecordBatch>) -> Result<(SchemaRef, Vec<RecordBatch>), ArrowError> {
    let mut fields: Vec<(String, DataType)> = Vec::new();
    // Field metadata (the arrow.uuid extension of a pinned column) as first seen.
    let mut metadata: Vec<HashMap<String, String>> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for b in &batches {
        for f in b.schema().fields() {
            match index.get(f.name()) {
                Some(&i) => fields[i].1 = merge(&fields[i].1, f.data_type()),
                None => {
                    index.insert(f.name().clone(), fields.len());
                    fields.push((f.name().clone(), f.data_type().clone()));
                    metadata.push(f.metadata().clone());
                }
            }
        }
    }
    // An integer f64 cannot hold makes the merged column text, as the
    // converter does within a batch: no value is rounded.
    for (name, t) in &mut fields {
        if *t == DataType::Float64
            && batches
                .iter()
                .any(|b| b.column_by_name(name).is_some_and(|c| !ints_fit_f64(c)))
        {
            *t = DataType::Utf8;
        }
    }
    let schema: SchemaRef = Arc::new(Schema::new(
        fields
            .iter()
            .zip(&metadata)
            .map(|((n, t), m)| Field::new(n, t.clone(), true).with_metadata(m.clone()))
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
                Some(c) => to_type(c, t),
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
    fn unify_never_rounds_an_integer_into_a_float_column() {
        let big = (1i64 << 53) + 1;
        let b1 = b(vec![(
            "a",
            Arc::new(Int64Array::from(vec![big])) as ArrayRef,
        )]);
        let b2 = b(vec![(
            "a",
            Arc::new(Float64Array::from(vec![1.5])) as ArrayRef,
        )]);
        let (schema, out) = unify(vec![b1, b2]).unwrap();
        assert_eq!(schema.field(0).data_type(), &DataType::Utf8);
        let text = |i: usize| out[i].column(0).as_string::<i32>().value(0).to_owned();
        assert_eq!((text(0), text(1)), (big.to_string(), "1.5".to_owned()));
    }
}
