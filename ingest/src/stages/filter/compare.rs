//! How one cell compares with a filter's listed values: by the value its
//! record sent, never by the type its batch's column was given. The
//! converter types a column per batch (one `1.5` makes integers Float64, a
//! string among numbers makes them text), so a rule per column type would
//! decide a record by its neighbours.
//!
//! Every listed token and every cell is read as one value:
//! * a number, by its exact decimal value: Int64 cells; Float64 cells as
//!   the shortest decimal that reads back as the f64, which is the literal
//!   sent (the converter keeps a float column only when f64 holds every
//!   literal exactly); text that is a JSON number literal (`"1.0"`, `"1e0"`,
//!   the converter's spelling of a number in a mixed column). `1.0` equals
//!   `1`, `1.5` equals no integer, `"02"` is no number;
//! * text, by spelling: other text, and booleans as `true` / `false`;
//! * a uuid, by its 16 bytes (a uuid-pinned column against listed uuids).
//!
//! A cell of any other type (a column pinned to a timestamp) compares with
//! nothing.
use std::collections::HashMap;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use millpond_shared::decimal::Decimal;

use super::Values;

/// How one row compares with a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cell {
    /// Null, or the batch has no such column.
    Null,
    /// Equal to the listed value at this index.
    In(usize),
    Out,
    /// A value of a type no list compares with.
    Incomparable,
}

/// Integers up to this magnitude are their f64's shortest decimal.
const F64_EXACT_INT: f64 = 9_007_199_254_740_992.0;

/// A filter's listed values, looked up by what a cell holds. The first
/// listing of a value wins.
#[derive(Debug, Default)]
pub(super) struct Index {
    /// Listed numbers that are integers in i64's range.
    ints: HashMap<i64, usize>,
    /// Every other listed number.
    numbers: HashMap<Decimal, usize>,
    /// Listed tokens that are not JSON number literals.
    texts: HashMap<String, usize>,
    /// Listed tokens that are uuids.
    uuids: HashMap<[u8; 16], usize>,
}

impl Index {
    pub(super) fn new(values: &Values) -> Index {
        let mut index = Index::default();
        match values {
            Values::Int(list) => {
                for (i, v) in list.iter().enumerate() {
                    index.ints.entry(*v).or_insert(i);
                }
            }
            Values::Text(list) => {
                for (i, t) in list.iter().enumerate() {
                    match number(t) {
                        Some(Number::Int(v)) => {
                            index.ints.entry(v).or_insert(i);
                        }
                        Some(Number::Other(d)) => {
                            index.numbers.entry(d).or_insert(i);
                        }
                        None => {
                            index.texts.entry(t.clone()).or_insert(i);
                        }
                    }
                    if let Some(u) = millpond_shared::uuid_text::parse(t) {
                        index.uuids.entry(u).or_insert(i);
                    }
                }
            }
        }
        index
    }

    /// Whether no listed value is a uuid.
    pub(super) fn has_no_uuid(&self) -> bool {
        self.uuids.is_empty()
    }

    /// One cell per row of `col` (all [`Cell::Null`] without a column).
    pub(super) fn cells(&self, col: Option<&dyn Array>, rows: usize) -> Vec<Cell> {
        let Some(col) = col else {
            return vec![Cell::Null; rows];
        };
        let found = |i: Option<&usize>| i.map_or(Cell::Out, |i| Cell::In(*i));
        let per_row = |f: &dyn Fn(usize) -> Cell| -> Vec<Cell> {
            (0..col.len())
                .map(|r| if col.is_null(r) { Cell::Null } else { f(r) })
                .collect()
        };
        match col.data_type() {
            DataType::Int64 => {
                let a = col.as_primitive::<Int64Type>();
                per_row(&|r| found(self.ints.get(&a.value(r))))
            }
            DataType::Float64 => {
                let a = col.as_primitive::<Float64Type>();
                per_row(&|r| self.float(a.value(r)))
            }
            DataType::Utf8 => {
                let a = col.as_string::<i32>();
                per_row(&|r| self.text(a.value(r)))
            }
            DataType::LargeUtf8 => {
                let a = col.as_string::<i64>();
                per_row(&|r| self.text(a.value(r)))
            }
            DataType::Boolean => {
                let a = col.as_boolean();
                per_row(&|r| found(self.texts.get(if a.value(r) { "true" } else { "false" })))
            }
            DataType::FixedSizeBinary(16) => {
                let a = col.as_fixed_size_binary();
                per_row(&|r| {
                    let bytes: Option<[u8; 16]> = a.value(r).try_into().ok();
                    found(bytes.and_then(|b| self.uuids.get(&b)))
                })
            }
            _ => per_row(&|_| Cell::Incomparable),
        }
    }

    fn number(&self, n: &Number) -> Cell {
        let i = match n {
            Number::Int(v) => self.ints.get(v),
            Number::Other(d) => self.numbers.get(d),
        };
        i.map_or(Cell::Out, |i| Cell::In(*i))
    }

    /// The number the record sent: the f64's shortest decimal.
    fn float(&self, f: f64) -> Cell {
        if f.fract() == 0.0 && f.abs() < F64_EXACT_INT {
            return self.number(&Number::Int(f as i64));
        }
        if self.ints.is_empty() && self.numbers.is_empty() {
            return Cell::Out;
        }
        // Non-finite values (only from a pinned column) parse as no number.
        match number(&format!("{f:e}")) {
            Some(n) => self.number(&n),
            None => Cell::Out,
        }
    }

    fn text(&self, s: &str) -> Cell {
        match number(s) {
            Some(n) => self.number(&n),
            None => self.texts.get(s).map_or(Cell::Out, |i| Cell::In(*i)),
        }
    }
}

/// A JSON number literal's exact value.
enum Number {
    /// An integer in i64's range, however written (`1`, `1.0`, `1e0`).
    Int(i64),
    Other(Decimal),
}

/// The value of `s` when it is a JSON number literal (RFC 8259: no `+`,
/// no leading zero, no surrounding space).
fn number(s: &str) -> Option<Number> {
    let b = s.as_bytes();
    let first_digit = *b.get(usize::from(b.first() == Some(&b'-')))?;
    if !first_digit.is_ascii_digit() {
        return None;
    }
    // Plain integers, the common case, without building a Decimal.
    let plain = b.len() <= 19
        && b.iter().skip(1).all(u8::is_ascii_digit)
        && !(first_digit == b'0' && b.len() > usize::from(b[0] == b'-') + 1);
    if plain {
        if let Ok(v) = s.parse::<i64>() {
            return Some(Number::Int(v));
        }
    }
    let d = Decimal::parse(s)?;
    Some(match d.to_int().and_then(|v| i64::try_from(v).ok()) {
        Some(v) => Number::Int(v),
        None => Number::Other(d),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        ArrayRef, BooleanArray, Float64Array, Int64Array, LargeStringArray, StringArray,
        TimestampMicrosecondArray,
    };
    use std::sync::Arc;

    fn text_list(raw: &str) -> Index {
        Index::new(&Values::Text(raw.split(',').map(str::to_owned).collect()))
    }

    fn cells(index: &Index, col: ArrayRef) -> Vec<Cell> {
        index.cells(Some(col.as_ref()), col.len())
    }

    #[test]
    fn numbers_compare_by_exact_decimal_value() {
        let ints = Index::new(&Values::Int(vec![1, 2]));
        // Int64, Float64 and text spellings of one number agree.
        let int = Arc::new(Int64Array::from(vec![Some(1), Some(3), None])) as ArrayRef;
        assert_eq!(cells(&ints, int), [Cell::In(0), Cell::Out, Cell::Null]);
        let float = Arc::new(Float64Array::from(vec![1.0, 1.5, 2.0, -0.0, 1e300])) as ArrayRef;
        assert_eq!(
            cells(&ints, float),
            [Cell::In(0), Cell::Out, Cell::In(1), Cell::Out, Cell::Out]
        );
        let text = Arc::new(StringArray::from(vec![
            "1", "1.0", "1e0", "10e-1", "02", "+1", " 1", "1.5", "x", "-0", "1.",
        ])) as ArrayRef;
        assert_eq!(
            cells(&ints, text),
            [
                Cell::In(0),
                Cell::In(0),
                Cell::In(0),
                Cell::In(0),
                Cell::Out,
                Cell::Out,
                Cell::Out,
                Cell::Out,
                Cell::Out,
                Cell::Out,
                Cell::Out
            ]
        );
        // Listed fractions and integers beyond i64 match only their value.
        let other = text_list("1.50,18446744073709551616,0,-2");
        let float = Arc::new(Float64Array::from(vec![
            1.5,
            1.8446744073709552e19,
            -0.0,
            -2.0,
        ])) as ArrayRef;
        assert_eq!(
            cells(&other, float),
            [Cell::In(0), Cell::Out, Cell::In(2), Cell::In(3)]
        );
        let text = Arc::new(LargeStringArray::from(vec![
            "1.5",
            "15e-1",
            "18446744073709551616",
            "1.8446744073709551616e19",
            "18446744073709551617",
            "-0.0",
        ])) as ArrayRef;
        assert_eq!(
            cells(&other, text),
            [
                Cell::In(0),
                Cell::In(0),
                Cell::In(1),
                Cell::In(1),
                Cell::Out,
                Cell::In(2)
            ]
        );
    }

    #[test]
    fn a_float_is_the_literal_f64_holds_not_its_binary_value() {
        // 2^60 is the f64 "1152921504606847000" parses to, and f64 holds
        // that literal exactly: the cell is that literal.
        let list = text_list("1152921504606846976,1152921504606847000,0.1");
        let col = Arc::new(Float64Array::from(vec![2f64.powi(60), 0.1])) as ArrayRef;
        assert_eq!(cells(&list, col), [Cell::In(1), Cell::In(2)]);
    }

    #[test]
    fn text_and_booleans_compare_by_spelling() {
        let list = text_list("x,true,02");
        let bools = Arc::new(BooleanArray::from(vec![Some(true), Some(false), None])) as ArrayRef;
        assert_eq!(cells(&list, bools), [Cell::In(1), Cell::Out, Cell::Null]);
        let text = Arc::new(StringArray::from(vec!["x", "true", "02", "2", "X"])) as ArrayRef;
        assert_eq!(
            cells(&list, text),
            [Cell::In(0), Cell::In(1), Cell::In(2), Cell::Out, Cell::Out]
        );
        // A mixed list: its numbers compare as numbers with every column type.
        let mixed = text_list("1,x");
        let int = Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef;
        assert_eq!(cells(&mixed, int), [Cell::In(0), Cell::Out]);
        // An integer list matches no boolean.
        let ints = Index::new(&Values::Int(vec![1]));
        let bools = Arc::new(BooleanArray::from(vec![true])) as ArrayRef;
        assert_eq!(cells(&ints, bools), [Cell::Out]);
    }

    #[test]
    fn other_types_compare_with_nothing_and_a_missing_column_is_null() {
        let list = text_list("0,1");
        let ts = Arc::new(TimestampMicrosecondArray::from(vec![Some(0), None])) as ArrayRef;
        assert_eq!(cells(&list, ts), [Cell::Incomparable, Cell::Null]);
        assert_eq!(list.cells(None, 2), [Cell::Null, Cell::Null]);
    }

    #[test]
    fn first_listing_of_a_value_wins() {
        let list = text_list("x,1.0,1,x");
        let text = Arc::new(StringArray::from(vec!["1", "x"])) as ArrayRef;
        assert_eq!(cells(&list, text), [Cell::In(1), Cell::In(0)]);
    }
}
