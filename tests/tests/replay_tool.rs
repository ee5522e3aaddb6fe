//! millpond-replay: re-send a Kafka offset range or a JSON-lines file.
use std::process::Command;

use millpond_tests::kafka::produce_events;
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::process::binary;
use millpond_tests::writer::Writer;
use rdkafka::mocking::MockCluster;

fn replay(args: &[&str]) -> String {
    let out = Command::new(binary("millpond-replay"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "replay failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
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
    let again = replay(&kafka);
    assert!(again.contains("AlreadyRecorded, 0 rows"), "{again}");

    let file = lake.dir.path().join("events.jsonl");
    std::fs::write(&file, "{\"seq\":1000}\nnot json\n{\"seq\":1001}\n").unwrap();
    let f = file.display().to_string();
    let out = replay(&[
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
    ]);
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
