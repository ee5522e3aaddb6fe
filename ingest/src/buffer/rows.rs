//! What passes between the buffer and the record stages: a consumed batch
//! converted ([`Rows`]), what the stages kept of it ([`Kept`]), and what
//! the buffer did with it ([`Buffered`]).
use arrow::array::BooleanArray;
use arrow::record_batch::RecordBatch;
use millpond_proto::coordinates::Coordinate;
use millpond_proto::DeadLetter;

use crate::convert::Withheld;
use crate::kafka::Record;

/// What the buffer did with a batch of records.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Buffered {
    pub rows: usize,
    pub tombstones: usize,
    /// Dead-letter reason of each record that is not a row.
    pub dead_letters: Vec<&'static str>,
    /// Values dead-lettered out of rows (reserved keys, keys past the
    /// column limit, earlier values of a repeated key, failed coercions).
    pub dead_values: usize,
}

/// A consumed batch converted, its offsets tracked and its records that
/// are no rows dead-lettered, waiting for the stages to decide its rows.
pub struct Rows<'r> {
    /// The converted rows; `None` when no record is one.
    pub batch: Option<RecordBatch>,
    /// The record of each row.
    pub(super) sources: Vec<&'r Record<'r>>,
    pub(super) overflow: Vec<Withheld>,
    pub(super) repeated: Vec<Withheld>,
    pub(super) buffered: Buffered,
}

/// A value left out of a row, to be a dead letter if the row is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueLetter {
    pub row: usize,
    pub reason: &'static str,
    pub column: String,
    /// The column's type in the lake, when the value failed to become it.
    pub live_type: &'static str,
    pub text: Vec<u8>,
}

/// What the stages kept of [`Rows::batch`].
#[derive(Debug, Default)]
pub struct Kept {
    /// The batch to admit in place of the converted one (its columns
    /// coerced); `None`: the converted batch.
    pub batch: Option<RecordBatch>,
    /// One entry per row: kept or not. `None`: every row.
    pub keep: Option<BooleanArray>,
    /// Values taken out of the rows, by row of the converted batch.
    pub values: Vec<ValueLetter>,
}

/// A record that is not a row, with its coordinates and bytes.
pub(super) fn record_letter(topic: &str, r: &Record<'_>, reason: &str) -> DeadLetter {
    DeadLetter {
        topic: topic.to_owned(),
        partition: r.partition,
        offset: r.offset,
        timestamp_ms: r.timestamp_ms,
        key: r.key.map(<[u8]>::to_vec),
        reason: reason.to_owned(),
        column: String::new(),
        live_type: String::new(),
        original: r.payload.unwrap_or_default().to_vec(),
        value_level: false,
    }
}

pub(super) fn at<'a>(r: &Record<'a>) -> Coordinate<'a> {
    Coordinate {
        partition: r.partition,
        offset: r.offset,
        timestamp_ms: r.timestamp_ms,
        key: r.key,
    }
}
