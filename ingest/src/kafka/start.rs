//! Where a partition starts reading: Millpond's decision, never
//! librdkafka's. The consumer runs with `auto.offset.reset=error`, so an
//! offset Kafka no longer holds is an error ingest answers, not a silent
//! jump. KAFKA_AUTO_OFFSET_RESET applies only to a partition with no
//! position anywhere (no committed offset, nothing in the lake); a position
//! below the log start resumes at the log start, even with `latest`, and
//! what retention deleted before it was read is counted and logged.
use millpond_shared::metrics::IngestMetrics;

use crate::config::OffsetReset;

/// Offsets `from..=to` of a partition that Kafka deleted before ingest
/// read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost {
    pub from: i64,
    pub to: i64,
}

impl Lost {
    pub fn count(&self) -> i64 {
        self.to - self.from + 1
    }

    /// Counts the span on `records_lost_to_retention_total{partition}` and
    /// logs it (`when`: at assignment, or while consuming): the operator's
    /// one record of records nobody will read.
    pub fn report(&self, metrics: &IngestMetrics, partition: i32, when: &'static str) {
        metrics
            .records_lost_to_retention
            .with_label_values(&[&partition.to_string()])
            .inc_by(self.count() as u64);
        tracing::error!(
            partition,
            from = self.from,
            to = self.to,
            lost = self.count(),
            log_start = self.to + 1,
            when,
            "offsets below the log start: Kafka deleted them (retention) before ingest read them; \
             they are lost, counted on records_lost_to_retention_total, and reading resumes at the log start"
        );
    }
}

/// Where a partition starts, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Kafka holds the position (or it is the partition's end): read on
    /// from it.
    Position(i64),
    /// The position is below the log start: read from the log start
    /// (`lost.to + 1`); the offsets before it are lost.
    LogStart(Lost),
    /// No position anywhere: KAFKA_AUTO_OFFSET_RESET's target, the log
    /// start (`earliest`) or the high watermark (`latest`).
    Reset(i64),
    /// The position is past the partition's end: the log was truncated or
    /// the topic recreated, so it names no offset of this log and counts
    /// as no position (the reset target).
    Beyond { position: i64, target: i64 },
}

impl Start {
    /// The next offset to read.
    pub fn offset(&self) -> i64 {
        match *self {
            Start::Position(o) | Start::Reset(o) => o,
            Start::LogStart(lost) => lost.to + 1,
            Start::Beyond { target, .. } => target,
        }
    }

    pub fn lost(&self) -> Option<Lost> {
        match self {
            Start::LogStart(lost) => Some(*lost),
            _ => None,
        }
    }
}

/// Decides where a partition with `position` (the next offset Millpond
/// would read, if it has one) starts, given its watermarks `low..high`.
pub fn decide(position: Option<i64>, low: i64, high: i64, reset: OffsetReset) -> Start {
    let target = match reset {
        OffsetReset::Earliest => low,
        OffsetReset::Latest => high,
    };
    match position {
        None => Start::Reset(target),
        Some(p) if p < low => Start::LogStart(Lost {
            from: p,
            to: low - 1,
        }),
        Some(p) if p > high => Start::Beyond {
            position: p,
            target,
        },
        Some(p) => Start::Position(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use OffsetReset::{Earliest, Latest};

    #[test]
    fn a_position_kafka_holds_is_kept_whatever_the_reset() {
        for reset in [Earliest, Latest] {
            assert_eq!(decide(Some(50), 10, 100, reset), Start::Position(50));
            assert_eq!(decide(Some(10), 10, 100, reset), Start::Position(10));
            assert_eq!(decide(Some(100), 10, 100, reset), Start::Position(100));
        }
    }

    #[test]
    fn below_the_log_start_resumes_there_and_counts_the_span_even_with_latest() {
        for reset in [Earliest, Latest] {
            let start = decide(Some(3), 10, 100, reset);
            assert_eq!(start, Start::LogStart(Lost { from: 3, to: 9 }));
            assert_eq!(start.offset(), 10, "never the high watermark");
            assert_eq!(start.lost().unwrap().count(), 7);
        }
        // Retention emptied the partition: everything from the position on.
        let start = decide(Some(0), 40, 40, Latest);
        assert_eq!((start.offset(), start.lost().unwrap().count()), (40, 40));
    }

    #[test]
    fn the_reset_applies_only_without_a_position() {
        assert_eq!(decide(None, 10, 100, Earliest), Start::Reset(10));
        assert_eq!(decide(None, 10, 100, Latest), Start::Reset(100));
        assert_eq!(decide(None, 10, 100, Latest).lost(), None);
    }

    #[test]
    fn past_the_end_counts_as_no_position() {
        assert_eq!(
            decide(Some(150), 10, 100, Earliest),
            Start::Beyond {
                position: 150,
                target: 10
            }
        );
        assert_eq!(decide(Some(150), 10, 100, Latest).offset(), 100);
        assert_eq!(decide(Some(150), 10, 100, Latest).lost(), None);
    }

    #[test]
    fn a_lost_span_is_counted_per_partition() {
        let reg = millpond_shared::metrics::new_registry("t", "b");
        let metrics = IngestMetrics::new(&reg);
        Lost { from: 3, to: 9 }.report(&metrics, 2, "at assignment");
        Lost { from: 20, to: 20 }.report(&metrics, 2, "while consuming");
        let lost = |p: &str| {
            millpond_shared::metrics::sample(
                &reg,
                "records_lost_to_retention_total",
                &[("partition", p)],
            )
        };
        assert_eq!(lost("2"), Some(8.0));
        assert_eq!(lost("0"), None);
    }
}
