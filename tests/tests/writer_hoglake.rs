//! The writer process with MILLPOND_DESTINATION=hoglake, against the
//! project's hoglake emulator (a Python subprocess) and moto S3 from
//! scripts/services.sh: two flushes DoPut over Flight, one resent; the rows
//! must be registered in the catalog once, the resend acknowledged
//! `AlreadyRecorded`, and the writer's metrics must agree.
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use millpond_proto::{AckOutcome, OffsetRange};
use millpond_tests::flight::{client, descriptor, put, recorded, rows, with_coordinates};
use millpond_tests::process::{free_port, wait_http_ok, Proc};
use millpond_tests::required_env;

const CATALOG: &str = "it";
const NS: &str = "analytics";
const TABLE: &str = "events";

/// The emulator process; killed on drop.
struct Emulator {
    child: Child,
    root: String,
}

impl Emulator {
    fn start() -> Self {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/hoglake-emulator/hoglake_emulator.py"
        );
        let python = std::env::var("MILLPOND_PYTHON").unwrap_or_else(|_| {
            let venv = format!(
                "{}/.cache/millpond/venv/bin/python",
                std::env::var("HOME").unwrap_or_default()
            );
            if std::path::Path::new(&venv).exists() {
                venv
            } else {
                "python3".into()
            }
        });
        let mut child = Command::new(&python)
            .args([script, "--host", "127.0.0.1", "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the hoglake emulator with {python}: {e}"));
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("emulator stdout");
        let port: u16 = line
            .trim()
            .strip_prefix("LISTENING ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("emulator did not print LISTENING <port>: {line:?}"));
        Self {
            child,
            root: format!("http://127.0.0.1:{port}"),
        }
    }

    /// Record counts of the table's registered files (the latest snapshot).
    fn file_record_counts(&self) -> Vec<u64> {
        let url = format!(
            "{}/v1/catalogs/{CATALOG}/namespaces/{NS}/tables/{TABLE}/files",
            self.root
        );
        let (status, body) = millpond_tests::scrape::get(&url).expect("emulator reachable");
        assert_eq!(status, 200, "{url}: {body}");
        let files: serde_json::Value = serde_json::from_str(&body).expect("files listing is JSON");
        let mut counts: Vec<u64> = files
            .as_array()
            .unwrap_or_else(|| panic!("files listing is an array: {body}"))
            .iter()
            .map(|f| f["record_count"].as_u64().expect("record_count"))
            .collect();
        counts.sort_unstable();
        counts
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn r(p: i32, first: i64, last: i64) -> OffsetRange {
    OffsetRange::new("events", p, first, last)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hoglake_writer_publishes_flushes_once_and_acks_a_resend_already_recorded() {
    let endpoint = required_env("MILLPOND_TEST_S3_ENDPOINT");
    let bucket = required_env("MILLPOND_TEST_S3_BUCKET");
    let key_id = required_env("MILLPOND_TEST_S3_KEY_ID");
    let secret = required_env("MILLPOND_TEST_S3_SECRET");
    let emu = Emulator::start();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let http_port = free_port();
    let data_path = format!("s3://{bucket}/hoglake-e2e/{}", uuid::Uuid::new_v4());
    let env: Vec<(String, String)> = [
        ("MILLPOND_DESTINATION", "hoglake"),
        ("HOGLAKE_URL", emu.root.as_str()),
        ("HOGLAKE_CATALOG", CATALOG),
        ("HOGLAKE_NAMESPACE", NS),
        ("HOGLAKE_TABLE", TABLE),
        ("HOGLAKE_DATA_PATH", data_path.as_str()),
        ("HOGLAKE_S3_ENDPOINT", endpoint.as_str()),
        ("HOGLAKE_S3_REGION", "us-east-1"),
        ("HOGLAKE_S3_ACCESS_KEY", key_id.as_str()),
        ("HOGLAKE_S3_SECRET_KEY", secret.as_str()),
        ("HOGLAKE_REQUEST_TIMEOUT_S", "10"),
        ("MILLPOND_WRITER_ADDR", &format!("127.0.0.1:{port}")),
        ("MILLPOND_WRITER_HTTP_PORT", &http_port.to_string()),
        ("MILLPOND_HTTP_HOST", "127.0.0.1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let mut proc = Proc::spawn("millpond-writer", &env, dir.path());
    wait_http_ok(
        &format!("http://127.0.0.1:{http_port}/readyz"),
        &mut proc,
        Duration::from_secs(60),
    );

    let mut c = client(&format!("127.0.0.1:{port}")).await;
    let first = descriptor("f1", vec![r(0, 0, 9), r(1, 0, 4)], 15);
    let first_batches = || {
        vec![
            with_coordinates(rows(0, 10), 0, 0),
            with_coordinates(rows(10, 5), 1, 0),
        ]
    };
    let ack = put(&mut c, &first, first_batches()).await.unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    assert_eq!(ack.rows_written, 15);
    assert_eq!(ack.sink, "hoglake");
    assert_eq!(ack.table, format!("{NS}.{TABLE}"));

    let second = descriptor("f2", vec![r(0, 10, 16)], 7);
    let ack = put(&mut c, &second, vec![with_coordinates(rows(15, 7), 0, 10)])
        .await
        .unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    assert_eq!(ack.rows_written, 7);
    assert_eq!(emu.file_record_counts(), vec![7, 15]);

    // The first flush again, as ingest resends it after a lost ack: same
    // offset ranges, a new payload; nothing is registered twice.
    let again = put(&mut c, &first, first_batches()).await.unwrap();
    assert_eq!(again.outcome(), AckOutcome::AlreadyRecorded);
    assert_eq!(again.rows_written, 0);
    assert_eq!(emu.file_record_counts(), vec![7, 15]);

    // The catalog has no offsets API: nothing to report, by design.
    assert!(recorded(&mut c, "events").await.is_empty());

    let metrics = millpond_tests::scrape::metrics(http_port);
    let metric = |name: &str, labels: &[(&str, &str)]| {
        millpond_tests::scrape::metric(&metrics, name, labels).unwrap_or(0.0)
    };
    assert_eq!(metric("millpond_records_written_total", &[]), 22.0);
    assert_eq!(metric("millpond_flushes_already_recorded_total", &[]), 1.0);
    // The resend's rebuilt upload was never registered: counted, by reason.
    assert_eq!(
        metric(
            "millpond_hoglake_orphaned_files_total",
            &[("reason", "already_published")]
        ),
        1.0
    );
    assert_eq!(
        metric(
            "millpond_errors_total",
            &[("type", "ducklake_commit_contention")]
        ),
        0.0
    );

    proc.signal("TERM");
    let status = proc.wait_exit(Duration::from_secs(30));
    assert!(
        status.success(),
        "writer exited with {status}: {}",
        proc.logs()
    );
}
