//! Partition transforms and the value strings pyhoglake registers for them
//! (hoglake-api.md §7.6): Iceberg semantics, printed as strings, `None` for
//! a null source value.

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Decimal128Array, FixedSizeBinaryArray};
use arrow::datatypes::{
    DataType, Date32Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    Time64MicrosecondType, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt64Type, UInt8Type,
};
use base64::Engine;
use chrono::Datelike;

use crate::bounds::minimal_be;
use crate::error::{Error, Result};
use crate::murmur3::bucket;
use crate::python_format::{
    date_from_days, decimal_str, float_repr, iso_date, iso_datetime, iso_time,
};
use crate::schema::{ColumnType, PartitionField};

/// A partition transform with its parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform {
    Identity,
    Bucket(u32),
    Year,
    Month,
    Day,
    Hour,
}

impl Transform {
    pub fn from_field(field: &PartitionField) -> Result<Self> {
        let bad = |why: &str| Error::PartitionSpec(format!("{}: {why}", field.transform));
        Ok(match field.transform.to_ascii_lowercase().as_str() {
            "identity" => Self::Identity,
            "year" => Self::Year,
            "month" => Self::Month,
            "day" => Self::Day,
            "hour" => Self::Hour,
            "bucket" => {
                let n = field
                    .transform_param
                    .ok_or_else(|| bad("needs transform_param"))?;
                let n = u32::try_from(n)
                    .ok()
                    .filter(|n| (1..=i32::MAX as u32).contains(n))
                    .ok_or_else(|| bad("transform_param must be in 1..=2^31-1"))?;
                Self::Bucket(n)
            }
            _ => return Err(bad("unknown transform")),
        })
    }

    /// Whether the server allows this transform on a source of type `t`.
    pub fn accepts(self, t: ColumnType) -> bool {
        use ColumnType as T;
        let timestamps = [
            T::TimestampS,
            T::TimestampMs,
            T::Timestamp,
            T::TimestampNs,
            T::Timestamptz,
        ];
        match self {
            Self::Identity => !t.is_container() && t != T::Variant,
            Self::Bucket(_) => matches!(
                t,
                T::Int8
                    | T::Int16
                    | T::Int
                    | T::Long
                    | T::Uint8
                    | T::Uint16
                    | T::Decimal
                    | T::Date
                    | T::Time
                    | T::Timestamp
                    | T::Timestamptz
                    | T::String
                    | T::Uuid
                    | T::Binary
            ),
            Self::Year | Self::Month | Self::Day => t == T::Date || timestamps.contains(&t),
            Self::Hour => timestamps.contains(&t),
        }
    }
}

/// The partition value of every row of `array` (a source column of catalog
/// type `t`, in its file Arrow type) under `transform`.
pub fn transform_values(
    array: &ArrayRef,
    t: ColumnType,
    transform: Transform,
) -> Result<Vec<Option<String>>> {
    (0..array.len())
        .map(|row| {
            if array.is_null(row) {
                return Ok(None);
            }
            let value = match transform {
                Transform::Identity => identity(array, row, t),
                Transform::Bucket(n) => bucket_bytes(array, row).map(|b| bucket(&b, n).to_string()),
                Transform::Year | Transform::Month | Transform::Day | Transform::Hour => {
                    temporal(array, row, transform)
                }
            };
            value.map(Some).ok_or_else(|| {
                Error::PartitionValue(format!(
                    "{transform:?} of a {t} value ({}) at row {row} has no pyhoglake form",
                    array.data_type()
                ))
            })
        })
        .collect()
}

/// Microseconds since the epoch of a timestamp (ns floored), or `None` for
/// other types.
fn timestamp_micros(array: &ArrayRef, row: usize) -> Option<i64> {
    match array.data_type() {
        DataType::Timestamp(TimeUnit::Second, _) => array
            .as_primitive::<TimestampSecondType>()
            .value(row)
            .checked_mul(1_000_000),
        DataType::Timestamp(TimeUnit::Millisecond, _) => array
            .as_primitive::<TimestampMillisecondType>()
            .value(row)
            .checked_mul(1_000),
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            Some(array.as_primitive::<TimestampMicrosecondType>().value(row))
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => Some(
            array
                .as_primitive::<TimestampNanosecondType>()
                .value(row)
                .div_euclid(1_000),
        ),
        _ => None,
    }
}

fn temporal(array: &ArrayRef, row: usize, transform: Transform) -> Option<String> {
    const MICROS_PER_HOUR: i64 = 3_600_000_000;
    let days = match array.data_type() {
        DataType::Date32 => i64::from(array.as_primitive::<Date32Type>().value(row)),
        _ => {
            let micros = timestamp_micros(array, row)?;
            if transform == Transform::Hour {
                return Some(micros.div_euclid(MICROS_PER_HOUR).to_string());
            }
            micros.div_euclid(24 * MICROS_PER_HOUR)
        }
    };
    let value = match transform {
        Transform::Day => days,
        Transform::Year => i64::from(date_from_days(days)?.year() - 1970),
        Transform::Month => {
            let d = date_from_days(days)?;
            i64::from(d.year() - 1970) * 12 + i64::from(d.month0())
        }
        _ => return None,
    };
    Some(value.to_string())
}

/// The bytes Iceberg's bucket hash takes: integers and dates as 8-byte LE
/// longs, times/timestamps as 8-byte LE microseconds, strings UTF-8, uuids
/// their 16 bytes, binary raw, decimals minimal big-endian unscaled.
fn bucket_bytes(array: &ArrayRef, row: usize) -> Option<Vec<u8>> {
    let long = |v: i64| Some(v.to_le_bytes().to_vec());
    match array.data_type() {
        DataType::Int8 => long(array.as_primitive::<Int8Type>().value(row).into()),
        DataType::Int16 => long(array.as_primitive::<Int16Type>().value(row).into()),
        DataType::Int32 => long(array.as_primitive::<Int32Type>().value(row).into()),
        DataType::Int64 => long(array.as_primitive::<Int64Type>().value(row)),
        DataType::UInt8 => long(array.as_primitive::<UInt8Type>().value(row).into()),
        DataType::UInt16 => long(array.as_primitive::<UInt16Type>().value(row).into()),
        DataType::Date32 => long(array.as_primitive::<Date32Type>().value(row).into()),
        DataType::Time64(TimeUnit::Microsecond) => {
            long(array.as_primitive::<Time64MicrosecondType>().value(row))
        }
        DataType::Timestamp(..) => long(timestamp_micros(array, row)?),
        DataType::Decimal128(..) => {
            let a: &Decimal128Array = array.as_primitive();
            Some(minimal_be(a.value(row)))
        }
        DataType::Utf8 => Some(array.as_string::<i32>().value(row).as_bytes().to_vec()),
        DataType::FixedSizeBinary(_) => {
            let a: &FixedSizeBinaryArray = array.as_fixed_size_binary();
            Some(a.value(row).to_vec())
        }
        DataType::Binary => Some(array.as_binary::<i32>().value(row).to_vec()),
        _ => None,
    }
}

fn identity(array: &ArrayRef, row: usize, t: ColumnType) -> Option<String> {
    Some(match array.data_type() {
        DataType::Boolean => {
            let a: &BooleanArray = array.as_boolean();
            a.value(row).to_string()
        }
        DataType::Int8 => array.as_primitive::<Int8Type>().value(row).to_string(),
        DataType::Int16 => array.as_primitive::<Int16Type>().value(row).to_string(),
        DataType::Int32 => array.as_primitive::<Int32Type>().value(row).to_string(),
        DataType::Int64 => array.as_primitive::<Int64Type>().value(row).to_string(),
        DataType::UInt8 => array.as_primitive::<UInt8Type>().value(row).to_string(),
        DataType::UInt16 => array.as_primitive::<UInt16Type>().value(row).to_string(),
        DataType::UInt64 => array.as_primitive::<UInt64Type>().value(row).to_string(),
        // Python widens float32 to a double before repr.
        DataType::Float32 => float_repr(array.as_primitive::<Float32Type>().value(row).into()),
        DataType::Float64 => float_repr(array.as_primitive::<Float64Type>().value(row)),
        DataType::Decimal128(_, scale) => decimal_str(
            array
                .as_primitive::<arrow::datatypes::Decimal128Type>()
                .value(row),
            *scale,
        ),
        DataType::Date32 => iso_date(array.as_primitive::<Date32Type>().value(row).into())?,
        DataType::Time64(TimeUnit::Microsecond) => {
            iso_time(array.as_primitive::<Time64MicrosecondType>().value(row))?
        }
        // timestamp_ns identity values are integer nanoseconds.
        DataType::Timestamp(TimeUnit::Nanosecond, _) if t == ColumnType::TimestampNs => array
            .as_primitive::<TimestampNanosecondType>()
            .value(row)
            .to_string(),
        DataType::Timestamp(_, tz) => iso_datetime(timestamp_micros(array, row)?, tz.is_some())?,
        DataType::Utf8 => array.as_string::<i32>().value(row).to_string(),
        DataType::FixedSizeBinary(16) => {
            let a: &FixedSizeBinaryArray = array.as_fixed_size_binary();
            uuid::Uuid::from_slice(a.value(row))
                .ok()?
                .hyphenated()
                .to_string()
        }
        DataType::Binary => {
            base64::engine::general_purpose::STANDARD.encode(array.as_binary::<i32>().value(row))
        }
        _ => return None,
    })
}

#[cfg(test)]
#[path = "partition_value_tests.rs"]
mod tests;
