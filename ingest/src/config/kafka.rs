//! The Kafka group: broker, topic, offsets and librdkafka's knobs.
use std::time::Duration;

use millpond_shared::config::{EnvReader, Secret};

use super::msk_iam::{self, MskIamConfig};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    Earliest,
    Latest,
}

#[derive(Debug, Clone)]
pub struct KafkaConfig {
    pub bootstrap_servers: String,
    pub topic: String,
    pub group_id: String,
    pub auto_offset_reset: OffsetReset,
    /// librdkafka properties from KAFKA_CONSUMER_* (lowercase, `_` -> `.`),
    /// without the ones that would break delivery (`kafka_overrides`).
    /// Any of them may be a credential (sasl.password, ssl.key.password, an
    /// OAuth secret), so every value is a Secret: Debug shows only the keys.
    pub consumer_overrides: Vec<(String, Secret)>,
    pub consume_batch_size: usize,
    pub fetch_min_bytes: u64,
    pub fetch_max_wait_ms: u64,
    pub stats_interval_ms: u64,
    /// How long startup waits for the topic's metadata (brokers reached,
    /// TLS and SASL accepted) before failing with the last client error.
    pub startup_timeout: Duration,
    /// Set when the overrides ask for SASL/OAUTHBEARER: ingest signs the
    /// MSK IAM token itself.
    pub msk_iam: Option<MskIamConfig>,
}

impl KafkaConfig {
    /// The broker and topic are read first by the caller (the group id and
    /// the table's defaults need them).
    pub fn from_env(
        r: &mut EnvReader<'_>,
        bootstrap_servers: String,
        topic: String,
        default_group: &str,
    ) -> KafkaConfig {
        let group_id = r.string_or("GROUP_ID", default_group);
        let auto_offset_reset = match r
            .choice(
                "KAFKA_AUTO_OFFSET_RESET",
                "earliest",
                &["earliest", "latest"],
            )
            .as_str()
        {
            "latest" => OffsetReset::Latest,
            _ => OffsetReset::Earliest,
        };
        let consumer_overrides = super::kafka_overrides::overrides(r);
        let msk_iam = msk_iam::wanted(&consumer_overrides).then(|| MskIamConfig::from_env(r));
        KafkaConfig {
            bootstrap_servers,
            topic,
            group_id,
            auto_offset_reset,
            consumer_overrides,
            consume_batch_size: r.positive_u64("CONSUME_BATCH_SIZE", 1000) as usize,
            fetch_min_bytes: r.positive_u64("FETCH_MIN_BYTES", 1_048_576),
            fetch_max_wait_ms: r.parse_or("FETCH_MAX_WAIT_MS", 500u64, |_| Ok(())),
            stats_interval_ms: r.parse_or("STATS_INTERVAL_MS", 5000u64, |_| Ok(())),
            startup_timeout: Duration::from_secs(r.positive_u64("KAFKA_STARTUP_TIMEOUT_S", 30)),
            msk_iam,
        }
    }
}
