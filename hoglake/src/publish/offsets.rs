//! The partition fence: one offsets table per Kafka partition, guarded in
//! every commit, so no offset is published twice whoever owns it.
//!
//! `_millpond_offsets_<table>_<p>` holds one row per flush that covered
//! partition `p`: its topic, range, the record at its last offset, and the
//! flush. Every column that names the range is an identity partition field,
//! so each row is a one-row file that is its own partition: the row a
//! partition recorded last (its head) comes back from one `limit=1` file
//! listing, without reading S3, and the server's compaction never merges
//! the rows.
//!
//! A flush appends its range to `O_p` for each of its partitions and names
//! each of those tables in an empty delete group of the same request
//! (`…/commit/mutations/prepared`). The server then refuses the whole
//! commit (409 `commit_conflict`, nothing written) when anything was
//! appended to one of them after the request's `read_snapshot`. The writer
//! checked the heads as of that snapshot, so every commit that lands starts
//! past the head it was checked against, and each table stays a chain of
//! disjoint ranges: no lease, clock or timeout takes part. A writer that
//! lost a race re-reads the heads and finds its flush overlapping
//! (`PublishError::Overlap`); ingest then sends only what was not recorded.
//! The data and dead-letter tables are only appended to, so the rule binds
//! nothing else: pods that own different partitions never conflict.
use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use futures::future::try_join_all;
use millpond_proto::{LastRecord, OffsetRange};

use super::{PublishError, Publisher};
use crate::catalog::DataFile;
use crate::layout::{self, Layout, PartitionTerm};
use crate::partition_value::Transform;
use crate::schema::Table;

/// Where every offsets table's name starts.
pub const OFFSETS_TABLE_PREFIX: &str = "_millpond_offsets_";

/// The capability a server needs for the fence (delete groups with no
/// files, on `…/commit/mutations/prepared`).
pub const MUTATION_CAPABILITY: &str = "idempotent-mutation-v1";

/// The columns of an offsets row that are also its partition values, in
/// spec order (the tuple a listing answers).
const RANGE_COLUMNS: [&str; 7] = [
    "topic",
    "first_offset",
    "last_offset",
    "last_timestamp_ms",
    "last_checksum",
    "flush_id",
    "table_uuid",
];

/// hoglake's longest table name.
const MAX_NAME_CHARS: usize = 128;

/// The start of `table`'s offsets tables' names: `_millpond_offsets_<table>_`,
/// or, when a partition's name could pass 128 characters, the table's name
/// replaced by a hash of it.
pub fn offsets_table_prefix(table: &str) -> String {
    let full = format!("{OFFSETS_TABLE_PREFIX}{table}_");
    // A partition number has at most 10 digits.
    if full.chars().count() + 10 <= MAX_NAME_CHARS {
        full
    } else {
        let hash = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, table.as_bytes());
        format!("{OFFSETS_TABLE_PREFIX}{}_", hash.simple())
    }
}

/// The offsets table of `table`'s Kafka partition `partition`.
pub fn offsets_table(table: &str, partition: i32) -> String {
    format!("{}{partition}", offsets_table_prefix(table))
}

/// What an offsets table recorded last for a topic: the range, the flush
/// that recorded it and the data table's incarnation it went to (a table
/// dropped and recreated under the same name starts a chain of its own).
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    pub range: OffsetRange,
    pub flush_id: String,
    pub table_uuid: String,
}

impl Head {
    /// The head a listed file names (its partition values, in
    /// [`RANGE_COLUMNS`] order).
    fn of(table: &str, partition: i32, file: &DataFile) -> Result<Self, PublishError> {
        let bad = |why: &str| {
            PublishError::Schema(format!(
                "offsets table {table}: file {} {why}; it was not written by millpond (drop the table only if no writer uses it)",
                file.path
            ))
        };
        let values = file
            .partition_values
            .as_deref()
            .filter(|v| v.len() == RANGE_COLUMNS.len())
            .ok_or_else(|| bad("has no range in its partition values"))?;
        let int = |i: usize| -> Result<Option<i64>, PublishError> {
            values[i]
                .as_deref()
                .map(|v| {
                    v.parse::<i64>()
                        .map_err(|_| bad("has a range that is not a number"))
                })
                .transpose()
        };
        let (Some(topic), Some(first), Some(last), Some(flush_id), Some(table_uuid)) =
            (&values[0], int(1)?, int(2)?, &values[5], &values[6])
        else {
            return Err(bad("lacks its topic, range, flush or table"));
        };
        let timestamp_ms = int(3)?;
        let last_record = int(4)?.map(|checksum| LastRecord {
            timestamp_ms,
            checksum: checksum as u64,
        });
        Ok(Head {
            range: OffsetRange::new(topic.clone(), partition, first, last)
                .with_last_record(last_record),
            flush_id: flush_id.clone(),
            table_uuid: table_uuid.clone(),
        })
    }
}

/// What the fence keeps between flushes.
#[derive(Debug, Default)]
pub(super) struct Fence {
    /// Offsets tables resolved, by Kafka partition.
    tables: HashMap<i32, Table>,
    /// The last commit's snapshot and the heads it made: a flush of the
    /// same partitions is checked against them, guarded from that snapshot,
    /// without listing anything.
    last_commit: Option<(i64, Vec<Head>)>,
}

impl Fence {
    pub(super) fn forget(&mut self) {
        self.tables.clear();
        self.last_commit = None;
    }

    /// `ranges` were published by `flush_id` into incarnation `table_uuid`
    /// at `snapshot`.
    pub(super) fn committed(
        &mut self,
        snapshot: i64,
        (flush_id, table_uuid): (&str, &str),
        ranges: &[OffsetRange],
    ) {
        let heads = ranges
            .iter()
            .map(|r| Head {
                range: r.clone(),
                flush_id: flush_id.to_owned(),
                table_uuid: table_uuid.to_owned(),
            })
            .collect();
        self.last_commit = Some((snapshot, heads));
    }
}

/// The offsets tables' layout: every range column an identity field.
fn offsets_layout() -> Layout {
    Layout {
        partition_by: RANGE_COLUMNS
            .iter()
            .map(|c| PartitionTerm {
                column: (*c).to_owned(),
                transform: Transform::Identity,
            })
            .collect(),
        sort_by: Vec::new(),
    }
}

fn offsets_schema() -> Schema {
    Schema::new(vec![
        Field::new("topic", DataType::Utf8, true),
        Field::new("kafka_partition", DataType::Int32, true),
        Field::new("first_offset", DataType::Int64, true),
        Field::new("last_offset", DataType::Int64, true),
        Field::new("last_timestamp_ms", DataType::Int64, true),
        Field::new("last_checksum", DataType::Int64, true),
        Field::new("flush_id", DataType::Utf8, true),
        Field::new("table_uuid", DataType::Utf8, true),
    ])
}

/// The offsets row of one range, published by `flush_id` into incarnation
/// `table_uuid`.
pub(super) fn offsets_row(
    range: &OffsetRange,
    (flush_id, table_uuid): (&str, &str),
) -> RecordBatch {
    let mark = range.last_record();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec![range.topic.as_str()])),
        Arc::new(Int32Array::from(vec![range.partition])),
        Arc::new(Int64Array::from(vec![range.first])),
        Arc::new(Int64Array::from(vec![range.last])),
        Arc::new(Int64Array::from(vec![mark.and_then(|m| m.timestamp_ms)])),
        // The checksum's 64 bits as they are.
        Arc::new(Int64Array::from(vec![mark.map(|m| m.checksum as i64)])),
        Arc::new(StringArray::from(vec![flush_id])),
        Arc::new(StringArray::from(vec![table_uuid])),
    ];
    RecordBatch::try_new(Arc::new(offsets_schema()), columns).expect("fixed schema")
}

impl Publisher {
    /// The offsets table of `partition`, created on first use with its
    /// partition spec (declared in one alter right after; a table whose
    /// declaration was interrupted gets it on the next resolve).
    pub(super) async fn offsets_table(&mut self, partition: i32) -> Result<Table, PublishError> {
        if let Some(t) = self.fence.tables.get(&partition) {
            return Ok(t.clone());
        }
        let name = offsets_table(&self.table, partition);
        let table = self.resolve(&name, &offsets_schema()).await?;
        let plan = layout::plan(&offsets_layout(), &table, true).map_err(|d| {
            PublishError::Layout(format!("{}; it is millpond's offsets table", d.0))
        })?;
        let table = if plan.ops.is_empty() {
            table
        } else {
            self.catalog
                .alter_table(&self.namespace, &name, Some(&table.table_uuid), &plan.ops)
                .await?
        };
        self.fence.tables.insert(partition, table.clone());
        Ok(table)
    }

    /// The heads of `ranges`' partitions in incarnation `table_uuid` and
    /// the snapshot they hold at: the last commit's, when it covered every
    /// one of these partitions and no DDL of this prepare came after it
    /// (`since_ddl`), else those listed at `snapshot`.
    pub(super) async fn heads(
        &self,
        ranges: &[OffsetRange],
        (table_uuid, snapshot): (&str, i64),
        since_ddl: bool,
    ) -> Result<(i64, Vec<Head>), PublishError> {
        if let Some((at, heads)) = self.fence.last_commit.as_ref().filter(|_| !since_ddl) {
            let known = ranges.iter().all(|r| {
                heads.iter().any(|h| {
                    h.range.partition == r.partition
                        && h.range.topic == r.topic
                        && h.table_uuid == table_uuid
                })
            });
            if known {
                return Ok((*at, heads.clone()));
            }
        }
        let heads = self
            .heads_at(
                ranges.iter().map(|r| (r.topic.as_str(), r.partition)),
                (table_uuid, snapshot),
            )
            .await?;
        Ok((snapshot, heads))
    }

    /// What each `(topic, partition)`'s offsets table held last at
    /// `snapshot` for incarnation `table_uuid` (none for a partition never
    /// recorded in it).
    async fn heads_at<'a>(
        &self,
        partitions: impl Iterator<Item = (&'a str, i32)>,
        (table_uuid, snapshot): (&str, i64),
    ) -> Result<Vec<Head>, PublishError> {
        let reads = partitions.map(|(topic, partition)| async move {
            let name = offsets_table(&self.table, partition);
            let file = self
                .catalog
                .last_file_in_partition(&self.namespace, &name, snapshot, (0, topic))
                .await?;
            file.map(|f| Head::of(&name, partition, &f)).transpose()
        });
        Ok(try_join_all(reads)
            .await?
            .into_iter()
            .flatten()
            .filter(|h| h.table_uuid == table_uuid)
            .collect())
    }

    /// The range each partition of `topic` recorded last in the table's
    /// live incarnation, from every offsets table of this table, at the
    /// catalog's head.
    pub async fn recorded_offsets(&self, topic: &str) -> Result<Vec<OffsetRange>, PublishError> {
        let Some(table) = self.catalog.get_table(&self.namespace, &self.table).await? else {
            return Ok(Vec::new());
        };
        let head = match table.read_snapshot_id {
            Some(at) => at,
            None => self.catalog.get_catalog().await?.head_snapshot_id,
        };
        let prefix = offsets_table_prefix(&self.table);
        let partitions: Vec<i32> = self
            .catalog
            .table_names(&self.namespace)
            .await?
            .iter()
            .filter_map(|n| n.strip_prefix(&prefix)?.parse::<i32>().ok())
            .collect();
        let mut ranges: Vec<OffsetRange> = self
            .heads_at(
                partitions.into_iter().map(|p| (topic, p)),
                (&table.table_uuid, head),
            )
            .await?
            .into_iter()
            .map(|h| h.range)
            .collect();
        ranges.sort_by_key(|r| r.partition);
        Ok(ranges)
    }
}

#[cfg(test)]
#[path = "offsets_tests.rs"]
mod tests;
