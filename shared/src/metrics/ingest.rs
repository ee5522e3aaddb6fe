use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry,
};

use super::matched::{MatchedValues, DEFAULT_MAX_VALUES};
use super::register;

/// Series the ingest process owns.
#[derive(Clone)]
pub struct IngestMetrics {
    pub records_consumed: IntCounterVec,
    /// Offsets Kafka deleted (retention) before ingest read them, per
    /// partition: never consumed, so apart from `records_skipped` and from
    /// conservation; with `records_consumed` they account for the offsets
    /// a partition's position advanced over.
    pub records_lost_to_retention: IntCounterVec,
    pub records_skipped: IntCounterVec,
    pub tombstones: IntCounter,
    pub sort_skipped: IntCounterVec,
    /// Per matched value, a bounded label set.
    pub filter_matched: MatchedValues,
    pub columns_coerced: IntCounterVec,
    pub batches_flushed: IntCounterVec,
    /// Flushes held and sent whole instead of streamed, by reason.
    pub flushes_sent_whole: IntCounterVec,
    pub errors: IntCounterVec,
    pub pending_bytes: IntGauge,
    pub buffer_fullness: Gauge,
    /// Age of the oldest record in the pending flush (0 when empty): buffer
    /// lag, as opposed to write lag.
    pub buffer_age_seconds: Gauge,
    /// Now minus the Kafka timestamp of the last committed record, per
    /// partition: how far behind the producer what is durable is.
    pub committed_record_age_seconds: GaugeVec,
    pub consume_batch_size: IntGauge,
    pub consumer_lag: IntGaugeVec,
    pub last_committed_offset: IntGaugeVec,
    pub arrow_conversion_seconds: Histogram,
    pub rdkafka_replyq: IntGauge,
    pub rdkafka_msg_cnt: IntGauge,
    pub rdkafka_msg_size: IntGauge,
    pub rdkafka_broker_rtt_avg: GaugeVec,
    pub rdkafka_broker_rtt_p99: GaugeVec,
    /// 1 when the last scrape of ingest's /metrics appended the writer's
    /// series, 0 when the writer did not answer (or the append is off).
    pub writer_metrics_up: IntGauge,
}

fn counter_vec(registry: &Registry, name: &str, help: &str, label: &str) -> IntCounterVec {
    register(
        registry,
        IntCounterVec::new(Opts::new(name, help), &[label]).unwrap(),
    )
}

fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    register(registry, IntGauge::new(name, help).unwrap())
}

impl IngestMetrics {
    /// MILLPOND_FILTER_MATCHED_MAX_VALUES: how many allowlist values get a
    /// `filter_matched_total` series of their own.
    pub fn with_matched_values_cap(mut self, cap: usize) -> Self {
        self.filter_matched = self.filter_matched.with_cap(cap);
        self
    }

    pub fn new(registry: &Registry) -> Self {
        IngestMetrics {
            records_consumed: counter_vec(
                registry,
                "records_consumed_total",
                "Kafka records consumed, tombstones included",
                "partition",
            ),
            records_lost_to_retention: counter_vec(
                registry,
                "records_lost_to_retention_total",
                "Offsets Kafka deleted (retention) before ingest read them; never consumed, never written",
                "partition",
            ),
            records_skipped: counter_vec(
                registry,
                "records_skipped_total",
                "Records not written, by reason",
                "reason",
            ),
            tombstones: register(
                registry,
                IntCounter::new(
                    "tombstones_total",
                    "Tombstones consumed (no payload): counted, never written",
                )
                .unwrap(),
            ),
            columns_coerced: counter_vec(
                registry,
                "columns_coerced_total",
                "Pinned columns whose every value converted, once per column per batch",
                "target_type",
            ),
            filter_matched: MatchedValues::new(
                counter_vec(
                    registry,
                    "filter_matched_total",
                    "Records kept by the allowlist, per matched value (values past MILLPOND_FILTER_MATCHED_MAX_VALUES as _other)",
                    "value",
                ),
                DEFAULT_MAX_VALUES,
            ),
            sort_skipped: counter_vec(
                registry,
                "sort_skipped_total",
                "Records sent unsorted although MILLPOND_SORT_BY is set, by reason",
                "reason",
            ),
            batches_flushed: counter_vec(
                registry,
                "batches_flushed_total",
                "Flushes acknowledged by the writer, by trigger",
                "trigger",
            ),
            flushes_sent_whole: {
                let c = counter_vec(
                    registry,
                    "flushes_sent_whole_total",
                    "Flushes ingest held and sent whole instead of streaming them, by reason",
                    "reason",
                );
                // Exported at 0 from the start: a rate has a series to start from.
                for reason in super::whole_reason::ALL {
                    c.with_label_values(&[reason]);
                }
                c
            },
            errors: counter_vec(registry, "errors_total", "Errors by type", "type"),
            pending_bytes: gauge(
                registry,
                "pending_bytes",
                "Size of the pending flush (Arrow and dead-letter bytes, sent or not) against FLUSH_SIZE",
            ),
            buffer_fullness: register(
                registry,
                Gauge::new("buffer_fullness", "pending_bytes / FLUSH_SIZE").unwrap(),
            ),
            buffer_age_seconds: register(
                registry,
                Gauge::new(
                    "buffer_age_seconds",
                    "Seconds since the oldest record of the pending flush was consumed (0 when empty)",
                )
                .unwrap(),
            ),
            committed_record_age_seconds: register(
                registry,
                GaugeVec::new(
                    Opts::new(
                        "committed_record_age_seconds",
                        "Now minus the Kafka timestamp of the last committed record, per partition",
                    ),
                    &["partition"],
                )
                .unwrap(),
            ),
            consume_batch_size: gauge(
                registry,
                "consume_batch_size_current",
                "Messages requested per consume call after backpressure",
            ),
            consumer_lag: register(
                registry,
                IntGaugeVec::new(
                    Opts::new("consumer_lag", "High watermark minus committed offset"),
                    &["partition"],
                )
                .unwrap(),
            ),
            last_committed_offset: register(
                registry,
                IntGaugeVec::new(
                    Opts::new("last_committed_offset", "Last offset committed to Kafka"),
                    &["partition"],
                )
                .unwrap(),
            ),
            arrow_conversion_seconds: register(
                registry,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "arrow_conversion_seconds",
                        "JSON to Arrow time per consume batch",
                    )
                    .buckets(vec![
                        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                    ]),
                )
                .unwrap(),
            ),
            rdkafka_replyq: gauge(
                registry,
                "rdkafka_replyq",
                "librdkafka ops waiting in the reply queue",
            ),
            rdkafka_msg_cnt: gauge(registry, "rdkafka_msg_cnt", "librdkafka messages in queues"),
            rdkafka_msg_size: gauge(registry, "rdkafka_msg_size", "librdkafka bytes in queues"),
            rdkafka_broker_rtt_avg: register(
                registry,
                GaugeVec::new(
                    Opts::new(
                        "rdkafka_broker_rtt_avg_seconds",
                        "Broker round trip time, average",
                    ),
                    &["broker"],
                )
                .unwrap(),
            ),
            rdkafka_broker_rtt_p99: register(
                registry,
                GaugeVec::new(
                    Opts::new(
                        "rdkafka_broker_rtt_p99_seconds",
                        "Broker round trip time, p99",
                    ),
                    &["broker"],
                )
                .unwrap(),
            ),
            writer_metrics_up: gauge(
                registry,
                "writer_metrics_up",
                "1 when this scrape appended the writer's series, 0 when the writer did not answer",
            ),
        }
    }
}
