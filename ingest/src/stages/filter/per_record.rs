//! Through conversion: a record's fate does not depend on how records were
//! cut into consume batches. The converter types a column per batch, so
//! these run the real stages ([`Stages::process`]) on JSON payloads.
use std::collections::{BTreeMap, BTreeSet};

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use millpond_proto::coordinates;
use proptest::prelude::*;

use super::{Filter, Values, DROPPED, EXCLUDED, FIELD_MISSING};
use crate::kafka::Record;
use crate::stages::coerce::{Coercion, PinType};
use crate::stages::{StageConfig, Stages};

/// What the stages made of a run of records.
#[derive(Debug, Default, PartialEq, Eq)]
struct Outcome {
    kept: BTreeSet<i64>,
    filtered: BTreeMap<&'static str, usize>,
    matched: BTreeMap<String, usize>,
}

struct Setup<'a> {
    keep: Option<&'a str>,
    drop: Option<&'a str>,
    pin: Option<PinType>,
}

impl Setup<'_> {
    fn stages(&self) -> Stages {
        let filter = |raw: Option<&str>| {
            raw.map(|raw| Filter {
                field: "team_id".into(),
                values: Values::parse(raw).expect("a value list"),
            })
        };
        Stages::new(&StageConfig {
            keep: filter(self.keep),
            drop: filter(self.drop),
            coercion: Coercion {
                pins: self
                    .pin
                    .map(|p| ("team_id".into(), p))
                    .into_iter()
                    .collect(),
            },
            ..StageConfig::default()
        })
    }

    /// Runs `payloads` (offset = index) in consume batches that end where
    /// `cut_after` says.
    fn run(&self, payloads: &[String], cut_after: impl Fn(usize) -> bool) -> Outcome {
        let mut stages = self.stages();
        let mut out = Outcome::default();
        let records: Vec<Record<'_>> = payloads
            .iter()
            .enumerate()
            .map(|(offset, p)| Record {
                partition: 0,
                offset: offset as i64,
                timestamp_ms: None,
                key: None,
                payload: Some(p.as_bytes()),
            })
            .collect();
        let mut start = 0;
        for end in 1..=records.len() {
            if end < records.len() && !cut_after(end - 1) {
                continue;
            }
            let added = stages.process("t", &records[start..end]);
            start = end;
            for (reason, n) in added.filtered {
                *out.filtered.entry(reason).or_default() += n;
            }
            for (value, n) in added.matched {
                *out.matched.entry(value).or_default() += n;
            }
        }
        for b in stages.drain() {
            let offsets = b.column_by_name(coordinates::OFFSET).expect("offsets");
            out.kept
                .extend(offsets.as_primitive::<Int64Type>().values().iter().copied());
        }
        out
    }

    /// The outcome of `payloads` as one batch, asserted equal to that of
    /// one record per batch.
    fn check(&self, payloads: &[String]) -> Outcome {
        let whole = self.run(payloads, |_| false);
        assert_eq!(whole, self.run(payloads, |_| true), "{payloads:?}");
        whole
    }
}

fn keep(raw: &str) -> Setup<'_> {
    Setup {
        keep: Some(raw),
        drop: None,
        pin: None,
    }
}

fn drop(raw: &str) -> Setup<'_> {
    Setup {
        keep: None,
        drop: Some(raw),
        pin: None,
    }
}

/// `{"team_id": v}` for each JSON text `v` (`None`: no key).
fn records(values: &[Option<&str>]) -> Vec<String> {
    values
        .iter()
        .map(|v| match v {
            Some(v) => format!(r#"{{"k":1,"team_id":{v}}}"#),
            None => r#"{"k":1}"#.to_owned(),
        })
        .collect()
}

/// `n` records of `v` with one `odd` at `at`.
fn one_odd(n: usize, v: &str, odd: &str, at: usize) -> Vec<String> {
    let values: Vec<Option<&str>> = (0..n)
        .map(|i| Some(if i == at { odd } else { v }))
        .collect();
    records(&values)
}

fn set(offsets: impl IntoIterator<Item = i64>) -> BTreeSet<i64> {
    offsets.into_iter().collect()
}

#[test]
fn one_float_neighbour_changes_no_integer_record() {
    // The issue's reproduction: a 1.5 made the batch's column Float64.
    let got = keep("1").check(&one_odd(1000, "1", "1.5", 500));
    assert_eq!(got.kept, set((0..1000).filter(|&i| i != 500)));
    assert_eq!(got.filtered, BTreeMap::from([(EXCLUDED, 1)]));
    assert_eq!(got.matched, BTreeMap::from([("1".to_owned(), 999)]));
    let got = drop("2").check(&one_odd(1000, "2", "0.5", 500));
    assert_eq!(got.kept, set([500]));
    assert_eq!(got.filtered, BTreeMap::from([(DROPPED, 999)]));
}

#[test]
fn integers_written_as_floats_are_those_integers() {
    let got = keep("1").check(&records(&[
        Some("1"),
        Some("1.0"),
        Some("1e0"),
        Some("1.5"),
    ]));
    assert_eq!(got.kept, set([0, 1, 2]));
    let got = drop("1").check(&records(&[Some("1.0"), Some("10e-1"), Some("2")]));
    assert_eq!(got.kept, set([2]));
    // A listed float matches the integer it equals, and no rounding.
    let got = keep("1.0,0.1").check(&records(&[
        Some("1"),
        Some("0.1"),
        Some("0.1000000000000000055511151231257827"),
        Some("2"),
    ]));
    assert_eq!(got.kept, set([0, 1]));
}

#[test]
fn strings_that_are_numbers_compare_as_numbers() {
    // Strings make the column text; "1" and "1.0" are 1, "02" is not 2.
    let got = keep("1,2").check(&records(&[
        Some("1"),
        Some(r#""1""#),
        Some(r#""1.0""#),
        Some(r#""02""#),
        Some("2"),
        Some(r#""x""#),
    ]));
    assert_eq!(got.kept, set([0, 1, 2, 4]));
    assert_eq!(got.filtered, BTreeMap::from([(EXCLUDED, 2)]));
    let got = keep("02,x").check(&records(&[Some(r#""02""#), Some("2"), Some(r#""x""#)]));
    assert_eq!(got.kept, set([0, 2]));
}

#[test]
fn booleans_compare_as_their_spelling() {
    let values = [Some("true"), Some("false"), Some(r#""true""#), Some("1")];
    assert_eq!(keep("true").check(&records(&values)).kept, set([0, 2]));
    assert_eq!(drop("false").check(&records(&values)).kept, set([0, 2, 3]));
    // A batch of booleans only is a Boolean column.
    let got = keep("true,x").check(&records(&[Some("true"), Some("false")]));
    assert_eq!(got.kept, set([0]));
}

#[test]
fn a_mixed_list_matches_numbers_and_text() {
    let got = keep("1,x").check(&records(&[Some("1"), Some("2"), Some("1"), Some("1.0")]));
    assert_eq!(got.kept, set([0, 2, 3]));
    assert_eq!(
        got.matched,
        BTreeMap::from([("1".to_owned(), 3)]),
        "the label is the listed token"
    );
    let got = drop("1,x").check(&records(&[Some("1"), Some(r#""x""#), Some("2")]));
    assert_eq!(got.kept, set([2]));
}

#[test]
fn a_mixed_column_decides_each_record_by_its_value() {
    let values = [
        Some("1"),
        Some(r#""x""#),
        Some(r#"{"a":1}"#),
        Some("[1]"),
        Some("null"),
        None,
        Some("18446744073709551616"),
        Some("true"),
    ];
    let got = keep("1,x,18446744073709551616").check(&records(&values));
    assert_eq!(got.kept, set([0, 1, 6]));
    assert_eq!(
        got.filtered,
        BTreeMap::from([(EXCLUDED, 3), (FIELD_MISSING, 2)])
    );
    let got = drop("1,x").check(&records(&values));
    assert_eq!(got.kept, set([2, 3, 4, 5, 6, 7]));
}

#[test]
fn a_pinned_type_no_list_compares_with_decides_per_record() {
    let values = [Some(r#""2024-01-01T00:00:00Z""#), Some("1"), None];
    let pinned = |keep, drop| Setup {
        keep,
        drop,
        pin: Some(PinType::Timestamptz),
    };
    let got = pinned(Some("1"), None).check(&records(&values));
    assert_eq!(
        (got.kept, got.filtered),
        (set([]), BTreeMap::from([(FIELD_MISSING, 3)]))
    );
    assert_eq!(
        pinned(None, Some("1")).check(&records(&values)).kept,
        set([0, 1, 2])
    );
}

/// JSON texts of `team_id` (`None`: no key), mixing every kind the
/// converter types differently.
const VALUES: &[Option<&str>] = &[
    None,
    Some("null"),
    Some("0"),
    Some("1"),
    Some("2"),
    Some("-0"),
    Some("1.0"),
    Some("1e0"),
    Some("1.5"),
    Some("-0.0"),
    Some("9007199254740993"),
    Some("9007199254740993.0"),
    Some("18446744073709551616"),
    Some("true"),
    Some("false"),
    Some(r#""1""#),
    Some(r#""1.0""#),
    Some(r#""02""#),
    Some(r#""x""#),
    Some(r#""true""#),
    Some(r#""f79c3e09-677c-4bbd-a479-3f349cb785e7""#),
    Some(r#""2024-01-01T00:00:00Z""#),
    Some("[1]"),
    Some(r#"{"a":1}"#),
];

/// Listed tokens.
const TOKENS: &[&str] = &[
    "0",
    "1",
    "2",
    "-0",
    "1.0",
    "1.5",
    "1e0",
    "02",
    "x",
    "true",
    "false",
    "9007199254740993",
    "18446744073709551616",
    "f79c3e09-677c-4bbd-a479-3f349cb785e7",
];

fn list() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(
        proptest::sample::subsequence(TOKENS, 1..4)
            .prop_shuffle()
            .prop_map(|t| t.join(",")),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Any records, any cut into consume batches: the same records kept,
    /// the same filtered and matched counts as one record per batch.
    #[test]
    fn a_records_fate_does_not_depend_on_the_cut(
        picks in proptest::collection::vec(0..VALUES.len(), 1..40),
        cuts in proptest::collection::vec(any::<bool>(), 40),
        keep in list(),
        drop in list(),
        pin in proptest::option::of(proptest::sample::select(PinType::NAMES.to_vec())),
    ) {
        let values: Vec<Option<&str>> = picks.iter().map(|&i| VALUES[i]).collect();
        let payloads = records(&values);
        let setup = Setup {
            keep: keep.as_deref(),
            drop: drop.as_deref(),
            pin: pin.and_then(PinType::parse),
        };
        let cut = setup.run(&payloads, |i| cuts[i]);
        let alone = setup.run(&payloads, |_| true);
        prop_assert_eq!(cut, alone);
    }
}
