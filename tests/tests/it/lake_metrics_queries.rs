//! `millpond-lake metrics` with DUCKLAKE_METRICS_CONFIG's queries, against
//! a real lake: a good query's gauge with a label from a column, a query
//! that fails at each read (counted, its gauge left out), queries refused
//! at startup, and the exporter's /healthz failing after failed reads of a
//! catalog made unreadable, then mending once it reads again.
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use millpond_proto::OffsetRange;
use millpond_tests::flight::{client, descriptor, put, rows};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::lake_cli::lake_cli_with;
use millpond_tests::process::{free_port, Proc};
use millpond_tests::scrape::{get, metric, metrics};
use millpond_tests::writer::Writer;
use millpond_writer::lake_api::EmbeddedFormat;

/// `events` (one flush by the real writer) and `kinds`: a 2, b 5.
async fn lake_with_kinds(backend: Backend) -> Lake {
    let lake = Lake::new(backend, "events");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let r = OffsetRange::new("events", 0, 0, 9);
    put(&mut c, &descriptor("f1", vec![r], 10), vec![rows(0, 10)])
        .await
        .unwrap();
    writer.stop();
    lake.execute(
        "CREATE TABLE lake.main.kinds AS SELECT * FROM (VALUES ('a', 1), ('a', 1), ('b', 5)) t(kind, n)",
    );
    lake
}

/// `kind_total{kind}` (good), and `broken`: its value column is a DOUBLE
/// to DuckDB's binder, but no row's text is a number.
const QUERIES: &str = r#"
[[query]]
name = "kind_total"
help = "Sum of n by kind"
sql = "SELECT kind, sum(n) AS total FROM lake.main.kinds GROUP BY kind;"
value = "total"
labels = ["kind"]

[[query]]
name = "broken"
sql = "SELECT kind, CAST(kind AS DOUBLE) AS v FROM lake.main.kinds"
value = "v"
labels = ["kind"]
"#;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path: PathBuf = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn value(body: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    metric(body, name, labels).unwrap_or_else(|| panic!("{name} {labels:?} missing from:\n{body}"))
}

/// Renames a catalog table (SQLite file or Postgres), outside DuckDB.
fn rename_catalog_table(lake: &Lake, from: &str, to: &str) {
    let sql = format!("ALTER TABLE {from} RENAME TO {to}");
    match lake.backend {
        Backend::PostgresS3 => {
            lake.catalog_psql(&sql);
        }
        _ => {
            let dir = PathBuf::from(lake.env_value("MILLPOND_LAKE_DIR").unwrap());
            let file = dir.join(EmbeddedFormat::Sqlite.default_file());
            let out = std::process::Command::new("sqlite3")
                .args(["-cmd", ".timeout 10000"])
                .arg(&file)
                .arg(&sql)
                .output()
                .expect("run sqlite3");
            assert!(out.status.success(), "{sql}: {out:?}");
        }
    }
}

fn wait_for(what: &str, exporter: &mut Proc, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(90);
    while !done() {
        assert!(
            exporter.is_running(),
            "exporter exited: {}",
            exporter.logs()
        );
        assert!(Instant::now() < until, "{what}: {}", exporter.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
}

async fn queries_become_gauges_and_failed_reads_fail_health(backend: Backend) {
    let lake = lake_with_kinds(backend).await;
    let config = write(lake.dir.path(), "queries.toml", QUERIES);
    let env = [("DUCKLAKE_METRICS_CONFIG", config.as_str())];

    // One read: the good query's series, the bad one counted and left out.
    let run = lake_cli_with(&lake, &env, &["metrics", "--once"]);
    assert_eq!(run.code, Some(0), "a failed query fails no run: {run:#?}");
    let body = &run.stdout;
    let kind = |k| [("kind", k)];
    assert_eq!(value(body, "millpond_lake_kind_total", &kind("a")), 2.0);
    assert_eq!(value(body, "millpond_lake_kind_total", &kind("b")), 5.0);
    assert!(
        body.contains("# HELP millpond_lake_kind_total Sum of n by kind"),
        "{body}"
    );
    let errors = |body: &str, q| value(body, "millpond_lake_query_errors_total", &[("query", q)]);
    assert_eq!(errors(body, "broken"), 1.0);
    assert_eq!(errors(body, "kind_total"), 0.0);
    assert_eq!(metric(body, "millpond_lake_broken", &[]), None, "{body}");
    assert_eq!(value(body, "millpond_lake_up", &[]), 1.0);
    // The log (on stdout, before the exposition) names the query.
    assert!(
        format!("{}{}", run.stdout, run.stderr).contains("query=broken"),
        "the failure is logged: {run:#?}"
    );

    // Queries that cannot run on this catalog: refused before any read,
    // each named with the variable.
    let refused = write(
        lake.dir.path(),
        "refused.toml",
        r#"
[[query]]
name = "no_sql"
sql = "SELEC 1 AS v"
value = "v"

[[query]]
name = "no_column"
sql = "SELECT count(*) AS n FROM lake.main.kinds"
value = "total"

[[query]]
name = "text_value"
sql = "SELECT kind FROM lake.main.kinds"
value = "kind"
"#,
    );
    let run = lake_cli_with(
        &lake,
        &[("DUCKLAKE_METRICS_CONFIG", refused.as_str())],
        &["metrics", "--once"],
    );
    assert_eq!(run.code, Some(1), "{run:#?}");
    assert!(run.stdout.is_empty(), "nothing exported: {run:#?}");
    for q in ["no_sql", "no_column", "text_value"] {
        assert!(
            run.stderr
                .contains(&format!("DUCKLAKE_METRICS_CONFIG: query `{q}`")),
            "{q}: {run:#?}"
        );
    }
    assert!(run.stderr.contains("is VARCHAR, not a number"), "{run:#?}");
    // A file that is no TOML: a configuration error (exit 2).
    let junk = write(lake.dir.path(), "junk.toml", "[[query]\nname =");
    let run = lake_cli_with(
        &lake,
        &[("DUCKLAKE_METRICS_CONFIG", junk.as_str())],
        &["metrics", "--once"],
    );
    assert_eq!(run.code, Some(2), "{run:#?}");
    assert!(run.stderr.contains("DUCKLAKE_METRICS_CONFIG"), "{run:#?}");

    // The exporter refuses them too, and exits.
    let port = free_port();
    let mut base = lake.env.clone();
    for (k, v) in [
        ("DUCKLAKE_METRICS_PORT", port.to_string()),
        ("MILLPOND_HTTP_HOST", "127.0.0.1".into()),
        ("DUCKLAKE_METRICS_INTERVAL_S", "1".into()),
        ("DUCKLAKE_METRICS_MAX_FAILED_READS", "2".into()),
    ] {
        base.push((k.into(), v));
    }
    let mut with_refused = base.clone();
    with_refused.push(("DUCKLAKE_METRICS_CONFIG".into(), refused.clone()));
    let mut exporter = Proc::spawn_args(
        "millpond-lake",
        &["metrics"],
        &with_refused,
        lake.dir.path(),
    );
    let status = exporter.wait_exit(Duration::from_secs(60));
    assert!(!status.success(), "{}", exporter.logs());
    assert!(
        exporter
            .logs()
            .contains("DUCKLAKE_METRICS_CONFIG: query `no_sql`"),
        "{}",
        exporter.logs()
    );

    // The exporter: the counter moves at each read.
    let mut env = base.clone();
    env.push(("DUCKLAKE_METRICS_CONFIG".into(), config.clone()));
    let mut exporter = Proc::spawn_args("millpond-lake", &["metrics"], &env, lake.dir.path());
    let health = format!("http://127.0.0.1:{port}/healthz");
    let ready = format!("http://127.0.0.1:{port}/readyz");
    wait_for("ready", &mut exporter, || {
        get(&ready).is_ok_and(|r| r.0 == 200)
    });
    let body = metrics(port);
    assert_eq!(value(&body, "millpond_lake_kind_total", &kind("b")), 5.0);
    let first = errors(&body, "broken");
    assert!(first >= 1.0, "{body}");
    wait_for("the failures counted", &mut exporter, || {
        metric(
            &metrics(port),
            "millpond_lake_query_errors_total",
            &[("query", "broken")],
        )
        .is_some_and(|n| n >= first + 2.0)
    });
    assert_eq!(get(&health).unwrap().0, 200, "failed queries keep it live");

    // The catalog unreadable: /healthz fails after 2 failed reads in a row,
    // naming the failure; the queries' gauges are gone.
    let table = "ducklake_files_scheduled_for_deletion";
    rename_catalog_table(&lake, table, "millpond_test_away");
    wait_for("/healthz 503", &mut exporter, || {
        get(&health).is_ok_and(|r| r.0 == 503)
    });
    let (_, why) = get(&health).unwrap();
    assert!(why.contains("reads of the catalog failed"), "{why}");
    let body = metrics(port);
    assert_eq!(value(&body, "millpond_lake_up", &[]), 0.0);
    assert!(value(&body, "millpond_lake_consecutive_collect_errors", &[]) >= 2.0);
    assert!(value(&body, "millpond_lake_collect_errors_total", &[]) >= 2.0);
    assert_eq!(
        metric(&body, "millpond_lake_kind_total", &[]),
        None,
        "no stale query series: {body}"
    );

    // Readable again: a read succeeds, and all is well.
    rename_catalog_table(&lake, "millpond_test_away", table);
    wait_for("/healthz 200", &mut exporter, || {
        get(&health).is_ok_and(|r| r.0 == 200)
    });
    wait_for("a read", &mut exporter, || {
        metric(&metrics(port), "millpond_lake_up", &[]) == Some(1.0)
    });
    let body = metrics(port);
    assert_eq!(
        value(&body, "millpond_lake_consecutive_collect_errors", &[]),
        0.0
    );
    assert_eq!(value(&body, "millpond_lake_kind_total", &kind("a")), 2.0);
    exporter.signal("TERM");
    let status = exporter.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status}: {}", exporter.logs());
}

mod embedded {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queries_become_gauges_and_failed_reads_fail_health() {
        super::queries_become_gauges_and_failed_reads_fail_health(super::Backend::Embedded).await
    }
}

mod postgres_s3 {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queries_become_gauges_and_failed_reads_fail_health() {
        super::queries_become_gauges_and_failed_reads_fail_health(super::Backend::PostgresS3).await
    }
}
