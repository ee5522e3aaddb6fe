use prometheus::{
    exponential_buckets, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts,
    Registry,
};

use super::register;

/// Series the writer process owns.
#[derive(Clone)]
pub struct WriterMetrics {
    pub records_written: IntCounter,
    pub flush_duration: Histogram,
    pub flush_size_bytes: Histogram,
    pub flush_size_records: Histogram,
    pub errors: IntCounterVec,
    /// Arrow bytes the DoPuts hold now (against
    /// MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES).
    pub in_flight_bytes: IntGauge,
    pub records_skipped: IntCounterVec,
    pub dead_letters: IntCounterVec,
    pub dead_letter_values: IntCounterVec,
    pub schema_columns_added: IntCounter,
    pub schema_columns_widened: IntCounter,
    pub flushes_already_recorded: IntCounter,
    /// Hoglake only: parquet uploaded and never registered, by reason
    /// (unreclaimed storage; each increment's warning names the URIs).
    pub hoglake_orphaned_files: IntCounterVec,
    /// Hoglake only: parquet files registered (with partitioned fanout,
    /// the rate compaction has to keep up with).
    pub hoglake_files_written: IntCounter,
    /// Hoglake only: commits answered from the server's receipt instead of
    /// publishing, by outcome (`replayed`: a lost response; `already_published`:
    /// a resent flush). Each is a duplicate that did not happen.
    pub hoglake_commit_replays: IntCounterVec,
    /// Hoglake only: data files per commit, and rows per data file.
    pub hoglake_flush_files: Histogram,
    pub hoglake_file_rows: Histogram,
    /// VARIANT dual-write (DuckLake): payload columns stripped because they
    /// collide with a companion; flushes written again string-only after a
    /// shredding failure; values whose poison integers were quoted.
    pub variant_companion_columns_dropped: IntCounter,
    pub variant_write_fallback: IntCounter,
    pub variant_values_coerced: IntCounter,
}

impl WriterMetrics {
    /// Every series of the writer's closed label sets at 0, so a scrape
    /// lists them before they first move and an alert on `increase() > 0`
    /// sees the first one. `contention` is the destination's own label; a
    /// hoglake writer also announces its receipt outcomes (its sink, the
    /// orphan reasons).
    pub fn announce(&self, contention: &str, hoglake: bool) {
        use super::{error_type as e, skip_reason as s};
        for t in [
            e::WRITE_RETRY,
            e::SCHEMA,
            e::VARIANT_WRITE,
            e::FLIGHT_REQUEST,
            e::PARTITION_LEASED,
            e::OFFSETS_OVERLAP,
            e::FLUSH_TOO_LARGE,
            e::IN_FLIGHT_BYTES,
            e::UPLOAD_IDLE,
            contention,
        ] {
            self.errors.with_label_values(&[t]);
        }
        for r in [s::UNSAFE_FIELD_NAME, s::VARIANT_COMPANION_COLLISION] {
            self.records_skipped.with_label_values(&[r]);
        }
        if hoglake {
            for o in ["replayed", "already_published"] {
                self.hoglake_commit_replays.with_label_values(&[o]);
            }
        }
    }

    pub fn new(registry: &Registry) -> Self {
        WriterMetrics {
            records_written: register(
                registry,
                IntCounter::new("records_written_total", "Rows durably written to the lake").unwrap(),
            ),
            flush_duration: register(
                registry,
                Histogram::with_opts(
                    HistogramOpts::new("flush_duration_seconds", "Time to make one flush durable")
                        .buckets(vec![0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0]),
                )
                .unwrap(),
            ),
            flush_size_bytes: register(
                registry,
                Histogram::with_opts(
                    HistogramOpts::new("flush_size_bytes", "Arrow bytes per flush")
                        .buckets(exponential_buckets(1e6, 10f64.powf(1.0 / 3.0), 10).unwrap()),
                )
                .unwrap(),
            ),
            flush_size_records: register(
                registry,
                Histogram::with_opts(
                    HistogramOpts::new("flush_size_records", "Rows per flush")
                        .buckets(exponential_buckets(100.0, 10.0, 5).unwrap()),
                )
                .unwrap(),
            ),
            errors: register(
                registry,
                IntCounterVec::new(Opts::new("errors_total", "Errors by type"), &["type"]).unwrap(),
            ),
            in_flight_bytes: register(
                registry,
                IntGauge::new(
                    "writer_in_flight_bytes",
                    "Arrow bytes held by the writer's DoPuts now, received and not yet written",
                )
                .unwrap(),
            ),
            records_skipped: register(
                registry,
                IntCounterVec::new(
                    Opts::new("records_skipped_total", "Records not written, by reason"),
                    &["reason"],
                )
                .unwrap(),
            ),
            dead_letters: register(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "dead_letters_total",
                        "Records that are not rows, committed to the dead-letter table (or discarded when it is off), by reason",
                    ),
                    &["reason"],
                )
                .unwrap(),
            ),
            dead_letter_values: register(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "dead_letter_values_total",
                        "Values left NULL in a written row and committed to the dead-letter table (or discarded when it is off), by reason",
                    ),
                    &["reason"],
                )
                .unwrap(),
            ),
            schema_columns_added: register(
                registry,
                IntCounter::new("schema_columns_added_total", "Columns added to the table").unwrap(),
            ),
            schema_columns_widened: register(
                registry,
                IntCounter::new("schema_columns_widened_total", "Column types widened").unwrap(),
            ),
            flushes_already_recorded: register(
                registry,
                IntCounter::new(
                    "flushes_already_recorded_total",
                    "Resent flushes acknowledged without writing because the lake held their offsets",
                )
                .unwrap(),
            ),
            hoglake_orphaned_files: register(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "hoglake_orphaned_files_total",
                        "Files uploaded to the hoglake data path and never registered, by reason",
                    ),
                    &["reason"],
                )
                .unwrap(),
            ),
            hoglake_files_written: register(
                registry,
                IntCounter::new(
                    "hoglake_files_written_total",
                    "Parquet files registered in hoglake commits",
                )
                .unwrap(),
            ),
            hoglake_commit_replays: register(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "hoglake_commit_replays_total",
                        "Hoglake commits resolved from the server's receipt instead of publishing, by outcome",
                    ),
                    &["outcome"],
                )
                .unwrap(),
            ),
            hoglake_flush_files: register(
                registry,
                Histogram::with_opts(
                    // The original's name and buckets (1 to 2048).
                    HistogramOpts::new("flush_files", "Data files per hoglake commit")
                        .buckets(exponential_buckets(1.0, 2.0, 12).unwrap()),
                )
                .unwrap(),
            ),
            variant_companion_columns_dropped: register(
                registry,
                IntCounter::new(
                    "variant_companion_columns_dropped_total",
                    "Payload columns colliding with a VARIANT companion; their values are dead letters",
                )
                .unwrap(),
            ),
            variant_write_fallback: register(
                registry,
                IntCounter::new(
                    "variant_write_fallback_total",
                    "Flushes written again without VARIANT companions after a shredding failure",
                )
                .unwrap(),
            ),
            variant_values_coerced: register(
                registry,
                IntCounter::new(
                    "variant_values_coerced_total",
                    "Values whose integers above INT64_MAX were quoted in the VARIANT companion only",
                )
                .unwrap(),
            ),
            hoglake_file_rows: register(
                registry,
                Histogram::with_opts(
                    // The original's name.
                    HistogramOpts::new("flush_file_rows", "Rows per hoglake data file")
                        .buckets(exponential_buckets(10.0, 10.0, 7).unwrap()),
                )
                .unwrap(),
            ),
        }
    }
}
