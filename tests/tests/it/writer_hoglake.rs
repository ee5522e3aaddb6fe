//! The writer process with MILLPOND_DESTINATION=hoglake, against the
//! project's hoglake emulator (a Python subprocess) and moto S3 from
//! scripts/services.sh: two flushes DoPut over Flight, one resent; the rows
//! must be registered in the catalog once, the resend acknowledged
//! `AlreadyRecorded`, and the writer's metrics must agree.
use millpond_proto::{AckOutcome, OffsetRange};
use millpond_tests::flight::{client, descriptor, put, recorded, rows, with_coordinates};
use millpond_tests::hoglake::{Hoglake, NAMESPACE, TABLE};
use millpond_tests::writer::Writer;

fn r(p: i32, first: i64, last: i64) -> OffsetRange {
    OffsetRange::new("events", p, first, last)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hoglake_writer_publishes_flushes_once_and_acks_a_resend_already_recorded() {
    let lake = Hoglake::start();
    let w = Writer::start_env(&lake.writer_env(), lake.dir.path(), &[]);

    let mut c = client(&w.addr).await;
    let first = descriptor("f1", vec![r(0, 0, 9), r(1, 0, 4)], 15);
    let first_batches = || {
        vec![
            with_coordinates(rows(0, 10), 0, 0),
            with_coordinates(rows(10, 5), 1, 0),
        ]
    };
    let ack = put(&mut c, &first, first_batches()).await.unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    assert_eq!(ack.rows_written, 15);
    assert_eq!(ack.sink, "hoglake");
    assert_eq!(ack.table, format!("{NAMESPACE}.{TABLE}"));

    let second = descriptor("f2", vec![r(0, 10, 16)], 7);
    let ack = put(&mut c, &second, vec![with_coordinates(rows(15, 7), 0, 10)])
        .await
        .unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    assert_eq!(ack.rows_written, 7);
    assert_eq!(lake.record_counts().await, vec![7, 15]);

    // The last flush again, as ingest resends it after a lost ack: the
    // offsets tables end at exactly its ranges, so nothing is sent on.
    let again = put(&mut c, &second, vec![with_coordinates(rows(15, 7), 0, 10)])
        .await
        .unwrap();
    assert_eq!(again.outcome(), AckOutcome::AlreadyRecorded);
    assert_eq!(again.rows_written, 0);
    assert_eq!(lake.record_counts().await, vec![7, 15]);
    // An earlier flush again reaches below what its partition recorded
    // last: refused as an overlap (ingest proves the recorded offsets
    // against Kafka and sends only the rest), never published twice.
    let overlap = put(&mut c, &first, first_batches()).await.unwrap_err();
    assert_eq!(overlap.code(), tonic::Code::FailedPrecondition, "{overlap}");
    assert!(overlap.message().contains("up to 16"), "{overlap}");
    assert_eq!(lake.record_counts().await, vec![7, 15]);

    // What the offsets tables hold: each partition's last range.
    assert_eq!(
        recorded(&mut c, "events").await,
        vec![r(0, 10, 16), r(1, 0, 4)]
    );

    let metric = |name: &str, labels: &[(&str, &str)]| w.metric(name, labels);
    assert_eq!(metric("millpond_records_written_total", &[]), 22.0);
    assert_eq!(metric("millpond_flushes_already_recorded_total", &[]), 1.0);
    // Nothing was uploaded for the resend or the overlap.
    assert_eq!(metric("millpond_hoglake_orphaned_files_total", &[]), 0.0);
    assert_eq!(
        metric(
            "millpond_errors_total",
            &[("type", "ducklake_commit_contention")]
        ),
        0.0
    );

    w.stop();
}

/// The hoglake destination keys its commits by the flush's offset ranges, so
/// a flush without any (a hand-driven Flight client) is refused, never
/// acknowledged as already published while its rows are dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_without_offset_ranges_is_refused_not_dropped() {
    let lake = Hoglake::start();
    let w = Writer::start_env(&lake.writer_env(), lake.dir.path(), &[]);
    let mut c = client(&w.addr).await;
    for (i, id) in ["a", "b", "c"].into_iter().enumerate() {
        let refused = put(
            &mut c,
            &descriptor(id, vec![], 5),
            vec![rows(5 * i as i64, 5)],
        )
        .await
        .expect_err("a range-less flush must be refused");
        assert_eq!(
            refused.code(),
            tonic::Code::FailedPrecondition,
            "{refused:?}"
        );
        assert!(
            refused.message().contains("no Kafka offset ranges"),
            "{refused:?}"
        );
    }
    // Then a flush with its ranges: only its rows are in the table.
    let ack = put(
        &mut c,
        &descriptor("d", vec![r(0, 0, 4)], 5),
        vec![with_coordinates(rows(100, 5), 0, 0)],
    )
    .await
    .unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    assert_eq!(
        lake.record_counts().await,
        vec![5],
        "nothing else published"
    );
    assert_eq!(
        w.metric("millpond_flushes_already_recorded_total", &[]),
        0.0
    );
    w.stop();
}

/// A column whose type changes between flushes is never rounded or nulled
/// silently: the value that does not fit the live column is NULL in its row
/// and a dead letter, committed in the same commit as the rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_type_keeps_exact_values_and_dead_letters_the_rest() {
    use arrow::array::{ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch};
    use arrow::datatypes::Int64Type;
    use std::sync::Arc;

    let lake = Hoglake::start();
    let w = Writer::start_env(&lake.writer_env(), lake.dir.path(), &[]);
    let mut c = client(&w.addr).await;
    let batch = |n: ArrayRef| {
        let ids = Int64Array::from_iter_values(0..n.len() as i64);
        RecordBatch::try_from_iter(vec![("id", Arc::new(ids) as ArrayRef), ("n", n)]).unwrap()
    };
    let ints = batch(Arc::new(Int64Array::from(vec![1, 2])));
    let ack = put(
        &mut c,
        &descriptor("f1", vec![r(0, 0, 1)], 2),
        vec![with_coordinates(ints, 0, 0)],
    )
    .await
    .unwrap();
    assert_eq!(ack.rows_written, 2);

    let floats = batch(Arc::new(Float64Array::from(vec![1.5, 3.0])));
    let ack = put(
        &mut c,
        &descriptor("f2", vec![r(0, 2, 3)], 2),
        vec![with_coordinates(floats, 0, 2)],
    )
    .await
    .unwrap();
    assert_eq!((ack.rows_written, ack.dead_letters_written), (2, 1));

    let mut seen = Vec::new();
    for f in lake.files().await {
        let b = lake.read(&f).await;
        seen.extend(
            b.column_by_name("n")
                .unwrap()
                .as_primitive::<Int64Type>()
                .iter(),
        );
    }
    seen.sort();
    assert_eq!(
        seen,
        [None, Some(1), Some(2), Some(3)],
        "1.5 must not land as 1"
    );

    let dl = lake
        .catalog()
        .list_files(NAMESPACE, &format!("{TABLE}_dead_letters"), None)
        .await
        .unwrap();
    assert_eq!(dl.len(), 1);
    let letters = lake.read(&dl[0]).await;
    assert_eq!(letters.num_rows(), 1);
    let text = |name: &str| {
        let col = letters.column_by_name(name).unwrap();
        match col.data_type() {
            arrow::datatypes::DataType::Binary => {
                String::from_utf8(col.as_binary::<i32>().value(0).to_vec()).unwrap()
            }
            _ => col.as_string::<i32>().value(0).to_string(),
        }
    };
    assert_eq!(text("original"), "1.5");
    assert_eq!(text("reason"), "type_mismatch");
    assert_eq!(text("column_name"), "n");
    assert_eq!(text("live_type"), "long");
    let offset = letters
        .column_by_name("kafka_offset")
        .unwrap()
        .as_primitive::<Int64Type>()
        .value(0);
    assert_eq!(offset, 2, "the dead letter names its record");
    assert_eq!(
        w.metric(
            "millpond_dead_letter_values_total",
            &[("reason", "type_mismatch")]
        ),
        1.0
    );
    assert!(w.metric("millpond_hoglake_files_written_total", &[]) >= 3.0);
    // The original's histogram names.
    assert!(w.metric("millpond_flush_files_count", &[]) >= 1.0);
    assert!(w.metric("millpond_flush_file_rows_count", &[]) >= 1.0);
    assert!(w.metric("millpond_flush_files_bucket", &[("le", "2048")]) >= 1.0);
    w.stop();
}

/// Three commits refused with 409 `commit_conflict`, then one accepted: the
/// publisher re-prepares after each refusal, the flush lands once, and
/// `errors_total{type="hoglake_commit_contention"}` counts each 409 the
/// catalog answered, as the original did (not once per failed write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_409_counts_once_on_hoglake_commit_contention() {
    let lake = Hoglake::start();
    let w = Writer::start_env(&lake.writer_env(), lake.dir.path(), &[]);
    lake.emulator.fault(serde_json::json!({
        "method": "POST", "path": "/prepared$", "action": "status",
        "status": 409, "count": 3
    }));
    let mut c = client(&w.addr).await;
    let flush = descriptor("f1", vec![r(0, 0, 9)], 10);
    let ack = put(&mut c, &flush, vec![with_coordinates(rows(0, 10), 0, 0)])
        .await
        .unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    assert_eq!(lake.record_counts().await, vec![10]);

    let commits = lake.emulator.commits();
    let refused = commits.iter().filter(|c| c.status == Some(409)).count();
    assert_eq!(refused, 3, "{commits:?}");
    assert_eq!(
        w.metric(
            "millpond_errors_total",
            &[("type", "hoglake_commit_contention")]
        ),
        3.0
    );
    assert_eq!(w.metric("millpond_records_written_total", &[]), 10.0);
    w.stop();
}

/// Sends `batch` as flush `id`, partition 0 from offset `first`.
async fn send(
    c: &mut arrow_flight::FlightClient,
    id: &str,
    batch: arrow::array::RecordBatch,
    first: i64,
) -> millpond_proto::FlushAck {
    let n = batch.num_rows();
    let d = descriptor(id, vec![r(0, first, first + n as i64 - 1)], n);
    put(c, &d, vec![with_coordinates(batch, 0, first)])
        .await
        .unwrap()
}

/// A text column of `name` holding `values`, with an `id` column.
fn text_batch(
    name: &str,
    ids: std::ops::Range<i64>,
    values: Vec<Option<&str>>,
) -> arrow::array::RecordBatch {
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use std::sync::Arc;
    arrow::array::RecordBatch::try_from_iter(vec![
        (
            "id",
            Arc::new(Int64Array::from_iter_values(ids)) as ArrayRef,
        ),
        (name, Arc::new(StringArray::from(values)) as ArrayRef),
    ])
    .unwrap()
}

/// Every value of text column `name` in the table's registered files.
async fn text_values(lake: &Hoglake, name: &str) -> Vec<Option<String>> {
    use arrow::array::AsArray;
    let mut seen = Vec::new();
    for f in lake.files().await {
        let b = lake.read(&f).await;
        if let Some(col) = b.column_by_name(name) {
            seen.extend(col.as_string::<i32>().iter().map(|v| v.map(str::to_owned)));
        }
    }
    seen.sort();
    seen
}

/// Two writers meet the same new key at the same moment. The emulator
/// holds the first writer's alter (a `delay` fault) while the second adds
/// the column and publishes; the held alter is then refused (the column
/// exists). The first writer reads the table again, finds the column and
/// writes its values into it: no dead letter, no schema error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_adding_the_same_column_at_once_both_keep_their_values() {
    let lake = Hoglake::start();
    let w1 = Writer::start_env(&lake.writer_env(), lake.dir.path(), &[]);
    let w2 = Writer::start_env(&lake.writer_env(), lake.dir.path(), &[]);
    let mut c1 = client(&w1.addr).await;
    let mut c2 = client(&w2.addr).await;
    // The table exists, without the new column.
    let ack = put(
        &mut c1,
        &descriptor("f0", vec![r(0, 0, 4)], 5),
        vec![with_coordinates(rows(0, 5), 0, 0)],
    )
    .await
    .unwrap();
    assert_eq!(ack.rows_written, 5);

    lake.emulator.fault(serde_json::json!({
        "method": "POST", "path": "/tables/events/alter$", "action": "delay",
        "delay_ms": 3000, "count": 1
    }));
    let first = tokio::spawn(async move {
        let batch = text_batch(
            "extra",
            5..10,
            vec![Some("a"), Some("b"), None, Some("c"), Some("d")],
        );
        put(
            &mut c1,
            &descriptor("f1", vec![r(0, 5, 9)], 5),
            vec![with_coordinates(batch, 0, 5)],
        )
        .await
    });
    // The first writer's alter is held: the second one adds the column.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while lake.emulator.requests("/tables/events/alter$").is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the first writer never altered the table"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let batch = text_batch("extra", 100..103, vec![Some("x"), Some("y"), Some("z")]);
    let ack = put(
        &mut c2,
        &descriptor("g1", vec![r(1, 0, 2)], 3),
        vec![with_coordinates(batch, 1, 0)],
    )
    .await
    .unwrap();
    assert_eq!((ack.rows_written, ack.dead_letters_written), (3, 0));
    let ack = first.await.unwrap().unwrap();
    assert_eq!(
        (ack.outcome(), ack.rows_written, ack.dead_letters_written),
        (AckOutcome::Written, 5, 0),
        "the loser writes its values into the column the winner added"
    );

    // The race happened as staged: the held alter was answered last, refused.
    let alters = lake.emulator.requests("/tables/events/alter$");
    let statuses: Vec<_> = alters.iter().map(|a| a["status"].as_u64()).collect();
    assert_eq!(statuses, [Some(422), Some(200)], "{alters:?}");

    for (w, added) in [(&w1, 0.0), (&w2, 1.0)] {
        assert_eq!(
            w.metric("millpond_errors_total", &[("type", "schema")]),
            0.0
        );
        assert_eq!(w.metric("millpond_dead_letters_total", &[]), 0.0);
        assert_eq!(w.metric("millpond_schema_columns_added_total", &[]), added);
    }
    assert_eq!(lake.record_counts().await, vec![3, 5, 5]);
    let mut values = text_values(&lake, "extra").await;
    values.retain(Option::is_some);
    let want: Vec<Option<String>> = ["a", "b", "c", "d", "x", "y", "z"]
        .map(|v| Some(v.to_owned()))
        .into();
    assert_eq!(values, want, "every value of both writers landed");
    w1.stop();
    w2.stop();
}

/// A uuid sent one way and live the other: the live column wins, both
/// ways, as on DuckLake. Each flush that rewrites counts on
/// `errors_total{type="schema"}` (and so does each column that lost a
/// value); the log says it once per column and direction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uuid_rewrite_counts_a_schema_error_and_is_logged_once() {
    use arrow::array::{AsArray, FixedSizeBinaryArray, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    let lake = Hoglake::start();
    let w = Writer::start_env(&lake.writer_env(), lake.dir.path(), &[]);
    let mut c = client(&w.addr).await;
    let uuid = uuid::Uuid::parse_str("f79c3e09-677c-4bbd-a479-3f349cb785e7").unwrap();
    let uuids = |name: &str| {
        let field = Field::new(name, DataType::FixedSizeBinary(16), true).with_metadata(
            std::collections::HashMap::from([(
                "ARROW:extension:name".to_owned(),
                "arrow.uuid".to_owned(),
            )]),
        );
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![field])),
            vec![Arc::new(
                FixedSizeBinaryArray::try_from_iter(std::iter::once(uuid.into_bytes())).unwrap(),
            )],
        )
        .unwrap()
    };
    let text = |name: &str, values: Vec<&str>| {
        RecordBatch::try_from_iter(vec![(
            name,
            Arc::new(arrow::array::StringArray::from(values)) as arrow::array::ArrayRef,
        )])
        .unwrap()
    };
    // Live uuid (created from a uuid column), text sent: parsed to bytes.
    send(&mut c, "a", uuids("u"), 0).await;
    let ack = send(
        &mut c,
        "b",
        text("u", vec!["{F79C3E09-677C-4BBD-A479-3F349CB785E7}", "nope"]),
        1,
    )
    .await;
    assert_eq!((ack.rows_written, ack.dead_letters_written), (2, 1));
    // Live string, uuid sent: written as canonical text.
    send(&mut c, "c", text("v", vec!["x"]), 3).await;
    send(&mut c, "d", uuids("v"), 4).await;
    let schema_errors = || w.metric("millpond_errors_total", &[("type", "schema")]);
    assert_eq!(
        schema_errors(),
        3.0,
        "two rewrites, and one flush with a value that is no uuid"
    );
    // The same rewrite again: counted again, not said again.
    send(
        &mut c,
        "e",
        text("u", vec!["f79c3e09677c4bbda4793f349cb785e7"]),
        5,
    )
    .await;
    assert_eq!(schema_errors(), 4.0);
    let said = w
        .proc
        .logs()
        .lines()
        .filter(|l| l.contains("uuid column sent one way and live the other"))
        .map(
            |l| match (l.contains("column=u "), l.contains("column=v ")) {
                (true, false) => "u",
                (false, true) => "v",
                _ => panic!("a rewrite line names one column: {l}"),
            },
        )
        .collect::<Vec<_>>();
    assert_eq!(said, ["u", "v"], "{}", w.proc.logs());
    w.stop();

    let table = lake
        .catalog()
        .get_table(NAMESPACE, TABLE)
        .await
        .unwrap()
        .unwrap();
    let live = |name: &str| {
        table
            .columns
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.column_type.name())
    };
    assert_eq!((live("u"), live("v")), (Some("uuid"), Some("string")));
    let (mut us, mut vs) = (Vec::new(), Vec::new());
    for f in lake.files().await {
        let b = lake.read(&f).await;
        if let Some(u) = b.column_by_name("u") {
            us.extend(
                u.as_fixed_size_binary()
                    .iter()
                    .map(|v| v.map(|b| uuid::Uuid::from_slice(b).unwrap().to_string())),
            );
        }
        if let Some(v) = b.column_by_name("v") {
            vs.extend(v.as_string::<i32>().iter().map(|v| v.map(str::to_owned)));
        }
    }
    let canonical = Some(uuid.to_string());
    us.sort();
    vs.sort();
    assert_eq!(
        us,
        [
            None,
            None,
            None,
            canonical.clone(),
            canonical.clone(),
            canonical.clone()
        ],
        "a, b (one value not a uuid) and e; c and d have no u"
    );
    // c and d's file has v; e's file (written after) has v NULL.
    assert_eq!(vs, [None, canonical, Some("x".to_owned())]);
}

/// A flush whose uploads partly land: S3 refuses (403) the upload of one
/// partition's offsets-table file once, so the first prepare fails after
/// the data file and the other partition's offsets file landed. Those two
/// are counted on `hoglake_orphaned_files_total{reason="prepare_failed"}`
/// and named in the log; neither is ever registered; the publisher's next
/// attempt prepares anew and the flush lands once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepare_that_fails_after_uploads_landed_counts_and_names_its_orphans() {
    use millpond_tests::s3_faults::S3Faults;

    let lake = Hoglake::start();
    let s3 = S3Faults::start(lake.s3.endpoint.as_deref().unwrap()).await;
    let w = Writer::start_env(
        &lake.writer_env(),
        lake.dir.path(),
        &[("HOGLAKE_S3_ENDPOINT", &s3.endpoint)],
    );
    let mut c = client(&w.addr).await;
    s3.refuse_puts("/_millpond_offsets_events_1/", 1);
    let flush = descriptor("f1", vec![r(0, 0, 9), r(1, 0, 4)], 15);
    let ack = put(
        &mut c,
        &flush,
        vec![
            with_coordinates(rows(0, 10), 0, 0),
            with_coordinates(rows(10, 5), 1, 0),
        ],
    )
    .await
    .unwrap();
    assert_eq!((ack.outcome(), ack.rows_written), (AckOutcome::Written, 15));
    assert_eq!(s3.refused().len(), 1, "{:?}", s3.refused());
    assert_eq!(lake.record_counts().await, vec![15]);
    assert_eq!(
        w.metric(
            "millpond_hoglake_orphaned_files_total",
            &[("reason", "prepare_failed")]
        ),
        2.0,
        "the data file and partition 0's offsets file landed before the refusal"
    );
    assert_eq!(w.metric("millpond_hoglake_orphaned_files_total", &[]), 2.0);

    // The log names them: the data file and partition 0's offsets file.
    let named: Vec<String> = w
        .proc
        .logs()
        .lines()
        .filter(|l| l.contains("will never be registered") && l.contains("prepare_failed"))
        .flat_map(|l| {
            l.split(|c: char| c.is_whitespace() || c == '"')
                .filter(|t| t.starts_with("s3://"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    let data = format!("/data/{NAMESPACE}/{TABLE}/");
    let offsets0 = format!("/data/{NAMESPACE}/_millpond_offsets_{TABLE}_0/");
    assert_eq!(named.len(), 2, "{}", w.proc.logs());
    assert!(named.iter().any(|u| u.contains(&data)), "{named:?}");
    assert!(named.iter().any(|u| u.contains(&offsets0)), "{named:?}");
    // Each is in S3 and registered nowhere; the flush's own files are others.
    let store = millpond_hoglake::store::DataStore::new(&lake.data_path, &lake.s3).unwrap();
    for uri in &named {
        assert!(store.get(uri).await.is_ok(), "{uri} is not in S3");
    }
    let catalog = lake.catalog();
    for table in [TABLE.to_owned(), format!("_millpond_offsets_{TABLE}_0")] {
        let files = catalog.list_files(NAMESPACE, &table, None).await.unwrap();
        assert_eq!(files.len(), 1, "{table}: {files:?}");
        assert!(
            !named.contains(&files[0].path),
            "{table} registered an orphan"
        );
    }
    assert_eq!(lake.emulator.commits().len(), 1, "one commit");
    w.stop();
}
