//! `millpond-lake metrics` against a lake with known contents, filled by
//! the real writer: pushed once to a local receiver, then served by the
//! long-running exporter after a compaction changed the lake.
use std::time::{Duration, Instant};

use millpond_proto::{DeadLetter, OffsetRange};
use millpond_tests::flight::{client, descriptor, put, rows};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::lake_cli::{lake_cli, lake_cli_with, Receiver};
use millpond_tests::process::{free_port, Proc};
use millpond_tests::scrape::{get, metric, metrics};
use millpond_tests::writer::Writer;

fn record_dead_letter(partition: i32, offset: i64, reason: &str) -> DeadLetter {
    DeadLetter {
        topic: "events".into(),
        partition,
        offset,
        reason: reason.into(),
        original: b"{not json".to_vec(),
        ..Default::default()
    }
}

/// events: three flushes of 20 rows (Parquet files) and one of 5 (inlined
/// in the catalog); recorded offsets p0 0..39 and p1 0..24; dead letters 2
/// invalid_json and 1 not_an_object.
async fn known_lake(backend: Backend) -> Lake {
    let lake = Lake::new(backend, "events");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let r = |p, a, b| OffsetRange::new("events", p, a, b);
    let mut first = descriptor("f1", vec![r(0, 0, 19)], 20);
    first.dead_letters = vec![
        record_dead_letter(0, 3, "invalid_json"),
        record_dead_letter(0, 4, "invalid_json"),
        record_dead_letter(0, 5, "not_an_object"),
    ];
    put(&mut c, &first, vec![rows(0, 20)]).await.unwrap();
    put(
        &mut c,
        &descriptor("f2", vec![r(1, 0, 19)], 20),
        vec![rows(20, 20)],
    )
    .await
    .unwrap();
    put(
        &mut c,
        &descriptor("f3", vec![r(0, 20, 39)], 20),
        vec![rows(40, 20)],
    )
    .await
    .unwrap();
    put(
        &mut c,
        &descriptor("f4", vec![r(1, 20, 24)], 5),
        vec![rows(60, 5)],
    )
    .await
    .unwrap();
    writer.stop();
    lake
}

fn value(body: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    metric(body, name, labels).unwrap_or_else(|| panic!("{name} {labels:?} missing from:\n{body}"))
}

const EVENTS: (&str, &str) = ("table", "main.events");

async fn metrics_describe_a_known_lake(backend: Backend) {
    let lake = known_lake(backend).await;
    let bytes: f64 = lake
        .query("SELECT sum(data_file_size_bytes) FROM ducklake_list_files('lake', 'events')")[0]
        .parse()
        .unwrap();
    let snapshots: f64 = lake.query("SELECT count(*) FROM ducklake_snapshots('lake')")[0]
        .parse()
        .unwrap();

    let receiver = Receiver::start(200);
    let push = format!("{}/metrics/job/millpond_lake", receiver.url);
    let env = [
        ("DUCKLAKE_METRICS_PUSH_URL", push.as_str()),
        ("BROKER_SOURCE", "test"),
    ];
    lake_cli_with(&lake, &env, &["metrics", "--once"]).ok();
    let got = receiver.next();
    assert_eq!(
        (got.method.as_str(), got.path.as_str()),
        ("POST", "/metrics/job/millpond_lake")
    );
    assert!(got.content_type.starts_with("text/plain"), "{got:?}");
    let body = &got.body;
    eprintln!("pushed exposition ({backend:?}):\n{body}");
    let base = body
        .lines()
        .find(|l| l.starts_with("millpond_lake_rows{"))
        .unwrap();
    assert!(
        base.contains(r#"pipeline="events""#) && base.contains(r#"broker_source="test""#),
        "{base}"
    );
    assert_eq!(value(body, "millpond_lake_up", &[]), 1.0);
    assert_eq!(value(body, "millpond_lake_data_files", &[EVENTS]), 3.0);
    assert_eq!(value(body, "millpond_lake_small_files", &[EVENTS]), 3.0);
    assert_eq!(value(body, "millpond_lake_data_bytes", &[EVENTS]), bytes);
    assert_eq!(value(body, "millpond_lake_rows", &[EVENTS]), 65.0);
    assert_eq!(value(body, "millpond_lake_inlined_rows", &[EVENTS]), 5.0);
    assert_eq!(value(body, "millpond_lake_delete_files", &[EVENTS]), 0.0);
    assert_eq!(value(body, "millpond_lake_snapshots", &[]), snapshots);
    let oldest = value(body, "millpond_lake_oldest_snapshot_age_seconds", &[]);
    assert!(oldest > 0.0 && oldest < 600.0, "{oldest}");
    assert_eq!(
        value(body, "millpond_lake_files_scheduled_for_deletion", &[]),
        0.0
    );
    let offset = |p: &str| {
        value(
            body,
            "millpond_lake_recorded_offset",
            &[EVENTS, ("topic", "events"), ("partition", p)],
        )
    };
    assert_eq!((offset("0"), offset("1")), (39.0, 24.0));
    let dead = |reason: &str| {
        value(
            body,
            "millpond_lake_dead_letters",
            &[EVENTS, ("reason", reason)],
        )
    };
    assert_eq!((dead("invalid_json"), dead("not_an_object")), (2.0, 1.0));
    assert_eq!(
        metric(body, "millpond_lake_dead_letters", &[]),
        Some(3.0),
        "no other reasons, and the dead-letter table is no table of its own here"
    );

    // A catalog that cannot be reached: the read fails, and counts.
    if backend == Backend::PostgresS3 {
        let closed = free_port().to_string();
        let run = lake_cli_with(
            &lake,
            &[("DUCKLAKE_RDS_PORT", closed.as_str())],
            &["metrics", "--once"],
        );
        assert_eq!(run.code, Some(1), "{run:#?}");
        assert_eq!(value(&run.stdout, "millpond_lake_up", &[]), 0.0);
        assert_eq!(
            value(&run.stdout, "millpond_lake_collect_errors_total", &[]),
            1.0,
            "a catalog that cannot be opened is a failed read"
        );
    }

    // A receiver that refuses the push fails the run.
    let refusing = Receiver::start(500);
    let env = [("DUCKLAKE_METRICS_PUSH_URL", refusing.url.as_str())];
    let run = lake_cli_with(&lake, &env, &["metrics", "--once"]);
    assert_eq!(run.code, Some(1), "{run:#?}");
    assert!(run.stderr.contains("HTTP 500"), "{run:#?}");

    // The exporter, after a compaction: 3 files merged into 1 and
    // scheduled for deletion, the same rows.
    lake_cli(&lake, &["compact", "--yes", "--table", "events"]).ok();
    let port = free_port();
    let mut env = lake.env.clone();
    for (k, v) in [
        ("DUCKLAKE_METRICS_PORT", port.to_string()),
        ("MILLPOND_HTTP_HOST", "127.0.0.1".into()),
        ("DUCKLAKE_METRICS_INTERVAL_S", "1".into()),
    ] {
        env.push((k.into(), v));
    }
    let mut exporter = Proc::spawn_args("millpond-lake", &["metrics"], &env, lake.dir.path());
    let ready = format!("http://127.0.0.1:{port}/readyz");
    let until = Instant::now() + Duration::from_secs(60);
    while !get(&ready).is_ok_and(|r| r.0 == 200) {
        assert!(
            exporter.is_running(),
            "exporter exited: {}",
            exporter.logs()
        );
        assert!(Instant::now() < until, "not ready: {}", exporter.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
    let body = metrics(port);
    assert_eq!(value(&body, "millpond_lake_data_files", &[EVENTS]), 1.0);
    assert_eq!(
        value(&body, "millpond_lake_files_scheduled_for_deletion", &[]),
        3.0
    );
    assert_eq!(value(&body, "millpond_lake_rows", &[EVENTS]), 65.0);
    assert_eq!(value(&body, "millpond_lake_up", &[]), 1.0);
    exporter.signal("TERM");
    let status = exporter.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status}: {}", exporter.logs());
}

mod embedded {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn metrics_describe_a_known_lake() {
        super::metrics_describe_a_known_lake(super::Backend::Embedded).await
    }
}

mod postgres_s3 {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn metrics_describe_a_known_lake() {
        super::metrics_describe_a_known_lake(super::Backend::PostgresS3).await
    }
}
