//! The Parquet files of one streamed flush, written by the `parquet` crate
//! as its batches arrive, in the table's data folder, to be registered with
//! `ducklake_add_data_files` in the flush's transaction.
//!
//! Batches come in already named and typed as the table's columns. A file
//! holds every column seen so far in the flush (missing ones are NULL) plus
//! `_inserted_at`; a batch that brings a new column, or a column whose type
//! changed, closes the file and opens a wider one.
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

mod fill;
pub mod remote;

pub use remote::Remote;

/// The column every row carries: when its flush was written.
pub const INSERTED_AT: &str = "_inserted_at";

/// Arrow types whose Parquet form DuckLake maps to the DuckDB type
/// `types::duck_type` names (measured by registering files: a file's BIGINT
/// is not accepted for a DOUBLE column, so the types must match exactly).
pub fn fits_a_file(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Boolean
            | DataType::Int64
            | DataType::Float64
            | DataType::Utf8
            | DataType::LargeUtf8
    ) || matches!(dt, DataType::Timestamp(TimeUnit::Microsecond, Some(tz)) if tz.as_ref() == "UTC")
}

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

    /// What to register: the closed files where they are, or for a lake
    /// on S3 their uploaded copies (each file uploaded once, also across
    /// attempts). Uploads of files since written again (`fill`) are
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
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("creating {}: {e}", self.dir.display()))?;
        let path = self
            .dir
            .join(format!("ducklake-{}.parquet", uuid::Uuid::new_v4()));
        let file = File::create(&path).map_err(|e| format!("creating {}: {e}", path.display()))?;
        let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new(
            INSERTED_AT,
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ));
        let with_stamp = Arc::new(Schema::new(fields));
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

    /// Closes the open file and makes it durable (on disk, not only in the
    /// page cache) before it may be registered.
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
        let sync = |w: BufWriter<File>| -> std::io::Result<()> {
            w.into_inner().map_err(|e| e.into_error())?.sync_all()
        };
        open.writer
            .into_inner()
            .map_err(|e| e.to_string())
            .and_then(|w| sync(w).map_err(|e| e.to_string()))
            // The folder too, so the file's name survives a power loss.
            .and_then(|()| {
                File::open(&self.dir)
                    .and_then(|d| d.sync_all())
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| format!("closing {}: {e}", open.path.display()))
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

/// The table's columns (lowercase name, DuckDB type) a file carries, by
/// name: all but `_inserted_at` (a file's own) and those of a type no file
/// carries.
pub fn file_fields(table: &std::collections::HashMap<String, String>) -> Vec<Field> {
    let mut fields: Vec<Field> = table
        .iter()
        .filter(|(name, _)| name.as_str() != INSERTED_AT)
        .filter_map(|(name, t)| arrow_type(t).map(|dt| Field::new(name, dt, true)))
        .collect();
    fields.sort_by(|a, b| a.name().cmp(b.name()));
    fields
}

/// Why files cannot hold the table's rows: a column of a type no file
/// carries (VARIANT, or a pinned UUID, DECIMAL, DATE). A file lacking it
/// would leave DuckLake's record of its NULLs untouched (`spool::fill`).
pub fn uncarried(table: &std::collections::HashMap<String, String>) -> Option<String> {
    let mut cols: Vec<(&String, &String)> = table
        .iter()
        .filter(|(name, t)| name.as_str() != INSERTED_AT && arrow_type(t).is_none())
        .collect();
    cols.sort();
    cols.first().map(|(c, t)| {
        format!("the table has a {t} column ({c}), which the writer's files cannot carry")
    })
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

/// The codec for DuckLake's `parquet_compression` option (and its
/// `parquet_compression_level`), as DuckDB would write the table's files;
/// unset, LZ4_RAW (measured: the cheapest to write at the size of DuckDB's
/// default snappy). `Err` for a codec this build cannot write.
pub fn codec(option: Option<&str>, level: Option<i32>) -> Result<Compression, String> {
    use parquet::basic::ZstdLevel;
    Ok(match option.map(str::to_ascii_lowercase).as_deref() {
        None | Some("lz4") | Some("lz4_raw") => Compression::LZ4_RAW,
        Some("snappy") => Compression::SNAPPY,
        Some("uncompressed") => Compression::UNCOMPRESSED,
        Some("zstd") => Compression::ZSTD(
            ZstdLevel::try_new(level.unwrap_or(3)).map_err(|e| format!("zstd level: {e}"))?,
        ),
        Some(other) => {
            return Err(format!(
                "parquet_compression {other} is not one the writer's files support"
            ))
        }
    })
}

/// The Arrow type a file carries for a live DuckDB type, for the types
/// [`fits_a_file`] accepts.
pub fn arrow_type(live: &str) -> Option<DataType> {
    Some(match live {
        "BOOLEAN" => DataType::Boolean,
        "BIGINT" => DataType::Int64,
        "DOUBLE" => DataType::Float64,
        "VARCHAR" => DataType::Utf8,
        "TIMESTAMP WITH TIME ZONE" => {
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use std::path::Path;

    fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(cols).unwrap()
    }

    fn read(path: &Path) -> Vec<RecordBatch> {
        ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
            .unwrap()
            .build()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn one_file_while_the_columns_hold_a_new_one_when_they_grow() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::new(
            dir.path().join("main/events"),
            Compression::LZ4_RAW,
            None,
            &Default::default(),
        );
        let a = Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef;
        let s = Arc::new(StringArray::from(vec!["x"])) as ArrayRef;
        spool.write(&batch(vec![("a", a.clone())])).unwrap();
        spool.write(&batch(vec![("A", a.clone())])).unwrap();
        assert!(spool.files.is_empty(), "same columns (any case): same file");
        spool.write(&batch(vec![("s", s)])).unwrap();
        spool.close().unwrap();
        assert_eq!(spool.files.len(), 2);
        assert_eq!(spool.rows, 5);
        let first = read(&spool.files[0]);
        assert_eq!(first[0].schema().field(0).name(), "a");
        assert_eq!(first[0].schema().field(1).name(), INSERTED_AT);
        let second = read(&spool.files[1]);
        let b = &second[0];
        assert_eq!(b.num_columns(), 3, "a, s and _inserted_at");
        assert!(
            b.column(0).is_null(0),
            "a is NULL where the batch lacked it"
        );
        assert_eq!(
            b.column(1)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .value(0),
            "x"
        );
        let files = spool.files.clone();
        spool.remove();
        assert!(files.iter().all(|f| !f.exists()));
    }

    #[test]
    fn files_carry_the_table_columns_and_its_codec() {
        let dir = tempfile::tempdir().unwrap();
        let table = std::collections::HashMap::from([
            ("b".to_owned(), "BIGINT".to_owned()),
            ("u".to_owned(), "UUID".to_owned()),
            (
                INSERTED_AT.to_owned(),
                "TIMESTAMP WITH TIME ZONE".to_owned(),
            ),
        ]);
        let mut spool = Spool::new(dir.path().to_owned(), Compression::SNAPPY, None, &table);
        let s = Arc::new(StringArray::from(vec!["x"])) as ArrayRef;
        spool.write(&batch(vec![("s", s)])).unwrap();
        spool.close().unwrap();
        let b = &read(&spool.files[0])[0];
        let names: Vec<&str> = b
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(
            names,
            ["b", "s", INSERTED_AT],
            "the table's BIGINT column, not its UUID one"
        );
        assert!(b.column(0).is_null(0));
        assert_eq!(codec(None, None).unwrap(), Compression::LZ4_RAW);
        assert_eq!(codec(Some("SNAPPY"), None).unwrap(), Compression::SNAPPY);
        assert!(
            matches!(codec(Some("zstd"), Some(7)).unwrap(), Compression::ZSTD(l) if l.compression_level() == 7)
        );
        assert!(codec(Some("brotli"), None).unwrap_err().contains("brotli"));
    }

    #[test]
    fn a_column_no_file_carries_is_named() {
        let mut table = std::collections::HashMap::from([
            ("b".to_owned(), "BIGINT".to_owned()),
            (
                INSERTED_AT.to_owned(),
                "TIMESTAMP WITH TIME ZONE".to_owned(),
            ),
        ]);
        assert_eq!(uncarried(&table), None);
        assert_eq!(file_fields(&table).len(), 1, "not _inserted_at");
        table.insert("u".to_owned(), "UUID".to_owned());
        assert!(uncarried(&table).unwrap().contains("UUID column (u)"));
    }

    #[test]
    fn only_types_a_file_maps_exactly() {
        assert!(fits_a_file(&DataType::Int64));
        assert!(fits_a_file(&DataType::Timestamp(
            TimeUnit::Microsecond,
            Some("UTC".into())
        )));
        assert!(!fits_a_file(&DataType::FixedSizeBinary(16)));
        assert!(!fits_a_file(&DataType::Null));
        assert!(!fits_a_file(&DataType::Timestamp(
            TimeUnit::Millisecond,
            None
        )));
    }
}
