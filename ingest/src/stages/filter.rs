//! The allowlist (keep) and denylist (drop) filters, composed as
//! keep AND NOT drop, applied to each converted batch before it enters the
//! buffer. Filtered records are a deliberate choice: counted on
//! `records_skipped_total{reason}`, never dead letters.
//!
//! The allowlist fails closed: a missing column, a column type it cannot
//! compare (only integer and text columns are filterable), or a value list
//! that cannot be compared with the column drops every row
//! (`filter_field_missing`); a null drops its row the same way; a value not
//! listed is `filter_excluded`. The denylist fails open: when it cannot
//! evaluate, every row is kept and a warning says so once per pattern; nulls
//! are kept; a listed value is `filter_dropped`.
use std::collections::{HashMap, HashSet};

use arrow::array::{Array, AsArray, BooleanArray};
use arrow::datatypes::{DataType, Int64Type};
use arrow::record_batch::RecordBatch;

use crate::buffer::Decision;

pub const FIELD_MISSING: &str = "filter_field_missing";
pub const EXCLUDED: &str = "filter_excluded";
pub const DROPPED: &str = "filter_dropped";
pub const VALUE_INVALID: &str = "filter_value_invalid";

/// A configured value list: all integers, or text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Values {
    Int(Vec<i64>),
    Text(Vec<String>),
}

impl Values {
    /// Integers when every token parses as one, text otherwise; `None` for
    /// an empty token.
    pub fn parse(raw: &str) -> Option<Values> {
        let tokens: Vec<&str> = raw.split(',').map(str::trim).collect();
        if tokens.iter().any(|t| t.is_empty()) {
            return None;
        }
        let ints: Option<Vec<i64>> = tokens.iter().map(|t| t.parse().ok()).collect();
        Some(match ints {
            Some(i) => Values::Int(i),
            None => Values::Text(tokens.into_iter().map(str::to_owned).collect()),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub field: String,
    pub values: Values,
}

/// How one row compares with a list.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cell {
    Null,
    In(usize),
    Out,
}

impl Filter {
    /// Per row, or `None` when the column is missing or not comparable
    /// with the list.
    fn cells(&self, batch: &RecordBatch) -> Option<Vec<Cell>> {
        let col = batch.column_by_name(&self.field)?;
        let n = col.len();
        let lookup = |found: Option<usize>| found.map_or(Cell::Out, Cell::In);
        match (col.data_type(), &self.values) {
            (DataType::Int64, Values::Int(list)) => {
                let index: HashMap<i64, usize> =
                    list.iter().enumerate().map(|(i, v)| (*v, i)).collect();
                let a = col.as_primitive::<Int64Type>();
                Some(
                    (0..n)
                        .map(|r| {
                            if a.is_null(r) {
                                Cell::Null
                            } else {
                                lookup(index.get(&a.value(r)).copied())
                            }
                        })
                        .collect(),
                )
            }
            (DataType::Utf8 | DataType::LargeUtf8, values) => {
                // An integer list compares with text as its decimal spelling.
                let texts: Vec<String> = match values {
                    Values::Int(list) => list.iter().map(i64::to_string).collect(),
                    Values::Text(list) => list.clone(),
                };
                let index: HashMap<&str, usize> = texts
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (v.as_str(), i))
                    .collect();
                let value = |r: usize| match col.data_type() {
                    DataType::Utf8 => col.as_string::<i32>().value(r),
                    _ => col.as_string::<i64>().value(r),
                };
                Some(
                    (0..n)
                        .map(|r| {
                            if col.is_null(r) {
                                Cell::Null
                            } else {
                                lookup(index.get(value(r)).copied())
                            }
                        })
                        .collect(),
                )
            }
            // A uuid column compares the 16 bytes of each listed uuid.
            (DataType::FixedSizeBinary(16), Values::Text(list)) => {
                let index: HashMap<[u8; 16], usize> = list
                    .iter()
                    .enumerate()
                    .filter_map(|(i, v)| millpond_shared::uuid_text::parse(v).map(|b| (b, i)))
                    .collect();
                let a = col.as_fixed_size_binary();
                Some(
                    (0..n)
                        .map(|r| {
                            if a.is_null(r) {
                                Cell::Null
                            } else {
                                lookup(
                                    a.value(r)
                                        .try_into()
                                        .ok()
                                        .and_then(|b: [u8; 16]| index.get(&b).copied()),
                                )
                            }
                        })
                        .collect(),
                )
            }
            _ => None,
        }
    }

    fn label(&self, i: usize) -> String {
        match &self.values {
            Values::Int(l) => l[i].to_string(),
            Values::Text(l) => l[i].clone(),
        }
    }
}

#[derive(Debug, Default)]
pub struct Filters {
    pub keep: Option<Filter>,
    pub drop: Option<Filter>,
    /// Denylist failures already warned about: (field, column type).
    warned: HashSet<(String, String)>,
    /// The allowlist's values when a dynamic source governs them.
    live: Option<crate::stages::include::LiveValues>,
}

impl Filters {
    pub fn new(keep: Option<Filter>, drop: Option<Filter>) -> Filters {
        Filters {
            keep,
            drop,
            warned: HashSet::new(),
            live: None,
        }
    }

    /// The allowlist takes its values from `live` (authoritative mode).
    pub fn with_live_values(mut self, live: crate::stages::include::LiveValues) -> Self {
        self.live = Some(live);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.keep.is_none() && self.drop.is_none()
    }

    /// Which rows of `batch` go on, and why the others do not.
    pub fn decide(&mut self, batch: &RecordBatch) -> Decision {
        if self.is_empty() {
            return Decision::default();
        }
        let n = batch.num_rows();
        let mut keep = vec![true; n];
        let mut reasons: HashMap<&'static str, usize> = HashMap::new();
        let mut matched_at: Vec<Option<usize>> = vec![None; n];
        let live_keep = match (&self.keep, &self.live) {
            (Some(f), Some(live)) => Some(Filter {
                field: f.field.clone(),
                values: live.get(),
            }),
            (keep, _) => keep.clone(),
        };
        let mut invalid = 0;
        let keep_usable = live_keep
            .as_ref()
            .is_none_or(|f| self.check_uuid_values(batch, f, &mut invalid));
        if let (Some(_), false) = (&live_keep, keep_usable) {
            // No listed value can match a uuid column: the allowlist admits
            // nothing, under its own reason.
            keep.iter_mut().for_each(|k| *k = false);
            *reasons.entry(VALUE_INVALID).or_default() += n;
        } else if let Some(f) = &live_keep {
            match f.cells(batch) {
                None => {
                    keep.iter_mut().for_each(|k| *k = false);
                    *reasons.entry(FIELD_MISSING).or_default() += n;
                }
                Some(cells) => {
                    for (r, c) in cells.into_iter().enumerate() {
                        match c {
                            Cell::In(i) => matched_at[r] = Some(i),
                            Cell::Null => {
                                keep[r] = false;
                                *reasons.entry(FIELD_MISSING).or_default() += 1;
                            }
                            Cell::Out => {
                                keep[r] = false;
                                *reasons.entry(EXCLUDED).or_default() += 1;
                            }
                        }
                    }
                }
            }
        }
        let drop = self.drop.clone();
        let drop_usable = drop
            .as_ref()
            .is_none_or(|f| self.check_uuid_values(batch, f, &mut invalid));
        if let (Some(f), true) = (&drop, drop_usable) {
            match f.cells(batch) {
                None => {
                    let ty = batch
                        .column_by_name(&f.field)
                        .map_or_else(|| "missing".to_owned(), |c| c.data_type().to_string());
                    if self.warned.insert((f.field.clone(), ty.clone())) {
                        tracing::warn!(field = %f.field, column = %ty,
                            "denylist cannot evaluate this column; keeping every record (said once per field and type)");
                    }
                }
                Some(cells) => {
                    for (r, c) in cells.into_iter().enumerate() {
                        if keep[r] && matches!(c, Cell::In(_)) {
                            keep[r] = false;
                            *reasons.entry(DROPPED).or_default() += 1;
                        }
                    }
                }
            }
        }
        let mut matched: HashMap<usize, usize> = HashMap::new();
        if let Some(f) = &live_keep {
            for (r, m) in matched_at.iter().enumerate() {
                if let (true, Some(i)) = (keep[r], m) {
                    *matched.entry(*i).or_default() += 1;
                }
            }
            let mut matched: Vec<(String, usize)> =
                matched.into_iter().map(|(i, c)| (f.label(i), c)).collect();
            matched.sort();
            return Decision {
                keep: Some(BooleanArray::from(keep)),
                filtered: sorted(reasons),
                matched,
                invalid_values: invalid,
                ..Decision::default()
            };
        }
        Decision {
            keep: Some(BooleanArray::from(keep)),
            filtered: sorted(reasons),
            invalid_values: invalid,
            ..Decision::default()
        }
    }
}

impl Filters {
    /// On a uuid column, values that are not uuids (served by a dynamic
    /// source; static ones are refused at startup) are left out of the
    /// comparison: counted once per batch in `invalid` and warned about once
    /// per (field, set size, first offender). False when no value is left.
    fn check_uuid_values(&mut self, batch: &RecordBatch, f: &Filter, invalid: &mut usize) -> bool {
        let is_uuid = batch
            .column_by_name(&f.field)
            .is_some_and(|c| c.data_type() == &DataType::FixedSizeBinary(16));
        if !is_uuid {
            return true;
        }
        let (bad, total): (Vec<String>, usize) = match &f.values {
            Values::Int(l) => (l.iter().map(i64::to_string).collect(), l.len()),
            Values::Text(l) => (
                l.iter()
                    .filter(|v| millpond_shared::uuid_text::parse(v).is_none())
                    .cloned()
                    .collect(),
                l.len(),
            ),
        };
        if bad.is_empty() {
            return true;
        }
        *invalid += 1;
        let key = (format!("{}#{total}", f.field), bad[0].clone());
        if self.warned.insert(key) {
            tracing::warn!(field = %f.field, set_size = total, invalid = bad.len(), first = %bad[0],
                "allowlist values that are not uuids cannot match a uuid column; left out of the comparison");
        }
        bad.len() < total && matches!(f.values, Values::Text(_))
    }
}

fn sorted(m: HashMap<&'static str, usize>) -> Vec<(&'static str, usize)> {
    let mut v: Vec<_> = m.into_iter().collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
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
        // Missing column, float column, text list on an integer column: all dropped.
        for b in [
            batch(vec![(
                "other",
                Arc::new(Int64Array::from(vec![2])) as ArrayRef,
            )]),
            batch(vec![(
                "team_id",
                Arc::new(Float64Array::from(vec![2.0])) as ArrayRef,
            )]),
        ] {
            let d = fs.decide(&b);
            assert_eq!(
                (kept(&d), d.filtered),
                (vec![false], vec![(FIELD_MISSING, 1)])
            );
        }
        let mut text = Filters::new(Some(f("team_id", "2,x")), None);
        let b = batch(vec![(
            "team_id",
            Arc::new(Int64Array::from(vec![2])) as ArrayRef,
        )]);
        assert_eq!(kept(&text.decide(&b)), [false]);
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
    }

    #[test]
    fn uuid_columns_compare_bytes_and_leave_out_values_that_are_no_uuid() {
        use arrow::array::FixedSizeBinaryArray;
        let a = [0x11u8; 16];
        let b = batch(vec![(
            "u",
            Arc::new(FixedSizeBinaryArray::try_from_iter([a, [0x22; 16]].into_iter()).unwrap())
                as ArrayRef,
        )]);
        let id = millpond_shared::uuid_text::format(&a);
        let mut fs = Filters::new(Some(f("u", &format!("{id},bogus"))), None);
        let d = fs.decide(&b);
        assert_eq!((kept(&d), d.invalid_values), (vec![true, false], 1));
        let mut none_valid = Filters::new(Some(f("u", "bogus,junk")), None);
        let d = none_valid.decide(&b);
        assert_eq!(
            (kept(&d), d.filtered),
            (vec![false, false], vec![(VALUE_INVALID, 2)])
        );
        let mut deny = Filters::new(None, Some(f("u", "bogus")));
        assert_eq!(
            kept(&deny.decide(&b)),
            [true, true],
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
}
