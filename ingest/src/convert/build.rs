//! Pass 2: infer each column's type from the tape, then fill typed Arrow
//! builders row by row (absent cells become nulls lazily).

use std::fmt::Write as _;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, GenericStringBuilder, Int64Builder, OffsetSizeTrait,
};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use millpond_shared::decimal::{f64_holds, number_text};

use super::tape::{Tape, Val};

const INT: u8 = 1;
const FLOAT: u8 = 2;
const BIG: u8 = 4;
const BOOL: u8 = 8;
const TEXT: u8 = 16;
/// An integer f64 cannot hold exactly (beyond 2^53).
const WIDE: u8 = 32;
/// A float literal f64 cannot hold exactly (more digits than f64 keeps,
/// or beyond its range).
const INEXACT: u8 = 64;
/// Integers up to this magnitude convert to f64 exactly.
const F64_EXACT_INT: u64 = 1 << 53;

/// Kind bit and (upper bound of) text length of one value.
fn kind(v: &Val<'_>) -> (u8, usize) {
    match *v {
        Val::Null => (0, 0),
        Val::Bool(_) => (BOOL, 5),
        // Longest i64 rendering: "-9223372036854775808".
        Val::Int(i) if i.unsigned_abs() > F64_EXACT_INT => (INT | WIDE, 20),
        Val::Int(_) => (INT, 20),
        Val::BigInt(s) => (BIG, s.len()),
        Val::Float(s) if !f64_holds(s) => (FLOAT | INEXACT, s.len()),
        Val::Float(s) => (FLOAT, s.len()),
        Val::Str(s) => (TEXT, s.len()),
        Val::Text(start, end) => (TEXT, end.saturating_sub(start)),
    }
}

enum Builder {
    Int(Int64Builder),
    Float(Float64Builder),
    Bool(BooleanBuilder),
    Utf8(GenericStringBuilder<i32>),
    LargeUtf8(GenericStringBuilder<i64>),
}

struct Column {
    builder: Builder,
    /// Number of cells appended so far.
    filled: usize,
}

impl Builder {
    fn new(kinds: u8, text_len: usize, rows: usize) -> Option<Builder> {
        Some(match kinds {
            0 => return None,
            k if k & !WIDE == INT => Builder::Int(Int64Builder::with_capacity(rows)),
            // Numbers with a fraction: f64, unless that would change one.
            k if k & !(INT | FLOAT) == 0 => Builder::Float(Float64Builder::with_capacity(rows)),
            BOOL => Builder::Bool(BooleanBuilder::with_capacity(rows)),
            _ if text_len <= i32::MAX as usize => {
                Builder::Utf8(GenericStringBuilder::with_capacity(rows, text_len))
            }
            _ => Builder::LargeUtf8(GenericStringBuilder::with_capacity(rows, text_len)),
        })
    }

    fn append_nulls(&mut self, n: usize) {
        match self {
            Builder::Int(b) => b.append_nulls(n),
            Builder::Float(b) => b.append_nulls(n),
            Builder::Bool(b) => b.append_nulls(n),
            Builder::Utf8(b) => b.append_nulls(n),
            Builder::LargeUtf8(b) => b.append_nulls(n),
        }
    }

    /// Appends exactly one cell.
    fn append(&mut self, v: &Val<'_>, text: &str) {
        match self {
            Builder::Int(b) => match *v {
                Val::Int(i) => b.append_value(i),
                _ => b.append_null(), // unreachable by type inference
            },
            Builder::Float(b) => match *v {
                Val::Int(i) => b.append_value(i as f64),
                // Validated JSON number literals always parse.
                Val::Float(s) => b.append_value(s.parse().unwrap_or(f64::NAN)),
                _ => b.append_null(), // unreachable by type inference
            },
            Builder::Bool(b) => match *v {
                Val::Bool(x) => b.append_value(x),
                _ => b.append_null(), // unreachable by type inference
            },
            Builder::Utf8(b) => append_text(b, v, text),
            Builder::LargeUtf8(b) => append_text(b, v, text),
        }
    }

    fn finish(self) -> (DataType, ArrayRef) {
        match self {
            Builder::Int(mut b) => (DataType::Int64, Arc::new(b.finish())),
            Builder::Float(mut b) => (DataType::Float64, Arc::new(b.finish())),
            Builder::Bool(mut b) => (DataType::Boolean, Arc::new(b.finish())),
            Builder::Utf8(mut b) => (DataType::Utf8, Arc::new(b.finish())),
            Builder::LargeUtf8(mut b) => (DataType::LargeUtf8, Arc::new(b.finish())),
        }
    }
}

/// Text cell: strings as themselves, anything else as its JSON text.
fn append_text<O: OffsetSizeTrait>(b: &mut GenericStringBuilder<O>, v: &Val<'_>, text: &str) {
    match *v {
        Val::Null => b.append_null(),
        Val::Bool(x) => b.append_value(if x { "true" } else { "false" }),
        Val::Int(i) => {
            // Writing into a string builder cannot fail.
            let _ = write!(b, "{i}");
            b.append_value("");
        }
        // A float f64 holds is written as every float column's value would
        // be in text (shared::decimal::number_text); one it cannot hold
        // keeps its digits as written.
        Val::Float(s) if f64_holds(s) => {
            b.append_value(number_text(s.parse().unwrap_or(f64::NAN)));
        }
        Val::BigInt(s) | Val::Float(s) | Val::Str(s) => b.append_value(s),
        Val::Text(start, end) => b.append_value(text.get(start..end).unwrap_or_default()),
    }
}

/// A value the batch does not hold, kept as text for a dead letter: of a
/// column beyond the column limit, or an earlier value of a repeated key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld {
    /// Row of the batch.
    pub row: usize,
    pub column: String,
    /// The value as the batch would have held it in a text column.
    pub text: String,
}

impl Withheld {
    pub(super) fn new(tape: &Tape<'_>, row: usize, col: usize, v: &Val<'_>) -> Withheld {
        Withheld {
            row,
            column: tape
                .names
                .get(col)
                .map(|n| n.to_string())
                .unwrap_or_default(),
            text: val_text(v, &tape.text),
        }
    }
}

fn val_text(v: &Val<'_>, arena: &str) -> String {
    match *v {
        Val::Null => String::new(),
        Val::Bool(x) => x.to_string(),
        Val::Int(i) => i.to_string(),
        Val::BigInt(s) | Val::Float(s) | Val::Str(s) => s.to_owned(),
        Val::Text(start, end) => arena.get(start..end).unwrap_or_default().to_owned(),
    }
}

/// Builds the batch from at most `max_columns` columns (the first non-null
/// ones seen); values of later columns come back [`Withheld`]. `None`
/// when there are no rows.
pub(super) fn build(tape: &Tape<'_>, max_columns: usize) -> (Option<RecordBatch>, Vec<Withheld>) {
    let mut overflow = Vec::new();
    let rows = tape.rows();
    if rows == 0 {
        return (None, overflow);
    }
    let ncols = tape.names.len();
    let mut kinds = vec![0u8; ncols];
    let mut text_len = vec![0usize; ncols];
    for e in &tape.entries {
        let (k, len) = kind(&e.val);
        if let (Some(kd), Some(tl)) = (kinds.get_mut(e.col), text_len.get_mut(e.col)) {
            *kd |= k;
            *tl = tl.saturating_add(len);
        }
    }
    // Columns past the limit are not built at all: memory stays bounded by
    // the limit whatever the number of distinct keys.
    let mut kept = 0;
    let over: Vec<bool> = kinds
        .iter()
        .map(|&k| {
            if k == 0 {
                return false;
            }
            kept += 1;
            kept > max_columns
        })
        .collect();
    let mut cols: Vec<Option<Column>> = kinds
        .iter()
        .zip(&text_len)
        .zip(&over)
        .map(|((&k, &len), &over)| {
            if over {
                return None;
            }
            Builder::new(k, len, rows).map(|builder| Column { builder, filled: 0 })
        })
        .collect();

    let mut start = 0;
    for (row, &end) in tape.row_ends.iter().enumerate() {
        for e in tape.entries.get(start..end).unwrap_or_default() {
            if matches!(e.val, Val::Null) {
                continue; // filled lazily like an absent key
            }
            if over.get(e.col) == Some(&true) {
                overflow.push(Withheld::new(tape, row, e.col, &e.val));
                continue;
            }
            let Some(Some(col)) = cols.get_mut(e.col) else {
                continue;
            };
            if col.filled < row {
                col.builder.append_nulls(row - col.filled);
            }
            col.builder.append(&e.val, &tape.text);
            col.filled = row + 1;
        }
        start = end;
    }

    let mut fields = Vec::new();
    let mut arrays = Vec::new();
    for (name, col) in tape.names.iter().zip(cols) {
        let Some(mut col) = col else { continue };
        if col.filled < rows {
            col.builder.append_nulls(rows - col.filled);
        }
        let (data_type, array) = col.builder.finish();
        fields.push(Field::new(name.as_ref(), data_type, true));
        arrays.push(array);
    }
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    // Cannot fail: every column has exactly `rows` cells of its field's type.
    let batch =
        RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options).ok();
    (batch, overflow)
}
