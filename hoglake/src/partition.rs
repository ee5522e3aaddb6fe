//! Splitting rows by partition tuple: one group (and later one file) per
//! distinct tuple of transformed values, in order of first appearance.

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt32Array};
use arrow::buffer::NullBuffer;
use arrow::compute::{concat_batches, take_record_batch};
use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::partition_value::{transform_values, Transform};
use crate::schema::{ordered, Column, ColumnType, PartitionSpec};

/// The rows of one partition and their tuple (`None` = null source value).
#[derive(Debug, Clone)]
pub struct PartitionGroup {
    pub values: Vec<Option<String>>,
    pub batch: RecordBatch,
}

/// A partition spec resolved against the table's columns, ready to apply to
/// batches in the file schema ([`crate::arrow_schema::arrow_schema`]).
#[derive(Debug, Clone)]
pub struct Partitioner {
    fields: Vec<Source>,
}

#[derive(Debug, Clone)]
struct Source {
    /// Index of the top-level column in the file schema, then struct child
    /// indices down to the leaf.
    path: Vec<usize>,
    column_type: ColumnType,
    transform: Transform,
}

impl Partitioner {
    pub fn new(spec: &PartitionSpec, columns: &[Column]) -> Result<Self> {
        let fields = spec
            .fields
            .iter()
            .map(|field| {
                let transform = Transform::from_field(field)?;
                let (path, column) =
                    find_leaf(columns, field.source_field_id).ok_or_else(|| {
                        Error::PartitionSpec(format!(
                            "source field id {} is not a top-level or struct leaf column",
                            field.source_field_id
                        ))
                    })?;
                if !transform.accepts(column.column_type) {
                    return Err(Error::PartitionSpec(format!(
                        "{transform:?} does not apply to `{}` ({})",
                        column.name, column.column_type
                    )));
                }
                Ok(Source {
                    path,
                    column_type: column.column_type,
                    transform,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { fields })
    }

    /// Number of values in each tuple.
    pub fn arity(&self) -> usize {
        self.fields.len()
    }

    /// The partition tuple of every row.
    pub fn row_values(&self, batch: &RecordBatch) -> Result<Vec<Vec<Option<String>>>> {
        let mut rows = vec![Vec::with_capacity(self.fields.len()); batch.num_rows()];
        for source in &self.fields {
            let array = leaf_array(batch, &source.path)?;
            let values = transform_values(&array, source.column_type, source.transform)?;
            for (row, value) in rows.iter_mut().zip(values) {
                row.push(value);
            }
        }
        Ok(rows)
    }

    /// All rows of `batches` grouped by partition tuple.
    pub fn split(&self, batches: &[RecordBatch]) -> Result<Vec<PartitionGroup>> {
        let Some(first) = batches.first() else {
            return Ok(Vec::new());
        };
        let all = concat_batches(first.schema_ref(), batches)?;
        let mut index: HashMap<Vec<Option<String>>, usize> = HashMap::new();
        let mut groups: Vec<(Vec<Option<String>>, Vec<u32>)> = Vec::new();
        for (row, values) in self.row_values(&all)?.into_iter().enumerate() {
            let row = u32::try_from(row)
                .map_err(|_| Error::PartitionValue("batch over 2^32 rows".into()))?;
            match index.get(&values) {
                Some(&g) => groups[g].1.push(row),
                None => {
                    index.insert(values.clone(), groups.len());
                    groups.push((values, vec![row]));
                }
            }
        }
        groups
            .into_iter()
            .map(|(values, rows)| {
                let batch = take_record_batch(&all, &UInt32Array::from(rows))?;
                Ok(PartitionGroup { values, batch })
            })
            .collect()
    }
}

/// Where a partition source lives: top-level columns (variants skipped, as
/// in the file schema) and struct fields only.
fn find_leaf(columns: &[Column], field_id: i64) -> Option<(Vec<usize>, &Column)> {
    let top: Vec<&Column> = ordered(columns)
        .into_iter()
        .filter(|c| c.column_type != ColumnType::Variant)
        .collect();
    search(&top, field_id)
}

fn search<'a>(columns: &[&'a Column], field_id: i64) -> Option<(Vec<usize>, &'a Column)> {
    for (i, column) in columns.iter().enumerate() {
        if column.field_id == field_id {
            return (!column.column_type.is_container()).then(|| (vec![i], *column));
        }
        if column.column_type == ColumnType::Struct {
            if let Some((mut path, leaf)) = search(&column.ordered_children(), field_id) {
                path.insert(0, i);
                return Some((path, leaf));
            }
        }
    }
    None
}

/// The leaf array at `path`, null wherever an enclosing struct is null.
fn leaf_array(batch: &RecordBatch, path: &[usize]) -> Result<ArrayRef> {
    let missing = || Error::PartitionSpec("partition source not in the batch schema".into());
    let mut array = batch.columns().get(path[0]).ok_or_else(missing)?.clone();
    let mut nulls: Option<NullBuffer> = array.logical_nulls();
    for &child in &path[1..] {
        let parent = array.as_struct_opt().ok_or_else(missing)?;
        let next = parent.columns().get(child).ok_or_else(missing)?.clone();
        nulls = NullBuffer::union(nulls.as_ref(), next.logical_nulls().as_ref());
        array = next;
    }
    if path.len() == 1 {
        return Ok(array);
    }
    let data = array.to_data().into_builder().nulls(nulls).build()?;
    Ok(Arc::new(arrow::array::make_array(data)))
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, StructArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;
    use crate::schema::PartitionField;

    #[test]
    fn struct_leaf_sources_inherit_parent_nulls() {
        let columns: Vec<Column> = serde_json::from_str(
            r#"[{"name": "s", "type": "struct", "field_id": 1, "ordinal": 0, "children": [
                   {"name": "a", "type": "long", "field_id": 2, "ordinal": 0}]}]"#,
        )
        .unwrap();
        let spec = PartitionSpec {
            spec_id: 1,
            fields: vec![PartitionField {
                source_field_id: 2,
                transform: "identity".into(),
                transform_param: None,
            }],
        };
        let a: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), Some(2), Some(1)]));
        let s = StructArray::new(
            vec![Field::new("a", DataType::Int64, true)].into(),
            vec![a],
            Some(NullBuffer::from(vec![true, false, true])),
        );
        let schema = Arc::new(Schema::new(vec![Field::new(
            "s",
            s.data_type().clone(),
            true,
        )]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(s)]).unwrap();
        let groups = Partitioner::new(&spec, &columns)
            .unwrap()
            .split(&[batch])
            .unwrap();
        let summary: Vec<_> = groups
            .iter()
            .map(|g| (g.values.clone(), g.batch.num_rows()))
            .collect();
        assert_eq!(summary, [(vec![Some("1".to_string())], 2), (vec![None], 1)]);
    }

    #[test]
    fn bad_specs_are_refused() {
        let columns: Vec<Column> = serde_json::from_str(
            r#"[{"name": "x", "type": "double", "field_id": 1, "ordinal": 0},
                {"name": "l", "type": "list", "field_id": 2, "ordinal": 1, "children": [
                   {"name": "element", "type": "long", "field_id": 3, "ordinal": 0}]}]"#,
        )
        .unwrap();
        let spec = |id, t: &str, p| PartitionSpec {
            spec_id: 1,
            fields: vec![PartitionField {
                source_field_id: id,
                transform: t.into(),
                transform_param: p,
            }],
        };
        assert!(
            Partitioner::new(&spec(1, "bucket", Some(4)), &columns).is_err(),
            "bucket(double)"
        );
        assert!(
            Partitioner::new(&spec(3, "identity", None), &columns).is_err(),
            "list element"
        );
        assert!(
            Partitioner::new(&spec(9, "identity", None), &columns).is_err(),
            "unknown id"
        );
        assert!(Partitioner::new(&spec(1, "identity", None), &columns).is_ok());
    }
}
