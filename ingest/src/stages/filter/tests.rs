//! Filters over built batches.
use super::*;
use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray};
use proptest::prelude::*;
use std::sync::Arc;

fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(cols).unwrap()
}

fn f(field: &str, raw: &str) -> Filter {
    Filter {
        field: field.into(),
        values: Values::parse(raw).unwrap(),
    }
}

fn kept(d: &Decision) -> Vec<bool> {
    d.keep
        .as_ref()
        .unwrap()
        .iter()
        .map(|k| k.unwrap())
        .collect()
}

#[test]
fn values_auto_detect_integers_or_text() {
    assert_eq!(
        Values::parse("2, 4,1956"),
        Some(Values::Int(vec![2, 4, 1956]))
    );
    assert_eq!(
        Values::parse("2,x"),
        Some(Values::Text(vec!["2".into(), "x".into()]))
    );
    assert_eq!(Values::parse("2,,3"), None);
}

#[test]
fn keep_fails_closed_with_its_reasons() {
    let b = batch(vec![(
        "team_id",
        Arc::new(Int64Array::from(vec![
            Some(2),
            Some(3),
            None,
            Some(4),
            Some(2),
        ])),
    )]);
    let mut fs = Filters::new(Some(f("team_id", "2,4")), None);
    let d = fs.decide(&b);
    assert_eq!(kept(&d), [true, false, false, true, true]);
    assert_eq!(d.filtered, [(EXCLUDED, 1), (FIELD_MISSING, 1)]);
    assert_eq!(d.matched, [("2".into(), 2), ("4".into(), 1)]);
    // A missing column, and a type no list compares with: field missing.
    for b in [
        batch(vec![(
            "other",
            Arc::new(Int64Array::from(vec![2])) as ArrayRef,
        )]),
        batch(vec![(
            "team_id",
            Arc::new(TimestampMicrosecondArray::from(vec![2])) as ArrayRef,
        )]),
    ] {
        let d = fs.decide(&b);
        assert_eq!(
            (kept(&d), d.filtered),
            (vec![false], vec![(FIELD_MISSING, 1)])
        );
    }
}

#[test]
fn a_cell_compares_as_its_value_whatever_the_column_type() {
    // The listed 2 is the float 2.0; a mixed list's numbers are numbers.
    let b = batch(vec![(
        "team_id",
        Arc::new(Float64Array::from(vec![2.0, 2.5])) as ArrayRef,
    )]);
    let d = Filters::new(Some(f("team_id", "2,4")), None).decide(&b);
    assert_eq!(
        (kept(&d), d.matched),
        (vec![true, false], vec![("2".into(), 1)])
    );
    let b = batch(vec![(
        "team_id",
        Arc::new(Int64Array::from(vec![2, 3])) as ArrayRef,
    )]);
    let d = Filters::new(Some(f("team_id", "2,x")), None).decide(&b);
    assert_eq!(kept(&d), [true, false]);
}

#[test]
fn integer_lists_match_text_columns_by_spelling() {
    let b = batch(vec![(
        "t",
        Arc::new(StringArray::from(vec!["2", "02", "x"])) as ArrayRef,
    )]);
    let d = Filters::new(Some(f("t", "2")), None).decide(&b);
    assert_eq!(kept(&d), [true, false, false]);
}

#[test]
fn drop_fails_open_and_keeps_nulls() {
    let b = batch(vec![(
        "t",
        Arc::new(Int64Array::from(vec![Some(1), None, Some(9)])) as ArrayRef,
    )]);
    let d = Filters::new(None, Some(f("t", "9"))).decide(&b);
    assert_eq!(
        (kept(&d), d.filtered),
        (vec![true, true, false], vec![(DROPPED, 1)])
    );
    let d = Filters::new(None, Some(f("missing", "9"))).decide(&b);
    assert_eq!((kept(&d), d.filtered), (vec![true, true, true], vec![]));
    let b = batch(vec![(
        "t",
        Arc::new(TimestampMicrosecondArray::from(vec![Some(9), None])) as ArrayRef,
    )]);
    let d = Filters::new(None, Some(f("t", "9"))).decide(&b);
    assert_eq!((kept(&d), d.filtered), (vec![true, true], vec![]));
}

#[test]
fn uuid_columns_compare_bytes_and_leave_out_values_that_are_no_uuid() {
    use arrow::array::FixedSizeBinaryArray;
    let a = [0x11u8; 16];
    let b = batch(vec![(
        "u",
        Arc::new(
            FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                [Some(a), Some([0x22; 16]), None].into_iter(),
                16,
            )
            .unwrap(),
        ) as ArrayRef,
    )]);
    let id = millpond_shared::uuid_text::format(&a);
    let mut fs = Filters::new(Some(f("u", &format!("{id},bogus"))), None);
    let d = fs.decide(&b);
    assert_eq!((kept(&d), d.invalid_values), (vec![true, false, false], 1));
    let mut none_valid = Filters::new(Some(f("u", "bogus,junk")), None);
    let d = none_valid.decide(&b);
    // A null is a missing field, as it is in a batch without the column.
    assert_eq!(
        (kept(&d), d.filtered),
        (
            vec![false, false, false],
            vec![(FIELD_MISSING, 1), (VALUE_INVALID, 2)]
        )
    );
    let mut deny = Filters::new(None, Some(f("u", "bogus")));
    assert_eq!(
        kept(&deny.decide(&b)),
        [true, true, true],
        "the denylist denies nothing"
    );
}

proptest! {
    /// keep AND NOT drop, against a plain model.
    #[test]
    fn composition_matches_the_model(
        rows in proptest::collection::vec(proptest::option::of(0..6i64), 0..50),
        keep in proptest::collection::btree_set(0..6i64, 1..4),
        drop in proptest::collection::btree_set(0..6i64, 1..3),
    ) {
        let list = |s: &std::collections::BTreeSet<i64>| s.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        let b = batch(vec![("t", Arc::new(Int64Array::from(rows.clone())) as ArrayRef)]);
        let mut fs = Filters::new(Some(f("t", &list(&keep))), Some(f("t", &list(&drop))));
        let d = fs.decide(&b);
        let want: Vec<bool> = rows.iter().map(|v| v.is_some_and(|v| keep.contains(&v) && !drop.contains(&v))).collect();
        prop_assert_eq!(kept(&d), want.clone());
        let gone: usize = d.filtered.iter().map(|(_, n)| n).sum();
        prop_assert_eq!(gone + want.iter().filter(|k| **k).count(), rows.len());
    }
}
