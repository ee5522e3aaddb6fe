//! The dynamic allowlist source against a real HTTP endpoint (Python's
//! http.server on 127.0.0.1, serving a file the test rewrites): both modes,
//! with the endpoint changing membership, failing, and serving an empty list.
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use millpond_tests::ingest::{eventually, Ingest, IngestOpts};
use millpond_tests::kafka::{committed, produce_events};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::process::free_port;
use millpond_tests::required_env;
use millpond_tests::writer::Writer;
use rdkafka::mocking::MockCluster;

const TOPIC: &str = "events";

struct Endpoint {
    child: Child,
    url: String,
}

impl Endpoint {
    fn start(dir: &Path) -> Endpoint {
        let port = free_port();
        let child = Command::new(required_env("MILLPOND_PYTHON"))
            .args([
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                &port.to_string(),
                "--directory",
            ])
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}/allow.json");
        eventually(Duration::from_secs(10), "endpoint up", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Endpoint { child, url }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &Path, body: Option<&str>) {
    let path = dir.join("allow.json");
    match body {
        Some(b) => {
            let tmp = dir.join("allow.json.tmp");
            std::fs::write(&tmp, b).unwrap();
            std::fs::rename(tmp, path).unwrap();
        }
        None => {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn total_committed(bs: &str, partitions: i32) -> i64 {
    committed(bs, "millpond-events-events", TOPIC, partitions)
        .into_iter()
        .map(|o| o.unwrap_or(0))
        .sum()
}

fn opts<'a>(bs: &'a str, writer: &'a str, url: &str, mode: &str) -> IngestOpts<'a> {
    IngestOpts {
        bootstrap: bs,
        topic: TOPIC,
        table: "events",
        writer_addr: writer,
        replicas: 1,
        ordinal: 0,
        extra: vec![
            ("MILLPOND_FILTER_KEEP_FIELD_NAME", "team_id".into()),
            ("MILLPOND_FILTER_VALUES", "1".into()),
            ("MILLPOND_INCLUDE_VALUES_URL", url.into()),
            ("MILLPOND_INCLUDE_VALUES_MODE", mode.into()),
            ("MILLPOND_INCLUDE_VALUES_POLL_INTERVAL_S", "1".into()),
            ("MILLPOND_INCLUDE_VALUES_REMOVAL_POLLS", "2".into()),
            ("MILLPOND_INCLUDE_VALUES_REQUEST_TIMEOUT_S", "2".into()),
        ],
    }
}

/// team_id = seq % 3 in the produced events.
#[test]
fn authoritative_source_governs_the_allowlist_under_its_safety_rules() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 2, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Lake::new(Backend::Embedded, "events");
    let dir = lake.dir.path().join("www");
    std::fs::create_dir_all(&dir).unwrap();
    serve(&dir, Some("[0]"));
    let endpoint = Endpoint::start(&dir);
    produce_events(&bs, TOPIC, 2, 0, 300);
    let w = Writer::start(&lake);
    let ingest = Ingest::start(
        &opts(&bs, &w.addr, &endpoint.url, "authoritative"),
        lake.dir.path(),
    );
    eventually(Duration::from_secs(60), "first 300 committed", || {
        total_committed(&bs, 2) == 300
    });
    let m = |name: &str, labels: &[(&str, &str)]| ingest.metric(name, labels);
    // Pin 1 plus the endpoint's 0: team 2 is excluded.
    assert_eq!(w.metric("millpond_records_written_total", &[]), 200.0);
    assert_eq!(
        m(
            "millpond_records_skipped_total",
            &[("reason", "filter_excluded")]
        ),
        100.0
    );
    assert_eq!(m("millpond_include_values_size", &[]), 2.0);
    assert_eq!(
        m("millpond_include_values_mode", &[("mode", "authoritative")]),
        1.0
    );
    assert_eq!(m("millpond_include_values_pinned_only", &[]), 1.0);

    // An empty list while managed values are held is refused: nothing changes.
    serve(&dir, Some("[]"));
    eventually(Duration::from_secs(20), "empty refused", || {
        m(
            "millpond_include_values_refused_total",
            &[("reason", "empty")],
        ) >= 1.0
    });
    // A failing endpoint keeps the last good set.
    serve(&dir, None);
    eventually(Duration::from_secs(20), "a failed poll", || {
        m("millpond_include_values_poll_failures_total", &[]) >= 1.0
    });
    assert_eq!(m("millpond_include_values_size", &[]), 2.0);
    // Membership changes: 2 added at once, 0 removed after two polls.
    serve(&dir, Some("[2]"));
    eventually(
        Duration::from_secs(30),
        "0 removed after the countdown",
        || {
            m(
                "millpond_include_values_changes_total",
                &[("action", "removed")],
            ) == 1.0
        },
    );
    assert_eq!(
        m(
            "millpond_include_values_changes_total",
            &[("action", "added")]
        ),
        2.0
    );
    produce_events(&bs, TOPIC, 2, 300, 300);
    eventually(Duration::from_secs(60), "600 committed", || {
        total_committed(&bs, 2) == 600
    });
    // Now teams 1 and 2 pass, 0 does not.
    assert_eq!(w.metric("millpond_records_written_total", &[]), 400.0);
    assert_eq!(
        m(
            "millpond_records_skipped_total",
            &[("reason", "filter_excluded")]
        ),
        200.0
    );
    let consumed = m("millpond_records_consumed_total", &[]);
    let accounted = w.metric("millpond_records_written_total", &[])
        + w.metric("millpond_dead_letters_total", &[])
        + m("millpond_tombstones_total", &[])
        + m(
            "millpond_records_skipped_total",
            &[("reason", "filter_excluded")],
        )
        + m(
            "millpond_records_skipped_total",
            &[("reason", "filter_field_missing")],
        );
    assert_eq!(consumed, accounted, "conservation");
    ingest.stop();
    w.stop();
    assert_eq!(
        lake.column_text("string_agg(DISTINCT team_id::VARCHAR, ',' ORDER BY team_id::VARCHAR)"),
        vec![Some("0,1,2".into())]
    );
}

#[test]
fn shadow_source_is_only_observed() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Lake::new(Backend::Embedded, "events");
    let dir = lake.dir.path().join("www");
    std::fs::create_dir_all(&dir).unwrap();
    serve(&dir, Some("[0, 1, 5]"));
    let endpoint = Endpoint::start(&dir);
    produce_events(&bs, TOPIC, 1, 0, 300);
    let w = Writer::start(&lake);
    let ingest = Ingest::start(
        &opts(&bs, &w.addr, &endpoint.url, "shadow"),
        lake.dir.path(),
    );
    eventually(Duration::from_secs(60), "committed", || {
        total_committed(&bs, 1) == 300
    });
    eventually(Duration::from_secs(20), "shadow gauges", || {
        ingest.metric("millpond_include_values_shadow_only_remote", &[]) == 2.0
    });
    assert_eq!(
        ingest.metric("millpond_include_values_shadow_only_static", &[]),
        0.0
    );
    assert_eq!(
        ingest.metric("millpond_include_values_mode", &[("mode", "shadow")]),
        1.0
    );
    // The static list applies: only team 1.
    assert_eq!(w.metric("millpond_records_written_total", &[]), 100.0);
    ingest.stop();
    w.stop();
    assert_eq!(
        lake.column_text("count(*) FILTER (WHERE team_id <> 1)"),
        vec![Some("0".into())]
    );
}
