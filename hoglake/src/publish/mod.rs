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
//! 3. with the partition fence on ([`PublisherConfig::partition_fence`],
//!    module `offsets`): check the flush's ranges against what each of its
//!    partitions' offsets tables recorded last (a resend is acknowledged
//!    here, an overlap refused), and add each partition's offsets row and
//!    an empty delete group guarding its table;
//! 4. upload every file (one PutObject each, concurrently) under the key
//!    prefix, and build ONE prepared commit (`…/commit/mutations/prepared`
//!    with the fence, `…/commit/prepared` without): `idempotency_key`
//!    (derived from the incarnation and the complete offset ranges,
//!    [`idempotency_key`]), `read_snapshot`, `expected_table_uuid`;
//! 5. send it; on a retryable failure wait on the ladder
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

mod commit;
mod error;
mod key;
mod offsets;
mod orphans;
mod prepare;
mod receipt;
mod run;
mod table;

use millpond_shared::retry::Ladder;

use crate::catalog::CatalogClient;
use crate::layout::Layout;
use crate::store::{DataStore, S3Config};

pub use error::PublishError;
pub use key::idempotency_key;
pub use offsets::{offsets_table, offsets_table_prefix, MUTATION_CAPABILITY, OFFSETS_TABLE_PREFIX};
pub use orphans::{OrphanCounts, ORPHAN_REASONS};
pub use receipt::{Outcome, PublishReceipt};
pub use table::promotion;

/// The column every row gets: when this flush was published (timestamptz).
pub const INSERTED_AT: &str = "_inserted_at";

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
    /// HOGLAKE_PARTITION_FENCE: guard every commit with the offsets tables
    /// of its Kafka partitions ([`offsets`]), so no offset is published
    /// twice by two owners.
    pub partition_fence: bool,
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
    /// HOGLAKE_PARTITION_FENCE.
    fence_on: bool,
    fence: offsets::Fence,
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
        if config.partition_fence && !info.capabilities.iter().any(|c| c == MUTATION_CAPABILITY) {
            return Err(PublishError::Unsupported(format!(
                "HOGLAKE_PARTITION_FENCE is on, but catalog {} does not advertise `{MUTATION_CAPABILITY}` \
                 (its capabilities: {:?}); the fence guards each commit with a mutation request. \
                 Upgrade the hoglake server, or set HOGLAKE_PARTITION_FENCE=false and stop every pod \
                 before changing the replica count (two owners of a partition would publish it twice)",
                info.name, info.capabilities
            )));
        }
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
            fence_on: config.partition_fence,
            fence: offsets::Fence::default(),
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
        self.fence.forget();
    }
}

#[cfg(test)]
mod tests;
