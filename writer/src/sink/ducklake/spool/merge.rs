//! A flush's files joined into one before they are registered.
//!
//! A column new to the table mid-flush closes the open file and opens a
//! wider one, so a young table's flushes came in several files (the anchor
//! workload: 13 files for 3 flushes). A query engine prefers one. Joining
//! them copies each file's encoded column chunks as they are (no decoding,
//! no encoding: the cost is the bytes copied) into one file with every
//! column of the flush, row group by row group, and encodes only the
//! columns a row group lacked, as all-NULL chunks. The files keep their
//! row groups and statistics, and the joined file holds every column of
//! the flush, so DuckLake's record of the NULLs is right (`fill`).
//!
//! Files whose columns disagree on a type are left as written, as is
//! anything the join cannot copy: joining saves files, it never decides
//! whether a flush lands.
use std::collections::HashSet;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::Arc;

use arrow::array::new_null_array;
use arrow::datatypes::{Field, Schema, SchemaRef};
use parquet::arrow::arrow_writer::{compute_leaves, ArrowRowGroupWriterFactory};
use parquet::arrow::ArrowWriter;
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataReader};
use parquet::file::writer::SerializedFileWriter;

use super::{stamped, Spool};

type Out = SerializedFileWriter<BufWriter<File>>;

impl Spool {
    /// Joins the closed files into one when there are several and their
    /// columns agree on types. Returns how many files were joined (0 when
    /// nothing was done). `keep_old`: a COMMIT may have registered the
    /// files already, so they are left as they are.
    pub fn merge_files(&mut self, keep_old: bool) -> usize {
        if keep_old || self.open.is_some() || self.files.len() < 2 {
            return 0;
        }
        if self.files.len() != self.schemas.len() {
            return 0;
        }
        let Some(all) = union(&self.schemas) else {
            tracing::debug!(
                files = self.files.len(),
                "a flush's files disagree on a column's type: registered as written"
            );
            return 0;
        };
        let (path, file) = match self.new_file() {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "could not join a flush's files; registered as written");
                return 0;
            }
        };
        if let Err(e) = self.join_into(file, &all) {
            tracing::warn!(file = %path.display(), error = %e, "could not join a flush's files; registered as written");
            let _ = std::fs::remove_file(&path);
            return 0;
        }
        let joined = self.files.len();
        let old = std::mem::replace(&mut self.files, vec![path]);
        // Every column a file lacked is NULL in the joined file.
        for own in &self.schemas {
            let lacked = all.fields().iter().filter(|f| !has(own, f.name()));
            self.nulls
                .extend(lacked.map(|f| f.name().to_ascii_lowercase()));
        }
        self.schemas = vec![all];
        for f in old {
            if let Err(e) = std::fs::remove_file(&f) {
                tracing::warn!(file = %f.display(), error = %e, "could not delete a spool file joined into another; `millpond-lake delete-orphans` removes it");
            }
        }
        joined
    }

    /// Writes every closed file's row groups into `file`, with the columns
    /// `all` (then `_inserted_at`).
    fn join_into(&self, file: File, all: &SchemaRef) -> Result<(), String> {
        let with_stamp = stamped(all);
        let writer = ArrowWriter::try_new(
            BufWriter::with_capacity(1 << 20, file),
            with_stamp.clone(),
            Some(self.props.clone()),
        )
        .and_then(ArrowWriter::into_serialized_writer)
        .map_err(|e| e.to_string())?;
        let (mut out, factory) = writer;
        let mut row_group = 0;
        for path in &self.files {
            splice(path, &mut out, &factory, &with_stamp, &mut row_group)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        out.into_inner()
            .map_err(|e| e.to_string())?
            .into_inner()
            .map(drop)
            .map_err(|e| e.into_error().to_string())
    }
}

/// Appends the row groups of the file at `path` to `out`: the chunks of
/// the columns it has copied as encoded, the others written all NULL.
fn splice(
    path: &Path,
    out: &mut Out,
    factory: &ArrowRowGroupWriterFactory,
    with_stamp: &Schema,
    row_group: &mut usize,
) -> Result<(), String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let meta = ParquetMetaDataReader::new()
        .with_page_index_policy(PageIndexPolicy::Optional)
        .parse_and_finish(&file)
        .map_err(|e| e.to_string())?;
    let leaves: Vec<String> = meta
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    for (i, rg) in meta.row_groups().iter().enumerate() {
        let rows = rg.num_rows() as usize;
        let writers = factory
            .create_column_writers(*row_group)
            .map_err(|e| e.to_string())?;
        let mut rg_out = out.next_row_group().map_err(|e| e.to_string())?;
        for (field, mut writer) in with_stamp.fields().iter().zip(writers) {
            let Some(c) = leaves.iter().position(|l| l == field.name()) else {
                let nulls = new_null_array(field.data_type(), rows);
                for leaf in compute_leaves(field, &nulls).map_err(|e| e.to_string())? {
                    writer.write(&leaf).map_err(|e| e.to_string())?;
                }
                writer
                    .close()
                    .and_then(|chunk| chunk.append_to_row_group(&mut rg_out))
                    .map_err(|e| e.to_string())?;
                continue;
            };
            let chunk = rg.column(c);
            let close = ColumnCloseResult {
                bytes_written: chunk.compressed_size() as u64,
                rows_written: rows as u64,
                metadata: chunk.clone(),
                bloom_filter: None,
                column_index: at(meta.column_index(), i, c),
                offset_index: at(meta.offset_index(), i, c),
            };
            rg_out
                .append_column(&file, close)
                .map_err(|e| e.to_string())?;
        }
        rg_out.close().map_err(|e| e.to_string())?;
        *row_group += 1;
    }
    Ok(())
}

/// A page index's entry for row group `rg`, column `c`, when it has one.
fn at<T: Clone>(index: Option<&Vec<Vec<T>>>, rg: usize, c: usize) -> Option<T> {
    index?.get(rg)?.get(c).cloned()
}

/// Every file's columns in the order first written, or `None` when two
/// files have a column (compared case-insensitively) with other types or
/// other spellings.
fn union(schemas: &[SchemaRef]) -> Option<SchemaRef> {
    let mut fields: Vec<Field> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for f in schemas.iter().flat_map(|s| s.fields().iter()) {
        if seen.insert(f.name().to_ascii_lowercase()) {
            fields.push(f.as_ref().clone());
        } else if !fields
            .iter()
            .any(|g| g.name() == f.name() && g.data_type() == f.data_type())
        {
            return None;
        }
    }
    Some(Arc::new(Schema::new(fields)))
}

fn has(schema: &Schema, name: &str) -> bool {
    schema.fields().iter().any(|f| f.name() == name)
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;
