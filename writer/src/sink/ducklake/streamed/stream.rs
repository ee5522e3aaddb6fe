//! One streamed flush being received: the batches held, or the spool its
//! rows went to, and what spooling them found.
use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;

use super::columns::NewColumns;
use super::letter_file::LetterFile;
use crate::sink::ducklake::spool::{Remote, Spool};
use crate::sink::letters::Letters;
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
    pub dead_letters: Letters,
    /// The flush's dead letters as a file of the dead-letter table, once
    /// written (kept across attempts: the letters do not change).
    pub letter_file: Option<LetterFile>,
    /// For a lake on S3: where the dead-letter table's files go.
    pub letters_remote: Option<Arc<Remote>>,
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
        self.dead_letters = Letters::default();
        if let Some(mut file) = self.letter_file.take() {
            file.remove();
        }
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
        if let Some(mut file) = self.letter_file.take() {
            if self.maybe_in_lake {
                file.release();
            } else {
                file.remove();
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

/// The Arrow bytes a received batch holds, counted against
/// DUCKLAKE_FILES_FROM_BYTES: each column's own slice. A batch decoded from
/// Flight has every column in one message buffer, which
/// `get_array_memory_size` counts once per column (a 100-row batch of 80
/// columns counted as over 20 times its size, so streamed flushes far
/// below the threshold went to files).
pub fn held_size(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| {
            c.to_data()
                .get_slice_memory_size()
                .unwrap_or_else(|_| c.get_array_memory_size())
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow_flight::utils::{batches_to_flight_data, flight_data_to_batches};

    use super::*;

    /// A batch as the writer receives it (one Flight message) counts its
    /// own bytes, not the message once per column.
    #[test]
    fn a_received_batch_counts_its_columns_once() {
        let rows = 100;
        let mut fields = Vec::new();
        let mut columns: Vec<ArrayRef> = Vec::new();
        for c in 0..40 {
            fields.push(Field::new(format!("s{c}"), DataType::Utf8, true));
            columns.push(Arc::new(StringArray::from_iter_values(
                (0..rows).map(|i| format!("value {i} of column {c}")),
            )));
            fields.push(Field::new(format!("n{c}"), DataType::Int64, true));
            columns.push(Arc::new(Int64Array::from_iter_values(0..rows as i64)));
        }
        let schema = Arc::new(Schema::new(fields));
        let sent = RecordBatch::try_new(schema.clone(), columns).unwrap();
        let data = batches_to_flight_data(&schema, vec![sent.clone()]).unwrap();
        let message: usize = data.iter().map(|d| d.data_body.len()).sum();
        let received = flight_data_to_batches(&data).unwrap().remove(0);

        let own = held_size(&received);
        assert!(
            own <= message,
            "{own} bytes counted for a {message}-byte message"
        );
        assert!(
            own >= message / 2,
            "{own} bytes counted for a {message}-byte message"
        );
        assert_eq!(own, held_size(&sent), "the same count as the batch sent");
        assert!(
            received.get_array_memory_size() > 20 * message,
            "arrow counts the shared message per column (why held_size exists)"
        );
    }
}
