use rdkafka::config::ClientConfig;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;

use super::stats::StatsContext;
use crate::config::IngestConfig;

pub type Consumer = BaseConsumer<StatsContext>;

/// librdkafka properties Millpond sets before KAFKA_CONSUMER_* overrides.
pub fn client_config(cfg: &IngestConfig) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &cfg.kafka.bootstrap_servers)
        .set("group.id", &cfg.kafka.group_id)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        .set(
            "auto.offset.reset",
            match cfg.kafka.auto_offset_reset {
                crate::config::OffsetReset::Earliest => "earliest",
                crate::config::OffsetReset::Latest => "latest",
            },
        )
        .set("fetch.min.bytes", cfg.kafka.fetch_min_bytes.to_string())
        .set("fetch.wait.max.ms", cfg.kafka.fetch_max_wait_ms.to_string())
        .set(
            "statistics.interval.ms",
            cfg.kafka.stats_interval_ms.to_string(),
        )
        // Bounds librdkafka's prefetch per partition: the OOM guard.
        .set("queued.max.messages.kbytes", "16384")
        .set(
            "client.id",
            format!("millpond-{}-{}", cfg.kafka.topic, cfg.ordinal),
        );
    for (k, v) in &cfg.kafka.consumer_overrides {
        c.set(k, v.expose());
    }
    c
}

/// Builds the consumer. A refused property is reported by name only: its
/// value may be a credential (KAFKA_CONSUMER_SASL_PASSWORD and friends).
pub fn build_consumer(cfg: &IngestConfig, ctx: StatsContext) -> anyhow::Result<Consumer> {
    client_config(cfg).create_with_context(ctx).map_err(|e| match e {
        KafkaError::ClientConfig(_, _, key, _) => anyhow::anyhow!(
            "librdkafka refused the property {key:?} (set by KAFKA_CONSUMER_* or a core variable); its value is not shown"
        ),
        other => anyhow::anyhow!("creating the Kafka consumer failed: {}", other.rdkafka_error_code().map(|c| c.to_string()).unwrap_or_else(|| "unknown error".into())),
    })
}
