//! millpond-replay: re-send a Kafka offset range or a JSON-lines file.
use std::process::Command;

use millpond_proto::OffsetRange;
use millpond_tests::flight::{client, recorded};
use millpond_tests::kafka::{produce, produce_events};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::process::binary;
use millpond_tests::writer::Writer;
use rdkafka::mocking::MockCluster;

/// Runs the tool: (exit status, stdout, stderr).
fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(binary("millpond-replay"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn replay(args: &[&str]) -> String {
    let (status, stdout, stderr) = run(args);
    assert_eq!(status, Some(0), "replay failed: {stderr}");
    stdout
}

fn args(a: &[String]) -> Vec<&str> {
    a.iter().map(String::as_str).collect()
}

/// The offsets the writer says the lake recorded for `topic`.
/// The recorded ranges, without the last record each remembers.
fn recorded_offsets(addr: &str, topic: &str) -> Vec<OffsetRange> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async { recorded(&mut client(addr).await, topic).await })
        .into_iter()
        .map(|r| OffsetRange::new(r.topic, r.partition, r.first, r.last))
        .collect()
}

#[test]
fn replays_a_kafka_range_once_and_a_jsonl_file() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("events", 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    produce_events(&bs, "events", 1, 0, 100);
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);
    let kafka = [
        "--writer",
        &w.addr,
        "--topic",
        "events",
        "--partition",
        "0",
        "--kafka",
        &bs,
        "--from",
        "0",
        "--to",
        "49",
    ];
    let first = replay(&kafka);
    assert!(first.contains("50 records"), "{first}");
    assert!(first.contains("Written, 50 rows"), "{first}");
    // A resend of the very range recorded last writes nothing, says so,
    // and exits 3.
    let (status, again, stderr) = run(&kafka);
    assert_eq!(status, Some(3), "{again}{stderr}");
    assert!(
        again.contains("AlreadyRecorded, nothing written: the lake had already recorded exactly events partition 0 offsets 0..=49"),
        "{again}"
    );
    assert!(!again.contains("rows"), "{again}");

    let file = lake.dir.path().join("events.jsonl");
    std::fs::write(&file, "{\"seq\":1000}\nnot json\n{\"seq\":1001}\n").unwrap();
    let f = file.display().to_string();
    let mut into_events = vec![
        "--writer",
        &w.addr,
        "--topic",
        "events",
        "--partition",
        "0",
        "--jsonl",
        &f,
        "--from",
        "50",
    ];
    // The lake records events' offsets from Kafka's records: a file's lines
    // under that topic would take offsets of records Kafka holds or will.
    let (status, stdout, stderr) = run(&into_events);
    assert_eq!(status, Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("partition 0 up to offset 49")
            && stderr.contains("--topic events.replayed")
            && stderr.contains("--into-pipeline-topic"),
        "{stderr}"
    );
    assert_eq!(
        recorded_offsets(&w.addr, "events"),
        [OffsetRange::new("events", 0, 0, 49)],
        "nothing recorded"
    );
    into_events.push("--into-pipeline-topic");
    let out = replay(&into_events);
    assert!(
        out.contains("3 records, 1 not JSON objects, 0 tombstones"),
        "{out}"
    );
    assert!(out.contains("Written, 2 rows and 1 dead letters"), "{out}");
    w.stop();
    assert_eq!(lake.count(), 52);
    assert_eq!(
        lake.query("SELECT kafka_offset, reason FROM lake.main.events_dead_letters"),
        ["51|invalid_json"],
        "the replayed file's bad line is a dead letter at its offset"
    );
}

/// The replay tool runs the pipeline's stages from the same variables:
/// MILLPOND_SORT_BY sorts the flush before it is sent (ties keep their
/// order, nulls last), and a missing sort key sends it unsorted.
#[test]
fn replay_applies_the_pre_write_sort() {
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);
    let file = lake.dir.path().join("unsorted.jsonl");
    std::fs::write(
        &file,
        "{\"team\":3,\"seq\":0}\n{\"seq\":1}\n{\"team\":1,\"seq\":2}\n{\"team\":3,\"seq\":3}\n{\"team\":1,\"seq\":4}\n",
    )
    .unwrap();
    let run = |sort_by: &str, partition: &str| {
        let out = Command::new(binary("millpond-replay"))
            .env("MILLPOND_SORT_BY", sort_by)
            .args([
                "--writer",
                &w.addr,
                "--topic",
                "events",
                "--partition",
                partition,
            ])
            .args(["--jsonl", &file.display().to_string(), "--from", "0"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    run("team", "0");
    let skipped = run("nope", "1");
    assert!(skipped.contains("field_missing"), "{skipped}");
    w.stop();
    assert_eq!(
        lake.query("SELECT string_agg(seq::VARCHAR, ',' ORDER BY rowid) FROM lake.main.events GROUP BY seq // 1000"),
        ["2,4,0,3,1,0,1,2,3,4"]
    );
}

/// The pipeline's filters apply to a replay too, and its summary says how
/// many records they dropped: those are neither rows nor dead letters.
#[test]
fn replay_reports_what_its_filters_dropped() {
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);
    let file = lake.dir.path().join("teams.jsonl");
    std::fs::write(
        &file,
        "{\"team\":3,\"seq\":0}\n{\"team\":1,\"seq\":1}\n{\"team\":3,\"seq\":2}\n{\"team\":2,\"seq\":3}\n",
    )
    .unwrap();
    let out = Command::new(binary("millpond-replay"))
        .env("MILLPOND_FILTER_DROP_FIELD_NAME", "team")
        .env("MILLPOND_FILTER_DROP_VALUES", "3")
        .args(["--writer", &w.addr, "--topic", "events", "--partition", "0"])
        .args(["--jsonl", &file.display().to_string(), "--from", "0"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout
            .contains("4 records, 0 not JSON objects, 0 tombstones, 2 filtered: filter_dropped 2"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Written, 2 rows and 0 dead letters"),
        "{stdout}"
    );
    w.stop();
    assert_eq!(
        lake.query("SELECT string_agg(seq::VARCHAR, ',' ORDER BY seq) FROM lake.main.events"),
        ["1,3"]
    );
}

/// MILLPOND_TYPED_COLUMNS pins columns: a uuid column lands as a DuckDB
/// UUID and a timestamp as TIMESTAMPTZ; values that do not convert are
/// NULL in their row and dead letters (`column_coercion`). An earlier value
/// of a repeated key is a `duplicate_field_name` dead letter.
#[test]
fn typed_columns_land_as_their_types() {
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);
    let file = lake.dir.path().join("typed.jsonl");
    std::fs::write(
        &file,
        concat!(
            "{\"seq\":0,\"uuid\":\"F79C3E09-677C-4BBD-A479-3F349CB785E7\",\"ts\":\"2024-01-01 12:00:00.123\",\"project_id\":null}\n",
            "{\"seq\":1,\"uuid\":\"urn:uuid:f79c3e09677c4bbda4793f349cb785e7\",\"ts\":\"2024-01-01T12:00:00Z\",\"project_id\":7}\n",
            "{\"seq\":2,\"uuid\":\"0x1234\",\"ts\":\"tomorrow\",\"project_id\":\"7.5\"}\n",
            // Beyond the original's grammar, and a leap second: refused,
            // never read or moved. A repeated key: the last value lands.
            "{\"seq\":3,\"project_id\":9,\"uuid\":\"urn:uuid:{f79c3e09677c4bbda4793f349cb785e7}\",\"ts\":\"2016-12-31 23:59:60.5\",\"project_id\":8}\n",
        ),
    )
    .unwrap();
    let out = Command::new(binary("millpond-replay"))
        .env(
            "MILLPOND_TYPED_COLUMNS",
            "uuid:uuid,ts:timestamptz,project_id:bigint",
        )
        .args(["--writer", &w.addr, "--topic", "events", "--partition", "0"])
        .args(["--jsonl", &file.display().to_string(), "--from", "0"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    w.stop();
    let types: std::collections::HashMap<String, String> = lake.columns().into_iter().collect();
    assert_eq!(types["uuid"], "UUID");
    assert_eq!(types["ts"], "TIMESTAMP WITH TIME ZONE");
    assert_eq!(types["project_id"], "BIGINT");
    assert_eq!(
        lake.query("SELECT seq, uuid, epoch_ms(ts), project_id FROM lake.main.events ORDER BY seq"),
        [
            "0|f79c3e09-677c-4bbd-a479-3f349cb785e7|1704110400123|NULL",
            "1|f79c3e09-677c-4bbd-a479-3f349cb785e7|1704110400000|7",
            "2|NULL|NULL|NULL",
            "3|NULL|NULL|8",
        ]
    );
    assert_eq!(
        lake.query(
            "SELECT kafka_offset, reason, column_name, live_type, original::VARCHAR \
             FROM lake.main.events_dead_letters ORDER BY column_name, kafka_offset"
        ),
        [
            "2|column_coercion|project_id|BIGINT|7.5",
            "3|duplicate_field_name|project_id|NULL|9",
            "2|column_coercion|ts|TIMESTAMP WITH TIME ZONE|tomorrow",
            "3|column_coercion|ts|TIMESTAMP WITH TIME ZONE|2016-12-31 23:59:60.5",
            "2|column_coercion|uuid|UUID|0x1234",
            "3|column_coercion|uuid|UUID|urn:uuid:{f79c3e09677c4bbda4793f349cb785e7}",
        ]
    );
}

/// A range starting above the partition's next offset would leave the
/// offsets between unrecorded for good: it is refused, naming them, and
/// nothing is recorded; with --allow-gap it is recorded and the skipped
/// offsets are named. Nothing recorded, a partition starts at 0.
#[test]
fn a_replay_that_would_leave_a_gap_is_refused_unless_allowed() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("events", 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    produce_events(&bs, "events", 1, 0, 100);
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);
    let kafka = |from: &'static str, to: &'static str| {
        [
            "--writer",
            &w.addr,
            "--topic",
            "events",
            "--partition",
            "0",
            "--kafka",
            &bs,
            "--from",
            from,
            "--to",
            to,
        ]
        .map(str::to_owned)
    };
    replay(&args(&kafka("0", "9")));
    let before = vec![OffsetRange::new("events", 0, 0, 9)];
    assert_eq!(recorded_offsets(&w.addr, "events"), before);

    let (status, stdout, stderr) = run(&args(&kafka("50", "59")));
    assert_eq!(status, Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains(
            "the lake recorded offsets up to 9, so offsets 10..=49 would never be recorded"
        ) && stderr.contains("--from 10")
            && stderr.contains("--allow-gap"),
        "{stderr}"
    );
    assert_eq!(
        recorded_offsets(&w.addr, "events"),
        before,
        "nothing recorded"
    );

    let gap = kafka("50", "59");
    let mut allowed = args(&gap);
    allowed.push("--allow-gap");
    let (status, stdout, stderr) = run(&allowed);
    assert_eq!(status, Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains("--allow-gap: skipping offsets 10..=49 of events partition 0"),
        "{stderr}"
    );
    assert!(stdout.contains("Written, 10 rows"), "{stdout}");
    assert_eq!(
        recorded_offsets(&w.addr, "events"),
        [OffsetRange::new("events", 0, 50, 59)]
    );

    // Nothing recorded for a topic of its own: the first range starts at 0.
    let file = lake.dir.path().join("fixed.jsonl");
    std::fs::write(&file, "{\"seq\":1}\n").unwrap();
    let f = file.display().to_string();
    let jsonl = |from| {
        run(&[
            "--writer",
            &w.addr,
            "--topic",
            "events.replayed",
            "--partition",
            "0",
            "--jsonl",
            &f,
            "--from",
            from,
        ])
    };
    let (status, _, stderr) = jsonl("5");
    assert_eq!(status, Some(1), "{stderr}");
    assert!(
        stderr.contains("the lake recorded no offsets for it")
            && stderr.contains("offsets 0..=4 would never be recorded"),
        "{stderr}"
    );
    assert_eq!(recorded_offsets(&w.addr, "events.replayed"), []);
    let (status, stdout, stderr) = jsonl("0");
    assert_eq!(status, Some(0), "{stdout}{stderr}");
    w.stop();
    assert_eq!(lake.count(), 21);
}

/// A Kafka replay reads records whole: a record that is not JSON is a dead
/// letter with its key and Kafka timestamp, as ingest would have made it.
#[test]
fn a_kafka_replay_keeps_the_key_and_timestamp_of_its_dead_letters() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("events", 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    produce(
        &bs,
        "events",
        &[
            (0, Some(b"{\"seq\":0}".to_vec())),
            (0, Some(b"not json".to_vec())),
        ],
    );
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);
    let out = replay(&[
        "--writer",
        &w.addr,
        "--topic",
        "events",
        "--partition",
        "0",
        "--kafka",
        &bs,
        "--from",
        "0",
        "--to",
        "1",
    ]);
    assert!(out.contains("Written, 1 rows and 1 dead letters"), "{out}");
    w.stop();
    assert_eq!(
        lake.query(
            "SELECT kafka_offset, decode(kafka_key), kafka_timestamp IS NOT NULL \
             FROM lake.main.events_dead_letters"
        ),
        ["1|k|true"]
    );
}

/// The operator's mistake from issue 42: a file replayed under the topic a
/// running pipeline consumes, at the partition's next offset. The tool
/// refuses it; forced, it records offsets 100..=119 with other records, and
/// the running ingest then meets those offsets: it must not count its own
/// records there as written by another owner (they never landed). It stops
/// and says which partition, which offsets and what to do, commits
/// nothing past 100, and a restart refuses the same way instead of
/// resuming after the replay's offsets.
#[test]
fn offsets_a_replay_recorded_never_stand_for_the_pipelines_records() {
    use millpond_tests::ingest::{eventually, Ingest, IngestOpts};
    use millpond_tests::kafka::committed;
    use std::time::Duration;

    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("events", 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    produce_events(&bs, "events", 1, 0, 100);
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);
    let opts = || IngestOpts {
        bootstrap: &bs,
        topic: "events",
        table: "events",
        writer_addr: &w.addr,
        replicas: 1,
        ordinal: 0,
        extra: vec![],
    };
    let group = "millpond-events-events";
    let at = || committed(&bs, group, "events", 1)[0];
    let mut ingest = Ingest::start(&opts(), lake.dir.path());
    eventually(Duration::from_secs(60), "100 committed", || {
        at() == Some(100)
    });

    let file = lake.dir.path().join("fixed.jsonl");
    let lines: String = (0..20)
        .map(|i| format!("{{\"seq\":{}}}\n", 9000 + i))
        .collect();
    std::fs::write(&file, lines).unwrap();
    let f = file.display().to_string();
    let mut into_events = vec![
        "--writer",
        &w.addr,
        "--topic",
        "events",
        "--partition",
        "0",
        "--jsonl",
        &f,
        "--from",
        "100",
    ];
    let (status, _, stderr) = run(&into_events);
    assert_eq!(status, Some(1), "refused: {stderr}");
    assert!(stderr.contains("--into-pipeline-topic"), "{stderr}");
    into_events.push("--into-pipeline-topic");
    assert!(replay(&into_events).contains("Written, 20 rows"));

    // Kafka's own offsets 100..=139 arrive.
    produce_events(&bs, "events", 1, 100, 40);
    let status = ingest.proc.wait_exit(Duration::from_secs(90));
    let logs = ingest.proc.logs();
    assert!(!status.success(), "ingest stops: {logs}");
    assert!(
        logs.contains("partition 0")
            && logs.contains("(100..=119)")
            && logs.contains("_millpond_offsets"),
        "names the partition, the offsets and the fix: {logs}"
    );
    assert_eq!(at(), Some(100), "nothing committed past the real records");

    // A restart does not resume after the replay's offsets either.
    let mut again = Ingest::start(&opts(), lake.dir.path());
    let status = again.proc.wait_exit(Duration::from_secs(90));
    let logs = again.proc.logs();
    assert!(!status.success(), "the restart refuses: {logs}");
    assert!(
        logs.contains("partition 0") && logs.contains("119") && logs.contains("_millpond_offsets"),
        "{logs}"
    );
    assert_eq!(at(), Some(100));
    w.stop();
    assert_eq!(
        lake.column_text("count(*) FILTER (WHERE seq < 9000)")[0].as_deref(),
        Some("100"),
        "the pipeline's records 100..=139 did not land as written by anyone"
    );
}
