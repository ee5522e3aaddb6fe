//! Retention while ingest runs. The consumer runs with
//! `auto.offset.reset=error`: when the log start moves past a partition's
//! position, librdkafka stops fetching the partition and reports an
//! offset-out-of-range consume error instead of jumping. The consume loop
//! answers it here: the span below the log start is counted and logged,
//! and the partition is assigned again at the log start.
//!
//! rust-rdkafka's error does not say which partition it was
//! (`KafkaError::MessageConsumption(AutoOffsetReset)` carries only the
//! code), so every assigned partition's position is compared with its log
//! start. A partition's records come in order, the error after them, so
//! when the error arrives the errored partition's position is the offset
//! librdkafka failed to fetch.
use std::collections::HashMap;
use std::time::Duration;

use anyhow::bail;
use millpond_shared::metrics::{error_type, IngestMetrics};
use rdkafka::consumer::Consumer as _;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{Offset, TopicPartitionList};

use super::client::Consumer;
use super::record::Record;
use super::start::{decide, Start};
use crate::config::OffsetReset;

/// How long one partition's watermarks may take.
const WATERMARKS: Duration = Duration::from_secs(5);

/// A consume error saying an offset is no longer (or not yet) in the log.
pub fn out_of_range(e: &KafkaError) -> bool {
    matches!(
        e,
        KafkaError::MessageConsumption(
            RDKafkaErrorCode::AutoOffsetReset | RDKafkaErrorCode::OffsetOutOfRange
        )
    )
}

/// Each partition's read position, and an out-of-range error not yet
/// answered.
pub struct Retention {
    /// Partition -> the next offset to read: after the last record polled,
    /// else where the partition was assigned.
    read: HashMap<i32, i64>,
    /// An out-of-range error arrived; answered by [`Self::answer`], tried
    /// again at each loop until done (the partition fetches nothing until).
    unanswered: bool,
}

impl Retention {
    /// `assigned`: where each partition starts.
    pub fn new(assigned: &HashMap<i32, i64>) -> Self {
        Retention {
            read: assigned.clone(),
            unanswered: false,
        }
    }

    pub fn consumed(&mut self, records: &[Record<'_>]) {
        for r in records {
            let next = self.read.entry(r.partition).or_insert(r.offset + 1);
            *next = (*next).max(r.offset + 1);
        }
    }

    /// A consume error: true when it is an out-of-range error, which
    /// [`Self::answer`] then answers.
    pub fn seen(&mut self, e: &KafkaError) -> bool {
        let answer = out_of_range(e);
        self.unanswered |= answer;
        answer
    }

    /// After an out-of-range error: reads the watermarks of every partition
    /// in `assigned` (partition -> where it started), counts and logs the
    /// offsets below the log start of each partition whose position is
    /// there, and assigns it again at its log start. A failed watermark
    /// read or assignment is counted and tried again at the next call.
    /// Err (the process exits, and startup decides from the lake's and
    /// Kafka's offsets) when a position lies past its partition's end: the
    /// log was truncated under ingest. Ok answers the partitions now read
    /// from their log start, and where that is.
    pub fn answer(
        &mut self,
        consumer: &Consumer,
        topic: &str,
        assigned: &HashMap<i32, i64>,
        metrics: &IngestMetrics,
    ) -> anyhow::Result<Vec<(i32, i64)>> {
        if !self.unanswered {
            return Ok(Vec::new());
        }
        let failed = |what: &str, e: &KafkaError| {
            metrics.errors.with_label_values(&[error_type::KAFKA]).inc();
            tracing::warn!(error = %e, "{what} after an offset-out-of-range error; trying again");
        };
        let mut positions: Vec<(i32, i64)> = assigned
            .iter()
            .map(|(p, start)| (*p, self.read.get(p).copied().unwrap_or(*start)))
            .collect();
        positions.sort_unstable();
        let mut moved = Vec::new();
        for &(p, position) in &positions {
            let (low, high) = match consumer.fetch_watermarks(topic, p, WATERMARKS) {
                Ok(w) => w,
                Err(e) => {
                    failed("reading the watermarks", &e);
                    return Ok(Vec::new());
                }
            };
            // Every partition has a position here: the reset never applies.
            match decide(Some(position), low, high, OffsetReset::Earliest) {
                Start::LogStart(lost) => moved.push((p, lost)),
                Start::Beyond { position, .. } => bail!(
                    "partition {p}: ingest's position {position} is past the partition's end {high}: \
                     the log was truncated under ingest; exiting, so that startup decides where to \
                     resume from the lake's and Kafka's offsets"
                ),
                Start::Position(_) | Start::Reset(_) => {}
            }
        }
        let starts: Vec<(i32, i64)> = moved.iter().map(|(p, lost)| (*p, lost.to + 1)).collect();
        let again = if starts.is_empty() {
            // Never leave a stopped partition behind: every position is in
            // its log, so assigning each again there skips nothing.
            tracing::warn!("an offset was out of range, but every partition's position is in its log; assigning each again at its position");
            &positions
        } else {
            &starts
        };
        if let Err(e) = assign_again(consumer, topic, again) {
            failed("assigning partitions again", &e);
            return Ok(Vec::new());
        }
        for (p, lost) in moved {
            lost.report(metrics, p, "while consuming");
            self.read.insert(p, lost.to + 1);
        }
        self.unanswered = false;
        Ok(starts)
    }
}

/// Assigns `partitions` again at the offsets given. A partition librdkafka
/// stopped after an out-of-range error cannot be seeked (its fetcher is
/// not running), so each leaves the assignment and comes back. One already
/// out of it (a previous try failed half-way) is only added.
fn assign_again(
    consumer: &Consumer,
    topic: &str,
    partitions: &[(i32, i64)],
) -> Result<(), KafkaError> {
    let current = consumer.assignment()?;
    let mut out = TopicPartitionList::new();
    let mut back = TopicPartitionList::new();
    for (p, offset) in partitions {
        if current.find_partition(topic, *p).is_some() {
            out.add_partition(topic, *p);
        }
        back.add_partition_offset(topic, *p, Offset::Offset(*offset))?;
    }
    if out.count() > 0 {
        consumer.incremental_unassign(&out)?;
    }
    consumer.incremental_assign(&back)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_offset_errors_ask_for_an_answer() {
        let mut r = Retention::new(&HashMap::new());
        assert!(!r.seen(&KafkaError::MessageConsumption(
            RDKafkaErrorCode::BrokerTransportFailure
        )));
        assert!(r.seen(&KafkaError::MessageConsumption(
            RDKafkaErrorCode::AutoOffsetReset
        )));
        assert!(out_of_range(&KafkaError::MessageConsumption(
            RDKafkaErrorCode::OffsetOutOfRange
        )));
    }

    #[test]
    fn the_read_position_follows_the_records() {
        let mut r = Retention::new(&HashMap::from([(0, 10), (1, 5)]));
        let rec = |partition, offset| Record {
            partition,
            offset,
            timestamp_ms: None,
            key: None,
            payload: None,
        };
        r.consumed(&[rec(0, 10), rec(0, 11), rec(2, 7)]);
        assert_eq!(r.read, HashMap::from([(0, 12), (1, 5), (2, 8)]));
    }
}
