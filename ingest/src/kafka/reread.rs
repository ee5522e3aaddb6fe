//! Reads a flush's offset ranges from Kafka again, exactly: what ingest
//! does when a streamed flush loses its stream, since it no longer holds
//! the batches it sent. The flush rebuilt from them covers the same ranges,
//! so a writer that had committed it recognises the resend.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use millpond_proto::OffsetRange;
use rdkafka::consumer::Consumer as _;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::record::Record;
use super::Consumer;

/// An error that says the flush's records cannot be read any more.
fn gone(e: &KafkaError) -> bool {
    matches!(e, KafkaError::MessageConsumptionFatal(_))
        || matches!(
            e.rdkafka_error_code(),
            Some(RDKafkaErrorCode::OffsetOutOfRange | RDKafkaErrorCode::AutoOffsetReset)
        )
}

/// Records handed to `each` at a time.
const CHUNK: usize = 1000;

/// Feeds every record of `ranges` (one topic) to `each`, in chunks, then
/// unassigns. `consumer` is a consumer of its own: the pipeline's keeps
/// its position. Fails when the ranges are not all read within `deadline`.
pub fn reread(
    consumer: &Consumer,
    ranges: &[OffsetRange],
    deadline: Duration,
    mut each: impl FnMut(&[Record<'_>]),
) -> anyhow::Result<()> {
    let mut tpl = TopicPartitionList::new();
    // partition -> (first, last); a partition leaves once its last is read.
    let mut open: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
    for r in ranges {
        tpl.add_partition_offset(&r.topic, r.partition, Offset::Offset(r.first))
            .context("building the re-read assignment")?;
        open.insert(r.partition, (r.first, r.last));
    }
    consumer
        .assign(&tpl)
        .context("assigning the flush's ranges for the re-read")?;
    let started = Instant::now();
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    let mut chunk: Vec<BorrowedMessage<'_>> = Vec::with_capacity(CHUNK);
    let flush = |chunk: &mut Vec<BorrowedMessage<'_>>, each: &mut dyn FnMut(&[Record<'_>])| {
        let records: Vec<Record<'_>> = chunk.iter().map(Record::of).collect();
        each(&records);
        drop(records);
        chunk.clear();
    };
    while !open.is_empty() {
        if started.elapsed() > deadline {
            bail!(
                "re-reading the flush from Kafka took over {deadline:?}; partitions not read to their last offset: {:?}",
                open.keys().collect::<Vec<_>>()
            );
        }
        let Some(m) = consumer.poll(Duration::from_millis(200)) else {
            flush(&mut chunk, &mut each);
            continue;
        };
        let m = match m {
            Ok(m) => m,
            Err(e) if gone(&e) => {
                bail!("re-reading the flush from Kafka: its records are no longer there ({e})")
            }
            Err(e) => {
                tracing::warn!(error = %e, "consume error while re-reading a flush; going on");
                continue;
            }
        };
        let Some(&(first, last)) = open.get(&m.partition()) else {
            continue;
        };
        // Below the next offset expected: before the range, or a record
        // already read (a refetch); neither belongs to the flush twice.
        let expected = next.entry(m.partition()).or_insert(first);
        if m.offset() < *expected {
            continue;
        }
        *expected = m.offset() + 1;
        if m.offset() >= last {
            open.remove(&m.partition());
            // Read to its last offset: stop fetching it, so that its later
            // records do not fill the queue the open partitions share.
            let mut done = TopicPartitionList::new();
            done.add_partition(m.topic(), m.partition());
            if let Err(e) = consumer.pause(&done) {
                tracing::debug!(error = %e, partition = m.partition(), "pausing a partition read to its end failed; going on");
            }
        }
        if m.offset() <= last {
            chunk.push(m);
            if chunk.len() == CHUNK {
                flush(&mut chunk, &mut each);
            }
        }
    }
    flush(&mut chunk, &mut each);
    consumer
        .unassign()
        .context("unassigning after the re-read")?;
    Ok(())
}
