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

    // The first flush again, as ingest resends it after a lost ack: same
    // offset ranges, a new payload; nothing is registered twice.
    let again = put(&mut c, &first, first_batches()).await.unwrap();
    assert_eq!(again.outcome(), AckOutcome::AlreadyRecorded);
    assert_eq!(again.rows_written, 0);
    assert_eq!(lake.record_counts().await, vec![7, 15]);

    // The catalog has no offsets API: nothing to report, by design.
    assert!(recorded(&mut c, "events").await.is_empty());

    let metric = |name: &str, labels: &[(&str, &str)]| w.metric(name, labels);
    assert_eq!(metric("millpond_records_written_total", &[]), 22.0);
    assert_eq!(metric("millpond_flushes_already_recorded_total", &[]), 1.0);
    // The resend's rebuilt upload was never registered: counted, by reason.
    assert_eq!(
        metric(
            "millpond_hoglake_orphaned_files_total",
            &[("reason", "already_published")]
        ),
        1.0
    );
    assert_eq!(
        metric(
            "millpond_errors_total",
            &[("type", "ducklake_commit_contention")]
        ),
        0.0
    );

    w.stop();
}
