//! The table layout millpond declares: the partition spec
//! (HOGLAKE_PARTITION_BY) and the sort order (MILLPOND_SORT_BY).
//!
//! Both are declared once, right after the table is created, and compared
//! with the live table on every resolve ([`plan`]): a match proceeds, a table
//! without a layout gets its declaration (the recovery when creation and
//! declaration were interrupted between their two round trips), and any
//! other difference is a [`Divergence`], fatal, printed in
//! HOGLAKE_PARTITION_BY's own grammar so the fix can be pasted.

use std::fmt;

use millpond_shared::config::is_safe_identifier;

use crate::catalog::AlterOp;
use crate::partition_value::Transform;
use crate::schema::{Column, PartitionField, SortField, Table};

/// The declared sort direction and null order: ascending with nulls last,
/// the order the ingest sort stage (MILLPOND_SORT_BY) produces.
pub const SORT_DIRECTION: &str = "asc";
pub const SORT_NULL_ORDER: &str = "nulls_last";

/// One term of HOGLAKE_PARTITION_BY: a top-level column and its transform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionTerm {
    pub column: String,
    pub transform: Transform,
}

impl fmt::Display for PartitionTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.column;
        match self.transform {
            Transform::Identity => write!(f, "{c}"),
            Transform::Year => write!(f, "year({c})"),
            Transform::Month => write!(f, "month({c})"),
            Transform::Day => write!(f, "day({c})"),
            Transform::Hour => write!(f, "hour({c})"),
            Transform::Bucket(n) => write!(f, "bucket({c}, {n})"),
        }
    }
}

/// Terms joined the way HOGLAKE_PARTITION_BY is written.
pub fn render(terms: &[PartitionTerm]) -> String {
    terms
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses HOGLAKE_PARTITION_BY: comma-separated terms, each a bare column
/// (identity), `year(col)`, `month(col)`, `day(col)`, `hour(col)` or
/// `bucket(col, N)`. Anything else is an error naming the term.
pub fn parse_partition_by(text: &str) -> Result<Vec<PartitionTerm>, String> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    let mut pieces = Vec::new();
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                pieces.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    pieces.push(&text[start..]);
    for piece in pieces {
        let term = piece.trim();
        if term.is_empty() {
            return Err(format!("empty term in {text:?}"));
        }
        terms.push(parse_term(term)?);
    }
    for (i, t) in terms.iter().enumerate() {
        if terms[..i].contains(t) {
            return Err(format!("`{t}` appears twice"));
        }
    }
    Ok(terms)
}

fn parse_term(term: &str) -> Result<PartitionTerm, String> {
    const VOCABULARY: &str =
        "expected a column, year(col), month(col), day(col), hour(col) or bucket(col, N)";
    let Some(open) = term.find('(') else {
        if !is_safe_identifier(term) {
            return Err(format!("`{term}`: {VOCABULARY}"));
        }
        return Ok(PartitionTerm {
            column: term.into(),
            transform: Transform::Identity,
        });
    };
    let (name, rest) = (term[..open].trim(), &term[open + 1..]);
    let inner = rest
        .strip_suffix(')')
        .filter(|i| !i.contains('(') && !i.contains(')'))
        .ok_or_else(|| format!("`{term}`: unbalanced parentheses; {VOCABULARY}"))?;
    let args: Vec<&str> = inner.split(',').map(str::trim).collect();
    let column = args[0];
    if !is_safe_identifier(column) {
        return Err(format!(
            "`{term}`: `{column}` is not a column name; {VOCABULARY}"
        ));
    }
    let transform = match (name.to_ascii_lowercase().as_str(), &args[1..]) {
        ("year", []) => Transform::Year,
        ("month", []) => Transform::Month,
        ("day", []) => Transform::Day,
        ("hour", []) => Transform::Hour,
        ("bucket", [n]) => {
            let n: u32 = n
                .parse()
                .ok()
                .filter(|n| (1..=i32::MAX as u32).contains(n))
                .ok_or_else(|| {
                    format!("`{term}`: the bucket count must be an integer from 1 to 2^31-1")
                })?;
            Transform::Bucket(n)
        }
        _ => return Err(format!("`{term}`: {VOCABULARY}")),
    };
    Ok(PartitionTerm {
        column: column.into(),
        transform,
    })
}

/// What the writer wants the table to look like.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    /// HOGLAKE_PARTITION_BY (empty = unpartitioned).
    pub partition_by: Vec<PartitionTerm>,
    /// MILLPOND_SORT_BY (empty = no declared order).
    pub sort_by: Vec<String>,
}

/// A live layout that config does not describe: fatal, and it stays fatal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Divergence(pub String);

/// What reconciling asks for.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// Ops that declare the missing parts (empty = the table matches).
    pub ops: Vec<AlterOp>,
    /// Why a part was not declared (logged as warnings).
    pub skipped: Vec<String>,
}

fn transform_of(t: Transform) -> (String, Option<i64>) {
    match t {
        Transform::Identity => ("identity".into(), None),
        Transform::Year => ("year".into(), None),
        Transform::Month => ("month".into(), None),
        Transform::Day => ("day".into(), None),
        Transform::Hour => ("hour".into(), None),
        Transform::Bucket(n) => ("bucket".into(), Some(i64::from(n))),
    }
}

fn column_named<'a>(columns: &'a [Column], name: &str) -> Option<&'a Column> {
    columns.iter().find(|c| c.name == name)
}

fn column_with_id(columns: &[Column], id: i64) -> Option<&Column> {
    columns.iter().find(|c| c.field_id == id)
}

/// The live partition spec as HOGLAKE_PARTITION_BY terms (a source that is
/// not a top-level column prints as `field_id=N`).
fn live_partition(table: &Table) -> Vec<String> {
    let Some(spec) = &table.partition_spec else {
        return Vec::new();
    };
    spec.fields
        .iter()
        .map(|f| {
            let column = column_with_id(&table.columns, f.source_field_id)
                .map(|c| c.name.clone())
                .unwrap_or_else(|| format!("field_id={}", f.source_field_id));
            match Transform::from_field(f) {
                Ok(transform) => PartitionTerm { column, transform }.to_string(),
                Err(_) => format!("{}({column})", f.transform),
            }
        })
        .collect()
}

/// The live sort order in MILLPOND_SORT_BY's grammar, with any direction or
/// null order other than the declared one spelled out.
fn live_sort(table: &Table) -> Vec<String> {
    let Some(spec) = &table.sort_spec else {
        return Vec::new();
    };
    spec.fields
        .iter()
        .map(|f| {
            let mut s = column_with_id(&table.columns, f.source_field_id)
                .map(|c| c.name.clone())
                .unwrap_or_else(|| format!("field_id={}", f.source_field_id));
            if f.direction != SORT_DIRECTION || f.null_order != SORT_NULL_ORDER {
                s.push_str(&format!(" {} {}", f.direction, f.null_order));
            }
            s
        })
        .collect()
}

fn shown(terms: &[String]) -> String {
    if terms.is_empty() {
        "(none)".into()
    } else {
        terms.join(",")
    }
}

/// Compares the live table with `layout`. `payload_columns` says whether the
/// flush carried any payload column: a partition source missing from a
/// table created by a flush with none (only dead letters) is declared by a
/// later flush instead of being fatal.
pub fn plan(layout: &Layout, table: &Table, payload_columns: bool) -> Result<Plan, Divergence> {
    let qualified = format!("{}.{}", table.namespace, table.name);
    let mut out = Plan::default();

    let wanted: Vec<String> = layout.partition_by.iter().map(|t| t.to_string()).collect();
    let live = live_partition(table);
    if live != wanted {
        if !live.is_empty() {
            let hint = if wanted.is_empty() {
                format!("set HOGLAKE_PARTITION_BY={} to write to it", shown(&live))
            } else {
                "a live table's partition spec is not changed from config: restore HOGLAKE_PARTITION_BY or point HOGLAKE_TABLE at a new table".into()
            };
            return Err(Divergence(format!(
                "hoglake table {qualified} is partitioned by `{}` but HOGLAKE_PARTITION_BY is `{}`; {hint}",
                shown(&live),
                shown(&wanted)
            )));
        }
        let mut fields = Vec::new();
        let mut missing = Vec::new();
        for term in &layout.partition_by {
            match column_named(&table.columns, &term.column) {
                Some(c) if !term.transform.accepts(c.column_type) => {
                    return Err(Divergence(format!(
                        "HOGLAKE_PARTITION_BY term `{term}` does not apply to column `{}` of type {} in {qualified}",
                        c.name, c.column_type
                    )));
                }
                Some(c) => {
                    let (transform, transform_param) = transform_of(term.transform);
                    fields.push(PartitionField {
                        source_field_id: c.field_id,
                        transform,
                        transform_param,
                    });
                }
                None => missing.push(term.column.clone()),
            }
        }
        if !missing.is_empty() {
            if payload_columns {
                return Err(Divergence(format!(
                    "HOGLAKE_PARTITION_BY names {} but table {qualified} has no such column (columns: {}); fix HOGLAKE_PARTITION_BY",
                    missing.join(", "),
                    table.columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
                )));
            }
            out.skipped.push(format!(
                "partition spec not declared yet: {} not in {qualified}",
                missing.join(", ")
            ));
        } else {
            out.ops.push(AlterOp::SetPartitionSpec { fields });
        }
    }

    let live = live_sort(table);
    if live != layout.sort_by {
        if !live.is_empty() {
            return Err(Divergence(format!(
                "hoglake table {qualified} declares the sort order `{}` but MILLPOND_SORT_BY is `{}`; set MILLPOND_SORT_BY to match the table (ascending, nulls last) or point HOGLAKE_TABLE at a new table",
                shown(&live),
                shown(&layout.sort_by)
            )));
        }
        let found: Vec<Option<&Column>> = layout
            .sort_by
            .iter()
            .map(|n| column_named(&table.columns, n))
            .collect();
        if let Some(i) = found.iter().position(Option::is_none) {
            out.skipped.push(format!(
                "sort order not declared: MILLPOND_SORT_BY column `{}` is not in {qualified} (batches are still sorted on the columns present)",
                layout.sort_by[i]
            ));
        } else {
            out.ops.push(AlterOp::SetSortOrder {
                sort_fields: found
                    .into_iter()
                    .flatten()
                    .map(|c| SortField {
                        source_field_id: c.field_id,
                        direction: SORT_DIRECTION.into(),
                        null_order: SORT_NULL_ORDER.into(),
                    })
                    .collect(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "layout_tests.rs"]
mod tests;
