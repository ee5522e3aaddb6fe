//! Steps 1-3 of a publish: resolve the tables, encode the batches as one
//! parquet file per partition tuple, upload them, build the commit payload.
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use futures::future::join_all;
use millpond_proto::OffsetRange;

use super::offsets::offsets_row;
use super::{idempotency_key, Outcome, PublishError, PublishReceipt, Publisher, INSERTED_AT};
use crate::arrow_schema::{arrow_schema, conform};
use crate::parquet_file::write_parquet;
use crate::partition::Partitioner;
use crate::payload::{CommitRequest, TableAppend, TableDeletes};
use crate::registration::{object_uri, FileRegistration};
use crate::schema::Table;
use millpond_proto::coverage::{coverage, Coverage};

/// One file's partition values (`None` = null source value).
type Tuple = Vec<Option<String>>;

/// A prepared commit held across retries: the exact bytes sent each time.
pub(super) struct Prepared {
    pub(super) key: uuid::Uuid,
    pub(super) table_uuid: String,
    pub(super) body: Vec<u8>,
    pub(super) paths: Vec<String>,
    pub(super) rows: u64,
    pub(super) file_rows: Vec<u64>,
    pub(super) dead_letters: u64,
    /// A send of this payload ended without an answer (it may have applied).
    pub(super) maybe_applied: bool,
    /// Sent to `…/commit/mutations/prepared`: the payload guards the
    /// offsets tables of its partitions (the fence is on).
    pub(super) fenced: bool,
}

/// What a prepare found to do.
pub(super) enum Planned {
    /// Send this payload.
    Commit(Prepared),
    /// The offsets tables already end at exactly this flush's ranges:
    /// acknowledge without publishing.
    Recorded(PublishReceipt),
}

impl Publisher {
    /// Steps 1-3: resolve, encode, upload, build the payload.
    pub(super) async fn prepare(
        &mut self,
        flush_id: &str,
        (batches, dead_letters): (&[RecordBatch], &[RecordBatch]),
        ranges: &[OffsetRange],
        inserted_at: i64,
    ) -> Result<Planned, PublishError> {
        // The fence's tables first, so the reads below see them.
        let mut offsets_tables = Vec::new();
        if self.fence_on {
            for range in ranges {
                offsets_tables.push((range, self.offsets_table(range.partition).await?));
            }
        }
        let ddl_before = self.columns_added + self.columns_promoted;
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
        let mut deletes = Vec::new();
        if self.fence_on {
            let at = read_snapshot.ok_or_else(|| {
                PublishError::Unsupported(
                    "the catalog's table read carries no read_snapshot_id; the partition fence needs a current hoglake server".into(),
                )
            })?;
            let since_ddl = self.columns_added + self.columns_promoted != ddl_before;
            let (basis, heads) = self
                .heads(ranges, (&table.table_uuid, at), since_ddl)
                .await?;
            let recorded: Vec<OffsetRange> = heads.iter().map(|h| h.range.clone()).collect();
            match coverage(ranges, &recorded) {
                Coverage::New => {}
                Coverage::AlreadyRecorded => {
                    let another = heads
                        .iter()
                        .filter(|h| ranges.iter().any(|r| r.partition == h.range.partition))
                        .any(|h| h.flush_id != flush_id);
                    return Ok(Planned::Recorded(PublishReceipt {
                        recorded_by_another_flush: another,
                        snapshot_id: Some(basis),
                        table_uuid: Some(table.table_uuid),
                        ..PublishReceipt::nothing(Outcome::AlreadyRecorded)
                    }));
                }
                Coverage::Overlap(why) => {
                    self.fence.forget();
                    return Err(PublishError::Overlap(format!(
                        "flush {flush_id} overlaps offsets the hoglake offsets tables recorded: {why}"
                    )));
                }
            }
            read_snapshot = Some(at.min(basis));
            for (range, offsets) in &offsets_tables {
                let (files, more) = self.encode(
                    offsets,
                    &offsets.name,
                    &[offsets_row(range, (flush_id, &table.table_uuid))],
                    inserted_at,
                    &key,
                )?;
                appends.push(TableAppend {
                    namespace: self.namespace.clone(),
                    table: offsets.name.clone(),
                    expected_table_uuid: Some(offsets.table_uuid.clone()),
                    files,
                });
                uploads.extend(more);
                deletes.push(TableDeletes {
                    namespace: self.namespace.clone(),
                    table: offsets.name.clone(),
                    expected_table_uuid: Some(offsets.table_uuid.clone()),
                    files: Vec::new(),
                });
            }
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
            deletes,
            author: None,
            message: Some(format!("millpond flush {flush_id}")),
        };
        let body = serde_json::to_vec(&request).map_err(|e| {
            PublishError::Schema(format!("cannot serialise the commit request: {e}"))
        })?;
        Ok(Planned::Commit(Prepared {
            key,
            table_uuid: table.table_uuid,
            body,
            paths,
            rows,
            file_rows,
            dead_letters: letters,
            maybe_applied: false,
            fenced: self.fence_on,
        }))
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

/// Every column of every batch, first appearance wins (a later batch of the
/// flush may carry a column the first lacks).
pub(super) fn union_schema(batches: &[RecordBatch]) -> Schema {
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

/// The batch with `_inserted_at` (any incoming one replaced) = `micros` UTC.
pub(super) fn stamp(batch: &RecordBatch, micros: i64) -> crate::Result<RecordBatch> {
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
