//! The dynamic allowlist source against a real HTTP endpoint (Python's
//! http.server on 127.0.0.1, serving a file the test rewrites): both modes,
//! with the endpoint changing membership, failing, serving an empty list or
//! more than the body cap; the URL's secrets kept out of the logs.
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
    port: u16,
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
        Endpoint { child, port, url }
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

/// A response over MILLPOND_INCLUDE_VALUES_MAX_BODY_BYTES is a failed poll:
/// the last good set stays, never the body cut at the cap nor the body
/// applied whole. Also: with MILLPOND_FILTER_MATCHED_MAX_VALUES=1 the second
/// matched value counts under `_other`, and the counts add up.
#[test]
fn an_oversized_response_fails_the_poll_and_keeps_the_last_good_set() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Lake::new(Backend::Embedded, "events");
    let dir = lake.dir.path().join("www");
    std::fs::create_dir_all(&dir).unwrap();
    serve(&dir, Some("[0]"));
    let endpoint = Endpoint::start(&dir);
    produce_events(&bs, TOPIC, 1, 0, 300);
    let w = Writer::start(&lake);
    let mut o = opts(&bs, &w.addr, &endpoint.url, "authoritative");
    o.extra
        .push(("MILLPOND_INCLUDE_VALUES_MAX_BODY_BYTES", "64".into()));
    o.extra
        .push(("MILLPOND_FILTER_MATCHED_MAX_VALUES", "1".into()));
    let ingest = Ingest::start(&o, lake.dir.path());
    let m = |name: &str, labels: &[(&str, &str)]| ingest.metric(name, labels);
    eventually(Duration::from_secs(60), "300 committed", || {
        total_committed(&bs, 1) == 300
    });
    assert_eq!(m("millpond_include_values_size", &[]), 2.0);
    // Teams 0 and 1 kept, 100 each: one has its own series, one is _other.
    assert_eq!(w.metric("millpond_records_written_total", &[]), 200.0);
    assert_eq!(m("millpond_filter_matched_total", &[]), 200.0);
    assert_eq!(
        m("millpond_filter_matched_total", &[("value", "_other")]),
        100.0
    );

    // Valid JSON adding team 2, 100 bytes: over the 64-byte cap.
    let big = format!("[0, 2{}]", " ".repeat(94));
    assert_eq!(big.len(), 100);
    serve(&dir, Some(&big));
    let failed = m("millpond_include_values_poll_failures_total", &[]);
    eventually(Duration::from_secs(20), "two failed polls", || {
        m("millpond_include_values_poll_failures_total", &[]) >= failed + 2.0
    });
    assert_eq!(m("millpond_include_values_size", &[]), 2.0);
    assert_eq!(
        m(
            "millpond_include_values_changes_total",
            &[("action", "added")]
        ),
        1.0
    );
    let logs = ingest.proc.logs();
    assert!(
        logs.contains("MILLPOND_INCLUDE_VALUES_MAX_BODY_BYTES (64 bytes)"),
        "{logs}"
    );
    // Team 2 is still excluded.
    produce_events(&bs, TOPIC, 1, 300, 300);
    eventually(Duration::from_secs(60), "600 committed", || {
        total_committed(&bs, 1) == 600
    });
    assert_eq!(w.metric("millpond_records_written_total", &[]), 400.0);
    assert_eq!(m("millpond_filter_matched_total", &[]), 400.0);
    ingest.stop();
    w.stop();
    assert_eq!(
        lake.column_text("count(*) FILTER (WHERE team_id = 2)"),
        vec![Some("0".into())]
    );
}

/// The URL's userinfo and query and the auth token never reach the logs,
/// whether the poll succeeds, fails on a status or fails to connect (the
/// error a client library words with the URL); the masked URL does.
#[test]
fn the_urls_secrets_never_reach_the_logs() {
    const SECRETS: [&str; 3] = ["pa55-w0rd-url", "q-t0ken-url", "h-t0ken-header"];
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Lake::new(Backend::Embedded, "events");
    let dir = lake.dir.path().join("www");
    std::fs::create_dir_all(&dir).unwrap();
    serve(&dir, Some("[0]"));
    let mut endpoint = Endpoint::start(&dir);
    let url = format!(
        "http://svc:pa55-w0rd-url@127.0.0.1:{}/allow.json?token=q-t0ken-url",
        endpoint.port
    );
    let w = Writer::start(&lake);
    let mut o = opts(&bs, &w.addr, &url, "authoritative");
    o.extra.extend([
        ("MILLPOND_INCLUDE_VALUES_AUTH_HEADER_NAME", "X-Token".into()),
        (
            "MILLPOND_INCLUDE_VALUES_AUTH_TOKEN",
            "h-t0ken-header".into(),
        ),
        ("MILLPOND_INCLUDE_VALUES_ALLOW_HTTP_AUTH", "true".into()),
        ("LOG_LEVEL", "debug".into()),
    ]);
    let ingest = Ingest::start(&o, lake.dir.path());
    let m = |name: &str| ingest.metric(name, &[]);
    eventually(Duration::from_secs(60), "a successful poll", || {
        m("millpond_include_values_size") == 2.0
    });
    serve(&dir, None);
    eventually(Duration::from_secs(20), "a failed poll", || {
        m("millpond_include_values_poll_failures_total") >= 1.0
    });
    let _ = endpoint.child.kill();
    let _ = endpoint.child.wait();
    let failed = m("millpond_include_values_poll_failures_total");
    eventually(Duration::from_secs(20), "a refused connection", || {
        m("millpond_include_values_poll_failures_total") >= failed + 1.0
    });
    ingest.stop();
    w.stop();
    let logs = std::fs::read_dir(lake.dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<String>();
    for s in SECRETS {
        assert!(!logs.contains(s), "{s} in the logs:\n{logs}");
    }
    let masked = format!("http://***@127.0.0.1:{}/allow.json?***", endpoint.port);
    assert!(logs.contains(&masked), "{masked} not in the logs:\n{logs}");
    assert!(logs.contains("HTTP 404"), "{logs}");
    assert!(logs.contains("onnect"), "no connection error in:\n{logs}");
}

/// An auth token over plain http:// is refused at startup, naming the URL
/// and the variable that would allow it, without echoing the token.
#[test]
fn an_auth_token_over_plain_http_is_refused_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(
        "127.0.0.1:9",
        "http://127.0.0.1:9",
        "http://allow.internal/teams",
        "shadow",
    );
    o.extra.extend([
        ("MILLPOND_INCLUDE_VALUES_AUTH_HEADER_NAME", "X-Token".into()),
        (
            "MILLPOND_INCLUDE_VALUES_AUTH_TOKEN",
            "h-t0ken-header".into(),
        ),
    ]);
    let mut ingest = Ingest::start(&o, dir.path());
    let status = ingest.proc.wait_exit(Duration::from_secs(30));
    let logs = ingest.proc.logs();
    assert!(!status.success(), "{logs}");
    assert!(
        logs.contains("MILLPOND_INCLUDE_VALUES_URL")
            && logs.contains("MILLPOND_INCLUDE_VALUES_ALLOW_HTTP_AUTH"),
        "{logs}"
    );
    assert!(!logs.contains("h-t0ken-header"), "{logs}");
}
