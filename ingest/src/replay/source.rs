//! What a replay sends: a range of one partition read from Kafka exactly,
//! or the lines of a file.
use std::time::Duration;

use anyhow::{bail, Context};
use millpond_proto::OffsetRange;
use rdkafka::consumer::Consumer as _;
use rdkafka::ClientConfig;

use crate::kafka::Record;
use crate::kafka::{reread, Consumer, KafkaContext};

/// A record read for a replay, owning its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: Option<i64>,
    pub key: Option<Vec<u8>>,
    /// `None` is a tombstone.
    pub payload: Option<Vec<u8>>,
}

impl Owned {
    pub fn record(&self) -> Record<'_> {
        Record {
            partition: self.partition,
            offset: self.offset,
            timestamp_ms: self.timestamp_ms,
            key: self.key.as_deref(),
            payload: self.payload.as_deref(),
        }
    }
}

/// One partition of a Kafka topic, to replay a range of.
pub struct KafkaPartition {
    consumer: Consumer,
    topic: String,
    partition: i32,
    /// Kafka's watermarks: the first offset held and one past the last.
    pub low: i64,
    pub high: i64,
}

impl KafkaPartition {
    pub fn open(
        bootstrap: &str,
        topic: &str,
        partition: i32,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let registry = millpond_shared::metrics::new_registry("millpond-replay", "");
        let context = KafkaContext::new(
            millpond_shared::metrics::IngestMetrics::new(&registry),
            None,
        );
        let consumer: Consumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", "millpond-replay")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false")
            // An offset gone from Kafka is an error, not a jump.
            .set("auto.offset.reset", "error")
            .create_with_context(context)
            .context("creating the Kafka consumer")?;
        let (low, high) = consumer
            .fetch_watermarks(topic, partition, timeout)
            .with_context(|| {
                format!("reading the offsets Kafka holds for {topic} partition {partition}")
            })?;
        Ok(KafkaPartition {
            consumer,
            topic: topic.into(),
            partition,
            low,
            high,
        })
    }

    /// Reads offsets `from..=to` exactly (see [`reread`]) within `deadline`.
    pub fn read(&self, from: i64, to: i64, deadline: Duration) -> anyhow::Result<Vec<Owned>> {
        let (topic, p, low, high) = (&self.topic, self.partition, self.low, self.high);
        if from < low {
            bail!("offsets {from}..={} of {topic} partition {p} are no longer in Kafka (its log starts at {low})", low - 1);
        }
        if to >= high {
            bail!(
                "offset {to} is past the end of {topic} partition {p} (its last offset is {})",
                high - 1
            );
        }
        let mut out = Vec::new();
        let range = OffsetRange::new(topic.as_str(), p, from, to);
        reread(&self.consumer, &[range], deadline, |records| {
            out.extend(records.iter().map(|r| Owned {
                partition: r.partition,
                offset: r.offset,
                timestamp_ms: r.timestamp_ms,
                key: r.key.map(<[u8]>::to_vec),
                payload: r.payload.map(<[u8]>::to_vec),
            }))
        })?;
        Ok(out)
    }
}

/// A file's lines as records of `partition` from offset `from` on: line i
/// is offset from + i, with no key and no timestamp.
pub fn lines(text: &str, partition: i32, from: i64) -> Vec<Owned> {
    text.lines()
        .enumerate()
        .map(|(i, l)| Owned {
            partition,
            offset: from + i as i64,
            timestamp_ms: None,
            key: None,
            payload: Some(l.as_bytes().to_vec()),
        })
        .collect()
}
