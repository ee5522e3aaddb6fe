//! Static assignment and where each partition resumes.
use std::collections::HashMap;
use std::time::Duration;

use millpond_proto::{LastRecord, OffsetRange};
use millpond_shared::metrics::IngestMetrics;
use millpond_shared::shutdown::{Stop, Stopped};
use rdkafka::consumer::Consumer as _;
use rdkafka::error::KafkaError;
use rdkafka::{Offset, TopicPartitionList};

use super::client::Consumer;
use super::connect::sliced;
use super::identity::Identity;
use super::start::{decide, Start};
use crate::config::OffsetReset;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Partitions of this pod: p % replicas == ordinal.
pub fn my_partitions(count: i32, replicas: i32, ordinal: i32) -> Vec<i32> {
    (0..count).filter(|p| p % replicas == ordinal).collect()
}

#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    #[error("reading where partitions resume")]
    Stopped(#[from] Stopped),
    /// The lake recorded offsets the partition does not have: the topic was
    /// probably deleted and recreated. Consuming would be acknowledged as
    /// already written and silently dropped, so refuse to start.
    #[error(
        "partition {partition}: the lake recorded offsets up to {} but the partition ends at {high}; \
         was the topic recreated? Point the pipeline at a new table or remove the partition's rows \
         from _millpond_offsets", lake_next - 1
    )]
    LakeAhead {
        partition: i32,
        lake_next: i64,
        high: i64,
    },
    /// Kafka holds another record at the lake's last recorded offset: the
    /// topic was recreated or moved since. Resuming after the recorded
    /// offset would skip the new topic's records up to it.
    #[error(
        "partition {partition}: the record Kafka holds at offset {offset} ({found}) is not the record the \
         lake recorded there ({recorded}): topic {topic:?} was deleted and created again, or moved to another \
         cluster, since the lake recorded it. Resuming at offset {} would silently skip the new topic's \
         offsets {low}..={offset}, so ingest does not start. To read the new topic from its beginning into \
         the same table, set MILLPOND_TOPIC_EPOCH to a value not used before (for example \
         MILLPOND_TOPIC_EPOCH=2): the lake then records its offsets apart from the old topic's. To go on \
         with the old topic instead, point KAFKA_BOOTSTRAP_SERVERS and KAFKA_TOPIC back at it", offset + 1
    )]
    Recreated {
        topic: String,
        partition: i32,
        offset: i64,
        low: i64,
        recorded: LastRecord,
        found: LastRecord,
    },
    /// The lake recorded offsets the group has not committed, with no
    /// record of what it wrote at the last one: nothing shows those offsets
    /// hold Kafka's records, and resuming after them would skip the records
    /// if they do not (a file replayed under the pipeline's topic).
    #[error(
        "partition {partition}: the lake recorded offsets {first}..={last} but kept no record of what it \
         wrote at offset {last} (a file replayed under the pipeline's topic, or a flush made by hand), and \
         the group's committed offset is {}: resuming at offset {} would skip offsets {}..={last}, whose records may \
         never have landed, so ingest does not start. If a replay recorded them, delete its ranges of \
         partition {partition} from the lake's _millpond_offsets table (and its rows, if they should not \
         stay); if the pipeline wrote them, commit the group's offset of partition {partition} to {}. Then \
         restart ingest",
        committed.map_or("none".to_owned(), |c| format!("{c} (the next offset to read)")),
        last + 1,
        committed.map_or(*first, |c| c.max(*first)),
        last + 1
    )]
    Unproven {
        partition: i32,
        first: i64,
        last: i64,
        committed: Option<i64>,
    },
    /// The record at the lake's last recorded offset could not be read.
    #[error("partition {partition}: reading the record at the lake's last recorded offset to check the topic's identity: {error:#}")]
    Identity {
        partition: i32,
        error: anyhow::Error,
    },
}

/// Where one partition starts, and from what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    pub partition: i32,
    /// The group's committed offset, as read.
    pub committed: Option<i64>,
    /// The offset after the lake's recorded range.
    pub lake_next: Option<i64>,
    pub start: Start,
}

impl Resume {
    /// Decides one partition's start from the later of its committed
    /// offset and the lake's next offset (its position, if it has one).
    pub fn resolve(
        partition: i32,
        committed: Option<i64>,
        lake_next: Option<i64>,
        (low, high): (i64, i64),
        reset: OffsetReset,
    ) -> Resume {
        // A committed offset past the partition's end names nothing Kafka
        // holds (a truncated log): the lake's position, inside the log
        // (LakeAhead refused it otherwise), stands on its own.
        let committed_in_log = committed.filter(|c| *c <= high || lake_next.is_none());
        let position = committed_in_log.max(lake_next);
        Resume {
            partition,
            committed,
            lake_next,
            start: decide(position, low, high, reset),
        }
    }

    /// Where consumption starts.
    pub fn position(&self) -> i64 {
        self.start.offset()
    }

    /// The offset to commit before consuming, so the group agrees with
    /// where ingest starts: the lake's offsets a process that died before
    /// its Kafka commit left behind, or a start moved by retention or past
    /// the partition's end (a restart then neither counts the loss again
    /// nor warns again). None with no position at all.
    pub fn to_commit(&self) -> Option<i64> {
        match self.start {
            Start::Reset(_) => None,
            start if self.committed == Some(start.offset()) => None,
            start => Some(start.offset()),
        }
    }

    /// Logs and counts what the decision took or moved, and sets the
    /// partition's gauges (its lost series exported at 0).
    fn report(&self, metrics: &IngestMetrics, high: i64) {
        let p = self.partition;
        let label = p.to_string();
        metrics
            .records_lost_to_retention
            .with_label_values(&[&label]);
        match self.start {
            Start::LogStart(lost) => lost.report(metrics, p, "at assignment"),
            Start::Beyond { position, target } => tracing::warn!(
                partition = p,
                position,
                high,
                start = target,
                "the partition's position is past its end (the log was truncated, or the topic \
                 recreated): it names no offset Kafka holds, so KAFKA_AUTO_OFFSET_RESET decides"
            ),
            Start::Position(next) if self.committed.is_none_or(|c| c < next) => tracing::info!(
                partition = p, committed = ?self.committed, lake_next = next,
                "the lake holds offsets Kafka has not committed; committing them"
            ),
            Start::Position(_) | Start::Reset(_) => {}
        }
        if let Some(c) = self.to_commit().or(self.committed) {
            metrics
                .last_committed_offset
                .with_label_values(&[&label])
                .set(c);
        }
        metrics
            .consumer_lag
            .with_label_values(&[&label])
            .set((high - self.position()).max(0));
    }
}

/// Resume points: where each partition's position (the later of Kafka's
/// committed offset and the offset after the lake's recorded range) says,
/// decided by [`decide`]: below the log start resumes at the log start and
/// counts the span lost; KAFKA_AUTO_OFFSET_RESET applies only without a
/// position. The group is brought to each start first ([`Resume::to_commit`]).
/// The lake's offsets count only for the topic they were recorded from:
/// `identity` compares the record at a recorded range's end with Kafka's
/// (see [`super::identity`]). The stop ends the reads with
/// [`ResumeError::Stopped`].
#[allow(clippy::too_many_arguments)]
pub fn resume_points(
    consumer: &Consumer,
    topic: &str,
    partitions: &[i32],
    reset: OffsetReset,
    lake: &[OffsetRange],
    metrics: &IngestMetrics,
    stop: &Stop,
    identity: &mut dyn FnMut(&OffsetRange) -> anyhow::Result<Identity>,
) -> Result<Vec<Resume>, ResumeError> {
    let committed = committed_offsets(consumer, topic, partitions, stop)?;
    let mut recommit = TopicPartitionList::new();
    let mut out = Vec::new();
    let mut highs = Vec::new();
    for &p in partitions {
        let (low, high) = sliced(stop, TIMEOUT, |t| consumer.fetch_watermarks(topic, p, t))??;
        let recorded = lake.iter().find(|r| r.partition == p);
        let group = committed.get(&p).copied();
        check_lake(topic, p, recorded, group, (low, high), identity)?;
        let resume = Resume::resolve(p, group, recorded.map(|r| r.last + 1), (low, high), reset);
        if let Some(c) = resume.to_commit() {
            recommit.add_partition_offset(topic, p, Offset::Offset(c))?;
        }
        out.push(resume);
        highs.push(high);
    }
    if recommit.count() > 0 {
        consumer.commit(&recommit, rdkafka::consumer::CommitMode::Sync)?;
    }
    // Counted once committed: a round that fails before (a discovery round
    // is tried again) counts nothing.
    for (resume, high) in out.iter().zip(highs) {
        resume.report(metrics, high);
    }
    Ok(out)
}

/// The group's committed offset of each partition that has one.
fn committed_offsets(
    consumer: &Consumer,
    topic: &str,
    partitions: &[i32],
    stop: &Stop,
) -> Result<HashMap<i32, i64>, ResumeError> {
    let mut tpl = TopicPartitionList::new();
    for p in partitions {
        tpl.add_partition(topic, *p);
    }
    let committed = sliced(stop, TIMEOUT, |t| {
        consumer.committed_offsets(tpl.clone(), t)
    })??;
    Ok(committed
        .elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((e.partition(), o)),
            _ => None,
        })
        .collect())
}

/// The lake's recorded range must belong to this partition of this topic:
/// not past its end, and (while Kafka still holds it) ending on the record
/// Kafka holds there. Offsets the group has not committed must show that
/// they hold Kafka's records: a range with no record to compare does not.
fn check_lake(
    topic: &str,
    p: i32,
    recorded: Option<&OffsetRange>,
    committed: Option<i64>,
    (low, high): (i64, i64),
    identity: &mut dyn FnMut(&OffsetRange) -> anyhow::Result<Identity>,
) -> Result<(), ResumeError> {
    let Some(range) = recorded else {
        return Ok(());
    };
    if range.last + 1 > high {
        return Err(ResumeError::LakeAhead {
            partition: p,
            lake_next: range.last + 1,
            high,
        });
    }
    if range.last < low {
        return Ok(());
    }
    let found = identity(range);
    if let Ok(found) = &found {
        if !found.stands(range)
            && !matches!(found, Identity::Different { .. })
            && committed.is_none_or(|c| c <= range.last)
        {
            return Err(ResumeError::Unproven {
                partition: p,
                first: range.first,
                last: range.last,
                committed,
            });
        }
    }
    match found {
        Ok(Identity::Different { recorded, found }) => Err(ResumeError::Recreated {
            topic: topic.to_owned(),
            partition: p,
            offset: range.last,
            low,
            recorded,
            found,
        }),
        Ok(Identity::Unknown) => {
            tracing::info!(partition = p, offset = range.last,
                "the lake recorded no record to compare at its last offset, or Kafka no longer holds it; the topic's identity is not checked");
            Ok(())
        }
        Ok(Identity::Same) => Ok(()),
        Err(error) => Err(ResumeError::Identity {
            partition: p,
            error,
        }),
    }
}

/// The assignment of every partition at its start, an explicit offset
/// each: librdkafka never picks one.
pub fn assignment(topic: &str, resume: &[Resume]) -> Result<TopicPartitionList, KafkaError> {
    let mut tpl = TopicPartitionList::new();
    for r in resume {
        tpl.add_partition_offset(topic, r.partition, Offset::Offset(r.position()))?;
    }
    Ok(tpl)
}

/// Assigns every partition at its resume point.
pub fn assign(consumer: &Consumer, topic: &str, resume: &[Resume]) -> Result<(), KafkaError> {
    consumer.assign(&assignment(topic, resume)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::start::Lost;
    use OffsetReset::{Earliest, Latest};

    #[test]
    fn partitions_by_ordinal() {
        assert_eq!(my_partitions(8, 3, 0), vec![0, 3, 6]);
        assert_eq!(my_partitions(8, 3, 2), vec![2, 5]);
        assert_eq!(my_partitions(4, 1, 0), vec![0, 1, 2, 3]);
    }

    #[test]
    fn the_later_of_committed_and_lake_is_the_position() {
        let r = Resume::resolve(0, Some(40), Some(55), (10, 100), Latest);
        assert_eq!((r.start, r.to_commit()), (Start::Position(55), Some(55)));
        let r = Resume::resolve(0, Some(60), Some(55), (10, 100), Latest);
        assert_eq!((r.start, r.to_commit()), (Start::Position(60), None));
    }

    #[test]
    fn a_committed_or_lake_position_below_the_log_start_resumes_there_with_latest_too() {
        for reset in [Earliest, Latest] {
            // Only the group's committed offset.
            let r = Resume::resolve(0, Some(1), None, (58, 100), reset);
            assert_eq!(r.start, Start::LogStart(Lost { from: 1, to: 57 }));
            assert_eq!(r.to_commit(), Some(58));
            // Only the lake's: nothing committed, the lake behind the log start.
            let r = Resume::resolve(0, None, Some(5), (58, 100), reset);
            assert_eq!(r.start, Start::LogStart(Lost { from: 5, to: 57 }));
            assert_eq!(r.to_commit(), Some(58));
            // Both: what the lake holds is not lost.
            let r = Resume::resolve(0, Some(1), Some(5), (58, 100), reset);
            assert_eq!(r.start.lost(), Some(Lost { from: 5, to: 57 }));
        }
    }

    #[test]
    fn no_position_anywhere_takes_the_reset_and_commits_nothing() {
        let r = Resume::resolve(0, None, None, (10, 100), Latest);
        assert_eq!((r.position(), r.to_commit()), (100, None));
        let r = Resume::resolve(0, None, None, (10, 100), Earliest);
        assert_eq!((r.position(), r.to_commit()), (10, None));
    }

    #[test]
    fn a_committed_offset_past_the_end_is_brought_back_to_the_reset_target() {
        let r = Resume::resolve(0, Some(500), None, (10, 100), Earliest);
        assert_eq!((r.position(), r.to_commit()), (10, Some(10)));
        // The lake's position inside the log stands, even with latest.
        let r = Resume::resolve(0, Some(500), Some(40), (10, 100), Latest);
        assert_eq!((r.position(), r.to_commit()), (40, Some(40)));
    }

    /// Offsets the group has not committed stand only with a record that
    /// shows they are Kafka's: a file replayed under the topic has none.
    #[test]
    fn uncommitted_lake_offsets_without_a_record_to_compare_refuse_to_start() {
        let unknown = &mut |_: &OffsetRange| Ok(Identity::Unknown);
        let bare = OffsetRange::new("events", 0, 100, 119);
        let check =
            |committed,
             range: &OffsetRange,
             id: &mut dyn FnMut(&OffsetRange) -> anyhow::Result<Identity>| {
                check_lake("events", 0, Some(range), committed, (0, 140), id)
            };
        let e = check(Some(100), &bare, unknown).unwrap_err();
        assert!(
            matches!(
                e,
                ResumeError::Unproven {
                    first: 100,
                    last: 119,
                    ..
                }
            ),
            "{e}"
        );
        let text = e.to_string();
        assert!(
            text.contains("skip offsets 100..=119") && text.contains("_millpond_offsets"),
            "{text}"
        );
        assert!(matches!(
            check(None, &bare, unknown),
            Err(ResumeError::Unproven { .. })
        ));
        // The group is past them: nothing is skipped by resuming there.
        assert!(check(Some(120), &bare, unknown).is_ok());
        // A range that kept its last record, which Kafka no longer holds
        // (compacted): recorded from Kafka's records, so it stands.
        let kept = bare.clone().with_last_record(Some(LastRecord {
            timestamp_ms: None,
            checksum: 1,
        }));
        assert!(check(Some(100), &kept, unknown).is_ok());
        let same = &mut |_: &OffsetRange| Ok(Identity::Same);
        assert!(check(None, &kept, same).is_ok());
    }
}
