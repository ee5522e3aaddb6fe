//! The offset range of every partition consumed since the last flush, with
//! the record at each range's last offset, and how many records they cover.
use std::collections::{BTreeMap, HashMap};

use millpond_proto::{LastRecord, OffsetRange};

use crate::kafka::Record;

#[derive(Default)]
pub struct Ranges {
    /// partition -> (first, last) offsets seen since the last flush,
    /// including skipped records and tombstones.
    ranges: BTreeMap<i32, (i64, i64)>,
    /// partition -> the record at the range's last offset.
    last_records: HashMap<i32, (i64, LastRecord)>,
    /// Records seen since the last flush.
    records: usize,
}

impl Ranges {
    /// Every record of a consumed batch joins the ranges.
    pub fn track_all(&mut self, records: &[Record<'_>]) {
        self.remember_last(records);
        for r in records {
            self.track(r.partition, r.offset);
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

    pub fn track(&mut self, partition: i32, offset: i64) {
        self.records += 1;
        self.ranges
            .entry(partition)
            .and_modify(|(_, last)| *last = (*last).max(offset))
            .or_insert((offset, offset));
    }

    /// Records seen since the last flush.
    pub fn records(&self) -> usize {
        self.records
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The ranges of `topic`, each with its last record when it was seen.
    pub fn of(&self, topic: &str) -> Vec<OffsetRange> {
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
}
