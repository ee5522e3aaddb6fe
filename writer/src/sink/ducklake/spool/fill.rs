//! Every file of a flush written again with the flush's columns it lacks,
//! when DuckLake would otherwise record one of them as never NULL.
//!
//! DuckLake keeps, per table column, whether it contains NULL. Probed on
//! 1.5.5: when one transaction registers files of which some lack a column
//! (it appeared mid-flush; `allow_missing` reads it as NULL there) and the
//! others hold it without a NULL, the table records the column as never
//! NULL, and DuckDB answers from that: `count(col)` counted those NULLs and
//! `col IS NULL` found none (20 and 0 for 10 NULLs in 20 rows). A file that
//! holds the column, NULL or not, keeps the record true. So before such a
//! flush is registered, each of its files lacking a column is written again
//! with every column the flush has, the missing ones all NULL. Flushes whose
//! new columns have a NULL in some file (sparse keys, the usual case) are
//! registered as written.
//!
//! The same holds for a column of the table that a file lacks: another
//! writer added it since this writer read the table. Its files are then
//! written again with it, and the write transaction fails if the table
//! gained a column after that (`classify::COLUMNS_CHANGED`), to be retried.
use std::collections::HashSet;
use std::fs::File;
use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, RecordBatch};
use arrow::datatypes::{Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::Spool;

/// Rows read back per batch while a file is written again.
const READ_BATCH: usize = 8192;

impl Spool {
    /// Writes again, with every column of the flush and of `table` (the
    /// table's columns as the lake has them now) they lack, all NULL, the
    /// closed files that lack a column no file holds a NULL in. Returns
    /// those columns (empty when nothing was written again).
    /// `keep_old`: the flush may be in the lake already (a COMMIT whose
    /// outcome is unknown), so the files written again are left in place,
    /// for orphan cleanup, instead of deleted.
    pub fn fill_missing_columns(
        &mut self,
        table: &[Field],
        keep_old: bool,
    ) -> Result<Vec<String>, String> {
        // Every column, by lowercase name: the files' as first written,
        // then the table's that no file has.
        let mut all: Vec<Field> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let fields = self
            .schemas
            .iter()
            .flat_map(|s| s.fields().iter().map(|f| f.as_ref()));
        for f in fields.chain(table) {
            if seen.insert(f.name().to_ascii_lowercase()) {
                all.push(f.clone());
            }
        }
        let lacks = |schema: &Schema, f: &Field| {
            !schema
                .fields()
                .iter()
                .any(|g| g.name().eq_ignore_ascii_case(f.name()))
        };
        let never_null: Vec<Field> = all
            .iter()
            .filter(|f| self.schemas.iter().any(|s| lacks(s, f)))
            .filter(|f| !self.nulls.contains(&f.name().to_ascii_lowercase()))
            .cloned()
            .collect();
        for i in 0..self.files.len().min(self.schemas.len()) {
            let own = self.schemas[i].clone();
            if !never_null.iter().any(|f| lacks(&own, f)) {
                continue;
            }
            let add: Vec<Field> = all.iter().filter(|f| lacks(&own, f)).cloned().collect();
            let old = self.files[i].clone();
            let mut fields: Vec<Field> = own.fields().iter().map(|f| f.as_ref().clone()).collect();
            fields.extend(add.iter().cloned());
            let wider = Arc::new(Schema::new(fields));
            let mut open = self.create(wider.clone())?;
            let copied = copy_rows(&old, own.fields().len(), &add, &mut open);
            let new = open.path.clone();
            let finished = copied.and_then(|()| self.finish(open));
            if let Err(e) = finished {
                let _ = std::fs::remove_file(&new);
                return Err(e);
            }
            self.files[i] = new;
            self.schemas[i] = wider;
            self.nulls
                .extend(add.iter().map(|f| f.name().to_ascii_lowercase()));
            // Uploaded copies are what a lake on S3 may hold; they stay.
            if keep_old && self.remote.is_none() {
                tracing::warn!(file = %old.display(), "a spool file written again may be in the lake already; kept for `millpond-lake delete-orphans`");
            } else if let Err(e) = std::fs::remove_file(&old) {
                tracing::warn!(file = %old.display(), error = %e, "could not delete a spool file written again; `millpond-lake delete-orphans` removes it");
            }
        }
        Ok(never_null.into_iter().map(|f| f.name().clone()).collect())
    }
}

/// Copies the rows of the file at `path` (`payload` columns, then
/// `_inserted_at`) into `open`, with the `add` columns all NULL.
fn copy_rows(
    path: &std::path::Path,
    payload: usize,
    add: &[Field],
    open: &mut super::Open,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("reading {} again: {e}", path.display());
    let file = File::open(path).map_err(|e| err(&e))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| err(&e))?
        .with_batch_size(READ_BATCH)
        .build()
        .map_err(|e| err(&e))?;
    for batch in reader {
        let batch = batch.map_err(|e| err(&e))?;
        let n = batch.num_rows();
        let (Some(own), Some(stamp)) =
            (batch.columns().get(..payload), batch.columns().get(payload))
        else {
            return Err(err(&"fewer columns than written"));
        };
        let mut columns: Vec<ArrayRef> = own.to_vec();
        let stamp = stamp.clone();
        columns.extend(add.iter().map(|f| new_null_array(f.data_type(), n)));
        columns.push(stamp);
        let out = RecordBatch::try_new(open.with_stamp.clone(), columns)
            .map_err(|e| format!("writing {} again: {e}", path.display()))?;
        open.writer
            .write(&out)
            .map_err(|e| format!("writing {}: {e}", open.path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, Int64Array, StringArray};
    use parquet::basic::Compression;

    use super::*;

    fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(cols).unwrap()
    }

    fn read(path: &std::path::Path) -> RecordBatch {
        let b: Vec<RecordBatch> =
            ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
                .unwrap()
                .build()
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
        arrow::compute::concat_batches(&b[0].schema(), &b).unwrap()
    }

    fn spool(dir: &std::path::Path) -> Spool {
        Spool::new(
            dir.to_owned(),
            Compression::LZ4_RAW,
            None,
            &Default::default(),
        )
    }

    #[test]
    fn a_column_new_mid_flush_without_a_null_reaches_every_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = spool(dir.path());
        let a = Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef;
        let x = Arc::new(StringArray::from(vec!["p", "q"])) as ArrayRef;
        s.write(&batch(vec![("a", a.clone())])).unwrap();
        s.write(&batch(vec![("a", a.clone()), ("X", x)])).unwrap();
        s.close().unwrap();
        let before = s.files.clone();
        assert_eq!(s.fill_missing_columns(&[], false).unwrap(), ["X"]);
        assert_eq!(s.files.len(), 2);
        assert!(!before[0].exists(), "the narrow file is replaced");
        assert_eq!(s.files[1], before[1], "the wide one stays");
        let first = read(&s.files[0]);
        let names: Vec<&str> = first
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["a", "X", "_inserted_at"]);
        assert_eq!(first.num_rows(), 2);
        assert_eq!(
            first.column(1).null_count(),
            2,
            "X is NULL where it was missing"
        );
        let a_back = first
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(a_back.values(), &[1, 2]);
        assert!(
            s.fill_missing_columns(&[], false).unwrap().is_empty(),
            "done once"
        );
        s.remove();
    }

    #[test]
    fn a_table_column_no_file_has_reaches_every_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = spool(dir.path());
        let a = Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef;
        s.write(&batch(vec![("a", a.clone())])).unwrap();
        s.close().unwrap();
        let table = [
            Field::new("a", arrow::datatypes::DataType::Int64, true),
            Field::new("d", arrow::datatypes::DataType::Utf8, true),
        ];
        assert_eq!(s.fill_missing_columns(&table, false).unwrap(), ["d"]);
        let b = read(&s.files[0]);
        assert_eq!(b.schema().field(1).name(), "d");
        assert_eq!(b.column(1).null_count(), 2);
        s.remove();
    }

    #[test]
    fn files_are_kept_when_a_new_column_holds_a_null() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = spool(dir.path());
        let a = Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef;
        let x = Arc::new(StringArray::from(vec![Some("p"), None])) as ArrayRef;
        s.write(&batch(vec![("a", a.clone())])).unwrap();
        s.write(&batch(vec![("a", a), ("x", x)])).unwrap();
        s.close().unwrap();
        let before = s.files.clone();
        assert!(s.fill_missing_columns(&[], false).unwrap().is_empty());
        assert_eq!(s.files, before);
        s.remove();
    }
}
