//! Our registrations against pyhoglake 1.3.11's, from the captured vectors in
//! `tests/hoglake-vectors/` (see its README): same rows and table
//! definitions in, same record counts, statistics, bound encodings and
//! partition values out, up to object names and uuids.
//!
//! `size_bytes` (compressed chunk sizes) and the file/footer sizes depend on
//! the parquet writer's byte layout, which arrow-rs and pyarrow do not share;
//! for files we write they are checked for consistency with the file itself,
//! and for pyhoglake's own file (local.parquet) they must match exactly.

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Decimal128Array, Float64Array, Int64Array, ListBuilder, RecordBatch, StringArray,
    StringBuilder, TimestampMicrosecondArray,
};
use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use millpond_hoglake::arrow_schema::{arrow_schema, conform};
use millpond_hoglake::murmur3;
use millpond_hoglake::parquet_file::{read_back, write_parquet, ParquetFile};
use millpond_hoglake::partition::Partitioner;
use millpond_hoglake::payload::{CommitRequest, TableAppend};
use millpond_hoglake::registration::{object_uri, FileRegistration};
use millpond_hoglake::schema::Table;
use millpond_hoglake::stats::ColumnStats;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::metadata::ParquetMetaDataReader;
use serde_json::Value;

fn vectors() -> PathBuf {
    PathBuf::from(
        std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned()),
    )
    .join("../tests/hoglake-vectors")
}

fn read_json(name: &str) -> Value {
    serde_json::from_str(&fs::read_to_string(vectors().join(name)).unwrap()).unwrap()
}

fn payload(name: &str) -> CommitRequest {
    serde_json::from_value(read_json(name)).unwrap()
}

/// Every captured request/response pair, in order.
fn captured() -> Vec<Value> {
    fs::read_to_string(vectors().join("pyhoglake-requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The last Table the server returned for `table` (after every alter).
fn table(name: &str) -> Table {
    let lines = captured();
    let found = lines
        .iter()
        .filter_map(|l| l.get("response"))
        .rfind(|r| r.get("name") == Some(&Value::from(name)) && r.get("columns").is_some())
        .unwrap_or_else(|| panic!("no Table response for {name}"));
    serde_json::from_value(found.clone()).unwrap()
}

/// The body of the plain `/commit` that appended to `table` with statistics.
fn commit_body(table: &str) -> CommitRequest {
    let lines = captured();
    let body = lines
        .iter()
        .filter(|l| l.get("path") == Some(&Value::from("/v1/catalogs/demo/commit")))
        .map(|l| &l["body"])
        .find(|b| b["appends"][0]["table"] == table && b.get("author").is_some())
        .unwrap_or_else(|| panic!("no /commit body for {table}"));
    serde_json::from_value(body.clone()).unwrap()
}

fn local_parquet() -> Bytes {
    Bytes::from(fs::read(vectors().join("local.parquet")).unwrap())
}

/// The rows pyhoglake registered, read back from its own file.
fn local_rows() -> Vec<RecordBatch> {
    ParquetRecordBatchReaderBuilder::try_new(local_parquet())
        .unwrap()
        .build()
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

fn without_sizes(stats: &[ColumnStats]) -> Vec<ColumnStats> {
    stats
        .iter()
        .cloned()
        .map(|s| ColumnStats {
            size_bytes: None,
            ..s
        })
        .collect()
}

/// What must hold for any file we write: sizes describe the bytes, the
/// footer length is the trailer's and locates a parseable footer, and
/// `size_bytes` is what that footer says.
fn assert_self_consistent(file: &ParquetFile, registration: &FileRegistration) {
    let len = file.bytes.len();
    assert_eq!(registration.file_size_bytes, len as u64);
    let footer = registration.footer_size.unwrap() as usize;
    let trailer = u32::from_le_bytes(file.bytes[len - 8..len - 4].try_into().unwrap()) as usize;
    assert_eq!(footer, trailer);
    assert!(footer <= len - 8);
    assert_eq!(&file.bytes[len - 4..], b"PAR1");
    let metadata = ParquetMetaDataReader::decode_metadata(&file.bytes[len - 8 - footer..len - 8])
        .expect("footer_size locates the footer");
    assert_eq!(
        registration.record_count,
        metadata.file_metadata().num_rows() as u64
    );
    for stats in registration.column_stats.as_ref().unwrap() {
        let leaf = metadata
            .file_metadata()
            .schema_descr()
            .columns()
            .iter()
            .position(|c| c.self_type().get_basic_info().id() == stats.field_id as i32)
            .expect("stats field id is a footer leaf");
        let size: i64 = metadata
            .row_groups()
            .iter()
            .map(|rg| rg.column(leaf).compressed_size())
            .sum();
        assert_eq!(stats.size_bytes, Some(size), "field {}", stats.field_id);
    }
}

fn write(schema: &SchemaRef, batches: &[RecordBatch]) -> ParquetFile {
    write_parquet(schema, batches).unwrap()
}

/// The files path: pyhoglake registered local.parquet itself. Deriving the
/// registration from its footer must give pyhoglake's payload exactly —
/// sizes, footer length, every statistic and bound — and the whole request
/// must serialise byte for byte as captured (key order included).
#[test]
fn files_path_payload_is_reproduced_exactly() {
    let expected = payload("prepared_payload_files.json");
    let events = table("events");
    let file = read_back(local_parquet()).unwrap();
    let captured_file = &expected.appends[0].files[0];
    let registration =
        FileRegistration::new(captured_file.path.clone(), &file, &events.columns, None);
    assert_eq!(&registration, captured_file);
    assert_eq!(registration.column_stats.as_ref().unwrap().len(), 7);

    let request = CommitRequest {
        idempotency_key: expected.idempotency_key.clone(),
        read_snapshot: Some(4),
        appends: vec![TableAppend {
            namespace: "analytics".into(),
            table: "events".into(),
            expected_table_uuid: Some(events.table_uuid.clone()),
            files: vec![registration],
        }],
        deletes: Vec::new(),
        author: None,
        message: None,
    };
    let raw = fs::read_to_string(vectors().join("prepared_payload_files.json")).unwrap();
    let compact: String = raw.chars().filter(|c| !c.is_whitespace()).collect();
    assert_eq!(serde_json::to_string(&request).unwrap(), compact);
}

/// The tables path: the same rows written by us. Everything but the byte
/// layout (sizes) must equal pyhoglake's registration.
#[test]
fn tables_path_registration_matches_pyhoglake() {
    let expected = payload("prepared_payload_tables.json");
    let captured_file = &expected.appends[0].files[0];
    let events = table("events");
    let schema = Arc::new(arrow_schema(&events.columns).unwrap());
    let file = write(&schema, &local_rows());
    let registration =
        FileRegistration::new(captured_file.path.clone(), &file, &events.columns, None);

    assert_self_consistent(&file, &registration);
    assert_eq!(registration.record_count, captured_file.record_count);
    assert_eq!(registration.partition_values, None);
    let ours = registration.column_stats.as_ref().unwrap();
    let theirs = captured_file.column_stats.as_ref().unwrap();
    assert_eq!(without_sizes(ours), without_sizes(theirs));
    let bounds = ours.iter().filter(|s| s.lower_bound.is_some()).count();
    assert_eq!(bounds, 7, "every leaf of this file has bounds");
}

/// Our file has the shape report.json inspected in pyhoglake's objects:
/// leaf paths, field ids on every node, Snappy, one row group, the Arrow
/// schema stored, decimals as fixed-length byte arrays.
#[test]
fn written_file_layout_matches_the_inspected_objects() {
    let report = read_json("report.json");
    let inspected = report["parquet_inspect"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["key"].as_str().unwrap().contains("/events/"))
        .unwrap();
    let events = table("events");
    let schema = Arc::new(arrow_schema(&events.columns).unwrap());
    let file = write(&schema, &local_rows());
    let meta = &file.metadata;

    assert_eq!(
        meta.num_row_groups() as u64,
        inspected["num_row_groups"].as_u64().unwrap()
    );
    assert_eq!(
        meta.file_metadata().num_rows() as u64,
        inspected["num_rows"].as_u64().unwrap()
    );
    let descr = meta.file_metadata().schema_descr();
    let leaf_paths: Vec<String> = descr.columns().iter().map(|c| c.path().string()).collect();
    let expected_paths: Vec<&str> = inspected["leaf_paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(leaf_paths, expected_paths);
    for rg in meta.row_groups() {
        for chunk in rg.columns() {
            assert_eq!(chunk.compression(), Compression::SNAPPY);
            assert!(chunk.statistics().is_some());
        }
    }
    let top_ids: Vec<(String, String)> = descr
        .root_schema()
        .get_fields()
        .iter()
        .map(|f| (f.name().to_string(), f.get_basic_info().id().to_string()))
        .collect();
    let expected_ids: Vec<(String, String)> = inspected["arrow_schema_field_ids"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    let mut sorted = top_ids.clone();
    sorted.sort();
    let mut expected_sorted = expected_ids;
    expected_sorted.sort();
    assert_eq!(sorted, expected_sorted);
    // The list element carries its id; the synthetic `list` group none.
    let tags = descr.column(5);
    assert_eq!(tags.self_type().get_basic_info().id(), 7);
    let list_group = &descr.root_schema().get_fields()[5].get_fields()[0];
    assert_eq!(list_group.name(), "list");
    assert!(!list_group.get_basic_info().has_id());
    // decimal(10,2) as FIXED_LEN_BYTE_ARRAY(5), as pyarrow writes it.
    assert!(inspected["parquet_schema"]
        .as_str()
        .unwrap()
        .contains("fixed_len_byte_array(5) field_id=4 amount"));
    let amount = descr.column(3);
    assert_eq!(
        amount.physical_type(),
        parquet::basic::Type::FIXED_LEN_BYTE_ARRAY
    );
    assert_eq!(amount.type_length(), 5);
    let kv = meta.file_metadata().key_value_metadata().unwrap();
    assert!(kv.iter().any(|kv| kv.key == "ARROW:schema"));
    // And the rows survive the round trip.
    let back: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(file.bytes.clone())
        .unwrap()
        .build()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let original = conform(&local_rows()[0], &schema).unwrap();
    assert_eq!(conform(&back[0], &schema).unwrap(), original);
}

/// The partitioned `/commit`: the same three rows under
/// `[month(ts), bucket(id, 4)]` give pyhoglake's three files, tuples
/// (`["672","0"]`, `["673","0"]`, `[null,"3"]`) and statistics (including
/// the signed-zero bounds of a single 0.0 / -0.0 and the all-null leaves
/// without bounds).
#[test]
fn partitioned_append_matches_pyhoglake() {
    let expected = commit_body("parts");
    let parts = table("parts");
    let spec = parts.partition_spec.clone().unwrap();
    let schema = Arc::new(arrow_schema(&parts.columns).unwrap());
    let rows: Vec<RecordBatch> = local_rows()
        .iter()
        .map(|b| conform(b, &schema).unwrap())
        .collect();
    let groups = Partitioner::new(&spec, &parts.columns)
        .unwrap()
        .split(&rows)
        .unwrap();

    let captured_files = &expected.appends[0].files;
    assert_eq!(groups.len(), captured_files.len());
    for (group, captured_file) in groups.iter().zip(captured_files) {
        let file = write(&schema, std::slice::from_ref(&group.batch));
        let registration = FileRegistration::new(
            captured_file.path.clone(),
            &file,
            &parts.columns,
            Some(group.values.clone()),
        );
        assert_self_consistent(&file, &registration);
        assert_eq!(
            registration.partition_values,
            captured_file.partition_values
        );
        assert_eq!(registration.record_count, captured_file.record_count);
        assert_eq!(
            without_sizes(registration.column_stats.as_ref().unwrap()),
            without_sizes(captured_file.column_stats.as_ref().unwrap()),
            "file {:?}",
            group.values
        );
    }
    let tuples: Vec<_> = groups.iter().map(|g| g.values.clone()).collect();
    let s = |v: &str| Some(v.to_string());
    assert_eq!(
        tuples,
        [
            vec![s("672"), s("0")],
            vec![s("673"), s("0")],
            vec![None, s("3")]
        ]
    );
}

/// The prepared partitioned append (one row, id 7 in March 2026): the full
/// request, path included, rebuilt from the row and the captured key and
/// file uuid, equals pyhoglake's except for the byte-layout sizes and the
/// caller-chosen bucket value (see below).
#[test]
fn prepared_partitioned_payload_matches_pyhoglake() {
    let expected = payload("prepared_payload_partitioned.json");
    let parts = table("parts");
    let schema = Arc::new(arrow_schema(&parts.columns).unwrap());
    let mut tags = ListBuilder::new(StringBuilder::new());
    tags.values().append_value("q");
    tags.append(true);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![7])),
        Arc::new(StringArray::from(vec!["z"])),
        // 2026-03-01T00:00:00
        Arc::new(TimestampMicrosecondArray::from(vec![1_772_323_200_000_000])),
        Arc::new(
            Decimal128Array::from(vec![None::<i128>])
                .with_precision_and_scale(10, 2)
                .unwrap(),
        ),
        Arc::new(Float64Array::from(vec![1.0])),
        Arc::new(tags.finish()),
    ];
    let names = ["id", "name", "ts", "amount", "score", "tags"];
    let batch = RecordBatch::try_from_iter(names.into_iter().zip(columns)).unwrap();
    let batch = conform(&batch, &schema).unwrap();
    let groups = Partitioner::new(parts.partition_spec.as_ref().unwrap(), &parts.columns)
        .unwrap()
        .split(&[batch])
        .unwrap();
    assert_eq!(groups.len(), 1);

    let key = uuid::Uuid::parse_str(expected.idempotency_key.as_deref().unwrap()).unwrap();
    let file_uuid = uuid::Uuid::parse_str("273d2af8-43d7-449b-b718-6fe559ca417e").unwrap();
    let path = object_uri("s3://lake/demo/", "analytics", "parts", &key, &file_uuid, 0);
    let file = write(&schema, std::slice::from_ref(&groups[0].batch));
    let mut registration =
        FileRegistration::new(path, &file, &parts.columns, Some(groups[0].values.clone()));
    assert_self_consistent(&file, &registration);

    // The bucket value is the one place we differ, on purpose: this tuple
    // was handed to prepare_append_tables by the capturing script (the
    // caller owns partitioning on that path, hoglake-api.md §8.1), and it
    // is not Iceberg's bucket[4] of 7. pyhoglake's own split (the /commit
    // test above: ids 1, 2, 3 -> 0, 0, 3) and Iceberg's hash give 3.
    let theirs = &expected.appends[0].files[0];
    let s = |v: &str| Some(v.to_string());
    assert_eq!(theirs.partition_values, Some(vec![s("674"), s("1")]));
    assert_eq!(groups[0].values, [s("674"), s("3")]);
    assert_eq!(murmur3::bucket(&7i64.to_le_bytes(), 4), 3);
    registration.partition_values = theirs.partition_values.clone();

    // Byte-layout sizes are the writer's own; everything else must match.
    registration.file_size_bytes = theirs.file_size_bytes;
    registration.footer_size = theirs.footer_size;
    registration.column_stats = Some(without_sizes(registration.column_stats.as_ref().unwrap()));
    let mut expected_sans_sizes = expected.clone();
    let f = &mut expected_sans_sizes.appends[0].files[0];
    f.column_stats = Some(without_sizes(f.column_stats.as_ref().unwrap()));

    let request = CommitRequest {
        idempotency_key: Some(key.to_string()),
        read_snapshot: Some(8),
        appends: vec![TableAppend {
            namespace: "analytics".into(),
            table: "parts".into(),
            expected_table_uuid: Some(parts.table_uuid.clone()),
            files: vec![registration],
        }],
        deletes: Vec::new(),
        author: None,
        message: None,
    };
    assert_eq!(request, expected_sans_sizes);
}

/// report.json's table definition agrees with the server's create response
/// the tests take their columns from.
#[test]
fn report_table_definition_agrees_with_the_capture() {
    let report = read_json("report.json");
    let created = &report["create_table"];
    let lines = captured();
    let response = lines
        .iter()
        .filter_map(|l| l.get("response"))
        .find(|r| r.get("table_uuid") == Some(&created["table_uuid"]))
        .unwrap();
    let table: Table = serde_json::from_value(response.clone()).unwrap();
    let summary: Vec<(String, String, i64, bool)> = created["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["type"].as_str().unwrap().to_string(),
                c["field_id"].as_i64().unwrap(),
                c["nullable"].as_bool().unwrap(),
            )
        })
        .collect();
    let ours: Vec<(String, String, i64, bool)> = table
        .columns
        .iter()
        .take(summary.len())
        .map(|c| {
            (
                c.name.clone(),
                c.column_type.to_string(),
                c.field_id,
                c.nullable,
            )
        })
        .collect();
    assert_eq!(ours, summary);
    assert_eq!(table.columns[3].decimal_params(), Some((10, 2)));
}
