//! MILLPOND_RUN_TO_LATEST: the high watermarks read at startup are the end;
//! once every assigned partition is consumed up to its mark, the loop makes
//! a final flush, commits and returns, and the process exits 0.
use std::collections::HashMap;
use std::time::Duration;

use millpond_shared::shutdown::Stop;
use rdkafka::consumer::Consumer as _;

use super::client::Consumer;
use super::connect::sliced;
use super::record::Record;

#[derive(Debug, Default)]
pub struct RunToLatest {
    /// Partition -> the offset to reach (exclusive high watermark).
    targets: HashMap<i32, i64>,
    /// Partition -> next offset after the last consumed record.
    consumed: HashMap<i32, i64>,
}

impl RunToLatest {
    /// Reads the high watermark of every partition in `next` (the assigned
    /// ones). A partition whose mark cannot be read is an error: running
    /// "to the latest" without knowing it would never end or end early.
    /// The stop ends the reads.
    pub fn start(
        consumer: &Consumer,
        topic: &str,
        next: &HashMap<i32, i64>,
        stop: &Stop,
    ) -> anyhow::Result<Self> {
        let mut targets = HashMap::new();
        for p in next.keys() {
            let (_, high) = sliced(stop, Duration::from_secs(30), |t| {
                consumer.fetch_watermarks(topic, *p, t)
            })?
            .map_err(|e| {
                anyhow::anyhow!(
                    "MILLPOND_RUN_TO_LATEST: reading the high watermark of {topic}/{p}: {e}"
                )
            })?;
            targets.insert(*p, high);
        }
        tracing::info!(targets = ?targets, "running to the high watermarks read at startup, then exiting");
        Ok(Self::with_targets(targets))
    }

    pub fn with_targets(targets: HashMap<i32, i64>) -> Self {
        RunToLatest {
            targets,
            consumed: HashMap::new(),
        }
    }

    pub fn consumed(&mut self, records: &[Record<'_>]) {
        for r in records {
            let e = self.consumed.entry(r.partition).or_insert(r.offset + 1);
            *e = (*e).max(r.offset + 1);
        }
    }

    /// Partitions now read from these offsets (their log start, after
    /// retention took what was below): every offset below was consumed or
    /// lost, so a partition retention emptied up to its mark is there.
    pub fn moved(&mut self, to: &[(i32, i64)]) {
        for (p, offset) in to {
            let e = self.consumed.entry(*p).or_insert(*offset);
            *e = (*e).max(*offset);
        }
    }

    /// Every partition is consumed up to its mark (`next` holds the
    /// committed positions: a partition already there at startup counts).
    pub fn reached(&self, next: &HashMap<i32, i64>) -> bool {
        self.reached_with(next, &HashMap::new())
    }

    /// As [`Self::reached`], also trusting the consumer's fetch positions:
    /// the mark can lie past the last record a consumer ever sees
    /// (transaction markers, compacted offsets), and the position moves
    /// past those.
    pub fn reached_with(&self, next: &HashMap<i32, i64>, positions: &HashMap<i32, i64>) -> bool {
        self.targets.iter().all(|(p, target)| {
            let at = self
                .consumed
                .get(p)
                .copied()
                .max(next.get(p).copied())
                .max(positions.get(p).copied())
                .unwrap_or(0);
            at >= *target
        })
    }

    /// `reached`, asking the consumer for its positions only when the
    /// records seen so far do not already say so.
    pub fn reached_by(&self, consumer: &Consumer, topic: &str, next: &HashMap<i32, i64>) -> bool {
        if self.reached(next) {
            return true;
        }
        let Ok(list) = consumer.position() else {
            return false;
        };
        let positions: HashMap<i32, i64> = list
            .elements_for_topic(topic)
            .iter()
            .filter_map(|e| {
                e.offset()
                    .to_raw()
                    .filter(|o| *o >= 0)
                    .map(|o| (e.partition(), o))
            })
            .collect();
        self.reached_with(next, &positions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(partition: i32, offset: i64) -> Record<'static> {
        Record {
            partition,
            offset,
            timestamp_ms: None,
            key: None,
            payload: None,
        }
    }

    #[test]
    fn reached_when_every_partition_is_at_its_mark() {
        let mut r = RunToLatest::with_targets(HashMap::from([(0, 10), (1, 0), (2, 5)]));
        let next = HashMap::from([(0, 0), (1, 0), (2, 5)]);
        assert!(!r.reached(&next));
        r.consumed(&[rec(0, 3), rec(0, 8)]);
        assert!(!r.reached(&next), "offset 9 not yet consumed");
        r.consumed(&[rec(0, 9)]);
        assert!(r.reached(&next));
    }

    #[test]
    fn a_partition_retention_emptied_to_its_mark_is_reached() {
        let mut r = RunToLatest::with_targets(HashMap::from([(0, 10)]));
        let next = HashMap::from([(0, 2)]);
        assert!(!r.reached(&next));
        r.moved(&[(0, 10)]);
        assert!(r.reached(&next));
    }

    #[test]
    fn a_position_past_markers_counts_as_reached() {
        // Offset 9 is a transaction marker: no record 9 is ever delivered.
        let mut r = RunToLatest::with_targets(HashMap::from([(0, 10)]));
        r.consumed(&[rec(0, 8)]);
        let next = HashMap::from([(0, 0)]);
        assert!(!r.reached(&next));
        assert!(r.reached_with(&next, &HashMap::from([(0, 10)])));
    }
}
