//! A streamed flush's dead letters as one Parquet file of the dead-letter
//! table, registered with `ducklake_add_data_files` in the flush's
//! transaction, when there are more than DuckLake keeps inlined in its
//! catalog. DuckDB's INSERT of the anchor workload's ~70,000 letters a
//! flush held ~40 MB beyond the letters (writer peak 213-233 MB, against
//! 177 MB with the table off); the file is written from the letters'
//! columns a batch at a time.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::sink::ducklake::spool::{private_dir, Remote, INSERTED_AT};
use crate::sink::ducklake::sql::literal;
use crate::sink::letters::Letters;

/// Up to this many letters DuckLake keeps in its catalog (the dead-letter
/// table's `data_inlining_row_limit`): DuckDB inserts them.
pub const INLINED_ROWS: usize = 1000;

/// Rows per row group: the writer holds one row group's pages at a time.
const ROW_GROUP_ROWS: usize = 16_384;

pub struct LetterFile {
    local: PathBuf,
    /// Set for a lake on S3: the file is uploaded before it is registered.
    remote: Option<Arc<Remote>>,
    uploaded: bool,
}

impl LetterFile {
    /// Writes `letters` as the dead-letter table's rows of `flush_id`, in
    /// `dir` (the table's folder of a local lake) or the remote's staging
    /// folder (0600 there, as the rows' files).
    pub fn write(
        dir: &Path,
        remote: Option<Arc<Remote>>,
        flush_id: &str,
        letters: &Letters,
        codec: Compression,
    ) -> Result<LetterFile, String> {
        let dir = remote.as_ref().map_or(dir, |r| r.staging.as_path());
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let local = dir.join(format!("ducklake-{}.parquet", uuid::Uuid::new_v4()));
        let file = LetterFile {
            local,
            remote,
            uploaded: false,
        };
        let err = |e: &dyn std::fmt::Display| format!("writing {}: {e}", file.local.display());
        // Waiting for its upload, the file is this user's alone; in a
        // local lake it is the lake's, as the rows' files are.
        let out = if file.remote.is_some() {
            private_dir::new_file(&file.local)
        } else {
            std::fs::File::options()
                .write(true)
                .create_new(true)
                .open(&file.local)
        }
        .map_err(|e| err(&e))?;
        let (schema, batches) = letters.rows(flush_id);
        let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        let stamp_type = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        fields.push(Field::new(INSERTED_AT, stamp_type, true));
        let with_stamp = Arc::new(Schema::new(fields));
        let props = WriterProperties::builder()
            .set_compression(codec)
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .build();
        let mut writer =
            ArrowWriter::try_new(out, with_stamp.clone(), Some(props)).map_err(|e| err(&e))?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        for b in batches {
            let stamp: ArrayRef = Arc::new(
                TimestampMicrosecondArray::from_value(now, b.num_rows()).with_timezone("UTC"),
            );
            let mut columns = b.columns().to_vec();
            columns.push(stamp);
            let b = RecordBatch::try_new(with_stamp.clone(), columns).map_err(|e| err(&e))?;
            writer.write(&b).map_err(|e| err(&e))?;
        }
        let out = writer.into_inner().map_err(|e| err(&e))?;
        out.sync_all().map_err(|e| err(&e))?;
        Ok(file)
    }

    /// The statement that registers the file in `schema`.`table`, once it
    /// is where the lake reads it (uploaded, for a lake on S3).
    pub fn register_sql(&mut self, schema: &str, table: &str) -> Result<String, String> {
        let url = match &self.remote {
            None => self.local.to_string_lossy().into_owned(),
            Some(remote) if self.uploaded => remote.url(&self.local),
            Some(remote) => {
                let url = remote.upload(&self.local)?;
                self.uploaded = true;
                url
            }
        };
        Ok(format!(
            "CALL ducklake_add_data_files('lake', {}, [{}], schema => {}, allow_missing => true)",
            literal(table),
            literal(&url),
            literal(schema)
        ))
    }

    /// The file is in the lake, or may be: deletes what only waited for an
    /// upload. A local lake's file is the lake's own and stays.
    pub fn release(&mut self) {
        if self.remote.is_some() {
            remove_local(&self.local);
        }
    }

    /// The file is not in the lake: deletes it, and its upload.
    pub fn remove(&mut self) {
        if let (Some(remote), true) = (&self.remote, self.uploaded) {
            if let Err(e) = remote.delete(&remote.url(&self.local)) {
                tracing::warn!(error = %e, "could not delete an unregistered dead-letter file; `millpond-lake delete-orphans` removes it");
            }
        }
        remove_local(&self.local);
    }
}

fn remove_local(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(file = %path.display(), error = %e, "could not delete a dead-letter file's local copy");
        }
    }
}
