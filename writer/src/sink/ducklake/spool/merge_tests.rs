use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::reader::{FileReader, SerializedFileReader};

use super::*;

fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(cols).unwrap()
}

fn ints(v: std::ops::Range<i64>) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(v))
}

fn read(path: &Path) -> RecordBatch {
    let b: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    arrow::compute::concat_batches(&b[0].schema(), &b).unwrap()
}

fn row_groups(path: &Path) -> usize {
    SerializedFileReader::new(File::open(path).unwrap())
        .unwrap()
        .metadata()
        .num_row_groups()
}

/// Row groups of `rows` rows, so a file has several.
fn spool(dir: &Path, table: &[(&str, &str)]) -> Spool {
    let table = table
        .iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect();
    Spool::new(dir.to_owned(), Compression::LZ4_RAW, Some(1), &table)
}

/// A flush whose second batch brings a column: two files, closed.
fn two_files(dir: &Path) -> Spool {
    let mut s = spool(dir, &[]);
    s.write(&batch(vec![("a", ints(0..2))])).unwrap();
    s.write(&batch(vec![("a", ints(2..3)), ("b", ints(0..1))]))
        .unwrap();
    s.close().unwrap();
    assert_eq!(s.files.len(), 2);
    s
}

#[test]
fn a_flush_of_three_files_becomes_one_with_every_row_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spool(dir.path(), &[("a", "BIGINT")]);
    s.write(&batch(vec![("a", ints(0..3))])).unwrap();
    s.write(&batch(vec![("a", ints(3..5))])).unwrap();
    let x: ArrayRef = Arc::new(StringArray::from(vec!["p", "q"]));
    s.write(&batch(vec![("a", ints(5..7)), ("X", x)])).unwrap();
    let y: ArrayRef = Arc::new(StringArray::from(vec![Some("y"), None, Some("z")]));
    s.write(&batch(vec![("y", y), ("a", ints(7..10))])).unwrap();
    s.close().unwrap();
    let before = s.files.clone();
    assert_eq!(before.len(), 3, "one file per new column");
    let groups: usize = before.iter().map(|f| row_groups(f)).sum();
    assert!(groups > before.len(), "a file of several row groups");

    assert_eq!(s.merge_files(false), 3);
    assert_eq!(s.files.len(), 1);
    assert!(
        before.iter().all(|f| !f.exists()),
        "the joined files are gone"
    );
    assert_eq!(
        row_groups(&s.files[0]),
        groups,
        "row groups kept as written"
    );
    let b = read(&s.files[0]);
    let names: Vec<&str> = b
        .schema_ref()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(names, ["a", "X", "y", "_inserted_at"]);
    let a = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
    assert_eq!(a.values(), &(0..10).collect::<Vec<_>>()[..]);
    let x = b.column(1).as_any().downcast_ref::<StringArray>().unwrap();
    let x: Vec<Option<&str>> = x.iter().collect();
    assert_eq!(x[..5], [None; 5]);
    assert_eq!(x[5..7], [Some("p"), Some("q")]);
    assert_eq!(x[7..], [None; 3]);
    let y = b.column(2).as_any().downcast_ref::<StringArray>().unwrap();
    assert_eq!(
        y.iter().collect::<Vec<_>>()[7..],
        [Some("y"), None, Some("z")]
    );
    assert_eq!(b.column(3).null_count(), 0, "every row keeps its stamp");
    assert_eq!(s.rows, 10);
    assert!(
        s.fill_missing_columns(&[], false).unwrap().is_empty(),
        "the joined file has every column of the flush: nothing to write again"
    );
    assert_eq!(s.merge_files(false), 0, "done once");
    assert_eq!(s.publish(false).unwrap().len(), 1);
}

#[test]
fn files_that_disagree_on_a_type_stay_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spool(dir.path(), &[]);
    s.write(&batch(vec![("a", ints(0..2))])).unwrap();
    let a: ArrayRef = Arc::new(StringArray::from(vec!["x"]));
    s.write(&batch(vec![("a", a)])).unwrap();
    s.close().unwrap();
    assert_eq!(s.schemas[1].field(0).data_type(), &DataType::Utf8);
    let before = s.files.clone();
    assert_eq!(s.merge_files(false), 0);
    assert_eq!(s.files, before);
    assert!(before.iter().all(|f| f.exists()));
    s.remove();
}

#[test]
fn files_a_commit_may_have_registered_stay_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = two_files(dir.path());
    let before = s.files.clone();
    assert_eq!(s.merge_files(true), 0);
    assert_eq!(s.files, before);
    s.remove();
}

#[test]
fn a_file_that_cannot_be_read_leaves_the_flush_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = two_files(dir.path());
    std::fs::write(&s.files[1], b"not parquet").unwrap();
    let before = s.files.clone();
    assert_eq!(s.merge_files(false), 0);
    assert_eq!(s.files, before);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 2, "the half-joined file is deleted");
    s.remove();
}
