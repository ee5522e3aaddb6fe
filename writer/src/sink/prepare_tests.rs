//! Unit tests of `prepare.rs`.
use super::*;
use arrow::array::{AsArray, Int64Array, StringArray};
use arrow::datatypes::{DataType, Int64Type};
use millpond_proto::coordinates::Coordinate;
use millpond_proto::FlushTrigger;

fn flush(cols: Vec<(&str, ArrayRef)>) -> Flush {
    let rows = cols[0].1.len();
    let at: Vec<Coordinate<'_>> = (0..rows)
        .map(|i| Coordinate {
            partition: 2,
            offset: 100 + i as i64,
            timestamp_ms: Some(7),
            key: Some(b"k"),
        })
        .collect();
    let mut all: Vec<(Field, ArrayRef)> = cols
        .into_iter()
        .map(|(n, a)| (Field::new(n, a.data_type().clone(), true), a))
        .collect();
    all.extend(coordinates::columns(at.into_iter()));
    let (fields, arrays): (Vec<_>, Vec<_>) = all.into_iter().unzip();
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), arrays).unwrap();
    Flush {
        id: "f".into(),
        trigger: FlushTrigger::Size,
        ranges: vec![OffsetRange::new("t", 2, 100, 199)],
        schema,
        batches: vec![batch],
        dead_letters: Default::default(),
        streamed: None,
    }
}

fn ints(v: Vec<Option<i64>>) -> ArrayRef {
    Arc::new(Int64Array::from(v))
}

#[test]
fn refused_names_become_dead_letters_with_coordinates() {
    let f = flush(vec![
        ("ok", ints(vec![Some(1), Some(2)])),
        (
            "$set",
            Arc::new(StringArray::from(vec![Some("{\"a\":1}"), None])),
        ),
        ("_inserted_at", ints(vec![None, Some(5)])),
        ("_millpond_x", ints(vec![Some(9), None])),
    ]);
    let p = prepare(
        &f,
        &["_inserted_at"],
        UnsafeNames::DeadLetter,
        NameCase::Insensitive,
    )
    .unwrap();
    assert_eq!(
        p.schema.fields().len(),
        1,
        "coordinates and refused names are not columns"
    );
    assert_eq!(p.unsafe_names, ["$set"]);
    assert_eq!(p.reserved_names, ["_inserted_at", "_millpond_x"]);
    assert_eq!(p.rows_with_unsafe, 1);
    let dl: Vec<_> = p
        .dead_letters
        .iter()
        .map(|l| {
            (
                l.reason.as_str(),
                l.column.as_str(),
                l.offset,
                l.original.as_slice(),
                l.topic.as_str(),
            )
        })
        .collect();
    assert_eq!(
        dl,
        [
            ("unsafe_field_name", "$set", 100, &b"{\"a\":1}"[..], "t"),
            ("reserved_field_name", "_inserted_at", 101, &b"5"[..], "t"),
            ("reserved_field_name", "_millpond_x", 100, &b"9"[..], "t"),
        ]
    );
    assert!(p
        .dead_letters
        .iter()
        .all(|l| l.key.as_deref() == Some(&b"k"[..])
            && l.partition == 2
            && l.timestamp_ms == Some(7)));
}

#[test]
fn quoted_mode_keeps_unsafe_names_as_columns() {
    let f = flush(vec![
        ("$set", ints(vec![Some(1), None])),
        ("utm-source", ints(vec![None, Some(2)])),
        ("", ints(vec![Some(3), None])),
        ("a\tb", ints(vec![Some(4), None])),
    ]);
    let p = prepare(&f, &[], UnsafeNames::Quote, NameCase::Insensitive).unwrap();
    let names: Vec<_> = p
        .schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(names, ["$set", "utm-source"]);
    assert_eq!(p.unsafe_names, ["", "a\tb"]);
    assert_eq!(p.dead_letters.len(), 2);
}

#[test]
fn case_duplicates_fold_when_they_can_and_dead_letter_otherwise() {
    let f = flush(vec![
        ("Foo", ints(vec![Some(1), None, Some(3)])),
        ("foo", ints(vec![None, Some(2), Some(30)])),
        (
            "FOO",
            Arc::new(StringArray::from(vec![Some("x"), None, None])),
        ),
    ]);
    let p = prepare(&f, &[], UnsafeNames::DeadLetter, NameCase::Insensitive).unwrap();
    assert_eq!(p.schema.fields().len(), 1);
    assert_eq!(p.schema.field(0).name(), "Foo");
    assert_eq!(p.schema.field(0).data_type(), &DataType::Int64);
    let col = p.batches[0].column(0).as_primitive::<Int64Type>();
    assert_eq!(col.iter().collect::<Vec<_>>(), [Some(1), Some(2), Some(3)]);
    let dl: Vec<_> = p
        .dead_letters
        .iter()
        .map(|l| (l.column.as_str(), l.offset, l.original.as_slice()))
        .collect();
    assert_eq!(dl, [("foo", 102, &b"30"[..]), ("FOO", 100, &b"x"[..])]);
    assert!(p
        .dead_letters
        .iter()
        .all(|l| l.reason == "duplicate_field_name"));
}

#[test]
fn a_coordinate_of_the_wrong_type_is_refused() {
    let mut f = flush(vec![("a", ints(vec![Some(1)]))]);
    let bad = RecordBatch::try_from_iter([
        ("a", ints(vec![Some(1)])),
        (
            coordinates::OFFSET,
            Arc::new(StringArray::from(vec!["x"])) as ArrayRef,
        ),
    ])
    .unwrap();
    f.schema = bad.schema();
    f.batches = vec![bad];
    let e = prepare(&f, &[], UnsafeNames::DeadLetter, NameCase::Insensitive).unwrap_err();
    assert!(e.message.contains(coordinates::OFFSET), "{}", e.message);
}
