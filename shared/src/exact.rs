//! Exact conversion of a batch column to the type a table column already
//! has. A value is converted only when it reads back equal to what was sent:
//! no rounding, no dropped digits or leading zeros, no overflow, no
//! reinterpretation (a boolean is not a number). A value that does not
//! convert exactly leaves its cell NULL and is reported, so the caller can
//! dead-letter it.
//!
//! Text converts to a number only when it is a JSON number literal whose
//! value the column holds exactly (`"1.50"` into DOUBLE is 1.5; `"02134"`,
//! `" 7"`, `"+7"` and `"1.5"` into BIGINT do not convert). Numbers and
//! booleans convert to text as their shortest exact spelling.
use std::sync::Arc;

use crate::decimal::{exact_f32, exact_f64, Decimal};
use crate::{timestamp_text, uuid_text};

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, FixedSizeBinaryArray, Float32Array, Float64Array,
    Int16Array, Int32Array, Int64Array, Int8Array, StringArray, TimestampMicrosecondArray,
    UInt16Array, UInt32Array, UInt64Array, UInt8Array,
};
use arrow::datatypes::{
    DataType, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, TimeUnit,
    UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};

/// A live column type this module converts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Int {
        bits: u32,
        signed: bool,
    },
    Float32,
    Float64,
    Boolean,
    Text,
    /// 16 big-endian bytes (FixedSizeBinary(16)); text in the accepted
    /// wire forms (`uuid_text`) converts, normalised to those bytes.
    Uuid,
    /// Microseconds since the epoch, UTC; text in the accepted forms
    /// (`timestamp_text`) converts, nothing finer than a microsecond.
    TimestampTz,
}

impl Target {
    /// The target for a live column type as DuckDB spells it; `None` for a
    /// type with no rule here (the sink then checks with its engine).
    pub fn of(live: &str) -> Option<Target> {
        let int = |bits, signed| Some(Target::Int { bits, signed });
        match live {
            "TINYINT" => int(8, true),
            "SMALLINT" => int(16, true),
            "INTEGER" => int(32, true),
            "BIGINT" => int(64, true),
            "UTINYINT" => int(8, false),
            "USMALLINT" => int(16, false),
            "UINTEGER" => int(32, false),
            "UBIGINT" => int(64, false),
            "FLOAT" => Some(Target::Float32),
            "DOUBLE" => Some(Target::Float64),
            "BOOLEAN" => Some(Target::Boolean),
            "VARCHAR" => Some(Target::Text),
            "UUID" => Some(Target::Uuid),
            "TIMESTAMP WITH TIME ZONE" => Some(Target::TimestampTz),
            _ => None,
        }
    }
}

/// A column converted to its target type.
#[derive(Debug)]
pub struct Converted {
    pub array: ArrayRef,
    /// Rows whose value did not convert exactly; NULL in `array`.
    pub failed: Vec<usize>,
}

/// One cell of a source column.
#[derive(Debug, Clone, Copy)]
enum Val<'a> {
    Int(i128),
    Float(f64),
    Bool(bool),
    Text(&'a str),
    /// A 16-byte binary value (a uuid).
    Bytes16(&'a [u8]),
    /// Any other binary value.
    OtherBytes,
    /// Microseconds since the epoch, UTC.
    Micros(i64),
    /// A time no microsecond count holds (finer, or out of range).
    Unrepresentable,
}

/// Converts `array` to `target`; `None` when the source type has no rule
/// here (dates, binary, nested, ...), for the caller to check otherwise.
pub fn convert(array: &dyn Array, target: Target) -> Option<Converted> {
    let cells = cells(array)?;
    let mut failed = Vec::new();
    macro_rules! collect {
        ($arr:ty, $f:expr) => {{
            let out: $arr = cells
                .iter()
                .enumerate()
                .map(|(row, v)| {
                    let v = (*v)?;
                    let got = $f(v);
                    if got.is_none() {
                        failed.push(row);
                    }
                    got
                })
                .collect();
            Arc::new(out) as ArrayRef
        }};
    }
    let array = match target {
        Target::Int { bits, signed } => {
            let (min, max) = if signed {
                (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
            } else {
                (0, (1i128 << bits) - 1)
            };
            let fit = |v: Val<'_>| to_int(v).filter(|i| (min..=max).contains(i));
            match (bits, signed) {
                (8, true) => collect!(Int8Array, |v| fit(v).map(|i| i as i8)),
                (16, true) => collect!(Int16Array, |v| fit(v).map(|i| i as i16)),
                (32, true) => collect!(Int32Array, |v| fit(v).map(|i| i as i32)),
                (8, false) => collect!(UInt8Array, |v| fit(v).map(|i| i as u8)),
                (16, false) => collect!(UInt16Array, |v| fit(v).map(|i| i as u16)),
                (32, false) => collect!(UInt32Array, |v| fit(v).map(|i| i as u32)),
                (_, false) => collect!(UInt64Array, |v| fit(v).map(|i| i as u64)),
                _ => collect!(Int64Array, |v| fit(v).map(|i| i as i64)),
            }
        }
        Target::Float64 => collect!(Float64Array, to_f64),
        Target::Float32 => collect!(Float32Array, to_f32),
        Target::Boolean => collect!(BooleanArray, |v| match v {
            Val::Bool(b) => Some(b),
            Val::Text("true") => Some(true),
            Val::Text("false") => Some(false),
            _ => None,
        }),
        Target::Text => collect!(StringArray, to_text),
        Target::Uuid => {
            let bytes: Vec<Option<[u8; 16]>> = cells
                .iter()
                .enumerate()
                .map(|(row, v)| {
                    let v = (*v)?;
                    let got = to_uuid(v);
                    if got.is_none() {
                        failed.push(row);
                    }
                    got
                })
                .collect();
            Arc::new(
                FixedSizeBinaryArray::try_from_sparse_iter_with_size(bytes.into_iter(), 16)
                    .expect("16 bytes each"),
            ) as ArrayRef
        }
        Target::TimestampTz => {
            let out: TimestampMicrosecondArray = cells
                .iter()
                .enumerate()
                .map(|(row, v)| {
                    let v = (*v)?;
                    let got = to_micros(v);
                    if got.is_none() {
                        failed.push(row);
                    }
                    got
                })
                .collect();
            Arc::new(out.with_timezone("UTC")) as ArrayRef
        }
    };
    Some(Converted { array, failed })
}

fn cells(array: &dyn Array) -> Option<Vec<Option<Val<'_>>>> {
    macro_rules! prim {
        ($t:ty, $wrap:expr) => {{
            let a = array.as_primitive::<$t>();
            (0..a.len())
                .map(|i| a.is_valid(i).then(|| $wrap(a.value(i))))
                .collect()
        }};
    }
    let int = |i: i128| Val::Int(i);
    Some(match array.data_type() {
        DataType::Int8 => prim!(Int8Type, |v: i8| int(v.into())),
        DataType::Int16 => prim!(Int16Type, |v: i16| int(v.into())),
        DataType::Int32 => prim!(Int32Type, |v: i32| int(v.into())),
        DataType::Int64 => prim!(Int64Type, |v: i64| int(v.into())),
        DataType::UInt8 => prim!(UInt8Type, |v: u8| int(v.into())),
        DataType::UInt16 => prim!(UInt16Type, |v: u16| int(v.into())),
        DataType::UInt32 => prim!(UInt32Type, |v: u32| int(v.into())),
        DataType::UInt64 => prim!(UInt64Type, |v: u64| int(v.into())),
        DataType::Float32 => prim!(Float32Type, |v: f32| Val::Float(v.into())),
        DataType::Float64 => prim!(Float64Type, Val::Float),
        DataType::Boolean => {
            let a = array.as_boolean();
            (0..a.len())
                .map(|i| a.is_valid(i).then(|| Val::Bool(a.value(i))))
                .collect()
        }
        DataType::Utf8 => {
            let a = array.as_string::<i32>();
            (0..a.len())
                .map(|i| a.is_valid(i).then(|| Val::Text(a.value(i))))
                .collect()
        }
        DataType::LargeUtf8 => {
            let a = array.as_string::<i64>();
            (0..a.len())
                .map(|i| a.is_valid(i).then(|| Val::Text(a.value(i))))
                .collect()
        }
        DataType::FixedSizeBinary(16) => {
            let a = array.as_fixed_size_binary();
            (0..a.len())
                .map(|i| a.is_valid(i).then(|| Val::Bytes16(a.value(i))))
                .collect()
        }
        DataType::Binary => {
            let a = array.as_binary::<i32>();
            (0..a.len())
                .map(|i| a.is_valid(i).then(|| bytes(a.value(i))))
                .collect()
        }
        DataType::LargeBinary => {
            let a = array.as_binary::<i64>();
            (0..a.len())
                .map(|i| a.is_valid(i).then(|| bytes(a.value(i))))
                .collect()
        }
        DataType::Timestamp(unit, _) => {
            let per_micro: i64 = match unit {
                TimeUnit::Second => -1_000_000,
                TimeUnit::Millisecond => -1_000,
                TimeUnit::Microsecond => 1,
                TimeUnit::Nanosecond => 1_000,
            };
            let raw = array.to_data();
            let values = raw.buffers()[0].typed_data::<i64>();
            let offset = raw.offset();
            (0..array.len())
                .map(|i| {
                    array.is_valid(i).then(|| {
                        let v = values[offset + i];
                        match per_micro {
                            // Coarser units scale up exactly (or overflow: refused).
                            p if p < 0 => {
                                v.checked_mul(-p).map_or(Val::Unrepresentable, Val::Micros)
                            }
                            1 => Val::Micros(v),
                            // Nanoseconds: exact only on a whole microsecond.
                            p => {
                                if v % p == 0 {
                                    Val::Micros(v / p)
                                } else {
                                    Val::Unrepresentable
                                }
                            }
                        }
                    })
                })
                .collect()
        }
        _ => return None,
    })
}

fn bytes(b: &[u8]) -> Val<'_> {
    if b.len() == 16 {
        Val::Bytes16(b)
    } else {
        Val::OtherBytes
    }
}

fn to_uuid(v: Val<'_>) -> Option<[u8; 16]> {
    match v {
        Val::Text(s) => uuid_text::parse(s),
        Val::Bytes16(b) => b.try_into().ok(),
        _ => None,
    }
}

fn to_micros(v: Val<'_>) -> Option<i64> {
    match v {
        Val::Micros(m) => Some(m),
        Val::Text(s) => timestamp_text::parse_micros(s),
        _ => None,
    }
}

fn to_int(v: Val<'_>) -> Option<i128> {
    match v {
        Val::Int(i) => Some(i),
        // Beyond 2^100 no integer type here can hold it anyway.
        Val::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e30 => Some(f as i128),
        Val::Text(s) => Decimal::parse(s)?.to_int(),
        _ => None,
    }
}

fn to_f64(v: Val<'_>) -> Option<f64> {
    match v {
        // Beyond 2^53 some integers have no f64, and those that do read
        // back in a rounded spelling (55926963447941744 -> 5.592696344794174e16).
        Val::Int(i) => (i.unsigned_abs() <= 1 << 53).then_some(i as f64),
        Val::Float(f) => Some(f),
        Val::Text(s) => exact_f64(s),
        _ => None,
    }
}

fn to_f32(v: Val<'_>) -> Option<f32> {
    match v {
        Val::Int(i) => (i.unsigned_abs() <= 1 << 24).then_some(i as f32),
        Val::Float(f) => {
            let g = f as f32;
            (f64::from(g) == f || f.is_nan()).then_some(g)
        }
        Val::Text(s) => exact_f32(s),
        _ => None,
    }
}

fn to_text(v: Val<'_>) -> Option<String> {
    Some(match v {
        Val::Int(i) => i.to_string(),
        Val::Float(f) if f.is_finite() => format!("{f}"),
        Val::Float(f) => format!("{f:?}"),
        Val::Bool(b) => b.to_string(),
        Val::Text(s) => s.to_owned(),
        Val::Bytes16(b) => uuid_text::format(b),
        // Arbitrary bytes and times have no one text here.
        Val::OtherBytes | Val::Micros(_) | Val::Unrepresentable => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text(values: &[Option<&str>], target: Target) -> Converted {
        convert(&StringArray::from(values.to_vec()), target).unwrap()
    }

    #[test]
    fn floats_do_not_round_into_integers() {
        let c = convert(
            &Float64Array::from(vec![10.0, 10.5, 11.5, -3.0]),
            Target::of("BIGINT").unwrap(),
        )
        .unwrap();
        assert_eq!(c.failed, [1, 2]);
        let a = c.array.as_primitive::<Int64Type>();
        assert_eq!(a.value(0), 10);
        assert_eq!(a.value(3), -3);
        assert!(a.is_null(1) && a.is_null(2));
    }

    #[test]
    fn text_into_integers_keeps_only_exact_numbers() {
        let c = text(
            &[
                Some("02134"),
                Some("1.5"),
                Some("42"),
                Some(" 7"),
                Some("+7"),
                Some("-0"),
                Some("1e3"),
                None,
            ],
            Target::of("BIGINT").unwrap(),
        );
        assert_eq!(c.failed, [0, 1, 3, 4]);
        let a = c.array.as_primitive::<Int64Type>();
        assert_eq!((a.value(2), a.value(5), a.value(6)), (42, 0, 1000));
        assert!(a.is_null(7));
    }

    #[test]
    fn integers_beyond_the_column_are_refused_not_nulled_silently() {
        let c = text(
            &[
                Some("123456789012345678901234567890"),
                Some("9223372036854775807"),
            ],
            Target::of("BIGINT").unwrap(),
        );
        assert_eq!(c.failed, [0]);
        let c = convert(
            &Int64Array::from(vec![300, 127]),
            Target::of("TINYINT").unwrap(),
        )
        .unwrap();
        assert_eq!(c.failed, [0]);
        let c = convert(
            &Int64Array::from(vec![-1, 1]),
            Target::of("UBIGINT").unwrap(),
        )
        .unwrap();
        assert_eq!(c.failed, [0]);
    }

    #[test]
    fn integers_into_double_are_exact_up_to_2_pow_53() {
        let big = (1i64 << 53) + 1;
        let c = convert(
            &Int64Array::from(vec![1, 1 << 53, big, i64::MAX]),
            Target::Float64,
        )
        .unwrap();
        assert_eq!(c.failed, [2, 3]);
        assert_eq!(
            c.array.as_primitive::<Float64Type>().value(1),
            9007199254740992.0
        );
    }

    #[test]
    fn text_into_double_must_read_back_equal() {
        let c = text(
            &[
                Some("1.50"),
                Some("0.1"),
                Some("3.14159265358979323846264338327950288"),
                Some("1e400"),
                Some("9007199254740993"),
                Some("NaN"),
                Some("abc"),
            ],
            Target::Float64,
        );
        assert_eq!(c.failed, [2, 3, 4, 5, 6]);
        let a = c.array.as_primitive::<Float64Type>();
        assert_eq!((a.value(0), a.value(1)), (1.5, 0.1));
    }

    #[test]
    fn uuids_and_timestamps_from_their_text() {
        let c = text(
            &[
                Some("F79C3E09-677C-4BBD-A479-3F349CB785E7"),
                Some("not-a-uuid"),
                None,
            ],
            Target::Uuid,
        );
        assert_eq!(c.failed, [1]);
        let back = convert(c.array.as_ref(), Target::Text).unwrap();
        assert_eq!(
            back.array.as_string::<i32>().value(0),
            "f79c3e09-677c-4bbd-a479-3f349cb785e7"
        );
        let c = text(
            &[
                Some("2024-01-01 12:00:00.123"),
                Some("2024-01-01 12:00:00.1234567"),
                Some("soon"),
            ],
            Target::TimestampTz,
        );
        assert_eq!(c.failed, [1, 2]);
        assert_eq!(
            c.array
                .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                .value(0),
            1_704_110_400_123_000
        );
        assert_eq!(
            c.array.data_type(),
            &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        );
        let ints = convert(&Int64Array::from(vec![1_704_110_400]), Target::TimestampTz).unwrap();
        assert_eq!(ints.failed, [0], "a number is not a time");
    }

    #[test]
    fn booleans_are_not_numbers() {
        let c = convert(
            &BooleanArray::from(vec![true]),
            Target::of("INTEGER").unwrap(),
        )
        .unwrap();
        assert_eq!(c.failed, [0]);
        let c = convert(&Int64Array::from(vec![1]), Target::Boolean).unwrap();
        assert_eq!(c.failed, [0]);
        let c = text(&[Some("true"), Some("TRUE"), Some("1")], Target::Boolean);
        assert_eq!(c.failed, [1, 2]);
    }

    #[test]
    fn anything_simple_becomes_text() {
        let c = convert(&Float64Array::from(vec![10.5, 1e21]), Target::Text).unwrap();
        assert!(c.failed.is_empty());
        let a = c.array.as_string::<i32>();
        assert_eq!((a.value(0), a.value(1)), ("10.5", "1000000000000000000000"));
        assert!(convert(&arrow::array::Date32Array::from(vec![1]), Target::Text).is_none());
        assert_eq!(
            Target::of("TIMESTAMP WITH TIME ZONE"),
            Some(Target::TimestampTz)
        );
        assert_eq!(Target::of("DECIMAL(18,3)"), None);
    }

    proptest! {
        /// Whatever an i64 or f64 is, a converted value reads back equal to
        /// the source, and everything else is reported.
        #[test]
        fn converted_values_read_back_equal(i in any::<i64>(), f in any::<f64>()) {
            let ints = Int64Array::from(vec![i]);
            for live in ["TINYINT", "INTEGER", "BIGINT", "UINTEGER", "DOUBLE", "FLOAT", "VARCHAR"] {
                let c = convert(&ints, Target::of(live).unwrap()).unwrap();
                if c.failed.is_empty() {
                    let back = to_text(cells(c.array.as_ref()).unwrap()[0].unwrap()).unwrap();
                    prop_assert_eq!(Decimal::parse(&back), Decimal::parse(&i.to_string()), "{}", live);
                }
            }
            let text = StringArray::from(vec![format!("{f:e}")]);
            let c = convert(&text, Target::Float64).unwrap();
            prop_assert_eq!(c.failed.is_empty(), f.is_finite());
            if f.is_finite() {
                prop_assert_eq!(c.array.as_primitive::<Float64Type>().value(0), f);
            }
            let c = convert(&Float64Array::from(vec![f]), Target::of("BIGINT").unwrap()).unwrap();
            if c.failed.is_empty() {
                prop_assert_eq!(c.array.as_primitive::<Int64Type>().value(0) as f64, f);
            }
        }
    }
}
