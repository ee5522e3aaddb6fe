//! The Parquet files of one streamed flush, written by the `parquet` crate
//! as its batches arrive, in the table's data folder, to be registered with
//! `ducklake_add_data_files` in the flush's transaction.
//!
//! Batches come in already named and typed as the table's columns. A file
//! holds every column seen so far in the flush (missing ones are NULL) plus
//! `_inserted_at`; a batch that brings a new column, or a column whose type
//! changed, closes the file and opens a wider one. At the trailer the files
//! are joined into one (`merge`), then made durable (`publish`).
use std::collections::HashSet;
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, RecordBatch, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

mod carried;
mod fill;
mod merge;
pub mod private_dir;
pub mod remote;

pub use carried::{arrow_type, codec, file_fields, fits_a_file, uncarried, INSERTED_AT};
pub use remote::Remote;

struct Open {
    writer: ArrowWriter<BufWriter<File>>,
    path: PathBuf,
    /// Payload columns, without `_inserted_at`.
    schema: SchemaRef,
    with_stamp: SchemaRef,
}

pub struct Spool {
    dir: PathBuf,
    /// The table's columns a file carries: every file has them, so new
    /// keys in a batch do not start a new file unless the table grows.
    seed: Vec<Field>,
    props: WriterProperties,
    /// Microseconds since the epoch, UTC.
    inserted_at: i64,
    open: Option<Open>,
    /// Closed files, in the order written.
    pub files: Vec<PathBuf>,
    /// The payload columns of each closed file, as `files`.
    schemas: Vec<SchemaRef>,
    /// Columns (lowercase) written with a NULL somewhere.
    nulls: HashSet<String>,
    pub rows: u64,
    /// Set for a lake on S3: the files are uploaded before they are
    /// registered, and `dir` is only where they wait.
    remote: Option<Arc<Remote>>,
    /// URLs of every upload begun (some may have landed without an
    /// answer), and of those that finished.
    uploads: Vec<String>,
    uploaded: HashSet<String>,
}

impl Spool {
    /// Files go to `dir` (created when missing); row groups close at about
    /// `row_group_bytes` of encoded data.
    /// `table` is the table's live columns (lowercase name, DuckDB type);
    /// those of a type a file carries are in every file.
    ///
    /// No dictionaries: measured on the anchor workload, they cost the
    /// writer ~0.6 µs per row and saved 1.3 % of the file.
    pub fn new(
        dir: PathBuf,
        codec: Compression,
        row_group_bytes: Option<usize>,
        table: &std::collections::HashMap<String, String>,
    ) -> Spool {
        let props = WriterProperties::builder()
            .set_compression(codec)
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_dictionary_enabled(false)
            .set_max_row_group_bytes(row_group_bytes)
            .build();
        let seed = file_fields(table);
        let inserted_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        Spool {
            dir,
            seed,
            props,
            inserted_at,
            open: None,
            files: Vec::new(),
            schemas: Vec::new(),
            nulls: HashSet::new(),
            rows: 0,
            remote: None,
            uploads: Vec::new(),
            uploaded: HashSet::new(),
        }
    }

    /// Files for a lake on S3: they wait in `remote.staging`.
    pub fn with_remote(mut self, remote: Arc<Remote>) -> Spool {
        self.dir = remote.staging.clone();
        self.remote = Some(remote);
        self
    }

    /// What to register, once `sync` made them durable: the closed files
    /// where they are, or for a lake on S3 their uploaded copies (each
    /// file uploaded once, also across attempts). Uploads of files since written again (`fill`) are
    /// deleted unless `maybe_in_lake` (a COMMIT may have registered them).
    pub fn publish(&mut self, maybe_in_lake: bool) -> Result<Vec<String>, String> {
        let Some(remote) = self.remote.clone() else {
            return Ok(self
                .files
                .iter()
                .map(|f| f.to_string_lossy().into_owned())
                .collect());
        };
        let urls: Vec<String> = self.files.iter().map(|f| remote.url(f)).collect();
        if !maybe_in_lake {
            let (stale, current): (Vec<String>, Vec<String>) =
                self.uploads.drain(..).partition(|u| !urls.contains(u));
            self.uploads = current;
            for url in stale {
                self.uploaded.remove(&url);
                if let Err(e) = remote.delete(&url) {
                    tracing::warn!(error = %e, "could not delete the upload of a file written again; `millpond-lake delete-orphans` removes it");
                }
            }
        }
        for (f, url) in self.files.iter().zip(&urls) {
            if !self.uploaded.contains(url) {
                if !self.uploads.contains(url) {
                    self.uploads.push(url.clone());
                }
                remote.upload(f)?;
                self.uploaded.insert(url.clone());
            }
        }
        Ok(urls)
    }

    /// The files are in the lake, or may be: deletes what only waited for
    /// an upload (for a lake on S3, the local files). A local lake's files
    /// are the lake's own and stay.
    pub fn release(&mut self) {
        if self.remote.is_none() {
            return;
        }
        if let Some(open) = self.open.take() {
            self.files.push(open.path);
        }
        for f in self.files.drain(..) {
            if let Err(e) = std::fs::remove_file(&f) {
                tracing::warn!(file = %f.display(), error = %e, "could not delete an uploaded file's local copy");
            }
        }
        self.schemas.clear();
    }

    /// Appends `batch`. Its column types must satisfy [`fits_a_file`].
    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), String> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let wanted = match &self.open {
            Some(o) => widen(&o.schema, batch.schema_ref()),
            None => widen(
                &Arc::new(Schema::new(self.seed.clone())),
                batch.schema_ref(),
            ),
        };
        if self.open.as_ref().is_none_or(|o| o.schema != wanted) {
            self.close()?;
            self.open = Some(self.create(wanted)?);
        }
        let open = self.open.as_mut().expect("opened above");
        let n = batch.num_rows();
        let mut columns: Vec<ArrayRef> = open
            .schema
            .fields()
            .iter()
            .map(|f| {
                batch
                    .schema_ref()
                    .fields()
                    .iter()
                    .position(|b| b.name().eq_ignore_ascii_case(f.name()))
                    .map_or_else(
                        || new_null_array(f.data_type(), n),
                        |i| batch.column(i).clone(),
                    )
            })
            .collect();
        for (f, c) in open.schema.fields().iter().zip(&columns) {
            if c.null_count() > 0 {
                self.nulls.insert(f.name().to_ascii_lowercase());
            }
        }
        columns.push(Arc::new(
            TimestampMicrosecondArray::from_value(self.inserted_at, n).with_timezone("UTC"),
        ));
        let out = RecordBatch::try_new(open.with_stamp.clone(), columns)
            .map_err(|e| format!("aligning a batch to {}: {e}", open.path.display()))?;
        open.writer
            .write(&out)
            .map_err(|e| format!("writing {}: {e}", open.path.display()))?;
        self.rows += n as u64;
        Ok(())
    }

    fn create(&self, schema: SchemaRef) -> Result<Open, String> {
        let (path, file) = self.new_file()?;
        let with_stamp = stamped(&schema);
        let writer = ArrowWriter::try_new(
            BufWriter::with_capacity(1 << 20, file),
            with_stamp.clone(),
            Some(self.props.clone()),
        )
        .map_err(|e| format!("opening {}: {e}", path.display()))?;
        Ok(Open {
            writer,
            path,
            schema,
            with_stamp,
        })
    }

    /// A new, empty file of the flush in `dir`, by a name of its own. A
    /// file waiting for its upload is the writer's alone (0600); a local
    /// lake's file is the lake's, as DuckDB's own are.
    fn new_file(&self) -> Result<(PathBuf, File), String> {
        let path = self
            .dir
            .join(format!("ducklake-{}.parquet", uuid::Uuid::new_v4()));
        let created = if self.remote.is_some() {
            private_dir::new_file(&path)
        } else {
            std::fs::create_dir_all(&self.dir)
                .map_err(|e| format!("creating {}: {e}", self.dir.display()))?;
            File::options().write(true).create_new(true).open(&path)
        };
        let file = created.map_err(|e| format!("creating {}: {e}", path.display()))?;
        Ok((path, file))
    }

    /// Closes the open file; `publish` makes it durable before it may be
    /// registered.
    pub fn close(&mut self) -> Result<(), String> {
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        // Listed first, so a failed close still leaves it for `remove`.
        self.files.push(open.path.clone());
        self.schemas.push(open.schema.clone());
        self.finish(open)
    }

    fn finish(&self, open: Open) -> Result<(), String> {
        let path = open.path;
        open.writer
            .into_inner()
            .map_err(|e| e.to_string())
            .and_then(|w| {
                w.into_inner()
                    .map(drop)
                    .map_err(|e| e.into_error().to_string())
            })
            .map_err(|e| format!("closing {}: {e}", path.display()))
    }

    /// Makes the closed files durable: on disk, not only in the page
    /// cache, and their folder too, so their names survive a power loss.
    /// Once per flush, for the files it registers (a file joined or
    /// written again is never synced). Nothing for a lake on S3: the
    /// upload is what lasts. A failure must drop the files, never be
    /// retried on them: Linux reports a failed writeback to one fsync
    /// only, and the next one may succeed without the bytes on disk.
    pub fn sync(&self) -> Result<(), String> {
        if self.remote.is_some() {
            return Ok(());
        }
        for f in &self.files {
            File::open(f)
                .and_then(|f| f.sync_all())
                .map_err(|e| format!("syncing {}: {e}", f.display()))?;
        }
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| format!("syncing {}: {e}", self.dir.display()))
    }

    /// Deletes every file written, and uploaded; only for files never
    /// registered.
    pub fn remove(&mut self) {
        if let Some(remote) = &self.remote {
            self.uploaded.clear();
            for url in self.uploads.drain(..) {
                if let Err(e) = remote.delete(&url) {
                    tracing::warn!(error = %e, "could not delete an unregistered uploaded file; `millpond-lake delete-orphans` removes it");
                }
            }
        }
        if let Some(open) = self.open.take() {
            self.files.push(open.path);
        }
        self.schemas.clear();
        self.nulls.clear();
        let cleanup = if self.remote.is_some() {
            "the next writer to start removes it"
        } else {
            "`millpond-lake delete-orphans` removes it"
        };
        for f in self.files.drain(..) {
            if let Err(e) = std::fs::remove_file(&f) {
                tracing::warn!(file = %f.display(), error = %e, cleanup, "could not delete an unregistered spool file");
            }
        }
    }
}

/// A file's columns: the payload's, then `_inserted_at`.
fn stamped(schema: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(
        INSERTED_AT,
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        false,
    ));
    Arc::new(Schema::new(fields))
}

/// The open file's columns widened by the batch's: a new name (compared
/// case-insensitively, as DuckDB does) is appended; a changed type replaces
/// the old one.
fn widen(current: &SchemaRef, batch: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<Field> = current
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    for b in batch.fields() {
        match fields
            .iter_mut()
            .find(|f| f.name().eq_ignore_ascii_case(b.name()))
        {
            Some(f) if f.data_type() == b.data_type() => {}
            Some(f) => *f = Field::new(f.name(), b.data_type().clone(), true),
            None => fields.push(Field::new(b.name(), b.data_type().clone(), true)),
        }
    }
    if current.fields().len() == fields.len()
        && current
            .fields()
            .iter()
            .zip(&fields)
            .all(|(a, b)| a.as_ref() == b)
    {
        current.clone()
    } else {
        Arc::new(Schema::new(fields))
    }
}

#[cfg(test)]
#[path = "spool_tests.rs"]
mod tests;
