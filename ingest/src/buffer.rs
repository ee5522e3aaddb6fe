//! The pending flush: converted batches, dead letters, their size, and the
//! offset range of every partition consumed since the last flush. The one
//! path from consumed records to a flush: the consume loop and the replay
//! tool both call [`Pending::add`] and [`Pending::cut`].
use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use millpond_proto::{DeadLetter, FlushDescriptor, FlushTrigger, OffsetRange};

use crate::convert::convert;

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

/// What [`Pending::add`] did with a batch of records.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Added {
    pub rows: usize,
    pub tombstones: usize,
    /// Dead-letter reason of each record that is not a row.
    pub dead_letters: Vec<&'static str>,
}

/// A flush cut from the buffer, ready to send.
pub struct Cut {
    pub descriptor: FlushDescriptor,
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    /// Arrow plus dead-letter bytes that were pending.
    pub bytes: usize,
}

/// Bytes a dead letter holds besides its key and original bytes.
const DEAD_LETTER_OVERHEAD: usize = 64;

#[derive(Default)]
pub struct Pending {
    batches: Vec<RecordBatch>,
    dead_letters: Vec<DeadLetter>,
    bytes: usize,
    rows: usize,
    /// partition -> (first, last) offsets seen since the last flush,
    /// including skipped records and tombstones.
    ranges: BTreeMap<i32, (i64, i64)>,
}

impl Pending {
    /// Converts consumed records of `topic`: objects become rows, payloads
    /// that are not a JSON object become dead letters carrying their
    /// coordinates and bytes, tombstones are only tracked. Every record's
    /// offset joins the flush's ranges.
    pub fn add(&mut self, topic: &str, records: &[Record<'_>]) -> Added {
        let mut sources = Vec::with_capacity(records.len());
        let mut payloads = Vec::with_capacity(records.len());
        for r in records {
            self.track(r.partition, r.offset);
            if let Some(p) = r.payload {
                sources.push(r);
                payloads.push(p);
            }
        }
        let converted = convert(&payloads);
        let mut added = Added {
            rows: converted.rows,
            tombstones: records.len() - payloads.len(),
            dead_letters: Vec::with_capacity(converted.skipped.len()),
        };
        for skip in &converted.skipped {
            let r = sources[skip.index];
            let reason = skip.reason.label();
            added.dead_letters.push(reason);
            let original = payloads[skip.index].to_vec();
            self.bytes += DEAD_LETTER_OVERHEAD + original.len() + r.key.map_or(0, <[u8]>::len);
            self.dead_letters.push(DeadLetter {
                topic: topic.to_owned(),
                partition: r.partition,
                offset: r.offset,
                timestamp_ms: r.timestamp_ms,
                key: r.key.map(<[u8]>::to_vec),
                reason: reason.to_owned(),
                column: String::new(),
                live_type: String::new(),
                original,
            });
        }
        if let Some(batch) = converted.batch {
            self.push(batch, converted.arrow_bytes);
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
        let bytes = self.bytes;
        let dead_letters = std::mem::take(&mut self.dead_letters);
        let (schema, batches) = self.take()?;
        Ok(Cut {
            descriptor: FlushDescriptor {
                flush_id,
                trigger: trigger as i32,
                ranges,
                expected_rows: rows as u64,
                dead_letters,
            },
            schema,
            batches,
            bytes,
        })
    }

    fn track(&mut self, partition: i32, offset: i64) {
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

    pub fn bytes(&self) -> usize {
        self.bytes
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
            .map(|(p, (first, last))| OffsetRange::new(topic, *p, *first, *last))
            .collect()
    }

    /// Takes the batches out, aligned to one schema, and resets the buffer.
    fn take(&mut self) -> Result<(SchemaRef, Vec<RecordBatch>), ArrowError> {
        let batches = std::mem::take(&mut self.batches);
        self.dead_letters.clear();
        self.ranges.clear();
        self.bytes = 0;
        self.rows = 0;
        unify(batches)
    }
}

/// Merged type of a column seen with two types in one flush.
fn merge(a: &DataType, b: &DataType) -> DataType {
    match (a, b) {
        _ if a == b => a.clone(),
        (DataType::Int64, DataType::Float64) | (DataType::Float64, DataType::Int64) => {
            DataType::Float64
        }
        _ => DataType::Utf8,
    }
}

/// Aligns batches converted separately (each with its own inferred schema)
/// to the union schema: columns in first-seen order, missing ones null,
/// conflicting types merged as the converter merges them within a batch.
pub fn unify(batches: Vec<RecordBatch>) -> Result<(SchemaRef, Vec<RecordBatch>), ArrowError> {
    let mut fields: Vec<(String, DataType)> = Vec::new();
    for b in &batches {
        for f in b.schema().fields() {
            match fields.iter_mut().find(|(n, _)| n == f.name()) {
                Some((_, t)) => *t = merge(t, f.data_type()),
                None => fields.push((f.name().clone(), f.data_type().clone())),
            }
        }
    }
    let schema: SchemaRef = Arc::new(Schema::new(
        fields
            .iter()
            .map(|(n, t)| Field::new(n, t.clone(), true))
            .collect::<Vec<_>>(),
    ));
    let mut out = Vec::with_capacity(batches.len());
    for b in batches {
        if b.schema() == schema {
            out.push(b);
            continue;
        }
        let cols: Vec<ArrayRef> = fields
            .iter()
            .map(|(name, t)| match b.column_by_name(name) {
                Some(c) if c.data_type() == t => Ok(c.clone()),
                Some(c) => cast(c, t),
                None => Ok(new_null_array(t, b.num_rows())),
            })
            .collect::<Result<_, _>>()?;
        out.push(RecordBatch::try_new(schema.clone(), cols)?);
    }
    Ok((schema, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int64Array, StringArray};

    fn b(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(cols).unwrap()
    }

    #[test]
    fn unify_fills_missing_and_merges_types() {
        let b1 = b(vec![("a", Arc::new(Int64Array::from(vec![1])) as ArrayRef)]);
        let b2 = b(vec![
            ("b", Arc::new(StringArray::from(vec!["x"])) as ArrayRef),
            ("a", Arc::new(Float64Array::from(vec![1.5])) as ArrayRef),
        ]);
        let b3 = b(vec![("b", Arc::new(Int64Array::from(vec![7])) as ArrayRef)]);
        let (schema, out) = unify(vec![b1, b2, b3]).unwrap();
        let names: Vec<_> = schema
            .fields()
            .iter()
            .map(|f| (f.name().as_str(), f.data_type().clone()))
            .collect();
        assert_eq!(names, vec![("a", DataType::Float64), ("b", DataType::Utf8)]);
        assert_eq!(out.len(), 3);
        let b3b = out[2]
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(b3b.value(0), "7");
        assert!(out[2].column(0).is_null(0));
    }

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
        assert_eq!(
            d.ranges,
            [
                OffsetRange::new("t", 0, 7, 10),
                OffsetRange::new("t", 1, 3, 5)
            ]
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
        }
    }
}
