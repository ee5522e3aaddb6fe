//! The SSL local stack without Docker: scripts/make-ssl-certs.sh makes the
//! certificates, a TLS endpoint serves the certificate and key of the
//! broker's keystore (opened with the password file the apache/kafka image
//! reads) in front of nisshi, and the real ingest runs with exactly the
//! KAFKA_CONSUMER_* settings docker-compose.ssl.yml gives it, its paths
//! read through the file's mounts into what the script made. Records land;
//! the CA of another run of the script is refused.
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use millpond_tests::ingest::{eventually, Ingest, IngestOpts};
use millpond_tests::kafka::{committed_with, produce_events_with};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::nisshi::Nisshi;
use millpond_tests::process::free_port;
use millpond_tests::required_env;
use millpond_tests::tls::{ServerCert, TlsProxy};
use millpond_tests::writer::Writer;

const TOPIC: &str = "events";
const GROUP: &str = "millpond-events-events";
const PARTITIONS: i32 = 2;
const N: u64 = 2_000;

fn make_certs(dir: &Path) {
    let script = millpond_tests::manifest_path("/../scripts/make-ssl-certs.sh");
    let out = Command::new("bash").arg(script).arg(dir).output().unwrap();
    assert!(
        out.status.success(),
        "make-ssl-certs.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// ingest's KAFKA_CONSUMER_* in docker-compose.yml + docker-compose.ssl.yml,
/// container paths read as the files the script made in `certs`.
fn compose_ingest_env(certs: &Path) -> BTreeMap<String, String> {
    let root = millpond_tests::manifest_path("/..");
    let out = Command::new(required_env("MILLPOND_PYTHON"))
        .arg(millpond_tests::manifest_path("/python/check_compose.py"))
        .args(["--compose", &format!("{root}/docker-compose.yml")])
        .args(["--compose", &format!("{root}/docker-compose.ssl.yml")])
        .arg("--certs")
        .arg(certs)
        .arg("--print-ingest-env")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The broker's certificate and key, out of its keystore, opened with the
/// password file the broker reads.
fn keystore_cert(certs: &Path) -> ServerCert {
    let pem = |what: &[&str]| {
        let out = Command::new("openssl")
            .arg("pkcs12")
            .arg("-in")
            .arg(certs.join("kafka.keystore.p12"))
            .arg("-passin")
            .arg(format!(
                "file:{}",
                certs.join("kafka_keystore_creds").display()
            ))
            .args(what)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    ServerCert::from_pem(
        &pem(&["-clcerts", "-nokeys"]),
        &pem(&["-nocerts", "-nodes"]),
    )
}

fn start_ingest(
    bootstrap: &str,
    w: &Writer,
    env: &BTreeMap<String, String>,
    lake: &Lake,
) -> Ingest {
    let mut extra: Vec<(&str, String)> = env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    extra.push(("KAFKA_STARTUP_TIMEOUT_S", "6".into()));
    let o = IngestOpts {
        bootstrap,
        topic: TOPIC,
        table: "events",
        writer_addr: &w.addr,
        replicas: 1,
        ordinal: 0,
        extra,
    };
    Ingest::start(&o, lake.dir.path())
}

#[test]
fn ingest_with_the_ssl_stacks_settings_and_certificates_lands_records() {
    let pki = tempfile::tempdir().unwrap();
    let certs = pki.path().join("certs");
    let other = pki.path().join("other");
    make_certs(&certs);
    make_certs(&other);
    let env = compose_ingest_env(&certs);
    let ca = certs.join("ca.pem").display().to_string();
    assert_eq!(
        env.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "KAFKA_CONSUMER_SECURITY_PROTOCOL",
            "KAFKA_CONSUMER_SSL_CA_LOCATION"
        ],
        "{env:?}"
    );
    assert_eq!(env["KAFKA_CONSUMER_SSL_CA_LOCATION"], ca);

    let broker_port = free_port();
    let proxy = TlsProxy::start(format!("127.0.0.1:{broker_port}"), keystore_cert(&certs));
    let bootstrap = format!("127.0.0.1:{}", proxy.port);
    let broker = Nisshi::start_advertising(broker_port, &bootstrap);
    broker.create_topic(TOPIC, PARTITIONS);
    let tls = [
        ("security.protocol", "ssl"),
        ("ssl.ca.location", ca.as_str()),
    ];
    produce_events_with(&bootstrap, &tls, TOPIC, PARTITIONS, 0, N);
    let committed = || committed_with(&bootstrap, &tls, GROUP, TOPIC, PARTITIONS);
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);

    // Another run's CA did not sign this broker: refused in the handshake.
    let mut wrong = env.clone();
    wrong.insert(
        "KAFKA_CONSUMER_SSL_CA_LOCATION".into(),
        other.join("ca.pem").display().to_string(),
    );
    let refused = proxy.refused();
    let mut bad = start_ingest(&bootstrap, &w, &wrong, &lake);
    let status = bad.proc.wait_exit(Duration::from_secs(60));
    let logs = bad.proc.logs();
    assert!(!status.success(), "{logs}");
    assert!(logs.contains("certificate verify failed"), "{logs}");
    assert!(proxy.refused() > refused);
    assert_eq!(committed(), vec![None; PARTITIONS as usize]);

    let handshakes = proxy.handshakes();
    let ingest = start_ingest(&bootstrap, &w, &env, &lake);
    eventually(Duration::from_secs(120), "every offset committed", || {
        committed().iter().map(|o| o.unwrap_or(0)).sum::<i64>() == N as i64
    });
    assert!(proxy.handshakes() > handshakes, "ingest used TLS");
    let consumed = ingest.metric("millpond_records_consumed_total", &[]);
    let written = w.metric("millpond_records_written_total", &[]);
    let dead = w.metric("millpond_dead_letters_total", &[]);
    let tombstones = ingest.metric("millpond_tombstones_total", &[]);
    assert_eq!(
        (consumed, written, dead, tombstones),
        (N as f64, N as f64, 0.0, 0.0)
    );
    ingest.stop();
    w.stop();
    assert_eq!(
        lake.column_text("count(DISTINCT seq)"),
        vec![Some(N.to_string())]
    );
}
