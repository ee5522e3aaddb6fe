use super::*;

fn r(p: i32, a: i64, b: i64) -> OffsetRange {
    OffsetRange::new("t", p, a, b)
}

proptest::proptest! {
    /// A read is spared only for a flush the read would find new.
    #[test]
    fn known_offsets_skip_only_new_flushes(
        flush in proptest::collection::btree_map(0..4i32, (0..30i64, 0..10i64), 1..4),
        recorded in proptest::collection::btree_map(0..4i32, (0..30i64, 0..10i64), 0..4),
        committed in proptest::collection::btree_map(0..4i32, (0..30i64, 0..10i64), 0..4),
    ) {
        let to_ranges = |m: &std::collections::BTreeMap<i32, (i64, i64)>| -> Vec<OffsetRange> {
            m.iter().map(|(p, (a, len))| r(*p, *a, a + len)).collect()
        };
        let (f, mut rec) = (to_ranges(&flush), to_ranges(&recorded));
        let mut known = KnownOffsets::default();
        known.read("t", &rec);
        // Then this writer commits, and the lake holds that range last.
        let mine = to_ranges(&committed);
        known.committed(&mine);
        rec.retain(|x| !mine.iter().any(|m| m.partition == x.partition));
        rec.extend(mine);
        if known.all_new(&f) {
            proptest::prop_assert_eq!(coverage(&f, &rec), Coverage::New, "flush {:?} recorded {:?}", f, rec);
        }
    }
}

#[test]
fn known_offsets_spare_a_read_only_past_what_was_recorded() {
    let mut known = KnownOffsets::default();
    assert!(!known.all_new(&[r(0, 0, 9)]), "nothing known: read");
    known.read("t", &[r(0, 0, 9)]);
    assert!(known.all_new(&[r(0, 10, 19)]));
    assert!(
        !known.all_new(&[r(0, 9, 19)]),
        "overlaps the recorded range"
    );
    assert!(!known.all_new(&[r(0, 0, 9)]), "a resend is read");
    assert!(
        known.all_new(&[r(1, 0, 5)]),
        "read with its topic: nothing recorded"
    );
    assert!(
        !known.all_new(&[OffsetRange::new("u", 0, 10, 19)]),
        "another topic"
    );
    known.committed(&[r(0, 10, 19)]);
    assert!(!known.all_new(&[r(0, 10, 19)]), "its own resend");
    assert!(known.all_new(&[r(0, 20, 29)]));
    known.forget();
    assert!(!known.all_new(&[r(0, 20, 29)]));
    assert!(!known.all_new(&[r(1, 0, 5)]));
}
