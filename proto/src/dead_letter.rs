//! Building dead letters: the value-level constructor and the text a value
//! is kept as.
use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Float32Type, Float64Type};
use arrow::util::display::{ArrayFormatter, FormatOptions};

use crate::coordinates::Coordinate;
use crate::DeadLetter;

impl DeadLetter {
    /// A value that could not be stored: its column, the column's live type
    /// (empty when the value was refused by name) and its text. Without
    /// coordinates (an external client that sent none) partition and offset
    /// are -1.
    pub fn value(
        topic: &str,
        at: Option<Coordinate<'_>>,
        reason: &str,
        column: &str,
        live_type: &str,
        original: Vec<u8>,
    ) -> DeadLetter {
        DeadLetter {
            topic: topic.to_owned(),
            partition: at.map_or(-1, |c| c.partition),
            offset: at.map_or(-1, |c| c.offset),
            timestamp_ms: at.and_then(|c| c.timestamp_ms),
            key: at.and_then(|c| c.key.map(<[u8]>::to_vec)),
            reason: reason.to_owned(),
            column: column.to_owned(),
            live_type: live_type.to_owned(),
            original,
            value_level: true,
        }
    }
}

/// The text a dead letter keeps for one cell: strings as their text (the
/// converter already holds nested and mixed values as JSON text), numbers
/// in their shortest exact decimal spelling, booleans as `true`/`false`,
/// anything else as Arrow displays it. Empty for a null cell.
pub fn value_text(array: &dyn Array, row: usize) -> Vec<u8> {
    if array.is_null(row) {
        return Vec::new();
    }
    match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().value(row).as_bytes().to_vec(),
        DataType::LargeUtf8 => array.as_string::<i64>().value(row).as_bytes().to_vec(),
        DataType::Utf8View => array.as_string_view().value(row).as_bytes().to_vec(),
        DataType::Float64 => float_text(array.as_primitive::<Float64Type>().value(row)),
        DataType::Float32 => float_text(f64::from(array.as_primitive::<Float32Type>().value(row))),
        _ => {
            let options = FormatOptions::default();
            match ArrayFormatter::try_new(array, &options) {
                Ok(f) => f.value(row).to_string().into_bytes(),
                Err(_) => Vec::new(),
            }
        }
    }
}

/// Shortest round-trip decimal; non-finite values by name.
fn float_text(v: f64) -> Vec<u8> {
    if v.is_finite() {
        format!("{v}").into_bytes()
    } else {
        format!("{v:?}").into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BooleanArray, Float64Array, Int64Array, StringArray};

    #[test]
    fn cells_keep_their_text() {
        let s = StringArray::from(vec![Some("02134"), None]);
        assert_eq!(value_text(&s, 0), b"02134");
        assert_eq!(value_text(&s, 1), b"");
        let i = Int64Array::from(vec![i64::MIN]);
        assert_eq!(value_text(&i, 0), b"-9223372036854775808");
        let f = Float64Array::from(vec![10.5, 1e21, f64::NAN]);
        assert_eq!(value_text(&f, 0), b"10.5");
        assert_eq!(value_text(&f, 1), b"1000000000000000000000");
        assert_eq!(value_text(&f, 2), b"NaN");
        let b = BooleanArray::from(vec![true]);
        assert_eq!(value_text(&b, 0), b"true");
    }
}
