//! The full pipeline against a separate-process Kafka-compatible broker
//! (nisshi), with crashes at arbitrary moments rather than failpoints.
use std::time::Duration;

use millpond_tests::ingest::{eventually, Ingest, IngestOpts};
use millpond_tests::kafka::{committed, produce_events};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::nisshi::Nisshi;
use millpond_tests::writer::Writer;

const TOPIC: &str = "events";
const GROUP: &str = "millpond-events-events";

fn committed_total(bootstrap: &str) -> i64 {
    committed(bootstrap, GROUP, TOPIC, 4)
        .into_iter()
        .map(|o| o.unwrap_or(0))
        .sum()
}

fn start_pod<'a>(bootstrap: &'a str, writer: &'a Writer, ordinal: i32, lake: &Lake) -> Ingest {
    let o = IngestOpts {
        bootstrap,
        topic: TOPIC,
        table: "events",
        writer_addr: &writer.addr,
        replicas: 2,
        ordinal,
        // Small flushes: many commits, so a kill lands mid-stream.
        extra: vec![
            ("FLUSH_SIZE", "200000".into()),
            ("FLUSH_INTERVAL_MS", "500".into()),
        ],
    };
    Ingest::start(&o, lake.dir.path())
}

#[test]
fn kill9_of_every_process_mid_stream_still_lands_each_event_once() {
    let broker = Nisshi::start();
    broker.create_topic(TOPIC, 4);
    let n = 20_000u64;
    produce_events(&broker.bootstrap, TOPIC, 4, 0, n);
    let lake = Lake::new(Backend::PostgresS3, "events");

    let mut w0 = Writer::start(&lake);
    let mut w1 = Writer::start(&lake);
    let mut i0 = start_pod(&broker.bootstrap, &w0, 0, &lake);
    let mut i1 = start_pod(&broker.bootstrap, &w1, 1, &lake);
    eventually(Duration::from_secs(120), "some progress", || {
        committed_total(&broker.bootstrap) > 2_000
    });
    // SIGKILL everything while flushes are in flight.
    i0.proc.kill9();
    w1.proc.kill9();
    i1.proc.kill9();
    w0.proc.kill9();
    let before = committed_total(&broker.bootstrap);
    assert!(
        before < n as i64,
        "killed mid-stream ({before} of {n} committed)"
    );

    let w0 = Writer::start(&lake);
    let w1 = Writer::start(&lake);
    let i0 = start_pod(&broker.bootstrap, &w0, 0, &lake);
    let i1 = start_pod(&broker.bootstrap, &w1, 1, &lake);
    eventually(Duration::from_secs(180), "everything committed", || {
        committed_total(&broker.bootstrap) == n as i64
    });
    i0.stop();
    i1.stop();
    w0.stop();
    w1.stop();
    assert_eq!(lake.count(), n as i64);
    assert_eq!(
        lake.column_text("count(DISTINCT seq)"),
        vec![Some(n.to_string())]
    );
}
