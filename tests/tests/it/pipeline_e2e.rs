//! Kafka -> ingest -> Flight -> writer -> DuckLake with the real binaries.
//! The broker is librdkafka's mock cluster (real Kafka protocol on
//! 127.0.0.1): in this process when a test injects faults, or in its own
//! process (millpond-mock-broker).
use std::time::Duration;

use millpond_tests::ingest::{eventually, Ingest, IngestOpts};
use millpond_tests::kafka::{
    commit, committed, produce, produce_events, watermarks, BrokerProcess,
};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::writer::Writer;
use rdkafka::mocking::MockCluster;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

const TOPIC: &str = "events";
const GROUP: &str = "millpond-events-events";

fn opts<'a>(bootstrap: &'a str, writer: &'a str, replicas: i32, ordinal: i32) -> IngestOpts<'a> {
    IngestOpts {
        bootstrap,
        topic: TOPIC,
        table: "events",
        writer_addr: writer,
        replicas,
        ordinal,
        extra: vec![],
    }
}

/// A new writer at `addr`, where ingest keeps sending after the old one died.
fn writer_at(lake: &Lake, addr: &str) -> Writer {
    let port = addr.rsplit(':').next().unwrap();
    Writer::start_with(
        lake,
        &[("MILLPOND_WRITER_ADDR", &format!("127.0.0.1:{port}"))],
    )
}

fn total_committed(bootstrap: &str, partitions: i32) -> i64 {
    committed(bootstrap, GROUP, TOPIC, partitions)
        .into_iter()
        .map(|o| o.unwrap_or(0))
        .sum()
}

fn distinct_seq(lake: &Lake) -> (i64, i64) {
    let count = lake.count();
    let distinct = lake.column_text("count(DISTINCT seq)")[0]
        .clone()
        .unwrap()
        .parse()
        .unwrap();
    (count, distinct)
}

#[test]
fn n_events_4_partitions_2_replicas_land_exactly_once_across_restarts() {
    let broker = BrokerProcess::start(TOPIC, 4);
    let lake = Lake::new(Backend::PostgresS3, "events");
    let n = 6000u64;
    let third = n / 3;
    produce_events(&broker.bootstrap, TOPIC, 4, 0, third);
    let w0 = Writer::start(&lake);
    let w1 = Writer::start(&lake);
    let mut i0 = Ingest::start(&opts(&broker.bootstrap, &w0.addr, 2, 0), lake.dir.path());
    let mut i1 = Ingest::start(&opts(&broker.bootstrap, &w1.addr, 2, 1), lake.dir.path());
    eventually(Duration::from_secs(60), "first third committed", || {
        total_committed(&broker.bootstrap, 4) == third as i64
    });
    // More events arrive; both processes of both pods restart mid-stream.
    produce_events(&broker.bootstrap, TOPIC, 4, third, third);
    for i in [&mut i0, &mut i1] {
        i.proc.signal("TERM");
        assert!(i.proc.wait_exit(Duration::from_secs(30)).success());
    }
    w0.stop();
    w1.stop();
    produce_events(&broker.bootstrap, TOPIC, 4, 2 * third, third);
    let w0 = Writer::start(&lake);
    let w1 = Writer::start(&lake);
    let i0 = Ingest::start(&opts(&broker.bootstrap, &w0.addr, 2, 0), lake.dir.path());
    let i1 = Ingest::start(&opts(&broker.bootstrap, &w1.addr, 2, 1), lake.dir.path());
    eventually(Duration::from_secs(60), "everything committed", || {
        total_committed(&broker.bootstrap, 4) == n as i64
    });
    for i in [&i0, &i1] {
        assert!(i.metric("millpond_records_consumed_total", &[]) >= (third / 2) as f64);
        assert!(i.metric("millpond_batches_flushed_total", &[("trigger", "time")]) > 0.0);
    }
    i0.stop();
    i1.stop();
    w0.stop();
    w1.stop();
    assert_eq!(distinct_seq(&lake), (n as i64, n as i64));
}

#[test]
fn kill9_of_writer_mid_flush_loses_and_duplicates_nothing() {
    kill9_of_writer_after_commit(Lake::new(Backend::Embedded, "events"));
}

/// The same with every streamed flush written to Parquet files as it
/// arrives: the files the dead writer registered are the flush.
#[test]
fn kill9_of_writer_after_registering_files_loses_and_duplicates_nothing() {
    kill9_after_registering_files(Backend::Embedded);
}

/// The same on a lake whose data is on S3: the files are uploaded to the
/// table's folder in the bucket before they are registered.
#[test]
fn kill9_of_writer_after_registering_files_on_s3_loses_and_duplicates_nothing() {
    let lake = kill9_after_registering_files(Backend::PostgresS3);
    let prefix = format!("{}main/events/", lake.data_path());
    assert!(
        lake.data_files().iter().all(|f| f.starts_with(&prefix)),
        "the files are in the table's folder in the bucket: {:?}",
        lake.data_files()
    );
}

fn kill9_after_registering_files(backend: Backend) -> Lake {
    let lake = kill9_of_writer_after_commit(
        Lake::new(backend, "events").with_env("DUCKLAKE_FILES_FROM_BYTES", "0"),
    );
    let writers = lake.data_file_writers();
    assert!(
        !writers.is_empty() && writers.iter().all(|w| w.starts_with("parquet-rs")),
        "every flush went to files: {writers:?}"
    );
    lake
}

fn kill9_of_writer_after_commit(lake: Lake) -> Lake {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 2, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    produce_events(&bs, TOPIC, 2, 0, 1000);
    let mut w = Writer::start_with(&lake, &[("MILLPOND_FAILPOINT", "kill_after_commit")]);
    let addr = w.addr.clone();
    let ingest = Ingest::start(&opts(&bs, &addr, 1, 0), lake.dir.path());
    // The writer commits the first flush, then dies before acking it.
    assert!(!w.proc.wait_exit(Duration::from_secs(60)).success());
    assert_eq!(
        committed(&bs, GROUP, TOPIC, 2),
        vec![None, None],
        "nothing committed without an ack"
    );
    // Same address, no failpoint: ingest's resend is recognised as recorded.
    let w2 = writer_at(&lake, &addr);
    eventually(Duration::from_secs(60), "offsets committed", || {
        total_committed(&bs, 2) == 1000
    });
    produce_events(&bs, TOPIC, 2, 1000, 500);
    eventually(Duration::from_secs(60), "second batch committed", || {
        total_committed(&bs, 2) == 1500
    });
    ingest.stop();
    assert!(w2.metric("millpond_flushes_already_recorded_total", &[]) >= 1.0);
    w2.stop();
    assert_eq!(distinct_seq(&lake), (1500, 1500));
    lake
}

/// The writer dies with a streamed flush half received: ingest no longer
/// holds what it sent, so it reads the flush's ranges again from Kafka and
/// sends the flush whole to the restarted writer. Each event lands once.
#[test]
fn kill9_of_writer_mid_stream_rereads_the_flush_from_kafka() {
    kill9_mid_stream(Lake::new(Backend::Embedded, "events"));
}

/// The same with the flush going to Parquet files as it arrives: the
/// half-written files are never registered (orphans for cleanup).
#[test]
fn kill9_of_writer_mid_stream_to_files_rereads_the_flush_from_kafka() {
    let lake = kill9_mid_stream(
        Lake::new(Backend::Embedded, "events").with_env("DUCKLAKE_FILES_FROM_BYTES", "0"),
    );
    let orphans = lake.unregistered_table_files();
    assert!(
        !orphans.is_empty(),
        "the dead writer's half-written file stays out of the table"
    );
}

/// On S3 a flush's files wait in the writer's local folder until its
/// trailer: the dead writer's half-written files never reach the bucket,
/// and the restarted writer removes them.
#[test]
fn kill9_of_writer_mid_stream_to_files_on_s3_leaves_nothing_behind() {
    let lake = Lake::new(Backend::PostgresS3, "events").with_env("DUCKLAKE_FILES_FROM_BYTES", "0");
    let tmp = lake.dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let lake = kill9_mid_stream(lake.with_env("TMPDIR", tmp.to_str().unwrap()));
    let base = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("millpond-writer-spool-"))
        .expect("the writer's spool folder in TMPDIR");
    let folders: Vec<_> = std::fs::read_dir(base)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        folders.len(),
        1,
        "only the second writer's folder: {folders:?}"
    );
    let left: Vec<_> = std::fs::read_dir(&folders[0])
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != ".lock")
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // The flush resent whole is DuckDB's insert; the dead writer's files
    // waited in its local folder.
    let stray = lake.unregistered_table_files();
    assert!(
        stray.is_empty(),
        "unregistered files in the bucket: {stray:?}"
    );
}

fn kill9_mid_stream(lake: Lake) -> Lake {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 2, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    produce_events(&bs, TOPIC, 2, 0, 3000);
    let mut w = Writer::start_with(&lake, &[("MILLPOND_FAILPOINT", "kill_mid_stream")]);
    let addr = w.addr.clone();
    let mut o = opts(&bs, &addr, 1, 0);
    // Small polls: the flush goes out in several batches.
    o.extra.push(("CONSUME_BATCH_SIZE", "100".into()));
    let ingest = Ingest::start(&o, lake.dir.path());
    assert!(!w.proc.wait_exit(Duration::from_secs(60)).success());
    let w2 = writer_at(&lake, &addr);
    eventually(Duration::from_secs(60), "offsets committed", || {
        total_committed(&bs, 2) == 3000
    });
    assert!(ingest.metric("millpond_errors_total", &[("type", "flight")]) >= 1.0);
    assert!(ingest.metric("millpond_flushes_sent_whole_total", &[("reason", "reread")]) >= 1.0);
    assert_eq!(
        ingest.metric("millpond_records_consumed_total", &[("partition", "0")])
            + ingest.metric("millpond_records_consumed_total", &[("partition", "1")]),
        3000.0,
        "the re-read is not counted as consumed again"
    );
    ingest.stop();
    assert_eq!(
        w2.metric("millpond_flushes_already_recorded_total", &[]),
        0.0
    );
    assert_eq!(w2.metric("millpond_records_written_total", &[]), 3000.0);
    w2.stop();
    assert_eq!(distinct_seq(&lake), (3000, 3000));
    lake
}

/// The writer is down when a flush's first batch is ready: nothing was
/// sent, so ingest holds that flush and sends it whole once the writer is
/// back (no re-read from Kafka).
#[test]
fn a_writer_down_at_a_flush_start_gets_the_flush_whole_later() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 2, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Lake::new(Backend::Embedded, "events");
    produce_events(&bs, TOPIC, 2, 0, 500);
    let w = Writer::start(&lake);
    let addr = w.addr.clone();
    let ingest = Ingest::start(&opts(&bs, &addr, 1, 0), lake.dir.path());
    eventually(Duration::from_secs(60), "first flush committed", || {
        total_committed(&bs, 2) == 500
    });
    let mut w = w;
    w.proc.kill9();
    produce_events(&bs, TOPIC, 2, 500, 700);
    // Longer than ingest tries to open a stream (10 s).
    std::thread::sleep(Duration::from_secs(12));
    let w2 = writer_at(&lake, &addr);
    eventually(Duration::from_secs(60), "held flush committed", || {
        total_committed(&bs, 2) == 1200
    });
    // Held and resent, not read again: no broken stream was counted.
    assert_eq!(
        ingest.metric("millpond_errors_total", &[("type", "flight")]),
        0.0
    );
    assert_eq!(
        ingest.metric(
            "millpond_flushes_sent_whole_total",
            &[("reason", "writer_unreachable")]
        ),
        1.0
    );
    ingest.stop();
    assert_eq!(w2.metric("millpond_records_written_total", &[]), 700.0);
    w2.stop();
    assert_eq!(distinct_seq(&lake), (1200, 1200));
}

#[test]
fn kill9_of_ingest_after_lake_commit_before_kafka_commit_resumes_from_the_lake() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 2, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Lake::new(Backend::PostgresS3, "events");
    produce_events(&bs, TOPIC, 2, 0, 800);
    let w = Writer::start(&lake);
    let mut o = opts(&bs, &w.addr, 1, 0);
    o.extra
        .push(("MILLPOND_FAILPOINT", "kill_after_ack".into()));
    let mut crashing = Ingest::start(&o, lake.dir.path());
    assert!(!crashing.proc.wait_exit(Duration::from_secs(60)).success());
    assert_eq!(committed(&bs, GROUP, TOPIC, 2), vec![None, None]);
    let rows_before = w.metric("millpond_records_written_total", &[]);
    assert!(rows_before > 0.0, "the lake holds the flush");
    let ingest = Ingest::start(&opts(&bs, &w.addr, 1, 0), lake.dir.path());
    eventually(Duration::from_secs(60), "all committed", || {
        total_committed(&bs, 2) == 800
    });
    ingest.stop();
    w.stop();
    assert_eq!(distinct_seq(&lake), (800, 800));
}

#[test]
fn offset_commit_failures_never_lose_data_and_crash_the_process() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Lake::new(Backend::Embedded, "events");
    produce_events(&bs, TOPIC, 1, 0, 300);
    let w = Writer::start(&lake);
    // Every OffsetCommit fails: ingest writes, retries the commit 3 times, exits.
    cluster.request_errors(
        RDKafkaApiKey::OffsetCommit,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED; 64],
    );
    let mut ingest = Ingest::start(&opts(&bs, &w.addr, 1, 0), lake.dir.path());
    assert!(
        !ingest.proc.wait_exit(Duration::from_secs(60)).success(),
        "exhausted commits exit non-zero"
    );
    assert!(
        ingest
            .proc
            .logs()
            .contains("offset commit failed after 3 attempts"),
        "{}",
        ingest.proc.logs()
    );
    assert_eq!(committed(&bs, GROUP, TOPIC, 1), vec![None]);
    cluster.clear_request_errors(RDKafkaApiKey::OffsetCommit);
    // Restart: the lake's recorded offsets win over Kafka's missing commit.
    let ingest = Ingest::start(&opts(&bs, &w.addr, 1, 0), lake.dir.path());
    eventually(Duration::from_secs(60), "committed", || {
        total_committed(&bs, 1) == 300
    });
    ingest.stop();
    w.stop();
    assert_eq!(distinct_seq(&lake), (300, 300));
}

#[test]
fn ingest_without_a_writer_commits_nothing_and_exits_non_zero() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Lake::new(Backend::Embedded, "events");
    produce_events(&bs, TOPIC, 1, 0, 50);
    let port = millpond_tests::process::free_port();
    let mut o = opts(&bs, "", 1, 0);
    let addr = format!("127.0.0.1:{port}");
    o.writer_addr = &addr;
    o.extra
        .push(("MILLPOND_WRITER_SEND_DEADLINE_S", "3".into()));
    let mut ingest = Ingest::start(&o, lake.dir.path());
    assert!(!ingest.proc.wait_exit(Duration::from_secs(30)).success());
    assert_eq!(committed(&bs, GROUP, TOPIC, 1), vec![None]);
}

#[test]
fn stale_committed_offsets_below_log_start_are_recovered() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    commit(&bs, GROUP, TOPIC, 0, 1);
    // ~9 MiB into one partition: the mock keeps ~5 MiB, so the log start moves.
    let big = format!(r#"{{"pad":"{}"}}"#, "x".repeat(100_000));
    let records: Vec<_> = (0..90)
        .map(|_| (0, Some(big.clone().into_bytes())))
        .collect();
    produce(&bs, TOPIC, &records);
    let (low, high) = watermarks(&bs, TOPIC, 0);
    assert!(
        low > 1,
        "log start moved past the committed offset (low {low})"
    );
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);
    let ingest = Ingest::start(&opts(&bs, &w.addr, 1, 0), lake.dir.path());
    eventually(
        Duration::from_secs(60),
        "caught up to the high watermark",
        || committed(&bs, GROUP, TOPIC, 1)[0] == Some(high),
    );
    assert!(
        ingest.proc.logs().contains("below the log start"),
        "{}",
        ingest.proc.logs()
    );
    assert_eq!(
        ingest.metric("millpond_records_consumed_total", &[]),
        (high - low) as f64
    );
    ingest.stop();
    w.stop();
    assert_eq!(lake.count(), high - low);
}

#[test]
fn poison_input_is_counted_and_never_stops_the_pipeline() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let deep = format!(
        r#"{{"seq":-1,"deep":{}{}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let poison: Vec<Option<Vec<u8>>> = vec![
        Some(b"{not json".to_vec()),
        Some(b"[1,2,3]".to_vec()),
        Some(b"42".to_vec()),
        Some(b"\"str\"".to_vec()),
        Some(b"null".to_vec()),
        None,
        Some(deep.into_bytes()),
        Some(format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes()),
        Some(
            br#"{"seq":1,"big":18446744073709551615,"bigger":123456789012345678901234567890}"#
                .to_vec(),
        ),
        Some(br#"{"seq":2,"nested":{"a":[1,{"b":null}]},"big":1}"#.to_vec()),
        Some(vec![0xff, 0xfe, b'{', b'}']),
    ];
    produce(
        &bs,
        TOPIC,
        &poison.into_iter().map(|p| (0, p)).collect::<Vec<_>>(),
    );
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);
    let ingest = Ingest::start(&opts(&bs, &w.addr, 1, 0), lake.dir.path());
    eventually(Duration::from_secs(60), "all offsets committed", || {
        committed(&bs, GROUP, TOPIC, 1)[0] == Some(11)
    });
    // 5 malformed or non-object payloads, the deep top-level array and the
    // invalid UTF-8 are dead letters; the tombstone is consumed but not
    // converted; the deep value inside an object is valid JSON and lands as
    // text.
    assert_eq!(
        ingest.metric(
            "millpond_records_skipped_total",
            &[("reason", "json_parse")]
        ),
        7.0
    );
    let consumed = ingest.metric("millpond_records_consumed_total", &[("partition", "0")]);
    assert_eq!(consumed, 11.0);
    assert_eq!(ingest.health(), 200);
    // Conservation: every consumed record is a row, a dead letter or a
    // tombstone.
    let written = w.metric("millpond_records_written_total", &[]);
    let dead = w.metric("millpond_dead_letters_total", &[]);
    let tombstones = ingest.metric("millpond_tombstones_total", &[]);
    assert_eq!((written, dead, tombstones), (3.0, 7.0, 1.0));
    assert_eq!(consumed, written + dead + tombstones);
    ingest.stop();
    w.stop();
    assert_eq!(lake.count(), 3);
    assert_eq!(
        lake.query(
            "SELECT kafka_offset, reason, decode(kafka_key), topic, kafka_partition, kafka_timestamp IS NOT NULL, \
             CASE WHEN kafka_offset = 7 THEN octet_length(original)::VARCHAR ELSE original::VARCHAR END \
             FROM lake.main.events_dead_letters ORDER BY kafka_offset"
        ),
        [
            "0|invalid_json|k|events|0|true|{not json",
            "1|not_an_object|k|events|0|true|[1,2,3]",
            "2|not_an_object|k|events|0|true|42",
            "3|not_an_object|k|events|0|true|\\x22str\\x22",
            "4|not_an_object|k|events|0|true|null",
            "7|not_an_object|k|events|0|true|20000",
            "10|invalid_utf8|k|events|0|true|\\xFF\\xFE{}",
        ]
    );
    assert_eq!(
        lake.column_text("length(deep)"),
        vec![Some("20000".into()), None, None]
    );
    assert_eq!(
        lake.column_text("big"),
        vec![Some("1".into()), Some("18446744073709551615".into()), None],
        "integers beyond int64 keep every digit"
    );
    assert_eq!(
        lake.column_text("bigger")[0],
        Some("123456789012345678901234567890".into())
    );
}

#[test]
fn empty_topic_stays_healthy_with_lag_gauges_for_every_partition() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 6, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);
    let ingest = Ingest::start(&opts(&bs, &w.addr, 2, 1), lake.dir.path());
    eventually(Duration::from_secs(30), "healthy", || {
        ingest.health() == 200
    });
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(ingest.health(), 200, "quiet topic keeps liveness");
    let m = ingest.metrics();
    for p in ["1", "3", "5"] {
        let lag = millpond_tests::scrape::metric(&m, "millpond_consumer_lag", &[("partition", p)]);
        assert_eq!(lag, Some(0.0), "lag gauge for partition {p}");
    }
    assert_eq!(
        millpond_tests::scrape::metric(&m, "millpond_consumer_lag", &[("partition", "0")]),
        None
    );
    assert!(millpond_tests::scrape::metric(&m, "millpond_rdkafka_replyq", &[]).is_some());
}

#[test]
fn sigterm_flushes_pending_records_and_exits_zero() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 2, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Lake::new(Backend::Embedded, "events");
    produce_events(&bs, TOPIC, 2, 0, 400);
    let w = Writer::start(&lake);
    let mut o = opts(&bs, &w.addr, 1, 0);
    o.extra.push(("FLUSH_INTERVAL_MS", "600000".into()));
    let mut ingest = Ingest::start(&o, lake.dir.path());
    eventually(Duration::from_secs(30), "consumed", || {
        ingest.metric("millpond_records_consumed_total", &[]) == 400.0
    });
    assert_eq!(
        total_committed(&bs, 2),
        0,
        "interval not reached, nothing flushed yet"
    );
    ingest.proc.signal("TERM");
    assert!(ingest.proc.wait_exit(Duration::from_secs(30)).success());
    assert_eq!(total_committed(&bs, 2), 400);
    w.stop();
    assert_eq!(distinct_seq(&lake), (400, 400));
}

#[test]
fn consumer_lag_falls_to_zero_once_everything_is_committed() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 2, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Lake::new(Backend::Embedded, "events");
    produce_events(&bs, TOPIC, 2, 0, 600);
    let w = Writer::start(&lake);
    let mut o = opts(&bs, &w.addr, 1, 0);
    o.extra.push(("FLUSH_INTERVAL_MS", "1000".into()));
    let ingest = Ingest::start(&o, lake.dir.path());
    eventually(Duration::from_secs(30), "everything committed", || {
        total_committed(&bs, 2) == 600
    });
    // The startup sample saw 300 records per partition waiting; the commits
    // must bring the gauge down without waiting for the next sample.
    eventually(Duration::from_secs(10), "lag 0 on both partitions", || {
        let m = ingest.metrics();
        ["0", "1"].iter().all(|p| {
            millpond_tests::scrape::metric(&m, "millpond_consumer_lag", &[("partition", p)])
                == Some(0.0)
        })
    });
    ingest.stop();
    w.stop();
    assert_eq!(distinct_seq(&lake), (600, 600));
}

/// The allowlist and denylist compose as keep AND NOT drop; filtered records
/// are counted by reason, their offsets committed, and conservation holds:
/// consumed == written + dead letters + tombstones + filtered.
#[test]
fn filters_keep_and_drop_with_conservation() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 2, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    // team_id = seq % 3; a record without team_id and a tombstone too.
    produce_events(&bs, TOPIC, 2, 0, 300);
    produce(
        &bs,
        TOPIC,
        &[(0, Some(br#"{"seq":1000}"#.to_vec())), (1, None)],
    );
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);
    let mut o = opts(&bs, &w.addr, 1, 0);
    o.extra
        .push(("MILLPOND_FILTER_KEEP_FIELD_NAME", "team_id".into()));
    o.extra.push(("MILLPOND_FILTER_VALUES", "0,1".into()));
    o.extra
        .push(("MILLPOND_FILTER_DROP_FIELD_NAME", "event".into()));
    o.extra.push(("MILLPOND_FILTER_DROP_VALUES", "e0".into()));
    o.extra.push(("MILLPOND_SORT_BY", "team_id,seq".into()));
    let ingest = Ingest::start(&o, lake.dir.path());
    eventually(Duration::from_secs(60), "all offsets committed", || {
        total_committed(&bs, 2) == 302
    });
    let skipped = |r: &str| ingest.metric("millpond_records_skipped_total", &[("reason", r)]);
    // seq % 3 == 2 is excluded (100); the record without team_id is missing;
    // of the 200 kept, event e0 (seq % 5 == 0) is dropped.
    let kept_model = (0..300u64).filter(|i| i % 3 != 2 && i % 5 != 0).count() as f64;
    let dropped_model = (0..300u64).filter(|i| i % 3 != 2 && i % 5 == 0).count() as f64;
    assert_eq!(skipped("filter_excluded"), 100.0);
    assert_eq!(skipped("filter_field_missing"), 1.0);
    assert_eq!(skipped("filter_dropped"), dropped_model);
    let matched = ingest.metric("millpond_filter_matched_total", &[("value", "0")])
        + ingest.metric("millpond_filter_matched_total", &[("value", "1")]);
    assert_eq!(matched, kept_model);
    let consumed = ingest.metric("millpond_records_consumed_total", &[]);
    let written = w.metric("millpond_records_written_total", &[]);
    let dead = w.metric("millpond_dead_letters_total", &[]);
    let tombstones = ingest.metric("millpond_tombstones_total", &[]);
    let filtered =
        skipped("filter_excluded") + skipped("filter_field_missing") + skipped("filter_dropped");
    assert_eq!((consumed, written, tombstones), (302.0, kept_model, 1.0));
    assert_eq!(
        consumed,
        written + dead + tombstones + filtered,
        "conservation"
    );
    ingest.stop();
    w.stop();
    assert_eq!(lake.count() as f64, kept_model);
    assert_eq!(
        lake.column_text("count(*) FILTER (WHERE team_id = 2 OR event = 'e0')"),
        vec![Some("0".into())]
    );
}

/// MILLPOND_RUN_TO_LATEST: ingest consumes up to the high watermarks it read
/// at startup, makes its final flush, commits and exits 0 on its own;
/// records produced after that are left for the next run.
#[test]
fn run_to_latest_lands_everything_then_exits_zero() {
    let broker = BrokerProcess::start(TOPIC, 4);
    let lake = Lake::new(Backend::Embedded, "events");
    let n = 3000u64;
    produce_events(&broker.bootstrap, TOPIC, 4, 0, n);
    let w = Writer::start(&lake);
    let mut o = opts(&broker.bootstrap, &w.addr, 1, 0);
    o.extra = vec![
        ("MILLPOND_RUN_TO_LATEST", "true".into()),
        // Only the end of the data may cut the last flush.
        ("FLUSH_INTERVAL_MS", "600000".into()),
    ];
    let mut ingest = Ingest::start(&o, lake.dir.path());
    let status = ingest.proc.wait_exit(Duration::from_secs(60));
    assert!(
        status.success(),
        "ingest must exit 0 on its own: {status}\n{}",
        ingest.proc.logs()
    );
    let high: i64 = (0..4)
        .map(|p| watermarks(&broker.bootstrap, TOPIC, p).1)
        .sum();
    assert_eq!(high, n as i64);
    assert_eq!(total_committed(&broker.bootstrap, 4), n as i64);
    assert!(
        ingest
            .proc
            .logs()
            .contains("reached its startup high watermark"),
        "{}",
        ingest.proc.logs()
    );
    w.stop();
    assert_eq!(distinct_seq(&lake), (n as i64, n as i64));
}

/// Runs ingest with MILLPOND_RUN_TO_LATEST against `bootstrap` and returns
/// its exit status with its logs.
fn run_once(
    bootstrap: &str,
    writer: &str,
    lake: &Lake,
    extra: Vec<(&'static str, String)>,
) -> (std::process::ExitStatus, String) {
    let mut o = opts(bootstrap, writer, 1, 0);
    o.extra = vec![("MILLPOND_RUN_TO_LATEST", "true".into())];
    o.extra.extend(extra);
    let mut ingest = Ingest::start(&o, lake.dir.path());
    let status = ingest.proc.wait_exit(Duration::from_secs(60));
    (status, ingest.proc.logs())
}

/// A topic deleted and created again, or moved to a new cluster, restarts
/// its offsets. Resuming after the lake's recorded offsets would skip the
/// new topic's first records; ingest refuses to start and names the
/// setting, and with a new MILLPOND_TOPIC_EPOCH it reads the new topic from
/// its beginning into the same table.
#[test]
fn a_recreated_topic_is_refused_then_read_from_its_beginning_under_a_new_epoch() {
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);
    let old = BrokerProcess::start(TOPIC, 1);
    produce_events(&old.bootstrap, TOPIC, 1, 0, 100);
    let (status, logs) = run_once(&old.bootstrap, &w.addr, &lake, vec![]);
    assert!(status.success(), "{logs}");
    assert_eq!(distinct_seq(&lake), (100, 100));
    drop(old);

    // The same topic name on a new cluster, grown past the lake's offsets.
    let new = BrokerProcess::start(TOPIC, 1);
    produce_events(&new.bootstrap, TOPIC, 1, 1000, 300);
    let (status, logs) = run_once(&new.bootstrap, &w.addr, &lake, vec![]);
    assert!(!status.success(), "ingest must refuse to start: {logs}");
    assert!(
        logs.contains("is not the record the lake recorded there")
            && logs.contains("MILLPOND_TOPIC_EPOCH"),
        "{logs}"
    );
    assert_eq!(lake.count(), 100, "nothing of the new topic is written");
    assert_eq!(
        committed(&new.bootstrap, GROUP, TOPIC, 1),
        vec![None],
        "nothing is committed"
    );

    let (status, logs) = run_once(
        &new.bootstrap,
        &w.addr,
        &lake,
        vec![("MILLPOND_TOPIC_EPOCH", "2".into())],
    );
    assert!(status.success(), "{logs}");
    assert_eq!(distinct_seq(&lake), (400, 400), "all 300 of the new topic");
    assert_eq!(total_committed(&new.bootstrap, 1), 300);
    // The old topic's offsets stay as they were; the new one's apart.
    let recorded = lake.query(
        "SELECT topic || ':' || max(last_offset) FROM lake.main._millpond_offsets GROUP BY topic ORDER BY 1",
    );
    assert_eq!(recorded, ["events#2:299", "events:99"]);
    // Restarting with the epoch resumes where the new topic's rows end.
    produce_events(&new.bootstrap, TOPIC, 1, 2000, 10);
    let (status, logs) = run_once(
        &new.bootstrap,
        &w.addr,
        &lake,
        vec![("MILLPOND_TOPIC_EPOCH", "2".into())],
    );
    assert!(status.success(), "{logs}");
    assert_eq!(distinct_seq(&lake), (410, 410));
    w.stop();
}

/// REPLICA_COUNT 1 -> 2 mid-stream on a Postgres catalog, as a rollout does
/// it: the old pod keeps flushing while two new pods start from the offsets
/// the lake held when they read them. The new pods' first flushes then
/// reach into offsets the old pod recorded meanwhile; that is an expected
/// event at a handover, not a crash: they send only what is not recorded
/// yet and go on. Exactly once, no process exits, and conservation holds in
/// each new pod with the records another owner wrote counted apart.
#[test]
fn a_replica_count_change_mid_stream_hands_partitions_over_without_exits() {
    let broker = BrokerProcess::start(TOPIC, 4);
    let lake = Lake::new(Backend::PostgresS3, "events");
    let lease = ("DUCKLAKE_PARTITION_LEASE_S", "6");
    let pod = |name: &'static str| ("POD_NAME", name);
    let with_pod = |o: IngestOpts<'static>, name: &str| IngestOpts {
        extra: vec![("POD_NAME", name.to_owned())],
        ..o
    };
    // Events keep coming, 500 every 250 ms, until the old pod has stopped.
    let chunk = 500u64;
    produce_events(&broker.bootstrap, TOPIC, 4, 0, chunk);
    let bootstrap: &'static str = Box::leak(broker.bootstrap.clone().into_boxed_str());
    let producing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let producer = {
        let producing = producing.clone();
        std::thread::spawn(move || {
            let mut chunks = 1u64;
            while producing.load(std::sync::atomic::Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(250));
                produce_events(bootstrap, TOPIC, 4, chunks * chunk, chunk);
                chunks += 1;
            }
            chunks
        })
    };
    let w_old = Writer::start_with(&lake, &[pod("millpond-old-0"), lease]);
    let w_old_addr: &'static str = Box::leak(w_old.addr.clone().into_boxed_str());
    let old = Ingest::start(
        &with_pod(opts(bootstrap, w_old_addr, 1, 0), "millpond-old-0"),
        lake.dir.path(),
    );
    eventually(Duration::from_secs(60), "the old pod commits", || {
        total_committed(bootstrap, 4) >= chunk as i64
    });
    // The new pods start while the old one still consumes and flushes.
    let w0 = Writer::start_with(&lake, &[pod("millpond-new-0"), lease]);
    let w1 = Writer::start_with(&lake, &[pod("millpond-new-1"), lease]);
    let (a0, a1): (&'static str, &'static str) = (
        Box::leak(w0.addr.clone().into_boxed_str()),
        Box::leak(w1.addr.clone().into_boxed_str()),
    );
    let mut new0 = Ingest::start(
        &with_pod(opts(bootstrap, a0, 2, 0), "millpond-new-0"),
        lake.dir.path(),
    );
    let mut new1 = Ingest::start(
        &with_pod(opts(bootstrap, a1, 2, 1), "millpond-new-1"),
        lake.dir.path(),
    );
    // Once both have read the lake's offsets, the old pod goes on flushing
    // for a few seconds before it stops.
    eventually(Duration::from_secs(60), "the new pods consume", || {
        [&new0, &new1]
            .iter()
            .all(|i| i.proc.logs().contains("consuming"))
    });
    std::thread::sleep(Duration::from_secs(4));
    old.stop();
    w_old.stop();
    producing.store(false, std::sync::atomic::Ordering::SeqCst);
    let total = chunk * producer.join().unwrap();
    eventually(Duration::from_secs(120), "everything committed", || {
        total_committed(bootstrap, 4) == total as i64
            || !(new0.proc.is_running() && new1.proc.is_running())
    });
    for (name, i) in [("new-0", &mut new0), ("new-1", &mut new1)] {
        assert!(
            i.proc.is_running(),
            "{name} exited during the handover:\n{}",
            i.proc.logs()
        );
    }
    assert_eq!(total_committed(bootstrap, 4), total as i64);
    let left_out: f64 = [&new0, &new1]
        .iter()
        .map(|i| {
            i.metric(
                "millpond_records_skipped_total",
                &[("reason", "already_recorded")],
            )
        })
        .sum();
    assert!(
        left_out > 0.0,
        "the new pods met the old pod's last flushes:\n{}\n{}",
        new0.proc.logs(),
        new1.proc.logs()
    );
    for (i, w) in [(&new0, &w0), (&new1, &w1)] {
        assert_eq!(
            i.metric("millpond_records_consumed_total", &[]),
            w.metric("millpond_records_written_total", &[])
                + w.metric("millpond_dead_letters_total", &[])
                + i.metric("millpond_tombstones_total", &[])
                + i.metric(
                    "millpond_records_skipped_total",
                    &[("reason", "already_recorded")]
                ),
            "conservation:\n{}",
            i.proc.logs()
        );
    }
    new0.stop();
    new1.stop();
    w0.stop();
    w1.stop();
    assert_eq!(distinct_seq(&lake), (total as i64, total as i64));
}

/// One poll of records with thousands of keys past MILLPOND_MAX_COLUMNS
/// (each key a value-level dead letter, ~50 times its bytes once held) goes
/// through the stages a part at a time, and the flush is cut at FLUSH_SIZE
/// between parts: several size flushes, not one poll's letters at once.
/// Every record lands once, every extra key once in the dead-letter table.
#[test]
fn a_poll_of_many_keyed_records_is_cut_into_flushes_at_flush_size() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Lake::new(Backend::Embedded, "events");
    let records: Vec<(i32, Option<Vec<u8>>)> = (0..60)
        .map(|i| {
            let keys: Vec<String> = (0..2000).map(|k| format!("\"k{k}\":{}", k % 7)).collect();
            (
                0,
                Some(format!("{{\"seq\":{i},{}}}", keys.join(",")).into_bytes()),
            )
        })
        .collect();
    produce(&bs, TOPIC, &records);
    let w = Writer::start(&lake);
    let mut o = opts(&bs, &w.addr, 1, 0);
    o.extra.push(("FLUSH_INTERVAL_MS", "600000".into()));
    o.extra.push(("FLUSH_SIZE", "4194304".into()));
    o.extra.push(("MILLPOND_MAX_COLUMNS", "10".into()));
    let ingest = Ingest::start(&o, lake.dir.path());
    eventually(Duration::from_secs(60), "everything committed", || {
        total_committed(&bs, 1) == 60
    });
    let size_flushes = ingest.metric("millpond_batches_flushed_total", &[("trigger", "size")]);
    assert!(
        size_flushes >= 4.0,
        "the poll's letters were cut into flushes: {size_flushes} size flushes"
    );
    ingest.stop();
    w.stop();
    assert_eq!(distinct_seq(&lake), (60, 60));
    assert_eq!(
        lake.query(
            "SELECT count(*), count(DISTINCT (kafka_offset, column_name)), \
             count(*) FILTER (reason = 'too_many_columns') FROM lake.main.events_dead_letters"
        ),
        [format!("{n}|{n}|{n}", n = 60 * (2001 - 10))]
    );
}
