//! One streamed flush being received: the batches held, or the spool its
//! rows went to, and what spooling them found.
use std::collections::BTreeSet;

use arrow::record_batch::RecordBatch;
use millpond_proto::DeadLetter;

use super::columns::NewColumns;
use crate::sink::ducklake::spool::Spool;
use crate::sink::{Flush, SinkError};

#[derive(Default)]
pub struct Streamed {
    /// Which stream of this flush id (`Sink::stream_begin`).
    pub token: u64,
    pub held: Vec<RecordBatch>,
    pub held_bytes: usize,
    /// Where the rows go once past DUCKLAKE_FILES_FROM_BYTES.
    pub spool: Option<Spool>,
    /// Held whole and inserted (something only the insert path can do).
    pub hold: bool,
    /// Value-level dead letters found while spooling; their topic is set
    /// from the trailer's ranges.
    pub dead_letters: Vec<DeadLetter>,
    pub unsafe_names: BTreeSet<String>,
    pub reserved_names: BTreeSet<String>,
    pub rows_with_unsafe: u64,
    /// New keys past MILLPOND_MAX_COLUMNS, and values that did not convert
    /// (column, type, count): counted once the flush is written.
    pub over_limit: Vec<String>,
    pub unconverted: Vec<(String, String, usize)>,
    /// COMMIT was issued with these files: they may be in the lake, so
    /// they are never deleted.
    pub maybe_in_lake: bool,
    /// Columns the files hold that the table does not have yet: added in
    /// the transaction that registers the files.
    pub pending: NewColumns,
}

impl Streamed {
    /// Nothing is in a file yet: the flush is held and inserted.
    pub fn hold_whole(&mut self) {
        if let Some(mut spool) = self.spool.take() {
            spool.remove();
        }
        self.dead_letters.clear();
        self.unsafe_names.clear();
        self.reserved_names.clear();
        self.rows_with_unsafe = 0;
        self.over_limit.clear();
        self.unconverted.clear();
        self.pending.clear();
        self.hold = true;
    }

    /// The held batches as the flush sent whole, with the trailer's
    /// descriptor.
    pub fn whole(&self, flush: &Flush) -> Result<Flush, SinkError> {
        let (schema, batches) = aligned(self.held.clone())?;
        Ok(Flush {
            schema,
            batches,
            streamed: None,
            ..flush.clone()
        })
    }

    /// Deletes the stream's files unless a COMMIT may have made them part
    /// of the lake (then orphan cleanup decides, from the catalog).
    pub fn forget(&mut self) {
        if let Some(spool) = self.spool.as_mut() {
            if self.maybe_in_lake {
                tracing::warn!(
                    files = spool.files.len(),
                    "a streamed flush's files may be in the lake; keeping them"
                );
                spool.release();
            } else {
                spool.remove();
            }
        }
    }
}

/// Held batches as one schema, as a flush sent whole is aligned.
pub fn aligned(
    held: Vec<RecordBatch>,
) -> Result<(arrow::datatypes::SchemaRef, Vec<RecordBatch>), SinkError> {
    let aligned = millpond_shared::unify::aligned(held)
        .map_err(|e| SinkError::permanent(format!("aligning the flush's batches: {e}")))?;
    Ok(aligned.unwrap_or_else(|| {
        (
            std::sync::Arc::new(arrow::datatypes::Schema::empty()),
            Vec::new(),
        )
    }))
}
