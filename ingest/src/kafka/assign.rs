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
    /// The record at the lake's last recorded offset could not be read.
    #[error("partition {partition}: reading the record at the lake's last recorded offset to check the topic's identity: {error:#}")]
    Identity {
        partition: i32,
        error: anyhow::Error,
    },
}

/// Where one partition starts, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    pub partition: i32,
    /// The next offset to read, or None for the reset policy.
    pub offset: Option<i64>,
    pub committed: Option<i64>,
    pub lake_next: Option<i64>,
    /// Where consumption starts (the reset target when `offset` is None).
    pub position: i64,
}

/// Resume points: the later of Kafka's committed offset and the offset after
/// the lake's recorded range. Committed offsets that fell below the log
/// start are re-committed to the reset target first. The lake's offsets
/// count only for the topic they were recorded from: `identity` compares
/// the record at a recorded range's end with Kafka's (see
/// [`super::identity`]). The stop ends the
/// reads with [`ResumeError::Stopped`].
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
    let mut tpl = TopicPartitionList::new();
    for p in partitions {
        tpl.add_partition(topic, *p);
    }
    let committed = sliced(stop, TIMEOUT, |t| {
        consumer.committed_offsets(tpl.clone(), t)
    })??;
    let mut committed_at: HashMap<i32, i64> = HashMap::new();
    for e in committed.elements() {
        if let Offset::Offset(o) = e.offset() {
            committed_at.insert(e.partition(), o);
        }
    }
    let mut recommit = TopicPartitionList::new();
    let mut out = Vec::new();
    for &p in partitions {
        let (low, high) = sliced(stop, TIMEOUT, |t| consumer.fetch_watermarks(topic, p, t))??;
        let mut committed = committed_at.get(&p).copied();
        if let Some(c) = committed {
            if c < low {
                let target = match reset {
                    OffsetReset::Earliest => low,
                    OffsetReset::Latest => high,
                };
                tracing::warn!(
                    partition = p,
                    committed = c,
                    log_start = low,
                    recommit = target,
                    "committed offset is below the log start; re-committing the reset target"
                );
                recommit.add_partition_offset(topic, p, Offset::Offset(target))?;
                committed = Some(target);
            }
        }
        let recorded = lake.iter().find(|r| r.partition == p);
        let lake_next = recorded.map(|r| r.last + 1);
        if let Some(l) = lake_next {
            if l > high {
                return Err(ResumeError::LakeAhead {
                    partition: p,
                    lake_next: l,
                    high,
                });
            }
        }
        if let Some(range) = recorded.filter(|r| r.last >= low) {
            match identity(range) {
                Ok(Identity::Different { recorded, found }) => {
                    return Err(ResumeError::Recreated {
                        topic: topic.to_owned(),
                        partition: p,
                        offset: range.last,
                        low,
                        recorded,
                        found,
                    })
                }
                Ok(Identity::Unknown) => tracing::info!(partition = p, offset = range.last,
                    "the lake recorded no record to compare at its last offset, or Kafka no longer holds it; the topic's identity is not checked"),
                Ok(Identity::Same) => {}
                Err(error) => return Err(ResumeError::Identity { partition: p, error }),
            }
        }
        let offset = match (committed, lake_next) {
            (Some(c), Some(l)) => Some(c.max(l)),
            (c, l) => c.or(l),
        };
        // The lake is ahead of Kafka when a process died between the lake
        // commit and the offset commit: bring Kafka up to the lake, so lag
        // and any other reader of the group agree with what was written.
        if let Some(l) = lake_next {
            if committed.is_none_or(|c| c < l) {
                tracing::info!(partition = p, committed = ?committed, lake_next = l,
                    "the lake holds offsets Kafka has not committed; committing them");
                recommit.add_partition_offset(topic, p, Offset::Offset(l))?;
                committed = Some(l);
            }
        }
        let label = p.to_string();
        if let Some(c) = committed {
            metrics
                .last_committed_offset
                .with_label_values(&[&label])
                .set(c);
        }
        let position = offset.unwrap_or(match reset {
            OffsetReset::Earliest => low,
            OffsetReset::Latest => high,
        });
        metrics
            .consumer_lag
            .with_label_values(&[&label])
            .set((high - position).max(0));
        out.push(Resume {
            partition: p,
            offset,
            committed,
            lake_next,
            position,
        });
    }
    if recommit.count() > 0 {
        consumer.commit(&recommit, rdkafka::consumer::CommitMode::Sync)?;
    }
    Ok(out)
}

/// Assigns every partition at its resume point.
pub fn assign(
    consumer: &Consumer,
    topic: &str,
    resume: &[Resume],
    reset: OffsetReset,
) -> Result<(), KafkaError> {
    let mut tpl = TopicPartitionList::new();
    for r in resume {
        let offset = match (r.offset, reset) {
            (Some(o), _) => Offset::Offset(o),
            (None, OffsetReset::Earliest) => Offset::Beginning,
            (None, OffsetReset::Latest) => Offset::End,
        };
        tpl.add_partition_offset(topic, r.partition, offset)?;
    }
    consumer.assign(&tpl)
}

#[cfg(test)]
mod tests {
    use super::my_partitions;

    #[test]
    fn partitions_by_ordinal() {
        assert_eq!(my_partitions(8, 3, 0), vec![0, 3, 6]);
        assert_eq!(my_partitions(8, 3, 2), vec![2, 5]);
        assert_eq!(my_partitions(4, 1, 0), vec![0, 1, 2, 3]);
    }
}
