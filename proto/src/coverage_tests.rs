use super::*;

fn r(p: i32, a: i64, b: i64) -> OffsetRange {
    OffsetRange::new("t", p, a, b)
}

/// A resend is the range recorded last ending at the same record: the
/// same range ending at another record (a file replayed under the
/// pipeline's topic, a recreated topic) is another cut of the log.
#[test]
fn a_resend_ends_at_the_record_recorded() {
    let at = |checksum| {
        r(0, 0, 9).with_last_record(Some(crate::LastRecord {
            timestamp_ms: Some(5),
            checksum,
        }))
    };
    assert_eq!(coverage(&[at(1)], &[at(1)]), Coverage::AlreadyRecorded);
    assert!(matches!(coverage(&[at(1)], &[at(2)]), Coverage::Overlap(_)));
    assert!(matches!(
        coverage(&[at(1)], &[r(0, 0, 9)]),
        Coverage::Overlap(_)
    ));
    assert!(matches!(
        coverage(&[r(0, 0, 9)], &[at(1)]),
        Coverage::Overlap(_)
    ));
}

#[test]
fn coverage_cases() {
    assert_eq!(coverage(&[r(0, 0, 9)], &[]), Coverage::New);
    assert_eq!(coverage(&[r(0, 10, 19)], &[r(0, 0, 9)]), Coverage::New);
    assert_eq!(
        coverage(&[r(0, 0, 9)], &[r(0, 0, 9)]),
        Coverage::AlreadyRecorded
    );
    assert_eq!(
        coverage(&[r(0, 0, 9), r(1, 0, 4)], &[r(0, 0, 9), r(1, 0, 4)]),
        Coverage::AlreadyRecorded
    );
    assert!(matches!(
        coverage(&[r(0, 5, 15)], &[r(0, 0, 9)]),
        Coverage::Overlap(_)
    ));
    assert!(matches!(
        coverage(&[r(0, 0, 9), r(1, 0, 4)], &[r(0, 0, 9)]),
        Coverage::Overlap(_)
    ));
}

/// The reference: each partition's offsets as sets. A flush is a resend
/// when every partition's offsets equal the recorded ones, new when each
/// lies wholly after what is recorded, and an overlap otherwise.
fn model(flush: &[OffsetRange], recorded: &[OffsetRange]) -> &'static str {
    use std::collections::BTreeSet;
    let set = |r: &OffsetRange| (r.first..=r.last).collect::<BTreeSet<i64>>();
    let (mut resend, mut new) = (0, 0);
    for f in flush {
        let rec = recorded
            .iter()
            .find(|x| x.topic == f.topic && x.partition == f.partition)
            .map(set)
            .unwrap_or_default();
        let mine = set(f);
        if !rec.is_empty() && rec == mine {
            resend += 1;
        } else if rec
            .last()
            .is_none_or(|&top| mine.first().is_some_and(|&lo| lo > top))
        {
            new += 1;
        }
    }
    match (resend, new) {
        (_, n) if n == flush.len() => "new",
        (r, _) if r == flush.len() => "recorded",
        _ => "overlap",
    }
}

proptest::proptest! {
    #[test]
    fn coverage_matches_the_set_model(
        flush in proptest::collection::btree_map(0..4i32, (0..30i64, 0..10i64), 1..4),
        recorded in proptest::collection::btree_map(0..4i32, (0..30i64, 0..10i64), 0..4),
    ) {
        let to_ranges = |m: &std::collections::BTreeMap<i32, (i64, i64)>| -> Vec<OffsetRange> {
            m.iter().map(|(p, (a, len))| r(*p, *a, a + len)).collect()
        };
        let (f, rec) = (to_ranges(&flush), to_ranges(&recorded));
        let got = match coverage(&f, &rec) {
            Coverage::New => "new",
            Coverage::AlreadyRecorded => "recorded",
            Coverage::Overlap(_) => "overlap",
        };
        proptest::prop_assert_eq!(got, model(&f, &rec), "flush {:?} recorded {:?}", f, rec);
    }
}
