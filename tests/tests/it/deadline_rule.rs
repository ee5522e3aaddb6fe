//! The one deadline rule with the real binaries: ingest's send deadline
//! must hold the writer's whole-write budget (answered to its startup
//! announcement) plus the margin. A writer whose budget is longer makes
//! ingest refuse to start, naming both settings and their numbers; the
//! default pairs start.
use std::time::Duration;

use millpond_tests::hoglake::{Hoglake, TABLE};
use millpond_tests::ingest::{eventually, Ingest, IngestOpts};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::writer::Writer;
use rdkafka::mocking::MockCluster;

const TOPIC: &str = "events";

fn opts<'a>(bootstrap: &'a str, writer: &'a str, extra: Vec<(&'a str, String)>) -> IngestOpts<'a> {
    IngestOpts {
        bootstrap,
        topic: TOPIC,
        table: TABLE,
        writer_addr: writer,
        replicas: 1,
        ordinal: 0,
        extra,
    }
}

fn hoglake_ingest(deadline_s: &str) -> Vec<(&'static str, String)> {
    vec![
        ("MILLPOND_DESTINATION", "hoglake".into()),
        ("HOGLAKE_TABLE", TABLE.into()),
        ("MILLPOND_WRITER_SEND_DEADLINE_S", deadline_s.into()),
    ]
}

#[test]
fn a_writer_budget_past_the_send_deadline_refuses_ingest_and_the_defaults_start() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Hoglake::start();
    // The hoglake writer's defaults (the tests' env shortens them): a
    // 383.75 s budget.
    let mut env = lake.writer_env();
    env.retain(|(k, _)| k != "HOGLAKE_REQUEST_TIMEOUT_S" && k != "HOGLAKE_MAX_RETRY_COUNT");
    let w = Writer::start_env(&env, lake.dir.path(), &[]);

    let mut refused = Ingest::start(&opts(&bs, &w.addr, hoglake_ingest("300")), lake.dir.path());
    let status = refused.proc.wait_exit(Duration::from_secs(60));
    let logs = refused.proc.logs();
    assert!(!status.success(), "{logs}");
    for part in [
        "MILLPOND_WRITER_SEND_DEADLINE_S (300 s) cannot hold a write the writer may still be doing",
        "383.8 s",
        "HOGLAKE_MAX_RETRY_COUNT x HOGLAKE_REQUEST_TIMEOUT_S",
        "at least 404 s",
    ] {
        assert!(logs.contains(part), "{part:?} not in:\n{logs}");
    }
    assert!(!logs.contains("\"consuming\""), "{logs}");

    // Ingest's default deadline (420 s) holds the default budget.
    let ingest = Ingest::start(&opts(&bs, &w.addr, hoglake_ingest("420")), lake.dir.path());
    eventually(Duration::from_secs(60), "ingest ready", || {
        ingest.ready() == 200
    });
    assert!(
        ingest
            .proc
            .logs()
            .contains("the send deadline holds the writer's whole-write budget"),
        "{}",
        ingest.proc.logs()
    );
    ingest.stop();
    w.stop();
}

/// The DuckLake writer's budget (DUCKLAKE_WRITE_BUDGET_S) follows the same
/// rule: its default (300 s) fits ingest's default deadline, a longer one
/// does not.
#[test]
fn the_ducklake_writer_budget_follows_the_same_rule() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Lake::new(Backend::Embedded, TABLE);
    let deadline = |s: &str| vec![("MILLPOND_WRITER_SEND_DEADLINE_S", s.to_string())];

    let long = Writer::start_with(&lake, &[("DUCKLAKE_WRITE_BUDGET_S", "450")]);
    let mut refused = Ingest::start(&opts(&bs, &long.addr, deadline("420")), lake.dir.path());
    assert!(!refused.proc.wait_exit(Duration::from_secs(60)).success());
    let logs = refused.proc.logs();
    assert!(
        logs.contains("MILLPOND_WRITER_SEND_DEADLINE_S (420 s)"),
        "{logs}"
    );
    assert!(
        logs.contains("450.0 s (set by DUCKLAKE_WRITE_BUDGET_S"),
        "{logs}"
    );
    long.stop();

    let w = Writer::start_with(&lake, &[("DUCKLAKE_WRITE_BUDGET_S", "300")]);
    let ingest = Ingest::start(&opts(&bs, &w.addr, deadline("420")), lake.dir.path());
    eventually(Duration::from_secs(60), "ingest ready", || {
        ingest.ready() == 200
    });
    ingest.stop();
    w.stop();
}
