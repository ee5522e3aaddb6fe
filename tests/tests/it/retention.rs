//! Records Kafka deleted (retention) before ingest read them: counted per
//! partition on `records_lost_to_retention_total`, logged with their span,
//! and reading resumes at the log start, at startup and while ingest runs.
//! KAFKA_AUTO_OFFSET_RESET decides only for a partition with no position
//! anywhere. The broker is librdkafka's mock cluster, which keeps ~5 MiB per
//! partition: producing more moves the log start.
use std::time::Duration;

use millpond_proto::OffsetRange;
use millpond_tests::flight::{client, descriptor, put, rows, with_coordinates};
use millpond_tests::ingest::{eventually, Ingest, IngestOpts};
use millpond_tests::kafka::{commit, committed, produce, watermarks};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::writer::Writer;
use rdkafka::mocking::MockCluster;

const TOPIC: &str = "events";
const GROUP: &str = "millpond-events-events";
const LOST: &str = "millpond_records_lost_to_retention_total";
const CONSUMED: &str = "millpond_records_consumed_total";

fn opts<'a>(bootstrap: &'a str, writer: &'a str, reset: &str) -> IngestOpts<'a> {
    IngestOpts {
        bootstrap,
        topic: TOPIC,
        table: "events",
        writer_addr: writer,
        replicas: 1,
        ordinal: 0,
        extra: vec![("KAFKA_AUTO_OFFSET_RESET", reset.into())],
    }
}

/// `n` records `{"seq": start..}` into `partition`, each padded to `pad`
/// bytes.
fn produce_seq(bootstrap: &str, partition: i32, start: u64, n: u64, pad: usize) {
    let pad = "x".repeat(pad);
    let records: Vec<_> = (start..start + n)
        .map(|i| {
            let body = format!(r#"{{"seq":{i},"pad":"{pad}"}}"#);
            (partition, Some(body.into_bytes()))
        })
        .collect();
    produce(bootstrap, TOPIC, &records);
}

/// ~9 MiB into `partition`: the mock keeps ~5 MiB, so its log start moves.
fn flood(bootstrap: &str, partition: i32, start: u64) {
    produce_seq(bootstrap, partition, start, 90, 100_000);
}

/// Rows of the lake whose `seq` is in `range`.
fn rows_with_seq(lake: &Lake, range: std::ops::Range<u64>) -> i64 {
    lake.column_text(&format!(
        "count(*) FILTER (WHERE seq >= {} AND seq < {})",
        range.start, range.end
    ))[0]
        .clone()
        .unwrap()
        .parse()
        .unwrap()
}

/// Three partitions: p0's position is only the group's committed offset
/// (1), p1's only the lake's (it recorded offsets 0..=4; nothing
/// committed), and both fall below the log start; p2 has no position at
/// all. p0 and p1 resume at their log start with the span below it counted
/// and logged, whatever the reset; p2 starts where the reset says (`latest`:
/// the high watermark, so its 10 earlier records are not read).
fn a_position_below_the_log_start_resumes_there(reset: &str) {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 3, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);
    commit(&bs, GROUP, TOPIC, 0, 1);
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let mut c = client(&w.addr).await;
        let flush = descriptor("by-hand", vec![OffsetRange::new(TOPIC, 1, 0, 4)], 5);
        put(&mut c, &flush, vec![with_coordinates(rows(0, 5), 1, 0)])
            .await
            .unwrap();
    });
    flood(&bs, 0, 0);
    flood(&bs, 1, 1000);
    produce_seq(&bs, 2, 2000, 10, 10);
    let (low0, high0) = watermarks(&bs, TOPIC, 0);
    let (low1, high1) = watermarks(&bs, TOPIC, 1);
    assert!(
        low0 > 1 && low1 > 5,
        "the log starts moved past the positions ({low0}, {low1})"
    );

    let ingest = Ingest::start(&opts(&bs, &w.addr, reset), lake.dir.path());
    eventually(
        Duration::from_secs(60),
        "p0 and p1 read to their ends",
        || {
            let c = committed(&bs, GROUP, TOPIC, 3);
            c[0] == Some(high0) && c[1] == Some(high1)
        },
    );
    // Records produced into p2 once ingest reads land whatever the reset.
    produce_seq(&bs, 2, 3000, 5, 10);
    eventually(
        Duration::from_secs(60),
        "p2's new records committed",
        || committed(&bs, GROUP, TOPIC, 3)[2] == Some(15),
    );
    let lost = |p: &str| ingest.metric(LOST, &[("partition", p)]);
    let consumed = |p: &str| ingest.metric(CONSUMED, &[("partition", p)]);
    assert_eq!(lost("0"), (low0 - 1) as f64, "p0 lost 1..{low0}");
    assert_eq!(lost("1"), (low1 - 5) as f64, "p1 lost 5..{low1}");
    let p2 = millpond_tests::scrape::metric(&ingest.metrics(), LOST, &[("partition", "2")]);
    assert_eq!(
        p2,
        Some(0.0),
        "every assigned partition's series is exported at 0"
    );
    // The offsets each position advanced over: consumed + lost.
    assert_eq!(consumed("0") + lost("0"), (high0 - 1) as f64);
    assert_eq!(consumed("1") + lost("1"), (high1 - 5) as f64);
    let logs = ingest.proc.logs();
    for (p, from, to) in [(0, 1, low0 - 1), (1, 5, low1 - 1)] {
        assert!(
            logs.contains(&format!("partition={p} from={from} to={to}")),
            "the loss of p{p} is logged with its span:\n{logs}"
        );
    }
    let early = if reset == "latest" { 0 } else { 10 };
    assert_eq!(consumed("2"), (early + 5) as f64);
    let total = consumed("0") + consumed("1") + consumed("2");
    ingest.stop();
    w.stop();
    assert_eq!(lake.count() as f64, 5.0 + total);
    assert_eq!(rows_with_seq(&lake, 0..90), high0 - low0);
    assert_eq!(rows_with_seq(&lake, 1000..1090), high1 - low1);
    assert_eq!(rows_with_seq(&lake, 2000..2010), early);
}

#[test]
fn a_position_below_the_log_start_resumes_there_counting_the_loss() {
    a_position_below_the_log_start_resumes_there("earliest");
}

/// `latest` never skips what Kafka still holds for a partition that has a
/// position: it applies only where there is none.
#[test]
fn with_latest_a_position_below_the_log_start_still_resumes_at_the_log_start() {
    a_position_below_the_log_start_resumes_there("latest");
}

/// The log start moves past ingest's position while it runs (the process
/// is stopped with SIGSTOP meanwhile): the span is counted and logged, and
/// every record from the log start on lands, even with `latest` (which
/// librdkafka's own reset would have taken to the high watermark).
#[test]
fn the_log_start_passing_a_running_ingest_is_counted_and_reading_goes_on() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    // A position (offset 0), so `latest` decides nothing here.
    commit(&bs, GROUP, TOPIC, 0, 0);
    produce_seq(&bs, 0, 0, 20, 10);
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);
    let ingest = Ingest::start(&opts(&bs, &w.addr, "latest"), lake.dir.path());
    eventually(
        Duration::from_secs(60),
        "the first records committed",
        || committed(&bs, GROUP, TOPIC, 1)[0] == Some(20),
    );
    ingest.proc.signal("STOP");
    flood(&bs, 0, 100);
    let (low, high) = watermarks(&bs, TOPIC, 0);
    ingest.proc.signal("CONT");
    assert!(low > 20, "the log start moved past ingest (low {low})");
    eventually(Duration::from_secs(60), "read to the end", || {
        committed(&bs, GROUP, TOPIC, 1)[0] == Some(high)
    });
    let lost = ingest.metric(LOST, &[("partition", "0")]);
    let consumed = ingest.metric(CONSUMED, &[("partition", "0")]);
    assert!(lost > 0.0, "{}", ingest.proc.logs());
    assert_eq!(consumed + lost, high as f64, "every offset accounted for");
    let logs = ingest.proc.logs();
    let span = format!("to={} lost={lost}", low - 1);
    assert!(
        logs.lines()
            .any(|l| l.contains(&span) && l.contains("while consuming")),
        "the loss is logged with its span:\n{logs}"
    );
    ingest.stop();
    w.stop();
    assert_eq!(lake.count() as f64, consumed);
    // Offsets from 20 on hold seq 100 on: everything from the log start landed.
    let seq_at_low = 100 + (low - 20) as u64;
    assert_eq!(rows_with_seq(&lake, seq_at_low..190), high - low);
}
