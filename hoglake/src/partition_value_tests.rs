//! Unit tests of `partition_value.rs`.
use std::sync::Arc;

use arrow::array::{
    BinaryArray, Date32Array, Float64Array, Int32Array, Int64Array, StringArray,
    TimestampMicrosecondArray, TimestampNanosecondArray,
};

use super::*;

fn values(array: ArrayRef, t: ColumnType, transform: Transform) -> Vec<Option<String>> {
    transform_values(&array, t, transform).unwrap()
}

fn strings(v: &[Option<&str>]) -> Vec<Option<String>> {
    v.iter().map(|s| s.map(str::to_string)).collect()
}

const JAN5_NOON: i64 = 1_767_614_400_000_000; // 2026-01-05T12:00:00

#[test]
fn temporal_transforms_are_epoch_relative_and_floored() {
    let ts: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![
        Some(JAN5_NOON),
        Some(-1),
        None,
    ]));
    assert_eq!(
        values(ts.clone(), ColumnType::Timestamp, Transform::Year),
        strings(&[Some("56"), Some("-1"), None])
    );
    assert_eq!(
        values(ts.clone(), ColumnType::Timestamp, Transform::Month),
        strings(&[Some("672"), Some("-1"), None])
    );
    assert_eq!(
        values(ts.clone(), ColumnType::Timestamp, Transform::Day),
        strings(&[Some("20458"), Some("-1"), None])
    );
    assert_eq!(
        values(ts, ColumnType::Timestamp, Transform::Hour),
        strings(&[Some("491004"), Some("-1"), None])
    );
    let ns: ArrayRef = Arc::new(TimestampNanosecondArray::from(vec![JAN5_NOON * 1000 - 1]));
    assert_eq!(
        values(ns, ColumnType::TimestampNs, Transform::Hour),
        strings(&[Some("491003")])
    );
    let dates: ArrayRef = Arc::new(Date32Array::from(vec![20458, -1]));
    assert_eq!(
        values(dates, ColumnType::Date, Transform::Month),
        strings(&[Some("672"), Some("-1")])
    );
}

/// Iceberg's bucket examples through the transform (bucket[100]).
#[test]
fn bucket_values() {
    let ints: ArrayRef = Arc::new(Int32Array::from(vec![34]));
    let longs: ArrayRef = Arc::new(Int64Array::from(vec![34]));
    assert_eq!(
        values(ints, ColumnType::Int, Transform::Bucket(100)),
        strings(&[Some("79")])
    );
    assert_eq!(
        values(longs, ColumnType::Long, Transform::Bucket(100)),
        strings(&[Some("79")])
    );
    let s: ArrayRef = Arc::new(StringArray::from(vec!["iceberg"]));
    assert_eq!(
        values(s, ColumnType::String, Transform::Bucket(100)),
        strings(&[Some("89")])
    );
    let uuid = uuid::Uuid::parse_str("f79c3e09-677c-4bbd-a479-3f349cb785e7").unwrap();
    let u: ArrayRef =
        Arc::new(FixedSizeBinaryArray::try_from_iter([uuid.as_bytes()].into_iter()).unwrap());
    assert_eq!(
        values(u, ColumnType::Uuid, Transform::Bucket(100)),
        strings(&[Some("40")])
    );
    let d: ArrayRef = Arc::new(
        Decimal128Array::from(vec![1420])
            .with_precision_and_scale(4, 2)
            .unwrap(),
    );
    // -500754589 & i32::MAX = 1646729059
    assert_eq!(
        values(d, ColumnType::Decimal, Transform::Bucket(100)),
        strings(&[Some("59")])
    );
}

#[test]
fn identity_strings() {
    let f: ArrayRef = Arc::new(Float64Array::from(vec![1.5, -0.0, f64::INFINITY]));
    assert_eq!(
        values(f, ColumnType::Double, Transform::Identity),
        strings(&[Some("1.5"), Some("-0.0"), Some("inf")])
    );
    let b: ArrayRef = Arc::new(BooleanArray::from(vec![true, false]));
    assert_eq!(
        values(b, ColumnType::Boolean, Transform::Identity),
        strings(&[Some("true"), Some("false")])
    );
    let ts: ArrayRef =
        Arc::new(TimestampMicrosecondArray::from(vec![JAN5_NOON]).with_timezone("UTC"));
    assert_eq!(
        values(ts, ColumnType::Timestamptz, Transform::Identity),
        strings(&[Some("2026-01-05T12:00:00+00:00")])
    );
    let ns: ArrayRef = Arc::new(TimestampNanosecondArray::from(vec![5]));
    assert_eq!(
        values(ns, ColumnType::TimestampNs, Transform::Identity),
        strings(&[Some("5")])
    );
    let bin: ArrayRef = Arc::new(BinaryArray::from(vec![&b"\x00\x01"[..]]));
    assert_eq!(
        values(bin, ColumnType::Binary, Transform::Identity),
        strings(&[Some("AAE=")])
    );
    let d: ArrayRef = Arc::new(
        Decimal128Array::from(vec![150])
            .with_precision_and_scale(10, 2)
            .unwrap(),
    );
    assert_eq!(
        values(d, ColumnType::Decimal, Transform::Identity),
        strings(&[Some("1.50")])
    );
    let uuid = uuid::Uuid::parse_str("F79C3E09-677C-4BBD-A479-3F349CB785E7").unwrap();
    let u: ArrayRef =
        Arc::new(FixedSizeBinaryArray::try_from_iter([uuid.as_bytes()].into_iter()).unwrap());
    assert_eq!(
        values(u, ColumnType::Uuid, Transform::Identity),
        strings(&[Some("f79c3e09-677c-4bbd-a479-3f349cb785e7")])
    );
}

#[test]
fn transform_source_rules() {
    assert!(!Transform::Bucket(4).accepts(ColumnType::Double));
    assert!(!Transform::Bucket(4).accepts(ColumnType::TimestampNs));
    assert!(!Transform::Hour.accepts(ColumnType::Date));
    assert!(Transform::Year.accepts(ColumnType::TimestampNs));
    assert!(Transform::Identity.accepts(ColumnType::Json));
    assert!(!Transform::Identity.accepts(ColumnType::List));
    let f = |t: &str, p| PartitionField {
        source_field_id: 1,
        transform: t.into(),
        transform_param: p,
    };
    assert_eq!(
        Transform::from_field(&f("bucket", Some(4))).unwrap(),
        Transform::Bucket(4)
    );
    assert!(Transform::from_field(&f("bucket", None)).is_err());
    assert!(Transform::from_field(&f("bucket", Some(0))).is_err());
    assert!(Transform::from_field(&f("truncate", Some(3))).is_err());
}
