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
use millpond_tests::scrape::series_names;
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
