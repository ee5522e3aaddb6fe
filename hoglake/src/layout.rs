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
mod tests {
    use super::*;
    use crate::schema::{ColumnType, PartitionSpec, SortSpec};

    fn table(partition: Option<Vec<PartitionField>>, sort: Option<Vec<SortField>>) -> Table {
        let col = |name: &str, t: ColumnType, id: i64| Column {
            name: name.into(),
            column_type: t,
            nullable: true,
            field_id: id,
            ordinal: id,
            type_params: None,
            children: None,
            comment: None,
        };
        Table {
            name: "events".into(),
            namespace: "ns".into(),
            table_uuid: "u".into(),
            columns: vec![
                col("team_id", ColumnType::Long, 1),
                col("event", ColumnType::String, 2),
                col("_inserted_at", ColumnType::Timestamptz, 3),
            ],
            read_snapshot_id: Some(1),
            snapshot_id: None,
            partition_spec: partition.map(|fields| PartitionSpec { spec_id: 1, fields }),
            sort_spec: sort.map(|fields| SortSpec { sort_id: 1, fields }),
            comment: None,
        }
    }

    fn pf(id: i64, t: &str, p: Option<i64>) -> PartitionField {
        PartitionField {
            source_field_id: id,
            transform: t.into(),
            transform_param: p,
        }
    }

    fn sf(id: i64) -> SortField {
        SortField {
            source_field_id: id,
            direction: SORT_DIRECTION.into(),
            null_order: SORT_NULL_ORDER.into(),
        }
    }

    fn layout(partition: &str, sort: &[&str]) -> Layout {
        Layout {
            partition_by: if partition.is_empty() {
                vec![]
            } else {
                parse_partition_by(partition).unwrap()
            },
            sort_by: sort.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn the_grammar_parses_and_renders_back() {
        let text = "team_id,year(_inserted_at),month(ts),day(ts),hour(ts),bucket(user_id, 16)";
        let terms = parse_partition_by(text).unwrap();
        assert_eq!(terms.len(), 6);
        assert_eq!(terms[5].transform, Transform::Bucket(16));
        assert_eq!(render(&terms), text);
        assert_eq!(
            render(&parse_partition_by(" DAY( ts ) , bucket(x,4)").unwrap()),
            "day(ts),bucket(x, 4)"
        );
    }

    #[test]
    fn terms_outside_the_vocabulary_are_refused_by_name() {
        for (text, needle) in [
            ("week(ts)", "week(ts)"),
            ("bucket(x)", "bucket(x)"),
            ("bucket(x, 0)", "bucket count"),
            ("bucket(x, -3)", "bucket count"),
            ("truncate(x, 4)", "truncate"),
            ("a,,b", "empty term"),
            ("year(ts", "unbalanced"),
            ("day(a-b)", "not a column"),
            ("x y", "x y"),
            ("a,a", "twice"),
        ] {
            let err = parse_partition_by(text).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn a_new_table_gets_one_declaration_and_a_matching_one_none() {
        let want = layout("team_id,day(_inserted_at),bucket(event, 8)", &["team_id"]);
        let p = plan(&want, &table(None, None), true).unwrap();
        assert_eq!(
            p.ops,
            vec![
                AlterOp::SetPartitionSpec {
                    fields: vec![
                        pf(1, "identity", None),
                        pf(3, "day", None),
                        pf(2, "bucket", Some(8))
                    ]
                },
                AlterOp::SetSortOrder {
                    sort_fields: vec![sf(1)]
                }
            ]
        );
        let live = table(
            Some(vec![
                pf(1, "identity", None),
                pf(3, "day", None),
                pf(2, "bucket", Some(8)),
            ]),
            Some(vec![sf(1)]),
        );
        assert_eq!(plan(&want, &live, true).unwrap(), Plan::default());
        assert_eq!(
            plan(&Layout::default(), &table(None, None), true).unwrap(),
            Plan::default()
        );
    }

    #[test]
    fn divergence_is_fatal_and_prints_the_live_spec_in_the_grammar() {
        let live = table(
            Some(vec![pf(1, "identity", None), pf(2, "bucket", Some(8))]),
            None,
        );
        let changed_count = plan(&layout("team_id,bucket(event, 16)", &[]), &live, true)
            .unwrap_err()
            .0;
        assert!(
            changed_count.contains("partitioned by `team_id,bucket(event, 8)`")
                && changed_count.contains("HOGLAKE_PARTITION_BY is `team_id,bucket(event, 16)`"),
            "{changed_count}"
        );
        let unset = plan(&Layout::default(), &live, true).unwrap_err().0;
        assert!(
            unset.contains("set HOGLAKE_PARTITION_BY=team_id,bucket(event, 8)"),
            "{unset}"
        );
        let sorted = table(None, Some(vec![sf(2)]));
        let err = plan(&layout("", &["team_id"]), &sorted, true)
            .unwrap_err()
            .0;
        assert!(err.contains("sort order `event`"), "{err}");
        let mut desc = sf(1);
        desc.direction = "desc".into();
        let err = plan(&Layout::default(), &table(None, Some(vec![desc])), true)
            .unwrap_err()
            .0;
        assert!(err.contains("`team_id desc nulls_last`"), "{err}");
    }

    #[test]
    fn missing_columns_are_fatal_for_partitions_and_skipped_for_sorting() {
        let err = plan(&layout("month(ts)", &[]), &table(None, None), true).unwrap_err();
        assert!(err.0.contains("names ts"), "{err}");
        // A flush of dead letters only creates no spec and is not fatal.
        let p = plan(&layout("month(ts)", &[]), &table(None, None), false).unwrap();
        assert!(p.ops.is_empty() && p.skipped.len() == 1);
        let p = plan(&layout("", &["team_id", "nope"]), &table(None, None), true).unwrap();
        assert!(p.ops.is_empty());
        assert!(p.skipped[0].contains("`nope`"), "{:?}", p.skipped);
        let err = plan(&layout("hour(team_id)", &[]), &table(None, None), true).unwrap_err();
        assert!(err.0.contains("does not apply"), "{err}");
    }
}
