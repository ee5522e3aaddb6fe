//! Private by default: a whole run (Kafka -> ingest -> writer -> DuckLake on
//! a Postgres catalog and S3, then `millpond-lake metrics`) prints none of
//! the secrets it was given (the catalog's password, the S3 secret key, a
//! SASL password, a push URL's user, password and token) and none of the
//! payload values that failed (a value that became a dead letter, a record
//! that is no JSON), in any log line or HTTP body.
use std::time::{Duration, Instant};

use millpond_tests::ingest::{eventually, Ingest, IngestOpts};
use millpond_tests::kafka::{committed, produce, BrokerProcess};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::lake_cli::lake_cli_with;
use millpond_tests::pg_cluster::{TlsCluster, USER};
use millpond_tests::process::{free_port, Proc};
use millpond_tests::scrape::get;
use millpond_tests::tls::TestCa;
use millpond_tests::writer::Writer;

const TOPIC: &str = "events";
const GROUP: &str = "millpond-events-events";

const S3_SECRET: &str = "s3Secret-4b8d2a-key";
const SASL_PASSWORD: &str = "saslPw-9e3f5c-kafka";
const PUSH_USER: &str = "pushUser-2d6a8b";
const PUSH_PASSWORD: &str = "pushPw-5f1c7e";
const PUSH_TOKEN: &str = "pushToken-8a4e2c";
/// A value of `amount` that does not convert to its column (BIGINT): a
/// type_mismatch dead letter.
const BAD_VALUE: &str = "payloadValue-6b9d3f-mismatch";
/// Inside a record that is no JSON: an invalid_json dead letter.
const BAD_RECORD: &str = "payloadRecord-1e7a5d-notjson";

const SECRETS: [&str; 7] = [
    S3_SECRET,
    SASL_PASSWORD,
    PUSH_USER,
    PUSH_PASSWORD,
    PUSH_TOKEN,
    BAD_VALUE,
    BAD_RECORD,
];

/// Every HTTP body a process serves.
fn bodies(port: u16) -> String {
    ["metrics", "healthz", "readyz"]
        .iter()
        .map(|p| {
            let r = get(&format!("http://127.0.0.1:{port}/{p}")).unwrap_or_default();
            format!("--- /{p} ({})\n{}\n", r.0, r.1)
        })
        .collect()
}

fn assert_private(what: &str, text: &str, pg_password: &str) {
    for s in SECRETS.iter().copied().chain([pg_password]) {
        assert!(
            !text.contains(s),
            "{what} shows {s:?}:\n{}",
            text.lines()
                .filter(|l| l.contains(s))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

#[test]
fn no_secret_or_failed_payload_value_in_any_log_or_http_body() {
    let broker = BrokerProcess::start(TOPIC, 1);
    // The catalog in a cluster of its own, whose password is unique to this
    // run (the shared service's is a common word); its data on the test S3,
    // which takes any key.
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::generate(certs.path(), "catalog-ca");
    let (cert, key) = ca.server_pem(&["127.0.0.1", "localhost"]);
    let pg = TlsCluster::start(&cert, &key);
    let mut lake = Lake::new(Backend::PostgresS3, "events");
    for (k, v) in [
        ("DUCKLAKE_RDS_PORT", pg.port.to_string()),
        ("DUCKLAKE_RDS_DATABASE", "postgres".into()),
        ("DUCKLAKE_RDS_USERNAME", USER.into()),
        ("DUCKLAKE_RDS_PASSWORD", pg.password.clone()),
        ("DUCKLAKE_RDS_SSLMODE", "require".into()),
        ("DUCKDB_S3_SECRET_ACCESS_KEY", S3_SECRET.into()),
    ] {
        lake = lake.with_env(k, &v);
    }
    let mut outputs: Vec<(String, String)> = Vec::new();

    let good = |i: u64| format!(r#"{{"seq": {i}, "amount": {i}}}"#).into_bytes();
    let first: Vec<_> = (0..10).map(|i| (0, Some(good(i)))).collect();
    produce(&broker.bootstrap, TOPIC, &first);
    let writer = Writer::start(&lake);
    let ingest = Ingest::start(
        &IngestOpts {
            bootstrap: &broker.bootstrap,
            topic: TOPIC,
            table: "events",
            writer_addr: &writer.addr,
            replicas: 1,
            ordinal: 0,
            extra: vec![
                // Unused on a plaintext broker, but read and kept by ingest.
                ("KAFKA_CONSUMER_SASL_USERNAME", "millpond".into()),
                ("KAFKA_CONSUMER_SASL_PASSWORD", SASL_PASSWORD.into()),
            ],
        },
        lake.dir.path(),
    );
    let committed_to = |n: i64| committed(&broker.bootstrap, GROUP, TOPIC, 1)[0] == Some(n);
    eventually(Duration::from_secs(60), "the good rows committed", || {
        committed_to(10)
    });
    // The failed values arrive once `amount` is a BIGINT column.
    let bad = vec![
        (
            0,
            Some(format!(r#"{{"seq": 10, "amount": "{BAD_VALUE}"}}"#).into_bytes()),
        ),
        (0, Some(format!("{{not json {BAD_RECORD}").into_bytes())),
        (0, Some(good(12))),
    ];
    produce(&broker.bootstrap, TOPIC, &bad);
    eventually(
        Duration::from_secs(60),
        "the failed values committed",
        || committed_to(13),
    );
    let dead = |reason: &str| {
        writer.metric("millpond_dead_letter_values_total", &[("reason", reason)])
            + writer.metric("millpond_dead_letters_total", &[("reason", reason)])
            + ingest.metric("millpond_dead_letters_total", &[("reason", reason)])
    };
    assert!(dead("type_mismatch") >= 1.0, "the value failed");
    assert!(dead("invalid_json") >= 1.0, "the record failed");
    outputs.push(("ingest's HTTP".into(), bodies(ingest.http_port)));
    outputs.push(("the writer's HTTP".into(), bodies(writer.http_port)));

    // The lake tool: one read pushed to a URL that holds credentials and
    // refuses the connection; one with a catalog that cannot be reached.
    let closed = free_port();
    let push = format!(
        "http://{PUSH_USER}:{PUSH_PASSWORD}@127.0.0.1:{closed}/metrics/job/lake?token={PUSH_TOKEN}"
    );
    let run = lake_cli_with(
        &lake,
        &[("DUCKLAKE_METRICS_PUSH_URL", &push)],
        &["metrics", "--once"],
    );
    assert_eq!(run.code, Some(1), "the push failed: {run:#?}");
    assert!(run.stderr.contains("pushing metrics to"), "{run:#?}");
    outputs.push(("millpond-lake metrics --once".into(), format!("{run:#?}")));
    let run = lake_cli_with(
        &lake,
        &[("DUCKLAKE_RDS_PORT", &closed.to_string())],
        &["metrics", "--once"],
    );
    assert_eq!(run.code, Some(1), "no catalog: {run:#?}");
    outputs.push((
        "millpond-lake without its catalog".into(),
        format!("{run:#?}"),
    ));

    // The exporter's HTTP.
    let port = free_port();
    let mut env = lake.env.clone();
    env.push(("DUCKLAKE_METRICS_PORT".into(), port.to_string()));
    env.push(("MILLPOND_HTTP_HOST".into(), "127.0.0.1".into()));
    let mut exporter = Proc::spawn_args("millpond-lake", &["metrics"], &env, lake.dir.path());
    let until = Instant::now() + Duration::from_secs(60);
    while !get(&format!("http://127.0.0.1:{port}/readyz")).is_ok_and(|r| r.0 == 200) {
        assert!(exporter.is_running(), "{}", exporter.logs());
        assert!(Instant::now() < until, "{}", exporter.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
    outputs.push(("the exporter's HTTP".into(), bodies(port)));
    exporter.signal("TERM");
    assert!(exporter.wait_exit(Duration::from_secs(30)).success());
    outputs.push(("the exporter's log".into(), exporter.logs()));

    let logs = [ingest.proc.log.clone(), writer.proc.log.clone()];
    ingest.stop();
    writer.stop();
    for log in logs {
        let text = std::fs::read_to_string(&log).unwrap();
        outputs.push((log.display().to_string(), text));
    }
    for (what, text) in &outputs {
        assert!(!text.is_empty(), "{what} printed nothing");
        assert_private(what, text, &pg.password);
    }
}
