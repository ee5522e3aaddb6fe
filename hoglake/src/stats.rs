//! Per-leaf column statistics for a file registration, derived from the
//! parquet footer alone (the same footer the server's hydrator would read),
//! following pyhoglake's rules (hoglake-api.md §8.3):
//!
//! * a footer leaf is reported only if its path maps to a catalog leaf
//!   (`a.b` for struct leaves, `l.list.element`, `m.key_value.key|value`);
//!   variant subtrees and ambiguous paths are skipped;
//! * `value_count` / `size_bytes` are the sums of the chunks' `num_values` /
//!   `total_compressed_size`, `null_count` the sum of their null counts;
//! * a leaf whose statistics or null count is missing in any row group is
//!   left out entirely;
//! * bounds come from the row groups holding non-null values; if any of them
//!   lacks min/max, or the file's type does not fit the catalog type, or a
//!   value cannot be encoded, both bounds are omitted.

use std::collections::HashMap;

use parquet::file::metadata::ParquetMetaData;
use serde::{Deserialize, Serialize};

use crate::bounds::{encode, read_min_max, to_base64, BoundValue, End};
use crate::schema::{ordered, Column, ColumnType};

/// One `column_stats` entry of a FileRegistration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnStats {
    pub field_id: i64,
    pub value_count: i64,
    pub null_count: i64,
    /// pyhoglake never sends it; kept so server payloads parse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nan_count: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<i64>,
    /// Standard base64 of the Iceberg single-value encoding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_bound: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper_bound: Option<String>,
}

/// Statistics for every catalog leaf present in the file, in footer order.
pub fn column_stats(metadata: &ParquetMetaData, columns: &[Column]) -> Vec<ColumnStats> {
    let leaves = catalog_leaves(columns);
    let schema = metadata.file_metadata().schema_descr();
    let mut out = Vec::new();
    for (i, descr) in schema.columns().iter().enumerate() {
        let Some(column) = leaves.get(&descr.path().string()).copied().flatten() else {
            continue;
        };
        if let Some(stats) = leaf_stats(metadata, i, column) {
            out.push(stats);
        }
    }
    out
}

fn leaf_stats(metadata: &ParquetMetaData, i: usize, column: &Column) -> Option<ColumnStats> {
    let (mut value_count, mut null_count, mut size_bytes) = (0i64, 0i64, 0i64);
    let mut range: Option<(BoundValue, BoundValue)> = None;
    let mut bounds_ok = true;
    for row_group in metadata.row_groups() {
        let chunk = row_group.column(i);
        let stats = chunk.statistics()?;
        let nulls = i64::try_from(stats.null_count_opt()?).ok()?;
        value_count += chunk.num_values();
        null_count += nulls;
        size_bytes += chunk.compressed_size();
        if chunk.num_values() - nulls <= 0 || !bounds_ok {
            continue;
        }
        match read_min_max(stats, chunk.column_descr(), column) {
            Some((min, max)) => range = widen(range, min, max),
            None => bounds_ok = false,
        }
    }
    let encoded = range.filter(|_| bounds_ok).and_then(|(min, max)| {
        let lower = encode(column.column_type, &min, End::Lower)?;
        let upper = encode(column.column_type, &max, End::Upper)?;
        Some((to_base64(&lower), to_base64(&upper)))
    });
    let (lower_bound, upper_bound) = encoded.unzip();
    Some(ColumnStats {
        field_id: column.field_id,
        value_count,
        null_count,
        nan_count: None,
        size_bytes: Some(size_bytes),
        lower_bound,
        upper_bound,
    })
}

fn widen(
    range: Option<(BoundValue, BoundValue)>,
    min: BoundValue,
    max: BoundValue,
) -> Option<(BoundValue, BoundValue)> {
    use std::cmp::Ordering::{Greater, Less};
    Some(match range {
        None => (min, max),
        Some((lo, hi)) => (
            if min.compare(&lo) == Some(Less) {
                min
            } else {
                lo
            },
            if max.compare(&hi) == Some(Greater) {
                max
            } else {
                hi
            },
        ),
    })
}

/// Footer leaf path (dot-joined) -> catalog leaf; `None` marks a path two
/// catalog leaves share, which is skipped.
fn catalog_leaves(columns: &[Column]) -> HashMap<String, Option<&Column>> {
    let mut out = HashMap::new();
    for column in ordered(columns) {
        add_leaves(column, String::new(), &mut out);
    }
    out
}

fn add_leaves<'a>(
    column: &'a Column,
    prefix: String,
    out: &mut HashMap<String, Option<&'a Column>>,
) {
    let path = if prefix.is_empty() {
        column.name.clone()
    } else {
        format!("{prefix}.{}", column.name)
    };
    match column.column_type {
        ColumnType::Variant => {}
        ColumnType::Struct => {
            for child in column.ordered_children() {
                add_leaves(child, path.clone(), out);
            }
        }
        ColumnType::List => {
            for child in column.ordered_children() {
                add_leaves(child, format!("{path}.list"), out);
            }
        }
        ColumnType::Map => {
            for child in column.ordered_children() {
                add_leaves(child, format!("{path}.key_value"), out);
            }
        }
        _ => {
            out.entry(path)
                .and_modify(|seen| *seen = None)
                .or_insert(Some(column));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_paths_follow_parquet_nesting() {
        let columns: Vec<Column> = serde_json::from_str(
            r#"[{"name": "s", "type": "struct", "field_id": 1, "ordinal": 0, "children": [
                   {"name": "a", "type": "long", "field_id": 2, "ordinal": 0},
                   {"name": "l", "type": "list", "field_id": 3, "ordinal": 1, "children": [
                      {"name": "element", "type": "string", "field_id": 4, "ordinal": 0}]}]},
                {"name": "m", "type": "map", "field_id": 5, "ordinal": 1, "children": [
                   {"name": "key", "type": "string", "nullable": false, "field_id": 6, "ordinal": 0},
                   {"name": "value", "type": "double", "field_id": 7, "ordinal": 1}]},
                {"name": "v", "type": "variant", "field_id": 8, "ordinal": 2}]"#,
        )
        .unwrap();
        let leaves = catalog_leaves(&columns);
        let mut ids: Vec<_> = leaves
            .iter()
            .map(|(path, c)| (path.as_str(), c.unwrap().field_id))
            .collect();
        ids.sort();
        assert_eq!(
            ids,
            [
                ("m.key_value.key", 6),
                ("m.key_value.value", 7),
                ("s.a", 2),
                ("s.l.list.element", 4)
            ]
        );
    }

    #[test]
    fn bounds_widen_across_row_groups() {
        let (lo, hi) = widen(
            widen(None, BoundValue::Int(5), BoundValue::Int(9)),
            BoundValue::Int(-1),
            BoundValue::Int(7),
        )
        .unwrap();
        assert_eq!((lo, hi), (BoundValue::Int(-1), BoundValue::Int(9)));
    }
}
