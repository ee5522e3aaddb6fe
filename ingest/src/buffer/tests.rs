//! The buffer's accounting: every record a row, a dead letter or a
//! tombstone; ranges, limits, padding and the rows digest.
use arrow::record_batch::RecordBatch;
use millpond_proto::coordinates;
use millpond_proto::{FlushTrigger, OffsetRange};

use super::*;

/// Admits `recs` keeping only the rows `keep` says, as a filter stage would.
fn add_kept(p: &mut Pending, recs: &[Record<'_>], keep: Vec<bool>) -> Buffered {
    let rows = p.convert("t", recs);
    let kept = Kept {
        keep: Some(arrow::array::BooleanArray::from(keep)),
        ..Kept::default()
    };
    p.admit("t", rows, kept)
}

#[test]
fn ranges_cover_every_tracked_offset() {
    let mut p = Pending::default();
    for (part, off) in [(1, 10), (0, 5), (1, 11), (0, 6), (1, 12)] {
        p.ranges.track(part, off);
    }
    assert_eq!(
        p.ranges("t"),
        vec![
            OffsetRange::new("t", 0, 5, 6),
            OffsetRange::new("t", 1, 10, 12)
        ]
    );
    p.take().unwrap();
    assert!(p.is_empty());
}

fn rec(partition: i32, offset: i64, payload: Option<&'static [u8]>) -> Record<'static> {
    Record {
        partition,
        offset,
        timestamp_ms: Some(1_700_000_000_000 + offset),
        key: Some(b"k"),
        payload,
    }
}

#[test]
fn a_flush_never_carries_more_columns_than_its_limit() {
    let mut p = Pending::with_limits(Limits {
        max_columns: 3,
        ..Limits::default()
    });
    let added = p.add(
        "t",
        &[rec(0, 1, Some(br#"{"a":1,"b":2,"c":3,"d":4,"e":"x"}"#))],
    );
    assert_eq!((added.rows, added.dead_values), (1, 2));
    let added = p.add("t", &[rec(0, 2, Some(br#"{"a":5,"f":6}"#))]);
    assert_eq!((added.rows, added.dead_values), (1, 1));
    let cut = p.cut("t", FlushTrigger::Size, "f".into()).unwrap();
    let payload: Vec<_> = cut
        .schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .filter(|n| !coordinates::is_reserved(n))
        .collect();
    assert_eq!(payload, ["a", "b", "c"]);
    let letters: Vec<_> = cut
        .descriptor
        .dead_letters
        .iter()
        .map(|l| {
            (
                l.offset,
                l.column.as_str(),
                l.reason.as_str(),
                l.original.as_slice(),
            )
        })
        .collect();
    assert_eq!(
        letters,
        [
            (1, "d", "too_many_columns", &b"4"[..]),
            (1, "e", "too_many_columns", &b"x"[..]),
            (2, "f", "too_many_columns", &b"6"[..]),
        ]
    );
}

#[test]
fn earlier_values_of_a_repeated_key_are_duplicate_field_name_dead_letters() {
    let recs = [
        rec(0, 1, Some(br#"{"a":1,"a":2}"#)),
        rec(0, 2, Some(br#"{"a":3}"#)),
        rec(0, 3, Some(br#"{"a":"x","a":"y","a":4}"#)),
    ];
    let mut p = Pending::default();
    let added = p.add("t", &recs);
    assert_eq!((added.rows, added.dead_values), (3, 3));
    assert!(added.dead_letters.is_empty(), "every record is a row");
    let cut = p.cut("t", FlushTrigger::Size, "f".into()).unwrap();
    let a = cut.batches[0].column_by_name("a").unwrap();
    let a = a.as_any().downcast_ref::<arrow::array::Int64Array>();
    assert_eq!(
        a.map(|a| a.iter().collect::<Vec<_>>()),
        Some(vec![Some(2), Some(3), Some(4)]),
        "the last value lands"
    );
    let letters: Vec<_> = cut
        .descriptor
        .dead_letters
        .iter()
        .map(|l| {
            (
                l.offset,
                l.reason.as_str(),
                l.column.as_str(),
                l.original.as_slice(),
                l.value_level,
                l.key.as_deref(),
            )
        })
        .collect();
    let dup = "duplicate_field_name";
    let k = Some(&b"k"[..]);
    assert_eq!(
        letters,
        [
            (1, dup, "a", &b"1"[..], true, k),
            (3, dup, "a", &b"x"[..], true, k),
            (3, dup, "a", &b"y"[..], true, k),
        ]
    );
    // A record a filter removes leaves no dead letter.
    let mut p = Pending::default();
    let added = add_kept(&mut p, &recs, vec![false, true, true]);
    assert_eq!((added.rows, added.dead_values), (2, 2));
    let cut = p.cut("t", FlushTrigger::Size, "f".into()).unwrap();
    assert!(cut.descriptor.dead_letters.iter().all(|l| l.offset == 3));
}

#[test]
fn oversized_records_are_dead_letters_with_their_bytes() {
    let mut p = Pending::with_limits(Limits {
        max_record_bytes: 10,
        ..Limits::default()
    });
    let added = p.add(
        "t",
        &[
            rec(0, 1, Some(br#"{"a":1}"#)),
            rec(0, 2, Some(br#"{"a":"0123456789"}"#)),
            rec(0, 3, None),
        ],
    );
    assert_eq!((added.rows, added.tombstones), (1, 1));
    assert_eq!(added.dead_letters, ["oversized_record"]);
    let cut = p.cut("t", FlushTrigger::Size, "f".into()).unwrap();
    let l = &cut.descriptor.dead_letters[0];
    assert_eq!(
        (l.offset, l.original.as_slice(), l.value_level),
        (2, &br#"{"a":"0123456789"}"#[..], false)
    );
}

#[test]
fn the_size_counted_is_the_size_sent_padding_included() {
    // 20 event types with disjoint keys: each batch is padded with the
    // 190 columns of the others at the cut.
    let mut p = Pending::default();
    let payloads: Vec<Vec<String>> = (0..20)
        .map(|t| {
            (0..100)
                .map(|i| {
                    let keys: Vec<String> =
                        (0..10).map(|k| format!(r#""t{t}_k{k}":{i}"#)).collect();
                    format!("{{{}}}", keys.join(","))
                })
                .collect()
        })
        .collect();
    let mut offset = 0;
    let mut unpadded = 0;
    for batch in &payloads {
        let recs: Vec<Record<'_>> = batch
            .iter()
            .map(|s| {
                offset += 1;
                Record {
                    partition: 0,
                    offset,
                    timestamp_ms: None,
                    key: None,
                    payload: Some(s.as_bytes()),
                }
            })
            .collect();
        p.add("t", &recs);
        unpadded = p.bytes;
    }
    let counted = p.bytes();
    let cut = p.cut("t", FlushTrigger::Size, "f".into()).unwrap();
    let sent: usize = cut
        .batches
        .iter()
        .map(RecordBatch::get_array_memory_size)
        .sum();
    assert_eq!(cut.schema.fields().len(), 200 + COORDINATE_COLUMNS);
    assert!(
        counted > 5 * unpadded,
        "padding dominates: {counted} vs {unpadded}"
    );
    assert!(
        counted <= sent && sent <= counted + counted / 5,
        "counted {counted}, sent {sent}"
    );
}

#[test]
fn rows_carry_their_coordinates_and_reserved_keys_become_dead_letters() {
    use millpond_proto::coordinates::Coordinates;
    let mut p = Pending::default();
    let added = p.add(
        "t",
        &[
            rec(0, 7, Some(br#"{"a":1,"_millpond_offset":"x"}"#)),
            rec(0, 8, Some(b"[1]")),
            rec(2, 3, Some(br#"{"a":2}"#)),
        ],
    );
    assert_eq!((added.rows, added.dead_values), (2, 1));
    let cut = p.cut("t", FlushTrigger::Size, "f".into()).unwrap();
    let batch = &cut.batches[0];
    let c = Coordinates::read(batch)
        .unwrap()
        .expect("coordinates attached");
    assert_eq!((c.get(0).partition, c.get(0).offset), (0, 7));
    assert_eq!((c.get(1).partition, c.get(1).offset), (2, 3));
    assert_eq!(c.get(1).key, Some(&b"k"[..]));
    assert_eq!(c.get(1).timestamp_ms, Some(1_700_000_000_003));
    let names: Vec<_> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(
        names,
        [
            "a",
            "_millpond_partition",
            "_millpond_offset",
            "_millpond_timestamp",
            "_millpond_key"
        ]
    );
    let value = cut
        .descriptor
        .dead_letters
        .iter()
        .find(|l| !l.column.is_empty())
        .unwrap();
    assert_eq!(
        (
            value.reason.as_str(),
            value.column.as_str(),
            value.offset,
            value.original.as_slice()
        ),
        ("reserved_field_name", "_millpond_offset", 7, &b"x"[..])
    );
}

#[test]
fn records_become_rows_dead_letters_or_tombstones_and_every_offset_is_covered() {
    let mut p = Pending::default();
    let added = p.add(
        "t",
        &[
            rec(0, 7, Some(br#"{"a":1}"#)),
            rec(0, 8, Some(b"[1,2]")),
            rec(1, 3, None),
            rec(1, 4, Some(b"{oops")),
            rec(1, 5, Some(b"{}")),
            rec(0, 9, Some(b"\xff\xfe")),
            rec(0, 10, Some(b"null")),
        ],
    );
    assert_eq!(added.rows, 2, "{{}} is a row too");
    assert_eq!(added.tombstones, 1);
    assert_eq!(
        added.dead_letters,
        [
            "not_an_object",
            "invalid_json",
            "invalid_utf8",
            "not_an_object"
        ]
    );
    let cut = p.cut("t", FlushTrigger::Size, "f".into()).unwrap();
    let d = &cut.descriptor;
    // Each range remembers the record at its last offset.
    let last = |p, o, payload| Some(rec(p, o, payload).last_record());
    assert_eq!(
        d.ranges,
        [
            OffsetRange::new("t", 0, 7, 10).with_last_record(last(0, 10, Some(b"null"))),
            OffsetRange::new("t", 1, 3, 5).with_last_record(last(1, 5, Some(b"{}")))
        ]
    );
    assert_ne!(last(1, 5, Some(b"{}")), last(1, 5, Some(b"{ }")));
    assert_ne!(
        rec(1, 5, None).last_record(),
        Record {
            timestamp_ms: Some(1),
            ..rec(1, 5, None)
        }
        .last_record()
    );
    assert_eq!(d.expected_rows, 2);
    let coords: Vec<_> = d
        .dead_letters
        .iter()
        .map(|l| (l.partition, l.offset, l.original.as_slice(), l.timestamp_ms))
        .collect();
    assert_eq!(
        coords,
        [
            (0, 8, &b"[1,2]"[..], Some(1_700_000_000_008)),
            (1, 4, &b"{oops"[..], Some(1_700_000_000_004)),
            (0, 9, &b"\xff\xfe"[..], Some(1_700_000_000_009)),
            (0, 10, &b"null"[..], Some(1_700_000_000_010)),
        ]
    );
    assert!(d
        .dead_letters
        .iter()
        .all(|l| l.key.as_deref() == Some(&b"k"[..]) && l.topic == "t"));
    assert!(cut.bytes > 4 * std::mem::size_of::<DeadLetter>());
    assert!(p.is_empty() && p.bytes() == 0);
    let empty = p.cut("t", FlushTrigger::Time, "g".into()).unwrap();
    assert!(empty.descriptor.dead_letters.is_empty() && empty.descriptor.ranges.is_empty());
}

mod conservation {
    use super::*;
    use proptest::prelude::*;

    /// Payloads of every kind a topic can carry: objects (including `{}`),
    /// other JSON, broken JSON, arbitrary bytes, tombstones.
    fn payload() -> impl Strategy<Value = Option<Vec<u8>>> {
        prop_oneof![
            Just(None),
            Just(Some(b"{}".to_vec())),
            (any::<i64>(), "[a-z]{0,8}")
                .prop_map(|(n, s)| Some(format!(r#"{{"n":{n},"s":"{s}"}}"#).into_bytes())),
            prop_oneof![
                Just("null"),
                Just("[1,2]"),
                Just("42"),
                Just("\"x\""),
                Just("{\"a\":")
            ]
            .prop_map(|s| Some(s.as_bytes().to_vec())),
            proptest::collection::vec(any::<u8>(), 0..24).prop_map(Some),
        ]
    }

    proptest! {
        /// Every record is exactly one of: a row, a dead letter carrying its
        /// own coordinates and bytes, a tombstone; and every offset is covered.
        #[test]
        fn every_record_is_accounted_for(
            batches in proptest::collection::vec(
                proptest::collection::vec((0..3i32, payload()), 0..40), 1..4)
        ) {
            let mut p = Pending::default();
            let mut next = [0i64; 3];
            let (mut records, mut rows, mut dead, mut tombstones) = (0, 0, 0, 0);
            let mut sent = Vec::new();
            for batch in &batches {
                let recs: Vec<Record<'_>> = batch
                    .iter()
                    .map(|(part, payload)| {
                        let offset = next[*part as usize];
                        next[*part as usize] += 1;
                        sent.push((*part, offset, payload.clone()));
                        Record { partition: *part, offset, timestamp_ms: None, key: None, payload: payload.as_deref() }
                    })
                    .collect();
                let added = p.add("t", &recs);
                records += recs.len();
                rows += added.rows;
                dead += added.dead_letters.len();
                tombstones += added.tombstones;
            }
            prop_assert_eq!(records, rows + dead + tombstones);
            let cut = p.cut("t", FlushTrigger::Size, "f".into()).unwrap();
            prop_assert_eq!(cut.descriptor.expected_rows as usize, rows);
            prop_assert_eq!(cut.records, records, "every record tracked counts once");
            prop_assert_eq!(cut.batches.iter().map(RecordBatch::num_rows).sum::<usize>(), rows);
            prop_assert_eq!(cut.descriptor.dead_letters.len(), dead);
            for l in &cut.descriptor.dead_letters {
                let original = sent
                    .iter()
                    .find(|(part, off, _)| *part == l.partition && *off == l.offset)
                    .and_then(|(_, _, p)| p.clone());
                prop_assert_eq!(Some(l.original.clone()), original);
            }
            for (part, n) in next.iter().enumerate() {
                let range = cut.descriptor.ranges.iter().find(|r| r.partition == part as i32);
                match n {
                    0 => prop_assert!(range.is_none()),
                    n => prop_assert_eq!(range.map(|r| (r.first, r.last)), Some((0, n - 1))),
                }
            }
            // The same records cut into other batches (as a re-read from
            // Kafka may): the same rows, so the same digest.
            let all: Vec<Record<'_>> = sent
                .iter()
                .map(|(part, offset, payload)| Record { partition: *part, offset: *offset, timestamp_ms: None, key: None, payload: payload.as_deref() })
                .collect();
            let mut whole = Pending::default();
            whole.add("t", &all);
            let again = whole.cut("t", FlushTrigger::Size, "f".into()).unwrap();
            prop_assert_eq!(again.rows_digest, cut.rows_digest);
        }
    }

    /// A filter that keeps other records in the same number leaves the
    /// counts equal; the digest tells them apart.
    #[test]
    fn the_rows_digest_tells_which_records_are_rows() {
        let payloads: [&[u8]; 2] = [br#"{"team":1}"#, br#"{"team":2}"#];
        let recs: Vec<Record<'_>> = payloads
            .iter()
            .enumerate()
            .map(|(i, p)| Record {
                partition: 0,
                offset: i as i64,
                timestamp_ms: None,
                key: None,
                payload: Some(p),
            })
            .collect();
        let keep_first = |first: bool| {
            let mut p = Pending::default();
            add_kept(&mut p, &recs, vec![first, !first]);
            p.cut("t", FlushTrigger::Size, "f".into()).unwrap()
        };
        let (a, b) = (keep_first(true), keep_first(false));
        assert_eq!(
            (a.records, a.descriptor.expected_rows),
            (b.records, b.descriptor.expected_rows)
        );
        assert_eq!(a.rows_digest, record_digest(0, 0));
        assert_eq!(b.rows_digest, record_digest(0, 1));
        assert_ne!(a.rows_digest, b.rows_digest);
    }
}

#[test]
fn a_record_whose_values_would_cost_too_much_as_dead_letters_is_kept_whole() {
    let many: &'static [u8] = Box::leak(
        format!(
            "{{{}}}",
            (0..400)
                .map(|k| format!("\"k{k}\":1"))
                .collect::<Vec<_>>()
                .join(",")
        )
        .into_bytes()
        .into_boxed_slice(),
    );
    let limits = Limits {
        max_columns: 2,
        // Room for the dead letters of about 100 keys, not 400.
        max_record_bytes: 100 * crate::convert::LETTER_FLOOR,
    };
    // Alone, and after a record that takes the columns first: the same fate.
    for batch in [
        vec![rec(0, 7, Some(many))],
        vec![rec(0, 6, Some(br#"{"a":1,"b":2}"#)), rec(0, 7, Some(many))],
    ] {
        let mut p = Pending::with_limits(limits);
        let added = p.add("t", &batch);
        assert_eq!(added.dead_letters, ["too_many_keys"]);
        assert_eq!(added.dead_values, 0, "no letter per key");
        let cut = p.cut("t", FlushTrigger::Size, "f".into()).unwrap();
        let letters = &cut.descriptor.dead_letters;
        assert_eq!(letters.len(), 1);
        assert_eq!(
            (
                letters[0].offset,
                letters[0].original.as_slice(),
                letters[0].value_level
            ),
            (7, many, false),
            "the record as sent"
        );
        assert_eq!(cut.descriptor.expected_rows as usize, batch.len() - 1);
    }
    // Within the limit: a row, its extra keys value-level letters.
    let mut p = Pending::with_limits(Limits {
        max_record_bytes: 1_000 * crate::convert::LETTER_FLOOR,
        ..limits
    });
    let added = p.add("t", &[rec(0, 7, Some(many))]);
    assert_eq!((added.rows, added.dead_values), (1, 398));
}
