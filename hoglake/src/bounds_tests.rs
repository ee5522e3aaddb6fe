//! Unit tests of `bounds.rs`.
use super::*;

fn enc(t: ColumnType, v: BoundValue, end: End) -> String {
    to_base64(&encode(t, &v, end).unwrap())
}

#[test]
fn minimal_big_endian_twos_complement() {
    assert_eq!(minimal_be(0), [0x00]);
    assert_eq!(minimal_be(150), [0x00, 0x96]); // 1.50 at scale 2
    assert_eq!(minimal_be(-225), [0xff, 0x1f]); // -2.25 at scale 2
    assert_eq!(minimal_be(127), [0x7f]);
    assert_eq!(minimal_be(128), [0x00, 0x80]);
    assert_eq!(minimal_be(-128), [0x80]);
    assert_eq!(minimal_be(-129), [0xff, 0x7f]);
    // uint64 values >= 2^63 keep a leading 0x00.
    assert_eq!(
        minimal_be(u64::MAX.into()),
        [0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
    );
}

/// The encodings hoglake-api.md §7.7 gives for the captured payload.
#[test]
fn documented_examples() {
    assert_eq!(
        enc(ColumnType::Long, BoundValue::Int(1), End::Lower),
        "AQAAAAAAAAA="
    );
    assert_eq!(
        enc(ColumnType::Decimal, BoundValue::Int(-225), End::Lower),
        "/x8="
    );
    assert_eq!(
        enc(ColumnType::Decimal, BoundValue::Int(150), End::Upper),
        "AJY="
    );
    assert_eq!(
        enc(ColumnType::Double, BoundValue::Float(0.0), End::Lower),
        "AAAAAAAAAIA="
    );
    assert_eq!(
        enc(ColumnType::Double, BoundValue::Float(3.5), End::Upper),
        "AAAAAAAADEA="
    );
    assert_eq!(
        enc(
            ColumnType::String,
            BoundValue::Bytes(b"x".to_vec()),
            End::Lower
        ),
        "eA=="
    );
}

#[test]
fn widths_per_type() {
    let four = [
        ColumnType::Int8,
        ColumnType::Int16,
        ColumnType::Int,
        ColumnType::Uint8,
        ColumnType::Uint16,
        ColumnType::Date,
    ];
    for t in four {
        assert_eq!(
            encode(t, &BoundValue::Int(-2), End::Lower).unwrap(),
            (-2i32).to_le_bytes(),
            "{t}"
        );
    }
    let eight = [
        ColumnType::Long,
        ColumnType::Uint32,
        ColumnType::Time,
        ColumnType::TimestampS,
        ColumnType::TimestampMs,
        ColumnType::Timestamp,
        ColumnType::TimestampNs,
        ColumnType::Timestamptz,
    ];
    for t in eight {
        assert_eq!(
            encode(t, &BoundValue::Int(-2), End::Lower).unwrap(),
            (-2i64).to_le_bytes(),
            "{t}"
        );
    }
    assert_eq!(
        encode(ColumnType::Float, &BoundValue::Float(1.5), End::Lower).unwrap(),
        1.5f32.to_le_bytes()
    );
    assert_eq!(
        encode(ColumnType::Float, &BoundValue::Float(-0.0), End::Upper).unwrap(),
        0.0f32.to_le_bytes()
    );
    assert_eq!(
        encode(ColumnType::Boolean, &BoundValue::Bool(true), End::Upper).unwrap(),
        [1]
    );
    assert_eq!(
        encode(
            ColumnType::Uuid,
            &BoundValue::Bytes(vec![7; 16]),
            End::Upper
        )
        .unwrap(),
        [7; 16]
    );
}

#[test]
fn unencodable_values_give_no_bound() {
    assert_eq!(
        encode(ColumnType::Double, &BoundValue::Float(f64::NAN), End::Lower),
        None
    );
    assert_eq!(
        encode(ColumnType::Int, &BoundValue::Int(1 << 40), End::Lower),
        None
    );
    assert_eq!(
        encode(
            ColumnType::Uuid,
            &BoundValue::Bytes(vec![1; 15]),
            End::Lower
        ),
        None
    );
    assert_eq!(
        encode(ColumnType::Variant, &BoundValue::Int(1), End::Lower),
        None
    );
}

#[test]
fn narrowing_a_unit_keeps_the_bound_valid() {
    assert_eq!(
        rescale(1_999, 1_000_000_000, 1_000_000, End::Lower),
        Some(1)
    );
    assert_eq!(
        rescale(1_001, 1_000_000_000, 1_000_000, End::Upper),
        Some(2)
    );
    assert_eq!(
        rescale(-1_001, 1_000_000_000, 1_000_000, End::Lower),
        Some(-2)
    );
    assert_eq!(
        rescale(-1_001, 1_000_000_000, 1_000_000, End::Upper),
        Some(-1)
    );
    assert_eq!(rescale(5, 1_000, 1_000_000, End::Lower), Some(5_000));
    assert_eq!(rescale(i64::MAX, 1_000, 1_000_000, End::Lower), None);
}

#[test]
fn floats_order_totally() {
    let neg = BoundValue::Float(-0.0);
    let pos = BoundValue::Float(0.0);
    assert_eq!(neg.compare(&pos), Some(Ordering::Less));
    assert_eq!(
        BoundValue::Bytes(vec![0xff]).compare(&BoundValue::Bytes(vec![0x01, 0])),
        Some(Ordering::Greater)
    );
}
