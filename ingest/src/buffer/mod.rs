//! The pending flush: converted batches, dead letters, their size, and the
//! offset range of every partition consumed since the last flush, with the
//! record at each range's last offset. A pure accumulator: a consumed
//! batch is converted ([`Pending::convert`]), the record stages decide
//! which of its rows go on, and the buffer admits them ([`Pending::admit`]);
//! [`Pending::cut`] takes the whole as one flush. [`Pending::add`] admits
//! every row, with no stages between.
mod columns;
pub mod cost;
mod ranges;
mod rows;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use arrow::array::Array;
use arrow::datatypes::{Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use millpond_proto::coordinates;
use millpond_proto::{value_text, DeadLetter, FlushDescriptor, FlushTrigger, OffsetRange};
use millpond_shared::metrics::dead_letter_reason;
use millpond_shared::unify::unify;

use crate::convert::convert_limited;
use crate::kafka::Record;
use columns::{Columns, COORDINATE_COLUMNS};
use ranges::Ranges;
use rows::{at, record_letter};
pub use rows::{Buffered, Kept, Rows, ValueLetter};

/// A flush cut from the buffer, ready to send.
pub struct Cut {
    pub descriptor: FlushDescriptor,
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    /// Arrow plus dead-letter bytes that were pending.
    pub bytes: usize,
    /// Records the flush covers: rows, dead letters, tombstones, filtered.
    pub records: usize,
    /// Which of them are rows: [`record_digest`] summed over the rows'
    /// coordinates, whatever their order.
    pub rows_digest: u64,
}

/// A record's coordinates mixed into 64 bits (splitmix64's finaliser), to
/// be summed: two flushes over the same ranges with equal sums made the
/// same records rows, short of a 2^-64 coincidence.
pub fn record_digest(partition: i32, offset: i64) -> u64 {
    let mut z = (partition as u32 as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(offset as u64);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What [`Pending`] refuses to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most payload columns one flush carries; values of further keys are
    /// dead letters (`too_many_columns`).
    pub max_columns: usize,
    /// Largest payload converted; a larger one is a dead letter
    /// (`oversized_record`) holding its bytes. Also the most one record's
    /// values may cost as dead letters: a record with more keys than
    /// `max_columns` that could cost more is one dead letter
    /// (`too_many_keys`) holding its bytes (`convert::Limits`).
    pub max_record_bytes: usize,
}

impl Default for Limits {
    /// No limits.
    fn default() -> Self {
        Limits {
            max_columns: usize::MAX,
            max_record_bytes: usize::MAX,
        }
    }
}

#[derive(Default)]
pub struct Pending {
    batches: Vec<RecordBatch>,
    dead_letters: Vec<DeadLetter>,
    bytes: usize,
    rows: usize,
    /// The flush's columns so far and their null padding.
    columns: Columns,
    limits: Limits,
    /// The offsets consumed since the last flush.
    ranges: Ranges,
    /// [`Cut::rows_digest`] so far.
    rows_digest: u64,
}

impl Pending {
    /// A buffer that applies `limits`.
    pub fn with_limits(limits: Limits) -> Self {
        Pending {
            limits,
            ..Pending::default()
        }
    }

    /// Converts consumed records of `topic` and admits every row: objects
    /// become rows, payloads that are not a JSON object become dead
    /// letters carrying their coordinates and bytes, tombstones are only
    /// tracked. Every record's offset joins the flush's ranges.
    pub fn add(&mut self, topic: &str, records: &[Record<'_>]) -> Buffered {
        let rows = self.convert(topic, records);
        self.admit(topic, rows, Kept::default())
    }

    /// Converts consumed records of `topic`: every record's offset joins
    /// the flush's ranges; payloads over the size limit and those that are
    /// not a JSON object become dead letters carrying their coordinates and
    /// bytes; tombstones are only tracked. The rest are [`Rows`].
    pub fn convert<'r>(&mut self, topic: &str, records: &'r [Record<'r>]) -> Rows<'r> {
        let mut sources = Vec::with_capacity(records.len());
        let mut payloads = Vec::with_capacity(records.len());
        let mut oversized = Vec::new();
        self.ranges.track_all(records);
        for r in records {
            match r.payload {
                Some(p) if p.len() > self.limits.max_record_bytes => oversized.push(r),
                Some(p) => {
                    sources.push(r);
                    payloads.push(p);
                }
                None => {}
            }
        }
        let converted = convert_limited(
            &payloads,
            crate::convert::Limits {
                max_columns: self.limits.max_columns,
                max_letter_bytes: self.limits.max_record_bytes,
            },
        );
        let mut buffered = Buffered {
            rows: converted.rows,
            tombstones: records.len() - payloads.len() - oversized.len(),
            dead_letters: Vec::with_capacity(converted.skipped.len() + oversized.len()),
            dead_values: 0,
        };
        for r in oversized {
            buffered
                .dead_letters
                .push(dead_letter_reason::OVERSIZED_RECORD);
            self.dead_letter(record_letter(
                topic,
                r,
                dead_letter_reason::OVERSIZED_RECORD,
            ));
        }
        let mut skipped = converted.skipped.iter().map(|s| s.index).peekable();
        let mut row_sources = Vec::with_capacity(converted.rows);
        for (i, r) in sources.iter().enumerate() {
            if skipped.peek() == Some(&i) {
                skipped.next();
            } else {
                row_sources.push(*r);
            }
        }
        for skip in &converted.skipped {
            let r = sources[skip.index];
            let reason = skip.reason.label();
            buffered.dead_letters.push(reason);
            self.dead_letter(record_letter(topic, r, reason));
        }
        Rows {
            batch: converted.batch,
            sources: row_sources,
            overflow: converted.overflow,
            repeated: converted.repeated,
            buffered,
        }
    }

    /// Admits the rows the stages kept: rows they removed keep their
    /// offsets in the flush's ranges and leave no dead letters.
    pub fn admit(&mut self, topic: &str, rows: Rows<'_>, kept: Kept) -> Buffered {
        let Rows {
            mut batch,
            sources: mut row_sources,
            overflow,
            repeated,
            buffered: mut added,
        } = rows;
        let mut kept_rows: Option<Vec<bool>> = None;
        if let Some(b) = batch.take() {
            let b = kept.batch.unwrap_or(b);
            match kept.keep {
                Some(keep) if keep.true_count() < b.num_rows() => {
                    let mask: Vec<bool> = (0..keep.len())
                        .map(|i| keep.is_valid(i) && keep.value(i))
                        .collect();
                    let kept = arrow::compute::filter_record_batch(&b, &keep)
                        .expect("mask has one entry per row");
                    row_sources = row_sources
                        .iter()
                        .zip(&mask)
                        .filter(|(_, k)| **k)
                        .map(|(r, _)| *r)
                        .collect();
                    added.rows = kept.num_rows();
                    batch = (kept.num_rows() > 0).then_some(kept);
                    kept_rows = Some(mask);
                }
                _ => batch = Some(b),
            }
        }
        // Row numbers of the converted batch -> of the kept rows.
        let renumber: Option<Vec<Option<usize>>> = kept_rows.map(|mask| {
            let mut n = 0;
            mask.iter()
                .map(|&k| {
                    k.then(|| {
                        n += 1;
                        n - 1
                    })
                })
                .collect()
        });
        // A filtered record leaves no dead letter.
        let kept_row = |row: usize| match &renumber {
            Some(map) => map[row],
            None => Some(row),
        };
        let overflow = overflow
            .into_iter()
            .map(|w| (dead_letter_reason::TOO_MANY_COLUMNS, w));
        let repeated = repeated
            .into_iter()
            .map(|w| (dead_letter_reason::DUPLICATE_FIELD_NAME, w));
        let withheld = overflow.chain(repeated).map(|(reason, w)| ValueLetter {
            row: w.row,
            reason,
            column: w.column,
            live_type: "",
            text: w.text.into_bytes(),
        });
        for v in kept.values.into_iter().chain(withheld) {
            let Some(row) = kept_row(v.row) else { continue };
            added.dead_values += 1;
            self.dead_letter(DeadLetter::value(
                topic,
                Some(at(row_sources[row])),
                v.reason,
                &v.column,
                v.live_type,
                v.text,
            ));
        }
        for r in &row_sources {
            self.rows_digest = self
                .rows_digest
                .wrapping_add(record_digest(r.partition, r.offset));
        }
        if let Some(batch) = batch {
            let batch = self.attach(topic, batch, &row_sources, &mut added);
            let bytes = batch.get_array_memory_size();
            self.push(batch, bytes);
        }
        added
    }

    /// Admits a converted batch into the flush: payload keys in the
    /// reserved `_millpond_` namespace and keys beyond the flush's column
    /// limit leave the batch as dead letters, then each row's Kafka
    /// coordinates are appended (see [`millpond_proto::coordinates`]).
    fn attach(
        &mut self,
        topic: &str,
        batch: RecordBatch,
        rows: &[&Record<'_>],
        added: &mut Buffered,
    ) -> RecordBatch {
        let schema = batch.schema();
        let refusals = self.columns.refusals(
            self.limits.max_columns,
            schema.fields().iter().map(|f| f.name()),
        );
        let mut fields = Vec::with_capacity(schema.fields().len() + COORDINATE_COLUMNS);
        let mut arrays = Vec::with_capacity(fields.capacity());
        let columns = schema.fields().iter().zip(batch.columns());
        for ((field, array), refused) in columns.zip(refusals) {
            let Some(reason) = refused else {
                fields.push(field.as_ref().clone());
                arrays.push(array.clone());
                continue;
            };
            for (row, r) in rows.iter().enumerate() {
                if array.is_valid(row) {
                    added.dead_values += 1;
                    self.dead_letter(DeadLetter::value(
                        topic,
                        Some(at(r)),
                        reason,
                        field.name(),
                        "",
                        value_text(array.as_ref(), row),
                    ));
                }
            }
        }
        for (field, array) in coordinates::columns(rows.iter().map(|r| at(r))) {
            fields.push(field);
            arrays.push(array);
        }
        self.columns
            .count_padding(&fields, batch.num_rows(), self.rows);
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options)
            .expect("coordinates have one entry per row")
    }

    /// Takes everything pending as one flush with a new id.
    pub fn cut(
        &mut self,
        topic: &str,
        trigger: FlushTrigger,
        flush_id: String,
    ) -> Result<Cut, ArrowError> {
        let ranges = self.ranges(topic);
        let rows = self.rows;
        let bytes = self.bytes();
        let records = self.ranges.records();
        let rows_digest = std::mem::take(&mut self.rows_digest);
        let dead_letters = std::mem::take(&mut self.dead_letters);
        let (schema, batches) = self.take()?;
        Ok(Cut {
            descriptor: FlushDescriptor {
                flush_id,
                trigger: trigger as i32,
                ranges,
                expected_rows: rows as u64,
                dead_letters,
                trailer: false,
            },
            schema,
            batches,
            bytes,
            records,
            rows_digest,
        })
    }

    fn dead_letter(&mut self, l: DeadLetter) {
        self.bytes += cost::dead_letter(&l);
        self.dead_letters.push(l);
    }

    fn push(&mut self, batch: RecordBatch, bytes: usize) {
        self.rows += batch.num_rows();
        self.bytes += bytes;
        self.batches.push(batch);
    }

    /// Takes the batches converted so far, to stream them to the writer:
    /// the flush's rows, size and columns still count them, and the cut
    /// then carries only the descriptor.
    pub fn drain(&mut self) -> Vec<RecordBatch> {
        std::mem::take(&mut self.batches)
    }

    /// Gives back batches taken by [`Pending::drain`] that could not be
    /// streamed: the flush holds them again, ahead of any later ones.
    pub fn restore(&mut self, mut batches: Vec<RecordBatch>) {
        batches.append(&mut self.batches);
        self.batches = batches;
    }

    /// What the flush will weigh when cut: converted batches, dead
    /// letters, and the null padding that aligns the batches.
    pub fn bytes(&self) -> usize {
        self.bytes + self.columns.padding()
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// True when there is nothing to flush: no records consumed at all.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn ranges(&self, topic: &str) -> Vec<OffsetRange> {
        self.ranges.of(topic)
    }

    /// Takes the batches out, aligned to one schema, and resets the buffer.
    fn take(&mut self) -> Result<(SchemaRef, Vec<RecordBatch>), ArrowError> {
        let batches = std::mem::take(&mut self.batches);
        self.dead_letters.clear();
        self.ranges = Ranges::default();
        self.bytes = 0;
        self.rows = 0;
        self.rows_digest = 0;
        self.columns = Columns::default();
        unify(batches)
    }
}
