//! The hoglake destination: one flush -> one prepared commit through
//! [`millpond_hoglake::publish::Publisher`].
//!
//! The publisher is async; this sink runs inside `spawn_blocking` (like
//! every sink) and drives it with `block_on` on the runtime handle it was
//! built with.
//!
//! Retries: the publisher owns the whole budget (HOGLAKE_MAX_RETRY_COUNT,
//! 1 s doubling capped at 30 s, floored by Retry-After; re-prepares on a
//! stale basis), so the writer tries this sink once (`Sink::write_retrying`).
//! One deadline bounds the whole write, as long as the config check says a
//! publish can take ([`HoglakeConfig::write_budget`], at most the liveness
//! budget): resolving the table, the publish and the writer's contention
//! ladder all stop at it, and every request is cut at it.
//!
//! Exactly once (HOGLAKE_PARTITION_FENCE, on by default): each commit
//! appends the flush's ranges to the offsets table of each of its Kafka
//! partitions and is refused when any of those tables changed since the
//! heads were checked (`millpond_hoglake::publish` "offsets"). A resend of
//! the recorded ranges is acknowledged `AlreadyRecorded` with zero rows; a
//! flush reaching into recorded offsets otherwise is refused as an overlap,
//! and ingest sends only the rest. Every commit also carries a key derived
//! from the table incarnation and the flush's ranges: an identical resend
//! is answered from the server's receipt.
use std::time::Instant;

use millpond_hoglake::catalog::CatalogClient;
use millpond_hoglake::publish::{Outcome, Publisher, PublisherConfig, INSERTED_AT};
use millpond_proto::{AckOutcome, OffsetRange};
use millpond_shared::deadline::Deadline;
use millpond_shared::metrics::{dead_letter_reason, WriterMetrics};
use tokio::runtime::Handle;

use super::letters::Letters;
use super::prepare::{prepare, NameCase, NameLimits, Prepared, UnsafeNames};
use super::{Durable, Flush, Receipt, Sink, SinkError};

pub mod config;
mod counters;
mod errors;
pub mod to_live;

use self::config::HoglakeConfig;
use self::counters::{Conversion, Counters};
pub use self::errors::kind_of;
use self::errors::sink_error;

/// Names the sink writes itself (compared lowercase).
pub const RESERVED_COLUMNS: [&str; 1] = [INSERTED_AT];
/// The names hoglake refuses: its own `_hog` prefix (any case) and names
/// over 128 characters.
pub const NAME_LIMITS: NameLimits = NameLimits {
    reserved_prefix: "_hog",
    max_chars: 128,
};

pub struct HoglakeSink {
    cfg: HoglakeConfig,
    runtime: Handle,
    publisher: Option<Publisher>,
    counters: Counters,
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
        Ok(HoglakeSink {
            cfg,
            runtime,
            publisher: Some(publisher),
            counters: Counters::new(metrics),
        })
    }

    async fn open(cfg: &HoglakeConfig) -> Result<Publisher, SinkError> {
        let client =
            CatalogClient::new(cfg.url.expose().as_str(), &cfg.catalog, cfg.request_timeout)
                .map_err(|e| SinkError::permanent(cfg.scrub(&e.to_string())))?;
        let config = PublisherConfig {
            namespace: cfg.namespace.clone(),
            table: cfg.table.clone(),
            create_data_path: cfg.data_path.clone(),
            s3: cfg.s3(),
            ladder: cfg.ladder(),
            layout: cfg.layout.clone(),
            dead_letter_table: cfg.dead_letter_table.clone(),
            partition_fence: cfg.partition_fence,
        };
        Publisher::connect(client, config)
            .await
            .map_err(|e| sink_error(cfg, &e))
    }

    /// Resolves the table (creating it, adding and promoting columns,
    /// reconciling its layout), then brings every value to its live column
    /// exactly; what cannot be kept becomes a dead letter.
    fn align(
        &mut self,
        flush: &Flush,
        prepared: &mut Prepared,
        deadline: Deadline,
    ) -> Result<Vec<Conversion>, SinkError> {
        let publisher = self.publisher.as_mut().expect("opened by write");
        let result = self
            .runtime
            .block_on(publisher.bootstrap_retrying(&prepared.schema, deadline));
        self.counters.schema(publisher);
        let table = result.map_err(|e| sink_error(&self.cfg, &e))?;
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
        let sent = prepared.schema.clone();
        let converted = to_live::to_live(prepared, &table, &flush.ranges)
            .map_err(|e| SinkError::permanent(format!("flush {}: {e}", flush.id)))?;
        for (column, live, lost) in converted.iter().filter(|c| c.2 > 0) {
            tracing::warn!(flush_id = %flush.id, column = %column, live_type = %live, values = lost,
                "values that do not convert exactly to the live column are NULL and dead letters (type_mismatch)");
        }
        Ok(converted
            .into_iter()
            .map(|(column, live, lost)| {
                let sent = sent
                    .field_with_name(&column)
                    .map(|f| f.data_type().clone())
                    .ok();
                Conversion {
                    uuid_rewrite: sent.is_some_and(|t| to_live::is_uuid_rewrite(live, &t)),
                    column,
                    live,
                    lost,
                }
            })
            .collect())
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
            self.counters.restart();
        }
        let mut prepared = prepare(
            flush,
            &RESERVED_COLUMNS,
            UnsafeNames::Limited(NAME_LIMITS),
            NameCase::Sensitive,
        )?;
        let converted = self.align(flush, &mut prepared, deadline)?;
        let letters = flush.dead_letters.and(Letters::of(&prepared.dead_letters));
        let letter_batches = match (&self.cfg.dead_letter_table, letters.is_empty()) {
            (Some(_), false) => letters.rows(&flush.id).1,
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
        self.counters.orphans(publisher);
        self.counters.schema(publisher);
        self.counters.conflicts(publisher);
        let receipt = result.map_err(|e| sink_error(&self.cfg, &e))?;
        if matches!(
            receipt.outcome,
            Outcome::Published | Outcome::Replayed | Outcome::Empty
        ) {
            self.counters.converted(&converted);
        }
        let metrics = &self.counters.metrics;
        let (outcome, rows) = match receipt.outcome {
            // Replayed: this call's own lost-response send had landed; the
            // rows are this flush's and were never acknowledged before.
            Outcome::Published | Outcome::Replayed | Outcome::Empty => {
                if receipt.outcome == Outcome::Replayed {
                    metrics
                        .hoglake_commit_replays
                        .with_label_values(&["replayed"])
                        .inc();
                }
                // Counted once, when published: a resend or a failed
                // attempt counts nothing.
                self.counters.published(&receipt);
                self.counters.names(&prepared);
                letters.count(metrics);
                if self.cfg.dead_letter_table.is_none() && !letters.is_empty() {
                    tracing::warn!(flush_id = %flush.id, count = letters.len(),
                        "dead letters counted and discarded (HOGLAKE_DEAD_LETTER_TABLE=off)");
                }
                (AckOutcome::Written, receipt.rows)
            }
            Outcome::AlreadyPublished => {
                metrics.flushes_already_recorded.inc();
                metrics
                    .hoglake_commit_replays
                    .with_label_values(&["already_published"])
                    .inc();
                tracing::info!(flush_id = %flush.id, "flush already published to hoglake; acknowledging without writing");
                (AckOutcome::AlreadyRecorded, 0)
            }
            Outcome::AlreadyRecorded => {
                metrics.flushes_already_recorded.inc();
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
            recorded_by_another_flush: receipt.recorded_by_another_flush,
        }))
    }

    fn reset_caches(&mut self) {
        if let Some(p) = self.publisher.as_mut() {
            p.reset_caches();
        }
    }

    /// The range each partition of `topic` recorded last in its offsets
    /// table (the partition fence); empty with HOGLAKE_PARTITION_FENCE off,
    /// when ingest resumes from its Kafka committed offsets alone.
    fn recorded_offsets(&mut self, topic: &str) -> Result<Vec<OffsetRange>, SinkError> {
        if !self.cfg.partition_fence {
            return Ok(Vec::new());
        }
        if self.publisher.is_none() {
            let cfg = self.cfg.clone();
            self.publisher = Some(self.runtime.block_on(Self::open(&cfg))?);
        }
        let publisher = self.publisher.as_ref().expect("opened above");
        self.runtime
            .block_on(publisher.recorded_offsets(topic))
            .map_err(|e| sink_error(&self.cfg, &e))
    }

    fn name(&self) -> &'static str {
        "hoglake"
    }

    fn close(&mut self) -> Result<(), SinkError> {
        if let Some(p) = self.publisher.take() {
            self.counters.orphans(&p);
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
mod tests;
