use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use millpond_proto::{AckOutcome, FlushTrigger, OffsetRange};

use super::letters::Letters;

/// One flush as received from ingest: the rows, the dead letters, and every
/// offset range they cover. Zero batches (or zero rows) is legal: it only
/// advances offsets.
#[derive(Debug, Clone)]
pub struct Flush {
    pub id: String,
    pub trigger: FlushTrigger,
    pub ranges: Vec<OffsetRange>,
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    pub dead_letters: Letters,
    /// The rows went to the sink as they arrived (`Sink::stream_batch`):
    /// `batches` is empty and the sink holds them under `id` and this
    /// stream token.
    pub streamed: Option<u64>,
}

impl Flush {
    pub fn rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }
}

/// What the sink made durable.
#[derive(Debug, Clone, PartialEq)]
pub struct Receipt {
    pub rows_written: u64,
    pub dead_letters_written: u64,
    pub outcome: AckOutcome,
    /// Fully qualified destination table.
    pub table: String,
    /// Lake snapshot that holds the rows, when the sink knows it without
    /// asking again (hoglake's commit answers it; DuckLake's does not).
    pub snapshot_id: Option<i64>,
    pub recorded: Vec<OffsetRange>,
    /// AlreadyRecorded under another flush's id: see
    /// `FlushAck.recorded_by_another_flush`.
    pub recorded_by_another_flush: bool,
}

/// Proof that a value describes a durable write. Only sinks construct it.
#[derive(Debug)]
pub struct Durable<T>(T);

impl<T> Durable<T> {
    pub(crate) fn new(value: T) -> Self {
        Durable(value)
    }

    pub fn into_inner(self) -> T {
        self.0
    }
}
