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
