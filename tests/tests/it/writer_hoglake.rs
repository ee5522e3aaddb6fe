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
