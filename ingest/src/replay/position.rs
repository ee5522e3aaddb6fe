//! Where a replayed range of one partition may start, and whether its
//! topic is a pipeline's.
//!
//! A range recorded above the partition's next offset leaves a gap for
//! good: the writer refuses anything below recorded offsets, and ingest
//! resumes after them. So a replay starts at the next offset, at or below
//! the recorded offsets (the writer then acknowledges the range recorded
//! last as a resend and refuses any other overlap), or above it only when
//! the operator says `--allow-gap`.
use std::ops::RangeInclusive;

use millpond_proto::OffsetRange;

/// Where one partition stands: what the lake recorded, and where Kafka's
/// log starts (Kafka mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The last offset the lake recorded for the partition.
    pub recorded_last: Option<i64>,
    /// The partition's first offset still in Kafka.
    pub log_start: Option<i64>,
}

/// How a replay's first offset relates to a [`Position`].
#[derive(Debug, PartialEq, Eq)]
pub enum Start {
    /// At the next offset: nothing is skipped.
    Next,
    /// At or below the recorded offsets: the writer judges it.
    Recorded,
    /// Above the next offset: these offsets would never be recorded.
    Gap(RangeInclusive<i64>),
}

impl Position {
    /// The partition's position from the writer's recorded-offsets answer.
    pub fn of(
        recorded: &[OffsetRange],
        topic: &str,
        partition: i32,
        log_start: Option<i64>,
    ) -> Self {
        Position {
            recorded_last: recorded
                .iter()
                .filter(|r| r.topic == topic && r.partition == partition)
                .map(|r| r.last)
                .max(),
            log_start,
        }
    }

    /// The offset a replay starts at to skip none: one past the recorded
    /// offsets, or 0 when none are; never below Kafka's log start (offsets
    /// below it no longer exist, and ingest skips them too).
    pub fn next(&self) -> i64 {
        let after = self.recorded_last.map_or(0, |l| l + 1);
        after.max(self.log_start.unwrap_or(0))
    }

    pub fn start(&self, from: i64) -> Start {
        let next = self.next();
        match self.recorded_last {
            _ if from == next => Start::Next,
            Some(last) if from <= last => Start::Recorded,
            _ if from > next => Start::Gap(next..=from - 1),
            // Below Kafka's log start: the read finds those offsets gone.
            _ => Start::Next,
        }
    }

    /// What the lake and Kafka hold, for messages.
    pub fn describe(&self) -> String {
        let lake = match self.recorded_last {
            Some(last) => format!("the lake recorded offsets up to {last}"),
            None => {
                "the lake recorded no offsets for it (a hoglake writer with HOGLAKE_PARTITION_FENCE=false reports none)".into()
            }
        };
        match self.log_start {
            Some(start) if start > 0 => format!("{lake}, and Kafka's log starts at {start}"),
            _ => lake,
        }
    }
}

/// A range the lake recorded for `topic` from Kafka's own records (it
/// keeps the record at its last offset), if any: `topic` is then a
/// pipeline's, whose next offsets belong to records Kafka holds or will.
pub fn read_from_kafka<'a>(recorded: &'a [OffsetRange], topic: &str) -> Option<&'a OffsetRange> {
    recorded
        .iter()
        .filter(|r| r.topic == topic && r.last_record().is_some())
        .max_by_key(|r| r.last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(recorded_last: Option<i64>, log_start: Option<i64>) -> Position {
        Position {
            recorded_last,
            log_start,
        }
    }

    #[test]
    fn a_replay_starts_at_the_next_offset_or_names_the_gap() {
        // The lake recorded up to 100.
        let p = at(Some(100), None);
        assert_eq!(p.start(101), Start::Next);
        assert_eq!(p.start(500), Start::Gap(101..=499));
        assert_eq!(p.start(102), Start::Gap(101..=101));
        assert_eq!(p.start(100), Start::Recorded);
        assert_eq!(p.start(0), Start::Recorded);
        // Nothing recorded: a partition starts at 0.
        let p = at(None, None);
        assert_eq!(p.start(0), Start::Next);
        assert_eq!(p.start(5), Start::Gap(0..=4));
        // Kafka's log start: offsets below it are gone for everyone.
        let p = at(None, Some(300));
        assert_eq!(p.start(300), Start::Next);
        assert_eq!(p.start(301), Start::Gap(300..=300));
        let p = at(Some(100), Some(300));
        assert_eq!(p.start(300), Start::Next);
        assert_eq!(p.start(50), Start::Recorded);
        assert_eq!(at(Some(400), Some(300)).start(450), Start::Gap(401..=449));
    }

    #[test]
    fn position_reads_its_own_partition() {
        let recorded = [
            OffsetRange::new("events", 0, 0, 9),
            OffsetRange::new("events", 1, 50, 99),
            OffsetRange::new("other", 1, 0, 500),
        ];
        assert_eq!(
            Position::of(&recorded, "events", 1, None).recorded_last,
            Some(99)
        );
        assert_eq!(
            Position::of(&recorded, "events", 2, None).recorded_last,
            None
        );
    }

    #[test]
    fn a_topic_is_a_pipelines_when_the_lake_recorded_kafkas_records_of_it() {
        let from_kafka = |p, last| {
            OffsetRange::new("events", p, 0, last).with_last_record(Some(
                millpond_proto::LastRecord {
                    timestamp_ms: Some(1),
                    checksum: 7,
                },
            ))
        };
        let recorded = [
            OffsetRange::new("events.replayed", 0, 0, 9),
            from_kafka(0, 99),
            from_kafka(1, 120),
            OffsetRange::new("other", 0, 0, 5),
        ];
        assert_eq!(
            read_from_kafka(&recorded, "events").map(|r| r.last),
            Some(120)
        );
        assert_eq!(
            read_from_kafka(&recorded, "events.replayed"),
            None,
            "a file's ranges"
        );
        assert_eq!(read_from_kafka(&recorded, "new"), None);
    }
}
