//! Unit tests of the publish path: keys, schema union, stamping, orphans.
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, TimestampMicrosecondArray};
use millpond_proto::OffsetRange;

use super::orphans::OrphanCounts;
use super::prepare::{stamp, union_schema};
use super::*;

fn range(topic: &str, partition: i32, first: i64, last: i64) -> OffsetRange {
    OffsetRange::new(topic, partition, first, last)
}

#[test]
fn keys_name_the_incarnation_and_the_complete_ranges() {
    let a = [range("t", 0, 0, 9), range("t", 1, 5, 7)];
    let reordered = [range("t", 1, 5, 7), range("t", 0, 0, 9)];
    let k = idempotency_key("u1", &a);
    assert_eq!(k, idempotency_key("u1", &reordered));
    assert_eq!(k.get_version_num(), 5);
    assert_ne!(
        k,
        idempotency_key("u2", &a),
        "a recreated table must get a new key"
    );
    assert_ne!(k, idempotency_key("u1", &a[..1]), "every range counts");
    assert_ne!(
        k,
        idempotency_key("u1", &[range("t", 0, 0, 10), range("t", 1, 5, 7)])
    );
    // Stable across builds: a changed derivation would break replays.
    assert_eq!(k, idempotency_key("u1", &a));
}

/// The key is pinned (a changed derivation would break replays across
/// versions) and names only the coordinates, not the last record's
/// fingerprint a range may carry.
#[test]
fn keys_are_pinned_and_ignore_the_last_record_fingerprint() {
    let a = [range("t", 0, 0, 9), range("t", 1, 5, 7)];
    let k = idempotency_key("u1", &a);
    assert_eq!(k.to_string(), "f8786756-7508-5898-b068-2d9777c2683d");
    let mut fingerprinted = a.clone();
    fingerprinted[0].last_timestamp_ms = Some(1_700_000_000_000);
    fingerprinted[0].last_checksum = Some(42);
    assert_eq!(idempotency_key("u1", &fingerprinted), k);
    let twice = [a[0].clone(), fingerprinted[0].clone(), a[1].clone()];
    assert_eq!(idempotency_key("u1", &twice), k, "duplicates count once");
}

#[test]
fn union_schema_keeps_every_column_once() {
    use arrow::array::Int64Array;
    let a =
        RecordBatch::try_from_iter(vec![("x", Arc::new(Int64Array::from(vec![1])) as ArrayRef)])
            .unwrap();
    let b = RecordBatch::try_from_iter(vec![
        ("y", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
        ("x", Arc::new(Int64Array::from(vec![2])) as ArrayRef),
    ])
    .unwrap();
    let names: Vec<String> = union_schema(&[a, b])
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["x", "y"]);
}

#[test]
fn stamp_replaces_inserted_at_with_one_instant() {
    use arrow::array::{Array, Int64Array, StringArray};
    let batch = RecordBatch::try_from_iter(vec![
        ("a", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
        (
            INSERTED_AT,
            Arc::new(StringArray::from(vec!["x", "y"])) as ArrayRef,
        ),
    ])
    .unwrap();
    let out = stamp(&batch, 42).unwrap();
    assert_eq!(out.num_columns(), 2);
    let col = out.column_by_name(INSERTED_AT).unwrap();
    let ts = col
        .as_any()
        .downcast_ref::<TimestampMicrosecondArray>()
        .unwrap();
    assert_eq!(ts.values().as_ref(), &[42, 42]);
    assert_eq!(ts.timezone(), Some("UTC"));
}

#[test]
fn orphan_counts_add_up_per_reason() {
    let mut o = OrphanCounts::default();
    o.add("commit_refused", &["s3://b/x".into(), "s3://b/y".into()]);
    o.add("table_recreated", &["s3://b/z".into()]);
    o.add("commit_refused", &[]);
    assert_eq!(o.get("commit_refused"), 2);
    assert_eq!(o.get("table_recreated"), 1);
    assert_eq!(o.total(), 3);
}
