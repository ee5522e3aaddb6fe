//! Test harness: real services (Postgres, moto S3, Kafka-protocol brokers)
//! started by scripts/services.sh, and the real Millpond binaries run as
//! child processes on 127.0.0.1.
pub mod fake_writer;
pub mod flight;
pub mod hoglake;
pub mod http_endpoint;
pub mod ingest;
pub mod kafka;
pub mod lake;
pub mod lake_cli;
pub mod nisshi;
pub mod pg_cluster;
pub mod process;
pub mod promql;
pub mod proxy;
pub mod s3_faults;
pub mod sasl;
pub mod sasl_proxy;
pub mod scrape;
pub mod statefulset;
pub mod tls;
pub mod writer;

/// A variable the test scripts export; tests fail (never skip) without it.
pub fn required_env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the suite with scripts/test.sh, which starts the services and exports it")
    })
}

pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}_{}",
        uuid::Uuid::new_v4().simple().to_string().get(..12).unwrap()
    )
}

/// `rel` under this package's directory, found at run time (cargo test sets
/// CARGO_MANIFEST_DIR): a test binary built by another clone that shares
/// the target directory still reads this clone's files.
pub fn manifest_path(rel: &str) -> String {
    let dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    format!("{dir}{rel}")
}

/// Runs one of the repo's Python checks (`tests/python/<script>`) with the
/// project venv and asserts it passed: exit 0, a ` 0 failed` summary and no
/// `FAIL ` line. Answers its stdout for further assertions.
pub fn python_check(script: &str, what: &str) -> String {
    let out = std::process::Command::new(required_env("MILLPOND_PYTHON"))
        .arg(manifest_path(&format!("/python/{script}")))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(" 0 failed"), "{stdout}");
    assert!(!stdout.contains("FAIL "), "{stdout}");
    stdout
}
