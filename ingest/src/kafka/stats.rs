use rdkafka::consumer::ConsumerContext;
use rdkafka::{ClientContext, Statistics};

use millpond_shared::metrics::{error_type, IngestMetrics};

/// Publishes librdkafka statistics as gauges.
pub struct StatsContext {
    pub metrics: IngestMetrics,
}

impl ClientContext for StatsContext {
    fn stats(&self, s: Statistics) {
        let m = &self.metrics;
        m.rdkafka_replyq.set(s.replyq);
        m.rdkafka_msg_cnt.set(s.msg_cnt as i64);
        m.rdkafka_msg_size.set(s.msg_size as i64);
        for (name, b) in &s.brokers {
            if let Some(rtt) = &b.rtt {
                m.rdkafka_broker_rtt_avg
                    .with_label_values(&[name.as_str()])
                    .set(rtt.avg as f64 / 1e6);
                m.rdkafka_broker_rtt_p99
                    .with_label_values(&[name.as_str()])
                    .set(rtt.p99 as f64 / 1e6);
            }
        }
    }

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        self.metrics
            .errors
            .with_label_values(&[error_type::KAFKA])
            .inc();
        tracing::warn!(error = %error, reason, "kafka client error");
    }
}

impl ConsumerContext for StatsContext {}
