//! The publisher's counters on the writer's metrics: each publish adds
//! what the publisher counted since the last one (orphans, schema changes,
//! 409 refusals), and a published commit its files and rows.
use std::collections::{BTreeMap, HashSet};

use millpond_hoglake::schema::ColumnType;

use millpond_hoglake::publish::{PublishReceipt, Publisher};
use millpond_shared::metrics::{error_type, skip_reason, WriterMetrics};

use crate::sink::prepare::Prepared;

/// What of the publisher's running totals is already on the metrics.
pub struct Counters {
    pub metrics: WriterMetrics,
    /// Orphans per reason already added to the metric.
    orphans_counted: BTreeMap<String, u64>,
    /// The publisher's schema counters already added to the metrics:
    /// (columns added, columns promoted, schema errors).
    schema_counted: (u64, u64, u64),
    /// The publisher's 409 commit refusals already counted.
    conflicts_counted: u64,
    /// uuid rewrites already logged: (column, live type).
    uuid_rewrites: HashSet<(String, ColumnType)>,
}

/// A column of a flush whose values were brought to their live type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversion {
    pub column: String,
    pub live: ColumnType,
    /// Values that did not convert exactly (NULL and dead letters).
    pub lost: usize,
    /// uuid sent as text into a live uuid column, or the other way.
    pub uuid_rewrite: bool,
}

impl Counters {
    pub fn new(metrics: WriterMetrics) -> Self {
        for reason in millpond_hoglake::publish::ORPHAN_REASONS {
            metrics.hoglake_orphaned_files.with_label_values(&[reason]);
        }
        Counters {
            metrics,
            orphans_counted: Default::default(),
            schema_counted: (0, 0, 0),
            conflicts_counted: 0,
            uuid_rewrites: HashSet::new(),
        }
    }

    /// A new publisher starts its totals at zero.
    pub fn restart(&mut self) {
        self.orphans_counted.clear();
        self.schema_counted = (0, 0, 0);
        self.conflicts_counted = 0;
    }

    /// Adds the publisher's new orphans to
    /// `millpond_hoglake_orphaned_files_total{reason}`.
    pub fn orphans(&mut self, p: &Publisher) {
        for (reason, &total) in p.orphans().by_reason() {
            let seen = self.orphans_counted.entry(reason.clone()).or_default();
            if total > *seen {
                self.metrics
                    .hoglake_orphaned_files
                    .with_label_values(&[reason.as_str()])
                    .inc_by(total - *seen);
                *seen = total;
            }
        }
    }

    pub fn names(&self, p: &Prepared) {
        for name in &p.unsafe_names {
            tracing::warn!(column = %name, "payload key is not a safe identifier, starts with _hog or is longer than 128 characters; its values are dead letters (unsafe_field_name)");
        }
        if p.rows_with_unsafe > 0 {
            self.metrics
                .records_skipped
                .with_label_values(&[skip_reason::UNSAFE_FIELD_NAME])
                .inc_by(p.rows_with_unsafe);
        }
        for name in &p.reserved_names {
            tracing::error!(column = %name, "payload key is written by millpond itself (_inserted_at, _millpond_*); its values are dead letters; rename it upstream");
            self.metrics
                .errors
                .with_label_values(&[error_type::SCHEMA])
                .inc();
        }
    }

    /// Adds the publisher's new schema changes and refusals to
    /// `schema_columns_added_total`, `schema_columns_widened_total` and
    /// `errors_total{type="schema"}`.
    pub fn schema(&mut self, p: &Publisher) {
        let now = (p.columns_added(), p.columns_promoted(), p.schema_errors());
        let (added, promoted, errors) = self.schema_counted;
        self.metrics
            .schema_columns_added
            .inc_by(now.0.saturating_sub(added));
        self.metrics
            .schema_columns_widened
            .inc_by(now.1.saturating_sub(promoted));
        self.metrics
            .errors
            .with_label_values(&[error_type::SCHEMA])
            .inc_by(now.2.saturating_sub(errors));
        self.schema_counted = now;
    }

    /// A published flush's conversions, counted as DuckLake counts them:
    /// each uuid <-> text rewrite and each column that lost values is one
    /// `errors_total{type="schema"}`; a rewrite is logged once per column
    /// and direction.
    pub fn converted(&mut self, converted: &[Conversion]) {
        for c in converted {
            if c.uuid_rewrite {
                self.metrics
                    .errors
                    .with_label_values(&[error_type::SCHEMA])
                    .inc();
                if self.uuid_rewrites.insert((c.column.clone(), c.live)) {
                    tracing::warn!(column = %c.column, live_type = %c.live,
                        "uuid column sent one way and live the other; values are rewritten to the live type (said once per column and direction)");
                }
            }
            if c.lost > 0 {
                self.metrics
                    .errors
                    .with_label_values(&[error_type::SCHEMA])
                    .inc();
            }
        }
    }

    /// Adds the publisher's new 409 commit refusals to
    /// `errors_total{type="hoglake_commit_contention"}`: one per refusal, as
    /// the original counted them, however many the publisher retried.
    pub fn conflicts(&mut self, p: &Publisher) {
        let now = p.commit_conflicts();
        self.metrics
            .errors
            .with_label_values(&[error_type::HOGLAKE_COMMIT_CONTENTION])
            .inc_by(now.saturating_sub(self.conflicts_counted));
        self.conflicts_counted = now;
    }

    /// Counts what a published commit registered.
    pub fn published(&self, receipt: &PublishReceipt) {
        self.metrics
            .hoglake_files_written
            .inc_by(receipt.paths.len() as u64);
        if receipt.files > 0 {
            self.metrics
                .hoglake_flush_files
                .observe(receipt.files as f64);
        }
        for rows in &receipt.file_rows {
            self.metrics.hoglake_file_rows.observe(*rows as f64);
        }
    }
}
