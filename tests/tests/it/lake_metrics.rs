//! `millpond-lake metrics` against lakes with known contents, filled by
//! the real writer: pushed once to a local receiver, then served by the
//! long-running exporter after a compaction changed the lake; and the
//! catalog-wide gauges (size bands, partitions, version, settings, tables,
//! inlined-row tables, the deletion queue) on a lake shaped for them.
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use millpond_proto::{DeadLetter, OffsetRange};
use millpond_tests::flight::{client, descriptor, noise, put, rows};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::lake_cli::{lake_cli, lake_cli_with, Receiver};
use millpond_tests::process::{free_port, Proc};
use millpond_tests::scrape::{get, metric, metrics, samples};
use millpond_tests::writer::Writer;

fn record_dead_letter(partition: i32, offset: i64, reason: &str) -> DeadLetter {
    DeadLetter {
        topic: "events".into(),
        partition,
        offset,
        reason: reason.into(),
        original: b"{not json".to_vec(),
        ..Default::default()
    }
}

/// events: three flushes of 20 rows (Parquet files) and one of 5 (inlined
/// in the catalog); recorded offsets p0 0..39 and p1 0..24; dead letters 2
/// invalid_json and 1 not_an_object.
async fn known_lake(backend: Backend) -> Lake {
    let lake = Lake::new(backend, "events");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let r = |p, a, b| OffsetRange::new("events", p, a, b);
    let mut first = descriptor("f1", vec![r(0, 0, 19)], 20);
    first.dead_letters = vec![
        record_dead_letter(0, 3, "invalid_json"),
        record_dead_letter(0, 4, "invalid_json"),
        record_dead_letter(0, 5, "not_an_object"),
    ];
    put(&mut c, &first, vec![rows(0, 20)]).await.unwrap();
    put(
        &mut c,
        &descriptor("f2", vec![r(1, 0, 19)], 20),
        vec![rows(20, 20)],
    )
    .await
    .unwrap();
    put(
        &mut c,
        &descriptor("f3", vec![r(0, 20, 39)], 20),
        vec![rows(40, 20)],
    )
    .await
    .unwrap();
    put(
        &mut c,
        &descriptor("f4", vec![r(1, 20, 24)], 5),
        vec![rows(60, 5)],
    )
    .await
    .unwrap();
    writer.stop();
    lake
}

fn value(body: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    metric(body, name, labels).unwrap_or_else(|| panic!("{name} {labels:?} missing from:\n{body}"))
}

const EVENTS: (&str, &str) = ("table", "main.events");

async fn metrics_describe_a_known_lake(backend: Backend) {
    let lake = known_lake(backend).await;
    let bytes: f64 = lake
        .query("SELECT sum(data_file_size_bytes) FROM ducklake_list_files('lake', 'events')")[0]
        .parse()
        .unwrap();
    let snapshots: f64 = lake.query("SELECT count(*) FROM ducklake_snapshots('lake')")[0]
        .parse()
        .unwrap();

    let receiver = Receiver::start(200);
    let push = format!("{}/metrics/job/millpond_lake", receiver.url);
    let env = [
        ("DUCKLAKE_METRICS_PUSH_URL", push.as_str()),
        ("BROKER_SOURCE", "test"),
    ];
    lake_cli_with(&lake, &env, &["metrics", "--once"]).ok();
    let got = receiver.next();
    assert_eq!(
        (got.method.as_str(), got.path.as_str()),
        ("POST", "/metrics/job/millpond_lake")
    );
    assert!(got.content_type.starts_with("text/plain"), "{got:?}");
    let body = &got.body;
    eprintln!("pushed exposition ({backend:?}):\n{body}");
    let base = body
        .lines()
        .find(|l| l.starts_with("millpond_lake_rows{"))
        .unwrap();
    assert!(
        base.contains(r#"pipeline="events""#) && base.contains(r#"broker_source="test""#),
        "{base}"
    );
    assert_eq!(value(body, "millpond_lake_up", &[]), 1.0);
    assert_eq!(value(body, "millpond_lake_data_files", &[EVENTS]), 3.0);
    assert_eq!(value(body, "millpond_lake_small_files", &[EVENTS]), 3.0);
    assert_eq!(value(body, "millpond_lake_data_bytes", &[EVENTS]), bytes);
    assert_eq!(value(body, "millpond_lake_rows", &[EVENTS]), 65.0);
    assert_eq!(value(body, "millpond_lake_inlined_rows", &[EVENTS]), 5.0);
    assert_eq!(value(body, "millpond_lake_delete_files", &[EVENTS]), 0.0);
    assert_eq!(value(body, "millpond_lake_snapshots", &[]), snapshots);
    let oldest = value(body, "millpond_lake_oldest_snapshot_age_seconds", &[]);
    assert!(oldest > 0.0 && oldest < 600.0, "{oldest}");
    assert_eq!(
        value(body, "millpond_lake_files_scheduled_for_deletion", &[]),
        0.0
    );
    let offset = |p: &str| {
        value(
            body,
            "millpond_lake_recorded_offset",
            &[EVENTS, ("topic", "events"), ("partition", p)],
        )
    };
    assert_eq!((offset("0"), offset("1")), (39.0, 24.0));
    let dead = |reason: &str| {
        value(
            body,
            "millpond_lake_dead_letters",
            &[EVENTS, ("reason", reason)],
        )
    };
    assert_eq!((dead("invalid_json"), dead("not_an_object")), (2.0, 1.0));
    assert_eq!(
        metric(body, "millpond_lake_dead_letters", &[]),
        Some(3.0),
        "no other reasons, and the dead-letter table is no table of its own here"
    );

    // A catalog that cannot be reached: the read fails, and counts.
    if backend == Backend::PostgresS3 {
        let closed = free_port().to_string();
        let run = lake_cli_with(
            &lake,
            &[("DUCKLAKE_RDS_PORT", closed.as_str())],
            &["metrics", "--once"],
        );
        assert_eq!(run.code, Some(1), "{run:#?}");
        assert_eq!(value(&run.stdout, "millpond_lake_up", &[]), 0.0);
        assert_eq!(
            value(&run.stdout, "millpond_lake_collect_errors_total", &[]),
            1.0,
            "a catalog that cannot be opened is a failed read"
        );
    }

    // A receiver that refuses the push fails the run.
    let refusing = Receiver::start(500);
    let env = [("DUCKLAKE_METRICS_PUSH_URL", refusing.url.as_str())];
    let run = lake_cli_with(&lake, &env, &["metrics", "--once"]);
    assert_eq!(run.code, Some(1), "{run:#?}");
    assert!(run.stderr.contains("HTTP 500"), "{run:#?}");

    // The exporter, after a compaction: 3 files merged into 1 and
    // scheduled for deletion, the same rows.
    lake_cli(&lake, &["compact", "--yes", "--table", "events"]).ok();
    let port = free_port();
    let mut env = lake.env.clone();
    for (k, v) in [
        ("DUCKLAKE_METRICS_PORT", port.to_string()),
        ("MILLPOND_HTTP_HOST", "127.0.0.1".into()),
        ("DUCKLAKE_METRICS_INTERVAL_S", "1".into()),
    ] {
        env.push((k.into(), v));
    }
    let mut exporter = Proc::spawn_args("millpond-lake", &["metrics"], &env, lake.dir.path());
    let ready = format!("http://127.0.0.1:{port}/readyz");
    let until = Instant::now() + Duration::from_secs(60);
    while !get(&ready).is_ok_and(|r| r.0 == 200) {
        assert!(
            exporter.is_running(),
            "exporter exited: {}",
            exporter.logs()
        );
        assert!(Instant::now() < until, "not ready: {}", exporter.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
    let body = metrics(port);
    assert_eq!(value(&body, "millpond_lake_data_files", &[EVENTS]), 1.0);
    assert_eq!(
        value(&body, "millpond_lake_files_scheduled_for_deletion", &[]),
        3.0
    );
    assert_eq!(value(&body, "millpond_lake_rows", &[EVENTS]), 65.0);
    assert_eq!(value(&body, "millpond_lake_up", &[]), 1.0);
    exporter.signal("TERM");
    let status = exporter.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status}: {}", exporter.logs());
}

const META: &str = "__ducklake_metadata_lake";

/// `n` rows {id: start.., name: 1,000 characters that barely compress}.
fn noisy_rows(start: i64, n: usize) -> RecordBatch {
    let ids: Vec<i64> = (start..start + n as i64).collect();
    let names: Vec<String> = ids.iter().map(|&i| noise(i)).collect();
    RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ])),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(names)),
        ],
    )
    .unwrap()
}

/// `rows(start, kinds.len())` plus a `kind` column.
fn kind_rows(start: i64, kinds: &[Option<String>]) -> RecordBatch {
    let base = rows(start, kinds.len());
    let mut fields: Vec<Field> = base
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("kind", DataType::Utf8, true));
    let mut columns = base.columns().to_vec();
    columns.push(Arc::new(StringArray::from(kinds.to_vec())));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

/// `events`, unpartitioned: two small files, one of ~2 MB, one of ~16 MB
/// (size bands tier1, tier1, tier2, tier3; 18,040 rows). `clicks`,
/// partitioned by kind: 22 partitions k00..k21 of one file each, then two
/// more files in k00 and in k01, and one in the NULL partition.
async fn shaped_lake(backend: Backend) -> Lake {
    let lake = Lake::new(backend, "events");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let r = |a, b| OffsetRange::new("events", 0, a, b);
    let flushes = [
        rows(0, 20),
        rows(20, 20),
        noisy_rows(1000, 2000),
        noisy_rows(10000, 16000),
    ];
    let mut next = 0;
    for (i, batch) in flushes.into_iter().enumerate() {
        let n = batch.num_rows();
        let d = descriptor(&format!("e{i}"), vec![r(next, next + n as i64 - 1)], n);
        put(&mut c, &d, vec![batch]).await.unwrap();
        next += n as i64;
    }
    writer.stop();

    let writer = Writer::start_with(
        &lake,
        &[
            ("DUCKLAKE_TABLE", "clicks"),
            ("DUCKLAKE_PARTITION_BY", "kind"),
        ],
    );
    let mut c = client(&writer.addr).await;
    let kind = |k: usize| Some(format!("k{k:02}"));
    let flushes: [Vec<Option<String>>; 3] = [
        (0..44).map(|i| kind(i % 22)).collect(),
        (0..20).map(|i| kind(i % 2)).collect(),
        (0..21)
            .map(|i| if i % 3 == 2 { None } else { kind(i % 3) })
            .collect(),
    ];
    let mut next = 0;
    for (i, kinds) in flushes.iter().enumerate() {
        let n = kinds.len();
        let range = OffsetRange::new("clicks", 0, next, next + n as i64 - 1);
        let d = descriptor(&format!("c{i}"), vec![range], n);
        put(&mut c, &d, vec![kind_rows(next, kinds)]).await.unwrap();
        next += n as i64;
    }
    writer.stop();
    lake
}

fn once(lake: &Lake) -> String {
    let body = lake_cli(lake, &["metrics", "--once"]).ok().to_owned();
    eprintln!("exposition:\n{body}");
    body
}

fn one(lake: &Lake, sql: &str) -> f64 {
    let rows = lake.query(sql);
    assert_eq!(rows.len(), 1, "{sql}: {rows:?}");
    rows[0]
        .parse()
        .unwrap_or_else(|_| panic!("{sql}: {rows:?}"))
}

const CLICKS: (&str, &str) = ("table", "main.clicks");

async fn catalog_gauges_describe_a_shaped_lake(backend: Backend) {
    let lake = shaped_lake(backend).await;
    lake.execute("CALL lake.set_option('expire_older_than', '7 days')");
    lake.execute("CALL lake.set_option('auto_compact', false, table_name => 'clicks')");
    let body = once(&lake);
    let g = |name: &str, labels: &[(&str, &str)]| value(&body, name, labels);

    // Size bands, against the sizes the catalog lists for each file.
    let sizes: Vec<f64> = lake
        .query("SELECT data_file_size_bytes FROM ducklake_list_files('lake', 'events')")
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    let mib = f64::from(1 << 20);
    let bands = [
        ("tier1", 0.0, mib),
        ("tier2", mib, 10.0 * mib),
        ("tier3", 10.0 * mib, 64.0 * mib),
        ("large", 64.0 * mib, f64::INFINITY),
    ];
    let mut files_in = Vec::new();
    for (band, lo, hi) in bands {
        let inside: Vec<f64> = sizes
            .iter()
            .copied()
            .filter(|s| *s >= lo && *s < hi)
            .collect();
        let l = [EVENTS, ("band", band)];
        assert_eq!(
            g("millpond_lake_files_per_band", &l),
            inside.len() as f64,
            "{band}"
        );
        assert_eq!(
            g("millpond_lake_bytes_per_band", &l),
            inside.iter().sum::<f64>(),
            "{band}"
        );
        files_in.push(inside.len());
    }
    assert_eq!(
        files_in,
        [2, 1, 1, 0],
        "the lake's files reach the bands meant: {sizes:?}"
    );
    let clicks_files = g("millpond_lake_data_files", &[CLICKS]);
    assert_eq!(clicks_files, 27.0);
    assert_eq!(
        g("millpond_lake_files_per_band", &[CLICKS, ("band", "tier1")]),
        27.0
    );
    assert_eq!(g("millpond_lake_files_per_band", &[CLICKS]), clicks_files);

    // The 20 partitions with the most files: events' unpartitioned files,
    // k00 and k01 (3 each), then one-file partitions in order of table and
    // values; k21 comes last of all.
    let parts: Vec<(String, String, f64)> = samples(&body, "millpond_lake_partition_files")
        .into_iter()
        .map(|(l, v)| (l["table"].clone(), l["partition"].clone(), v))
        .collect();
    assert_eq!(parts.len(), 20, "{parts:?}");
    let count = |t: &str, p: &str| parts.iter().find(|x| x.0 == t && x.1 == p).map(|x| x.2);
    assert_eq!(count("main.events", "<none>"), Some(4.0));
    assert_eq!(count("main.clicks", "k00"), Some(3.0));
    assert_eq!(count("main.clicks", "k01"), Some(3.0));
    let mut ones: Vec<String> = (2..22).map(|k| format!("k{k:02}")).collect();
    ones.push("__HIVE_DEFAULT_PARTITION__".into());
    ones.sort();
    let reported: Vec<String> = parts
        .iter()
        .filter(|x| x.0 == "main.clicks" && x.2 == 1.0)
        .map(|x| x.1.clone())
        .collect();
    assert!(
        !reported.is_empty() && reported.len() < ones.len(),
        "{parts:?}"
    );
    assert_eq!(reported, ones[..reported.len()], "ties in order of values");
    assert_eq!(count("main.clicks", "k21"), None);

    // The catalog's version and settings.
    assert_eq!(
        lake.query(&format!(
            "SELECT value FROM {META}.ducklake_metadata WHERE key = 'version'"
        )),
        ["1.0"]
    );
    assert_eq!(
        g("millpond_lake_catalog_format_version", &[("suffix", "")]),
        1.0
    );
    let setting = |key: &str, scope: &str, id: &str| {
        metric(
            &body,
            "millpond_lake_config_value",
            &[("key", key), ("scope", scope), ("scope_id", id)],
        )
    };
    assert_eq!(setting("expire_older_than", "", ""), Some(604800.0));
    assert_eq!(setting("encrypted", "", ""), Some(0.0), "a boolean");
    let table_id = |name: &str| {
        lake.query(&format!(
            "SELECT table_id FROM {META}.ducklake_table WHERE table_name = '{name}' AND end_snapshot IS NULL"
        ))
    };
    assert_eq!(
        setting("auto_compact", "table", &table_id("clicks")[0]),
        Some(0.0)
    );
    let events_id = table_id("events");
    assert_eq!(
        setting("parquet_row_group_size_bytes", "table", &events_id[0]),
        Some(16e6),
        "the writer's DUCKLAKE_ROW_GROUP_BYTES (16MB)"
    );
    assert_eq!(setting("data_path", "", ""), None, "text is no number");

    // Snapshots, tables, inlined-row tables and the deletion queue.
    let snaps = "FROM ducklake_snapshots('lake')";
    assert_eq!(
        g("millpond_lake_oldest_snapshot_id", &[]),
        one(&lake, &format!("SELECT min(snapshot_id) {snaps}"))
    );
    assert_eq!(
        g("millpond_lake_newest_snapshot_id", &[]),
        one(&lake, &format!("SELECT max(snapshot_id) {snaps}"))
    );
    let live = one(
        &lake,
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = 'lake'",
    );
    assert_eq!(g("millpond_lake_tables", &[("state", "live")]), live);
    let dropped = g("millpond_lake_tables", &[("state", "dropped")]);
    let inlined = g("millpond_lake_inlined_data_tables", &[]);
    assert_eq!(
        inlined,
        one(
            &lake,
            &format!("SELECT count(*) FROM {META}.ducklake_inlined_data_tables")
        )
    );
    assert!(inlined > 0.0, "the offsets are inlined");
    assert_eq!(g("millpond_lake_unreachable_inlined_data_tables", &[]), 0.0);
    assert_eq!(g("millpond_lake_delete_files", &[EVENTS]), 0.0);
    assert_eq!(g("millpond_lake_delete_bytes", &[EVENTS]), 0.0);

    // A table made and dropped, 100 rows deleted from the 2 MB file (a
    // delete file), and an inlined-row table whose table never existed.
    lake.execute("CREATE TABLE lake.main.scratch (a INTEGER)");
    lake.execute("DROP TABLE lake.main.scratch");
    lake.execute("DELETE FROM lake.main.events WHERE id BETWEEN 1000 AND 1099");
    lake.execute(&format!(
        "INSERT INTO {META}.ducklake_inlined_data_tables VALUES (999999, 'ducklake_inlined_data_999999_1', 1)"
    ));
    let body = once(&lake);
    let g = |name: &str, labels: &[(&str, &str)]| value(&body, name, labels);
    assert_eq!(g("millpond_lake_tables", &[("state", "live")]), live);
    assert_eq!(
        g("millpond_lake_tables", &[("state", "dropped")]),
        dropped + 1.0
    );
    // The new table has one of its own too.
    assert_eq!(
        g("millpond_lake_inlined_data_tables", &[]),
        one(
            &lake,
            &format!("SELECT count(*) FROM {META}.ducklake_inlined_data_tables")
        )
    );
    assert!(g("millpond_lake_inlined_data_tables", &[]) > inlined);
    assert_eq!(g("millpond_lake_unreachable_inlined_data_tables", &[]), 1.0);
    assert_eq!(g("millpond_lake_delete_files", &[EVENTS]), 1.0);
    let delete_bytes = one(
        &lake,
        "SELECT sum(delete_file_size_bytes) FROM ducklake_list_files('lake', 'events')",
    );
    assert!(delete_bytes > 0.0);
    assert_eq!(g("millpond_lake_delete_bytes", &[EVENTS]), delete_bytes);
    assert_eq!(g("millpond_lake_rows", &[EVENTS]), 18040.0 - 100.0);

    // Compaction schedules files for deletion; a second row for one of
    // their paths is a duplicate in the queue.
    lake_cli(&lake, &["compact", "--yes", "--table", "events"]).ok();
    let scheduled = value(
        &once(&lake),
        "millpond_lake_files_scheduled_for_deletion",
        &[],
    );
    assert!(scheduled >= 1.0, "compaction scheduled files");
    lake.execute(&format!(
        "INSERT INTO {META}.ducklake_files_scheduled_for_deletion \
         SELECT * FROM {META}.ducklake_files_scheduled_for_deletion LIMIT 1"
    ));
    let body = once(&lake);
    assert_eq!(
        value(&body, "millpond_lake_files_scheduled_for_deletion", &[]),
        scheduled + 1.0
    );
    assert_eq!(
        value(
            &body,
            "millpond_lake_files_scheduled_for_deletion_duplicates",
            &[]
        ),
        1.0
    );
}

mod embedded {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn metrics_describe_a_known_lake() {
        super::metrics_describe_a_known_lake(super::Backend::Embedded).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn catalog_gauges_describe_a_shaped_lake() {
        super::catalog_gauges_describe_a_shaped_lake(super::Backend::Embedded).await
    }
}

mod postgres_s3 {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn metrics_describe_a_known_lake() {
        super::metrics_describe_a_known_lake(super::Backend::PostgresS3).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn catalog_gauges_describe_a_shaped_lake() {
        super::catalog_gauges_describe_a_shaped_lake(super::Backend::PostgresS3).await
    }
}
