//! TLS between ingest and Kafka, through the KAFKA_CONSUMER_* passthrough.
//! A test CA signs a certificate for 127.0.0.1; a TLS-terminating proxy
//! stands in front of nisshi, which advertises the proxy, so every Kafka
//! connection (bootstrap, metadata, fetch, offset commits) is TLS. The real
//! ingest binary verifies the broker against KAFKA_CONSUMER_SSL_CA_LOCATION.
use std::time::{Duration, Instant};

use millpond_tests::ingest::{eventually, Ingest, IngestOpts};
use millpond_tests::kafka::{committed_with, produce_events_with};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::nisshi::Nisshi;
use millpond_tests::process::free_port;
use millpond_tests::tls::{TestCa, TlsProxy};
use millpond_tests::writer::Writer;

const TOPIC: &str = "events";
const GROUP: &str = "millpond-events-events";
const PARTITIONS: i32 = 4;
const N: u64 = 5_000;

fn start_ingest(bootstrap: &str, writer: &Writer, ca: &TestCa, lake: &Lake) -> Ingest {
    let o = IngestOpts {
        bootstrap,
        topic: TOPIC,
        table: "events",
        writer_addr: &writer.addr,
        replicas: 1,
        ordinal: 0,
        extra: vec![
            ("KAFKA_CONSUMER_SECURITY_PROTOCOL", "ssl".into()),
            (
                "KAFKA_CONSUMER_SSL_CA_LOCATION",
                ca.pem_path.display().to_string(),
            ),
            ("KAFKA_STARTUP_TIMEOUT_S", "8".into()),
        ],
    };
    Ingest::start(&o, lake.dir.path())
}

#[test]
fn ingest_consumes_over_tls_with_ca_verification_and_refuses_an_unknown_ca() {
    let pki = tempfile::tempdir().unwrap();
    let ca = TestCa::generate(pki.path(), "millpond-test-ca");
    let wrong_ca = TestCa::generate(pki.path(), "some-other-ca");
    let broker_port = free_port();
    let proxy = TlsProxy::start(format!("127.0.0.1:{broker_port}"), ca.server_cert());
    let bootstrap = format!("127.0.0.1:{}", proxy.port);
    let broker = Nisshi::start_advertising(broker_port, &bootstrap);
    broker.create_topic(TOPIC, PARTITIONS);

    let ca_path = ca.pem_path.display().to_string();
    let tls = [
        ("security.protocol", "ssl"),
        ("ssl.ca.location", ca_path.as_str()),
    ];
    produce_events_with(&bootstrap, &tls, TOPIC, PARTITIONS, 0, N);
    assert!(proxy.handshakes() > 0, "the producer went through TLS");
    let committed = || committed_with(&bootstrap, &tls, GROUP, TOPIC, PARTITIONS);

    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);

    // A CA that did not sign the broker's certificate: never ready, exits
    // non-zero within KAFKA_STARTUP_TIMEOUT_S naming the failure.
    let refused_before = proxy.refused();
    let mut bad = start_ingest(&bootstrap, &w, &wrong_ca, &lake);
    let started = Instant::now();
    let mut readiness_checks = 0;
    while bad.proc.is_running() {
        assert_ne!(bad.ready(), 200, "ready without a trusted broker");
        readiness_checks += 1;
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "ingest neither failed nor stopped within 60 s:\n{}",
            bad.proc.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = bad.proc.wait_exit(Duration::from_secs(1));
    let logs = bad.proc.logs();
    assert!(readiness_checks > 0);
    assert!(!status.success(), "{logs}");
    // The exit line itself says why it gave up and names the TLS failure.
    let exit_line = logs
        .lines()
        .find(|l| l.contains("exiting with failure"))
        .unwrap_or_else(|| panic!("no exit line:\n{logs}"));
    for words in [
        "within 8 s (KAFKA_STARTUP_TIMEOUT_S)",
        "SSL",
        "certificate verify failed",
    ] {
        assert!(exit_line.contains(words), "{words:?} missing: {exit_line}");
    }
    assert!(proxy.refused() > refused_before, "refused in the handshake");
    assert_eq!(
        committed(),
        vec![None; PARTITIONS as usize],
        "nothing committed"
    );
    assert_eq!(w.metric("millpond_records_written_total", &[]), 0.0);

    // The right CA: everything lands exactly once, over TLS.
    let handshakes_before = proxy.handshakes();
    let ingest = start_ingest(&bootstrap, &w, &ca, &lake);
    eventually(Duration::from_secs(120), "every offset committed", || {
        committed().iter().map(|o| o.unwrap_or(0)).sum::<i64>() == N as i64
    });
    assert!(proxy.handshakes() > handshakes_before, "ingest used TLS");
    let consumed = ingest.metric("millpond_records_consumed_total", &[]);
    let tombstones = ingest.metric("millpond_tombstones_total", &[]);
    let written = w.metric("millpond_records_written_total", &[]);
    let dead = w.metric("millpond_dead_letters_total", &[]);
    assert_eq!(
        (consumed, written, dead, tombstones),
        (N as f64, N as f64, 0.0, 0.0)
    );
    assert_eq!(consumed, written + dead + tombstones, "conservation");
    ingest.stop();
    w.stop();
    assert_eq!(lake.count(), N as i64);
    assert_eq!(
        lake.column_text("count(DISTINCT seq)"),
        vec![Some(N.to_string())]
    );
}
