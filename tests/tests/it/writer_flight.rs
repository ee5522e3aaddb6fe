//! The writer process over Arrow Flight: the same suite against the embedded
//! lake (SQLite and DuckDB-file catalogs) and Postgres catalog + moto S3.
use std::sync::Arc;

use arrow::array::{Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use millpond_proto::{AckOutcome, OffsetRange};
use millpond_tests::flight::{
    client, descriptor, noise, put, put_messages, recorded, rows, streamed_messages,
    with_coordinates,
};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::writer::Writer;

fn r(p: i32, first: i64, last: i64) -> OffsetRange {
    OffsetRange::new("events", p, first, last)
}

async fn put_rows_and_read_back(backend: Backend) {
    let lake = Lake::new(backend, "events");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let ack = put(
        &mut c,
        &descriptor("f1", vec![r(0, 0, 99), r(1, 0, 49)], 150),
        vec![rows(0, 100), rows(100, 50)],
    )
    .await
    .unwrap();
    assert_eq!(ack.flush_id, "f1");
    assert_eq!(ack.rows_written, 150);
    assert_eq!(ack.outcome(), AckOutcome::Written);
    assert_eq!(ack.sink, "ducklake");
    assert_eq!(ack.table, "lake.main.events");
    assert_eq!(
        recorded(&mut c, "events").await,
        vec![r(0, 0, 99), r(1, 0, 49)]
    );
    assert_eq!(writer.metric("millpond_records_written_total", &[]), 150.0);
    assert_eq!(writer.metric("millpond_flush_size_records_count", &[]), 1.0);
    writer.stop();
    assert_eq!(lake.count(), 150);
    // Not looked up after the commit: the snapshot's message names the flush.
    assert_eq!(ack.snapshot_id, -1);
    assert_eq!(lake.flush_snapshot("f1"), ["true|true"]);
    let names = lake.column_text("name");
    assert!(names.contains(&Some("row-149".into())));
    let cols: Vec<String> = lake.columns().into_iter().map(|c| c.0).collect();
    assert_eq!(cols, ["id", "name", "_inserted_at"]);
    assert_eq!(
        lake.column_text("count(DISTINCT id)"),
        vec![Some("150".into())]
    );
    assert_eq!(
        lake.column_text("count(_inserted_at)"),
        vec![Some("150".into())]
    );
}

async fn resent_flush_is_not_written_twice(backend: Backend) {
    let lake = Lake::new(backend, "events");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let d = descriptor("f1", vec![r(0, 0, 9)], 10);
    assert_eq!(
        put(&mut c, &d, vec![rows(0, 10)]).await.unwrap().outcome(),
        AckOutcome::Written
    );
    let again = put(&mut c, &d, vec![rows(0, 10)]).await.unwrap();
    assert_eq!(again.outcome(), AckOutcome::AlreadyRecorded);
    assert_eq!(again.rows_written, 0);
    // The next range of the same partition is new.
    let next = put(
        &mut c,
        &descriptor("f2", vec![r(0, 10, 19)], 10),
        vec![rows(10, 10)],
    )
    .await
    .unwrap();
    assert_eq!(next.rows_written, 10);
    // A flush overlapping a recorded range is refused, never half-written.
    let overlap = put(
        &mut c,
        &descriptor("f3", vec![r(0, 15, 29)], 15),
        vec![rows(15, 15)],
    )
    .await
    .unwrap_err();
    assert_eq!(
        overlap.code(),
        tonic::Code::FailedPrecondition,
        "{overlap:?}"
    );
    assert_eq!(
        writer.metric("millpond_flushes_already_recorded_total", &[]),
        1.0
    );
    writer.stop();
    assert_eq!(lake.count(), 20);
    assert_eq!(
        lake.column_text("count(DISTINCT id)"),
        vec![Some("20".into())]
    );
}

async fn zero_row_flush_only_advances_offsets(backend: Backend) {
    let lake = Lake::new(backend, "events");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let ack = put(&mut c, &descriptor("empty", vec![r(3, 0, 41)], 0), vec![])
        .await
        .unwrap();
    assert_eq!((ack.rows_written, ack.outcome()), (0, AckOutcome::Written));
    assert_eq!(recorded(&mut c, "events").await, vec![r(3, 0, 41)]);
    put(
        &mut c,
        &descriptor("f", vec![r(3, 42, 43)], 2),
        vec![rows(0, 2)],
    )
    .await
    .unwrap();
    assert_eq!(recorded(&mut c, "events").await, vec![r(3, 42, 43)]);
    writer.stop();
    assert_eq!(lake.count(), 2);
}

fn batch(fields: Vec<(&str, DataType)>, cols: Vec<arrow::array::ArrayRef>) -> RecordBatch {
    let schema = Schema::new(
        fields
            .into_iter()
            .map(|(n, t)| Field::new(n, t, true))
            .collect::<Vec<_>>(),
    );
    RecordBatch::try_new(Arc::new(schema), cols).unwrap()
}

async fn schema_evolves_across_flushes(backend: Backend) {
    let lake = Lake::new(backend, "events");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    // Created from the first batch: small int.
    let b1 = batch(
        vec![("n", DataType::Int32)],
        vec![Arc::new(Int32Array::from(vec![1, 2]))],
    );
    put(&mut c, &descriptor("a", vec![r(0, 0, 1)], 2), vec![b1])
        .await
        .unwrap();
    // Widened to BIGINT, plus a new column.
    let b2 = batch(
        vec![("n", DataType::Int64), ("extra", DataType::Utf8)],
        vec![
            Arc::new(Int64Array::from(vec![5_000_000_000])),
            Arc::new(StringArray::from(vec!["x"])),
        ],
    );
    put(&mut c, &descriptor("b", vec![r(0, 2, 2)], 1), vec![b2])
        .await
        .unwrap();
    // Narrowing refused (column stays BIGINT, value still lands); unsafe and
    // reserved names dropped and counted.
    let b3 = batch(
        vec![
            ("n", DataType::Int32),
            ("utm-source", DataType::Utf8),
            ("$session_id", DataType::Utf8),
            ("year", DataType::Utf8),
        ],
        vec![
            Arc::new(Int32Array::from(vec![7])),
            Arc::new(StringArray::from(vec!["g"])),
            Arc::new(StringArray::from(vec!["s1"])),
            Arc::new(StringArray::from(vec!["2026"])),
        ],
    );
    let ack = put(&mut c, &descriptor("c", vec![r(0, 3, 3)], 1), vec![b3])
        .await
        .unwrap();
    assert_eq!(ack.rows_written, 1);
    // Text into the BIGINT column: refused; what converts lands, the rest is
    // NULL, and the partition keeps moving.
    let b4 = batch(
        vec![("n", DataType::Utf8)],
        vec![Arc::new(StringArray::from(vec!["8", "abc"]))],
    );
    let ack = put(&mut c, &descriptor("d", vec![r(0, 4, 5)], 2), vec![b4])
        .await
        .unwrap();
    assert_eq!(ack.rows_written, 2);
    assert_eq!(
        writer.metric("millpond_schema_columns_added_total", &[]),
        1.0
    );
    assert_eq!(
        writer.metric("millpond_schema_columns_widened_total", &[]),
        1.0
    );
    // the reserved name, and "abc" into BIGINT; the narrower Int32 converts
    // exactly and is silent
    assert_eq!(
        writer.metric("millpond_errors_total", &[("type", "schema")]),
        2.0
    );
    assert_eq!(
        writer.metric(
            "millpond_records_skipped_total",
            &[("reason", "unsafe_field_name")]
        ),
        1.0,
        "one record lost two unsafe keys: counted once"
    );
    writer.stop();
    // Refused names and the unconvertible value are dead letters, not gone.
    assert_eq!(
        lake.query(
            "SELECT reason, column_name, live_type, original::VARCHAR, kafka_offset \
             FROM lake.main.events_dead_letters ORDER BY column_name"
        ),
        [
            "unsafe_field_name|$session_id|NULL|s1|-1",
            "type_mismatch|n|BIGINT|abc|-1",
            "unsafe_field_name|utm-source|NULL|g|-1",
            "reserved_field_name|year|NULL|2026|-1",
        ]
    );
    let cols = lake.columns();
    assert_eq!(
        cols,
        vec![
            ("n".into(), "BIGINT".into()),
            ("_inserted_at".into(), "TIMESTAMP WITH TIME ZONE".into()),
            ("extra".into(), "VARCHAR".into()),
        ]
    );
    assert_eq!(
        lake.column_text("n"),
        vec![
            Some("1".into()),
            Some("2".into()),
            Some("5000000000".into()),
            Some("7".into()),
            Some("8".into()),
            None
        ]
    );
}

/// DoPut `b` with coordinates as partition 0 from offset `first`.
async fn send(
    c: &mut arrow_flight::FlightClient,
    id: &str,
    b: RecordBatch,
    first: i64,
) -> millpond_proto::FlushAck {
    let n = b.num_rows();
    let b = with_coordinates(b, 0, first);
    let d = descriptor(id, vec![r(0, first, first + n as i64 - 1)], n);
    put(c, &d, vec![b]).await.unwrap()
}

/// A value lands only when the column holds it exactly; anything else is
/// NULL in its row and a dead letter with its record's coordinates.
async fn values_are_never_changed_silently(backend: Backend) {
    let lake = Lake::new(backend, "events");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let one = |name: &str, t: DataType, a: arrow::array::ArrayRef| batch(vec![(name, t)], vec![a]);
    send(
        &mut c,
        "a",
        one("n", DataType::Int64, Arc::new(Int64Array::from(vec![10]))),
        0,
    )
    .await;
    let floats = Arc::new(Float64Array::from(vec![10.5, 11.5, 12.0]));
    let ack = send(&mut c, "b", one("n", DataType::Float64, floats), 1).await;
    assert_eq!((ack.rows_written, ack.dead_letters_written), (3, 2));
    let text = Arc::new(StringArray::from(vec![
        "02134",
        "1.5",
        "42",
        "123456789012345678901234567890",
    ]));
    send(&mut c, "c", one("n", DataType::Utf8, text), 4).await;
    send(
        &mut c,
        "d",
        one(
            "x",
            DataType::Float64,
            Arc::new(Float64Array::from(vec![1.5])),
        ),
        8,
    )
    .await;
    let errors = || writer.metric("millpond_errors_total", &[("type", "schema")]);
    let before = errors();
    // All integers into DOUBLE: exact, silent.
    send(
        &mut c,
        "e",
        one(
            "x",
            DataType::Int64,
            Arc::new(Int64Array::from(vec![1, 1 << 53])),
        ),
        9,
    )
    .await;
    assert_eq!(errors(), before, "an exact conversion is not an error");
    let ack = send(
        &mut c,
        "f",
        one(
            "x",
            DataType::Int64,
            Arc::new(Int64Array::from(vec![(1 << 53) + 1])),
        ),
        11,
    )
    .await;
    assert_eq!(ack.dead_letters_written, 1);
    assert_eq!(errors(), before + 1.0);
    assert_eq!(
        writer.metric(
            "millpond_dead_letter_values_total",
            &[("reason", "type_mismatch")]
        ),
        6.0
    );
    assert_eq!(
        writer.metric(
            "millpond_dead_letters_total",
            &[("reason", "type_mismatch")]
        ),
        0.0
    );
    writer.stop();
    assert_eq!(
        lake.query("SELECT n, x FROM lake.main.events ORDER BY _inserted_at, n NULLS LAST, x"),
        [
            "10|NULL",
            "12|NULL",
            "NULL|NULL",
            "NULL|NULL",
            "42|NULL",
            "NULL|NULL",
            "NULL|NULL",
            "NULL|NULL",
            "NULL|1.5",
            "NULL|1.0",
            "NULL|9007199254740992.0",
            "NULL|NULL",
        ]
    );
    assert_eq!(
        lake.query(
            "SELECT kafka_partition, kafka_offset, epoch_ms(kafka_timestamp), kafka_key::VARCHAR, \
             reason, column_name, live_type, original::VARCHAR \
             FROM lake.main.events_dead_letters ORDER BY kafka_offset"
        ),
        [
            "0|1|1000|k1|type_mismatch|n|BIGINT|10.5",
            "0|2|2000|k2|type_mismatch|n|BIGINT|11.5",
            "0|4|4000|k4|type_mismatch|n|BIGINT|02134",
            "0|5|5000|k5|type_mismatch|n|BIGINT|1.5",
            "0|7|7000|k7|type_mismatch|n|BIGINT|123456789012345678901234567890",
            "0|11|11000|k11|type_mismatch|x|DOUBLE|9007199254740993",
        ]
    );
}

/// MILLPOND_MAX_COLUMNS caps the table: keys beyond it are dead letters.
async fn the_table_stops_growing_at_max_columns(backend: Backend) {
    let lake = Lake::new(backend, "events").with_env("MILLPOND_MAX_COLUMNS", "3");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let ints = |v: i64| Arc::new(Int64Array::from(vec![v])) as arrow::array::ArrayRef;
    let b1 = RecordBatch::try_from_iter([
        ("a", ints(1)),
        ("b", ints(2)),
        ("c", ints(3)),
        ("d", ints(4)),
    ])
    .unwrap();
    let ack = send(&mut c, "f1", b1, 0).await;
    assert_eq!((ack.rows_written, ack.dead_letters_written), (1, 1));
    let b2 = RecordBatch::try_from_iter([("a", ints(5)), ("e", ints(6))]).unwrap();
    send(&mut c, "f2", b2, 1).await;
    assert_eq!(
        writer.metric(
            "millpond_dead_letter_values_total",
            &[("reason", "too_many_columns")]
        ),
        2.0
    );
    writer.stop();
    let cols: Vec<String> = lake.columns().into_iter().map(|c| c.0).collect();
    assert_eq!(cols, ["a", "b", "c", "_inserted_at"]);
    assert_eq!(
        lake.query("SELECT a, b FROM lake.main.events ORDER BY a"),
        ["1|2", "5|NULL"]
    );
    assert_eq!(
        lake.query(
            "SELECT kafka_offset, column_name, original::VARCHAR FROM lake.main.events_dead_letters \
             WHERE reason = 'too_many_columns' ORDER BY kafka_offset"
        ),
        ["0|d|4", "1|e|6"]
    );
}

/// DUCKLAKE_QUOTED_COLUMNS keeps PostHog-style keys as quoted columns.
async fn quoted_columns_keep_unsafe_keys(backend: Backend) {
    let lake = Lake::new(backend, "events").with_env("DUCKLAKE_QUOTED_COLUMNS", "true");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let text = |v: &str| Arc::new(StringArray::from(vec![v])) as arrow::array::ArrayRef;
    let b = RecordBatch::try_from_iter([
        ("$session_id", text("s1")),
        ("utm-source", text("g")),
        ("say \"hi\"", text("q")),
    ])
    .unwrap();
    let ack = send(&mut c, "q1", b, 0).await;
    assert_eq!((ack.rows_written, ack.dead_letters_written), (1, 0));
    writer.stop();
    let cols: Vec<String> = lake.columns().into_iter().map(|c| c.0).collect();
    assert_eq!(
        cols,
        ["$session_id", "utm-source", "say \"hi\"", "_inserted_at"]
    );
    assert_eq!(
        lake.query(
            "SELECT \"$session_id\", \"utm-source\", \"say \"\"hi\"\"\" FROM lake.main.events"
        ),
        ["s1|g|q"]
    );
}

/// A uuid pinned one way and live the other: the live column wins, both ways.
async fn uuid_live_column_wins(backend: Backend) {
    use arrow::array::FixedSizeBinaryArray;
    let lake = Lake::new(backend, "events");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let uuid_field = Field::new("u", DataType::FixedSizeBinary(16), true).with_metadata(
        std::collections::HashMap::from([(
            "ARROW:extension:name".to_owned(),
            "arrow.uuid".to_owned(),
        )]),
    );
    let bytes = [
        0xf7, 0x9c, 0x3e, 0x09, 0x67, 0x7c, 0x4b, 0xbd, 0xa4, 0x79, 0x3f, 0x34, 0x9c, 0xb7, 0x85,
        0xe7,
    ];
    let uuids = |name: &str| {
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![uuid_field.clone().with_name(name)])),
            vec![Arc::new(
                FixedSizeBinaryArray::try_from_iter(std::iter::once(bytes)).unwrap(),
            )],
        )
        .unwrap()
    };
    // Live UUID (created pinned), batch text: parsed back to the bytes.
    send(&mut c, "a", uuids("u"), 0).await;
    let text = batch(
        vec![("u", DataType::Utf8)],
        vec![Arc::new(StringArray::from(vec![
            "{F79C3E09-677C-4BBD-A479-3F349CB785E7}",
            "nope",
        ]))],
    );
    let ack = send(&mut c, "b", text, 1).await;
    assert_eq!(ack.dead_letters_written, 1);
    // Live VARCHAR, batch uuid: written as canonical text.
    let v = batch(
        vec![("v", DataType::Utf8)],
        vec![Arc::new(StringArray::from(vec!["x"]))],
    );
    send(&mut c, "c", v, 3).await;
    send(&mut c, "d", uuids("v"), 4).await;
    assert_eq!(
        writer.metric("millpond_errors_total", &[("type", "schema")]),
        3.0,
        "two rewrites, and one flush with a value that is no uuid"
    );
    writer.stop();
    let types: std::collections::HashMap<String, String> = lake.columns().into_iter().collect();
    assert_eq!(
        (types["u"].as_str(), types["v"].as_str()),
        ("UUID", "VARCHAR")
    );
    assert_eq!(
        lake.query("SELECT u, v FROM lake.main.events ORDER BY _inserted_at, u NULLS LAST"),
        [
            "f79c3e09-677c-4bbd-a479-3f349cb785e7|NULL",
            "f79c3e09-677c-4bbd-a479-3f349cb785e7|NULL",
            "NULL|NULL",
            "NULL|x",
            "NULL|f79c3e09-677c-4bbd-a479-3f349cb785e7",
        ]
    );
}

/// Table and schema names that are SQL keywords, with partitioning on.
async fn keyword_names_work(backend: Backend) {
    let lake = Lake::new(backend, "order");
    let writer = Writer::start_with(
        &lake,
        &[
            ("DUCKLAKE_SCHEMA", "select"),
            ("DUCKLAKE_PARTITION_BY", "year(_inserted_at), id"),
        ],
    );
    let mut c = client(&writer.addr).await;
    let ack = put(
        &mut c,
        &descriptor("k1", vec![r(0, 0, 9)], 10),
        vec![rows(0, 10)],
    )
    .await
    .unwrap();
    assert_eq!(ack.table, "lake.select.order");
    assert_eq!(recorded(&mut c, "events").await, vec![r(0, 0, 9)]);
    writer.stop();
    assert_eq!(
        lake.query("SELECT count(*), count(DISTINCT \"name\") FROM lake.\"select\".\"order\""),
        ["10|10"]
    );
}

/// `{}` and records whose every key was dropped are rows: a valid JSON
/// object is one row, even with no column to hold.
async fn rows_without_payload_columns_still_land(backend: Backend) {
    let lake = Lake::new(backend, "events");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let empty = RecordBatch::try_new_with_options(
        Arc::new(Schema::empty()),
        vec![],
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(3)),
    )
    .unwrap();
    let ack = put(&mut c, &descriptor("e1", vec![r(0, 0, 2)], 3), vec![empty])
        .await
        .unwrap();
    assert_eq!(ack.rows_written, 3);
    let dropped = batch(
        vec![("bad-key", DataType::Utf8)],
        vec![Arc::new(StringArray::from(vec!["v", "w"]))],
    );
    let ack = put(
        &mut c,
        &descriptor("e2", vec![r(0, 3, 4)], 2),
        vec![dropped],
    )
    .await
    .unwrap();
    assert_eq!(ack.rows_written, 2);
    put(
        &mut c,
        &descriptor("e3", vec![r(0, 5, 5)], 1),
        vec![rows(0, 1)],
    )
    .await
    .unwrap();
    writer.stop();
    assert_eq!(lake.count(), 6);
    assert_eq!(
        lake.column_text("count(_inserted_at)"),
        vec![Some("6".into())]
    );
}

/// Schema churn aborts other writers' inserts, so a flush's new columns
/// are added in one catalog commit, not one per column.
async fn new_columns_of_a_flush_are_one_catalog_commit(backend: Backend) {
    let lake = Lake::new(backend, "events");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    put(
        &mut c,
        &descriptor("a", vec![r(0, 0, 0)], 1),
        vec![rows(0, 1)],
    )
    .await
    .unwrap();
    let wide = batch(
        vec![
            ("id", DataType::Int64),
            ("x", DataType::Utf8),
            ("y", DataType::Int64),
            ("z", DataType::Boolean),
        ],
        vec![
            Arc::new(Int64Array::from(vec![1])),
            Arc::new(StringArray::from(vec!["x"])),
            Arc::new(Int64Array::from(vec![2])),
            Arc::new(arrow::array::BooleanArray::from(vec![true])),
        ],
    );
    put(&mut c, &descriptor("b", vec![r(0, 1, 1)], 1), vec![wide])
        .await
        .unwrap();
    assert_eq!(
        writer.metric("millpond_schema_columns_added_total", &[]),
        3.0
    );
    writer.stop();
    assert_eq!(
        lake.query(
            "SELECT count(*) FROM ducklake_snapshots('lake') WHERE map_contains(changes, 'tables_altered')"
        ),
        ["1"]
    );
    assert_eq!(lake.column_text("z"), vec![Some("true".into()), None]);
}

/// The writer's own tables (offsets, dead letters, leases) are created at
/// startup in one catalog commit: each commit makes DuckLake reload the
/// catalog, and a lease table created at the first flush cost that flush.
async fn the_writers_own_tables_are_one_catalog_commit(backend: Backend) {
    let lake = Lake::new(backend, "events");
    let writer = Writer::start(&lake);
    writer.stop();
    let created = "SELECT list_sort(changes['tables_created']) FROM ducklake_snapshots('lake') \
                   WHERE map_contains(changes, 'tables_created')";
    assert_eq!(
        lake.query(created),
        ["[main._millpond_last_records, main._millpond_leases_events, main._millpond_offsets, main.events_dead_letters]"]
    );
}

/// A person dropping or renaming a column while the writer runs (its
/// cached schema goes stale) does not wedge the pipeline.
async fn out_of_band_drop_and_rename_do_not_wedge(backend: Backend) {
    let lake = Lake::new(backend, "events");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    put(
        &mut c,
        &descriptor("a", vec![r(0, 0, 9)], 10),
        vec![rows(0, 10)],
    )
    .await
    .unwrap();
    lake.execute("ALTER TABLE lake.main.events DROP COLUMN name");
    let ack = put(
        &mut c,
        &descriptor("b", vec![r(0, 10, 19)], 10),
        vec![rows(10, 10)],
    )
    .await
    .unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    lake.execute("ALTER TABLE lake.main.events RENAME COLUMN id TO ident");
    let ack = put(
        &mut c,
        &descriptor("c", vec![r(0, 20, 29)], 10),
        vec![rows(20, 10)],
    )
    .await
    .unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    writer.stop();
    assert_eq!(lake.count(), 30);
    assert_eq!(
        lake.query("SELECT count(name), count(id), count(ident) FROM lake.main.events"),
        ["20|10|20"],
        "name re-added for the later flushes; id re-added beside the renamed column"
    );
}

/// A flush streamed as ingest streams it (the real client): batches with
/// different schemas land aligned to their union, with the dead letter and
/// the ranges of the trailing descriptor, in one commit.
async fn a_streamed_flush_lands_aligned_to_its_union(backend: Backend) {
    let lake = Lake::new(backend, "events");
    let writer = Writer::start(&lake);
    let first = rows(0, 3);
    let second = batch(
        vec![("id", DataType::Int64), ("score", DataType::Float64)],
        vec![
            Arc::new(Int64Array::from(vec![3, 4])),
            Arc::new(Float64Array::from(vec![0.5, 2.25])),
        ],
    );
    let deadline = std::time::Duration::from_secs(30);
    let mut sender = millpond_ingest::flight::WriterClient::new(writer.addr.clone());
    let mut stream = sender.open("s1", &first, deadline).await.unwrap();
    stream.push(&second, deadline).await.unwrap();
    let mut desc = descriptor("s1", vec![r(0, 0, 5)], 5);
    desc.dead_letters.push(millpond_proto::DeadLetter {
        topic: "events".into(),
        partition: 0,
        offset: 5,
        reason: "not_an_object".into(),
        original: b"[5]".to_vec(),
        ..Default::default()
    });
    let ack = stream.finish(&desc, deadline).await.unwrap();
    assert_eq!(
        (
            ack.flush_id.as_str(),
            ack.rows_written,
            ack.dead_letters_written,
            ack.outcome()
        ),
        ("s1", 5, 1, AckOutcome::Written)
    );
    let mut c = client(&writer.addr).await;
    assert_eq!(recorded(&mut c, "events").await, vec![r(0, 0, 5)]);
    writer.stop();
    let cols: Vec<String> = lake.columns().into_iter().map(|c| c.0).collect();
    assert_eq!(cols, ["id", "name", "score", "_inserted_at"]);
    assert_eq!(
        lake.column_text("string_agg(coalesce(name, '-') || ':' || coalesce(score::VARCHAR, '-'), ',' ORDER BY id)"),
        vec![Some("row-0:-,row-1:-,row-2:-,-:0.5,-:2.25".into())]
    );
    assert_eq!(
        lake.query(
            "SELECT kafka_offset, reason, original::VARCHAR FROM lake.main.events_dead_letters"
        ),
        ["5|not_an_object|[5]"]
    );
}

/// A streamed flush is written only whole: a stream that ends without its
/// trailing descriptor, names another flush in it, or goes on after it is
/// refused, and nothing of it lands.
async fn a_streamed_flush_without_its_trailer_writes_nothing(backend: Backend) {
    let lake = Lake::new(backend, "events");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let batches = || vec![rows(0, 2), rows(2, 2)];
    let cases = [
        (
            streamed_messages("t1", batches(), None).await,
            "without its trailing descriptor",
        ),
        (
            streamed_messages(
                "t2",
                batches(),
                Some(&descriptor("other", vec![r(0, 0, 3)], 4)),
            )
            .await,
            "names flush \"other\"",
        ),
        (
            {
                let mut m = streamed_messages(
                    "t3",
                    batches(),
                    Some(&descriptor("t3", vec![r(0, 0, 3)], 4)),
                )
                .await;
                m.extend(
                    streamed_messages("t3", vec![rows(4, 1)], None)
                        .await
                        .into_iter()
                        .skip(1),
                );
                m
            },
            "followed the trailing descriptor",
        ),
        (
            streamed_messages(
                "t4",
                batches(),
                Some(&descriptor("t4", vec![r(0, 0, 3)], 5)),
            )
            .await,
            "carried 4 rows but its descriptor announced 5",
        ),
    ];
    for (messages, why) in cases {
        let status = put_messages(&mut c, messages).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains(why), "{why}: {status:?}");
    }
    assert_eq!(recorded(&mut c, "events").await, vec![]);
    // The same flush, whole, is then written.
    let ok = streamed_messages(
        "t1",
        batches(),
        Some(&descriptor("t1", vec![r(0, 0, 3)], 4)),
    )
    .await;
    assert_eq!(put_messages(&mut c, ok).await.unwrap().rows_written, 4);
    writer.stop();
    assert_eq!(lake.count(), 4);
}

mod streamed {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lands_aligned_to_its_union() {
        super::a_streamed_flush_lands_aligned_to_its_union(super::Backend::Embedded).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lands_aligned_to_its_union_on_postgres_s3() {
        super::a_streamed_flush_lands_aligned_to_its_union(super::Backend::PostgresS3).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_its_trailer_writes_nothing() {
        super::a_streamed_flush_without_its_trailer_writes_nothing(super::Backend::Embedded).await
    }
}

macro_rules! every_backend {
    ($($name:ident),*) => {
        mod embedded {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::Backend::Embedded).await })*
        }
        mod embedded_duckdb_file {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::Backend::EmbeddedDuckDb).await })*
        }
        mod postgres_s3 {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::Backend::PostgresS3).await })*
        }
    };
}

every_backend!(
    keyword_names_work,
    the_writers_own_tables_are_one_catalog_commit,
    new_columns_of_a_flush_are_one_catalog_commit,
    rows_without_payload_columns_still_land,
    put_rows_and_read_back,
    resent_flush_is_not_written_twice,
    zero_row_flush_only_advances_offsets,
    schema_evolves_across_flushes,
    values_are_never_changed_silently,
    the_table_stops_growing_at_max_columns,
    quoted_columns_keep_unsafe_keys,
    uuid_live_column_wins
);

/// Not on the DuckDB-file catalog: nobody else can open it while the writer runs.
mod out_of_band {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn embedded() {
        super::out_of_band_drop_and_rename_do_not_wedge(super::Backend::Embedded).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_s3() {
        super::out_of_band_drop_and_rename_do_not_wedge(super::Backend::PostgresS3).await
    }
}

/// `n` rows from `start`: `seq` and `id` (both the row number) and a
/// 200-character `name`, about 2 MB of Arrow per 10,000 rows.
fn long_rows(start: i64, n: usize) -> RecordBatch {
    let seq: Vec<i64> = (start..start + n as i64).collect();
    let names: Vec<String> = seq.iter().map(|i| format!("{i:0>200}")).collect();
    batch(
        vec![
            ("seq", DataType::Int64),
            ("id", DataType::Int64),
            ("name", DataType::Utf8),
        ],
        vec![
            Arc::new(Int64Array::from(seq.clone())),
            Arc::new(Int64Array::from(seq)),
            Arc::new(StringArray::from(names)),
        ],
    )
}

/// `batch` with one more column.
/// `long_rows` plus a text column `extra`: `e{seq}`.
fn long_rows_with_extra(start: i64, n: usize) -> RecordBatch {
    let extra: Vec<String> = (start..start + n as i64).map(|i| format!("e{i}")).collect();
    plus(
        long_rows(start, n),
        "extra",
        Arc::new(StringArray::from(extra)),
    )
}

const STREAM_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// Streams flush s1 (rows 0-9) until the writer acknowledges it, then
/// opens s2 with rows 10-19 and returns its stream, not yet finished.
async fn first_landed_then_second_open(
    sender: &mut millpond_ingest::flight::WriterClient,
) -> millpond_ingest::flight::FlushStream {
    let stream = sender
        .open("s1", &long_rows(0, 10), STREAM_DEADLINE)
        .await
        .unwrap();
    stream
        .finish(&descriptor("s1", vec![r(0, 0, 9)], 10), STREAM_DEADLINE)
        .await
        .unwrap();
    sender
        .open("s2", &long_rows(10, 10), STREAM_DEADLINE)
        .await
        .unwrap()
}

/// An embedded lake whose streamed flushes go to files from their first
/// byte, its writer, and a client that streams to it as ingest does.
fn streaming_to_files() -> (Lake, Writer, millpond_ingest::flight::WriterClient) {
    let lake = Lake::new(Backend::Embedded, "events").with_env("DUCKLAKE_FILES_FROM_BYTES", "0");
    let writer = Writer::start(&lake);
    let sender = millpond_ingest::flight::WriterClient::new(writer.addr.clone());
    (lake, writer, sender)
}

/// A streamed flush written as files into a table that does not exist yet
/// creates it in the transaction that registers its files (one catalog
/// commit, not two), and registers all its files. A column that appears
/// mid-flush without a NULL is still known to hold NULLs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_create_their_table_in_the_write_commit() {
    let (lake, writer, mut sender) = streaming_to_files();
    let deadline = STREAM_DEADLINE;
    let mut stream = sender
        .open("s1", &long_rows(0, 10), deadline)
        .await
        .unwrap();
    // A new column mid-flush starts a second file; the two are joined.
    stream
        .push(&long_rows_with_extra(10, 10), deadline)
        .await
        .unwrap();
    let ack = stream
        .finish(&descriptor("s1", vec![r(0, 0, 19)], 20), deadline)
        .await
        .unwrap();
    assert_eq!((ack.rows_written, ack.outcome()), (20, AckOutcome::Written));
    writer.stop();
    assert_eq!(lake.count(), 20);
    assert_eq!(lake.flush_snapshot("s1"), ["true|true"]);
    assert_eq!(lake.data_files().len(), 1, "one file per flush");
    // The first file lacked `extra` and the second has no NULL in it: the
    // lake must still know that `extra` holds NULLs.
    assert_eq!(
        lake.query(
            "SELECT count(extra), count(*) FILTER (WHERE extra IS NULL), \
             (SELECT count(*) FROM lake.main.events WHERE extra IS NULL) FROM lake.main.events"
        ),
        ["10|10|10"]
    );
    let created = "SELECT map_contains(changes, 'tables_inserted_into') \
                   FROM ducklake_snapshots('lake') \
                   WHERE list_contains(changes['tables_created'], 'main.events')";
    assert_eq!(lake.query(created), ["true"]);
    let writers = lake.data_file_writers();
    assert!(
        !writers.is_empty() && writers.iter().all(|w| w.contains("parquet-rs")),
        "{writers:?}"
    );
}

/// Another writer (here a person) creates the table while this writer's
/// first flush is on its way, with a column that flush lacks and that holds
/// no NULL yet: the flush's files, written again with it, keep the lake
/// knowing that it holds NULLs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_of_a_table_created_meanwhile_reaches_the_files() {
    let (lake, writer, mut sender) = streaming_to_files();
    let deadline = STREAM_DEADLINE;
    let stream = sender
        .open("s1", &long_rows(0, 10), deadline)
        .await
        .unwrap();
    lake.execute(
        "CREATE TABLE lake.main.events (seq BIGINT, id BIGINT, name VARCHAR, d VARCHAR, \
         _inserted_at TIMESTAMP WITH TIME ZONE)",
    );
    lake.execute(
        "INSERT INTO lake.main.events (seq, id, d) SELECT 100 + i, 100 + i, 'x' FROM range(2000) t(i)",
    );
    let d1 = descriptor("s1", vec![r(0, 0, 9)], 10);
    let ack = stream.finish(&d1, deadline).await.unwrap();
    assert_eq!((ack.rows_written, ack.outcome()), (10, AckOutcome::Written));
    writer.stop();
    assert_eq!(lake.count(), 2010);
    assert_eq!(
        lake.query(
            "SELECT count(d), (SELECT count(*) FROM lake.main.events WHERE d IS NULL) \
             FROM lake.main.events"
        ),
        ["2000|10"]
    );
}

/// A column of a type no file carries (here a UUID a person adds) appears
/// while a flush goes to files: that flush is asked for whole, and the next
/// ones go to DuckDB's insert from their start, without being asked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_no_file_carries_sends_flushes_to_the_insert() {
    let (lake, writer, mut sender) = streaming_to_files();
    let deadline = STREAM_DEADLINE;
    let stream = first_landed_then_second_open(&mut sender).await;
    lake.execute("ALTER TABLE lake.main.events ADD COLUMN u UUID");
    let d2 = descriptor("s2", vec![r(0, 10, 19)], 10);
    asked_for_whole(stream.finish(&d2, deadline).await);
    let mut c = client(&writer.addr).await;
    let ack = put(&mut c, &d2, vec![long_rows(10, 10)]).await.unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    let stream = sender
        .open("s3", &long_rows(20, 10), deadline)
        .await
        .unwrap();
    let ack = stream
        .finish(&descriptor("s3", vec![r(0, 20, 29)], 10), deadline)
        .await
        .unwrap();
    assert_eq!((ack.rows_written, ack.outcome()), (10, AckOutcome::Written));
    writer.stop();
    assert_eq!(lake.count(), 30);
    assert_eq!(
        lake.query("SELECT count(u), count(*) FILTER (WHERE u IS NULL) FROM lake.main.events"),
        ["0|30"]
    );
}

/// A lake whose streamed flushes go to files from their first byte, its
/// writer, and the table, created by a flush of rows 0..10 (`f0`).
async fn files_from_the_first_byte() -> (Lake, Writer) {
    let lake = Lake::new(Backend::Embedded, "events").with_env("DUCKLAKE_FILES_FROM_BYTES", "0");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    put(
        &mut c,
        &descriptor("f0", vec![r(0, 0, 9)], 10),
        vec![long_rows(0, 10)],
    )
    .await
    .unwrap();
    (lake, writer)
}

fn plus(b: RecordBatch, name: &str, col: arrow::array::ArrayRef) -> RecordBatch {
    let mut fields: Vec<Field> = b
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new(name, col.data_type().clone(), true));
    let mut cols = b.columns().to_vec();
    cols.push(col);
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()
}

/// Asserts the writer refused a streamed flush retryably, asking for it
/// whole (ingest then re-reads it from Kafka).
fn asked_for_whole(finished: Result<millpond_proto::FlushAck, millpond_ingest::flight::SendError>) {
    match finished {
        Err(millpond_ingest::flight::SendError::Broken(e)) => {
            assert!(e.contains("send it whole"), "{e}")
        }
        other => panic!("expected a retryable refusal, got {other:?}"),
    }
}

/// Gives a stream's batches time to reach their file, changes the table
/// with `sql` meanwhile, and expects the stream's end to ask for the flush
/// whole.
async fn finish_after_the_table_changes(
    stream: millpond_ingest::flight::FlushStream,
    lake: &Lake,
    sql: &str,
    d: &millpond_proto::FlushDescriptor,
) {
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    lake.execute(sql);
    let deadline = std::time::Duration::from_secs(60);
    asked_for_whole(stream.finish(d, deadline).await);
}

/// Streams `flushes` large flushes of 50,000 rows each and returns the
/// rows written.
async fn stream_large(writer: &Writer, first_id: usize, flushes: usize) -> u64 {
    let deadline = std::time::Duration::from_secs(60);
    let mut sender = millpond_ingest::flight::WriterClient::new(writer.addr.clone());
    let mut written = 0;
    for f in first_id..first_id + flushes {
        let start = f as i64 * 50_000;
        let mut stream = sender
            .open(&format!("l{f}"), &long_rows(start, 10_000), deadline)
            .await
            .unwrap();
        for k in 1..5 {
            stream
                .push(&long_rows(start + k * 10_000, 10_000), deadline)
                .await
                .unwrap();
        }
        let d = descriptor(&format!("l{f}"), vec![r(0, start, start + 49_999)], 50_000);
        written += stream.finish(&d, deadline).await.unwrap().rows_written;
    }
    written
}

/// The columns a streamed flush's files bring are added in the transaction
/// that registers the files: one snapshot alters the table and adds the
/// rows, and no other snapshot alters it.
async fn new_columns_come_with_their_files_in_one_snapshot() {
    let lake = Lake::new(Backend::Embedded, "events");
    let writer = Writer::start(&lake);
    // The first flush creates the table.
    assert_eq!(stream_large(&writer, 0, 1).await, 50_000);
    let deadline = std::time::Duration::from_secs(60);
    let with_extra = |start: i64| long_rows_with_extra(start, 10_000);
    let mut sender = millpond_ingest::flight::WriterClient::new(writer.addr.clone());
    let mut stream = sender
        .open("l1", &with_extra(50_000), deadline)
        .await
        .unwrap();
    for k in 1..5 {
        stream
            .push(&with_extra(50_000 + k * 10_000), deadline)
            .await
            .unwrap();
    }
    let ack = stream
        .finish(
            &descriptor("l1", vec![r(0, 50_000, 99_999)], 50_000),
            deadline,
        )
        .await
        .unwrap();
    assert_eq!(
        (ack.rows_written, ack.outcome()),
        (50_000, AckOutcome::Written)
    );
    assert_eq!(
        writer.metric("millpond_schema_columns_added_total", &[]),
        1.0
    );
    writer.stop();
    assert_eq!(
        lake.query(
            "SELECT count(*) FILTER (map_contains(changes, 'tables_altered')), \
             count(*) FILTER (map_contains(changes, 'tables_altered') \
                              AND map_contains(changes, 'tables_inserted_into')) \
             FROM ducklake_snapshots('lake')"
        ),
        ["1|1"]
    );
    assert_eq!(
        lake.query(
            "SELECT count(*), count(extra), count(*) FILTER (extra = 'e' || seq) \
             FROM lake.main.events WHERE seq >= 50000"
        ),
        ["50000|50000|50000"]
    );
    assert!(lake
        .data_file_writers()
        .iter()
        .all(|w| w.starts_with("parquet-rs")));
}

/// The files take the lake's `parquet_compression`; a codec they cannot
/// write keeps streamed flushes on DuckDB's insert, which honours it.
async fn streamed_files_follow_the_lake_compression() {
    let lake = Lake::new(Backend::Embedded, "events");
    Writer::start(&lake).stop(); // creates the lake
    lake.execute("CALL lake.set_option('parquet_compression', 'zstd')");
    let writer = Writer::start(&lake);
    assert_eq!(stream_large(&writer, 0, 1).await, 50_000);
    writer.stop();
    assert_eq!(lake.data_file_codecs(), ["ZSTD"]);
    assert!(lake
        .data_file_writers()
        .iter()
        .all(|w| w.starts_with("parquet-rs")));

    lake.execute("CALL lake.set_option('parquet_compression', 'gzip', table_name => 'events')");
    let writer = Writer::start(&lake);
    assert_eq!(stream_large(&writer, 1, 1).await, 50_000);
    writer.stop();
    assert_eq!(lake.data_file_codecs(), ["GZIP", "ZSTD"]);
    let writers = lake.data_file_writers();
    assert_eq!(
        writers.iter().filter(|w| w.starts_with("DuckDB")).count(),
        1,
        "the gzip flush was inserted: {writers:?}"
    );
    assert_eq!(
        lake.query("SELECT count(DISTINCT seq) FROM lake.main.events"),
        ["100000"]
    );
}

/// A streamed flush past the held part is written to Parquet files as it
/// arrives and registered with its offsets: every row and value lands, a
/// new column mid-flush starts a second file, a value that does not fit
/// its column and an unsafe key are dead letters, and the files are ours.
async fn a_large_streamed_flush_lands_through_files() {
    let lake = Lake::new(Backend::Embedded, "events");
    let writer = Writer::start(&lake);
    let deadline = std::time::Duration::from_secs(60);
    let mut sender = millpond_ingest::flight::WriterClient::new(writer.addr.clone());
    let mut stream = sender
        .open("big", &long_rows(0, 10_000), deadline)
        .await
        .unwrap();
    for k in 1..4 {
        stream
            .push(&long_rows(k * 10_000, 10_000), deadline)
            .await
            .unwrap();
    }
    // A new column, and an unsafe key with two values.
    let weird: Vec<Option<&str>> = (0..10_000).map(|i| (i < 2).then_some("w")).collect();
    let fifth = plus(
        long_rows_with_extra(40_000, 10_000),
        "$weird",
        Arc::new(StringArray::from(weird)),
    );
    stream.push(&fifth, deadline).await.unwrap();
    // `id` as text: it converts to the BIGINT column, but for one value.
    let last = long_rows(50_000, 10_000);
    let ids: Vec<String> = (50_000..60_000)
        .map(|i| {
            if i == 50_005 {
                "oops".into()
            } else {
                i.to_string()
            }
        })
        .collect();
    let last = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("seq", DataType::Int64, true),
            Field::new("id", DataType::Utf8, true),
            Field::new("name", DataType::Utf8, true),
        ])),
        vec![
            last.column(0).clone(),
            Arc::new(StringArray::from(ids)),
            last.column(2).clone(),
        ],
    )
    .unwrap();
    stream.push(&last, deadline).await.unwrap();
    let ack = stream
        .finish(&descriptor("big", vec![r(0, 0, 59_999)], 60_000), deadline)
        .await
        .unwrap();
    assert_eq!(
        (ack.rows_written, ack.dead_letters_written, ack.outcome()),
        (60_000, 3, AckOutcome::Written)
    );
    let mut c = client(&writer.addr).await;
    assert_eq!(recorded(&mut c, "events").await, vec![r(0, 0, 59_999)]);
    assert_eq!(
        writer.metric("millpond_records_written_total", &[]),
        60_000.0
    );
    writer.stop();
    assert_eq!(lake.count(), 60_000);
    assert_eq!(
        lake.query(
            "SELECT count(DISTINCT seq), sum(seq), count(id), count(*) FILTER (id = seq), \
             count(*) FILTER (name = lpad(seq::VARCHAR, 200, '0')), count(extra), \
             count(*) FILTER (extra = 'e' || seq), count(_inserted_at) FROM lake.main.events"
        ),
        ["60000|1799970000|59999|59999|60000|10000|10000|60000"]
    );
    assert_eq!(
        lake.query(
            "SELECT reason, column_name, original::VARCHAR, count(*) FROM lake.main.events_dead_letters \
             GROUP BY ALL ORDER BY ALL"
        ),
        ["type_mismatch|id|oops|1", "unsafe_field_name|$weird|w|2"]
    );
    assert_eq!(
        lake.data_file_codecs(),
        ["LZ4_RAW"],
        "unset, the table's files are LZ4_RAW"
    );
    let writers = lake.data_file_writers();
    assert_eq!(
        writers.len(),
        1,
        "one file, then a wider one for the new column, joined into one"
    );
    assert!(
        writers.iter().all(|w| w.starts_with("parquet-rs")),
        "written by the writer's own Parquet encoder, not an insert: {writers:?}"
    );
    let stray: Vec<String> = lake
        .storage_files()
        .into_keys()
        .filter(|f| f.contains("/main/events/"))
        .collect();
    assert_eq!(
        stray.len(),
        1,
        "no file beyond the registered one (the joined files are gone): {stray:?}"
    );
}

/// A batch a file cannot carry, once the flush is in files, ends the
/// stream with a retryable refusal: nothing lands, its files are deleted,
/// the flush sent whole lands, and the next streamed flush is inserted.
async fn a_streamed_flush_the_files_cannot_take_is_asked_for_whole() {
    let lake = Lake::new(Backend::Embedded, "events");
    let writer = Writer::start(&lake);
    let deadline = std::time::Duration::from_secs(60);
    let mut sender = millpond_ingest::flight::WriterClient::new(writer.addr.clone());
    let mut stream = sender
        .open("u1", &long_rows(0, 10_000), deadline)
        .await
        .unwrap();
    let mut sent = vec![long_rows(0, 10_000)];
    for k in 1..5 {
        let b = long_rows(k * 10_000, 10_000);
        let _ = stream.push(&b, deadline).await;
        sent.push(b);
    }
    let uuids =
        arrow::array::FixedSizeBinaryArray::try_from_iter((0..10u8).map(|i| [i; 16])).unwrap();
    let odd = plus(long_rows(50_000, 10), "u", Arc::new(uuids));
    let _ = stream.push(&odd, deadline).await;
    sent.push(odd);
    let d = descriptor("u1", vec![r(0, 0, 50_009)], 50_010);
    asked_for_whole(stream.finish(&d, deadline).await);
    let files_left = || {
        lake.storage_files()
            .into_keys()
            .filter(|f| f.contains("/main/events/"))
            .count()
    };
    for _ in 0..50 {
        if files_left() == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(files_left(), 0, "the refused flush's files are deleted");
    let mut c = client(&writer.addr).await;
    // Sent whole as ingest sends a flush: one schema.
    let (_, sent) = millpond_shared::unify::unify(sent).unwrap();
    let ack = put(&mut c, &d, sent).await.unwrap();
    assert_eq!(
        (ack.rows_written, ack.outcome()),
        (50_010, AckOutcome::Written)
    );
    // Streamed flushes are inserted from now on.
    let mut stream = sender
        .open("u2", &long_rows(60_000, 10_000), deadline)
        .await
        .unwrap();
    for k in 7..11 {
        stream
            .push(&long_rows(k * 10_000, 10_000), deadline)
            .await
            .unwrap();
    }
    let ack = stream
        .finish(
            &descriptor("u2", vec![r(0, 50_010, 50_010 + 49_999)], 50_000),
            deadline,
        )
        .await
        .unwrap();
    assert_eq!(ack.rows_written, 50_000);
    writer.stop();
    assert_eq!(lake.count(), 100_010);
    assert_eq!(
        lake.query("SELECT count(DISTINCT seq), count(u), min(u)::VARCHAR FROM lake.main.events"),
        ["100010|10|00000000-0000-0000-0000-000000000000"]
    );
    let writers = lake.data_file_writers();
    assert!(
        writers.iter().all(|w| w.starts_with("DuckDB")),
        "both flushes were inserted: {writers:?}"
    );
}

/// Files the lake refuses at the commit (here: the table was partitioned
/// while the flush's files were being written, and files carry no
/// partition values) end the flush with a retryable refusal; sent whole,
/// it lands. A table already partitioned when a flush starts its files is
/// seen then: that flush is held and inserted.
async fn files_the_lake_refuses_at_the_commit_are_asked_for_whole() {
    let (lake, writer) = files_from_the_first_byte().await;
    let deadline = std::time::Duration::from_secs(60);
    let mut sender = millpond_ingest::flight::WriterClient::new(writer.addr.clone());
    let mut stream = sender
        .open("p1", &long_rows(10, 100), deadline)
        .await
        .unwrap();
    stream.push(&long_rows(110, 100), deadline).await.unwrap();
    let d = descriptor("p1", vec![r(0, 10, 209)], 200);
    let sql = "ALTER TABLE lake.main.events SET PARTITIONED BY (seq)";
    finish_after_the_table_changes(stream, &lake, sql, &d).await;
    let mut c = client(&writer.addr).await;
    let ack = put(&mut c, &d, vec![long_rows(10, 100), long_rows(110, 100)])
        .await
        .unwrap();
    assert_eq!(
        (ack.rows_written, ack.outcome()),
        (200, AckOutcome::Written)
    );
    assert_eq!(
        writer.metric("millpond_errors_total", &[("type", "write_retry")]),
        1.0,
        "the refusal is counted, not retried inside the writer"
    );
    writer.stop();
    // A new writer (no pause) sees the partitioned table before any file.
    let writer = Writer::start(&lake);
    let mut sender = millpond_ingest::flight::WriterClient::new(writer.addr.clone());
    let stream = sender
        .open("p2", &long_rows(210, 100), deadline)
        .await
        .unwrap();
    let ack = stream
        .finish(&descriptor("p2", vec![r(0, 210, 309)], 100), deadline)
        .await
        .unwrap();
    assert_eq!(ack.rows_written, 100);
    writer.stop();
    assert_eq!(
        lake.query("SELECT count(*), count(DISTINCT seq) FROM lake.main.events"),
        ["310|310"]
    );
    let writers = lake.data_file_writers();
    assert!(
        writers.iter().all(|w| w.starts_with("DuckDB")),
        "every flush that landed was inserted: {writers:?}"
    );
}

/// A column another writer added, with another type, while a streamed
/// flush was being written to files: its files are refused in the write
/// transaction (the flush's `ADD COLUMN IF NOT EXISTS` does nothing), so
/// nothing of it lands, the files are deleted, and the flush sent whole
/// lands with the values the table's type cannot hold as dead letters.
async fn a_column_added_meanwhile_with_another_type_refuses_the_files() {
    let (lake, writer) = files_from_the_first_byte().await;
    let with_extra = |start: i64| long_rows_with_extra(start, 100);
    let deadline = std::time::Duration::from_secs(60);
    let mut sender = millpond_ingest::flight::WriterClient::new(writer.addr.clone());
    let mut stream = sender.open("x1", &with_extra(10), deadline).await.unwrap();
    stream.push(&with_extra(110), deadline).await.unwrap();
    let d = descriptor("x1", vec![r(0, 10, 209)], 200);
    let sql = "ALTER TABLE lake.main.events ADD COLUMN extra BIGINT";
    finish_after_the_table_changes(stream, &lake, sql, &d).await;
    let mut c = client(&writer.addr).await;
    assert_eq!(recorded(&mut c, "events").await, vec![r(0, 0, 9)]);
    let ack = put(&mut c, &d, vec![with_extra(10), with_extra(110)])
        .await
        .unwrap();
    assert_eq!(
        (ack.rows_written, ack.dead_letters_written, ack.outcome()),
        (200, 200, AckOutcome::Written)
    );
    writer.stop();
    assert_eq!(
        lake.query("SELECT count(*), count(DISTINCT seq), count(extra) FROM lake.main.events"),
        ["210|210|0"]
    );
    assert_eq!(
        lake.query(
            "SELECT reason, column_name, count(*) FROM lake.main.events_dead_letters GROUP BY ALL"
        ),
        ["type_mismatch|extra|200"]
    );
    let writers = lake.data_file_writers();
    assert!(
        writers.iter().all(|w| w.starts_with("DuckDB")),
        "only inserted flushes landed: {writers:?}"
    );
    let on_disk = lake
        .storage_files()
        .into_keys()
        .filter(|f| f.contains("/main/events/"))
        .count();
    assert_eq!(on_disk, writers.len(), "the refused files were deleted");
}

/// A second stream of the same flush id replaces the first: the first is
/// refused (retryably) from then on, and only the second's rows land.
async fn a_second_stream_of_a_flush_replaces_the_first() {
    let lake = Lake::new(Backend::Embedded, "events").with_env("DUCKLAKE_FILES_FROM_BYTES", "0");
    let writer = Writer::start(&lake);
    let deadline = std::time::Duration::from_secs(60);
    let mut one = millpond_ingest::flight::WriterClient::new(writer.addr.clone());
    let mut two = millpond_ingest::flight::WriterClient::new(writer.addr.clone());
    let mut first = one.open("d1", &long_rows(0, 100), deadline).await.unwrap();
    // Time for the first stream's opening batch to reach the writer.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let second = two.open("d1", &long_rows(100, 50), deadline).await.unwrap();
    let _ = first.push(&long_rows(150, 50), deadline).await;
    let ack = second
        .finish(&descriptor("d1", vec![r(0, 0, 49)], 50), deadline)
        .await
        .unwrap();
    assert_eq!(ack.rows_written, 50);
    asked_for_whole(
        first
            .finish(&descriptor("d1", vec![r(0, 50, 199)], 150), deadline)
            .await,
    );
    writer.stop();
    assert_eq!(
        lake.query("SELECT min(seq), max(seq), count(*) FROM lake.main.events"),
        ["100|149|50"]
    );
}

mod streamed_to_files {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_second_stream_replaces_the_first() {
        super::a_second_stream_of_a_flush_replaces_the_first().await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_lake_refuses_at_the_commit() {
        super::files_the_lake_refuses_at_the_commit_are_asked_for_whole().await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_large_flush_lands_through_files() {
        super::a_large_streamed_flush_lands_through_files().await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn follow_the_lake_compression() {
        super::streamed_files_follow_the_lake_compression().await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_column_added_meanwhile_with_another_type() {
        super::a_column_added_meanwhile_with_another_type_refuses_the_files().await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn new_columns_come_with_their_files() {
        super::new_columns_come_with_their_files_in_one_snapshot().await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_files_cannot_take_is_asked_for_whole() {
        super::a_streamed_flush_the_files_cannot_take_is_asked_for_whole().await
    }
}

/// `n` rows from `start` whose `name` is 1,000 characters no codec
/// shrinks much (a fixed pseudo-random sequence per row).
fn noisy_rows(start: i64, n: usize) -> RecordBatch {
    let seq: Vec<i64> = (start..start + n as i64).collect();
    let names: Vec<String> = seq.iter().map(|&i| noise(i)).collect();
    batch(
        vec![
            ("seq", DataType::Int64),
            ("id", DataType::Int64),
            ("name", DataType::Utf8),
        ],
        vec![
            Arc::new(Int64Array::from(seq.clone())),
            Arc::new(Int64Array::from(seq)),
            Arc::new(StringArray::from(names)),
        ],
    )
}

/// On a lake whose data is on S3, a streamed flush's files are uploaded to
/// the table's folder (a file past one upload part in several parts) and
/// registered there; nothing else is left in the bucket, and the values
/// read back as sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_flush_on_s3_lands_as_uploaded_files() {
    let lake = Lake::new(Backend::PostgresS3, "events").with_env("DUCKLAKE_FILES_FROM_BYTES", "0");
    let tmp = lake.dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let lake = lake.with_env("TMPDIR", tmp.to_str().unwrap());
    let writer = Writer::start(&lake);
    let mut sender = millpond_ingest::flight::WriterClient::new(writer.addr.clone());
    let deadline = STREAM_DEADLINE;
    let mut stream = sender
        .open("s3-1", &noisy_rows(0, 4000), deadline)
        .await
        .unwrap();
    for start in [4000, 8000] {
        stream
            .push(&noisy_rows(start, 4000), deadline)
            .await
            .unwrap();
    }
    // A new column: a second, small file, joined to the first.
    stream
        .push(&long_rows_with_extra(12_000, 10), deadline)
        .await
        .unwrap();
    let ack = stream
        .finish(&descriptor("s3-1", vec![r(0, 0, 12_009)], 12_010), deadline)
        .await
        .unwrap();
    assert_eq!(
        (ack.rows_written, ack.outcome()),
        (12_010, AckOutcome::Written)
    );
    writer.stop();
    let staged: Vec<_> = walk(&tmp)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect();
    assert!(
        staged.is_empty(),
        "local copies deleted once registered: {staged:?}"
    );
    assert_eq!(lake.count(), 12_010);
    let files = lake.data_files();
    let prefix = format!("{}main/events/", lake.data_path());
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files.iter().all(|f| f.starts_with(&prefix)), "{files:?}");
    let writers = lake.data_file_writers();
    assert!(
        writers.iter().all(|w| w.starts_with("parquet-rs")),
        "{writers:?}"
    );
    let stored = lake.storage_files();
    let in_table: Vec<(&String, &i64)> = stored
        .iter()
        .filter(|(f, _)| f.starts_with(&prefix))
        .collect();
    assert_eq!(
        in_table.len(),
        1,
        "nothing but the registered file: {in_table:?}"
    );
    assert!(
        in_table.iter().any(|(_, &size)| size > 8 << 20),
        "one file took a multipart upload: {in_table:?}"
    );
    for i in [0i64, 5_999, 11_999] {
        assert_eq!(
            lake.query(&format!(
                "SELECT name FROM lake.main.events WHERE seq = {i}"
            )),
            [noise(i)]
        );
    }
    assert_eq!(
        lake.query("SELECT count(DISTINCT name), count(extra) FROM lake.main.events"),
        ["12010|10"]
    );
}

/// Another local user planted a symlink where the writer's spool goes in
/// a shared TMPDIR, pointing at a folder of theirs: the writer on an S3
/// lake refuses to start, naming the path, and deletes nothing there.
/// With MILLPOND_SPOOL_DIR naming a folder of its own, it starts and
/// makes that folder private.
#[test]
fn a_symlink_planted_at_the_spool_refuses_startup_and_deletes_nothing() {
    use std::os::unix::fs::PermissionsExt;
    let lake = Lake::new(Backend::PostgresS3, "events");
    let tmp = lake.dir.path().join("tmp");
    let victim = lake.dir.path().join("victim");
    // Shaped as a writer's folder that no writer holds.
    let inside = victim.join(uuid::Uuid::new_v4().to_string());
    std::fs::create_dir_all(&inside).unwrap();
    std::fs::write(inside.join(".lock"), b"").unwrap();
    std::fs::write(inside.join("precious.parquet"), b"keep").unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let uid = std::fs::metadata(&tmp).map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    let planted = tmp.join(format!("millpond-writer-spool-{}", uid.unwrap()));
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    let lake = lake.with_env("TMPDIR", tmp.to_str().unwrap());

    let mut env = lake.env.clone();
    env.push((
        "MILLPOND_WRITER_ADDR".into(),
        format!("127.0.0.1:{}", millpond_tests::process::free_port()),
    ));
    env.push((
        "MILLPOND_WRITER_HTTP_PORT".into(),
        millpond_tests::process::free_port().to_string(),
    ));
    let mut w = millpond_tests::process::Proc::spawn("millpond-writer", &env, lake.dir.path());
    let status = w.wait_exit(std::time::Duration::from_secs(60));
    let logs = w.logs();
    assert!(!status.success(), "{logs}");
    assert!(logs.contains(&planted.display().to_string()), "{logs}");
    assert!(logs.contains("symbolic link"), "{logs}");
    assert!(inside.join("precious.parquet").exists(), "{logs}");

    let own = lake.dir.path().join("spool");
    let writer = Writer::start_with(&lake, &[("MILLPOND_SPOOL_DIR", own.to_str().unwrap())]);
    writer.stop();
    let mode = std::fs::metadata(&own).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    assert!(inside.join("precious.parquet").exists());
}

/// Every file under `dir`, at any depth.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flat_map(|e| {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p)
            } else {
                vec![p]
            }
        })
        .collect()
}

/// A column added behind the writer's back between its read of the table
/// and its write transaction, on S3: the transaction refuses the flush
/// before any COMMIT, the retry writes the files again with the column,
/// uploads those, and deletes the first uploads, which nothing registered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_written_again_on_s3_replace_their_first_uploads() {
    let lake = Lake::new(Backend::PostgresS3, "events").with_env("DUCKLAKE_FILES_FROM_BYTES", "0");
    let writer = Writer::start_with(
        &lake,
        &[("MILLPOND_FAILPOINT", "pause_before_publish:4000")],
    );
    let mut sender = millpond_ingest::flight::WriterClient::new(writer.addr.clone());
    let deadline = STREAM_DEADLINE;
    let stream = first_landed_then_second_open(&mut sender).await;
    let d2 = descriptor("s2", vec![r(0, 10, 19)], 10);
    let finish = tokio::spawn(async move { stream.finish(&d2, deadline).await });
    // The writer read the table and holds before uploading s2's files.
    tokio::time::sleep(std::time::Duration::from_millis(2000)).await;
    lake.admin()
        .execute_batch(
            "SET preserve_insertion_order = false; \
             ALTER TABLE lake.main.events ADD COLUMN d VARCHAR; \
             INSERT INTO lake.main.events (seq, id, d) SELECT 100 + i, 100 + i, 'x' FROM range(5) t(i)",
        )
        .unwrap();
    let ack = finish.await.unwrap().unwrap();
    assert_eq!((ack.rows_written, ack.outcome()), (10, AckOutcome::Written));
    assert!(
        writer.metric(
            "millpond_errors_total",
            &[("type", "ducklake_commit_contention")]
        ) >= 1.0,
        "the first attempt was refused"
    );
    writer.stop();
    assert_eq!(lake.count(), 25);
    assert_eq!(
        lake.query("SELECT count(d), count(*) FILTER (WHERE d IS NULL) FROM lake.main.events"),
        ["5|20"]
    );
    let stray = lake.unregistered_table_files();
    assert!(
        stray.is_empty(),
        "first uploads left in the bucket: {stray:?}"
    );
}

/// Any Flight client may send dead letters, and their reasons are metric
/// labels: a reason Millpond does not give counts as `other`, so the series
/// stay bounded, and the dead-letter table keeps its text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_reason_millpond_does_not_give_counts_as_other() {
    let lake = Lake::new(Backend::Embedded, "events");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let mut desc = descriptor("f", vec![r(0, 0, 5)], 3);
    for (offset, reason) in [
        (3, "made-up reason 1"),
        (4, "made-up reason 2"),
        (5, "invalid_json"),
    ] {
        desc.dead_letters.push(millpond_proto::DeadLetter {
            topic: "events".into(),
            partition: 0,
            offset,
            reason: reason.into(),
            original: b"x".to_vec(),
            ..Default::default()
        });
    }
    let ack = put(&mut c, &desc, vec![rows(0, 3)]).await.unwrap();
    assert_eq!(ack.dead_letters_written, 3);
    let dead = |reason| writer.metric("millpond_dead_letters_total", &[("reason", reason)]);
    assert_eq!((dead("other"), dead("invalid_json")), (2.0, 1.0));
    assert!(
        !writer.metrics().contains("made-up"),
        "{}",
        writer.metrics()
    );
    writer.stop();
    assert_eq!(
        lake.query("SELECT reason FROM lake.main.events_dead_letters ORDER BY 1"),
        ["invalid_json", "made-up reason 1", "made-up reason 2"]
    );
}

/// In Kubernetes or in the image, the embedded lake by default (the
/// container's own disk) is refused at startup, naming the settings to
/// choose from; nothing is created. A lake folder given explicitly starts.
#[test]
fn the_default_embedded_lake_is_refused_in_a_container() {
    let dir = tempfile::tempdir().unwrap();
    for place in [
        ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
        ("MILLPOND_IMAGE", "writer-ducklake"),
    ] {
        let mut child =
            std::process::Command::new(millpond_tests::process::binary("millpond-writer"))
                .current_dir(dir.path())
                .env_remove("DUCKLAKE_RDS_HOST")
                .env_remove("MILLPOND_LAKE_DIR")
                .env("DUCKLAKE_TABLE", "events")
                .env("MILLPOND_WRITER_ADDR", "127.0.0.1:0")
                .env("MILLPOND_WRITER_HTTP_PORT", "0")
                .env(place.0, place.1)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if std::time::Instant::now() > until {
                child.kill().unwrap();
                child.wait().unwrap();
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert!(
            status.is_some_and(|s| !s.success()),
            "{place:?}: the writer must refuse to start: {stderr}"
        );
        for name in ["DUCKLAKE_RDS_HOST", "MILLPOND_LAKE_DIR", place.0] {
            assert!(stderr.contains(name), "{place:?} names {name}: {stderr}");
        }
        assert!(
            !dir.path().join("millpond-lake").exists(),
            "nothing is created in the container's disk"
        );
    }
    let lake = dir.path().join("volume");
    let w = Writer::start_env(
        &[
            ("DUCKLAKE_TABLE".into(), "events".into()),
            ("MILLPOND_LAKE_DIR".into(), lake.display().to_string()),
            ("KUBERNETES_SERVICE_HOST".into(), "10.0.0.1".into()),
        ],
        dir.path(),
        &[],
    );
    w.stop();
    assert!(lake.join("catalog.sqlite").exists());
}

/// A DoPut past MILLPOND_WRITER_MAX_FLUSH_BYTES is refused as it arrives
/// with RESOURCE_EXHAUSTED, permanent and named: nothing is written, no
/// offset recorded, and the writer goes on serving flushes within the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_past_the_size_bound_is_refused_with_resource_exhausted() {
    use prost::Message;
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start_with(&lake, &[("MILLPOND_WRITER_MAX_FLUSH_BYTES", "4MiB")]);
    let mut c = client(&w.addr).await;
    let big: Vec<_> = (0..10).map(|i| rows(i * 50_000, 50_000)).collect();
    let d = descriptor(
        "big",
        vec![OffsetRange::new("events", 0, 0, 499_999)],
        500_000,
    );
    let e = put(&mut c, &d, big).await.expect_err("over the bound");
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
    assert!(
        e.message().contains("MILLPOND_WRITER_MAX_FLUSH_BYTES"),
        "{e:?}"
    );
    let details = millpond_proto::WriteError::decode(e.details()).unwrap();
    assert_eq!(details.kind(), millpond_proto::ErrorKind::Permanent);
    assert_eq!(details.error_type, "flush_too_large");

    let d = descriptor("small", vec![OffsetRange::new("events", 0, 0, 999)], 1000);
    let ack = put(&mut c, &d, vec![rows(0, 1000)]).await.unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    let refused = |t: &str| w.metric("millpond_errors_total", &[("type", t)]);
    assert_eq!(refused("flush_too_large"), 1.0);
    assert_eq!(refused("flight_request"), 0.0);
    w.stop();
    assert_eq!(lake.count(), 1000, "nothing of the refused flush");
}

/// More dead letters than DuckLake inlines, from a streamed flush's rows
/// (an unsafe key in every row) and its trailer (records that are not
/// rows), land once each, through a Parquet file of the dead-letter table
/// registered in the flush's transaction; a resend of the flush adds none,
/// and on S3 no local copy or unregistered upload stays.
async fn many_dead_letters_of_a_streamed_flush_land_once_as_a_file(backend: Backend) {
    let lake = Lake::new(backend, "events").with_env("DUCKLAKE_FILES_FROM_BYTES", "0");
    let tmp = lake.dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let lake = lake.with_env("TMPDIR", tmp.to_str().unwrap());
    let writer = Writer::start(&lake);
    let mut sender = millpond_ingest::flight::WriterClient::new(writer.addr.clone());
    let deadline = STREAM_DEADLINE;
    let rows = |start: i64| {
        let weird: Vec<String> = (start..start + 2000).map(|i| format!("w{i}")).collect();
        plus(
            long_rows(start, 2000),
            "$weird",
            Arc::new(StringArray::from(weird)),
        )
    };
    let records: Vec<millpond_proto::DeadLetter> = (6000..7500)
        .map(|o| millpond_proto::DeadLetter {
            topic: "events".into(),
            offset: o,
            reason: "invalid_json".into(),
            original: format!("{{bad {o}").into_bytes(),
            ..Default::default()
        })
        .collect();
    let mut desc = descriptor("dl-1", vec![r(0, 0, 7_499)], 6000);
    desc.dead_letters = records;
    for attempt in 0..2 {
        let mut stream = sender.open("dl-1", &rows(0), deadline).await.unwrap();
        for start in [2000, 4000] {
            stream.push(&rows(start), deadline).await.unwrap();
        }
        let ack = stream.finish(&desc, deadline).await.unwrap();
        let want = if attempt == 0 {
            (6000, 7500, AckOutcome::Written)
        } else {
            (0, 0, AckOutcome::AlreadyRecorded)
        };
        assert_eq!(
            (ack.rows_written, ack.dead_letters_written, ack.outcome()),
            want
        );
    }
    writer.stop();
    assert_eq!(lake.count(), 6000);
    assert_eq!(
        lake.query(
            "SELECT count(*), count(DISTINCT original), \
             count(*) FILTER (reason = 'unsafe_field_name' AND column_name = '$weird'), \
             count(*) FILTER (reason = 'invalid_json' AND column_name IS NULL), \
             count(*) FILTER (flush_id = 'dl-1' AND _inserted_at IS NOT NULL AND topic = 'events') \
             FROM lake.main.events_dead_letters"
        ),
        ["7500|7500|6000|1500|7500"]
    );
    assert_eq!(
        lake.query(
            "SELECT count(*) FROM lake.main.events_dead_letters \
             WHERE original = ('w' || 4321)::BLOB OR original = '{bad 7499'::BLOB"
        ),
        ["2"]
    );
    let files =
        lake.query("SELECT data_file FROM ducklake_list_files('lake', 'events_dead_letters')");
    let prefix = format!("{}main/events_dead_letters/", lake.data_path());
    assert_eq!(files.len(), 1, "one file, not inlined rows: {files:?}");
    assert!(files[0].starts_with(&prefix), "{files:?}");
    let by = lake.query(&format!(
        "SELECT created_by FROM parquet_file_metadata('{}')",
        files[0]
    ));
    assert!(
        by.iter().all(|b| b.starts_with("parquet-rs")),
        "the writer's own file, not DuckDB's insert: {by:?}"
    );
    let stored = lake.files_under(&prefix);
    assert_eq!(
        stored.len(),
        1,
        "nothing but the registered file: {stored:?}"
    );
    let staged: Vec<_> = walk(&tmp)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect();
    if backend == Backend::PostgresS3 {
        assert!(staged.is_empty(), "local copies deleted: {staged:?}");
    }
}

mod many_dead_letters {
    use millpond_tests::lake::Backend;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn land_once_as_a_file_embedded() {
        super::many_dead_letters_of_a_streamed_flush_land_once_as_a_file(Backend::Embedded).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn land_once_as_a_file_on_s3() {
        super::many_dead_letters_of_a_streamed_flush_land_once_as_a_file(Backend::PostgresS3).await
    }
}
