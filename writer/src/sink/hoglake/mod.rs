//! The hoglake destination: one flush -> one prepared commit through
//! [`millpond_hoglake::publish::Publisher`].
//!
//! The publisher is async; this sink runs inside `spawn_blocking` (like
//! every sink) and drives it with `block_on` on the runtime handle it was
//! built with.
//!
//! Retries: the publisher owns the whole budget (HOGLAKE_MAX_RETRY_COUNT,
//! 1 s doubling capped at 30 s, floored by Retry-After; re-prepares on a
//! stale basis), so the writer's own ladder for this sink is one attempt.
//! One deadline bounds the whole write, as long as the config check says a
//! publish can take ([`HoglakeConfig::write_budget`], at most the liveness
//! budget): resolving the table, the publish and the writer's contention
//! ladder all stop at it, and every request is cut at it.
//!
//! Idempotency: every commit carries a key derived from the table
//! incarnation and the flush's complete offset ranges. A resent flush
//! (same ranges) builds a new payload under the same key; the catalog
//! refuses it with 422 while the first commit's receipt exists, and the
//! publisher reads that receipt and reports the flush as already published:
//! it is acknowledged `AlreadyRecorded` with zero rows and nothing is
//! written twice.
use std::time::Instant;

use millpond_hoglake::catalog::{CatalogClient, ErrorClass};
use millpond_hoglake::publish::{Outcome, PublishError, Publisher, PublisherConfig, INSERTED_AT};
use millpond_proto::{AckOutcome, DeadLetter, OffsetRange};
use millpond_shared::deadline::Deadline;
use millpond_shared::metrics::{dead_letter_reason, error_type, skip_reason, WriterMetrics};
use millpond_shared::retry::Ladder;
use tokio::runtime::Handle;

use super::prepare::{prepare, NameCase, Prepared, UnsafeNames};
use super::{Durable, Flush, Receipt, Sink, SinkError, SinkErrorKind, SinkId};

pub mod config;
pub mod to_live;

use self::config::HoglakeConfig;

/// Names the sink writes itself (compared lowercase).
pub const RESERVED_COLUMNS: [&str; 1] = [INSERTED_AT];
/// Column names starting so are hoglake's own.
pub const RESERVED_PREFIX: &str = "_hog";
/// The longest column name hoglake accepts.
pub const MAX_NAME_CHARS: usize = 128;

/// The writer's ladder for this sink: one attempt (the publisher retries).
pub const LADDER: Ladder = Ladder {
    attempts: 1,
    base: std::time::Duration::from_secs(1),
    jitter: 0.25,
};

/// The sink kind a publish failure maps to. `Exhausted` carries the class
/// of its last error, so a spent budget ends the writer's (one-attempt)
/// ladder as exhausted rather than being retried again as "permanent"; a
/// spent deadline ends the write.
pub fn kind_of(e: &PublishError) -> SinkErrorKind {
    let class = match e {
        PublishError::DeadlineSpent { .. } => return SinkErrorKind::Deadline,
        PublishError::Exhausted { last, .. } => last.class(),
        other => other.class(),
    };
    match class {
        ErrorClass::Retry => SinkErrorKind::Transient,
        ErrorClass::RePrepare => SinkErrorKind::Contention(SinkId::Hoglake),
        ErrorClass::Permanent => SinkErrorKind::Permanent,
    }
}

pub struct HoglakeSink {
    cfg: HoglakeConfig,
    metrics: WriterMetrics,
    runtime: Handle,
    publisher: Option<Publisher>,
    /// Orphans per reason already added to the metric.
    orphans_counted: std::collections::BTreeMap<String, u64>,
    /// The publisher's schema counters already added to the metrics:
    /// (columns added, columns promoted, schema errors).
    schema_counted: (u64, u64, u64),
    /// The publisher's 409 commit refusals already counted.
    conflicts_counted: u64,
}

impl std::fmt::Debug for HoglakeSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoglakeSink")
            .field("table", &self.cfg.qualified_table())
            .field("catalog", &self.cfg.catalog)
            .finish()
    }
}

impl HoglakeSink {
    /// Resolves the catalog and probes the object store (fails at startup on
    /// a wrong HOGLAKE_URL, a missing catalog, or storage that refuses writes).
    pub async fn connect(
        cfg: HoglakeConfig,
        metrics: WriterMetrics,
        runtime: Handle,
    ) -> Result<Self, SinkError> {
        let publisher = Self::open(&cfg).await?;
        for reason in millpond_hoglake::publish::ORPHAN_REASONS {
            metrics.hoglake_orphaned_files.with_label_values(&[reason]);
        }
        Ok(HoglakeSink {
            cfg,
            metrics,
            runtime,
            publisher: Some(publisher),
            orphans_counted: Default::default(),
            schema_counted: (0, 0, 0),
            conflicts_counted: 0,
        })
    }

    async fn open(cfg: &HoglakeConfig) -> Result<Publisher, SinkError> {
        let client = CatalogClient::new(&cfg.url, &cfg.catalog, cfg.request_timeout)
            .map_err(|e| SinkError::permanent(cfg.scrub(&e.to_string())))?;
        let config = PublisherConfig {
            namespace: cfg.namespace.clone(),
            table: cfg.table.clone(),
            create_data_path: cfg.data_path.clone(),
            s3: cfg.s3(),
            ladder: cfg.ladder(),
            layout: cfg.layout.clone(),
            dead_letter_table: cfg.dead_letter_table.clone(),
        };
        Publisher::connect(client, config)
            .await
            .map_err(|e| Self::error(cfg, &e))
    }

    fn error(cfg: &HoglakeConfig, e: &PublishError) -> SinkError {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            let more = s.to_string();
            if !text.contains(&more) {
                text.push_str(": ");
                text.push_str(&more);
            }
            source = s.source();
        }
        let retry_after = match e {
            PublishError::Catalog(c) => c.retry_after(),
            _ => None,
        };
        SinkError {
            kind: kind_of(e),
            message: cfg.scrub(&text),
            retry_after,
        }
    }

    /// Adds the publisher's new orphans to
    /// `millpond_hoglake_orphaned_files_total{reason}`.
    fn count_orphans(&mut self) {
        let Some(p) = self.publisher.as_ref() else {
            return;
        };
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

    fn count_names(&self, p: &Prepared) {
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
    fn count_schema(&mut self) {
        let Some(p) = self.publisher.as_ref() else {
            return;
        };
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

    /// Adds the publisher's new 409 commit refusals to
    /// `errors_total{type="hoglake_commit_contention"}`: one per refusal, as
    /// the original counted them, however many the publisher retried.
    fn count_conflicts(&mut self) {
        let Some(p) = self.publisher.as_ref() else {
            return;
        };
        let now = p.commit_conflicts();
        self.metrics
            .errors
            .with_label_values(&[error_type::HOGLAKE_COMMIT_CONTENTION])
            .inc_by(now.saturating_sub(self.conflicts_counted));
        self.conflicts_counted = now;
    }

    /// Counts what a published commit registered.
    fn count_published(&self, receipt: &millpond_hoglake::publish::PublishReceipt) {
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

    /// Resolves the table (creating it, adding and promoting columns,
    /// reconciling its layout), then brings every value to its live column
    /// exactly; what cannot be kept becomes a dead letter.
    fn align(
        &mut self,
        flush: &Flush,
        prepared: &mut Prepared,
        deadline: Deadline,
    ) -> Result<(), SinkError> {
        let publisher = self.publisher.as_mut().expect("opened by write");
        let result = self
            .runtime
            .block_on(publisher.bootstrap_retrying(&prepared.schema, deadline));
        self.count_schema();
        let table = result.map_err(|e| Self::error(&self.cfg, &e))?;
        // Columns the files cannot carry: refused by the catalog, or live
        // with a type the writer does not write (variant).
        let file_schema =
            millpond_hoglake::arrow_schema::arrow_schema(&table.columns).map_err(|e| {
                SinkError::permanent(format!("table {}: {e}", self.cfg.qualified_table()))
            })?;
        let absent: Vec<String> = prepared
            .schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .filter(|n| file_schema.field_with_name(n).is_err())
            .collect();
        prepared.refuse(&absent, dead_letter_reason::COLUMN_REFUSED, &flush.ranges);
        let converted = to_live::to_live(prepared, &table, &flush.ranges)
            .map_err(|e| SinkError::permanent(format!("flush {}: {e}", flush.id)))?;
        for (column, live, lost) in converted.iter().filter(|c| c.2 > 0) {
            tracing::warn!(flush_id = %flush.id, column = %column, live_type = %live, values = lost,
                "values that do not convert exactly to the live column are NULL and dead letters (type_mismatch)");
        }
        Ok(())
    }
}

impl Sink for HoglakeSink {
    fn deadline(&self) -> Deadline {
        Deadline::after(self.cfg.write_budget(), config::WRITE_BUDGET_SET_BY)
    }

    fn write(&mut self, flush: &Flush, deadline: Deadline) -> Result<Durable<Receipt>, SinkError> {
        if flush.ranges.is_empty() {
            // The commit's idempotency key is derived from the ranges: every
            // range-less flush would get the same key, and each after the
            // first would be acknowledged as already published, unwritten.
            return Err(SinkError::permanent(format!(
                "flush {} has no Kafka offset ranges: the hoglake destination needs them (its commits \
                 are made idempotent by them; without any, a flush would be taken for one already \
                 published and dropped); send the ranges (topic, partition, first, last) in the descriptor",
                flush.id
            )));
        }
        let table = self.cfg.qualified_table();
        if self.publisher.is_none() {
            let cfg = self.cfg.clone();
            self.publisher = Some(self.runtime.block_on(deadline.scope(Self::open(&cfg)))?);
            self.orphans_counted.clear();
            self.schema_counted = (0, 0, 0);
            self.conflicts_counted = 0;
        }
        let mut prepared = prepare(
            flush,
            &RESERVED_COLUMNS,
            UnsafeNames::Hoglake,
            NameCase::Sensitive,
        )?;
        self.align(flush, &mut prepared, deadline)?;
        let letters: Vec<&DeadLetter> = flush
            .dead_letters
            .iter()
            .chain(&prepared.dead_letters)
            .collect();
        let letter_batches = match (&self.cfg.dead_letter_table, letters.is_empty()) {
            (Some(_), false) => vec![super::dead_letters::batch(&flush.id, &letters).1],
            _ => Vec::new(),
        };
        let started = Instant::now();
        let publisher = self.publisher.as_mut().expect("opened above");
        let result = self.runtime.block_on(publisher.publish_with_dead_letters(
            &flush.id,
            &prepared.batches,
            &letter_batches,
            &flush.ranges,
            deadline,
        ));
        self.count_orphans();
        self.count_schema();
        self.count_conflicts();
        let receipt = result.map_err(|e| Self::error(&self.cfg, &e))?;
        let (outcome, rows) = match receipt.outcome {
            // Replayed: this call's own lost-response send had landed; the
            // rows are this flush's and were never acknowledged before.
            Outcome::Published | Outcome::Replayed | Outcome::Empty => {
                if receipt.outcome == Outcome::Replayed {
                    self.metrics
                        .hoglake_commit_replays
                        .with_label_values(&["replayed"])
                        .inc();
                }
                // Counted once, when published: a resend or a failed
                // attempt counts nothing.
                self.count_published(&receipt);
                self.count_names(&prepared);
                crate::sink::count_dead_letters(&self.metrics, &letters);
                if self.cfg.dead_letter_table.is_none() && !letters.is_empty() {
                    tracing::warn!(flush_id = %flush.id, count = letters.len(),
                        "dead letters counted and discarded (HOGLAKE_DEAD_LETTER_TABLE=off)");
                }
                (AckOutcome::Written, receipt.rows)
            }
            Outcome::AlreadyPublished => {
                self.metrics.flushes_already_recorded.inc();
                self.metrics
                    .hoglake_commit_replays
                    .with_label_values(&["already_published"])
                    .inc();
                tracing::info!(flush_id = %flush.id, "flush already published to hoglake; acknowledging without writing");
                (AckOutcome::AlreadyRecorded, 0)
            }
        };
        tracing::debug!(flush_id = %flush.id, rows, files = receipt.files, dead_letters = receipt.dead_letters,
            attempts = receipt.attempts, snapshot_id = ?receipt.snapshot_id,
            ms = started.elapsed().as_millis() as u64, "hoglake publish done");
        Ok(Durable::new(Receipt {
            rows_written: rows,
            dead_letters_written: receipt.dead_letters,
            outcome,
            table,
            snapshot_id: receipt.snapshot_id,
            recorded: flush.ranges.clone(),
            recorded_by_another_flush: false,
        }))
    }

    fn reset_caches(&mut self) {
        if let Some(p) = self.publisher.as_mut() {
            p.reset_caches();
        }
    }

    /// Always empty: the hoglake catalog has no offsets API (hoglake-api.md
    /// lists catalogs, tables, files, commits and receipts, nothing keyed by
    /// Kafka partition), so the sink cannot say which offsets the table holds.
    /// Resends are still safe: a commit's idempotency key is derived from the
    /// table incarnation and the flush's offset ranges, and a resent flush
    /// under a key with a receipt is acknowledged `AlreadyRecorded` without
    /// writing (section 7.4; within the server's receipt retention, 7 days by
    /// default). Ingest therefore resumes from its Kafka committed offsets.
    fn recorded_offsets(&mut self, _topic: &str) -> Result<Vec<OffsetRange>, SinkError> {
        Ok(Vec::new())
    }

    fn retry_ladder(&self) -> Ladder {
        LADDER
    }

    fn name(&self) -> &'static str {
        "hoglake"
    }

    fn close(&mut self) -> Result<(), SinkError> {
        self.count_orphans();
        if let Some(p) = self.publisher.take() {
            let orphans = p.orphans();
            if orphans.total() > 0 {
                tracing::warn!(orphaned_files = orphans.total(), by_reason = ?orphans.by_reason(),
                    "hoglake: files uploaded but never registered during this run (URIs were logged as they happened)");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use millpond_hoglake::catalog::CatalogError;

    fn api(status: u16, code: &str) -> PublishError {
        PublishError::Catalog(CatalogError::Api {
            what: "POST commit".into(),
            status,
            code: code.into(),
            detail: None,
            tables: vec![],
            retry_after: None,
        })
    }

    #[test]
    fn catalog_errors_map_to_sink_kinds() {
        assert_eq!(
            kind_of(&api(503, "commit_queue_timeout")),
            SinkErrorKind::Transient
        );
        assert_eq!(
            kind_of(&api(422, "unprocessable")),
            SinkErrorKind::Permanent
        );
        assert_eq!(kind_of(&api(404, "not_found")), SinkErrorKind::Permanent);
        let contention = kind_of(&api(409, "commit_conflict"));
        assert_eq!(contention, SinkErrorKind::Contention(SinkId::Hoglake));
        let spent = PublishError::Exhausted {
            table: "a.b".into(),
            attempts: 8,
            last: Box::new(api(409, "ddl_since_read_snapshot")),
        };
        // A hoglake writer never raises the DuckLake label.
        let e = SinkError::new(kind_of(&spent), "x");
        assert_eq!(e.error_type(), error_type::HOGLAKE_COMMIT_CONTENTION);
        assert!(e.is_retryable());
        let spent = PublishError::Exhausted {
            table: "a.b".into(),
            attempts: 8,
            last: Box::new(api(500, "internal")),
        };
        assert_eq!(kind_of(&spent), SinkErrorKind::Transient);
        // A spent deadline ends the write, whatever the last error was.
        let deadline = PublishError::DeadlineSpent {
            what: "publishing to",
            table: "a.b".into(),
            attempts: 2,
            deadline: Deadline::after(std::time::Duration::ZERO, config::WRITE_BUDGET_SET_BY),
            pause: std::time::Duration::from_secs(3600),
            last: Box::new(api(409, "commit_conflict")),
        };
        assert_eq!(kind_of(&deadline), SinkErrorKind::Deadline);
        assert!(
            deadline.to_string().contains("HOGLAKE_REQUEST_TIMEOUT_S"),
            "{deadline}"
        );
        assert_eq!(
            LADDER.delay(0, None),
            None,
            "the publisher owns the retries"
        );
    }

    #[test]
    fn hoglake_names_are_refused() {
        use arrow::array::{Int64Array, RecordBatch};
        use arrow::datatypes::{DataType, Field, Schema};
        use millpond_proto::FlushTrigger;
        use std::sync::Arc;
        let long = "c".repeat(129);
        let ok128 = "d".repeat(128);
        let names = [
            "id",
            "_HOG_x",
            "_inserted_at",
            long.as_str(),
            ok128.as_str(),
        ];
        let schema = Arc::new(Schema::new(
            names
                .iter()
                .map(|n| Field::new(*n, DataType::Int64, true))
                .collect::<Vec<_>>(),
        ));
        let cols = names
            .iter()
            .map(|_| Arc::new(Int64Array::from(vec![1, 2])) as _)
            .collect();
        let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
        let flush = Flush {
            id: "f".into(),
            trigger: FlushTrigger::Size,
            ranges: vec![OffsetRange::new("t", 0, 0, 1)],
            schema,
            batches: vec![batch],
            dead_letters: vec![],
            streamed: None,
        };
        let p = prepare(
            &flush,
            &RESERVED_COLUMNS,
            UnsafeNames::Hoglake,
            NameCase::Sensitive,
        )
        .unwrap();
        assert_eq!(p.reserved_names, vec!["_inserted_at".to_string()]);
        assert_eq!(p.unsafe_names, vec!["_HOG_x".to_string(), long.clone()]);
        let kept: Vec<&str> = p
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(kept, vec!["id", ok128.as_str()]);
        // Two values each of three refused columns; both rows lost a value
        // to an unsafe name (records_skipped{unsafe_field_name}).
        assert_eq!(p.dead_letters.len(), 6);
        assert_eq!(p.rows_with_unsafe, 2);
        let reasons: Vec<&str> = p.dead_letters.iter().map(|d| d.reason.as_str()).collect();
        assert_eq!(
            reasons
                .iter()
                .filter(|r| **r == dead_letter_reason::UNSAFE_FIELD_NAME)
                .count(),
            4
        );
    }
}
