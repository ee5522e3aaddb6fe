//! Synchronous offset commits after the writer's acknowledgement.
use millpond_proto::OffsetRange;
use millpond_shared::metrics::{error_type, IngestMetrics};
use millpond_shared::retry::Ladder;
use rdkafka::consumer::{CommitMode, Consumer as _};
use rdkafka::error::KafkaError;
use rdkafka::{Offset, TopicPartitionList};

use super::client::Consumer;

/// Commits `last + 1` of every range on [`Ladder::OFFSET_COMMIT`] (3
/// attempts, 0.5 s then 1 s). An error after the last attempt is returned
/// and the process must exit.
pub fn commit_offsets(
    consumer: &Consumer,
    ranges: &[OffsetRange],
    metrics: &IngestMetrics,
) -> Result<(), KafkaError> {
    if ranges.is_empty() {
        return Ok(());
    }
    let mut tpl = TopicPartitionList::new();
    for r in ranges {
        tpl.add_partition_offset(&r.topic, r.partition, Offset::Offset(r.last + 1))?;
    }
    let ladder = Ladder::OFFSET_COMMIT;
    let mut attempt = 0;
    let committed = ladder.retry_blocking(
        || {
            attempt += 1;
            let e = match consumer.commit(&tpl, CommitMode::Sync) {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            metrics
                .errors
                .with_label_values(&[error_type::OFFSET_COMMIT])
                .inc();
            if attempt < ladder.attempts {
                tracing::warn!(error = %e, attempt, "offset commit failed; retrying");
            }
            Err(e)
        },
        |_| true,
    );
    if let Err(e) = committed {
        tracing::error!(error = %e, "offset commit failed after {} attempts", ladder.attempts);
        return Err(e);
    }
    for r in ranges {
        metrics
            .last_committed_offset
            .with_label_values(&[&r.partition.to_string()])
            .set(r.last + 1);
    }
    Ok(())
}
