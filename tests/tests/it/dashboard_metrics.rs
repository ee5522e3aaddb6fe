//! deploy/grafana/millpond.json against the real binaries: every metric a
//! panel or template query selects must be a series that ingest or a writer
//! exports, and every function it calls a PromQL one. The series come from
//! the binaries' /metrics after events went through them, so the counters
//! that carry labels exist: Kafka -> ingest -> writer -> embedded DuckLake
//! (good events, a tombstone, a record that is no JSON, a value under a
//! reserved and under an unsafe key), and a hoglake writer (the emulator and
//! moto S3) sent a flush twice (files, a commit answered from its receipt,
//! an orphaned upload).
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use millpond_proto::OffsetRange;
use millpond_tests::flight::{client, descriptor, put, rows, with_coordinates};
use millpond_tests::hoglake::Hoglake;
use millpond_tests::ingest::{eventually, Ingest, IngestOpts};
use millpond_tests::kafka::{committed, produce, produce_events};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::promql::references;
use millpond_tests::scrape::{metric, series_names};
use millpond_tests::writer::Writer;
use rdkafka::mocking::MockCluster;

const DASHBOARD: &str = "/../deploy/grafana/millpond.json";
const TOPIC: &str = "events";
const GROUP: &str = "millpond-events-events";

/// The PromQL of every panel target (panels inside rows included).
fn panel_expressions(list: &serde_json::Value, out: &mut Vec<String>) {
    for p in list.as_array().into_iter().flatten() {
        for t in p["targets"].as_array().into_iter().flatten() {
            out.extend(t["expr"].as_str().map(str::to_owned));
        }
        panel_expressions(&p["panels"], out);
    }
}

/// The selectors of the template variables' queries.
fn template_expressions(dashboard: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    for var in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if var["type"] != "query" {
            continue;
        }
        let query = var["query"]["query"].as_str().or(var["query"].as_str());
        for q in query.into_iter().chain(var["definition"].as_str()) {
            // label_values(<selector>, <label>): the label is no metric.
            let q = match q.strip_prefix("label_values(") {
                Some(inner) => inner
                    .trim_end_matches(')')
                    .rsplit_once(',')
                    .map_or("", |(sel, _)| sel)
                    .to_owned(),
                None => q.to_owned(),
            };
            out.push(q);
        }
    }
    out
}

/// The names `wanted` selects that `exported` lacks, each with a hint.
fn missing(wanted: &BTreeSet<String>, exported: &BTreeSet<String>) -> Vec<String> {
    wanted
        .iter()
        .filter(|name| !exported.contains(*name))
        .map(|name| {
            if exported.contains(&format!("{name}_bucket")) {
                format!("{name} (a histogram: select {name}_bucket, _sum or _count)")
            } else {
                name.clone()
            }
        })
        .collect()
}

fn r(p: i32, first: i64, last: i64) -> OffsetRange {
    OffsetRange::new(TOPIC, p, first, last)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_queries_is_exported() {
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(millpond_tests::manifest_path(DASHBOARD)).unwrap(),
    )
    .unwrap();
    let mut panels = Vec::new();
    panel_expressions(&dashboard["panels"], &mut panels);
    assert!(panels.len() > 20, "{panels:?}");
    let unfiltered: Vec<&String> = panels
        .iter()
        .filter(|e| !e.contains(r#"pipeline=~"$pipeline""#))
        .collect();
    assert!(
        unfiltered.is_empty(),
        "not filtered on $pipeline: {unfiltered:?}"
    );
    let templates = template_expressions(&dashboard);
    assert!(!templates.is_empty(), "the dashboard has a query variable");
    let mut wanted = BTreeSet::new();
    for e in panels.iter().chain(&templates) {
        let refs = references(e);
        assert!(
            refs.unknown_functions.is_empty(),
            "{e}: calls {:?}, no PromQL function",
            refs.unknown_functions
        );
        assert!(!refs.metrics.is_empty(), "{e}: selects no metric");
        wanted.extend(refs.metrics);
    }
    let foreign: Vec<&String> = wanted
        .iter()
        .filter(|m| !m.starts_with("millpond_"))
        .collect();
    assert!(foreign.is_empty(), "not Millpond metrics: {foreign:?}");
    let pipeline = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "pipeline")
        .expect("a `pipeline` template variable");
    assert_eq!(pipeline["type"], "query", "{pipeline}");

    // Kafka -> ingest -> writer -> DuckLake.
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 2, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Lake::new(Backend::Embedded, "events");
    produce_events(&bs, TOPIC, 2, 0, 200);
    let odd: Vec<(i32, Option<Vec<u8>>)> = vec![
        (0, None),
        (1, Some(b"{not json".to_vec())),
        (
            0,
            Some(br#"{"seq": 1000, "_inserted_at": "x", "utm-source": "y"}"#.to_vec()),
        ),
    ];
    produce(&bs, TOPIC, &odd);
    let w = Writer::start(&lake);
    let ingest = Ingest::start(
        &IngestOpts {
            bootstrap: &bs,
            topic: TOPIC,
            table: "events",
            writer_addr: &w.addr,
            replicas: 1,
            ordinal: 0,
            extra: vec![],
        },
        lake.dir.path(),
    );
    eventually(Duration::from_secs(60), "every offset committed", || {
        committed(&bs, GROUP, TOPIC, 2)
            .iter()
            .flatten()
            .sum::<i64>()
            == 203
    });

    // A hoglake writer: one flush, then the same flush again.
    let hog = Hoglake::start();
    let hw = Writer::start_env(&hog.writer_env(), hog.dir.path(), &[]);
    let mut c = client(&hw.addr).await;
    let flush = descriptor("f1", vec![r(0, 0, 9)], 10);
    for _ in 0..2 {
        put(&mut c, &flush, vec![with_coordinates(rows(0, 10), 0, 0)])
            .await
            .unwrap();
    }

    // librdkafka's statistics come every STATS_INTERVAL_MS: poll a while.
    let until = Instant::now() + Duration::from_secs(30);
    let (exported, absent) = loop {
        let mut exported = BTreeSet::new();
        for body in [ingest.metrics(), w.metrics(), hw.metrics()] {
            exported.extend(series_names(&body));
        }
        let absent = missing(&wanted, &exported);
        if absent.is_empty() || Instant::now() > until {
            break (exported, absent);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        absent.is_empty(),
        "the dashboard selects series no binary exports: {absent:?}\nexported: {exported:?}"
    );
    // The same comparison catches a misspelled name and a bare histogram.
    let typo: BTreeSet<String> = [
        "millpond_records_consumd_total",
        "millpond_flush_duration_seconds",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(
        missing(&typo, &exported),
        [
            "millpond_flush_duration_seconds (a histogram: select millpond_flush_duration_seconds_bucket, _sum or _count)",
            "millpond_records_consumd_total"
        ]
    );

    ingest.stop();
    w.stop();
    hw.stop();
}

/// Every series the original documents, with its labels (besides `pipeline`
/// and `broker_source`, which every series carries), and whether it belongs
/// to a hoglake pod only.
const ORIGINAL_SERIES: &[(&str, &[&str], bool)] = &[
    ("records_consumed_total", &["partition"], false),
    ("records_written_total", &[], false),
    ("batches_flushed_total", &["trigger"], false),
    ("records_skipped_total", &["reason"], false),
    ("filter_matched_total", &["value"], false),
    ("errors_total", &["type"], false),
    ("schema_columns_added_total", &[], false),
    ("schema_columns_widened_total", &[], false),
    ("sort_skipped_total", &["reason"], false),
    ("columns_coerced_total", &["target_type"], false),
    ("variant_companion_columns_dropped_total", &[], false),
    ("variant_write_fallback_total", &[], false),
    ("variant_values_coerced_total", &[], false),
    ("include_values_poll_failures_total", &[], false),
    ("include_values_refused_total", &["reason"], false),
    ("include_values_changes_total", &["action"], false),
    ("flush_duration_seconds_bucket", &["le"], false),
    ("arrow_conversion_seconds_bucket", &["le"], false),
    ("flush_size_bytes_bucket", &["le"], false),
    ("flush_size_records_bucket", &["le"], false),
    ("pending_bytes", &[], false),
    ("buffer_fullness", &[], false),
    ("consume_batch_size_current", &[], false),
    ("consumer_lag", &["partition"], false),
    ("last_committed_offset", &["partition"], false),
    ("include_values_size", &[], false),
    ("include_values_last_success_timestamp_seconds", &[], false),
    ("include_values_pending_removals", &[], false),
    ("include_values_mode", &["mode"], false),
    ("include_values_shadow_only_static", &[], false),
    ("include_values_shadow_only_remote", &[], false),
    ("include_values_pinned", &[], false),
    ("include_values_pinned_only", &[], false),
    ("rdkafka_replyq", &[], false),
    ("rdkafka_msg_cnt", &[], false),
    ("rdkafka_msg_size", &[], false),
    ("rdkafka_broker_rtt_avg_seconds", &["broker"], false),
    ("rdkafka_broker_rtt_p99_seconds", &["broker"], false),
    ("hoglake_files_written_total", &[], true),
    ("hoglake_commit_replays_total", &["outcome"], true),
    ("hoglake_orphaned_files_total", &["reason"], true),
    ("flush_files_bucket", &["le"], true),
    ("flush_file_rows_bucket", &["le"], true),
];

/// The label names of each sample line, by series name.
fn label_names(body: &str) -> Vec<(String, BTreeSet<String>)> {
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let name = l.split(['{', ' ']).next().unwrap_or_default().to_owned();
            let labels = match (l.find('{'), l.rfind('}')) {
                (Some(a), Some(b)) if a < b => l[a + 1..b]
                    .split(',')
                    .filter_map(|kv| kv.split_once("=\"").map(|(k, _)| k.trim().to_owned()))
                    .collect(),
                _ => BTreeSet::new(),
            };
            (name, labels)
        })
        .collect()
}

/// The documented series `body` lacks (or has without one of its labels):
/// those of every pod, or those of a hoglake pod only.
fn lacking(body: &str, hoglake: bool) -> Vec<String> {
    let samples = label_names(body);
    ORIGINAL_SERIES
        .iter()
        .filter(|(_, _, only_hoglake)| *only_hoglake == hoglake)
        .filter(|(name, labels, _)| {
            let full = format!("millpond_{name}");
            !samples.iter().any(|(n, have)| {
                *n == full
                    && ["pipeline", "broker_source"]
                        .iter()
                        .chain(labels.iter())
                        .all(|l| have.contains(*l))
            })
        })
        .map(|(name, labels, _)| format!("millpond_{name}{labels:?}"))
        .collect()
}

/// An HTTP endpoint on 127.0.0.1 answering every request with `body` (JSON).
fn serve_json(body: &'static str) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/allow.json", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

/// One scrape of ingest's port (the pod's main port, :8000 in a pod) shows
/// the whole pod: ingest's series and the writer's, every series the
/// original documents with its labels, each family declared once; with the
/// writer gone, the scrape still answers, with ingest's series and
/// `millpond_writer_metrics_up 0`. Both destinations: a DuckLake pod with
/// every stage on (allowlist with its dynamic source, coercion, sort) and a
/// hoglake pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pods_main_port_alone_shows_every_series_the_original_documents() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 2, 1).unwrap();
    cluster.create_topic("hog", 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    produce_events(&bs, TOPIC, 2, 0, 100);
    produce(&bs, TOPIC, &[(1, Some(b"{not json".to_vec()))]);
    produce_events(&bs, "hog", 1, 0, 20);

    // DuckLake: ingest -> writer, every stage configured.
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);
    let allow = serve_json("[0, 1, 2, 7]");
    let ingest = Ingest::start(
        &IngestOpts {
            bootstrap: &bs,
            topic: TOPIC,
            table: "events",
            writer_addr: &w.addr,
            replicas: 1,
            ordinal: 0,
            extra: vec![
                (
                    "MILLPOND_WRITER_METRICS_URL",
                    format!("http://127.0.0.1:{}/metrics", w.http_port),
                ),
                ("MILLPOND_FILTER_KEEP_FIELD_NAME", "team_id".into()),
                ("MILLPOND_FILTER_VALUES", "0,1".into()),
                ("MILLPOND_INCLUDE_VALUES_URL", allow),
                ("MILLPOND_INCLUDE_VALUES_POLL_INTERVAL_S", "1".into()),
                ("MILLPOND_TYPED_COLUMNS", "seq:double".into()),
                ("MILLPOND_SORT_BY", "no_such_field".into()),
            ],
        },
        lake.dir.path(),
    );
    eventually(Duration::from_secs(60), "every offset committed", || {
        committed(&bs, GROUP, TOPIC, 2)
            .iter()
            .flatten()
            .sum::<i64>()
            == 101
    });
    let until = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let body = ingest.metrics();
        if lacking(&body, false).is_empty() || Instant::now() > until {
            break body;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(lacking(&body, false), Vec::<String>::new(), "{body}");
    // The writer's series came through ingest's port, with their values.
    let one = |name: &str, labels: &[(&str, &str)]| metric(&body, name, labels).unwrap_or(-1.0);
    assert_eq!(one("millpond_writer_metrics_up", &[]), 1.0);
    let consumed: f64 = ["0", "1"]
        .iter()
        .map(|p| one("millpond_records_consumed_total", &[("partition", p)]))
        .sum();
    let written = one("millpond_records_written_total", &[]);
    assert_eq!(written, w.metric("millpond_records_written_total", &[]));
    let filtered: f64 = [
        "filter_excluded",
        "filter_field_missing",
        "filter_value_invalid",
    ]
    .iter()
    .map(|r| one("millpond_records_skipped_total", &[("reason", r)]))
    .sum();
    // Every reason's dead letters.
    let dead_letters: f64 = body
        .lines()
        .filter(|l| l.starts_with("millpond_dead_letters_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(consumed, 101.0);
    // team_id 2 is excluded by the static list (shadow mode observes the
    // endpoint only); the record that is no JSON is a dead letter.
    // Conservation, read from the one scrape.
    assert_eq!(filtered, 33.0, "{body}");
    assert_eq!(dead_letters, 1.0, "{body}");
    assert_eq!(consumed, written + dead_letters + filtered, "{body}");
    let mut declared = BTreeSet::new();
    for line in body.lines().filter(|l| l.starts_with("# TYPE ")) {
        let name = line.split_whitespace().nth(2).unwrap().to_owned();
        assert!(declared.insert(name.clone()), "{name} declared twice");
    }

    // The writer gone (killed): the scrape answers at once with ingest's
    // series.
    let mut w = w;
    w.proc.kill9();
    let started = Instant::now();
    let alone = ingest.metrics();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(metric(&alone, "millpond_writer_metrics_up", &[]), Some(0.0));
    assert!(metric(&alone, "millpond_records_written_total", &[]).is_none());
    assert!(metric(
        &alone,
        "millpond_records_consumed_total",
        &[("partition", "0")]
    )
    .is_some());
    ingest.stop();

    // Hoglake: ingest -> a hoglake writer; one flush resent by hand makes
    // an orphaned upload, so every hoglake series has a sample.
    let hog = Hoglake::start();
    let hw = Writer::start_env(&hog.writer_env(), hog.dir.path(), &[]);
    let hog_ingest = Ingest::start(
        &IngestOpts {
            bootstrap: &bs,
            topic: "hog",
            table: "events",
            writer_addr: &hw.addr,
            replicas: 1,
            ordinal: 0,
            extra: vec![
                (
                    "MILLPOND_WRITER_METRICS_URL",
                    format!("http://127.0.0.1:{}/metrics", hw.http_port),
                ),
                ("MILLPOND_DESTINATION", "hoglake".into()),
                ("HOGLAKE_TABLE", "events".into()),
                // Holds the test hoglake writer's whole-write budget.
                ("MILLPOND_WRITER_SEND_DEADLINE_S", "420".into()),
            ],
        },
        hog.dir.path(),
    );
    eventually(Duration::from_secs(60), "hoglake offsets committed", || {
        committed(&bs, "millpond-hoglake-hog-events", "hog", 1)
            .iter()
            .flatten()
            .sum::<i64>()
            == 20
    });
    let mut c = client(&hw.addr).await;
    let flush = descriptor("by-hand", vec![OffsetRange::new("other", 0, 0, 9)], 10);
    for _ in 0..2 {
        put(&mut c, &flush, vec![with_coordinates(rows(0, 10), 0, 0)])
            .await
            .unwrap();
    }
    let body = hog_ingest.metrics();
    assert_eq!(lacking(&body, true), Vec::<String>::new(), "{body}");
    assert_eq!(
        metric(&body, "millpond_records_written_total", &[]),
        Some(30.0)
    );
    hog_ingest.stop();
    hw.stop();
}
