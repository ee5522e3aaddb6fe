//! The dynamic allowlist's rules with the real ingest binary and a scripted
//! HTTP endpoint that records what it was sent: the startup errors of the
//! MILLPOND_INCLUDE_VALUES_* matrix, the auth header on every poll, a
//! redirect refused (never followed, a failed poll, the old set kept), and
//! an authoritative start that consumes nothing until a poll is accepted.
use std::time::Duration;

use millpond_tests::fake_writer::SilentOnFlush;
use millpond_tests::http_endpoint::{Endpoint, Reply};
use millpond_tests::ingest::{eventually, Ingest, IngestOpts};
use millpond_tests::kafka::{committed, produce_events};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::writer::Writer;
use rdkafka::mocking::MockCluster;

const TOPIC: &str = "events";
const URL: &str = "MILLPOND_INCLUDE_VALUES_URL";
const MODE: &str = "MILLPOND_INCLUDE_VALUES_MODE";
const HEADER: &str = "MILLPOND_INCLUDE_VALUES_AUTH_HEADER_NAME";
const TOKEN: &str = "MILLPOND_INCLUDE_VALUES_AUTH_TOKEN";
const ALLOW_HTTP_AUTH: &str = "MILLPOND_INCLUDE_VALUES_ALLOW_HTTP_AUTH";
const TOKEN_VALUE: &str = "k3y-for-the-allowlist";

fn opts<'a>(bs: &'a str, writer: &'a str, extra: Vec<(&'a str, String)>) -> IngestOpts<'a> {
    IngestOpts {
        bootstrap: bs,
        topic: TOPIC,
        table: "events",
        writer_addr: writer,
        replicas: 1,
        ordinal: 0,
        extra,
    }
}

/// The keep-filter (pin: team 1) and an authoritative source at `url`,
/// polled every second.
fn authoritative(url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("MILLPOND_FILTER_KEEP_FIELD_NAME", "team_id".into()),
        ("MILLPOND_FILTER_VALUES", "1".into()),
        (URL, url.into()),
        (MODE, "authoritative".into()),
        ("MILLPOND_INCLUDE_VALUES_POLL_INTERVAL_S", "1".into()),
        ("MILLPOND_INCLUDE_VALUES_REQUEST_TIMEOUT_S", "2".into()),
    ]
}

fn total_committed(bs: &str) -> i64 {
    committed(bs, "millpond-events-events", TOPIC, 1)
        .into_iter()
        .map(|o| o.unwrap_or(0))
        .sum()
}

/// consumed = written + dead letters + tombstones + filtered, on /metrics.
/// Records lost to retention were never consumed: they are not in it (see
/// `retention.rs` for the offsets they account for).
fn assert_conservation(ingest: &Ingest, w: &Writer) {
    let m = |name: &str, labels: &[(&str, &str)]| ingest.metric(name, labels);
    let consumed = m("millpond_records_consumed_total", &[]);
    let accounted = w.metric("millpond_records_written_total", &[])
        + w.metric("millpond_dead_letters_total", &[])
        + m("millpond_tombstones_total", &[])
        + m("millpond_records_skipped_total", &[]);
    assert_eq!(consumed, accounted, "conservation");
}

/// Runs ingest with `extra` only (no broker or writer is reached: config
/// comes first) and returns its output after it exits with status 2.
fn refused_config(extra: Vec<(&str, String)>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let o = opts("127.0.0.1:9", "http://127.0.0.1:9", extra);
    let mut ingest = Ingest::start(&o, dir.path());
    let status = ingest.proc.wait_exit(Duration::from_secs(30));
    let logs = ingest.proc.logs();
    assert_eq!(status.code(), Some(2), "{logs}");
    logs
}

/// Every problem of the matrix is reported in the one startup error, each
/// line naming its variable; the token is never echoed.
#[test]
fn a_misconfigured_dynamic_source_fails_startup_naming_every_variable() {
    // A URL without the keep-filter, a header without its token, a bad mode.
    let logs = refused_config(vec![
        (URL, "https://allow.internal/teams".into()),
        (MODE, "live".into()),
        (HEADER, "X-Allowlist-Key".into()),
    ]);
    assert!(logs.contains("3 configuration error(s)"), "{logs}");
    for line in [
        format!("{URL}: requires the keep-filter"),
        format!("{TOKEN}: is required with {HEADER}"),
        format!("{MODE}: must be shadow or authoritative"),
    ] {
        assert!(logs.contains(&line), "{line:?} missing:\n{logs}");
    }

    // A mode and auth variables without a URL: each one named.
    let logs = refused_config(vec![
        ("MILLPOND_FILTER_KEEP_FIELD_NAME", "team_id".into()),
        ("MILLPOND_FILTER_VALUES", "1".into()),
        (MODE, "authoritative".into()),
        (HEADER, "X-Allowlist-Key".into()),
        (TOKEN, TOKEN_VALUE.into()),
        (ALLOW_HTTP_AUTH, "true".into()),
    ]);
    assert!(logs.contains("4 configuration error(s)"), "{logs}");
    for var in [MODE, HEADER, TOKEN, ALLOW_HTTP_AUTH] {
        let line = format!("{var}: is set without {URL}");
        assert!(logs.contains(&line), "{line:?} missing:\n{logs}");
    }
    assert!(!logs.contains(TOKEN_VALUE), "{logs}");

    // A token without its header name.
    let mut extra = authoritative("https://allow.internal/teams");
    extra.push((TOKEN, TOKEN_VALUE.into()));
    let logs = refused_config(extra);
    assert!(logs.contains("1 configuration error(s)"), "{logs}");
    assert!(
        logs.contains(&format!("{HEADER}: is required with {TOKEN}")),
        "{logs}"
    );
    assert!(!logs.contains(TOKEN_VALUE), "{logs}");
}

/// Every poll carries the auth header. A 302 is not followed (the header
/// would go to another host): the poll fails, the last good set stays, and
/// the records are filtered by it.
#[test]
fn the_auth_header_is_sent_and_a_redirect_is_refused() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Lake::new(Backend::Embedded, "events");
    let endpoint = Endpoint::start(Reply::json("[0]"));
    // Where the redirect points: serving team 2 too, were it followed.
    let elsewhere = Endpoint::start(Reply::json("[0, 2]"));
    let w = Writer::start(&lake);
    let mut extra = authoritative(&endpoint.url("/allow.json"));
    extra.extend([
        (HEADER, "X-Allowlist-Key".into()),
        (TOKEN, TOKEN_VALUE.into()),
        (ALLOW_HTTP_AUTH, "true".into()),
    ]);
    let ingest = Ingest::start(&opts(&bs, &w.addr, extra), lake.dir.path());
    let m = |name: &str, labels: &[(&str, &str)]| ingest.metric(name, labels);
    eventually(Duration::from_secs(60), "two polls served", || {
        endpoint.seen().len() >= 2 && m("millpond_include_values_size", &[]) == 2.0
    });
    for seen in endpoint.seen() {
        assert_eq!(seen.path, "/allow.json");
        assert_eq!(
            seen.header("X-Allowlist-Key"),
            Some(TOKEN_VALUE),
            "{seen:?}"
        );
    }

    endpoint.set(Reply::redirect(&elsewhere.url("/allow.json")));
    let failed = m("millpond_include_values_poll_failures_total", &[]);
    let polls = endpoint.seen().len();
    eventually(
        Duration::from_secs(20),
        "two redirected polls failed",
        || m("millpond_include_values_poll_failures_total", &[]) >= failed + 2.0,
    );
    assert!(endpoint.seen().len() >= polls + 2);
    assert!(
        elsewhere.seen().is_empty(),
        "the redirect was followed: {:?}",
        elsewhere.seen()
    );
    assert_eq!(m("millpond_include_values_size", &[]), 2.0);
    assert_eq!(
        m(
            "millpond_include_values_changes_total",
            &[("action", "added")]
        ),
        1.0
    );

    // team_id = seq % 3: teams 0 and 1 pass, 2 (only behind the redirect)
    // does not.
    produce_events(&bs, TOPIC, 1, 0, 300);
    eventually(Duration::from_secs(60), "300 committed", || {
        total_committed(&bs) == 300
    });
    assert_eq!(w.metric("millpond_records_written_total", &[]), 200.0);
    assert_eq!(
        m(
            "millpond_records_skipped_total",
            &[("reason", "filter_excluded")]
        ),
        100.0
    );
    assert_conservation(&ingest, &w);
    let logs = ingest.proc.logs();
    assert!(logs.contains("HTTP 302"), "{logs}");
    assert!(!logs.contains(TOKEN_VALUE), "{logs}");
    ingest.stop();
    w.stop();
    assert_eq!(
        lake.column_text("count(*) FILTER (WHERE team_id = 2)"),
        vec![Some("0".into())]
    );
}

/// A first answer the safety rules refuse (text where the pins are
/// integers: `type_flip`) does not release an authoritative start: nothing
/// is consumed, ingest is not ready, and within the startup timeout it
/// fails naming the refusal. With a good answer later, the records are
/// filtered by the good set from the first one on.
#[test]
fn an_authoritative_start_waits_for_an_accepted_poll() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    produce_events(&bs, TOPIC, 1, 0, 300);
    let lake = Lake::new(Backend::Embedded, "events");
    let endpoint = Endpoint::start(Reply::json(r#"["0"]"#));
    let url = endpoint.url("/allow.json");

    // Only refused answers: the startup timeout ends it, naming why. (A
    // writer stand-in: this ingest never says it stopped.)
    let stand_in = SilentOnFlush::start();
    let mut extra = authoritative(&url);
    extra.push(("MILLPOND_INCLUDE_VALUES_STARTUP_TIMEOUT_S", "4".into()));
    let mut gave_up = Ingest::start(&opts(&bs, &stand_in.addr, extra), lake.dir.path());
    let status = gave_up.proc.wait_exit(Duration::from_secs(60));
    let logs = gave_up.proc.logs();
    assert_eq!(status.code(), Some(1), "{logs}");
    let exit_line = logs
        .lines()
        .find(|l| l.contains("exiting with failure"))
        .unwrap_or_else(|| panic!("no exit line:\n{logs}"));
    for words in [
        "no poll accepted within 4s",
        "MILLPOND_INCLUDE_VALUES_STARTUP_TIMEOUT_S",
        "refused by the safety rules (type_flip)",
    ] {
        assert!(exit_line.contains(words), "{words:?} missing: {exit_line}");
    }
    assert!(!logs.contains("consuming partitions"), "{logs}");
    assert_eq!(total_committed(&bs), 0);

    // Refused, then good.
    let w = Writer::start(&lake);
    let ingest = Ingest::start(&opts(&bs, &w.addr, authoritative(&url)), lake.dir.path());
    let m = |name: &str, labels: &[(&str, &str)]| ingest.metric(name, labels);
    eventually(Duration::from_secs(60), "three refused polls", || {
        m(
            "millpond_include_values_refused_total",
            &[("reason", "type_flip")],
        ) >= 3.0
    });
    assert_eq!(m("millpond_records_consumed_total", &[]), 0.0);
    assert_ne!(ingest.ready(), 200);
    assert_eq!(w.metric("millpond_records_written_total", &[]), 0.0);
    assert_eq!(
        m(
            "millpond_include_values_last_success_timestamp_seconds",
            &[]
        ),
        0.0
    );
    let logs = ingest.proc.logs();
    assert!(
        logs.contains("authoritative allowlist: no poll accepted yet"),
        "{logs}"
    );
    assert!(!logs.contains("consuming partitions"), "{logs}");

    endpoint.set(Reply::json("[0]"));
    eventually(Duration::from_secs(60), "300 committed", || {
        total_committed(&bs) == 300
    });
    // Pin 1 and the endpoint's 0 from the first record on: a start released
    // by the refused poll would have filtered by the pin alone (100).
    assert_eq!(m("millpond_records_consumed_total", &[]), 300.0);
    assert_eq!(w.metric("millpond_records_written_total", &[]), 200.0);
    assert_eq!(
        m(
            "millpond_records_skipped_total",
            &[("reason", "filter_excluded")]
        ),
        100.0
    );
    assert_conservation(&ingest, &w);
    ingest.stop();
    w.stop();
    assert_eq!(
        lake.column_text("string_agg(DISTINCT team_id::VARCHAR, ',' ORDER BY team_id::VARCHAR)"),
        vec![Some("0,1".into())]
    );
}
