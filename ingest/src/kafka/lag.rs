//! Consumer lag, sampled at most once a minute.
use std::collections::HashMap;
use std::time::{Duration, Instant};

use millpond_proto::OffsetRange;
use millpond_shared::metrics::{error_type, IngestMetrics};
use rdkafka::consumer::Consumer as _;

use super::client::Consumer;

pub struct LagSampler {
    every: Duration,
    last: Option<Instant>,
    /// High watermark per partition at the last sample.
    high: HashMap<i32, i64>,
}

impl Default for LagSampler {
    fn default() -> Self {
        LagSampler {
            every: Duration::from_secs(60),
            last: None,
            high: HashMap::new(),
        }
    }
}

impl LagSampler {
    /// `next` is the committed offset per partition (the next to read after
    /// a restart), so lag counts everything not yet durable.
    pub fn maybe_sample(
        &mut self,
        consumer: &Consumer,
        topic: &str,
        next: &HashMap<i32, i64>,
        metrics: &IngestMetrics,
    ) {
        if self.last.is_some_and(|t| t.elapsed() < self.every) {
            return;
        }
        let started = Instant::now();
        self.last = Some(started);
        for (p, pos) in next {
            // Never let sampling eat into the liveness budget.
            if started.elapsed() > Duration::from_secs(10) {
                break;
            }
            match consumer.fetch_watermarks(topic, *p, Duration::from_secs(1)) {
                Ok((_, high)) => {
                    self.high.insert(*p, high);
                    set_lag(metrics, *p, high, *pos);
                }
                Err(e) => {
                    metrics.errors.with_label_values(&[error_type::KAFKA]).inc();
                    tracing::debug!(partition = p, error = %e, "watermark query failed");
                }
            }
        }
    }

    /// After a commit: each committed partition's position moves to
    /// `last + 1`, and its lag is recomputed against the last sampled high
    /// watermark (records that arrived since are counted at the next sample).
    pub fn committed(
        &self,
        ranges: &[OffsetRange],
        next: &mut HashMap<i32, i64>,
        metrics: &IngestMetrics,
    ) {
        for r in ranges {
            next.insert(r.partition, r.last + 1);
            if let Some(high) = self.high.get(&r.partition) {
                set_lag(metrics, r.partition, *high, r.last + 1);
            }
        }
    }
}

fn set_lag(metrics: &IngestMetrics, partition: i32, high: i64, next: i64) {
    metrics
        .consumer_lag
        .with_label_values(&[&partition.to_string()])
        .set((high - next).max(0));
}
