//! docker-compose.yml, the SSL stack laid over it (docker-compose.ssl.yml)
//! and the StatefulSet against the code: tests/python/check_compose.py
//! checks that each stack hangs together, that every variable it sets on
//! ingest and the writer is one the binary reads, as scanned from the Rust
//! config sources, and that ingest reaches Kafka on a listener it speaks
//! the protocol of, with the certificate files scripts/make-ssl-certs.sh
//! makes.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use millpond_tests::required_env;

/// Runs the check on `stack` (files laid over each other), or on the
/// default stacks.
fn check_compose(stack: &[&Path]) -> Output {
    let script = millpond_tests::manifest_path("/python/check_compose.py");
    let mut cmd = Command::new(required_env("MILLPOND_PYTHON"));
    cmd.arg(script);
    for path in stack {
        cmd.arg("--compose").arg(path);
    }
    cmd.output().unwrap()
}

fn repo_file(name: &str) -> PathBuf {
    PathBuf::from(millpond_tests::manifest_path(&format!("/../{name}")))
}

/// `name` with `from` replaced by `to` once, written to `dir`.
fn edited(dir: &Path, name: &str, from: &str, to: &str) -> PathBuf {
    let text = std::fs::read_to_string(repo_file(name)).unwrap();
    let changed = text.replacen(from, to, 1);
    assert_ne!(text, changed, "{name} holds {from:?}");
    let path = dir.join(name);
    std::fs::write(&path, changed).unwrap();
    path
}

fn failed_with(out: &Output, what: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("FAIL ") && l.contains(what)),
        "no FAIL line with {what:?}:\n{stdout}"
    );
}

#[test]
fn compose_sets_only_variables_the_binaries_read() {
    let out = check_compose(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "compose check failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("compose check: 0 failed"), "{stdout}");
    assert!(!stdout.contains("FAIL "), "{stdout}");
    // Both stacks were checked, the SSL one against the script's files.
    for line in [
        "PASS docker-compose.yml + docker-compose.ssl.yml parses",
        "PASS ingest: speaks SSL to kafka's SSL listener (SSL)",
        "PASS ingest: speaks PLAINTEXT to kafka's PLAINTEXT listener (PLAINTEXT)",
        "PASS kafka: KAFKA_SSL_KEYSTORE_FILENAME (kafka.keystore.p12) is a file mounted",
        "PASS ingest: KAFKA_CONSUMER_SSL_CA_LOCATION (/etc/millpond/ssl/ca.pem) is a file a bind mount provides",
    ] {
        assert!(stdout.contains(line), "{line:?} missing:\n{stdout}");
    }
}

#[test]
fn a_misspelled_variable_fails_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let path = edited(
        dir.path(),
        "docker-compose.yml",
        "FLUSH_INTERVAL_MS:",
        "FLUSH_INTERVAL_MSS:",
    );
    failed_with(&check_compose(&[&path]), "not read: FLUSH_INTERVAL_MSS");
}

/// The SSL stack's own checks can fail: plaintext spoken to the SSL
/// listener, a CA file no mount provides, a keystore the script does not
/// make.
#[test]
fn an_inconsistent_ssl_stack_fails_the_check() {
    let base = repo_file("docker-compose.yml");
    let dir = tempfile::tempdir().unwrap();
    for (from, to, what) in [
        (
            "KAFKA_CONSUMER_SECURITY_PROTOCOL: SSL",
            "KAFKA_CONSUMER_SECURITY_PROTOCOL: PLAINTEXT",
            "ingest: speaks PLAINTEXT to kafka's SSL listener (SSL)",
        ),
        (
            "KAFKA_CONSUMER_SSL_CA_LOCATION: /etc/millpond/ssl/ca.pem",
            "KAFKA_CONSUMER_SSL_CA_LOCATION: /etc/ssl/millpond-ca.pem",
            "ingest: KAFKA_CONSUMER_SSL_CA_LOCATION (/etc/ssl/millpond-ca.pem) is a file a bind mount provides",
        ),
        (
            "KAFKA_SSL_KEYSTORE_FILENAME: kafka.keystore.p12",
            "KAFKA_SSL_KEYSTORE_FILENAME: kafka.keystore.jks",
            "kafka: KAFKA_SSL_KEYSTORE_FILENAME (kafka.keystore.jks) is a file mounted",
        ),
        (
            "KAFKA_BOOTSTRAP_SERVERS: \"kafka:9094\"",
            "KAFKA_BOOTSTRAP_SERVERS: \"kafka:9095\"",
            "ingest: bootstrap kafka:9095 is a listener a broker service advertises",
        ),
    ] {
        let ssl = edited(dir.path(), "docker-compose.ssl.yml", from, to);
        failed_with(&check_compose(&[&base, &ssl]), what);
    }
}
