use rdkafka::config::ClientConfig;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;

use std::time::SystemTime;

use millpond_shared::metrics::IngestMetrics;

use super::aws_credentials::ChainCredentials;
use super::context::KafkaContext;
use super::msk_iam::MskIamTokens;
use crate::config::IngestConfig;

pub type Consumer = BaseConsumer<KafkaContext>;

/// librdkafka properties Millpond sets before KAFKA_CONSUMER_* overrides.
pub fn client_config(cfg: &IngestConfig) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &cfg.kafka.bootstrap_servers)
        .set("group.id", &cfg.kafka.group_id)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        // An offset Kafka no longer holds is a consume error ingest answers
        // (kafka::retention), never a silent jump: KAFKA_AUTO_OFFSET_RESET
        // is applied by ingest, to partitions with no position (kafka::start).
        .set("auto.offset.reset", "error")
        .set("fetch.min.bytes", cfg.kafka.fetch_min_bytes.to_string())
        .set("fetch.wait.max.ms", cfg.kafka.fetch_max_wait_ms.to_string())
        .set(
            "statistics.interval.ms",
            cfg.kafka.stats_interval_ms.to_string(),
        )
        // Bounds librdkafka's prefetch per partition: the OOM guard.
        .set("queued.max.messages.kbytes", "16384")
        // Once a partition's queue passes its bound, librdkafka waits this
        // long before fetching again; its default (1 s) idled the consumer
        // most of a catch-up although the queue drained in milliseconds
        // (scripts/bench-e2e.sh: 21-26k -> 89-110k records/s wall, same CPU).
        .set("fetch.queue.backoff.ms", "10")
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
pub fn build_consumer(cfg: &IngestConfig, metrics: IngestMetrics) -> anyhow::Result<Consumer> {
    create(client_config(cfg), cfg, metrics)
}

/// A consumer for re-reading one flush's offset ranges (see
/// `kafka::reread`): the same connection settings (an error, never a
/// jump, when an offset is gone), no statistics, a small prefetch.
pub fn build_reread_consumer(
    cfg: &IngestConfig,
    metrics: IngestMetrics,
) -> anyhow::Result<Consumer> {
    let mut c = client_config(cfg);
    c.set("statistics.interval.ms", "0")
        .set("queued.max.messages.kbytes", "4096")
        .set(
            "client.id",
            format!("millpond-{}-{}-reread", cfg.kafka.topic, cfg.ordinal),
        );
    create(c, cfg, metrics)
}

fn create(
    config: ClientConfig,
    cfg: &IngestConfig,
    metrics: IngestMetrics,
) -> anyhow::Result<Consumer> {
    let msk_iam = match &cfg.kafka.msk_iam {
        Some(m) => {
            let credentials = ChainCredentials::start(m).map_err(anyhow::Error::msg)?;
            tracing::info!(region = %m.region, "SASL/OAUTHBEARER: signing MSK IAM tokens with the AWS credential chain");
            Some(MskIamTokens {
                region: m.region.clone(),
                credentials: Box::new(credentials),
                clock: SystemTime::now,
            })
        }
        None => None,
    };
    let ctx = KafkaContext::new(metrics, msk_iam);
    config.create_with_context(ctx).map_err(|e| match e {
        KafkaError::ClientConfig(_, _, key, _) => anyhow::anyhow!(
            "librdkafka refused the property {key:?} (set by KAFKA_CONSUMER_* or a core variable); its value is not shown"
        ),
        other => anyhow::anyhow!("creating the Kafka consumer failed: {}", other.rdkafka_error_code().map(|c| c.to_string()).unwrap_or_else(|| "unknown error".into())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use millpond_shared::config::Env;

    #[test]
    fn librdkafka_never_resets_an_offset_whatever_kafka_auto_offset_reset_says() {
        for reset in ["earliest", "latest"] {
            let env = Env::from_pairs(vec![
                ("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
                ("KAFKA_TOPIC", "events"),
                ("REPLICA_COUNT", "1"),
                ("DUCKLAKE_TABLE", "events"),
                ("KAFKA_AUTO_OFFSET_RESET", reset),
            ]);
            let cfg = IngestConfig::from_env(&env).unwrap();
            assert_eq!(client_config(&cfg).get("auto.offset.reset"), Some("error"));
        }
    }
}
