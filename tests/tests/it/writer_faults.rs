//! Crashes, outages and concurrent writers against real services.
use std::process::Command;
use std::time::Duration;

use millpond_proto::{AckOutcome, ErrorKind, OffsetRange};
use millpond_tests::flight::{client, descriptor, put, recorded, rows};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::process::free_port;
use millpond_tests::proxy::Proxy;
use millpond_tests::writer::Writer;
use millpond_tests::{required_env, unique};

fn r(p: i32, first: i64, last: i64) -> OffsetRange {
    OffsetRange::new("events", p, first, last)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_between_commit_and_ack_then_resend_writes_once() {
    for backend in [Backend::Embedded, Backend::PostgresS3] {
        let lake = Lake::new(backend, "events");
        let mut w = Writer::start_with(&lake, &[("MILLPOND_FAILPOINT", "kill_after_commit")]);
        let d = descriptor("crash-1", vec![r(0, 0, 499)], 500);
        let mut c = client(&w.addr).await;
        let err = put(&mut c, &d, vec![rows(0, 500)])
            .await
            .expect_err("the writer died before acking");
        assert_ne!(err.code(), tonic::Code::Ok);
        let status = w.proc.wait_exit(Duration::from_secs(10));
        assert!(!status.success(), "killed by SIGKILL");
        assert_eq!(lake.count(), 500, "the lake commit happened");

        let w2 = Writer::start(&lake);
        let mut c = client(&w2.addr).await;
        let ack = put(&mut c, &d, vec![rows(0, 500)]).await.unwrap();
        assert_eq!(ack.outcome(), AckOutcome::AlreadyRecorded);
        w2.stop();
        assert_eq!(
            lake.count(),
            500,
            "{backend:?}: no duplicates after the resend"
        );
        assert_eq!(
            lake.column_text("count(DISTINCT id)"),
            vec![Some("500".into())]
        );
    }
}

/// A writer skips reading the offsets before a flush that starts past what
/// it last recorded. Another writer recording that range meanwhile (here
/// without leases, as once a lease has run out) is caught by the write
/// transaction's own re-check: the flush is acknowledged as recorded, and
/// nothing lands twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_another_writer_recorded_since_the_last_read_lands_once() {
    let lake = Lake::new(Backend::PostgresS3, "events");
    let no_fence = ("DUCKLAKE_PARTITION_FENCE", "false");
    let a = Writer::start_with(&lake, &[no_fence, ("POD_NAME", "millpond-a")]);
    let b = Writer::start_with(&lake, &[no_fence, ("POD_NAME", "millpond-b")]);
    let (mut ca, mut cb) = (client(&a.addr).await, client(&b.addr).await);
    let first = descriptor("first", vec![r(0, 0, 99)], 100);
    let ack = put(&mut ca, &first, vec![rows(0, 100)]).await.unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    let next = descriptor("next", vec![r(0, 100, 199)], 100);
    let ack = put(&mut cb, &next, vec![rows(100, 100)]).await.unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);

    // `a` knows 0..=99 as the last range: no read, straight to the write,
    // whose re-check refuses it; the retry reads and finds it recorded.
    let again = put(&mut ca, &next, vec![rows(100, 100)]).await.unwrap();
    assert_eq!(again.outcome(), AckOutcome::AlreadyRecorded);
    assert_eq!(again.rows_written, 0);
    let contention = ("type", "ducklake_commit_contention");
    assert_eq!(a.metric("millpond_errors_total", &[contention]), 1.0);
    assert_eq!(
        a.metric("millpond_flushes_already_recorded_total", &[]),
        1.0
    );
    a.stop();
    b.stop();
    assert_eq!(lake.count(), 200);
    assert_eq!(
        lake.column_text("count(DISTINCT id)"),
        vec![Some("200".into())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_append_to_one_postgres_table_concurrently() {
    let lake = Lake::new(Backend::PostgresS3, "events");
    let w1 = Writer::start(&lake);
    let w2 = Writer::start(&lake);
    let mut tasks = Vec::new();
    for (i, addr) in [w1.addr.clone(), w2.addr.clone()].into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            let mut c = client(&addr).await;
            for f in 0..8i64 {
                let start = (i as i64) * 1_000_000 + f * 1000;
                let d = descriptor(
                    &format!("w{i}-f{f}"),
                    vec![r(i as i32, f * 1000, f * 1000 + 999)],
                    1000,
                );
                let ack = put(&mut c, &d, vec![rows(start, 1000)]).await.unwrap();
                assert_eq!(ack.rows_written, 1000);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(lake.count(), 16_000);
    assert_eq!(
        lake.column_text("count(DISTINCT id)"),
        vec![Some("16000".into())]
    );
    let mut c = client(&w1.addr).await;
    assert_eq!(
        recorded(&mut c, "events").await,
        vec![r(0, 7000, 7999), r(1, 7000, 7999)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_outage_retries_then_fails_loudly_without_ack() {
    let upstream = format!(
        "{}:{}",
        required_env("MILLPOND_TEST_PG_HOST"),
        required_env("MILLPOND_TEST_PG_PORT")
    );
    let proxy = Proxy::start(upstream).await;
    let lake = Lake::new(Backend::PostgresS3, "events")
        .with_env("DUCKLAKE_RDS_PORT", &proxy.port.to_string());
    let mut w = Writer::start(&lake);
    let mut c = client(&w.addr).await;
    put(
        &mut c,
        &descriptor("ok", vec![r(0, 0, 9)], 10),
        vec![rows(0, 10)],
    )
    .await
    .unwrap();

    proxy.cut().await;
    let started = std::time::Instant::now();
    let err = put(
        &mut c,
        &descriptor("lost", vec![r(0, 10, 19)], 10),
        vec![rows(10, 10)],
    )
    .await
    .expect_err("no ack during an outage");
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    let details = millpond_writer_error(&err);
    assert_eq!(details.kind(), ErrorKind::Retryable);
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "1 s + 2 s of backoff first"
    );
    let status = w.proc.wait_exit(Duration::from_secs(10));
    assert!(!status.success(), "exhausted retries exit non-zero");
    let logs = w.proc.logs();
    assert!(logs.contains("retries are exhausted"), "{logs}");
    let password = required_env("MILLPOND_TEST_PG_PASSWORD");
    assert!(!logs.contains(&format!("password='{password}'")), "{logs}");
    assert!(
        logs.contains("password=***"),
        "the failure names the connection, secret scrubbed: {logs}"
    );
    drop(proxy);
    assert_eq!(lake.count(), 10, "nothing of the failed flush landed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_outage_retries_then_fails_loudly_without_ack() {
    s3_outage(false).await;
}

/// The same for a streamed flush the writer puts in files: their upload
/// fails, and nothing is acknowledged or recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_outage_during_a_files_upload_fails_loudly_without_ack() {
    s3_outage(true).await;
}

async fn s3_outage(streamed: bool) {
    // A private moto server that the test can stop.
    let port = free_port();
    let python = required_env("MILLPOND_PYTHON");
    let moto = std::path::Path::new(&python).with_file_name("moto_server");
    let mut server = Command::new(moto)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let bucket = unique("outage").replace('_', "-");
    let script = format!(
        "import boto3,time\nfor i in range(100):\n  try:\n    boto3.client('s3',endpoint_url='http://127.0.0.1:{port}',aws_access_key_id='test',aws_secret_access_key='test',region_name='us-east-1').create_bucket(Bucket='{bucket}'); break\n  except Exception: time.sleep(0.1)\n"
    );
    assert!(Command::new(&python)
        .args(["-c", &script])
        .status()
        .unwrap()
        .success());
    let lake = Lake::new(Backend::PostgresS3, "events")
        .with_env("DUCKDB_S3_ENDPOINT", &format!("127.0.0.1:{port}"))
        .with_env("DUCKLAKE_DATA_PATH", &format!("s3://{bucket}/data/"))
        .with_env("DUCKLAKE_FILES_FROM_BYTES", "0");
    let mut w = Writer::start(&lake);
    let mut c = client(&w.addr).await;
    put(
        &mut c,
        &descriptor("ok", vec![r(0, 0, 99)], 100),
        vec![rows(0, 100)],
    )
    .await
    .unwrap();

    server.kill().unwrap();
    server.wait().unwrap();
    let lost = descriptor("lost", vec![r(0, 100, 199)], 100);
    if streamed {
        let deadline = Duration::from_secs(60);
        let mut sender = millpond_ingest::flight::WriterClient::new(w.addr.clone());
        let stream = sender
            .open("lost", &rows(100, 100), deadline)
            .await
            .unwrap();
        let err = stream
            .finish(&lost, deadline)
            .await
            .expect_err("no ack while S3 is down");
        assert!(format!("{err:?}").contains("upload"), "{err:?}");
    } else {
        let err = put(&mut c, &lost, vec![rows(100, 100)])
            .await
            .expect_err("no ack while S3 is down");
        assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    }
    let status = w.proc.wait_exit(Duration::from_secs(20));
    assert!(!status.success());
    assert!(
        !w.proc
            .logs()
            .contains(&required_env("MILLPOND_TEST_S3_SECRET"))
            || required_env("MILLPOND_TEST_S3_SECRET").len() < 5
    );
    // The catalog never recorded the failed flush.
    let w2 = Writer::start(&lake);
    let mut c = client(&w2.addr).await;
    assert_eq!(recorded(&mut c, "events").await, vec![r(0, 0, 99)]);
}

fn millpond_writer_error(status: &tonic::Status) -> millpond_proto::WriteError {
    use prost::Message;
    millpond_proto::WriteError::decode(status.details()).expect("WriteError in status details")
}

/// A second owner of a partition is fenced: two writers on one catalog get
/// the same partition at the same moment, the first held open between its
/// already-recorded check and its COMMIT. Exactly one writes the range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_owner_of_a_partition_is_fenced() {
    let lake = Lake::new(Backend::PostgresS3, "events");
    let lease = ("DUCKLAKE_PARTITION_LEASE_S", "10");
    let old = Writer::start_with(
        &lake,
        &[
            lease,
            ("POD_NAME", "millpond-old"),
            ("MILLPOND_FAILPOINT", "pause_before_commit:3000"),
        ],
    );
    let new = Writer::start_with(&lake, &[lease, ("POD_NAME", "millpond-new")]);
    let same = descriptor("same-range", vec![r(0, 0, 999)], 1000);

    // The old owner takes partition 0 and is held between check and commit;
    // the new owner is refused meanwhile: retryable, nothing written.
    let (a, d) = (old.addr.clone(), same.clone());
    let slow = tokio::spawn(async move {
        let mut c = client(&a).await;
        put(&mut c, &d, vec![rows(0, 1000)]).await
    });
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let mut c = client(&new.addr).await;
    let refused = put(&mut c, &same, vec![rows(0, 1000)])
        .await
        .expect_err("leased");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(refused.message().contains("millpond-old"), "{refused:?}");
    let slow = slow.await.unwrap().expect("the lease holder writes");
    assert_eq!(slow.outcome(), AckOutcome::Written);
    assert_eq!(
        new.metric("millpond_errors_total", &[("type", "partition_leased")]),
        1.0
    );
    // Waiting out another owner's lease is a handover, not a fault: the
    // new owner stays ready, or a rollout would wait on it forever.
    assert_eq!(new.ready(), 200, "a lease refusal leaves the writer ready");

    // A disjoint partition is never held up.
    let ack = put(
        &mut c,
        &descriptor("p1", vec![r(1, 0, 99)], 100),
        vec![rows(5000, 100)],
    )
    .await
    .unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);

    // The old pod stops and releases its leases: the new owner takes over at
    // once, finds the range recorded, and goes on.
    old.stop();
    let ack = put(&mut c, &same, vec![rows(0, 1000)]).await.unwrap();
    assert_eq!(ack.outcome(), AckOutcome::AlreadyRecorded);
    let d = descriptor("next", vec![r(0, 1000, 1499)], 500);
    assert_eq!(
        put(&mut c, &d, vec![rows(1000, 500)])
            .await
            .unwrap()
            .outcome(),
        AckOutcome::Written
    );

    // A killed owner's lease runs out on its own.
    let doomed = Writer::start_with(&lake, &[lease, ("POD_NAME", "millpond-doomed")]);
    let mut cd = client(&doomed.addr).await;
    let d = descriptor("doomed", vec![r(2, 0, 99)], 100);
    put(&mut cd, &d, vec![rows(6000, 100)]).await.unwrap();
    let claimed = std::time::Instant::now();
    let mut doomed = doomed;
    doomed.proc.kill9();
    let d = descriptor("after", vec![r(2, 100, 199)], 100);
    let e = put(&mut c, &d, vec![rows(6100, 100)])
        .await
        .expect_err("still leased");
    assert_eq!(e.code(), tonic::Code::Unavailable);
    tokio::time::sleep(Duration::from_secs(11).saturating_sub(claimed.elapsed())).await;
    assert_eq!(
        put(&mut c, &d, vec![rows(6100, 100)])
            .await
            .unwrap()
            .outcome(),
        AckOutcome::Written
    );

    new.stop();
    assert_eq!(
        lake.count(),
        1800,
        "1000 + 100 + 500 + 100 + 100, nothing twice"
    );
    assert_eq!(
        lake.column_text("count(DISTINCT id)"),
        vec![Some("1800".into())]
    );
}

/// A writer whose lease ran out, and whose partition another writer took
/// and wrote meanwhile, reads the offsets again when it takes the partition
/// back: the other writer's range is acknowledged as recorded at once, not
/// first refused by the write transaction's re-check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_taken_back_is_read_again() {
    let lake = Lake::new(Backend::PostgresS3, "events");
    let lease = ("DUCKLAKE_PARTITION_LEASE_S", "3");
    let a = Writer::start_with(&lake, &[lease, ("POD_NAME", "millpond-a")]);
    let b = Writer::start_with(&lake, &[lease, ("POD_NAME", "millpond-b")]);
    let (mut ca, mut cb) = (client(&a.addr).await, client(&b.addr).await);
    let first = descriptor("first", vec![r(0, 0, 99)], 100);
    let ack = put(&mut ca, &first, vec![rows(0, 100)]).await.unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let next = descriptor("next", vec![r(0, 100, 199)], 100);
    let ack = put(&mut cb, &next, vec![rows(100, 100)]).await.unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    tokio::time::sleep(Duration::from_millis(3200)).await;

    let again = put(&mut ca, &next, vec![rows(100, 100)]).await.unwrap();
    assert_eq!(again.outcome(), AckOutcome::AlreadyRecorded);
    let contention = ("type", "ducklake_commit_contention");
    assert_eq!(a.metric("millpond_errors_total", &[contention]), 0.0);
    a.stop();
    b.stop();
    assert_eq!(lake.count(), 200);
}

/// Two writers claiming a partition that has no lease row yet, at the same
/// moment (both claims held open): one wins, the other is refused, and the
/// rows land once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_first_claims_of_a_new_partition_have_one_winner() {
    let lake = Lake::new(Backend::PostgresS3, "events");
    let pause = ("MILLPOND_FAILPOINT", "pause_in_claim:1500");
    let writers = [
        Writer::start_with(&lake, &[pause, ("POD_NAME", "millpond-x")]),
        Writer::start_with(&lake, &[pause, ("POD_NAME", "millpond-y")]),
    ];
    let same = descriptor("same-range", vec![r(0, 0, 299)], 300);
    let puts: Vec<_> = writers
        .iter()
        .map(|w| {
            let (addr, d) = (w.addr.clone(), same.clone());
            tokio::spawn(async move {
                let mut c = client(&addr).await;
                put(&mut c, &d, vec![rows(0, 300)]).await
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for p in puts {
        outcomes.push(p.await.unwrap());
    }
    let won = outcomes.iter().filter(|o| o.is_ok()).count();
    assert_eq!(won, 1, "{outcomes:?}");
    let refused = outcomes.iter().find_map(|o| o.as_ref().err()).unwrap();
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    let leased: f64 = writers
        .iter()
        .map(|w| w.metric("millpond_errors_total", &[("type", "partition_leased")]))
        .sum();
    assert_eq!(leased, 1.0);
    for w in writers {
        w.stop();
    }
    assert_eq!(lake.count(), 300);
    assert_eq!(
        lake.column_text("count(DISTINCT id)"),
        vec![Some("300".into())]
    );
}

/// Another writer added `v BIGINT` while this one knew no `v`: its own
/// `ADD COLUMN IF NOT EXISTS v VARCHAR` is a no-op, and the text it then
/// carries must not wedge the partition. The row lands, the value that is
/// not a BIGINT is a dead letter, the writer stays healthy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_another_writer_typed_first_does_not_wedge_the_partition() {
    use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use millpond_tests::flight::with_coordinates;
    use std::sync::Arc;
    let lake = Lake::new(Backend::PostgresS3, "events");
    let a = Writer::start(&lake);
    let b = Writer::start(&lake);
    let (mut ca, mut cb) = (client(&a.addr).await, client(&b.addr).await);
    let id = |v: i64| Arc::new(Int64Array::from(vec![v])) as ArrayRef;
    let one = |cols: Vec<(&str, ArrayRef)>, p: i32, o: i64| {
        with_coordinates(RecordBatch::try_from_iter(cols).unwrap(), p, o)
    };
    // A learns the table without v.
    put(
        &mut ca,
        &descriptor("a1", vec![r(0, 0, 0)], 1),
        vec![one(vec![("id", id(1))], 0, 0)],
    )
    .await
    .unwrap();
    // B adds v BIGINT.
    let b1 = one(vec![("id", id(2)), ("v", id(5))], 1, 0);
    put(&mut cb, &descriptor("b1", vec![r(1, 0, 0)], 1), vec![b1])
        .await
        .unwrap();
    // A's stale view: v is new to it, and its batch says text.
    let text = Arc::new(StringArray::from(vec!["abc"])) as ArrayRef;
    let a2 = one(vec![("id", id(3)), ("v", text)], 0, 1);
    let ack = put(&mut ca, &descriptor("a2", vec![r(0, 1, 1)], 1), vec![a2])
        .await
        .expect("not refused");
    assert_eq!((ack.rows_written, ack.dead_letters_written), (1, 1));
    assert_eq!(
        millpond_tests::scrape::get(&format!("http://127.0.0.1:{}/healthz", a.http_port))
            .ok()
            .map(|r| r.0),
        Some(200)
    );
    a.stop();
    b.stop();
    assert_eq!(
        lake.query("SELECT id, v FROM lake.main.events ORDER BY id"),
        ["1|NULL", "2|5", "3|NULL"]
    );
    assert_eq!(
        lake.query(
            "SELECT kafka_partition, kafka_offset, reason, column_name, live_type, original::VARCHAR \
             FROM lake.main.events_dead_letters"
        ),
        ["0|1|type_mismatch|v|BIGINT|abc"]
    );
}

/// Four writers on one Postgres catalog, each flush bringing new columns
/// (some shared, some its own): DDL from one aborts the others' inserts,
/// and none may exhaust its retries. Every row lands once, every column
/// exists with its values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_writers_evolving_one_table_never_exhaust_their_retries() {
    use arrow::array::{ArrayRef, Int64Array, RecordBatch};
    use std::sync::Arc;
    const FLUSHES: i64 = 6;
    let lake = Lake::new(Backend::PostgresS3, "events");
    let writers: Vec<Writer> = (0..4).map(|_| Writer::start(&lake)).collect();
    let mut tasks = Vec::new();
    for (w, writer) in writers.iter().enumerate() {
        let addr = writer.addr.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = client(&addr).await;
            for f in 0..FLUSHES {
                let ids: Vec<i64> = (0..200)
                    .map(|i| (w as i64) * 1_000_000 + f * 1000 + i)
                    .collect();
                let col = |v: i64| Arc::new(Int64Array::from(vec![v; 200])) as ArrayRef;
                let batch = RecordBatch::try_from_iter([
                    ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
                    (format!("shared_{f}").as_str(), col(f)),
                    (format!("own_{w}_{f}").as_str(), col(w as i64)),
                ])
                .unwrap();
                let d = descriptor(
                    &format!("w{w}-f{f}"),
                    vec![r(w as i32, f * 200, f * 200 + 199)],
                    200,
                );
                let ack = put(&mut c, &d, vec![batch])
                    .await
                    .unwrap_or_else(|e| panic!("writer {w} flush {f}: {e}"));
                assert_eq!(ack.rows_written, 200);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let errors: Vec<(f64, f64)> = writers
        .iter()
        .map(|w| {
            (
                w.metric("millpond_errors_total", &[("type", "write_retry")]),
                w.metric(
                    "millpond_errors_total",
                    &[("type", "ducklake_commit_contention")],
                ),
            )
        })
        .collect();
    for w in writers {
        w.stop();
    }
    assert_eq!(lake.count(), 4 * FLUSHES * 200);
    assert_eq!(
        lake.column_text("count(DISTINCT id)"),
        vec![Some((4 * FLUSHES * 200).to_string())]
    );
    let cols = lake.columns();
    assert_eq!(
        cols.len(),
        1 + FLUSHES as usize + 4 * FLUSHES as usize + 1,
        "{cols:?}"
    );
    assert_eq!(
        lake.column_text("count(own_3_5)"),
        vec![Some("200".into())],
        "a late column holds its values"
    );
    // (write_retry, contention) per writer: contention is retried, never fatal.
    println!("errors per writer: {errors:?}");
}

/// The fence holds at the commit, not only before it: the old owner passes
/// its lease check and then stalls (as behind a catalog connection that
/// holds its bytes) past its lease, while a new owner claims the partition
/// and writes the same range. The old owner's COMMIT is refused; it then
/// finds the range recorded. 1,000 rows for 1,000 records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_stalled_past_its_lease_never_lands_beside_the_new_owner() {
    let lake = Lake::new(Backend::PostgresS3, "events");
    let lease = ("DUCKLAKE_PARTITION_LEASE_S", "3");
    let old = Writer::start_with(
        &lake,
        &[
            lease,
            ("POD_NAME", "millpond-old"),
            ("MILLPOND_FAILPOINT", "stall_in_commit:9000"),
        ],
    );
    // The stalled commit holds the catalog's commit lock too: the new owner
    // gives it up after half a second rather than the default 10 s.
    let new = Writer::start_with(
        &lake,
        &[
            lease,
            ("POD_NAME", "millpond-new"),
            ("DUCKLAKE_COMMIT_LOCK_WAIT_MS", "500"),
        ],
    );
    let same = descriptor("same-range", vec![r(0, 0, 999)], 1000);
    let (a, d) = (old.addr.clone(), same.clone());
    let stalled = tokio::spawn(async move {
        let mut c = client(&a).await;
        put(&mut c, &d, vec![rows(0, 1000)]).await
    });
    // The old owner holds the lease and stalls in its commit.
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while !old.proc.logs().contains("failpoint stall_in_commit") {
        assert!(std::time::Instant::now() < until, "{}", old.proc.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The new owner is refused while the old lease runs, then takes the
    // partition and writes the range while the old commit is still stalled.
    let mut c = client(&new.addr).await;
    let until = std::time::Instant::now() + Duration::from_secs(7);
    let ack = loop {
        match put(&mut c, &same, vec![rows(0, 1000)]).await {
            Ok(ack) => break ack,
            Err(e) if e.code() == tonic::Code::Unavailable => {
                assert!(std::time::Instant::now() < until, "still refused: {e:?}");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("{e:?}"),
        }
    };
    assert_eq!(ack.outcome(), AckOutcome::Written);
    assert!(!stalled.is_finished(), "the old commit is still stalled");
    assert_eq!(lake.count(), 1000);

    let late = stalled.await.unwrap();
    assert!(
        !matches!(&late, Ok(a) if a.outcome() == AckOutcome::Written),
        "the stalled owner must not answer written: {late:?}"
    );
    if let Ok(a) = &late {
        assert_eq!(a.outcome(), AckOutcome::AlreadyRecorded);
    }
    assert!(
        new.metric("millpond_errors_total", &[("type", "partition_leased")]) >= 1.0,
        "the new owner waited for the old lease"
    );
    old.stop();
    new.stop();
    assert_eq!(lake.count(), 1000, "nothing twice");
    assert_eq!(
        lake.column_text("count(DISTINCT id)"),
        vec![Some("1000".into())]
    );
}

/// Two live writers with one POD_NAME (a force-deleted pod on an
/// unreachable node and its replacement; two containers started by hand)
/// are two lease owners: given the same range at the same moment, one
/// writes it and the other is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_with_one_pod_name_write_a_range_once() {
    let lake = Lake::new(Backend::PostgresS3, "events");
    let pause = ("MILLPOND_FAILPOINT", "pause_before_commit:1500");
    let name = ("POD_NAME", "millpond-0");
    let writers = [
        // The replacement pod has a new UID; a hand-started one has none.
        Writer::start_with(&lake, &[pause, name, ("POD_UID", "uid-before")]),
        Writer::start_with(&lake, &[pause, name, ("POD_UID", "")]),
    ];
    let same = descriptor("same-range", vec![r(0, 0, 299)], 300);
    let puts: Vec<_> = writers
        .iter()
        .map(|w| {
            let (addr, d) = (w.addr.clone(), same.clone());
            tokio::spawn(async move {
                let mut c = client(&addr).await;
                put(&mut c, &d, vec![rows(0, 300)]).await
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for p in puts {
        outcomes.push(p.await.unwrap());
    }
    let written = outcomes
        .iter()
        .filter(|o| matches!(o, Ok(a) if a.outcome() == AckOutcome::Written))
        .count();
    assert_eq!(written, 1, "{outcomes:?}");
    for w in writers {
        w.stop();
    }
    assert_eq!(lake.count(), 300, "nothing twice");
}

/// A writer restarted in its pod (same POD_NAME and POD_UID) takes its
/// leases back at once after a kill -9; one with another UID waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_restarted_in_its_pod_takes_its_leases_back_at_once() {
    let lake = Lake::new(Backend::PostgresS3, "events");
    let pod = [("DUCKLAKE_PARTITION_LEASE_S", "60"), ("POD_UID", "uid-1")];
    let mut w = Writer::start_with(&lake, &pod);
    let mut c = client(&w.addr).await;
    let d = descriptor("first", vec![r(0, 0, 99)], 100);
    put(&mut c, &d, vec![rows(0, 100)]).await.unwrap();
    w.proc.kill9();

    let other = Writer::start_with(&lake, &[pod[0], ("POD_UID", "uid-2")]);
    let mut c = client(&other.addr).await;
    let next = descriptor("next", vec![r(0, 100, 199)], 100);
    let e = put(&mut c, &next, vec![rows(100, 100)])
        .await
        .expect_err("another pod waits for the lease");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    other.stop();

    let again = Writer::start_with(&lake, &pod);
    let mut c = client(&again.addr).await;
    let ack = put(&mut c, &next, vec![rows(100, 100)]).await.unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    again.stop();
    assert_eq!(lake.count(), 200);
}
