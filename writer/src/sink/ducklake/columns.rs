//! Which payload columns may be written, before anything touches the lake.
use std::collections::HashSet;
use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use millpond_shared::config::is_safe_identifier;

use super::config::RESERVED_COLUMNS;

/// The batch columns kept, and the names dropped with the reason.
#[derive(Debug, Default)]
pub struct Projection {
    pub keep: Vec<usize>,
    /// Not a safe identifier, or a case-insensitive duplicate.
    pub unsafe_names: Vec<String>,
    /// Names the sink writes itself.
    pub reserved: Vec<String>,
}

pub fn project(schema: &Schema) -> Projection {
    let mut p = Projection::default();
    let mut seen = HashSet::new();
    for (i, f) in schema.fields().iter().enumerate() {
        let name = f.name();
        let lower = name.to_ascii_lowercase();
        if !is_safe_identifier(name) {
            p.unsafe_names.push(name.clone());
        } else if RESERVED_COLUMNS.contains(&lower.as_str()) {
            p.reserved.push(name.clone());
        } else if !seen.insert(lower) {
            p.unsafe_names.push(name.clone());
        } else {
            p.keep.push(i);
        }
    }
    p
}

/// Rows holding a value in at least one of the columns `names`.
pub fn rows_with_any(batches: &[RecordBatch], names: &[String]) -> u64 {
    let mut rows = 0;
    for b in batches {
        let cols: Vec<_> = names.iter().filter_map(|n| b.column_by_name(n)).collect();
        if !cols.is_empty() {
            rows += (0..b.num_rows())
                .filter(|&i| cols.iter().any(|c| c.is_valid(i)))
                .count() as u64;
        }
    }
    rows
}

impl Projection {
    pub fn is_identity(&self, schema: &Schema) -> bool {
        self.keep.len() == schema.fields().len()
    }

    pub fn schema(&self, schema: &SchemaRef) -> SchemaRef {
        if self.is_identity(schema) {
            return schema.clone();
        }
        Arc::new(
            schema
                .project(&self.keep)
                .expect("indices come from this schema"),
        )
    }

    pub fn apply(&self, batch: &RecordBatch) -> RecordBatch {
        if self.is_identity(&batch.schema()) {
            return batch.clone();
        }
        batch
            .project(&self.keep)
            .expect("indices come from this schema")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array};
    use arrow::datatypes::{DataType, Field};

    #[test]
    fn rows_with_any_counts_records_not_names() {
        let col = |v: Vec<Option<i64>>| Arc::new(Int64Array::from(v)) as ArrayRef;
        let b = RecordBatch::try_from_iter([
            ("a-b", col(vec![Some(1), None, None, Some(4)])),
            ("$x", col(vec![Some(1), Some(2), None, None])),
            ("ok", col(vec![Some(1), Some(2), Some(3), Some(4)])),
        ])
        .unwrap();
        let names = vec!["a-b".to_owned(), "$x".to_owned()];
        assert_eq!(rows_with_any(&[b.clone(), b], &names), 6);
    }

    #[test]
    fn drops_unsafe_reserved_and_duplicate_names() {
        let schema = Schema::new(
            ["ok", "utm-source", "Year", "_inserted_at", "OK", "team_id"]
                .into_iter()
                .map(|n| Field::new(n, DataType::Utf8, true))
                .collect::<Vec<_>>(),
        );
        let p = project(&schema);
        assert_eq!(p.keep, vec![0, 5]);
        assert_eq!(p.unsafe_names, vec!["utm-source", "OK"]);
        assert_eq!(p.reserved, vec!["Year", "_inserted_at"]);
    }
}
