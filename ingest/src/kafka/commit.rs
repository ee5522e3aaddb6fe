//! Synchronous offset commits after the writer's acknowledgement.
use millpond_proto::OffsetRange;
use millpond_shared::metrics::{error_type, IngestMetrics};
use millpond_shared::retry::Ladder;
use rdkafka::consumer::{CommitMode, Consumer as _};
use rdkafka::error::KafkaError;
use rdkafka::{Offset, TopicPartitionList};

use super::client::Consumer;

/// Commits `last + 1` of every range: 3 attempts, 0.5 s then 1 s. An error
/// after the last attempt is returned and the process must exit.
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
    let mut failed = 0;
    loop {
        match consumer.commit(&tpl, CommitMode::Sync) {
            Ok(()) => break,
            Err(e) => {
                metrics
                    .errors
                    .with_label_values(&[error_type::OFFSET_COMMIT])
                    .inc();
                match ladder.delay(failed, None) {
                    Some(d) => {
                        tracing::warn!(error = %e, attempt = failed + 1, "offset commit failed; retrying");
                        std::thread::sleep(d);
                        failed += 1;
                    }
                    None => {
                        tracing::error!(error = %e, "offset commit failed after 3 attempts");
                        return Err(e);
                    }
                }
            }
        }
    }
    for r in ranges {
        metrics
            .last_committed_offset
            .with_label_values(&[&r.partition.to_string()])
            .set(r.last + 1);
    }
    Ok(())
}
