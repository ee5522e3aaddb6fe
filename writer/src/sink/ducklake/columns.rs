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
    use arrow::datatypes::{DataType, Field};

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
