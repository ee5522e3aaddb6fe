//! The pending flush: converted batches, dead letters, their size, and the
//! offset range of every partition consumed since the last flush, with the
//! record at each range's last offset. The consume loop, the re-read and
//! the replay tool reach it through `stages::Stages` (`add_filtered` and
//! [`Pending::cut`]); [`Pending::add`] is the same without a filter stage.
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::Array;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use millpond_proto::coordinates::{self, Coordinate};
use millpond_proto::{
    value_text, DeadLetter, FlushDescriptor, FlushTrigger, LastRecord, OffsetRange,
};
use millpond_shared::metrics::dead_letter_reason;
pub use millpond_shared::unify::unify;

use crate::convert::convert_limited;

/// One consumed Kafka record.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: Option<i64>,
    pub key: Option<&'a [u8]>,
    /// `None` is a tombstone.
    pub payload: Option<&'a [u8]>,
}

impl<'a> Record<'a> {
    /// The record of a consumed Kafka message.
    pub fn of(m: &'a impl rdkafka::message::Message) -> Self {
        Record {
            partition: m.partition(),
            offset: m.offset(),
            timestamp_ms: m.timestamp().to_millis(),
            key: m.key(),
            payload: m.payload(),
        }
    }

    /// What a flush's range remembers of its last record: the timestamp
    /// and a checksum of the key and value (CRC-32 of each), enough to
    /// tell this topic from another one created under its name.
    pub fn last_record(&self) -> LastRecord {
        let crc = |b: Option<&[u8]>| u64::from(crc32fast::hash(b.unwrap_or_default()));
        LastRecord {
            timestamp_ms: self.timestamp_ms,
            checksum: crc(self.key) << 32 | crc(self.payload),
        }
    }
}

/// What [`Pending::add`] did with a batch of records.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Added {
    pub rows: usize,
    pub tombstones: usize,
    /// Dead-letter reason of each record that is not a row.
    pub dead_letters: Vec<&'static str>,
    /// Values dead-lettered out of rows (reserved keys, keys past the
    /// column limit, earlier values of a repeated key, failed coercions).
    pub dead_values: usize,
    /// Records a filter stage removed, by reason (not rows, not dead letters).
    pub filtered: Vec<(&'static str, usize)>,
    /// Rows kept by the allowlist, per matched value.
    pub matched: Vec<(String, usize)>,
    /// (target type, clean) per column coercion touched.
    pub coerced: Vec<(&'static str, bool)>,
    /// See [`Decision::invalid_values`].
    pub invalid_values: usize,
}

/// What the record stages decided for one converted batch.
#[derive(Debug, Default)]
pub struct Decision {
    /// The batch with its columns coerced; `None`: unchanged.
    pub batch: Option<RecordBatch>,
    /// Values coercion left NULL, to be dead letters (for kept rows).
    pub nulled: Vec<crate::stages::coerce::Nulled>,
    /// (target type, clean) per coerced column.
    pub coerced: Vec<(&'static str, bool)>,
    /// One entry per row: kept or not. `None`: keep everything.
    pub keep: Option<arrow::array::BooleanArray>,
    pub filtered: Vec<(&'static str, usize)>,
    pub matched: Vec<(String, usize)>,
    /// Filters whose listed values partly cannot match their column (for
    /// `errors_total{type="filter_value_invalid"}`).
    pub invalid_values: usize,
}

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
    /// (`oversized_record`) holding its bytes.
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

/// A record that is not a row, with its coordinates and bytes.
fn record_letter(topic: &str, r: &Record<'_>, reason: &str) -> DeadLetter {
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

fn at<'a>(r: &Record<'a>) -> Coordinate<'a> {
    Coordinate {
        partition: r.partition,
        offset: r.offset,
        timestamp_ms: r.timestamp_ms,
        key: r.key,
    }
}

/// Columns ingest appends to every batch (see `millpond_proto::coordinates`).
const COORDINATE_COLUMNS: usize = 4;

/// Bytes of a null array of `t` with `rows` rows, as `new_null_array`
/// allocates it.
fn null_bytes(t: &DataType, rows: usize) -> usize {
    let bitmap = rows.div_ceil(8);
    match t {
        DataType::Utf8 | DataType::Binary => (rows + 1) * 4 + bitmap,
        DataType::LargeUtf8 | DataType::LargeBinary => (rows + 1) * 8 + bitmap,
        DataType::Boolean => 2 * bitmap,
        t => t.primitive_width().unwrap_or(8) * rows + bitmap,
    }
}

/// Bytes a dead letter holds besides its key and original bytes.
const DEAD_LETTER_OVERHEAD: usize = 64;

#[derive(Default)]
pub struct Pending {
    batches: Vec<RecordBatch>,
    dead_letters: Vec<DeadLetter>,
    bytes: usize,
    /// Bytes of the null columns `unify` will add at the cut: what is sent
    /// is what counts against FLUSH_SIZE.
    padding: usize,
    rows: usize,
    /// Columns of the flush so far (payload and coordinates), first-seen.
    columns: Vec<DataType>,
    column_index: HashMap<String, usize>,
    limits: Limits,
    /// partition -> (first, last) offsets seen since the last flush,
    /// including skipped records and tombstones.
    ranges: BTreeMap<i32, (i64, i64)>,
    /// partition -> the record at the range's last offset.
    last_records: HashMap<i32, (i64, LastRecord)>,
    /// Records seen since the last flush.
    records: usize,
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

    /// Converts consumed records of `topic`: objects become rows, payloads
    /// that are not a JSON object become dead letters carrying their
    /// coordinates and bytes, tombstones are only tracked. Every record's
    /// offset joins the flush's ranges.
    pub fn add(&mut self, topic: &str, records: &[Record<'_>]) -> Added {
        self.add_filtered(topic, records, |_| Decision::default())
    }

    /// [`Pending::add`] with a filter stage between conversion and the
    /// buffer: rows it removes are counted in [`Added::filtered`], keep
    /// their offsets in the flush's ranges, and leave no dead letters.
    pub fn add_filtered(
        &mut self,
        topic: &str,
        records: &[Record<'_>],
        filter: impl FnOnce(&RecordBatch) -> Decision,
    ) -> Added {
        let mut sources = Vec::with_capacity(records.len());
        let mut payloads = Vec::with_capacity(records.len());
        let mut oversized = Vec::new();
        self.remember_last(records);
        for r in records {
            self.track(r.partition, r.offset);
            match r.payload {
                Some(p) if p.len() > self.limits.max_record_bytes => oversized.push(r),
                Some(p) => {
                    sources.push(r);
                    payloads.push(p);
                }
                None => {}
            }
        }
        let converted = convert_limited(&payloads, self.limits.max_columns);
        let mut added = Added {
            rows: converted.rows,
            tombstones: records.len() - payloads.len() - oversized.len(),
            dead_letters: Vec::with_capacity(converted.skipped.len() + oversized.len()),
            dead_values: 0,
            filtered: Vec::new(),
            matched: Vec::new(),
            coerced: Vec::new(),
            invalid_values: 0,
        };
        for r in oversized {
            added
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
            added.dead_letters.push(reason);
            self.dead_letter(record_letter(topic, r, reason));
        }
        let mut batch = converted.batch;
        let mut kept_rows: Option<Vec<bool>> = None;
        let mut nulled = Vec::new();
        if let Some(b) = batch.take() {
            let decision = filter(&b);
            let b = decision.batch.unwrap_or(b);
            nulled = decision.nulled;
            added.coerced = decision.coerced;
            added.invalid_values = decision.invalid_values;
            added.filtered = decision.filtered;
            added.matched = decision.matched;
            match decision.keep {
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
        let kept = |row: usize| match &renumber {
            Some(map) => map[row],
            None => Some(row),
        };
        for n in nulled {
            let Some(row) = kept(n.row) else { continue };
            added.dead_values += 1;
            self.dead_letter(DeadLetter::value(
                topic,
                Some(at(row_sources[row])),
                dead_letter_reason::COLUMN_COERCION,
                &n.column,
                n.target,
                n.text,
            ));
        }
        let overflow = converted
            .overflow
            .into_iter()
            .map(|w| (dead_letter_reason::TOO_MANY_COLUMNS, w));
        let repeated = converted
            .repeated
            .into_iter()
            .map(|w| (dead_letter_reason::DUPLICATE_FIELD_NAME, w));
        for (reason, w) in overflow.chain(repeated) {
            let Some(row) = kept(w.row) else { continue };
            added.dead_values += 1;
            self.dead_letter(DeadLetter::value(
                topic,
                Some(at(row_sources[row])),
                reason,
                &w.column,
                "",
                w.text.into_bytes(),
            ));
        }
        for r in &row_sources {
            self.rows_digest = self
                .rows_digest
                .wrapping_add(record_digest(r.partition, r.offset));
        }
        if let Some(batch) = batch {
            let batch = self.admit(topic, batch, &row_sources, &mut added);
            let bytes = batch.get_array_memory_size();
            self.push(batch, bytes);
        }
        added
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
        let records = std::mem::take(&mut self.records);
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
        self.bytes += DEAD_LETTER_OVERHEAD + l.original.len() + l.key.as_ref().map_or(0, Vec::len);
        self.dead_letters.push(l);
    }

    /// Admits a converted batch into the flush: payload keys in the
    /// reserved `_millpond_` namespace and keys beyond the flush's column
    /// limit leave the batch as dead letters, then each row's Kafka
    /// coordinates are appended (see [`millpond_proto::coordinates`]).
    fn admit(
        &mut self,
        topic: &str,
        batch: RecordBatch,
        rows: &[&Record<'_>],
        added: &mut Added,
    ) -> RecordBatch {
        let schema = batch.schema();
        let payload_columns = self.column_index.len().saturating_sub(COORDINATE_COLUMNS);
        let mut room = self.limits.max_columns.saturating_sub(payload_columns);
        let mut fields = Vec::with_capacity(schema.fields().len() + COORDINATE_COLUMNS);
        let mut arrays = Vec::with_capacity(fields.capacity());
        for (field, array) in schema.fields().iter().zip(batch.columns()) {
            let refused = if coordinates::is_reserved(field.name()) {
                Some(dead_letter_reason::RESERVED_FIELD_NAME)
            } else if self.column_index.contains_key(field.name()) {
                None
            } else if room > 0 {
                room -= 1;
                None
            } else {
                Some(dead_letter_reason::TOO_MANY_COLUMNS)
            };
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
        self.count_padding(&fields, batch.num_rows());
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options)
            .expect("coordinates have one entry per row")
    }

    /// Adds the null padding this batch will cost at the cut: its rows for
    /// every flush column it lacks, and every earlier row for each column
    /// it brings first. Linear in the number of columns.
    fn count_padding(&mut self, fields: &[Field], rows: usize) {
        let mut present = vec![false; self.columns.len()];
        for f in fields {
            match self.column_index.get(f.name()) {
                Some(&i) => present[i] = true,
                None => {
                    self.padding += null_bytes(f.data_type(), self.rows);
                    self.column_index
                        .insert(f.name().clone(), self.columns.len());
                    self.columns.push(f.data_type().clone());
                    present.push(true);
                }
            }
        }
        for (t, _) in self.columns.iter().zip(&present).filter(|(_, p)| !**p) {
            self.padding += null_bytes(t, rows);
        }
    }

    /// Remembers each partition's last record of `records` (each
    /// partition's records come in offset order): one checksum per
    /// partition per batch.
    fn remember_last(&mut self, records: &[Record<'_>]) {
        let mut seen: Vec<i32> = Vec::new();
        for r in records.iter().rev() {
            if seen.contains(&r.partition) {
                continue;
            }
            seen.push(r.partition);
            let newer = self
                .last_records
                .get(&r.partition)
                .is_none_or(|(o, _)| r.offset > *o);
            if newer {
                self.last_records
                    .insert(r.partition, (r.offset, r.last_record()));
            }
        }
    }

    fn track(&mut self, partition: i32, offset: i64) {
        self.records += 1;
        self.ranges
            .entry(partition)
            .and_modify(|(_, last)| *last = (*last).max(offset))
            .or_insert((offset, offset));
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
        self.bytes + self.padding
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// True when there is nothing to flush: no records consumed at all.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn ranges(&self, topic: &str) -> Vec<OffsetRange> {
        self.ranges
            .iter()
            .map(|(p, (first, last))| {
                let last_record = self
                    .last_records
                    .get(p)
                    .filter(|(o, _)| o == last)
                    .map(|(_, m)| *m);
                OffsetRange::new(topic, *p, *first, *last).with_last_record(last_record)
            })
            .collect()
    }

    /// Takes the batches out, aligned to one schema, and resets the buffer.
    fn take(&mut self) -> Result<(SchemaRef, Vec<RecordBatch>), ArrowError> {
        let batches = std::mem::take(&mut self.batches);
        self.dead_letters.clear();
        self.ranges.clear();
        self.last_records.clear();
        self.bytes = 0;
        self.padding = 0;
        self.rows = 0;
        self.records = 0;
        self.rows_digest = 0;
        self.columns.clear();
        self.column_index.clear();
        unify(batches)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_every_tracked_offset() {
        let mut p = Pending::default();
        for (part, off) in [(1, 10), (0, 5), (1, 11), (0, 6), (1, 12)] {
            p.track(part, off);
        }
        assert_eq!(
            p.ranges("t"),
            vec![
                OffsetRange::new("t", 0, 5, 6),
                OffsetRange::new("t", 1, 10, 12)
            ]
        );
        p.take().unwrap();
        assert!(p.is_empty());
    }

    fn rec(partition: i32, offset: i64, payload: Option<&'static [u8]>) -> Record<'static> {
        Record {
            partition,
            offset,
            timestamp_ms: Some(1_700_000_000_000 + offset),
            key: Some(b"k"),
            payload,
        }
    }

    #[test]
    fn a_flush_never_carries_more_columns_than_its_limit() {
        let mut p = Pending::with_limits(Limits {
            max_columns: 3,
            ..Limits::default()
        });
        let added = p.add(
            "t",
            &[rec(0, 1, Some(br#"{"a":1,"b":2,"c":3,"d":4,"e":"x"}"#))],
        );
        assert_eq!((added.rows, added.dead_values), (1, 2));
        let added = p.add("t", &[rec(0, 2, Some(br#"{"a":5,"f":6}"#))]);
        assert_eq!((added.rows, added.dead_values), (1, 1));
        let cut = p.cut("t", FlushTrigger::Size, "f".into()).unwrap();
        let payload: Vec<_> = cut
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .filter(|n| !coordinates::is_reserved(n))
            .collect();
        assert_eq!(payload, ["a", "b", "c"]);
        let letters: Vec<_> = cut
            .descriptor
            .dead_letters
            .iter()
            .map(|l| {
                (
                    l.offset,
                    l.column.as_str(),
                    l.reason.as_str(),
                    l.original.as_slice(),
                )
            })
            .collect();
        assert_eq!(
            letters,
            [
                (1, "d", "too_many_columns", &b"4"[..]),
                (1, "e", "too_many_columns", &b"x"[..]),
                (2, "f", "too_many_columns", &b"6"[..]),
            ]
        );
    }

    #[test]
    fn earlier_values_of_a_repeated_key_are_duplicate_field_name_dead_letters() {
        let recs = [
            rec(0, 1, Some(br#"{"a":1,"a":2}"#)),
            rec(0, 2, Some(br#"{"a":3}"#)),
            rec(0, 3, Some(br#"{"a":"x","a":"y","a":4}"#)),
        ];
        let mut p = Pending::default();
        let added = p.add("t", &recs);
        assert_eq!((added.rows, added.dead_values), (3, 3));
        assert!(added.dead_letters.is_empty(), "every record is a row");
        let cut = p.cut("t", FlushTrigger::Size, "f".into()).unwrap();
        let a = cut.batches[0].column_by_name("a").unwrap();
        let a = a.as_any().downcast_ref::<arrow::array::Int64Array>();
        assert_eq!(
            a.map(|a| a.iter().collect::<Vec<_>>()),
            Some(vec![Some(2), Some(3), Some(4)]),
            "the last value lands"
        );
        let letters: Vec<_> = cut
            .descriptor
            .dead_letters
            .iter()
            .map(|l| {
                (
                    l.offset,
                    l.reason.as_str(),
                    l.column.as_str(),
                    l.original.as_slice(),
                    l.value_level,
                    l.key.as_deref(),
                )
            })
            .collect();
        let dup = "duplicate_field_name";
        let k = Some(&b"k"[..]);
        assert_eq!(
            letters,
            [
                (1, dup, "a", &b"1"[..], true, k),
                (3, dup, "a", &b"x"[..], true, k),
                (3, dup, "a", &b"y"[..], true, k),
            ]
        );
        // A record a filter removes leaves no dead letter.
        let mut p = Pending::default();
        let added = p.add_filtered("t", &recs, |_| Decision {
            keep: Some(arrow::array::BooleanArray::from(vec![false, true, true])),
            filtered: vec![("filter_excluded", 1)],
            ..Decision::default()
        });
        assert_eq!((added.rows, added.dead_values), (2, 2));
        let cut = p.cut("t", FlushTrigger::Size, "f".into()).unwrap();
        assert!(cut.descriptor.dead_letters.iter().all(|l| l.offset == 3));
    }

    #[test]
    fn oversized_records_are_dead_letters_with_their_bytes() {
        let mut p = Pending::with_limits(Limits {
            max_record_bytes: 10,
            ..Limits::default()
        });
        let added = p.add(
            "t",
            &[
                rec(0, 1, Some(br#"{"a":1}"#)),
                rec(0, 2, Some(br#"{"a":"0123456789"}"#)),
                rec(0, 3, None),
            ],
        );
        assert_eq!((added.rows, added.tombstones), (1, 1));
        assert_eq!(added.dead_letters, ["oversized_record"]);
        let cut = p.cut("t", FlushTrigger::Size, "f".into()).unwrap();
        let l = &cut.descriptor.dead_letters[0];
        assert_eq!(
            (l.offset, l.original.as_slice(), l.value_level),
            (2, &br#"{"a":"0123456789"}"#[..], false)
        );
    }

    #[test]
    fn the_size_counted_is_the_size_sent_padding_included() {
        // 20 event types with disjoint keys: each batch is padded with the
        // 190 columns of the others at the cut.
        let mut p = Pending::default();
        let payloads: Vec<Vec<String>> = (0..20)
            .map(|t| {
                (0..100)
                    .map(|i| {
                        let keys: Vec<String> =
                            (0..10).map(|k| format!(r#""t{t}_k{k}":{i}"#)).collect();
                        format!("{{{}}}", keys.join(","))
                    })
                    .collect()
            })
            .collect();
        let mut offset = 0;
        let mut unpadded = 0;
        for batch in &payloads {
            let recs: Vec<Record<'_>> = batch
                .iter()
                .map(|s| {
                    offset += 1;
                    Record {
                        partition: 0,
                        offset,
                        timestamp_ms: None,
                        key: None,
                        payload: Some(s.as_bytes()),
                    }
                })
                .collect();
            p.add("t", &recs);
            unpadded = p.bytes;
        }
        let counted = p.bytes();
        let cut = p.cut("t", FlushTrigger::Size, "f".into()).unwrap();
        let sent: usize = cut
            .batches
            .iter()
            .map(RecordBatch::get_array_memory_size)
            .sum();
        assert_eq!(cut.schema.fields().len(), 200 + COORDINATE_COLUMNS);
        assert!(
            counted > 5 * unpadded,
            "padding dominates: {counted} vs {unpadded}"
        );
        assert!(
            counted <= sent && sent <= counted + counted / 5,
            "counted {counted}, sent {sent}"
        );
    }

    #[test]
    fn rows_carry_their_coordinates_and_reserved_keys_become_dead_letters() {
        use millpond_proto::coordinates::Coordinates;
        let mut p = Pending::default();
        let added = p.add(
            "t",
            &[
                rec(0, 7, Some(br#"{"a":1,"_millpond_offset":"x"}"#)),
                rec(0, 8, Some(b"[1]")),
                rec(2, 3, Some(br#"{"a":2}"#)),
            ],
        );
        assert_eq!((added.rows, added.dead_values), (2, 1));
        let cut = p.cut("t", FlushTrigger::Size, "f".into()).unwrap();
        let batch = &cut.batches[0];
        let c = Coordinates::read(batch)
            .unwrap()
            .expect("coordinates attached");
        assert_eq!((c.get(0).partition, c.get(0).offset), (0, 7));
        assert_eq!((c.get(1).partition, c.get(1).offset), (2, 3));
        assert_eq!(c.get(1).key, Some(&b"k"[..]));
        assert_eq!(c.get(1).timestamp_ms, Some(1_700_000_000_003));
        let names: Vec<_> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(
            names,
            [
                "a",
                "_millpond_partition",
                "_millpond_offset",
                "_millpond_timestamp",
                "_millpond_key"
            ]
        );
        let value = cut
            .descriptor
            .dead_letters
            .iter()
            .find(|l| !l.column.is_empty())
            .unwrap();
        assert_eq!(
            (
                value.reason.as_str(),
                value.column.as_str(),
                value.offset,
                value.original.as_slice()
            ),
            ("reserved_field_name", "_millpond_offset", 7, &b"x"[..])
        );
    }

    #[test]
    fn records_become_rows_dead_letters_or_tombstones_and_every_offset_is_covered() {
        let mut p = Pending::default();
        let added = p.add(
            "t",
            &[
                rec(0, 7, Some(br#"{"a":1}"#)),
                rec(0, 8, Some(b"[1,2]")),
                rec(1, 3, None),
                rec(1, 4, Some(b"{oops")),
                rec(1, 5, Some(b"{}")),
                rec(0, 9, Some(b"\xff\xfe")),
                rec(0, 10, Some(b"null")),
            ],
        );
        assert_eq!(added.rows, 2, "{{}} is a row too");
        assert_eq!(added.tombstones, 1);
        assert_eq!(
            added.dead_letters,
            [
                "not_an_object",
                "invalid_json",
                "invalid_utf8",
                "not_an_object"
            ]
        );
        let cut = p.cut("t", FlushTrigger::Size, "f".into()).unwrap();
        let d = &cut.descriptor;
        // Each range remembers the record at its last offset.
        let last = |p, o, payload| Some(rec(p, o, payload).last_record());
        assert_eq!(
            d.ranges,
            [
                OffsetRange::new("t", 0, 7, 10).with_last_record(last(0, 10, Some(b"null"))),
                OffsetRange::new("t", 1, 3, 5).with_last_record(last(1, 5, Some(b"{}")))
            ]
        );
        assert_ne!(last(1, 5, Some(b"{}")), last(1, 5, Some(b"{ }")));
        assert_ne!(
            rec(1, 5, None).last_record(),
            Record {
                timestamp_ms: Some(1),
                ..rec(1, 5, None)
            }
            .last_record()
        );
        assert_eq!(d.expected_rows, 2);
        let coords: Vec<_> = d
            .dead_letters
            .iter()
            .map(|l| (l.partition, l.offset, l.original.as_slice(), l.timestamp_ms))
            .collect();
        assert_eq!(
            coords,
            [
                (0, 8, &b"[1,2]"[..], Some(1_700_000_000_008)),
                (1, 4, &b"{oops"[..], Some(1_700_000_000_004)),
                (0, 9, &b"\xff\xfe"[..], Some(1_700_000_000_009)),
                (0, 10, &b"null"[..], Some(1_700_000_000_010)),
            ]
        );
        assert!(d
            .dead_letters
            .iter()
            .all(|l| l.key.as_deref() == Some(&b"k"[..]) && l.topic == "t"));
        assert!(cut.bytes > 4 * DEAD_LETTER_OVERHEAD);
        assert!(p.is_empty() && p.bytes() == 0);
        let empty = p.cut("t", FlushTrigger::Time, "g".into()).unwrap();
        assert!(empty.descriptor.dead_letters.is_empty() && empty.descriptor.ranges.is_empty());
    }
}

#[cfg(test)]
mod conservation {
    use super::*;
    use proptest::prelude::*;

    /// Payloads of every kind a topic can carry: objects (including `{}`),
    /// other JSON, broken JSON, arbitrary bytes, tombstones.
    fn payload() -> impl Strategy<Value = Option<Vec<u8>>> {
        prop_oneof![
            Just(None),
            Just(Some(b"{}".to_vec())),
            (any::<i64>(), "[a-z]{0,8}")
                .prop_map(|(n, s)| Some(format!(r#"{{"n":{n},"s":"{s}"}}"#).into_bytes())),
            prop_oneof![
                Just("null"),
                Just("[1,2]"),
                Just("42"),
                Just("\"x\""),
                Just("{\"a\":")
            ]
            .prop_map(|s| Some(s.as_bytes().to_vec())),
            proptest::collection::vec(any::<u8>(), 0..24).prop_map(Some),
        ]
    }

    proptest! {
        /// Every record is exactly one of: a row, a dead letter carrying its
        /// own coordinates and bytes, a tombstone; and every offset is covered.
        #[test]
        fn every_record_is_accounted_for(
            batches in proptest::collection::vec(
                proptest::collection::vec((0..3i32, payload()), 0..40), 1..4)
        ) {
            let mut p = Pending::default();
            let mut next = [0i64; 3];
            let (mut records, mut rows, mut dead, mut tombstones) = (0, 0, 0, 0);
            let mut sent = Vec::new();
            for batch in &batches {
                let recs: Vec<Record<'_>> = batch
                    .iter()
                    .map(|(part, payload)| {
                        let offset = next[*part as usize];
                        next[*part as usize] += 1;
                        sent.push((*part, offset, payload.clone()));
                        Record { partition: *part, offset, timestamp_ms: None, key: None, payload: payload.as_deref() }
                    })
                    .collect();
                let added = p.add("t", &recs);
                records += recs.len();
                rows += added.rows;
                dead += added.dead_letters.len();
                tombstones += added.tombstones;
            }
            prop_assert_eq!(records, rows + dead + tombstones);
            let cut = p.cut("t", FlushTrigger::Size, "f".into()).unwrap();
            prop_assert_eq!(cut.descriptor.expected_rows as usize, rows);
            prop_assert_eq!(cut.records, records, "every record tracked counts once");
            prop_assert_eq!(cut.batches.iter().map(RecordBatch::num_rows).sum::<usize>(), rows);
            prop_assert_eq!(cut.descriptor.dead_letters.len(), dead);
            for l in &cut.descriptor.dead_letters {
                let original = sent
                    .iter()
                    .find(|(part, off, _)| *part == l.partition && *off == l.offset)
                    .and_then(|(_, _, p)| p.clone());
                prop_assert_eq!(Some(l.original.clone()), original);
            }
            for (part, n) in next.iter().enumerate() {
                let range = cut.descriptor.ranges.iter().find(|r| r.partition == part as i32);
                match n {
                    0 => prop_assert!(range.is_none()),
                    n => prop_assert_eq!(range.map(|r| (r.first, r.last)), Some((0, n - 1))),
                }
            }
            // The same records cut into other batches (as a re-read from
            // Kafka may): the same rows, so the same digest.
            let all: Vec<Record<'_>> = sent
                .iter()
                .map(|(part, offset, payload)| Record { partition: *part, offset: *offset, timestamp_ms: None, key: None, payload: payload.as_deref() })
                .collect();
            let mut whole = Pending::default();
            whole.add("t", &all);
            let again = whole.cut("t", FlushTrigger::Size, "f".into()).unwrap();
            prop_assert_eq!(again.rows_digest, cut.rows_digest);
        }
    }

    /// A filter that keeps other records in the same number leaves the
    /// counts equal; the digest tells them apart.
    #[test]
    fn the_rows_digest_tells_which_records_are_rows() {
        let payloads: [&[u8]; 2] = [br#"{"team":1}"#, br#"{"team":2}"#];
        let recs: Vec<Record<'_>> = payloads
            .iter()
            .enumerate()
            .map(|(i, p)| Record {
                partition: 0,
                offset: i as i64,
                timestamp_ms: None,
                key: None,
                payload: Some(p),
            })
            .collect();
        let keep_first = |first: bool| {
            let mut p = Pending::default();
            p.add_filtered("t", &recs, |_| Decision {
                keep: Some(arrow::array::BooleanArray::from(vec![first, !first])),
                filtered: vec![("filter_excluded", 1)],
                ..Decision::default()
            });
            p.cut("t", FlushTrigger::Size, "f".into()).unwrap()
        };
        let (a, b) = (keep_first(true), keep_first(false));
        assert_eq!(
            (a.records, a.descriptor.expected_rows),
            (b.records, b.descriptor.expected_rows)
        );
        assert_eq!(a.rows_digest, record_digest(0, 0));
        assert_eq!(b.rows_digest, record_digest(0, 1));
        assert_ne!(a.rows_digest, b.rows_digest);
    }
}
