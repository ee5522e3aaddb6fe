//! Publishing one flush to a hoglake table: Arrow batches + the Kafka offset
//! ranges they cover -> parquet files in S3 -> ONE prepared commit.
//!
//! The steps (millpond.md "Destination" and "Error Handling"; hoglake-api.md
//! sections 7 and 8):
//! 1. pre-flight: re-read the table (`?totals=false`), creating the
//!    namespace and table on first use (batch schema + `_inserted_at
//!    timestamptz`) and adding new batch columns in one batched alter. The
//!    read gives the incarnation (`table_uuid`) and `read_snapshot_id`;
//! 2. conform the batches to the table's file schema, stamp `_inserted_at`
//!    (one instant per flush, kept across re-prepares), split by partition
//!    tuple under the live spec, write one parquet file per tuple;
//! 3. upload every file (one PutObject each, concurrently) under the key
//!    prefix, and build ONE prepared commit: `idempotency_key` (derived from
//!    the incarnation and the complete offset ranges, [`idempotency_key`]),
//!    `read_snapshot`, `expected_table_uuid`;
//! 4. send it; on a retryable failure wait on the ladder
//!    ([`PublisherConfig::ladder`], run by [`Ladder::retry_until`])
//!    and re-send the byte-identical payload; on `ddl_since_read_snapshot`,
//!    `table_recreated`, `table_dropped`, `commit_conflict` or 410 drop the
//!    payload (its files become orphans) and re-prepare from step 1;
//!    permanent refusals (400/404/422/501, other 409s) fail at once.
//!
//! The caller's [`Deadline`] bounds all of it: each request is cut at it,
//! and no loop waits (however long the server's Retry-After) or tries again
//! when that would end past it; the last error is returned instead.
//!
//! A 422 under a key that already has a receipt means the key was used by
//! an earlier, different payload for the same incarnation and offsets (a
//! rebuilt flush after a restart): the rows are already in the table, so
//! the flush is acknowledged as [`Outcome::AlreadyPublished`] with zero rows
//! and its upload is orphaned.
//!
//! Orphans (uploaded, never registered) are counted per reason
//! ([`OrphanCounts`]) and every increment logs the object URIs: delete those
//! URIs, never the key prefix they share (a later attempt under the same key
//! puts live files there).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arrow::array::{ArrayRef, RecordBatch, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use futures::future::join_all;
use millpond_proto::OffsetRange;
use millpond_shared::deadline::Deadline;
use millpond_shared::retry::{Ladder, Step, Stopped};

use crate::arrow_schema::{arrow_schema, column_defs, conform};
use crate::catalog::{AlterOp, CatalogClient, CatalogError, ErrorClass};
use crate::layout::{self, Layout};
use crate::parquet_file::write_parquet;
use crate::partition::Partitioner;
use crate::payload::{CommitRequest, TableAppend};
use crate::registration::{object_uri, FileRegistration};
use crate::schema::{ColumnDef, ColumnType, Table};
use crate::store::{DataStore, S3Config, StoreError};

/// The column every row gets: when this flush was published (timestamptz).
pub const INSERTED_AT: &str = "_inserted_at";

/// Namespace of the v5 keys (a fixed random UUID; changing it changes every key).
const KEY_NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x6b1f_3c3e_8a52_4d0e_9a51_2f7d_c0de_1a7e);

/// The idempotency key of a flush: a UUIDv5 over the table incarnation and
/// the complete, sorted offset ranges. The same offsets into the same
/// incarnation give the same key (a replay is recognised); a recreated table
/// gives a new key, so it can never be answered from its predecessor's
/// receipt.
pub fn idempotency_key(table_uuid: &str, ranges: &[OffsetRange]) -> uuid::Uuid {
    // Only the coordinates name a flush: the last record's fingerprint
    // (timestamp, checksum) a range may carry is not part of the key.
    let mut sorted: Vec<(&str, i32, i64, i64)> = ranges
        .iter()
        .map(|r| (r.topic.as_str(), r.partition, r.first, r.last))
        .collect();
    sorted.sort();
    sorted.dedup();
    let mut name = format!("millpond-hoglake/v1\ntable_uuid={table_uuid}\n");
    for (topic, partition, first, last) in sorted {
        // Kafka topic names are [a-zA-Z0-9._-]; the tab cannot occur in one.
        name.push_str(&format!("{topic}\t{partition}\t{first}\t{last}\n"));
    }
    uuid::Uuid::new_v5(&KEY_NAMESPACE, name.as_bytes())
}

/// Where and how to publish.
#[derive(Debug, Clone)]
pub struct PublisherConfig {
    pub namespace: String,
    pub table: String,
    /// HOGLAKE_DATA_PATH: when set, a missing catalog is created with it.
    pub create_data_path: Option<String>,
    pub s3: S3Config,
    /// The write-path ladder: attempts in all (HOGLAKE_MAX_RETRY_COUNT),
    /// the delays between them; the server's `Retry-After` is a floor under
    /// each delay.
    pub ladder: Ladder,
    /// HOGLAKE_PARTITION_BY and MILLPOND_SORT_BY.
    pub layout: Layout,
    /// The table a flush's dead letters go to, in the same commit as its
    /// rows (created on first use, in the same namespace); `None` = none.
    pub dead_letter_table: Option<String>,
}

/// How a flush ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// This process's commit published the rows.
    Published,
    /// The commit's response was lost; the identical re-send was answered
    /// from the server's receipt (the rows published exactly once).
    Replayed,
    /// The key already had a receipt from an earlier, different payload for
    /// the same incarnation and offsets: nothing was published by this call.
    AlreadyPublished,
    /// No rows: nothing to publish.
    Empty,
}

/// What a publish made durable.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishReceipt {
    pub outcome: Outcome,
    /// Rows this call registered (0 for `AlreadyPublished` and `Empty`).
    pub rows: u64,
    /// Data files in the committed payload.
    pub files: usize,
    /// Rows of each data file, in payload order.
    pub file_rows: Vec<u64>,
    /// Dead letters registered in the dead-letter table by this call.
    pub dead_letters: u64,
    pub snapshot_id: Option<i64>,
    pub schema_version: Option<i64>,
    pub idempotency_key: Option<uuid::Uuid>,
    /// The incarnation the rows went to.
    pub table_uuid: Option<String>,
    /// Attempts used (1 = first try).
    pub attempts: u32,
    /// URIs of the committed files (data files first).
    pub paths: Vec<String>,
}

/// Why a publish failed.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("encoding the flush for {table}: {source}")]
    Encode {
        table: String,
        #[source]
        source: crate::Error,
    },
    #[error("{0}")]
    Schema(String),
    /// The live partition spec or sort order differs from config.
    #[error("{0}")]
    Layout(String),
    #[error("publishing to {table} failed after {attempts} attempts (HOGLAKE_MAX_RETRY_COUNT); last error: {last}")]
    Exhausted {
        table: String,
        attempts: u32,
        #[source]
        last: Box<PublishError>,
    },
    /// The next wait would end past the write's deadline: given up early,
    /// with the last error.
    #[error("{what} {table} gave up after {attempts} attempt(s): {deadline} leaves no time for the next wait ({pause:?}) and attempt; last error: {last}")]
    DeadlineSpent {
        what: &'static str,
        table: String,
        attempts: u32,
        deadline: Deadline,
        pause: Duration,
        #[source]
        last: Box<PublishError>,
    },
}

impl PublishError {
    pub fn class(&self) -> ErrorClass {
        match self {
            PublishError::Catalog(e) => e.class(),
            // Uploads fail on transient network and throttling errors; a
            // missing grant keeps failing until the budget is spent.
            PublishError::Store(StoreError::Upload { .. } | StoreError::Cut { .. }) => {
                ErrorClass::Retry
            }
            PublishError::Store(_) => ErrorClass::Permanent,
            PublishError::Encode { .. } | PublishError::Schema(_) | PublishError::Layout(_) => {
                ErrorClass::Permanent
            }
            PublishError::Exhausted { .. } | PublishError::DeadlineSpent { .. } => {
                ErrorClass::Permanent
            }
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            PublishError::Catalog(e) => e.retry_after(),
            _ => None,
        }
    }
}

/// The reasons an upload is left orphaned: the original's names, then ours
/// (`commit_conflict`, `table_dropped`, `retries_exhausted`). A refusal with
/// another code counts under that code.
pub const ORPHAN_REASONS: [&str; 9] = [
    "prepare_failed",
    "commit_refused",
    "already_published",
    "table_recreated",
    "read_snapshot_expired",
    "ddl_since_read_snapshot",
    "commit_conflict",
    "table_dropped",
    "retries_exhausted",
];

/// Orphaned files (uploaded, never registered) per reason. Exact where a
/// payload existed; an upload that failed half-way counts only the objects
/// whose PutObject succeeded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrphanCounts {
    by_reason: BTreeMap<String, u64>,
}

impl OrphanCounts {
    pub fn get(&self, reason: &str) -> u64 {
        self.by_reason.get(reason).copied().unwrap_or(0)
    }

    pub fn total(&self) -> u64 {
        self.by_reason.values().sum()
    }

    pub fn by_reason(&self) -> &BTreeMap<String, u64> {
        &self.by_reason
    }

    fn add(&mut self, reason: &str, uris: &[String]) {
        if uris.is_empty() {
            return;
        }
        *self.by_reason.entry(reason.to_string()).or_default() += uris.len() as u64;
        const SHOWN: usize = 10;
        let shown = uris
            .iter()
            .take(SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join(" ");
        let more = uris.len().saturating_sub(SHOWN);
        tracing::warn!(
            reason,
            count = uris.len(),
            "hoglake: {} uploaded file(s) will never be registered and are unreclaimed storage; delete these URIs (never their key prefix): {shown}{}",
            uris.len(),
            if more > 0 { format!(" (and {more} more)") } else { String::new() }
        );
    }
}

/// One file's partition values (`None` = null source value).
type Tuple = Vec<Option<String>>;

/// A prepared commit held across retries: the exact bytes sent each time.
struct Prepared {
    key: uuid::Uuid,
    table_uuid: String,
    body: Vec<u8>,
    paths: Vec<String>,
    rows: u64,
    file_rows: Vec<u64>,
    dead_letters: u64,
    /// A send of this payload ended without an answer (it may have applied).
    maybe_applied: bool,
}

/// Publishes flushes to one table.
#[derive(Debug)]
pub struct Publisher {
    catalog: CatalogClient,
    store: DataStore,
    namespace: String,
    table: String,
    ladder: Ladder,
    layout: Layout,
    dead_letter_table: Option<String>,
    /// The incarnation last resolved (to notice recreation).
    known_uuid: Option<String>,
    orphans: OrphanCounts,
    /// How many times a table was found recreated under our name.
    recreations: u64,
    /// Columns the catalog refused to add (millpond_errors_total{type="schema"}).
    schema_errors: u64,
    /// Columns added and promoted so far.
    columns_added: u64,
    columns_promoted: u64,
    /// Commits refused with a 409 that asks for a re-prepare (another
    /// writer or a DDL committed first), each one counted.
    commit_conflicts: u64,
}

impl Publisher {
    /// Resolves the catalog (creating it only with a configured data path),
    /// opens its data path's bucket and probes it with a zero-byte marker
    /// upload. Fails fast on a bad URL, an unreachable control plane, a
    /// missing catalog, or an object store that refuses writes.
    pub async fn connect(
        catalog: CatalogClient,
        config: PublisherConfig,
    ) -> Result<Self, PublishError> {
        let info = catalog
            .resolve_catalog(config.create_data_path.as_deref())
            .await?;
        let store = DataStore::new(&info.data_path, &config.s3)?;
        let marker = store.probe().await?;
        tracing::info!(
            catalog = %info.name,
            data_path = %info.data_path,
            credentials = config.s3.credential_source(),
            probe = %marker,
            "hoglake catalog resolved; object store write probe passed"
        );
        Ok(Self {
            catalog,
            store,
            namespace: config.namespace,
            table: config.table,
            ladder: config.ladder,
            layout: config.layout,
            dead_letter_table: config.dead_letter_table,
            known_uuid: None,
            orphans: OrphanCounts::default(),
            recreations: 0,
            schema_errors: 0,
            columns_added: 0,
            columns_promoted: 0,
            commit_conflicts: 0,
        })
    }

    pub fn catalog(&self) -> &CatalogClient {
        &self.catalog
    }

    pub fn store(&self) -> &DataStore {
        &self.store
    }

    pub fn orphans(&self) -> &OrphanCounts {
        &self.orphans
    }

    pub fn recreations(&self) -> u64 {
        self.recreations
    }

    pub fn schema_errors(&self) -> u64 {
        self.schema_errors
    }

    /// Columns this publisher added to its tables.
    pub fn columns_added(&self) -> u64 {
        self.columns_added
    }

    /// Live columns this publisher promoted (int -> long, float -> double).
    pub fn columns_promoted(&self) -> u64 {
        self.columns_promoted
    }

    /// Commits refused with a 409 asking for a re-prepare
    /// (`commit_conflict`, `ddl_since_read_snapshot`, `table_recreated`,
    /// `table_dropped`), one per refusal, retried or not.
    pub fn commit_conflicts(&self) -> u64 {
        self.commit_conflicts
    }

    fn qualified(&self) -> String {
        format!("{}.{}", self.namespace, self.table)
    }

    /// Forgets the incarnation (the writer calls this between its retries).
    pub fn reset_caches(&mut self) {
        self.known_uuid = None;
    }

    /// Namespace and table exist; the table has every column of `schema`
    /// the catalog accepts (plus `_inserted_at`), live int/float columns the
    /// batch carries as long/double are promoted, and the partition spec and
    /// sort order match the configured [`Layout`] (declared when missing,
    /// fatal when different). Returns the live table, read fresh. Columns
    /// the catalog refused are absent from it (counted in
    /// [`Self::schema_errors`]); the caller decides what becomes of their
    /// values.
    pub async fn bootstrap(&mut self, schema: &Schema) -> Result<Table, PublishError> {
        let name = self.table.clone();
        let table = self.resolve(&name, schema).await?;
        let payload_columns = schema.fields().iter().any(|f| f.name() != INSERTED_AT);
        let table = self.reconcile(table, payload_columns).await?;
        if !table.columns.iter().any(|c| c.name == INSERTED_AT) {
            return Err(PublishError::Schema(format!(
                "table {} has no `{INSERTED_AT}` column; it was not created by millpond, add `{INSERTED_AT} timestamptz` or point HOGLAKE_TABLE at another table",
                self.qualified()
            )));
        }
        if let Some(old) = &self.known_uuid {
            if *old != table.table_uuid {
                self.recreations += 1;
                tracing::warn!(table = %self.qualified(), old_uuid = %old, new_uuid = %table.table_uuid,
                    "hoglake table was dropped and recreated; publishing to the new incarnation under keys that name it");
            }
        }
        self.known_uuid = Some(table.table_uuid.clone());
        Ok(table)
    }

    /// [`Self::bootstrap`] with the write-path ladder for transient catalog
    /// errors (the writer resolves the table before converting values, out
    /// of [`Self::publish`]'s own retries), within `deadline`: every request
    /// is cut at it, and no wait ends past it.
    pub async fn bootstrap_retrying(
        &mut self,
        schema: &Schema,
        deadline: Deadline,
    ) -> Result<Table, PublishError> {
        let ladder = self.ladder.clone();
        let table = self.qualified();
        let mut state = (self, schema);
        let resolved = deadline
            .scope(ladder.retry_until(
                deadline,
                &mut state,
                |state, _| Box::pin(Self::bootstrap_once(state)),
                |_, attempt, pause, e| {
                    tracing::warn!(table = %table, attempt, error = %e,
                        pause_ms = pause.as_millis() as u64, "hoglake: resolving the table failed; retrying")
                },
            ))
            .await;
        resolved.map(|(t, _)| t).map_err(|stop| match stop {
            Stopped::Fatal { error, .. } | Stopped::Exhausted { error, .. } => error,
            Stopped::Deadline {
                error,
                attempts,
                pause,
            } => PublishError::DeadlineSpent {
                what: "resolving the table",
                table,
                attempts,
                deadline,
                pause,
                last: Box::new(error),
            },
        })
    }

    /// One attempt of [`Self::bootstrap_retrying`].
    async fn bootstrap_once(
        (publisher, schema): &mut (&mut Self, &Schema),
    ) -> Step<Table, PublishError> {
        match publisher.bootstrap(schema).await {
            Ok(t) => Step::Done(t),
            Err(e) if e.class() == ErrorClass::Permanent => Step::Fatal(e),
            Err(e) => Step::Retry {
                floor: e.retry_after(),
                error: e,
            },
        }
    }

    /// Table `name` of the namespace exists (created from `schema` plus
    /// `_inserted_at`), with every column of `schema` the catalog accepts,
    /// and with live int/float columns promoted where the batch is wider.
    async fn resolve(&mut self, name: &str, schema: &Schema) -> Result<Table, PublishError> {
        let ns = self.namespace.clone();
        let batch_defs = batch_column_defs(schema)?;
        let table = match self.catalog.get_table(&ns, name).await? {
            Some(t) => t,
            None => {
                self.catalog.ensure_namespace(&ns).await?;
                let mut defs = batch_defs.clone();
                defs.push(inserted_at_def());
                let t = self.catalog.create_table(&ns, name, &defs).await?;
                tracing::info!(table = %format!("{ns}.{name}"), table_uuid = %t.table_uuid, columns = defs.len(), "hoglake table created");
                t
            }
        };
        let missing: Vec<AlterOp> = batch_defs
            .iter()
            .filter(|d| !table.columns.iter().any(|c| c.name == d.name))
            .map(|d| AlterOp::AddColumn { column: d.clone() })
            .collect();
        let (table, added) = self.evolve(name, table, missing, "adding columns").await?;
        self.columns_added += added;
        let promotions: Vec<AlterOp> = batch_defs
            .iter()
            .filter_map(|d| {
                let live = table.columns.iter().find(|c| c.name == d.name)?;
                promotion(live.column_type, d.column_type).map(|to| AlterOp::PromoteColumn {
                    name: d.name.clone(),
                    to,
                })
            })
            .collect();
        let (table, promoted) = self
            .evolve(name, table, promotions, "promoting columns")
            .await?;
        self.columns_promoted += promoted;
        Ok(table)
    }

    /// Applies schema `ops` to table `name` in ONE alter; when the catalog
    /// refuses the batch as a whole, one op at a time, so one bad column
    /// cannot block the others. An op still refused is left out (logged,
    /// counted in [`Self::schema_errors`]). Answers the table and how many
    /// ops applied.
    async fn evolve(
        &mut self,
        name: &str,
        table: Table,
        ops: Vec<AlterOp>,
        what: &str,
    ) -> Result<(Table, u64), PublishError> {
        if ops.is_empty() {
            return Ok((table, 0));
        }
        let ns = self.namespace.clone();
        let qualified = format!("{ns}.{name}");
        tracing::info!(table = %qualified, ops = ?ops, "hoglake: {what} in one alter");
        match self
            .catalog
            .alter_table(&ns, name, Some(&table.table_uuid), &ops)
            .await
        {
            Ok(t) => Ok((t, ops.len() as u64)),
            Err(e) if e.class() == ErrorClass::Permanent => {
                tracing::warn!(table = %qualified, error = %e, "hoglake: batched alter refused; {what} one at a time");
                let mut live = table;
                let mut applied = 0;
                for op in ops {
                    match self
                        .catalog
                        .alter_table(&ns, name, Some(&live.table_uuid), std::slice::from_ref(&op))
                        .await
                    {
                        Ok(t) => {
                            live = t;
                            applied += 1;
                        }
                        Err(e) if e.class() == ErrorClass::Permanent => {
                            self.schema_errors += 1;
                            tracing::warn!(table = %qualified, op = ?op, error = %e,
                                "hoglake: schema change refused by the catalog; the column keeps its live shape");
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                Ok((live, applied))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Declares a missing layout in one alter and verifies the answer; a
    /// live layout config does not describe is fatal.
    async fn reconcile(
        &mut self,
        table: Table,
        payload_columns: bool,
    ) -> Result<Table, PublishError> {
        let plan = layout::plan(&self.layout, &table, payload_columns)
            .map_err(|d| PublishError::Layout(d.0))?;
        for why in &plan.skipped {
            tracing::warn!(table = %self.qualified(), "hoglake: {why}");
        }
        if plan.ops.is_empty() {
            return Ok(table);
        }
        tracing::info!(table = %self.qualified(), partition_by = %layout::render(&self.layout.partition_by),
            sort_by = ?self.layout.sort_by, "hoglake: declaring the table layout");
        let altered = self
            .catalog
            .alter_table(
                &self.namespace,
                &self.table,
                Some(&table.table_uuid),
                &plan.ops,
            )
            .await?;
        let check = layout::plan(&self.layout, &altered, payload_columns)
            .map_err(|d| PublishError::Layout(d.0))?;
        if !check.ops.is_empty() {
            return Err(PublishError::Layout(format!(
                "declared the layout of {} but the catalog answered a table that still lacks it: {:?}",
                self.qualified(),
                check.ops
            )));
        }
        Ok(altered)
    }

    /// Publishes one flush: `batches` (all with the same schema) covering
    /// `ranges`, without a deadline. `flush_id` goes into the commit message.
    pub async fn publish(
        &mut self,
        flush_id: &str,
        batches: &[RecordBatch],
        ranges: &[OffsetRange],
    ) -> Result<PublishReceipt, PublishError> {
        self.publish_with_dead_letters(flush_id, batches, &[], ranges, Deadline::none())
            .await
    }

    /// Publishes one flush and its dead letters (batches in the layout of
    /// the dead-letter table) in ONE commit: the rows to the table, the
    /// letters to [`PublisherConfig::dead_letter_table`]. Within `deadline`:
    /// every request is cut at it, and no wait ends past it.
    pub async fn publish_with_dead_letters(
        &mut self,
        flush_id: &str,
        batches: &[RecordBatch],
        dead_letters: &[RecordBatch],
        ranges: &[OffsetRange],
        deadline: Deadline,
    ) -> Result<PublishReceipt, PublishError> {
        deadline
            .scope(self.publish_within(flush_id, (batches, dead_letters), ranges, deadline))
            .await
    }

    async fn publish_within(
        &mut self,
        flush_id: &str,
        (batches, dead_letters): (&[RecordBatch], &[RecordBatch]),
        ranges: &[OffsetRange],
        deadline: Deadline,
    ) -> Result<PublishReceipt, PublishError> {
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let letters: usize = dead_letters.iter().map(RecordBatch::num_rows).sum();
        if letters > 0 && self.dead_letter_table.is_none() {
            return Err(PublishError::Schema(format!(
                "flush {flush_id} has {letters} dead letters and no dead-letter table is configured"
            )));
        }
        if rows == 0 && letters == 0 {
            return Ok(PublishReceipt {
                outcome: Outcome::Empty,
                rows: 0,
                files: 0,
                file_rows: Vec::new(),
                dead_letters: 0,
                snapshot_id: None,
                schema_version: None,
                idempotency_key: None,
                table_uuid: None,
                attempts: 0,
                paths: Vec::new(),
            });
        }
        let inserted_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0);
        let ladder = self.ladder.clone();
        let table = self.qualified();
        let mut run = Run {
            publisher: self,
            flush_id,
            batches: (batches, dead_letters),
            ranges,
            inserted_at,
            held: None,
            uncertain: false,
        };
        let result = ladder
            .retry_until(
                deadline,
                &mut run,
                |run, attempt| Box::pin(run.step(attempt)),
                |_, attempt, pause, error| {
                    tracing::warn!(table = %table, attempt, max = ladder.attempts,
                        pause_ms = pause.as_millis() as u64, error = %error, "hoglake publish attempt failed; retrying")
                },
            )
            .await;
        let (error, attempts, pause) = match result {
            Ok((receipt, _)) => return Ok(receipt),
            Err(Stopped::Fatal { error, .. }) => return Err(error),
            Err(Stopped::Exhausted { error, attempts }) => (error, attempts, None),
            Err(Stopped::Deadline {
                error,
                attempts,
                pause,
            }) => (error, attempts, Some(pause)),
        };
        if let Some(p) = run.held.take() {
            if p.maybe_applied {
                tracing::warn!(key = %p.key, paths = ?p.paths,
                    "hoglake: giving up after a send whose outcome is unknown; the files may be registered (check GET …/commit/receipts/<key>)");
            } else {
                run.publisher.orphans.add("retries_exhausted", &p.paths);
            }
        }
        let last = Box::new(error);
        Err(match pause {
            None => PublishError::Exhausted {
                table,
                attempts,
                last,
            },
            Some(pause) => PublishError::DeadlineSpent {
                what: "publishing to",
                table,
                attempts,
                deadline,
                pause,
                last,
            },
        })
    }

    async fn attempt(
        &mut self,
        held: &mut Option<Prepared>,
        flush_id: &str,
        batches: (&[RecordBatch], &[RecordBatch]),
        ranges: &[OffsetRange],
        inserted_at: i64,
        attempt: u32,
    ) -> Result<PublishReceipt, PublishError> {
        if held.is_none() {
            *held = Some(self.prepare(flush_id, batches, ranges, inserted_at).await?);
        }
        let p = held.as_mut().expect("prepared above");
        // After a send without an answer, ask for the receipt first: if it
        // exists the identical re-send is answered from it (a replay).
        let replay = if p.maybe_applied {
            matches!(self.catalog.receipt(&p.key).await, Ok(Some(_)))
        } else {
            false
        };
        match self.catalog.commit_prepared(&p.body).await {
            Ok(result) => {
                let p = held.take().expect("held");
                Ok(PublishReceipt {
                    outcome: if replay {
                        Outcome::Replayed
                    } else {
                        Outcome::Published
                    },
                    rows: p.rows,
                    files: p.file_rows.len(),
                    file_rows: p.file_rows,
                    dead_letters: p.dead_letters,
                    snapshot_id: Some(result.snapshot_id),
                    schema_version: Some(result.schema_version),
                    idempotency_key: Some(p.key),
                    table_uuid: Some(p.table_uuid),
                    attempts: attempt,
                    paths: p.paths,
                })
            }
            // No answer, or a 2xx we could not read: the commit may have
            // applied, so the payload is kept and re-sent identically.
            Err(e) if e.outcome_unknown() || matches!(e, CatalogError::Decode { .. }) => {
                p.maybe_applied = true;
                Err(e.into())
            }
            Err(e) if e.status() == Some(422) => {
                // A receipt under our key + a 422 = the key was used by a
                // different payload: the offsets are already in this
                // incarnation.
                match self.catalog.receipt(&p.key).await {
                    Ok(Some(result)) => {
                        let p = held.take().expect("held");
                        tracing::info!(key = %p.key, snapshot_id = result.snapshot_id,
                            "hoglake: these offsets were already published to this table incarnation; acknowledging without publishing");
                        self.orphans.add("already_published", &p.paths);
                        Ok(PublishReceipt {
                            outcome: Outcome::AlreadyPublished,
                            rows: 0,
                            files: 0,
                            file_rows: Vec::new(),
                            dead_letters: 0,
                            snapshot_id: Some(result.snapshot_id),
                            schema_version: Some(result.schema_version),
                            idempotency_key: Some(p.key),
                            table_uuid: Some(p.table_uuid),
                            attempts: attempt,
                            paths: Vec::new(),
                        })
                    }
                    _ => Err(e.into()),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Steps 1-3: resolve, encode, upload, build the payload.
    async fn prepare(
        &mut self,
        flush_id: &str,
        (batches, dead_letters): (&[RecordBatch], &[RecordBatch]),
        ranges: &[OffsetRange],
        inserted_at: i64,
    ) -> Result<Prepared, PublishError> {
        let table = self.bootstrap(&union_schema(batches)).await?;
        let mut read_snapshot = table.read_snapshot_id;
        let key = idempotency_key(&table.table_uuid, ranges);
        let name = self.table.clone();
        let mut appends = Vec::new();
        let mut uploads = Vec::new();
        let data = self.encode(&table, &name, batches, inserted_at, &key)?;
        let file_rows: Vec<u64> = data.0.iter().map(|f| f.record_count).collect();
        let rows = file_rows.iter().sum();
        if !data.0.is_empty() {
            appends.push(TableAppend {
                namespace: self.namespace.clone(),
                table: name,
                expected_table_uuid: Some(table.table_uuid.clone()),
                files: data.0,
            });
            uploads.extend(data.1);
        }
        let mut letters = 0;
        if let Some(dl_name) = self
            .dead_letter_table
            .clone()
            .filter(|_| dead_letters.iter().any(|b| b.num_rows() > 0))
        {
            let dl_table = self.resolve(&dl_name, &union_schema(dead_letters)).await?;
            // The earlier read: DDL on either table after it must refuse
            // the commit (one re-prepare after this writer's own DDL).
            read_snapshot = match (read_snapshot, dl_table.read_snapshot_id) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let (files, more) =
                self.encode(&dl_table, &dl_name, dead_letters, inserted_at, &key)?;
            letters = files.iter().map(|f| f.record_count).sum();
            appends.push(TableAppend {
                namespace: self.namespace.clone(),
                table: dl_name,
                expected_table_uuid: Some(dl_table.table_uuid.clone()),
                files,
            });
            uploads.extend(more);
        }
        let results = join_all(
            uploads
                .iter()
                .map(|(uri, bytes)| self.store.put(uri, bytes.clone())),
        )
        .await;
        let mut landed = Vec::new();
        let mut first_error = None;
        for ((uri, _), result) in uploads.iter().zip(results) {
            match result {
                Ok(()) => landed.push(uri.clone()),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            self.orphans.add("prepare_failed", &landed);
            return Err(e.into());
        }
        let paths = uploads.into_iter().map(|(uri, _)| uri).collect();
        let request = CommitRequest {
            idempotency_key: Some(key.to_string()),
            read_snapshot,
            appends,
            author: None,
            message: Some(format!("millpond flush {flush_id}")),
        };
        let body = serde_json::to_vec(&request).map_err(|e| {
            PublishError::Schema(format!("cannot serialise the commit request: {e}"))
        })?;
        Ok(Prepared {
            key,
            table_uuid: table.table_uuid,
            body,
            paths,
            rows,
            file_rows,
            dead_letters: letters,
            maybe_applied: false,
        })
    }

    /// `batches` as `table`'s files: conformed to its file schema, stamped
    /// with `_inserted_at`, one parquet file per partition tuple under the
    /// live spec. Answers the registrations and the objects to upload.
    #[allow(clippy::type_complexity)]
    fn encode(
        &self,
        table: &Table,
        name: &str,
        batches: &[RecordBatch],
        inserted_at: i64,
        key: &uuid::Uuid,
    ) -> Result<(Vec<FileRegistration>, Vec<(String, bytes::Bytes)>), PublishError> {
        let encode = |source| PublishError::Encode {
            table: format!("{}.{name}", self.namespace),
            source,
        };
        let batches: Vec<&RecordBatch> = batches.iter().filter(|b| b.num_rows() > 0).collect();
        if batches.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let file_schema: SchemaRef = Arc::new(arrow_schema(&table.columns).map_err(encode)?);
        let conformed = batches
            .iter()
            .map(|b| conform(&stamp(b, inserted_at)?, &file_schema))
            .collect::<crate::Result<Vec<_>>>()
            .map_err(encode)?;
        let groups: Vec<(Option<Tuple>, Vec<RecordBatch>)> = match table
            .partition_spec
            .as_ref()
            .filter(|s| !s.fields.is_empty())
        {
            Some(spec) => Partitioner::new(spec, &table.columns)
                .and_then(|p| p.split(&conformed))
                .map_err(encode)?
                .into_iter()
                .filter(|g| g.batch.num_rows() > 0)
                .map(|g| (Some(g.values), vec![g.batch]))
                .collect(),
            None => vec![(None, conformed)],
        };
        let mut files = Vec::with_capacity(groups.len());
        let mut uploads = Vec::with_capacity(groups.len());
        for (index, (values, group)) in groups.into_iter().enumerate() {
            let file = write_parquet(&file_schema, &group).map_err(encode)?;
            let uri = object_uri(
                self.store.data_path(),
                &self.namespace,
                name,
                key,
                &uuid::Uuid::new_v4(),
                index,
            );
            files.push(FileRegistration::new(
                uri.clone(),
                &file,
                &table.columns,
                values,
            ));
            uploads.push((uri, file.bytes));
        }
        Ok((files, uploads))
    }
}

/// One publish on the ladder: what its attempts share.
struct Run<'p> {
    publisher: &'p mut Publisher,
    flush_id: &'p str,
    batches: (&'p [RecordBatch], &'p [RecordBatch]),
    ranges: &'p [OffsetRange],
    /// `_inserted_at` of every row, kept across re-prepares.
    inserted_at: i64,
    /// The payload re-sent byte-identically until it is answered.
    held: Option<Prepared>,
    /// A send of this call may have landed unanswered: a later
    /// "already published" under the same key is then this call's own.
    uncertain: bool,
}

impl Run<'_> {
    /// One attempt, classified for the ladder: a refusal that asks for a
    /// re-prepare drops the held payload (its files become orphans), a
    /// permanent one ends the publish.
    async fn step(&mut self, attempt: u32) -> Step<PublishReceipt, PublishError> {
        let (batches, dead_letters) = self.batches;
        let error = match self
            .publisher
            .attempt(
                &mut self.held,
                self.flush_id,
                self.batches,
                self.ranges,
                self.inserted_at,
                attempt,
            )
            .await
        {
            Ok(receipt) if self.uncertain && receipt.outcome == Outcome::AlreadyPublished => {
                let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
                let letters = dead_letters.iter().map(|b| b.num_rows() as u64).sum();
                tracing::info!(key = ?receipt.idempotency_key, rows,
                    "hoglake: an earlier send of this flush landed unanswered; counting it as this flush's publication");
                return Step::Done(PublishReceipt {
                    outcome: Outcome::Replayed,
                    rows,
                    dead_letters: letters,
                    ..receipt
                });
            }
            Ok(receipt) => return Step::Done(receipt),
            Err(e) => e,
        };
        self.uncertain |= self.held.as_ref().is_some_and(|p| p.maybe_applied);
        // A 2xx whose body could not be read may have applied: resend
        // the identical payload rather than give up.
        let class = match &error {
            PublishError::Catalog(CatalogError::Decode { .. }) if self.uncertain => {
                ErrorClass::Retry
            }
            _ => error.class(),
        };
        match class {
            ErrorClass::Retry => {}
            ErrorClass::RePrepare => {
                if matches!(&error, PublishError::Catalog(e) if e.status() == Some(409)) {
                    self.publisher.commit_conflicts += 1;
                }
                if let Some(p) = self.held.take() {
                    // The refusal's code, under the original's name
                    // where it had one.
                    let reason = match &error {
                        PublishError::Catalog(e) => match e.code() {
                            Some("expired") => "read_snapshot_expired",
                            Some(code) => code,
                            None => "re_prepare",
                        }
                        .to_string(),
                        _ => "re_prepare".into(),
                    };
                    if p.maybe_applied {
                        // A send without an answer may still land
                        // (it can be queued behind this refusal); the
                        // rebuilt payload reuses the key, so the server
                        // keeps it to one publication either way.
                        tracing::warn!(key = %p.key, reason, "hoglake: re-preparing after a send whose outcome is unknown; its files may yet be registered");
                    } else {
                        self.publisher.orphans.add(&reason, &p.paths);
                    }
                }
            }
            ErrorClass::Permanent => {
                if let Some(p) = self.held.take() {
                    if p.maybe_applied {
                        // An earlier send may have landed; keep the
                        // files unaccounted rather than invent orphans.
                        tracing::warn!(key = %p.key, "hoglake: commit refused after a send whose outcome is unknown; its files may be registered");
                    } else {
                        self.publisher.orphans.add("commit_refused", &p.paths);
                    }
                }
                return Step::Fatal(error);
            }
        }
        Step::Retry {
            floor: error.retry_after(),
            error,
        }
    }
}

/// Every column of every batch, first appearance wins (a later batch of the
/// flush may carry a column the first lacks).
fn union_schema(batches: &[RecordBatch]) -> Schema {
    let mut fields: Vec<Field> = Vec::new();
    for batch in batches {
        for field in batch.schema().fields() {
            if !fields.iter().any(|f| f.name() == field.name()) {
                fields.push(field.as_ref().clone());
            }
        }
    }
    Schema::new(fields)
}

fn inserted_at_def() -> ColumnDef {
    ColumnDef {
        name: INSERTED_AT.into(),
        column_type: ColumnType::Timestamptz,
        nullable: true,
        type_params: None,
        children: None,
        comment: None,
    }
}

/// The type a live column must be promoted to so a batch column of type
/// `batch` fits without loss (the widenings hoglake allows, 6.3); `None`
/// when no promotion applies.
pub fn promotion(live: ColumnType, batch: ColumnType) -> Option<ColumnType> {
    use ColumnType as T;
    match (live, batch) {
        (T::Int8 | T::Int16 | T::Int, T::Long) => Some(T::Long),
        (T::Int8, T::Int) => Some(T::Int),
        (T::Float, T::Double) => Some(T::Double),
        _ => None,
    }
}

/// Column definitions of the batch's columns (without `_inserted_at`, which
/// millpond owns).
fn batch_column_defs(schema: &Schema) -> Result<Vec<ColumnDef>, PublishError> {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .filter(|f| f.name() != INSERTED_AT)
        .map(|f| f.as_ref().clone())
        .collect();
    let mut defs = column_defs(&Schema::new(fields)).map_err(|e| {
        PublishError::Schema(format!("the batch has a column hoglake cannot store: {e}"))
    })?;
    // Columns are created nullable: a later flush may lack any of them.
    for d in &mut defs {
        d.nullable = true;
    }
    Ok(defs)
}

/// The batch with `_inserted_at` (any incoming one replaced) = `micros` UTC.
fn stamp(batch: &RecordBatch, micros: i64) -> crate::Result<RecordBatch> {
    let mut fields: Vec<Field> = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if field.name() != INSERTED_AT {
            fields.push(field.as_ref().clone());
            columns.push(column.clone());
        }
    }
    fields.push(Field::new(
        INSERTED_AT,
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        true,
    ));
    columns.push(Arc::new(
        TimestampMicrosecondArray::from(vec![micros; batch.num_rows()]).with_timezone("UTC"),
    ));
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(topic: &str, partition: i32, first: i64, last: i64) -> OffsetRange {
        OffsetRange::new(topic, partition, first, last)
    }

    #[test]
    fn keys_name_the_incarnation_and_the_complete_ranges() {
        let a = [range("t", 0, 0, 9), range("t", 1, 5, 7)];
        let reordered = [range("t", 1, 5, 7), range("t", 0, 0, 9)];
        let k = idempotency_key("u1", &a);
        assert_eq!(k, idempotency_key("u1", &reordered));
        assert_eq!(k.get_version_num(), 5);
        assert_ne!(
            k,
            idempotency_key("u2", &a),
            "a recreated table must get a new key"
        );
        assert_ne!(k, idempotency_key("u1", &a[..1]), "every range counts");
        assert_ne!(
            k,
            idempotency_key("u1", &[range("t", 0, 0, 10), range("t", 1, 5, 7)])
        );
        // Stable across builds: a changed derivation would break replays.
        assert_eq!(k, idempotency_key("u1", &a));
    }

    /// The key is pinned (a changed derivation would break replays across
    /// versions) and names only the coordinates, not the last record's
    /// fingerprint a range may carry.
    #[test]
    fn keys_are_pinned_and_ignore_the_last_record_fingerprint() {
        let a = [range("t", 0, 0, 9), range("t", 1, 5, 7)];
        let k = idempotency_key("u1", &a);
        assert_eq!(k.to_string(), "f8786756-7508-5898-b068-2d9777c2683d");
        let mut fingerprinted = a.clone();
        fingerprinted[0].last_timestamp_ms = Some(1_700_000_000_000);
        fingerprinted[0].last_checksum = Some(42);
        assert_eq!(idempotency_key("u1", &fingerprinted), k);
        let twice = [a[0].clone(), fingerprinted[0].clone(), a[1].clone()];
        assert_eq!(idempotency_key("u1", &twice), k, "duplicates count once");
    }

    #[test]
    fn union_schema_keeps_every_column_once() {
        use arrow::array::Int64Array;
        let a = RecordBatch::try_from_iter(vec![(
            "x",
            Arc::new(Int64Array::from(vec![1])) as ArrayRef,
        )])
        .unwrap();
        let b = RecordBatch::try_from_iter(vec![
            ("y", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
            ("x", Arc::new(Int64Array::from(vec![2])) as ArrayRef),
        ])
        .unwrap();
        let names: Vec<String> = union_schema(&[a, b])
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names, ["x", "y"]);
    }

    #[test]
    fn stamp_replaces_inserted_at_with_one_instant() {
        use arrow::array::{Array, Int64Array, StringArray};
        let batch = RecordBatch::try_from_iter(vec![
            ("a", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
            (
                INSERTED_AT,
                Arc::new(StringArray::from(vec!["x", "y"])) as ArrayRef,
            ),
        ])
        .unwrap();
        let out = stamp(&batch, 42).unwrap();
        assert_eq!(out.num_columns(), 2);
        let col = out.column_by_name(INSERTED_AT).unwrap();
        let ts = col
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap();
        assert_eq!(ts.values().as_ref(), &[42, 42]);
        assert_eq!(ts.timezone(), Some("UTC"));
    }

    #[test]
    fn orphan_counts_add_up_per_reason() {
        let mut o = OrphanCounts::default();
        o.add("commit_refused", &["s3://b/x".into(), "s3://b/y".into()]);
        o.add("table_recreated", &["s3://b/z".into()]);
        o.add("commit_refused", &[]);
        assert_eq!(o.get("commit_refused"), 2);
        assert_eq!(o.get("table_recreated"), 1);
        assert_eq!(o.total(), 3);
    }
}
