//! Startup's first contact with the brokers, bounded in time.
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer as _;

use super::client::Consumer;

/// One metadata request's share of the wait.
const SLICE: Duration = Duration::from_secs(2);

/// The topic's partition count. While waiting, the consumer's queue is
/// served: the SASL/OAUTHBEARER token request, client errors and
/// librdkafka's own log lines are handled only by a poll. After `timeout`
/// startup fails naming the last client error, so a broker that refuses
/// TLS or SASL, or cannot be reached, fails the pod instead of hanging it.
pub fn partition_count(consumer: &Consumer, topic: &str, timeout: Duration) -> anyhow::Result<i32> {
    let until = Instant::now() + timeout;
    loop {
        serve_events(consumer);
        let slice = until
            .saturating_duration_since(Instant::now())
            .clamp(Duration::from_millis(100), SLICE);
        let failed = match consumer.fetch_metadata(Some(topic), slice) {
            Ok(md) => {
                return md
                    .topics()
                    .iter()
                    .find(|t| t.name() == topic)
                    .map(|t| t.partitions().len() as i32)
                    .filter(|n| *n > 0)
                    .ok_or_else(|| {
                        anyhow::anyhow!("topic {topic} has no partitions (does it exist?)")
                    });
            }
            Err(e) => e,
        };
        if Instant::now() >= until {
            serve_events(consumer);
            let last = consumer
                .context()
                .last_error()
                .unwrap_or_else(|| failed.to_string());
            anyhow::bail!(
                "could not read topic {topic}'s metadata from the Kafka brokers within {} s \
                 (KAFKA_STARTUP_TIMEOUT_S); last client error: {last}",
                timeout.as_secs()
            );
        }
    }
}

/// Nothing is assigned yet, so a poll only handles events.
fn serve_events(consumer: &Consumer) {
    let mut wait = Duration::from_millis(100);
    for _ in 0..100 {
        if consumer.poll(wait).is_none() {
            return;
        }
        wait = Duration::ZERO;
    }
}
