//! Unit tests of `layout.rs`.
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
