//! Kafka -> ingest -> Flight -> writer -> hoglake with the real binaries:
//! librdkafka's mock cluster (in this process), the hoglake emulator as the
//! catalog and moto S3 for the data. The first writer kills itself between
//! its first durable publish and the ack; its replacement (same port) must
//! answer ingest's resend `AlreadyRecorded` without publishing it again.
use std::collections::BTreeMap;
use std::time::Duration;

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;
use millpond_tests::hoglake::{CommitRequest, Hoglake, TABLE};
use millpond_tests::ingest::{eventually, Ingest, IngestOpts};
use millpond_tests::kafka::{committed, produce, produce_events, watermarks};
use millpond_tests::statefulset::logged_counts;
use millpond_tests::writer::Writer;
use rdkafka::mocking::MockCluster;

const TOPIC: &str = "events";
/// Ingest's default group for a hoglake pod names the destination.
const GROUP: &str = "millpond-hoglake-events-events";
const PARTITIONS: i32 = 4;
const N: u64 = 20_000;

fn ingest_opts<'a>(bootstrap: &'a str, writer: &'a str) -> IngestOpts<'a> {
    IngestOpts {
        bootstrap,
        topic: TOPIC,
        table: TABLE,
        writer_addr: writer,
        replicas: 1,
        ordinal: 0,
        extra: vec![
            ("MILLPOND_DESTINATION", "hoglake".into()),
            ("HOGLAKE_TABLE", TABLE.into()),
            // Several flushes per phase, so the kill lands on one of many.
            ("FLUSH_SIZE", "262144".into()),
            // The default, which holds the hoglake writer's default budget.
            ("MILLPOND_WRITER_SEND_DEADLINE_S", "420".into()),
        ],
    }
}

/// Commits the catalog answered 200 (published), oldest first.
fn published(commits: &[CommitRequest]) -> Vec<&CommitRequest> {
    commits.iter().filter(|c| c.status == Some(200)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n_events_land_once_through_a_writer_killed_between_publish_and_ack() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, PARTITIONS, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Hoglake::start();

    produce_events(&bs, TOPIC, PARTITIONS, 0, N / 2);

    let mut w1 = Writer::start_env(
        &lake.writer_env(),
        lake.dir.path(),
        &[("MILLPOND_FAILPOINT", "kill_after_commit")],
    );
    let addr = w1.addr.clone();
    let ingest = Ingest::start(&ingest_opts(&bs, &addr), lake.dir.path());

    // The writer publishes the first flush, then dies before acking it.
    let status = w1.proc.wait_exit(Duration::from_secs(30));
    assert!(
        !status.success(),
        "the failpoint kills the writer: {status}"
    );
    assert!(
        w1.proc.logs().contains("failpoint kill_after_commit"),
        "{}",
        w1.proc.logs()
    );
    let before_restart = lake.emulator.commits();
    let first = published(&before_restart);
    assert_eq!(
        first.len(),
        1,
        "one durable publish before the kill: {before_restart:?}"
    );
    let first = first[0].clone();
    assert!(first.rows > 0, "{first:?}");
    assert_eq!(lake.files().await.len(), first.files);
    assert_eq!(
        committed(&bs, GROUP, TOPIC, PARTITIONS),
        vec![None; PARTITIONS as usize],
        "nothing committed in Kafka without an ack"
    );

    // Same address, no failpoint: ingest resends the flush it holds.
    let w2 = Writer::start_env(
        &lake.writer_env(),
        lake.dir.path(),
        &[("MILLPOND_WRITER_ADDR", &addr)],
    );
    // The other half, and records that are no rows: 4 tombstones and 4
    // undecodable payloads (dead letters: hoglake counts and drops them).
    // They come after the kill, so the second writer counts them all.
    produce_events(&bs, TOPIC, PARTITIONS, N / 2, N / 2);
    let others: Vec<(i32, Option<Vec<u8>>)> = (0..PARTITIONS)
        .flat_map(|p| [(p, None), (p, Some(b"{not json".to_vec()))])
        .collect();
    produce(&bs, TOPIC, &others);
    let highs: Vec<Option<i64>> = (0..PARTITIONS)
        .map(|p| Some(watermarks(&bs, TOPIC, p).1))
        .collect();
    let produced = N + others.len() as u64;
    assert_eq!(
        highs.iter().flatten().sum::<i64>(),
        produced as i64,
        "every record reached the broker"
    );
    eventually(Duration::from_secs(40), "every offset committed", || {
        committed(&bs, GROUP, TOPIC, PARTITIONS) == highs
    });

    // Conservation over both writers: the first one's publish died with
    // its metrics, so its rows come from what it committed to the catalog.
    let consumed = ingest.metric("millpond_records_consumed_total", &[]);
    let tombstones = ingest.metric("millpond_tombstones_total", &[]);
    let skipped = |r: &str| ingest.metric("millpond_records_skipped_total", &[("reason", r)]);
    let filtered =
        skipped("filter_excluded") + skipped("filter_field_missing") + skipped("filter_dropped");
    let written = w2.metric("millpond_records_written_total", &[]);
    let dead = w2.metric("millpond_dead_letters_total", &[]);
    assert_eq!(consumed, produced as f64, "consumed once, never re-read");
    assert_eq!((tombstones, dead, filtered), (4.0, 4.0, 0.0));
    assert_eq!(written, (N - first.rows) as f64);
    assert_eq!(
        consumed,
        written + first.rows as f64 + dead + tombstones + filtered,
        "conservation"
    );
    assert_eq!(
        w2.metric("millpond_flushes_already_recorded_total", &[]),
        1.0
    );
    assert_eq!(
        w2.metric("millpond_hoglake_orphaned_files_total", &[]),
        0.0,
        "the resend is recognised from the offsets tables before anything is uploaded"
    );
    ingest.stop();
    w2.stop();

    // The catalog: the resend was never sent; every flush published once.
    let commits = lake.emulator.commits();
    let published = published(&commits);
    assert!(published.len() >= 3, "several flushes: {commits:?}");
    assert_eq!(
        commits.len(),
        published.len(),
        "no other answer: {commits:?}"
    );
    let mut keys: Vec<&str> = published
        .iter()
        .map(|c| c.idempotency_key.as_str())
        .collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), published.len(), "one publish per key");
    assert_eq!(published.iter().map(|c| c.rows).sum::<u64>(), N);
    assert_eq!(
        published.iter().map(|c| c.dead_letters).sum::<u64>() as f64,
        dead,
        "every dead letter is committed to the dead-letter table, once"
    );

    // Every registered file, read back from S3: the ids are exactly 0..N.
    let files = lake.files().await;
    assert_eq!(
        files.len(),
        published.iter().map(|c| c.files).sum::<usize>()
    );
    let mut seen: BTreeMap<i64, u32> = BTreeMap::new();
    for file in &files {
        let batch = lake.read(file).await;
        assert_eq!(batch.num_rows() as u64, file.record_count, "{}", file.path);
        let seq = batch
            .column_by_name("seq")
            .unwrap_or_else(|| panic!("{} has no seq column", file.path))
            .as_primitive::<Int64Type>();
        assert_eq!(seq.null_count(), 0, "{}", file.path);
        for id in seq.values() {
            *seen.entry(*id).or_default() += 1;
        }
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).take(5).collect();
    assert!(twice.is_empty(), "ids landed more than once: {twice:?}");
    assert_eq!(
        (seen.len() as u64, seen.keys().next(), seen.keys().last()),
        (N, Some(&0), Some(&(N as i64 - 1))),
        "every id 0..N landed"
    );
}

/// The ids every registered file holds, each with how often it landed.
async fn ids_landed(lake: &Hoglake) -> BTreeMap<i64, u32> {
    let mut seen: BTreeMap<i64, u32> = BTreeMap::new();
    for file in &lake.files().await {
        let batch = lake.read(file).await;
        let seq = batch
            .column_by_name("seq")
            .unwrap_or_else(|| panic!("{} has no seq column", file.path))
            .as_primitive::<Int64Type>();
        for id in seq.values() {
            *seen.entry(*id).or_default() += 1;
        }
    }
    seen
}

/// Both processes die after a publish the writer never acknowledged, and
/// ingest comes back with another FLUSH_SIZE: its flushes are cut at other
/// offsets, so the commit keys differ from the published one's. The
/// offsets tables say where the partition stands: ingest resumes after it,
/// and every event lands once (with HOGLAKE_PARTITION_FENCE off the
/// published offsets are read and published again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_that_cuts_flushes_differently_publishes_every_event_once() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, PARTITIONS, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Hoglake::start();
    produce_events(&bs, TOPIC, PARTITIONS, 0, N / 2);

    let mut w1 = Writer::start_env(
        &lake.writer_env(),
        lake.dir.path(),
        &[("MILLPOND_FAILPOINT", "kill_after_commit")],
    );
    let addr = w1.addr.clone();
    let mut ingest = Ingest::start(&ingest_opts(&bs, &addr), lake.dir.path());
    let status = w1.proc.wait_exit(Duration::from_secs(30));
    assert!(
        !status.success(),
        "the failpoint kills the writer: {status}"
    );
    ingest.proc.kill9();
    let first = published(&lake.emulator.commits())
        .first()
        .map(|c| (*c).clone())
        .expect("one publish before the kill");
    assert_eq!(
        committed(&bs, GROUP, TOPIC, PARTITIONS),
        vec![None; PARTITIONS as usize],
        "nothing committed in Kafka without an ack"
    );

    let w2 = Writer::start_env(
        &lake.writer_env(),
        lake.dir.path(),
        &[("MILLPOND_WRITER_ADDR", &addr)],
    );
    let mut opts = ingest_opts(&bs, &addr);
    for (name, value) in opts.extra.iter_mut() {
        if *name == "FLUSH_SIZE" {
            *value = "100000".into();
        }
    }
    let ingest = Ingest::start(&opts, lake.dir.path());
    produce_events(&bs, TOPIC, PARTITIONS, N / 2, N / 2);
    let highs: Vec<Option<i64>> = (0..PARTITIONS)
        .map(|p| Some(watermarks(&bs, TOPIC, p).1))
        .collect();
    eventually(Duration::from_secs(40), "every offset committed", || {
        committed(&bs, GROUP, TOPIC, PARTITIONS) == highs
    });

    // Conservation: the second ingest read what the lake did not hold.
    let consumed = ingest.metric("millpond_records_consumed_total", &[]);
    let written = w2.metric("millpond_records_written_total", &[]);
    assert_eq!(
        consumed,
        (N - first.rows) as f64,
        "resumed after the recorded offsets"
    );
    assert_eq!(written, consumed, "conservation");
    ingest.stop();
    w2.stop();

    let seen = ids_landed(&lake).await;
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).take(5).collect();
    assert!(twice.is_empty(), "ids landed more than once: {twice:?}");
    assert_eq!(
        (seen.len() as u64, seen.keys().next(), seen.keys().last()),
        (N, Some(&0), Some(&(N as i64 - 1))),
        "every id once"
    );
}

/// A pod's final flush, sent at SIGTERM, reaches into offsets a new owner
/// recorded meanwhile, cut at other offsets (a handover during a rollout):
/// the writer refuses it as an overlap, and ingest, within its shutdown
/// grace, reads the recorded offsets, checks them against Kafka's records
/// and leaves those records out, counted as already recorded. It stops
/// cleanly, its counts conserve its records, and every event lands once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_flush_a_new_owner_recorded_meanwhile_is_accounted_at_sigterm() {
    const EVENTS: u64 = 1_000;
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Hoglake::start();
    produce_events(&bs, TOPIC, 1, 0, EVENTS);

    // The old owner holds everything in one flush it has not ended.
    let old_writer = Writer::start_env(&lake.writer_env(), lake.dir.path(), &[]);
    let mut old = ingest_opts(&bs, &old_writer.addr);
    old.extra.retain(|(k, _)| *k != "FLUSH_SIZE");
    old.extra.push(("FLUSH_INTERVAL_MS", "600000".into()));
    let mut old_ingest = Ingest::start(&old, lake.dir.path());
    eventually(
        Duration::from_secs(30),
        "the old owner consumed every event",
        || old_ingest.metric("millpond_records_consumed_total", &[]) == EVENTS as f64,
    );

    // The new owner publishes the same records in smaller flushes and stops.
    let new_writer = Writer::start_env(&lake.writer_env(), lake.dir.path(), &[]);
    let mut new = ingest_opts(&bs, &new_writer.addr);
    new.extra.retain(|(k, _)| *k != "FLUSH_SIZE");
    new.extra.push(("FLUSH_SIZE", "40000".into()));
    new.extra.push(("MILLPOND_RUN_TO_LATEST", "true".into()));
    let mut new_ingest = Ingest::start(&new, lake.dir.path());
    let status = new_ingest.proc.wait_exit(Duration::from_secs(60));
    assert!(status.success(), "{}", new_ingest.proc.logs());
    let flushes = published(&lake.emulator.commits()).len();
    assert!(flushes >= 2, "the new owner cut several flushes: {flushes}");

    // SIGTERM to the old owner: its final flush overlaps what was recorded.
    old_ingest.proc.signal("TERM");
    let status = old_ingest.proc.wait_exit(Duration::from_secs(60));
    let logs = old_ingest.proc.logs();
    assert!(status.success(), "{logs}");
    assert!(
        !logs.contains("did not acknowledge the flush in time"),
        "the final flush was given up: {logs}"
    );
    let counts = logged_counts(&logs, "ingest stopped cleanly").expect("the stop line's counts");
    let count = |name: &str| counts.get(name).copied().unwrap_or(0.0);
    assert_eq!(count("records_consumed_total"), EVENTS as f64, "{logs}");
    assert_eq!(
        count("records_skipped_total"),
        EVENTS as f64,
        "every record left out as recorded by the new owner: {logs}"
    );
    old_writer.stop();
    new_writer.stop();

    assert_eq!(
        published(&lake.emulator.commits()).len(),
        flushes,
        "nothing more published"
    );
    let seen = ids_landed(&lake).await;
    assert!(seen.values().all(|n| *n == 1), "an event landed twice");
    assert_eq!(seen.len() as u64, EVENTS);
}

/// HOGLAKE_PARTITION_BY and MILLPOND_SORT_BY through the real binaries:
/// each flush is one commit holding one Parquet file per partition tuple
/// (team_id, event: 15 tuples), `millpond_flush_files` counts exactly the
/// files the catalog lists, every file holds only its tuple's rows sorted
/// by `seq`, and the files read back hold every event once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_flushes_land_one_sorted_file_per_tuple_in_one_commit() {
    const EVENTS: u64 = 3_000;
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, PARTITIONS, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Hoglake::start();
    produce_events(&bs, TOPIC, PARTITIONS, 0, EVENTS);

    let w = Writer::start_env(
        &lake.writer_env(),
        lake.dir.path(),
        &[
            ("HOGLAKE_PARTITION_BY", "team_id, event"),
            ("MILLPOND_SORT_BY", "seq"),
        ],
    );
    let mut opts = ingest_opts(&bs, &w.addr);
    for (name, value) in opts.extra.iter_mut() {
        if *name == "FLUSH_SIZE" {
            *value = "65536".into();
        }
    }
    opts.extra.push(("MILLPOND_SORT_BY", "seq".into()));
    let ingest = Ingest::start(&opts, lake.dir.path());
    let highs: Vec<Option<i64>> = (0..PARTITIONS)
        .map(|p| Some(watermarks(&bs, TOPIC, p).1))
        .collect();
    eventually(Duration::from_secs(60), "every offset committed", || {
        committed(&bs, GROUP, TOPIC, PARTITIONS) == highs
    });
    let consumed = ingest.metric("millpond_records_consumed_total", &[]);
    let written = w.metric("millpond_records_written_total", &[]);
    assert_eq!(
        (consumed, written),
        (EVENTS as f64, EVENTS as f64),
        "conservation"
    );
    let flush_files = (
        w.metric("millpond_flush_files_count", &[]),
        w.metric("millpond_flush_files_sum", &[]),
    );
    ingest.stop();
    w.stop();

    // One commit per flush; in each, one data file per tuple.
    let commits = lake.emulator.requests("/prepared$");
    assert!(commits.len() >= 2, "several flushes: {}", commits.len());
    let mut committed_files = 0;
    for commit in &commits {
        assert_eq!(commit["status"].as_u64(), Some(200), "{commit}");
        let tuples: Vec<&serde_json::Value> = commit["body"]["appends"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["table"] == TABLE)
            .flat_map(|a| a["files"].as_array().unwrap())
            .map(|f| &f["partition_values"])
            .collect();
        let mut distinct = tuples.clone();
        distinct.sort_by_key(|t| t.to_string());
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            tuples.len(),
            "a tuple split across files: {tuples:?}"
        );
        assert!(tuples.len() > 1, "{tuples:?}");
        committed_files += tuples.len();
    }
    let files = lake.files().await;
    assert_eq!(files.len(), committed_files);
    assert_eq!(
        flush_files,
        (commits.len() as f64, files.len() as f64),
        "millpond_flush_files observes each commit's data files"
    );

    // Every file: its tuple's rows only, sorted by seq; every event once.
    let mut seen: BTreeMap<i64, u32> = BTreeMap::new();
    for file in &files {
        let values = file.partition_values.clone().expect("a partitioned file");
        let batch = lake.read(file).await;
        assert_eq!(batch.num_rows() as u64, file.record_count, "{}", file.path);
        let seq: Vec<i64> = batch
            .column_by_name("seq")
            .unwrap()
            .as_primitive::<Int64Type>()
            .values()
            .to_vec();
        assert!(
            seq.windows(2).all(|w| w[0] < w[1]),
            "{} is not sorted by seq",
            file.path
        );
        for s in &seq {
            let tuple = vec![Some((s % 3).to_string()), Some(format!("e{}", s % 5))];
            assert_eq!(values, tuple, "seq {s} in {}", file.path);
            *seen.entry(*s).or_default() += 1;
        }
    }
    assert!(seen.values().all(|n| *n == 1), "an event landed twice");
    assert_eq!(
        (seen.len() as u64, seen.keys().next(), seen.keys().last()),
        (EVENTS, Some(&0), Some(&(EVENTS as i64 - 1)))
    );
}
