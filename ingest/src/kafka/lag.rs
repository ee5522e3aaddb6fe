//! Consumer lag, sampled at most once a minute.
use std::collections::HashMap;
use std::time::{Duration, Instant};

use millpond_shared::metrics::IngestMetrics;
use rdkafka::consumer::Consumer as _;

use super::client::Consumer;

pub struct LagSampler {
    every: Duration,
    last: Option<Instant>,
}

impl Default for LagSampler {
    fn default() -> Self {
        LagSampler {
            every: Duration::from_secs(60),
            last: None,
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
                Ok((_, high)) => metrics
                    .consumer_lag
                    .with_label_values(&[&p.to_string()])
                    .set((high - pos).max(0)),
                Err(e) => {
                    metrics.errors.with_label_values(&["kafka"]).inc();
                    tracing::debug!(partition = p, error = %e, "watermark query failed");
                }
            }
        }
    }
}
