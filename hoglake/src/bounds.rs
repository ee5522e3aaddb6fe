//! Column bounds: reading a min/max out of parquet chunk statistics as a
//! comparable value of the catalog type, and encoding it the way hoglake
//! takes bounds (Iceberg single-value serialisation of the mapped type,
//! standard base64 with padding on the wire).

use std::cmp::Ordering;

use base64::Engine;
use parquet::basic::{LogicalType, TimeUnit as ParquetTimeUnit};
use parquet::file::statistics::Statistics;
use parquet::schema::types::ColumnDescriptor;

use crate::schema::{Column, ColumnType};

/// A statistics value, widened so one comparison works across row groups.
/// Integers of every width, dates, times, timestamps (already in the bound's
/// unit) and decimal unscaled values are `Int`.
#[derive(Debug, Clone, PartialEq)]
pub enum BoundValue {
    Bool(bool),
    Int(i128),
    Float(f64),
    Bytes(Vec<u8>),
}

impl BoundValue {
    /// The order the bounds follow: numeric, IEEE total order for floats
    /// (-0.0 < +0.0), unsigned lexicographic for bytes.
    pub fn compare(&self, other: &Self) -> Option<Ordering> {
        match (self, other) {
            (Self::Bool(a), Self::Bool(b)) => Some(a.cmp(b)),
            (Self::Int(a), Self::Int(b)) => Some(a.cmp(b)),
            (Self::Float(a), Self::Float(b)) => Some(a.total_cmp(b)),
            (Self::Bytes(a), Self::Bytes(b)) => Some(a.cmp(b)),
            _ => None,
        }
    }
}

/// Which end of the range a value is: decides rounding when a unit is
/// narrowed and how a zero float is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Lower,
    Upper,
}

/// Reads one row group's `(min, max)` for a leaf of catalog type `column`.
/// `None` when the statistics lack min/max or the file's physical/logical
/// shape does not fit the catalog type (then the file gets no bounds).
pub fn read_min_max(
    stats: &Statistics,
    descr: &ColumnDescriptor,
    column: &Column,
) -> Option<(BoundValue, BoundValue)> {
    let min = read_value(stats, descr, column, End::Lower)?;
    let max = read_value(stats, descr, column, End::Upper)?;
    Some((min, max))
}

fn read_value(
    stats: &Statistics,
    descr: &ColumnDescriptor,
    column: &Column,
    end: End,
) -> Option<BoundValue> {
    use ColumnType as T;
    let logical = descr.logical_type_ref();
    let t = column.column_type;
    match stats {
        Statistics::Boolean(s) if t == T::Boolean => {
            Some(BoundValue::Bool(*pick(end, s.min_opt(), s.max_opt())?))
        }
        Statistics::Int32(s) => {
            let v = *pick(end, s.min_opt(), s.max_opt())?;
            match t {
                T::Int8 | T::Int16 | T::Int | T::Long | T::Date => Some(BoundValue::Int(v.into())),
                // Unsigned annotations store the bits of the unsigned value.
                T::Uint8 | T::Uint16 | T::Uint32 => Some(BoundValue::Int((v as u32).into())),
                T::Time => match logical {
                    Some(LogicalType::Time {
                        unit: ParquetTimeUnit::MILLIS,
                        ..
                    }) => Some(BoundValue::Int(i128::from(v) * 1000)),
                    _ => None,
                },
                T::Decimal => decimal_fits(descr, column).then(|| BoundValue::Int(v.into())),
                _ => None,
            }
        }
        Statistics::Int64(s) => {
            let v = *pick(end, s.min_opt(), s.max_opt())?;
            match t {
                T::Long | T::Uint32 => Some(BoundValue::Int(v.into())),
                T::Uint64 => Some(BoundValue::Int((v as u64).into())),
                T::Time => {
                    let unit = match logical {
                        Some(LogicalType::Time { unit, .. }) => unit,
                        _ => return None,
                    };
                    rescale(v, unit_per_second(unit)?, 1_000_000, end).map(BoundValue::Int)
                }
                T::TimestampS | T::TimestampMs | T::Timestamp | T::Timestamptz | T::TimestampNs => {
                    let unit = match logical {
                        Some(LogicalType::Timestamp { unit, .. }) => unit,
                        _ => return None,
                    };
                    let target = if t == T::TimestampNs {
                        1_000_000_000
                    } else {
                        1_000_000
                    };
                    rescale(v, unit_per_second(unit)?, target, end).map(BoundValue::Int)
                }
                T::Decimal => decimal_fits(descr, column).then(|| BoundValue::Int(v.into())),
                _ => None,
            }
        }
        Statistics::Float(s) if matches!(t, T::Float | T::Double) => Some(BoundValue::Float(
            (*pick(end, s.min_opt(), s.max_opt())?).into(),
        )),
        Statistics::Double(s) if t == T::Double => {
            Some(BoundValue::Float(*pick(end, s.min_opt(), s.max_opt())?))
        }
        Statistics::ByteArray(s) => {
            let v = pick(end, s.min_opt(), s.max_opt())?.data();
            match t {
                T::String | T::Json | T::Binary => Some(BoundValue::Bytes(v.to_vec())),
                T::Decimal => decimal_fits(descr, column).then(|| signed_be(v)).flatten(),
                _ => None,
            }
        }
        Statistics::FixedLenByteArray(s) => {
            let v = pick(end, s.min_opt(), s.max_opt())?.data();
            match t {
                T::Uuid if v.len() == 16 => Some(BoundValue::Bytes(v.to_vec())),
                T::Binary => Some(BoundValue::Bytes(v.to_vec())),
                T::Decimal => decimal_fits(descr, column).then(|| signed_be(v)).flatten(),
                _ => None,
            }
        }
        _ => None,
    }
}

fn pick<T>(end: End, lower: Option<T>, upper: Option<T>) -> Option<T> {
    match end {
        End::Lower => lower,
        End::Upper => upper,
    }
}

/// A decimal leaf's bounds are only meaningful at the catalog's scale.
fn decimal_fits(descr: &ColumnDescriptor, column: &Column) -> bool {
    let Some((_, scale)) = column.decimal_params() else {
        return false;
    };
    match descr.logical_type_ref() {
        Some(LogicalType::Decimal { scale: s, .. }) => *s == i32::from(scale),
        _ => descr.type_scale() == i32::from(scale),
    }
}

fn unit_per_second(unit: &ParquetTimeUnit) -> Option<i128> {
    match unit {
        ParquetTimeUnit::MILLIS => Some(1_000),
        ParquetTimeUnit::MICROS => Some(1_000_000),
        ParquetTimeUnit::NANOS => Some(1_000_000_000),
    }
}

/// Converts a count of `1/from` seconds into `1/to` seconds; narrowing floors
/// a lower bound and ceils an upper one, so the bound still holds.
fn rescale(v: i64, from: i128, to: i128, end: End) -> Option<i128> {
    let v = i128::from(v);
    let out = if to >= from {
        v * (to / from)
    } else {
        let step = from / to;
        match end {
            End::Lower => v.div_euclid(step),
            End::Upper => -((-v).div_euclid(step)),
        }
    };
    i64::try_from(out).ok().map(i128::from)
}

/// Big-endian two's complement (any width up to 16 bytes) as an integer.
fn signed_be(bytes: &[u8]) -> Option<BoundValue> {
    if bytes.is_empty() || bytes.len() > 16 {
        return None;
    }
    let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0x00 };
    let mut wide = [fill; 16];
    wide[16 - bytes.len()..].copy_from_slice(bytes);
    Some(BoundValue::Int(i128::from_be_bytes(wide)))
}

/// Iceberg single-value serialisation of `value` as catalog type `t`.
/// `None` when the value cannot be encoded (then the bounds are dropped).
pub fn encode(t: ColumnType, value: &BoundValue, end: End) -> Option<Vec<u8>> {
    use ColumnType as T;
    match (t, value) {
        (T::Boolean, BoundValue::Bool(b)) => Some(vec![u8::from(*b)]),
        (T::Int8 | T::Int16 | T::Int | T::Uint8 | T::Uint16 | T::Date, BoundValue::Int(v)) => {
            Some(i32::try_from(*v).ok()?.to_le_bytes().to_vec())
        }
        (
            T::Long
            | T::Uint32
            | T::Time
            | T::TimestampS
            | T::TimestampMs
            | T::Timestamp
            | T::TimestampNs
            | T::Timestamptz,
            BoundValue::Int(v),
        ) => Some(i64::try_from(*v).ok()?.to_le_bytes().to_vec()),
        (T::Uint64 | T::Decimal, BoundValue::Int(v)) => Some(minimal_be(*v)),
        (T::Float, BoundValue::Float(v)) => {
            Some((normalise_zero(*v, end)? as f32).to_le_bytes().to_vec())
        }
        (T::Double, BoundValue::Float(v)) => Some(normalise_zero(*v, end)?.to_le_bytes().to_vec()),
        (T::String | T::Json | T::Binary, BoundValue::Bytes(b)) => Some(b.clone()),
        (T::Uuid, BoundValue::Bytes(b)) if b.len() == 16 => Some(b.clone()),
        _ => None,
    }
}

/// Zero bounds are signed so they hold whatever the sign of the stored
/// zeros: a lower zero is -0.0, an upper zero +0.0. NaN is never a bound.
fn normalise_zero(v: f64, end: End) -> Option<f64> {
    if v.is_nan() {
        return None;
    }
    Some(match (v == 0.0, end) {
        (true, End::Lower) => -0.0,
        (true, End::Upper) => 0.0,
        _ => v,
    })
}

/// The shortest big-endian two's complement holding `v` (Iceberg's decimal
/// encoding, also used for uint64 as decimal(20,0)).
pub fn minimal_be(v: i128) -> Vec<u8> {
    let bytes = v.to_be_bytes();
    let mut start = 0;
    // Drop a leading byte while the next one still carries the sign.
    while start < 15 {
        let (lead, next) = (bytes[start], bytes[start + 1]);
        let redundant = (lead == 0x00 && next & 0x80 == 0) || (lead == 0xff && next & 0x80 != 0);
        if !redundant {
            break;
        }
        start += 1;
    }
    bytes[start..].to_vec()
}

/// Standard base64 with padding, the wire form of `lower_bound`/`upper_bound`.
pub fn to_base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
#[path = "bounds_tests.rs"]
mod tests;
