//! Startup's first contact with the brokers, bounded in time and ended by
//! the stop (SIGTERM).
use std::time::{Duration, Instant};

use millpond_shared::shutdown::{Stop, Stopped};
use rdkafka::consumer::Consumer as _;
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};

use super::client::Consumer;

/// One metadata request's share of the wait.
const SLICE: Duration = Duration::from_secs(2);

/// The topic's partition count. While waiting, the consumer's queue is
/// served: the SASL/OAUTHBEARER token request, client errors and
/// librdkafka's own log lines are handled only by a poll. After `timeout`
/// startup fails naming the last client error, so a broker that refuses
/// TLS or SASL, or cannot be reached, fails the pod instead of hanging it.
/// The stop ends the wait with [`Stopped`].
pub fn partition_count(
    consumer: &Consumer,
    topic: &str,
    timeout: Duration,
    stop: &Stop,
) -> anyhow::Result<i32> {
    let until = Instant::now() + timeout;
    loop {
        if stop.is_stopped() {
            return Err(Stopped.into());
        }
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

/// The longest slice of a startup request to the brokers: how soon the stop
/// is noticed. A request the broker needs longer for fails.
const REQUEST_SLICE: Duration = Duration::from_secs(5);

/// Runs a broker request bounded by `timeout` in slices of at most
/// [`REQUEST_SLICE`], trying again only after a slice that timed out, so
/// the stop ends the wait between slices. For requests that only read.
pub fn sliced<T>(
    stop: &Stop,
    timeout: Duration,
    mut request: impl FnMut(Duration) -> KafkaResult<T>,
) -> Result<KafkaResult<T>, Stopped> {
    let until = Instant::now() + timeout;
    loop {
        if stop.is_stopped() {
            return Err(Stopped);
        }
        let left = until.saturating_duration_since(Instant::now());
        let got = request(left.min(REQUEST_SLICE));
        match got {
            Err(e) if timed_out(&e) && Instant::now() < until => continue,
            got => return Ok(got),
        }
    }
}

fn timed_out(e: &KafkaError) -> bool {
    e.rdkafka_error_code() == Some(RDKafkaErrorCode::OperationTimedOut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout() -> KafkaError {
        KafkaError::OffsetFetch(RDKafkaErrorCode::OperationTimedOut)
    }

    #[test]
    fn sliced_tries_a_timed_out_slice_again_until_the_timeout() {
        let stop = Stop::new();
        let mut slices = Vec::new();
        let got = sliced(&stop, Duration::from_secs(12), |slice| {
            slices.push(slice);
            if slices.len() < 3 {
                Err(timeout())
            } else {
                Ok(7)
            }
        });
        assert_eq!(got.unwrap().unwrap(), 7);
        assert!(slices.iter().all(|s| *s <= REQUEST_SLICE), "{slices:?}");
        // Another error is the answer; a timeout past the deadline too.
        let got: Result<KafkaResult<()>, _> = sliced(&stop, Duration::from_secs(12), |_| {
            Err(KafkaError::OffsetFetch(
                RDKafkaErrorCode::UnknownTopicOrPartition,
            ))
        });
        assert!(!timed_out(&got.unwrap().unwrap_err()));
        let got: Result<KafkaResult<()>, _> = sliced(&stop, Duration::from_millis(30), |_| {
            std::thread::sleep(Duration::from_millis(10));
            Err(timeout())
        });
        assert!(timed_out(&got.unwrap().unwrap_err()));
    }

    #[test]
    fn sliced_ends_at_the_stop() {
        let stop = Stop::new();
        let mut calls = 0;
        let got: Result<KafkaResult<()>, _> = sliced(&stop, Duration::from_secs(60), |_| {
            calls += 1;
            stop.trigger();
            Err(timeout())
        });
        assert_eq!(got.unwrap_err(), Stopped);
        assert_eq!(calls, 1);
    }
}
